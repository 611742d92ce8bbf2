#!/usr/bin/env python3
"""Prints Markdown tables (for docs) from bench/blk/results/blk.json: one per VMM and, when the JSON
has them (vs_qemu), each VMM's IOPS against QEMU's in the same round. With several rounds a cell is
the median (min-max) over the rounds.

Usage: table.py [blk.json]
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from markdown import footer, num, spread, table  # noqa: E402
from results import json_path, load  # noqa: E402


def main():
    path = json_path(__file__, "blk.json")
    r = load(path)
    g = r["guest"]
    rounds = r.get("rounds", 1)
    print(f"fio in the guest ({g['fio_engine']}, direct I/O, {g['runtime_s']} s per point) on {g['disk']}; "
          f"kernel {r['kernel']}, {g['memory_mib']} MiB, {g['vcpus']} vCPU."
          + (f" {rounds} rounds ({r['order']}); median (min-max) over the rounds." if rounds > 1 else "") + "\n")
    for name, v in r["vmms"].items():
        if v.get("skipped"):
            print(f"**{name}**: skipped: {v['skipped']}.\n")
            continue
        b = v.get("binary")
        print(f"**{name}** (`{v['command']}`), status {v['status']}"
              + (f"; binary {b['path']}, sha256 {b['sha256'][:16]}" if b else "") + "\n")
        rows = []
        for job, j in v["jobs"].items():
            c = j.get("vmm_cpu") or {}
            s = j.get("spread")
            if s:
                cells = [spread(s["iops"], collapse=False), spread(s["lat_mean_us"], collapse=False),
                         spread(s["lat_p99_us"], collapse=False), num(c.get("us_per_io")),
                         spread(s["us_per_io_outside_guest"], collapse=False)]
            else:
                cells = [num(j["iops"]), num(j["lat_mean_us"]), num(j["lat_p99_us"]), num(c.get("us_per_io")),
                         num(c.get("us_per_io_outside_guest"))]
            rows.append([job, *cells])
        print("\n".join(table(["job", "IOPS", "mean latency (µs)", "p99 latency (µs)", "VMM CPU per I/O (µs)",
                               "of it outside guest mode (µs)"], "lrrrrr", rows)))
        for e in v.get("errors") or []:
            print(f"\n- error: {e}")
        print()
    vs = r.get("vs_qemu") or {}
    if vs:
        others = list(vs)
        print("IOPS against QEMU's in the same round" + (" (median (min-max) over the rounds)" if rounds > 1 else "")
              + ":\n")
        jobs = [j for j in r["vmms"]["qemu"]["jobs"]]
        rows = []
        for job in jobs:
            cells = [num(r["vmms"]["qemu"]["jobs"][job]["iops"])]
            cells += [num(r["vmms"][o]["jobs"].get(job, {}).get("iops")) for o in others]
            cells += [spread(vs[o].get(job, {}).get("iops_ratio"), "{:.2f}", collapse=rounds == 1) for o in others]
            rows.append([job, *cells])
        print("\n".join(table(["job", "qemu IOPS"] + [f"{o} IOPS" for o in others] + [f"{o} / qemu" for o in others],
                              "l" + "r" * (1 + 2 * len(others)), rows)) + "\n")
    print(footer(r, path))


if __name__ == "__main__":
    main()
