#!/usr/bin/env python3
"""Writes bench/blk's SVG charts from blk.json, each two panels (4 KiB random read | random write)
against queue depth, one line per configuration (median over the rounds; a bar spans min-max):
  PREFIX-iops.svg  IOPS
  PREFIX-cpu.svg   host CPU per I/O, VMM + back-end process (solid: all of it, guest mode included;
                   dashed: outside guest mode)
No plotting library needed (bench/lib/svg_chart.py).

Usage: plot.py BLK.json PREFIX
"""
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from results import load  # noqa: E402
from svg_chart import Chart, nice_max  # noqa: E402

COLORS = {"qemu": "#d62728", "qemu-qsd": "#ff7f0e", "qemu-vub": "#e377c2",
          "tern": "#1f77b4", "tern-qsd": "#2ca02c", "tern-vub": "#9467bd"}
OTHER_COLORS = ["#17becf", "#8c564b", "#bcbd22", "#7f7f7f", "#aec7e8"]
W, H = 560, 430


def color_of(cfg, order):
    if cfg in COLORS:
        return COLORS[cfg]
    others = [c for c in order if c not in COLORS]
    return OTHER_COLORS[others.index(cfg) % len(OTHER_COLORS)]


def points(r, cfg, rw, key):
    """[(qd, stats)] of one configuration and direction, sorted by queue depth."""
    out = []
    for job, j in r["configs"][cfg]["jobs"].items():
        m = re.match(rf"{rw}-qd(\d+)$", job)
        if m and j["stats"].get(key):
            out.append((int(m.group(1)), j["stats"][key]))
    return sorted(out)


def panel(r, rw, series, title, ylabel, legend):
    """One chart: series = [(key, dash)] drawn for every configuration that ran."""
    cfgs = [c for c, e in r["configs"].items() if not e.get("skipped")]
    pts = {(c, k): points(r, c, rw, k) for c in cfgs for k, _ in series}
    qds = sorted({q for p in pts.values() for q, _ in p} or {1, 4, 16, 64})
    top = max([s["max"] for p in pts.values() for _, s in p] or [1])
    ch = Chart(W + (170 if legend else 0), H, (70, 190 if legend else 20, 50, 60), ymax=nice_max(top * 1.05), xlog=(qds[0] / 1.2, qds[-1] * 1.2))
    rounds = r.get("rounds", 1)
    ch.titles(title, (f"median of {rounds} rounds (bar: min-max), " if rounds > 1 else "")
              + f"nested test host, {r['date'][:10]}")
    ch.y_grid([ch.ymax * i / 5 for i in range(6)], lambda v: f"{v:.0f}")
    ch.x_grid(qds)
    ch.frame("queue depth (iodepth)", ylabel)
    ly = ch.T + 10
    for i, c in enumerate(cfgs):
        color = color_of(c, list(r["configs"]))
        nudge = 2 ** ((i - (len(cfgs) - 1) / 2) * 0.04)  # side by side at each queue depth, not on top
        for key, dash in series:
            p = [(q * nudge, s) for q, s in pts[(c, key)]]
            if not p:
                continue
            ch.curve([(q, s["median"]) for q, s in p], color, dash)
            for q, s in p:
                if s["n"] > 1:
                    ch.bar(q, s["min"], s["max"], color)
                ch.marker(q, s["median"], color)
        if legend:
            ch.legend_line(15, 45, ly, color)
            ch.legend_text(52, ly + 4, c)
            ly += 20
    if legend:
        for c, e in r["configs"].items():
            if e.get("skipped"):
                ch.legend_text(15, ly + 4, f"{c}: skipped", fill="#555", font_size=10)
                ly += 16
        if len(series) > 1:
            ch.legend_text(15, ly + 14, "solid: all of it", fill="#555", font_size=10)
            ch.legend_text(15, ly + 28, "dashed: outside guest mode", fill="#555", font_size=10)
    return ch


def side_by_side(charts):
    """One SVG document with the charts next to each other."""
    width = sum(c.W for c in charts)
    height = max(c.H for c in charts)
    out, x = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}">'], 0
    for c in charts:
        out.append(str(c).replace("<svg ", f'<svg x="{x}" y="0" ', 1))
        x += c.W
    return "\n".join(out + ["</svg>"])


def main():
    r = load(sys.argv[1])
    prefix = sys.argv[2]
    rw = [("randread", "random read"), ("randwrite", "random write")]
    svgs = {
        "iops": [panel(r, d, [("iops", "")], f"4 KiB {t}: IOPS", "IOPS", legend=i == 1)
                 for i, (d, t) in enumerate(rw)],
        "cpu": [panel(r, d, [("cpu_us_per_io", ""), ("cpu_us_per_io_outside_guest", "6,4")],
                      f"4 KiB {t}: host CPU per I/O", "µs per I/O (VMM + back-end)", legend=i == 1)
                for i, (d, t) in enumerate(rw)],
    }
    for name, charts in svgs.items():
        with open(f"{prefix}-{name}.svg", "w") as f:
            f.write(side_by_side(charts) + "\n")


if __name__ == "__main__":
    main()
