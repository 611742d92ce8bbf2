#!/usr/bin/env python3
"""Writes bench/boot's SVG chart from boot.json: panels side by side, one column per VMM row,
  left   busybox guest: time to the guest's init marker (s), median (dot), min-max (whisker), each
         round (small dots)
  right  Debian guest: time to systemd's multi-user target (the TERN-DEBIAN-MARKER line), the same;
         the login prompt's median as a hollow square
No plotting library needed (bench/lib/svg_chart.py).

Usage: plot.py BOOT.json OUT.svg
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from results import load  # noqa: E402
from svg_chart import Chart, nice_max, side_by_side  # noqa: E402

COLORS = {"tern": "#1f77b4", "tern-pvh": "#1f77b4", "tern-bzimage": "#17becf", "qemu-pc": "#d62728",
          "qemu": "#d62728", "qemu-microvm": "#ff7f0e", "tern-seabios": "#1f77b4", "tern-ovmf": "#17becf",
          "qemu-seabios": "#d62728", "qemu-ovmf": "#ff7f0e"}
W, H = 460, 420


def panel(r, section, title, key, rounds_label, second=None):
    vmms = r[section]["vmms"]
    names = list(vmms)
    tops = [s["max"] for n in names for k in (key, second) if k for s in [vmms[n].get(k)] if s]
    ch = Chart(W, H, (70, 20, 50, 90), ymax=nice_max(max(tops or [1000]) / 1000 * 1.1), xmax=len(names) + 1)
    ch.titles(title, f"median of {rounds_label} (whisker: min-max), nested test host, {r['date'][:10]}, {r.get('git_rev')}")
    ch.y_grid([ch.ymax * i / 5 for i in range(6)], lambda v: f"{v:.0f}" if ch.ymax >= 10 else f"{v:.1f}")
    ch.frame("", "seconds from the VMM's exec")
    ch.x_labels([(i + 1, n) for i, n in enumerate(names)])
    for i, n in enumerate(names):
        v, color, x = vmms[n], COLORS.get(n, "#7f7f7f"), i + 1
        s = v.get(key)
        if s:
            ch.bar(x, s["min"] / 1000, s["max"] / 1000, color)
            for w in (s["min"], s["max"]):
                ch.o.append(f'<line x1="{ch.x(x) - 6:.1f}" y1="{ch.y(w / 1000):.1f}" x2="{ch.x(x) + 6:.1f}" '
                            f'y2="{ch.y(w / 1000):.1f}" stroke="{color}"/>')
            ch.marker(x, s["median"] / 1000, color)
            ch.o.append(f'<text x="{ch.x(x) - 10:.1f}" y="{ch.y(s["median"] / 1000) + 4:.1f}" text-anchor="end" '
                        f'font-size="10" fill="{color}">{s["median"] / 1000:.1f}</text>')
            sample_key = {"to_marker_ms": "marker_ms", "to_login_ms": "login_ms", "to_grub_menu_ms": "grub_ms"}[key]
            for smp in v["samples"]:
                if smp.get(sample_key) is not None:
                    ch.o.append(f'<circle cx="{ch.x(x) + 10:.1f}" cy="{ch.y(smp[sample_key] / 1000):.1f}" r="1.8" '
                                f'fill="{color}" fill-opacity="0.6"/>')
        t = v.get(second) if second else None
        if t:
            ch.o.append(f'<rect x="{ch.x(x) - 4:.1f}" y="{ch.y(t["median"] / 1000) - 4:.1f}" width="8" height="8" '
                        f'fill="white" stroke="{color}" stroke-width="2"/>')
        if not s:
            ch.o.append(f'<text x="{ch.x(x):.1f}" y="{ch.y(0) - 6:.1f}" text-anchor="middle" fill="#999">no data</text>')
    return ch


def main():
    r = load(sys.argv[1])
    charts = [panel(r, "busybox", "busybox guest: time to init marker", "to_marker_ms",
                    f"{r['busybox']['runs']} rounds")]
    if r.get("debian"):
        charts.append(panel(r, "debian", "Debian 12: time to multi-user (marker)", "to_marker_ms",
                            f"{r['debian']['rounds']} rounds; square: login prompt", second="to_login_ms"))
    with open(sys.argv[2], "w") as f:
        f.write(side_by_side(charts) + "\n")


if __name__ == "__main__":
    main()
