#!/usr/bin/env python3
"""Writes an SVG (stdout) of restore latency (process start -> first tick of the restored guest)
against guest memory size, one line per VMM mode (median, with a min-max bar), from a
bench/snapshot results JSON. No plotting library needed.

Usage: plot.py RESULTS.json > RESULTS-restore.svg
"""
import json
import math
import sys
from xml.sax.saxutils import escape

W, H = 720, 440
L, R, T, B = 70, 210, 50, 60  # margins
COLORS = {"tern": "#1f77b4", "qemu-default": "#d62728", "qemu-unlimited": "#ff7f0e"}
LABELS = {"tern": "tern restore --resume", "qemu-default": "QEMU, default limit",
          "qemu-unlimited": "QEMU, unlimited"}


def nice_step(v):
    """A round grid step (1, 2, 2.5 or 5 times a power of ten) for about five lines up to v."""
    if v <= 0:
        return 1
    raw = v / 5
    e = 10 ** math.floor(math.log10(raw))
    for m in (1, 2, 2.5, 5, 10):
        if m * e >= raw:
            return m * e
    return 10 * e


def main():
    with open(sys.argv[1]) as f:
        r = json.load(f)
    curves = {}  # mode -> [(size, median_s, min_s, max_s)]
    for mode, m in r["modes"].items():
        pts = []
        for size, e in m["sizes"].items():
            s = e.get("first_tick_ms")
            if s:
                pts.append((int(size), s["median"] / 1000, s["min"] / 1000, s["max"] / 1000))
        curves[mode] = sorted(pts)
    sizes = sorted({p[0] for c in curves.values() for p in c} or {128, 1024})
    xmax = max(sizes) * 1.08
    top = max([p[3] for c in curves.values() for p in c] or [1])
    ystep = nice_step(top)
    ymax = ystep * math.ceil(top * 1.05 / ystep)
    pw, ph = W - L - R, H - T - B

    def x(v):
        return L + pw * v / xmax

    def y(v):
        return T + ph - ph * v / ymax

    o = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="12">',
         f'<rect width="{W}" height="{H}" fill="white"/>',
         f'<text x="{L + pw / 2}" y="22" text-anchor="middle" font-size="15">Restore latency vs guest memory size</text>',
         f'<text x="{L + pw / 2}" y="38" text-anchor="middle" fill="#555">process start to the restored guest\'s '
         f'first tick; half of RAM random; files in tmpfs ({escape(r["date"][:10])})</text>']
    for i in range(round(ymax / ystep) + 1):
        v = ystep * i
        o.append(f'<line x1="{L}" y1="{y(v):.1f}" x2="{L + pw}" y2="{y(v):.1f}" stroke="#ddd"/>')
        o.append(f'<text x="{L - 8}" y="{y(v) + 4:.1f}" text-anchor="end">{v:g}</text>')
    for s in sizes:
        o.append(f'<line x1="{x(s):.1f}" y1="{T}" x2="{x(s):.1f}" y2="{T + ph}" stroke="#eee"/>')
        o.append(f'<text x="{x(s):.1f}" y="{T + ph + 18}" text-anchor="middle">{s}</text>')
    o.append(f'<rect x="{L}" y="{T}" width="{pw}" height="{ph}" fill="none" stroke="#333"/>')
    o.append(f'<text x="{L + pw / 2}" y="{H - 18}" text-anchor="middle">guest memory (MiB)</text>')
    o.append(f'<text transform="translate(20,{T + ph / 2}) rotate(-90)" text-anchor="middle">restore latency (s, median; bar: min-max)</text>')

    ly = T + 10
    for mode, pts in curves.items():
        color = COLORS.get(mode, "#2ca02c")
        label = LABELS.get(mode, mode)
        if pts:
            d = " ".join(f"{'M' if i == 0 else 'L'}{x(s):.1f},{y(med):.1f}" for i, (s, med, _, _) in enumerate(pts))
            o.append(f'<path d="{d}" fill="none" stroke="{color}" stroke-width="2"/>')
            for s, med, lo, hi in pts:
                o.append(f'<line x1="{x(s):.1f}" y1="{y(lo):.1f}" x2="{x(s):.1f}" y2="{y(hi):.1f}" stroke="{color}"/>')
                o.append(f'<circle cx="{x(s):.1f}" cy="{y(med):.1f}" r="3" fill="{color}"/>')
            o.append(f'<line x1="{L + pw + 12}" y1="{ly}" x2="{L + pw + 36}" y2="{ly}" stroke="{color}" stroke-width="2"/>')
            o.append(f'<text x="{L + pw + 42}" y="{ly + 4}" font-size="11">{escape(label)}</text>')
        else:
            why = r["modes"][mode].get("error") or "no samples"
            o.append(f'<text x="{L + pw + 12}" y="{ly + 4}" fill="{color}" font-size="11">{escape(mode)}: not measured</text>')
            ly += 14
            o.append(f'<text x="{L + pw + 12}" y="{ly + 4}" fill="#555" font-size="9">({escape(why[:40])})</text>')
        ly += 22
    o.append("</svg>")
    print("\n".join(o))


if __name__ == "__main__":
    main()
