#!/usr/bin/env python3
"""Prints a Markdown table (for docs) from bench/boot/results/boot.json.

Usage: table.py [boot.json]   (default: the file next to this script in results/)
"""
import json
import os
import sys


def fmt(stat, key="median"):
    return "n/a" if not stat else f"{stat[key]:.0f}"


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "results", "boot.json")
    with open(path) as f:
        r = json.load(f)
    g = r["guest"]
    print(f"Boot to the guest's init marker and to VMM exit: kernel {r['kernel']}, {g['memory_mib']} MiB, "
          f"{g['vcpus']} vCPU, {r['runs_per_vmm']} runs each, medians (min-max) in ms of the test host's clock.\n")
    print("| VMM | to marker (ms) | to exit (ms) | test host CPU per boot (ms) | memory outside guest RAM (MiB) | note |")
    print("| --- | ---: | ---: | ---: | ---: | --- |")
    for name, v in r["vmms"].items():
        cells = []
        for key in ("to_marker_ms", "to_exit_ms", "l1_host_cpu_ms"):
            s = v.get(key)
            cells.append("n/a" if not s else f"{fmt(s)} ({fmt(s, 'min')}-{fmt(s, 'max')})")
        mem = v["memory_overhead"]
        mem_cell = "n/a" if not mem else f"{mem['overhead_kb'] / 1024:.1f}"
        note = (v["error"] or "").replace("|", "\\|")
        print(f"| {name} | {cells[0]} | {cells[1]} | {cells[2]} | {mem_cell} | {note} |")
    ratios = r["tern_vs_faster_qemu"]
    for key, label in (("to_marker", "to marker"), ("to_exit", "to exit"), ("l1_host_cpu", "test host CPU")):
        x = ratios.get(key)
        if x:
            print(f"\ntern / {x['faster_qemu']} ({label}): {x['ratio']:.2f}")
    print(f"\nTest host: {r['test_host']}. Host load: {r.get('host_load') or 'not recorded'}. "
          f"Generated from boot.json ({r['date']}).")


if __name__ == "__main__":
    main()
