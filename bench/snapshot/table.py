#!/usr/bin/env python3
"""Prints a Markdown table (for docs) from a bench/snapshot results JSON.

Usage: table.py RESULTS.json
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from markdown import footer, spread, table  # noqa: E402
from results import json_path, load  # noqa: E402


def main():
    path = json_path(__file__, None)
    r = load(path)
    sizes = r["guest"]["sizes_mib"]
    print(f"Save and restore of a guest with half of its RAM random: kernel {r['kernel']}, 1 vCPU, "
          f"{r['runs']} run(s) per point, median (min-max); snapshot files in the test host's tmpfs.\n")
    rows = []
    for size in sizes:
        for mode, m in r["modes"].items():
            e = m["sizes"].get(str(size))
            if e:
                rows.append([f"{size} MiB", mode] + [spread(e[k]) for k in (
                    "save_mib_s", "pause_ms", "save_wall_ms", "first_tick_ms", "vmm_running_ms", "file_alloc_mib")])
    print("\n".join(table(["guest", "VMM / mode", "save (MiB/s)", "pause (ms)", "save request, wall (ms)",
                           "restore: start to first tick (ms)", "VMM-reported running (ms)", "file (MiB allocated)"],
                          "rlrrrrrr", rows)))
    for mode, m in r["modes"].items():
        if m["error"]:
            print(f"\n{mode}: not measured ({m['error']})")
        elif m["errors"]:
            print(f"\n{mode}: {len(m['errors'])} error line(s) (a cycle with an error may lack numbers), "
                  f"first: {m['errors'][0]}")
    bws = {mode: e["max_bandwidth_bytes_per_s"] for mode, m in r["modes"].items() for e in m["sizes"].values()
           if e.get("max_bandwidth_bytes_per_s")}
    if bws:
        print("\nQEMU max-bandwidth: " + ", ".join(f"{k} {v / 2**20:.0f} MiB/s" for k, v in sorted(bws.items())))
    print("\n" + footer(r, path, f"QEMU: {r.get('qemu_version') or 'n/a'}. "))


if __name__ == "__main__":
    main()
