#!/usr/bin/env python3
"""Prints Markdown tables (for docs) from bench/blk's blk.json: per figure (IOPS, mean and p99
latency, host CPU per I/O of the VMM plus the back-end, and the part outside guest mode, the
back-end's part) one row per job and one column per configuration, each cell the median (min-max)
over the rounds; then the issue's goals (each comparison's verdict, a difference claimed only when
the ranges do not overlap), and the per-round ratios to QEMU. Also reads the one-VMM-per-column
JSON of earlier runs (key "vmms", no "configs").

Usage: table.py BLK.json
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from markdown import footer, spread, table  # noqa: E402
from results import json_path, load  # noqa: E402

FIGURES = [("iops", "IOPS", "{:.0f}"), ("lat_mean_us", "mean latency (µs)", "{:.0f}"),
           ("lat_p99_us", "p99 latency (µs)", "{:.0f}"),
           ("cpu_us_per_io", "host CPU per I/O, VMM + back-end (µs; includes guest mode)", "{:.0f}"),
           ("cpu_us_per_io_outside_guest", "host CPU per I/O outside guest mode, VMM + back-end (µs)", "{:.0f}"),
           ("backend_us_per_io", "of which the back-end process (µs per I/O)", "{:.0f}"),
           ("exits_per_io", "KVM exits per I/O (every guest exit, also those KVM handles itself)", "{:.2f}"),
           ("vmm_exits_per_io", "exits to the VMM (port I/O + MMIO) per I/O", "{:.2f}"),
           ("mmio_exits_per_io", "MMIO exits to the VMM per I/O", "{:.2f}"),
           ("io_exits_per_io", "port I/O exits to the VMM per I/O", "{:.2f}"),
           ("halt_exits_per_io", "halt exits per I/O", "{:.2f}"),
           ("irq_injections_per_io", "interrupts injected per I/O", "{:.2f}"),
           ("l1_host_share", "share of a host core the test host had during the job", "{:.2f}"),
           ("iops_per_core", "IOPS / that share (estimate: as if the test host had had a whole core)", "{:.0f}")]
GOALS = {"within10": "within 10% of", "within25": "within 25% of", "ahead": "ahead of",
         "ahead1.5": "at least 1.5x", None: "against"}


def cell(c, job, key, fmt, collapse):
    return spread(c["jobs"].get(job, {}).get("stats", {}).get(key), fmt, collapse=collapse)


def verdict_cell(v, fmt="{:.2f}"):
    if not v:
        return "n/a"
    if v["better"] is None:
        return f"{fmt.format(v['ratio_of_medians'])}x, one round" if v["ranges"].startswith("one") else \
            "no measurable difference"
    return f"{fmt.format(v['ratio_of_medians'])}x ({'better' if v['better'] else 'worse'})"


def main():
    path = json_path(__file__, None)
    r = load(path)
    if "configs" not in r:
        sys.exit(f"{path}: an earlier run's JSON (no 'configs'); its tables are next to it (blk.md)")
    g = r["guest"]
    rounds = r.get("rounds", 1)
    collapse = rounds == 1
    cfgs = {n: c for n, c in r["configs"].items() if not c.get("skipped")}
    names = list(cfgs)
    jobs = list(r["method"]["jobs"])
    builds = sorted({(c["binary"]["path"], c["binary"].get("git_describe") or "?", c["binary"]["sha256"][:12])
                     for c in r["configs"].values() if c.get("binary")})
    where = {"test-host": "in the nested test host", "direct": "directly on this machine"}
    print(f"Ran {where.get(r.get('where', 'test-host'))}. "
          f"fio in the guest ({g['fio_engine']}, direct I/O, {g['runtime_s']} s per point) on {g['disk']}; "
          f"kernel {r['kernel']}, {g['memory_mib']} MiB, {g['vcpus']} vCPU; bench scripts {r.get('git_rev', '?')}"
          + "".join(f"; tern {p} = {d} (sha256 {s})" for p, d, s in builds) + "."
          + (f" Test host's shmem_enabled: {r['l1']['shmem_enabled']}." if r.get("l1", {}).get("shmem_enabled") else "")
          + (f" {rounds} rounds ({r['method']['order']}); median (min-max) over the rounds." if rounds > 1 else "")
          + "\n")
    print("\n".join(table(["configuration", "what serves the disk", "status"], "lll",
                          [[n, c["description"], c.get("skipped") and f"skipped: {c['skipped']}" or c["status"]]
                           for n, c in r["configs"].items()])) + "\n")

    for key, title, fmt in FIGURES:
        rows = [[job] + [cell(cfgs[n], job, key, fmt, collapse) for n in names] for job in jobs]
        if all(x == "n/a" for row in rows for x in row[1:]):
            continue
        print(f"{title}:\n")
        print("\n".join(table(["job"] + names, "l" + "r" * len(names), rows)) + "\n")

    for gl in r.get("goals") or []:
        a, b = gl["config"], gl["reference"]
        print(f"**{a} {GOALS[gl['goal']]} {b}** (a ratio is claimed only when the min-max ranges of the two "
              "do not overlap; CPU: lower is better):\n")
        rows = []
        for job in jobs:
            v = gl["jobs"].get(job) or {}
            rows.append([job, cell(cfgs[a], job, "iops", "{:.0f}", collapse), cell(cfgs[b], job, "iops", "{:.0f}", collapse),
                         verdict_cell(v.get("iops")), cell(cfgs[a], job, "cpu_us_per_io", "{:.0f}", collapse),
                         cell(cfgs[b], job, "cpu_us_per_io", "{:.0f}", collapse), verdict_cell(v.get("cpu_us_per_io"))]
                        + ([v.get("goal") or "n/a"] if gl["goal"] else []))
        hdr = ["job", f"{a} IOPS", f"{b} IOPS", "IOPS", f"{a} CPU/I/O (µs)", f"{b} CPU/I/O (µs)", "CPU/I/O"]
        print("\n".join(table(hdr + (["goal"] if gl["goal"] else []), "l" + "r" * (len(hdr) - 1) + ("l" if gl["goal"] else ""), rows)) + "\n")

    vs = r.get("vs") or {}
    others = [n for n in names if "qemu" in vs.get(n, {})]
    if others:
        print("IOPS over QEMU's (built-in virtio-blk-pci) in the same round"
              + (" (median (min-max) of the per-round ratios)" if rounds > 1 else "") + ":\n")
        rows = [[job] + [spread(vs[o]["qemu"].get(job, {}).get("iops"), "{:.2f}", collapse=collapse) for o in others]
                for job in jobs]
        print("\n".join(table(["job"] + [f"{o} / qemu" for o in others], "l" + "r" * len(others), rows)) + "\n")

    others = [n for n in names if "host" in vs.get(n, {})]
    if others:
        print("IOPS as a share of the host row (fio on the disk file without a VMM: the ceiling) in the same round"
              + (" (median (min-max) of the per-round ratios)" if rounds > 1 else "") + ":\n")
        rows = [[job] + [spread(vs[o]["host"].get(job, {}).get("iops"), "{:.2f}", collapse=collapse) for o in others]
                for job in jobs]
        print("\n".join(table(["job"] + [f"{o} / host" for o in others], "l" + "r" * len(others), rows)) + "\n")

    for n, c in r["configs"].items():
        if c.get("command"):
            print(f"- **{n}**: `{c['command']}`" + (f"; back-end: `{c['backend_command']}`" if c.get("backend_command") else ""))
        for e in c.get("errors") or []:
            print(f"  - error: {e}")
    print()
    print(footer(r, path))


if __name__ == "__main__":
    main()
