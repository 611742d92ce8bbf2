#!/usr/bin/env python3
"""Prints Markdown tables (for docs) from a bench/boot results JSON (run.sh writes DIR/boot.json).

Usage: table.py [boot.json]   (default: results/boot.json next to this script)
Busybox rows, then the Debian row, each with the tern/QEMU verdicts (a difference only when the
min-max ranges do not overlap), systemd-analyze per VMM, and tern's exits per Debian boot.
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from markdown import footer, spread, table  # noqa: E402
from results import json_path, load  # noqa: E402


def verdict_text(v):
    if not v:
        return "n/a"
    if v["ranges"] in ("lower", "higher"):
        return f"**{v['ratio_of_medians']:.2f}x** ({'faster' if v['ranges'] == 'lower' else 'slower'}: ranges do not overlap)"
    return f"{v['ratio_of_medians']:.2f}x ({v['ranges']})"


def comparisons(comp, metrics):
    for pair, m in comp.items():
        parts = [f"{label} {verdict_text(m.get(key))}" for key, label in metrics if m.get(key)]
        if parts:
            print(f"- {pair}: " + "; ".join(parts))


def goal(comp, qemu, limit):
    """The issue's goal for tern / QEMU to the marker: met only when the median ratio is within it."""
    for pair, m in comp.items():
        v = m.get("to_marker_ms")
        if pair.endswith(f" vs {qemu}") and v:
            print(f"- goal {pair.split(' vs ')[0]} / {qemu} to marker <= {limit}x: "
                  f"{'met' if v['ratio_of_medians'] <= limit else 'not met'} ({v['ratio_of_medians']:.2f}x)")


def old_format(r, path):
    """The results of runs before the Debian row (results/boot.json of 2026-11-30)."""
    g = r["guest"]
    print(f"Boot to the guest's init marker and to VMM exit: kernel {r['kernel']}, {g['memory_mib']} MiB, "
          f"{g['vcpus']} vCPU, {r['runs_per_vmm']} runs each, medians (min-max) in ms of the test host's clock.\n")
    rows = []
    for name, v in r["vmms"].items():
        cells = [spread(v.get(key), collapse=False) for key in ("to_marker_ms", "to_exit_ms", "l1_host_cpu_ms")]
        mem = v["memory_overhead"]
        rows.append([name, *cells, "n/a" if not mem else f"{mem['overhead_kb'] / 1024:.1f}",
                     (v["error"] or "").replace("|", "\\|")])
    print("\n".join(table(["VMM", "to marker (ms)", "to exit (ms)", "test host CPU per boot (ms)",
                           "memory outside guest RAM (MiB)", "note"], "lrrrrl", rows)))
    print("\n" + footer(r, path))


def exits_table(ex, top=8):
    """Where each VMM's in-kernel exits go: per busybox boot, by SVM exit reason (the test host's
    kvm_exit hist trigger), the VMM's top reasons as columns of one table."""
    if not ex:
        return
    order = {}
    for v in ex.values():
        for n, st in v["reasons"].items():
            order[n] = order.get(n, 0) + ((st or {}).get("median") or 0)
    names = [n for n, _ in sorted(order.items(), key=lambda kv: -kv[1])][:top]
    boots = sorted({v["boots"] for v in ex.values()})
    print(f"\n**In-kernel exits per busybox boot, by exit reason** (untimed boots after the timed ones, "
          f"{'/'.join(map(str, boots))} per VMM; the test host's own `kvm_exit` hist trigger around each boot; "
          f"tern also counts its own with `--kernel-exits`; medians, min-max under the table in boot.json)\n")
    rows = []
    for vmm, v in ex.items():
        tot = (v.get("total") or {}).get("median")
        cells = []
        for n in names:
            m = ((v["reasons"].get(n) or {}).get("median")) or 0
            cells.append(f"{m:.0f}" + (f" ({100 * m / tot:.0f}%)" if tot else ""))
        rest = (tot or 0) - sum(((v["reasons"].get(n) or {}).get("median") or 0) for n in names)
        own = (v.get("tern_kernel_exits_sum") or {}).get("median")
        rows.append([vmm, spread(v.get("total"), collapse=False), *cells, f"{max(rest, 0):.0f}",
                     "" if own is None else f"{own:.0f}"])
    print("\n".join(table(["VMM", "exits (hist)", *names, "other", "tern's own count"], "lr" + "r" * (len(names) + 2), rows)))
    print()


def closing(r, path):
    """The footer line with the run's duration and errors (shared with firmware_table.py)."""
    extra = f"Run took {r['duration_s']} s. " if r.get("duration_s") else ""
    if r.get("errors"):
        extra += "Errors: " + "; ".join(r["errors"]) + ". "
    return footer(r, path, extra)


def main():
    path = json_path(__file__, "boot.json")
    r = load(path)
    if "busybox" not in r:
        old_format(r, path)
        return
    b = r["busybox"]
    g = b["guest"]
    print(f"Build {r.get('git_rev') or 'unknown'}; kernel {r['kernel']}; medians (min-max) over the rounds, "
          f"ms of the test host's clock from the VMM's exec.\n")
    print(f"**busybox guest** ({g['memory_mib']} MiB, {g['vcpus']} vCPU, direct kernel boot, {b['runs']} interleaved rounds)\n")
    rows = []
    for name, v in b["vmms"].items():
        cells = [spread(v.get(key), collapse=False) for key in ("to_marker_ms", "to_exit_ms", "l1_host_cpu_ms")]
        mem = v["memory_overhead"]
        rows.append([name, *cells, "n/a" if not mem else f"{mem['overhead_kb'] / 1024:.1f}",
                     (v["error"] or "").replace("|", "\\|")[:160]])
    print("\n".join(table(["VMM", "to marker (ms)", "to exit (ms)", "test host CPU to exit (ms)",
                           "memory outside guest RAM (MiB)", "note"], "lrrrrl", rows)))
    print()
    comparisons(b["comparisons"], (("to_marker_ms", "to marker"), ("to_exit_ms", "to exit"),
                                   ("l1_host_cpu_ms", "test host CPU")))
    goal(b["comparisons"], "qemu-pc", 0.5)
    exits_table(b.get("exits_by_reason"))
    d = r.get("debian")
    if d:
        g = d["guest"]
        print(f"\n**Debian 12** (systemd, ext4 root on virtio-blk, Debian's kernel + initrd, {g['vcpus']} vCPUs, "
              f"{g['memory_mib']} MiB, {d['rounds']} interleaved rounds after 1 warm-up boot; marker = "
              "`systemctl is-system-running --wait` returned)\n")
        rows = []
        for name, v in d["vmms"].items():
            sa = v.get("systemd_analyze") or {}
            sa_cell = " + ".join(f"{sa[k]:.1f}" for k in ("kernel_s", "initrd_s", "userspace_s") if k in sa)
            if sa_cell:
                sa_cell += f" = {sa.get('total_s', 0):.1f}"
            rows.append([name, *(spread(v.get(k), collapse=False) for k in ("to_marker_ms", "to_login_ms", "to_exit_ms",
                                                                             "l1_host_cpu_ms")),
                         spread(v.get("guest_uptime_at_marker_s"), "{:.1f}", collapse=False), sa_cell or "n/a",
                         spread(v.get("exits_total"), collapse=False) if v.get("exits_total") else "n/a",
                         ", ".join(v.get("marker_states") or []) + (f" {v['error']}" if v.get("error") else "")])
        print("\n".join(table(["VMM", "to marker (ms)", "to login prompt (ms)", "to exit after poweroff (ms)",
                               "test host CPU to marker (ms)", "guest uptime at marker (s)",
                               "systemd-analyze kernel + initrd + userspace (s)", "exits (tern)", "marker / note"],
                              "lrrrrrrrl", rows)))
        print()
        comparisons(d["comparisons"], (("to_marker_ms", "to marker"), ("to_login_ms", "to login"),
                                       ("l1_host_cpu_ms", "test host CPU")))
        goal(d["comparisons"], "qemu", 0.8)
        for name, v in d["vmms"].items():
            chain = (v.get("systemd_analyze_text") or {}).get("chain") or []
            blame = (v.get("systemd_analyze_text") or {}).get("blame") or []
            if chain or blame:
                print(f"\n<details><summary>{name}: systemd-analyze critical-chain and blame (top 10), round 1</summary>\n")
                print("```\n" + "\n".join((v["systemd_analyze_text"].get("time") or []) + [""] + chain + [""] + blame) + "\n```\n")
                print("</details>")
    print("\n" + closing(r, path))


if __name__ == "__main__":
    main()
