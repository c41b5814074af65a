#!/usr/bin/env python3
"""Plots a `pushdispatch-bench soak` CSV as an SVG of four panels (resident memory, file
descriptors, outbox depth, p99 delivery latency) against time; no dependency beyond Python.

    python3 scripts/soak_plot.py soak.csv soak.svg
"""
import csv
import sys


def main(source, target):
    rows = list(csv.DictReader(open(source)))
    if not rows:
        sys.exit("no samples in %s" % source)
    panels = [
        ("rss_mib", "resident memory (MiB)"),
        ("fds", "file descriptors"),
        ("outbox_depth", "outbox depth"),
        ("p99_ms", "p99 delivery latency (ms, per 10 s)"),
        ("delivered_per_s", "deliveries per second"),
    ]
    width, height, margin = 900, 170, 60
    seconds = [float(r["seconds"]) for r in rows]
    right = max(seconds) or 1
    out = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">'
           % (width, height * len(panels) + 20)]
    for index, (column, title) in enumerate(panels):
        values = [float(r[column]) for r in rows]
        top = index * height + 10
        low, high = 0.0, max(values) * 1.1 or 1.0
        out.append('<text x="%d" y="%d" font-weight="bold">%s (min %.1f, max %.1f, last %.1f)</text>'
                   % (margin, top + 12, title, min(values), max(values), values[-1]))
        x0, y0, w, h = margin, top + 20, width - margin - 20, height - 45
        out.append('<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#ccc"/>' % (x0, y0, w, h))
        for fraction in (0, 0.5, 1):
            y = y0 + h - fraction * h
            out.append('<text x="%d" y="%.1f" text-anchor="end">%.0f</text>' % (x0 - 4, y + 4, low + fraction * (high - low)))
        for minute in range(0, int(right // 60) + 1, 5):
            x = x0 + minute * 60 / right * w
            out.append('<text x="%.1f" y="%d" text-anchor="middle">%d min</text>' % (x, y0 + h + 14, minute))
        points = " ".join("%.1f,%.1f" % (x0 + s / right * w, y0 + h - (v - low) / (high - low) * h) for s, v in zip(seconds, values))
        out.append('<polyline points="%s" fill="none" stroke="#1f77b4" stroke-width="1.5"/>' % points)
    out.append("</svg>")
    open(target, "w").write("\n".join(out))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
