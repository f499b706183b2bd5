#!/usr/bin/env python3
"""Draws the fast verifier's scaling (bench/fastcheck_bench JSON) as an SVG, stdlib only.

    python3 bench/scaling_plot.py fastcheck_bench.json bench/scaling.svg

Two panels, log-log: CPU ns per token against the row length L (8 documents a row) and against the number of
documents a row (L = 8192), for the fast verifier (BM_FastStepScaling) and the oracle (BM_OracleStepScaling).
A flat line is O(L) per row: constant cost per token.
"""
import json
import math
import sys

TO_NS = {"ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9}


def series(report):
    """{(case, panel): [(x, ns_per_token)]} from the benchmarks' CPU time and items processed."""
    out = {}
    for b in report["benchmarks"]:
        if b.get("run_type") == "aggregate" or b.get("error_occurred"):
            continue
        case, *args = b["name"].split("/")
        if case not in ("BM_FastStepScaling", "BM_OracleStepScaling") or len(args) < 2:
            continue
        L, D = int(args[0]), int(args[1])
        ns = 1e9 / b["items_per_second"]  # per token (slot), from CPU time
        if D == 8:
            out.setdefault((case, "L"), []).append((L, ns))
        if L == 8192:
            out.setdefault((case, "D"), []).append((D, ns))
    return {k: sorted(v) for k, v in out.items()}


def panel(x0, title, xlabel, lines, ymin, ymax):
    w, h, left, bottom = 420, 300, 60, 40
    xs = [x for pts in lines.values() for x, _ in pts]
    lx0, lx1 = math.log10(min(xs)), math.log10(max(xs))
    ly0, ly1 = math.log10(ymin), math.log10(ymax)
    px = lambda x: x0 + left + (math.log10(x) - lx0) / (lx1 - lx0 or 1) * (w - left - 20)
    py = lambda y: 20 + (ly1 - math.log10(y)) / (ly1 - ly0) * (h - bottom - 20)
    s = [f'<text x="{x0 + w / 2}" y="14" text-anchor="middle" font-weight="bold">{title}</text>',
         f'<rect x="{x0 + left}" y="20" width="{w - left - 20}" height="{h - bottom - 20}" fill="none" stroke="#999"/>']
    for e in range(math.floor(ly0), math.ceil(ly1) + 1):
        y = 10 ** e
        if ymin <= y <= ymax:
            s.append(f'<line x1="{x0 + left}" x2="{x0 + w - 20}" y1="{py(y):.1f}" y2="{py(y):.1f}" stroke="#eee"/>')
            s.append(f'<text x="{x0 + left - 4}" y="{py(y) + 4:.1f}" text-anchor="end">{y:g}</text>')
    for x in sorted(set(xs)):
        s.append(f'<text x="{px(x):.1f}" y="{h - bottom + 14}" text-anchor="middle">{x:g}</text>')
    s.append(f'<text x="{x0 + w / 2}" y="{h - 6}" text-anchor="middle">{xlabel}</text>')
    s.append(f'<text x="{x0 + 12}" y="{20 + (h - bottom) / 2}" transform="rotate(-90 {x0 + 12} {20 + (h - bottom) / 2})" '
             f'text-anchor="middle">CPU ns per token</text>')
    colours = {"BM_FastStepScaling": "#1f77b4", "BM_OracleStepScaling": "#d62728"}
    for case, pts in lines.items():
        path = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in pts)
        s.append(f'<polyline points="{path}" fill="none" stroke="{colours[case]}" stroke-width="2"/>')
        for x, y in pts:
            s.append(f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="3" fill="{colours[case]}"/>')
    return s


def main():
    report = json.load(open(sys.argv[1]))
    data = series(report)
    ys = [y for pts in data.values() for _, y in pts]
    ymin, ymax = 10 ** math.floor(math.log10(min(ys))), 10 ** math.ceil(math.log10(max(ys)))
    body = []
    body += panel(0, "cost per token vs row length (8 documents a row)", "row length L (slots)",
                  {c: v for (c, p), v in data.items() if p == "L"}, ymin, ymax)
    body += panel(440, "cost per token vs documents a row (L = 8192)", "documents per row",
                  {c: v for (c, p), v in data.items() if p == "D"}, ymin, ymax)
    legend = ['<rect x="70" y="308" width="12" height="4" fill="#1f77b4"/><text x="88" y="314">fast verifier (fastcheck)</text>',
              '<rect x="260" y="308" width="12" height="4" fill="#d62728"/><text x="278" y="314">oracle (CheckCase)</text>']
    ctx = report["context"]
    note = (f'<text x="440" y="314">8 rows a step, torchtune-packed encodings; {ctx.get("num_cpus")} CPUs, '
            f'load {", ".join(f"{x:.1f}" for x in ctx.get("load_avg", []))}</text>')
    svg = ('<svg xmlns="http://www.w3.org/2000/svg" width="880" height="322" font-family="sans-serif" font-size="11">'
           '<rect width="880" height="322" fill="white"/>' + "".join(body + legend) + note + "</svg>\n")
    with open(sys.argv[2], "w") as f:
        f.write(svg)


if __name__ == "__main__":
    main()
