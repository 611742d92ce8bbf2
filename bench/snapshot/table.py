#!/usr/bin/env python3
"""Prints a Markdown table (for docs) from a bench/snapshot results JSON.

Usage: table.py RESULTS.json
"""
import json
import sys


def cell(stat, scale=1.0, digits=0):
    if not stat:
        return "n/a"
    f = f"{{:.{digits}f}}"
    med, lo, hi = (f.format(stat[k] * scale) for k in ("median", "min", "max"))
    return med if stat["n"] == 1 or lo == hi else f"{med} ({lo}-{hi})"


def main():
    with open(sys.argv[1]) as f:
        r = json.load(f)
    sizes = r["guest"]["sizes_mib"]
    print(f"Save and restore of a guest with half of its RAM random: kernel {r['kernel']}, 1 vCPU, "
          f"{r['runs']} run(s) per point, median (min-max); snapshot files in the test host's tmpfs.\n")
    print("| guest | VMM / mode | save (MiB/s) | pause (ms) | save request, wall (ms) "
          "| restore: start to first tick (ms) | VMM-reported running (ms) | file (MiB allocated) |")
    print("| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for size in sizes:
        for mode, m in r["modes"].items():
            e = m["sizes"].get(str(size))
            if not e:
                continue
            print(f"| {size} MiB | {mode} | {cell(e['save_mib_s'])} | {cell(e['pause_ms'])} "
                  f"| {cell(e['save_wall_ms'])} | {cell(e['first_tick_ms'])} | {cell(e['vmm_running_ms'])} "
                  f"| {cell(e['file_alloc_mib'])} |")
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
    print(f"\nTest host: {r['test_host']}. Host load: {r.get('host_load') or 'not recorded'}. "
          f"QEMU: {r.get('qemu_version') or 'n/a'}. Generated from {sys.argv[1].rsplit('/', 1)[-1]} ({r['date']}).")


if __name__ == "__main__":
    main()
