#!/usr/bin/env python3
"""Writes bench/blk's SVG charts from blk.json, each two panels (4 KiB random read | random write)
against queue depth, one line per configuration (median over the rounds; a bar spans min-max):
  PREFIX-iops.svg  IOPS
  PREFIX-cpu.svg   host CPU per I/O, VMM + back-end process (solid: all of it, guest mode included;
                   dashed: outside guest mode)
  PREFIX-exits.svg KVM exits per I/O (solid: every exit; dashed: port + MMIO exits to the VMM), when
                   the run recorded them
  PREFIX-exit-reasons.svg  exits per I/O by exit reason (the test host's kvm_exit hist trigger),
                   stacked bars, one per configuration, a panel per job (randread-qd1, -qd4, -qd16,
                   randwrite-qd16, those that ran), when the run traced them
  PREFIX-storage.svg  IOPS on a log scale (the storage comparison of issue 12, drawn like the Xen
                   thread's: one line per configuration, from the host's own disk down to the
                   emulated IDE disk), when the run has a host row
No plotting library needed (bench/lib/svg_chart.py).

Usage: plot.py BLK.json PREFIX
"""
import math
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from results import load  # noqa: E402
from svg_chart import Chart, nice_max, side_by_side  # noqa: E402

COLORS = {"qemu": "#d62728", "qemu-qsd": "#ff7f0e", "qemu-vub": "#e377c2", "qemu-nvme": "#bcbd22",
          "qemu-ide": "#8c564b", "host": "#000000",
          "tern": "#1f77b4", "tern-qsd": "#2ca02c", "tern-vub": "#9467bd", "tern-nvme": "#17becf"}
OTHER_COLORS = ["#7f7f7f", "#aec7e8", "#ffbb78", "#98df8a", "#c5b0d5"]
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


class LogYChart(Chart):
    """A Chart whose y axis is log10 from ymin to ymax."""

    def __init__(self, width, height, margins, ymin, ymax, xlog):
        super().__init__(width, height, margins, ymax, xlog=xlog)
        self.ymin = ymin

    def y(self, v):
        lo, hi = math.log10(self.ymin), math.log10(self.ymax)
        return self.T + self.ph - self.ph * (math.log10(max(v, self.ymin)) - lo) / (hi - lo)


def log_ticks(lo, hi):
    """1, 2, 5 x 10^k from lo up to hi."""
    out, k = [], math.floor(math.log10(lo))
    while 10 ** k <= hi:
        out += [m * 10 ** k for m in (1, 2, 5) if lo <= m * 10 ** k <= hi]
        k += 1
    return out


def where(r):
    return "directly on this machine" if r.get("where") == "direct" else "nested test host"


def panel(r, rw, series, title, ylabel, legend, logy=False):
    """One chart: series = [(key, dash, label)] drawn for every configuration that ran (labels in the
    legend when there is more than one)."""
    cfgs = [c for c, e in r["configs"].items() if not e.get("skipped")]
    pts = {(c, k): points(r, c, rw, k) for c in cfgs for k, _, _ in series}
    qds = sorted({q for p in pts.values() for q, _ in p} or {1, 4, 16, 64})
    top = max([s["max"] for p in pts.values() for _, s in p] or [1])
    margins = (70, 190 if legend else 20, 50, 60)
    xlog = (qds[0] / 1.2, qds[-1] * 1.2)
    if logy:
        bottom = min([s["min"] for p in pts.values() for _, s in p if s["min"] > 0] or [1])
        ymin, ymax = 10 ** math.floor(math.log10(bottom)), 10 ** math.ceil(math.log10(top * 1.05))
        ch = LogYChart(W + (170 if legend else 0), H, margins, ymin, ymax, xlog)
    else:
        ch = Chart(W + (170 if legend else 0), H, margins, ymax=nice_max(top * 1.05), xlog=xlog)
    rounds = r.get("rounds", 1)
    ch.titles(title, (f"median of {rounds} rounds (bar: min-max), " if rounds > 1 else "")
              + f"{where(r)}, {r['date'][:10]}")
    if logy:
        ch.y_grid(log_ticks(ch.ymin, ch.ymax), lambda v: f"{v:g}")
    else:
        ch.y_grid([ch.ymax * i / 5 for i in range(6)], lambda v: f"{v:.2f}" if ch.ymax < 5 else f"{v:.0f}")
    ch.x_grid(qds)
    ch.frame("queue depth (iodepth)", ylabel)
    ly = ch.T + 10
    for i, c in enumerate(cfgs):
        color = color_of(c, list(r["configs"]))
        nudge = 2 ** ((i - (len(cfgs) - 1) / 2) * 0.04)  # side by side at each queue depth, not on top
        for key, dash, _ in series:
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
            for k, (_, dash, label) in enumerate(series):
                ch.legend_text(15, ly + 14 + 14 * k, f"{'dashed' if dash else 'solid'}: {label}",
                               fill="#555", font_size=10)
    return ch


# Stacked-bar colors per exit reason (the others in turn from REASON_OTHER), "other" grey.
REASON_COLORS = {"npf": "#1f77b4", "msr": "#ff7f0e", "interrupt": "#2ca02c", "vintr": "#d62728", "hlt": "#9467bd",
                 "io": "#8c564b", "cpuid": "#e377c2", "other": "#bbbbbb"}
REASON_OTHER = ["#17becf", "#bcbd22", "#7f7f7f", "#aec7e8", "#ffbb78"]
REASON_JOBS = ["randread-qd1", "randread-qd4", "randread-qd16", "randwrite-qd16"]
REASON_MAX = 7  # reasons drawn on their own; the rest as "other"


def reason_panels(r):
    """Exits per I/O by exit reason: per job a chart with a stacked bar per configuration (medians)."""
    cfgs = [c for c, e in r["configs"].items() if not e.get("skipped")]
    med = lambda c, job: {k: v["median"] for k, v in  # noqa: E731
                          r["configs"][c]["jobs"].get(job, {}).get("stats", {}).get("exit_reasons_per_io", {}).items()}
    alljobs = [j for j in r["method"]["jobs"] if j.startswith(("randread-", "randwrite-"))]
    cfgs = [c for c in cfgs if any(med(c, j) for j in alljobs)]  # not those run without the triggers
    jobs = [j for j in REASON_JOBS if any(med(c, j) for c in cfgs)] or \
        [j for j in alljobs if any(med(c, j) for c in cfgs)][:4]
    if not jobs:
        return []
    total = {}
    for j in jobs:
        for c in cfgs:
            for k, v in med(c, j).items():
                total[k] = total.get(k, 0) + v
    shown = [k for k, _ in sorted(total.items(), key=lambda kv: -kv[1])][:REASON_MAX]
    has_other = len(total) > len(shown)
    legend = shown + (["other"] if has_other else [])
    colors, n_other = {}, 0
    for k in legend:
        if k in REASON_COLORS:
            colors[k] = REASON_COLORS[k]
        else:
            colors[k] = REASON_OTHER[n_other % len(REASON_OTHER)]
            n_other += 1
    top = max(sum(med(c, j).values()) for j in jobs for c in cfgs)
    charts = []
    for i, j in enumerate(jobs):
        last = i == len(jobs) - 1
        w = max(300, 70 * len(cfgs) + 90) + (120 if last else 0)
        ch = Chart(w, H, (60, 130 if last else 10, 50, 75), ymax=nice_max(top * 1.05), xmax=len(cfgs))
        tr = r.get("kvm_trace_rounds", r.get("rounds", 1))  # runs before the traced rounds traced every round
        ch.titles(f"{j}: exits per I/O", "by exit reason" + (f", median of {tr} traced rounds" if tr > 1 else
                                                              ", one traced round"))
        ch.y_grid([ch.ymax * k / 5 for k in range(6)], lambda v: f"{v:.1f}")
        ch.frame("", "exits per I/O" if i == 0 else "")
        bw = ch.pw / len(cfgs) * 0.6
        for x, c in enumerate(cfgs):
            m, y0 = med(c, j), 0.0
            parts = [(k, m.get(k, 0)) for k in shown] + ([("other", sum(v for k, v in m.items() if k not in shown))]
                                                          if has_other else [])
            for k, v in parts:
                if v <= 0:
                    continue
                ch.o.append(f'<rect x="{ch.x(x + 0.5) - bw / 2:.1f}" y="{ch.y(y0 + v):.1f}" width="{bw:.1f}" '
                            f'height="{ch.y(y0) - ch.y(y0 + v):.1f}" fill="{colors[k]}"><title>{c} {k}: {v:.2f}</title></rect>')
                y0 += v
            if m:
                ch.o.append(f'<text x="{ch.x(x + 0.5):.1f}" y="{ch.y(y0) - 4:.1f}" text-anchor="middle" '
                            f'font-size="10">{y0:.2f}</text>')
        ch.x_labels([(x + 0.5, c) for x, c in enumerate(cfgs)])
        if last:
            ly = ch.T + 10
            for k in reversed(legend):
                ch.o.append(f'<rect x="{ch.L + ch.pw + 15}" y="{ly - 8}" width="12" height="12" fill="{colors[k]}"/>')
                ch.legend_text(32, ly + 2, k)
                ly += 18
            ch.legend_text(15, ly + 12, where(r), fill="#555", font_size=10)
            ch.legend_text(15, ly + 26, r["date"][:10], fill="#555", font_size=10)
        charts.append(ch)
    return charts


def main():
    r = load(sys.argv[1])
    prefix = sys.argv[2]
    rw = [("randread", "random read"), ("randwrite", "random write")]
    svgs = {
        "iops": [panel(r, d, [("iops", "", "")], f"4 KiB {t}: IOPS", "IOPS", legend=i == 1)
                 for i, (d, t) in enumerate(rw)],
        "cpu": [panel(r, d, [("cpu_us_per_io", "", "all of it"), ("cpu_us_per_io_outside_guest", "6,4", "outside guest mode")],
                      f"4 KiB {t}: host CPU per I/O", "µs per I/O (VMM + back-end)", legend=i == 1)
                for i, (d, t) in enumerate(rw)],
    }
    cfgs = r["configs"].values()
    if any("exits_per_io" in j["stats"] for c in cfgs for j in c["jobs"].values()):
        svgs["exits"] = [panel(r, d, [("exits_per_io", "", "every exit"),
                                      ("vmm_exits_per_io", "6,4", "exits to the VMM")],
                               f"4 KiB {t}: KVM exits per I/O", "exits per I/O", legend=i == 1)
                         for i, (d, t) in enumerate(rw)]
    reasons = reason_panels(r)
    if reasons:
        svgs["exit-reasons"] = reasons
    if "host" in r["configs"] and not r["configs"]["host"].get("skipped"):
        svgs["storage"] = [panel(r, d, [("iops", "", "")], f"4 KiB {t}: IOPS (log scale)", "IOPS", legend=i == 1,
                                 logy=True) for i, (d, t) in enumerate(rw)]
    for name, charts in svgs.items():
        with open(f"{prefix}-{name}.svg", "w") as f:
            f.write(side_by_side(charts) + "\n")


if __name__ == "__main__":
    main()
