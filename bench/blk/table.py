#!/usr/bin/env python3
"""Prints Markdown tables (for docs) from bench/blk/results/blk.json.

Usage: table.py [blk.json]
"""
import json
import os
import sys


def cell(x, fmt="{:.0f}"):
    return "n/a" if x is None else fmt.format(x)


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "results", "blk.json")
    with open(path) as f:
        r = json.load(f)
    g = r["guest"]
    print(f"fio in the guest ({g['fio_engine']}, direct I/O, {g['runtime_s']} s per point) on {g['disk']}; "
          f"kernel {r['kernel']}, {g['memory_mib']} MiB, {g['vcpus']} vCPU.\n")
    for name, v in r["vmms"].items():
        if v.get("skipped"):
            print(f"**{name}**: skipped: {v['skipped']}.\n")
            continue
        print(f"**{name}** (`{v['command']}`), status {v['status']}\n")
        print("| job | IOPS | mean latency (µs) | p99 latency (µs) | VMM CPU per I/O (µs) | of it outside guest mode (µs) |")
        print("| --- | ---: | ---: | ---: | ---: | ---: |")
        for job, j in v["jobs"].items():
            c = j.get("vmm_cpu") or {}
            print(f"| {job} | {cell(j['iops'])} | {cell(j['lat_mean_us'])} | {cell(j['lat_p99_us'])} | "
                  f"{cell(c.get('us_per_io'))} | {cell(c.get('us_per_io_outside_guest'))} |")
        for e in v.get("errors") or []:
            print(f"\n- error: {e}")
        print()
    print(f"Test host: {r['test_host']}. Host load: {r['host_load']}. Generated from blk.json ({r['date']}).")


if __name__ == "__main__":
    main()
