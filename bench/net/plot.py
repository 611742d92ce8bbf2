#!/usr/bin/env python3
"""Writes bench/net's SVG bar charts from net.json, one bar per configuration in each test's group
(median over the rounds; a thin line spans min-max), drawn with bench/lib/svg_chart.py:
  PREFIX-tcp.svg      TCP throughput (Mbit/s)
  PREFIX-tcp-cpu.svg  host CPU per GB (s/GB), also at the paced 20 Mbit/s: the dark part is outside guest mode
  PREFIX-udp.svg      UDP 64-byte packets/s received
  PREFIX-udp-cpu.svg  host CPU per packet at the tap (µs), dark part outside guest mode
  PREFIX-ping.svg     ping round trip p50 and p99 (µs)

Usage: plot.py NET.json PREFIX
"""
import os
import sys
from xml.sax.saxutils import escape

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from results import load  # noqa: E402
from svg_chart import Chart, nice_max  # noqa: E402

COLORS = {"qemu": "#d62728", "qemu-vhost": "#ff9896", "tern": "#1f77b4", "tern-vhost": "#aec7e8"}
OTHER_COLORS = ["#2ca02c", "#98df8a", "#9467bd", "#c5b0d5", "#ff7f0e", "#ffbb78"]
SHORT = {"tcp-g2h-1": "guest→L1 ×1", "tcp-g2h-4": "guest→L1 ×4", "tcp-h2g-1": "L1→guest ×1",
         "tcp-h2g-4": "L1→guest ×4", "udp64-g2h": "guest→L1", "udp64-h2g": "L1→guest", "ping": "L1→guest",
         "tcp-g2h-20m": "g→L1 20M", "tcp-h2g-20m": "L1→g 20M", "udp64-g2h-1k": "g→L1 1k/s",
         "udp64-h2g-1k": "L1→g 1k/s"}


def color_of(cfg, order):
    if cfg in COLORS:
        return COLORS[cfg]
    others = [c for c in order if c not in COLORS]
    return OTHER_COLORS[others.index(cfg) % len(OTHER_COLORS)]


def stat(r, cfg, test, key):
    return r["configs"][cfg]["tests"].get(test, {}).get("stats", {}).get(key)


def bars(r, groups, title, ylabel, under=None, fmt="{:.0f}"):
    """One grouped bar chart: groups = [(test, key, label)], a bar per configuration in each (the key's
    median, its value on top, a min-max line); under: {key: key2}, key2 drawn darker inside the bar."""
    cfgs = [c for c, e in r["configs"].items() if not e.get("skipped")]
    vals = [s["max"] for c in cfgs for t, k, _ in groups if (s := stat(r, c, t, k))]
    ch = Chart(760, 420, (80, 170, 50, 70), ymax=nice_max(max(vals or [1]) * 1.1), xmax=len(groups))
    rounds = r.get("rounds", 1)
    ch.titles(title, (f"median of {rounds} rounds, " if rounds > 1 else "")
              + f"nested test host, {r['date'][:10]}, build {r.get('git_rev', '?')}")
    ch.y_grid([ch.ymax * i / 5 for i in range(6)], lambda v: fmt.format(v))
    ch.frame("", ylabel)
    n = max(len(cfgs), 1)
    w = 0.8 / n
    for i, (t, key, label) in enumerate(groups):
        ch.o.append(f'<text x="{ch.x(i + 0.5):.1f}" y="{ch.T + ch.ph + 18}" text-anchor="middle">'
                    f'{escape(label)}</text>')
        for j, c in enumerate(cfgs):
            s = stat(r, c, t, key)
            if not s:
                continue
            x0 = i + 0.1 + j * w
            color = color_of(c, list(r["configs"]))
            ch.o.append(f'<rect x="{ch.x(x0):.1f}" y="{ch.y(s["median"]):.1f}" width="{ch.x(w) - ch.L:.1f}" '
                        f'height="{ch.y(0) - ch.y(s["median"]):.1f}" fill="{color}" stroke="#333" stroke-width="0.5"/>')
            u = under and stat(r, c, t, under.get(key))
            if u:
                ch.o.append(f'<rect x="{ch.x(x0):.1f}" y="{ch.y(u["median"]):.1f}" width="{ch.x(w) - ch.L:.1f}" '
                            f'height="{ch.y(0) - ch.y(u["median"]):.1f}" fill="#000" fill-opacity="0.35"/>')
            if s["n"] > 1:
                ch.bar(x0 + w / 2, s["min"], s["max"], "#000")
            top = max(s["median"], s["max"] if s["n"] > 1 else 0)
            ch.o.append(f'<text x="{ch.x(x0 + w / 2):.1f}" y="{ch.y(top) - 4:.1f}" text-anchor="middle" '
                        f'font-size="10">{escape(fmt.format(s["median"]))}</text>')
    ly = ch.T + 10
    for c in cfgs:
        ch.o.append(f'<rect x="{ch.L + ch.pw + 15}" y="{ly - 6}" width="30" height="12" fill="{color_of(c, list(r["configs"]))}"/>')
        ch.legend_text(52, ly + 4, c)
        ly += 20
    for c, e in r["configs"].items():
        if e.get("skipped"):
            ch.legend_text(15, ly + 4, f"{c}: skipped", fill="#555", font_size=10)
            ly += 16
    if under:
        ch.legend_text(15, ly + 14, "dark: outside guest mode", fill="#555", font_size=10)
    if rounds > 1:
        ch.legend_text(15, ly + 30, "line: min-max of the rounds", fill="#555", font_size=10)
    return str(ch)


def main():
    r = load(sys.argv[1])
    prefix = sys.argv[2]
    tcp = [t for t in r["tests"] if t.startswith("tcp")]
    udp = [t for t in r["tests"] if t.startswith("udp")]
    charts = {
        "tcp": bars(r, [(t, "mbit_s", SHORT[t]) for t in tcp if not t.endswith("-20m")],
                    "TCP throughput (iperf3, receiver)", "Mbit/s"),
        "tcp-cpu": bars(r, [(t, "cpu_s_per_gb", SHORT[t]) for t in tcp],
                        "Host CPU per GB of TCP (VMM process + vhost workers)", "CPU s per GB",
                        under={"cpu_s_per_gb": "cpu_s_per_gb_outside_guest"}),
        "udp": bars(r, [(t, "pps", SHORT[t]) for t in udp if not t.endswith("-1k")], "UDP, 64-byte payloads, as fast as the sender goes",
                    "packets/s received"),
        "udp-cpu": bars(r, [(t, "cpu_us_per_packet", SHORT[t]) for t in udp],
                        "Host CPU per packet, UDP 64 B (VMM + vhost workers)", "CPU µs per tap packet",
                        under={"cpu_us_per_packet": "cpu_us_per_packet_outside_guest"}),
        "ping": bars(r, [("ping", "p50_us", "p50"), ("ping", "p99_us", "p99")],
                     "ping -i 0.01 round trip, L1 → guest", "µs"),
    }
    for name, svg in charts.items():
        with open(f"{prefix}-{name}.svg", "w") as f:
            f.write(svg + "\n")


if __name__ == "__main__":
    main()
