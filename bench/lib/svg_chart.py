"""A small SVG line chart for the bench plots (no plotting library needed): a white page with a
title and a subtitle, a plot frame with grid lines and axis labels, curves with point markers and
min-max bars, and a legend in the right margin. Coordinates are data values; x is linear from 0 or
log2 over [lo, hi], y linear from 0 to ymax.
"""
import math
from xml.sax.saxutils import escape


def nice_max(v):
    """The smallest 1, 2, 2.5, 5 or 10 times a power of ten that is >= v (1 for v <= 0)."""
    if v <= 0:
        return 1
    e = 10 ** math.floor(math.log10(v))
    for m in (1, 2, 2.5, 5, 10):
        if m * e >= v:
            return m * e
    return 10 * e


def nice_step(v):
    """A round grid step (1, 2, 2.5 or 5 times a power of ten) for about five lines up to v."""
    if v <= 0:
        return 1
    return nice_max(v / 5)


def _attrs(attrs):
    return "".join(f' {k.replace("_", "-")}="{v}"' for k, v in attrs.items())


class Chart:
    """One chart, drawn in call order; str(chart) is the SVG document."""

    def __init__(self, width, height, margins, ymax, xmax=None, xlog=None):
        """margins = (left, right, top, bottom) in px; xlog = (lo, hi) for a log2 x axis, else xmax."""
        self.W, self.H = width, height
        self.L, self.R, self.T, self.B = margins
        self.pw, self.ph = width - self.L - self.R, height - self.T - self.B
        self.ymax, self.xmax, self.xlog = ymax, xmax, xlog
        self.o = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
                  f'font-family="sans-serif" font-size="12">',
                  f'<rect width="{width}" height="{height}" fill="white"/>']

    def x(self, v):
        if self.xlog:
            lo, hi = math.log2(self.xlog[0]), math.log2(self.xlog[1])
            return self.L + (self.pw * (math.log2(v) - lo) / (hi - lo) if hi > lo else self.pw / 2)
        return self.L + self.pw * v / self.xmax

    def y(self, v):
        return self.T + self.ph - self.ph * v / self.ymax

    def titles(self, title, subtitle):
        mid = self.L + self.pw / 2
        self.o.append(f'<text x="{mid}" y="22" text-anchor="middle" font-size="15">{escape(title)}</text>')
        self.o.append(f'<text x="{mid}" y="38" text-anchor="middle" fill="#555">{escape(subtitle)}</text>')

    def y_grid(self, values, label):
        """A horizontal grid line and a left label (label(v), a string) at each value."""
        for v in values:
            self.o.append(f'<line x1="{self.L}" y1="{self.y(v):.1f}" x2="{self.L + self.pw}" y2="{self.y(v):.1f}" stroke="#ddd"/>')
            self.o.append(f'<text x="{self.L - 8}" y="{self.y(v) + 4:.1f}" text-anchor="end">{label(v)}</text>')

    def x_grid(self, values):
        """A vertical grid line and a label below the frame at each value."""
        for v in values:
            self.o.append(f'<line x1="{self.x(v):.1f}" y1="{self.T}" x2="{self.x(v):.1f}" y2="{self.T + self.ph}" stroke="#eee"/>')
            self.o.append(f'<text x="{self.x(v):.1f}" y="{self.T + self.ph + 18}" text-anchor="middle">{v}</text>')

    def x_labels(self, pairs, rotate=-30):
        """Category labels below the frame: [(x, text)], turned by `rotate` degrees."""
        for v, text in pairs:
            xx, yy = self.x(v), self.T + self.ph + 16
            self.o.append(f'<text x="{xx:.1f}" y="{yy}" text-anchor="end" '
                          f'transform="rotate({rotate},{xx:.1f},{yy})">{escape(text)}</text>')

    def hline(self, value, color, dash="", label=""):
        """A horizontal line across the frame at y = value, with an optional label at its right end."""
        self.o.append(f'<line x1="{self.L}" y1="{self.y(value):.1f}" x2="{self.L + self.pw}" y2="{self.y(value):.1f}" '
                      f'stroke="{color}"{self._dash(dash)}/>')
        if label:
            self.o.append(f'<text x="{self.L + self.pw - 4}" y="{self.y(value) - 4:.1f}" text-anchor="end" '
                          f'fill="{color}" font-size="10">{escape(label)}</text>')

    def frame(self, xlabel, ylabel):
        self.o.append(f'<rect x="{self.L}" y="{self.T}" width="{self.pw}" height="{self.ph}" fill="none" stroke="#333"/>')
        self.o.append(f'<text x="{self.L + self.pw / 2}" y="{self.H - 18}" text-anchor="middle">{escape(xlabel)}</text>')
        self.o.append(f'<text transform="translate(20,{self.T + self.ph / 2}) rotate(-90)" '
                      f'text-anchor="middle">{escape(ylabel)}</text>')

    def curve(self, points, color, dash=""):
        """A 2 px line through [(x, y), ...]; dash is an SVG stroke-dasharray ("" = solid)."""
        d = " ".join(f"{'M' if i == 0 else 'L'}{self.x(a):.1f},{self.y(b):.1f}" for i, (a, b) in enumerate(points))
        self.o.append(f'<path d="{d}" fill="none" stroke="{color}" stroke-width="2"{self._dash(dash)}/>')

    def marker(self, a, b, color):
        self.o.append(f'<circle cx="{self.x(a):.1f}" cy="{self.y(b):.1f}" r="3" fill="{color}"/>')

    def bar(self, a, lo, hi, color):
        """A vertical min-max bar at x = a."""
        self.o.append(f'<line x1="{self.x(a):.1f}" y1="{self.y(lo):.1f}" x2="{self.x(a):.1f}" y2="{self.y(hi):.1f}" stroke="{color}"/>')

    def legend_line(self, x1, x2, ly, color, dash=""):
        """A legend sample from x1 to x2 px right of the frame, at height ly px."""
        self.o.append(f'<line x1="{self.L + self.pw + x1}" y1="{ly}" x2="{self.L + self.pw + x2}" y2="{ly}" '
                      f'stroke="{color}" stroke-width="2"{self._dash(dash)}/>')

    def legend_text(self, dx, ly, text, **attrs):
        """Legend text dx px right of the frame, baseline at ly px; attrs: fill=..., font_size=..."""
        self.o.append(f'<text x="{self.L + self.pw + dx}" y="{ly}"{_attrs(attrs)}>{escape(text)}</text>')

    @staticmethod
    def _dash(dash):
        return f' stroke-dasharray="{dash}"' if dash else ""

    def __str__(self):
        return "\n".join(self.o + ["</svg>"])


def side_by_side(charts):
    """One SVG document with the charts next to each other."""
    width = sum(c.W for c in charts)
    height = max(c.H for c in charts)
    out, x = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}">'], 0
    for c in charts:
        out.append(str(c).replace("<svg ", f'<svg x="{x}" y="0" ', 1))
        x += c.W
    return "\n".join(out + ["</svg>"])
