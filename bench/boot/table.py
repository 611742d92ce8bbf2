#!/usr/bin/env python3
"""Prints a Markdown table (for docs) from bench/boot/results/boot.json.

Usage: table.py [boot.json]   (default: the file next to this script in results/)
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from markdown import footer, spread, table  # noqa: E402
from results import json_path, load  # noqa: E402


def main():
    path = json_path(__file__, "boot.json")
    r = load(path)
    g = r["guest"]
    print(f"Boot to the guest's init marker and to VMM exit: kernel {r['kernel']}, {g['memory_mib']} MiB, "
          f"{g['vcpus']} vCPU, {r['runs_per_vmm']} runs each, medians (min-max) in ms of the test host's clock.\n")
    rows = []
    for name, v in r["vmms"].items():
        cells = [spread(v.get(key), collapse=False) for key in ("to_marker_ms", "to_exit_ms", "l1_host_cpu_ms")]
        mem = v["memory_overhead"]
        mem_cell = "n/a" if not mem else f"{mem['overhead_kb'] / 1024:.1f}"
        rows.append([name, *cells, mem_cell, (v["error"] or "").replace("|", "\\|")])
    print("\n".join(table(["VMM", "to marker (ms)", "to exit (ms)", "test host CPU per boot (ms)",
                           "memory outside guest RAM (MiB)", "note"], "lrrrrl", rows)))
    ratios = r["tern_vs_faster_qemu"]
    for key, label in (("to_marker", "to marker"), ("to_exit", "to exit"), ("l1_host_cpu", "test host CPU")):
        x = ratios.get(key)
        if x:
            print(f"\ntern / {x['faster_qemu']} ({label}): {x['ratio']:.2f}")
    print("\n" + footer(r, path))


if __name__ == "__main__":
    main()
