#!/usr/bin/env python3
"""Writes an SVG (stdout) of 4 KiB random-read and random-write IOPS against queue depth, one line per
VMM and direction, from bench/blk/results/blk.json. No plotting library needed.

Usage: plot.py [blk.json] > blk-iops.svg
"""
import json
import math
import os
import sys
from xml.sax.saxutils import escape

W, H = 720, 440
L, R, T, B = 80, 200, 50, 60  # margins
COLORS = {"qemu": "#d62728", "tern": "#1f77b4"}
DASH = {"randread": "", "randwrite": "6,4"}


def nice_max(v):
    if v <= 0:
        return 1
    e = 10 ** math.floor(math.log10(v))
    for m in (1, 2, 2.5, 5, 10):
        if m * e >= v:
            return m * e
    return 10 * e


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "results", "blk.json")
    with open(path) as f:
        r = json.load(f)
    curves = r.get("iops_vs_queue_depth", {})
    qds = sorted({int(q) for v in curves.values() for c in v.values() for q in c} or {1, 4, 16, 64})
    ymax = nice_max(max([x for v in curves.values() for c in v.values() for x in c.values()] or [1]) * 1.05)
    pw, ph = W - L - R, H - T - B

    def x(qd):
        lo, hi = math.log2(qds[0]), math.log2(qds[-1])
        return L + (pw * (math.log2(qd) - lo) / (hi - lo) if hi > lo else pw / 2)

    def y(v):
        return T + ph - ph * v / ymax

    o = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="12">',
         f'<rect width="{W}" height="{H}" fill="white"/>',
         f'<text x="{L + pw / 2}" y="22" text-anchor="middle" font-size="15">4 KiB random I/O in the guest: IOPS vs queue depth</text>',
         f'<text x="{L + pw / 2}" y="38" text-anchor="middle" fill="#555">virtio-blk, direct I/O, fio {escape(r["guest"]["fio_engine"])}, '
         f'{r["guest"]["runtime_s"]} s per point, nested test host ({escape(r["date"][:10])})</text>']
    for i in range(6):
        v = ymax * i / 5
        o.append(f'<line x1="{L}" y1="{y(v):.1f}" x2="{L + pw}" y2="{y(v):.1f}" stroke="#ddd"/>')
        o.append(f'<text x="{L - 8}" y="{y(v) + 4:.1f}" text-anchor="end">{v:.0f}</text>')
    for q in qds:
        o.append(f'<line x1="{x(q):.1f}" y1="{T}" x2="{x(q):.1f}" y2="{T + ph}" stroke="#eee"/>')
        o.append(f'<text x="{x(q):.1f}" y="{T + ph + 18}" text-anchor="middle">{q}</text>')
    o.append(f'<rect x="{L}" y="{T}" width="{pw}" height="{ph}" fill="none" stroke="#333"/>')
    o.append(f'<text x="{L + pw / 2}" y="{H - 18}" text-anchor="middle">queue depth (iodepth)</text>')
    o.append(f'<text transform="translate(20,{T + ph / 2}) rotate(-90)" text-anchor="middle">IOPS</text>')

    ly = T + 10
    for vmm, entry in r["vmms"].items():
        color = COLORS.get(vmm, "#2ca02c")
        for rw in ("randread", "randwrite"):
            pts = sorted((int(q), v) for q, v in curves.get(vmm, {}).get(rw, {}).items())
            label = f"{vmm} {rw}"
            if pts:
                path_d = " ".join(f"{'M' if i == 0 else 'L'}{x(q):.1f},{y(v):.1f}" for i, (q, v) in enumerate(pts))
                dash = f' stroke-dasharray="{DASH[rw]}"' if DASH[rw] else ""
                o.append(f'<path d="{path_d}" fill="none" stroke="{color}" stroke-width="2"{dash}/>')
                for q, v in pts:
                    o.append(f'<circle cx="{x(q):.1f}" cy="{y(v):.1f}" r="3" fill="{color}"/>')
                dash = f' stroke-dasharray="{DASH[rw]}"' if DASH[rw] else ""
                o.append(f'<line x1="{L + pw + 15}" y1="{ly}" x2="{L + pw + 45}" y2="{ly}" stroke="{color}" stroke-width="2"{dash}/>')
                o.append(f'<text x="{L + pw + 52}" y="{ly + 4}">{escape(label)}</text>')
                ly += 20
        if entry.get("skipped"):
            o.append(f'<text x="{L + pw + 15}" y="{ly + 4}" fill="{color}">{escape(vmm)}: skipped</text>')
            o.append(f'<text x="{L + pw + 15}" y="{ly + 18}" fill="#555" font-size="10">({escape(entry["skipped"])})</text>')
            ly += 36
    o.append("</svg>")
    print("\n".join(o))


if __name__ == "__main__":
    main()
