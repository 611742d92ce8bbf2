#!/usr/bin/env python3
"""Writes an SVG (stdout) of 4 KiB random-read and random-write IOPS against queue depth, one line per
VMM and direction, from bench/blk/results/blk.json; with several rounds the line is the median and a
bar spans min-max. No plotting library needed (bench/lib/svg_chart.py).

Usage: plot.py [blk.json] > blk-iops.svg
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from results import json_path, load  # noqa: E402
from svg_chart import Chart, nice_max  # noqa: E402

COLORS = {"qemu": "#d62728", "tern": "#1f77b4"}
OTHER_COLORS = ["#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2"]
DASH = {"randread": "", "randwrite": "6,4"}


def color_of(vmm, order):
    """qemu red, tern blue, every other VMM its own colour in the order it appears."""
    if vmm in COLORS:
        return COLORS[vmm]
    others = [v for v in order if v not in COLORS]
    return OTHER_COLORS[others.index(vmm) % len(OTHER_COLORS)]


def main():
    r = load(json_path(__file__, "blk.json"))
    curves = r.get("iops_vs_queue_depth", {})

    def spread(vmm, rw, qd):  # (min, max) IOPS of the point over the rounds, or None
        s = r["vmms"].get(vmm, {}).get("jobs", {}).get(f"{rw}-qd{qd}", {}).get("spread", {}).get("iops")
        return (s["min"], s["max"]) if s and s["n"] > 1 else None

    qds = sorted({int(q) for v in curves.values() for c in v.values() for q in c} or {1, 4, 16, 64})
    top = [x for v in curves.values() for c in v.values() for x in c.values()]
    top += [spread(v, rw, q)[1] for v, c in curves.items() for rw, p in c.items() for q in p if spread(v, rw, q)]
    ch = Chart(720, 440, (80, 200, 50, 60), ymax=nice_max(max(top or [1]) * 1.05), xlog=(qds[0], qds[-1]))
    rounds = r.get("rounds", 1)
    ch.titles("4 KiB random I/O in the guest: IOPS vs queue depth",
              f"virtio-blk, direct I/O, fio {r['guest']['fio_engine']}, {r['guest']['runtime_s']} s per point, "
              + (f"median of {rounds} rounds, " if rounds > 1 else "") + f"nested test host ({r['date'][:10]})")
    ch.y_grid([ch.ymax * i / 5 for i in range(6)], lambda v: f"{v:.0f}")
    ch.x_grid(qds)
    ch.frame("queue depth (iodepth)", "IOPS" if rounds == 1 else "IOPS (median; bar: min-max)")

    ly = ch.T + 10
    for vmm, entry in r["vmms"].items():
        color = color_of(vmm, list(r["vmms"]))
        for rw in ("randread", "randwrite"):
            pts = sorted((int(q), v) for q, v in curves.get(vmm, {}).get(rw, {}).items())
            if pts:
                ch.curve(pts, color, DASH[rw])
                for q, v in pts:
                    if spread(vmm, rw, q):
                        ch.bar(q, *spread(vmm, rw, q), color)
                    ch.marker(q, v, color)
                ch.legend_line(15, 45, ly, color, DASH[rw])
                ch.legend_text(52, ly + 4, f"{vmm} {rw}")
                ly += 20
        if entry.get("skipped"):
            ch.legend_text(15, ly + 4, f"{vmm}: skipped", fill=color)
            ch.legend_text(15, ly + 18, f"({entry['skipped']})", fill="#555", font_size=10)
            ly += 36
    print(ch)


if __name__ == "__main__":
    main()
