"""Markdown pieces shared by the bench tables: rows, cells with n/a, median (min-max), the footer."""
import os


def row(cells):
    """One table row: | a | b | ... |"""
    return "| " + " | ".join(str(c) for c in cells) + " |"


def table(header, align, rows):
    """Header, alignment (one of "l"/"r" per column: --- / ---:) and body rows, as lines."""
    return [row(header), row("---:" if a == "r" else "---" for a in align)] + [row(r) for r in rows]


def num(x, fmt="{:.0f}"):
    """fmt.format(x), or n/a for None."""
    return "n/a" if x is None else fmt.format(x)


def spread(stat, fmt="{:.0f}", scale=1.0, collapse=True):
    """A console_fields.stats() dict as "median (min-max)"; n/a when empty. collapse: the median
    alone when there is one value or min and max print the same."""
    if not stat:
        return "n/a"
    med, lo, hi = (fmt.format(stat[k] * scale) for k in ("median", "min", "max"))
    return med if collapse and (stat["n"] == 1 or lo == hi) else f"{med} ({lo}-{hi})"


def footer(r, source, extra=""):
    """The closing line: where and under what load it ran, and which JSON (basename) it came from."""
    return (f"Test host: {r['test_host']}. Host load: {r.get('host_load') or 'not recorded'}. "
            f"{extra}Generated from {os.path.basename(source)} ({r['date']}).")
