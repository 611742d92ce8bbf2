#!/usr/bin/env python3
"""Writes an SVG (stdout) of restore latency (process start -> first tick of the restored guest)
against guest memory size, one line per VMM mode (median, with a min-max bar), from a
bench/snapshot results JSON. No plotting library needed (bench/lib/svg_chart.py).

Usage: plot.py RESULTS.json > RESULTS-restore.svg
"""
import math
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from results import json_path, load  # noqa: E402
from svg_chart import Chart, nice_step  # noqa: E402

COLORS = {"tern": "#1f77b4", "qemu-default": "#d62728", "qemu-unlimited": "#ff7f0e"}
LABELS = {"tern": "tern restore --resume", "qemu-default": "QEMU, default limit",
          "qemu-unlimited": "QEMU, unlimited"}


def main():
    r = load(json_path(__file__, None))
    curves = {}  # mode -> [(size, median_s, min_s, max_s)]
    for mode, m in r["modes"].items():
        pts = []
        for size, e in m["sizes"].items():
            s = e.get("first_tick_ms")
            if s:
                pts.append((int(size), s["median"] / 1000, s["min"] / 1000, s["max"] / 1000))
        curves[mode] = sorted(pts)
    sizes = sorted({p[0] for c in curves.values() for p in c} or {128, 1024})
    top = max([p[3] for c in curves.values() for p in c] or [1])
    ystep = nice_step(top)
    ch = Chart(720, 440, (70, 210, 50, 60), ymax=ystep * math.ceil(top * 1.05 / ystep), xmax=max(sizes) * 1.08)
    ch.titles("Restore latency vs guest memory size",
              f"process start to the restored guest's first tick; half of RAM random; files in tmpfs ({r['date'][:10]})")
    ch.y_grid([ystep * i for i in range(round(ch.ymax / ystep) + 1)], lambda v: f"{v:g}")
    ch.x_grid(sizes)
    ch.frame("guest memory (MiB)", "restore latency (s, median; bar: min-max)")

    ly = ch.T + 10
    for mode, pts in curves.items():
        color = COLORS.get(mode, "#2ca02c")
        if pts:
            ch.curve([(s, med) for s, med, _, _ in pts], color)
            for s, med, lo, hi in pts:
                ch.bar(s, lo, hi, color)
                ch.marker(s, med, color)
            ch.legend_line(12, 36, ly, color)
            ch.legend_text(42, ly + 4, LABELS.get(mode, mode), font_size=11)
        else:
            why = r["modes"][mode].get("error") or "no samples"
            ch.legend_text(12, ly + 4, f"{mode}: not measured", fill=color, font_size=11)
            ly += 14
            ch.legend_text(12, ly + 4, f"({why[:40]})", fill="#555", font_size=9)
        ly += 22
    print(ch)


if __name__ == "__main__":
    main()
