#!/usr/bin/env python3
"""Writes bench/build's SVG chart from build.json: panels side by side, one column per
configuration in the run's order,
  left   build time (s): the median (dot), min-max (bar), each round (small dots); the host row's
         median as a dashed line and 1.1x of it (the issue's goal for the guest) dotted
  middle the test host's own host CPU per build (stamp_cpu.py): the work, less moved by this
         machine's load than the clocks
  right  KVM exits per second of build (the VM's debugfs counters in the test host): every exit
         (dot) and the exits to the VMM, port I/O + MMIO (square)
No plotting library needed (bench/lib/svg_chart.py).

Usage: plot.py BUILD.json OUT.svg
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from results import load  # noqa: E402
from svg_chart import Chart, nice_max, side_by_side  # noqa: E402

COLORS = {"host": "#000000", "tern-writeback": "#1f77b4", "tern-none": "#17becf", "tern-nvme": "#2ca02c",
          "qemu-writeback": "#d62728", "qemu-none": "#ff7f0e", "qemu-nvme": "#bcbd22"}
W, H = 520, 440


def panel(r, names, title, ylabel, series, host_line=False):
    """series = [(key, shape)]: shape "dot" or "square"; the stats of `key` per configuration."""
    top = max([c["stats"][k]["max"] for n in names for k, _ in series
               for c in [r["configs"][n]] if c["stats"].get(k)] or [1])
    ch = Chart(W, H, (70, 20, 50, 110), ymax=nice_max(top * 1.1), xmax=len(names) + 1)
    ch.titles(title, f"median of {r['rounds']} rounds (bar: min-max), nested test host, {r['date'][:10]}")
    ch.y_grid([ch.ymax * i / 5 for i in range(6)], lambda v: f"{v:.0f}")
    ch.frame("", ylabel)
    ch.x_labels([(i + 1, n) for i, n in enumerate(names)])
    host = r["configs"].get("host", {}).get("stats", {}).get(r["time_key"])
    if host_line and host:
        ch.hline(host["median"], "#555", "6,4", "host")
        ch.hline(host["median"] * 1.1, "#999", "2,3", "host x 1.1")
    for i, n in enumerate(names):
        c, color = r["configs"][n], COLORS.get(n, "#7f7f7f")
        for j, (key, shape) in enumerate(series):
            s = c["stats"].get(key)
            if not s:
                continue
            x = i + 1 + (j - (len(series) - 1) / 2) * 0.18
            ch.bar(x, s["min"], s["max"], color)
            if shape == "square":
                ch.o.append(f'<rect x="{ch.x(x) - 4:.1f}" y="{ch.y(s["median"]) - 4:.1f}" width="8" height="8" '
                            f'fill="white" stroke="{color}" stroke-width="2"/>')
            else:
                ch.marker(x, s["median"], color)
            if key in (r["time_key"], "l1_host_cpu_s"):
                for rd in c["rounds"]:
                    if rd and rd.get(key) is not None:
                        ch.o.append(f'<circle cx="{ch.x(x) + 8:.1f}" cy="{ch.y(rd[key]):.1f}" r="1.8" fill="{color}" '
                                    'fill-opacity="0.6"/>')
    return ch


def main():
    r = load(sys.argv[1])
    names = list(r["configs"])
    vms = [n for n in names if r["configs"][n]["vmm"] != "host"]
    charts = [panel(r, names, "Kernel build slice: build time", "seconds (make, the build system's clock)",
                    [(r["time_key"], "dot")], host_line=True)]
    if any("l1_host_cpu_s" in r["configs"][n]["stats"] for n in names):
        charts.append(panel(r, names, "Test host's host CPU per build", "seconds of a host core (less moved by load)",
                            [("l1_host_cpu_s", "dot")]))
    if vms and any("exits_per_s" in r["configs"][n]["stats"] for n in vms):
        charts.append(panel(r, vms, "KVM exits per second of build", "exits/s (dot: all; square: to the VMM)",
                            [("exits_per_s", "dot"), ("vmm_exits_per_s", "square")]))
    with open(sys.argv[2], "w") as f:
        f.write(side_by_side(charts) + "\n")


if __name__ == "__main__":
    main()
