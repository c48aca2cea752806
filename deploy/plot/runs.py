#!/usr/bin/env python3
"""runs: one table over many loadgen-node output folders, and load sweeps.

    runs.py DIR [DIR...] [--csv FILE] [--json FILE] [--svg FILE] [--y p99|ttft|tpot]
    runs.py --sweep KEY=V1,V2,... --out-dir DIR [--svg FILE] [...] -- LOADGEN_NODE [ARGS...]

Report: every folder holding mlperf_log_detail.txt under the DIRs (a run folder, or a folder of
run folders, searched to any depth) becomes one row: folder, scenario, mode, result, the
throughput (samples/s; tokens/s where the run counted tokens), the 50th and 99th percentile
latency, TTFT and TPOT at the 99th percentile (token runs), errors, the SUT name. Printed as a
table; --csv and --json write the same rows; --svg draws throughput against --y (p99 by default;
ttft or tpot for token runs), one point per run, INVALID runs hollow, the Pareto front (the runs
no other run beats on both axes) joined by a line.

Sweep: runs LOADGEN_NODE ARGS once per value, each into DIR/KEY=VALUE/, then reports over them
and draws DIR/sweep.svg (or --svg). KEY is a TestSettings key given as --set KEY=VALUE
(server_target_qps for a Server load sweep, offline_expected_qps, ...) or, when it starts with
"--", a loadgen-node option given as KEY VALUE. A point that exits with a status other than 0 (VALID) or 1 (INVALID) stops the sweep.

Reads the detail log's `:::MLLOG {json}` lines (the official key names, which both front ends
write). Python 3 standard library only. Exit status: 0; 1 when no run was found or a sweep point
failed; 2 for bad arguments.
"""
import argparse
import csv
import json
import math
import os
import re
import subprocess
import sys

COLUMNS = ["run", "scenario", "mode", "result", "throughput", "unit", "p50_ms", "p99_ms",
           "ttft_p99_ms", "tpot_p99_ms", "errors", "sut_name"]


def read_detail(path):
    """The detail log's values by key (the last one of each key wins)."""
    values = {}
    with open(path, errors="replace") as f:
        for line in f:
            i = line.find(":::MLLOG")
            if i < 0:
                continue
            try:
                rec = json.loads(line[i + len(":::MLLOG"):])
            except ValueError:
                continue
            if isinstance(rec, dict) and "key" in rec:
                values[rec["key"]] = rec.get("value")
    return values


def pct_key(values, pattern):
    """The value of the first key matching |pattern| with the 99.00 percentile, else None."""
    for k, v in values.items():
        if re.fullmatch(pattern, k) and isinstance(v, (int, float)):
            return v
    return None


def ms(ns):
    return None if ns is None else ns / 1e6


def row_of(folder):
    d = read_detail(os.path.join(folder, "mlperf_log_detail.txt"))
    scenario = d.get("effective_scenario") or d.get("requested_scenario") or "?"
    tokens = d.get("result_completed_tokens_per_second") or d.get("result_tokens_per_second")
    if tokens:
        thr, unit = tokens, "tokens/s"
    elif scenario == "Server":
        thr, unit = d.get("result_completed_samples_per_sec") or d.get("result_scheduled_samples_per_sec"), "samples/s"
    else:
        thr, unit = d.get("result_samples_per_second"), "samples/s"
    mode = d.get("effective_test_mode", "?")
    return {
        "run": folder,
        "scenario": scenario,
        "mode": mode,
        "result": d.get("result_validity", "?"),
        "throughput": thr,
        "unit": unit,
        "p50_ms": ms(d.get("result_50.00_percentile_latency_ns")),
        "p99_ms": ms(d.get("result_99.00_percentile_latency_ns")),
        "ttft_p99_ms": ms(pct_key(d, r"result_first_token_99\.00?_percentile_latency_ns")),
        "tpot_p99_ms": ms(pct_key(d, r"result_time_per_output_token_99\.00?_percentile_ns")),
        "errors": d.get("num_errors"),
        "sut_name": d.get("sut_name", ""),
    }


def find_runs(dirs):
    found = []
    for top in dirs:
        if not os.path.isdir(top):
            raise SystemExit(f"runs: {top}: not a folder")
        for here, subdirs, files in os.walk(top):
            subdirs.sort()
            if "mlperf_log_detail.txt" in files:
                found.append(here)
    return found


def fmt(v):
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.4g}" if abs(v) < 1e5 else f"{v:.0f}"
    return str(v)


def print_table(rows, out=sys.stdout):
    cells = [[fmt(r[c]) for c in COLUMNS] for r in rows]
    widths = [max(len(c), *(len(x[i]) for x in cells)) if cells else len(c) for i, c in enumerate(COLUMNS)]
    print("  ".join(c.ljust(w) for c, w in zip(COLUMNS, widths)), file=out)
    for x in cells:
        print("  ".join(v.ljust(w) for v, w in zip(x, widths)), file=out)


def pareto(points):
    """The points (x, y, i) no other point beats on both axes: more throughput, less latency."""
    front, best_y = [], math.inf
    for x, y, i in sorted(points, key=lambda p: (-p[0], p[1])):
        if y < best_y:
            front.append((x, y, i))
            best_y = y
    return sorted(front)


def svg(rows, ycol, path, title):
    pts = [(r["throughput"], r[ycol], i) for i, r in enumerate(rows)
           if isinstance(r["throughput"], (int, float)) and isinstance(r[ycol], (int, float))]
    if not pts:
        raise SystemExit(f"runs: no run has both a throughput and {ycol}: nothing to draw")
    W, H, L, R, T, B = 720, 440, 80, 20, 40, 60
    xmax = max(p[0] for p in pts) * 1.1 or 1
    ymax = max(p[1] for p in pts) * 1.1 or 1
    sx = lambda x: L + (W - L - R) * x / xmax
    sy = lambda y: H - B - (H - T - B) * y / ymax
    unit = rows[pts[0][2]]["unit"]
    ylab = {"p99_ms": "latency p99 (ms)", "ttft_ms": "TTFT p99 (ms)", "ttft_p99_ms": "TTFT p99 (ms)",
            "tpot_p99_ms": "TPOT p99 (ms)"}.get(ycol, ycol)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="12">',
           f'<rect width="{W}" height="{H}" fill="white"/>',
           f'<text x="{W / 2}" y="22" text-anchor="middle" font-size="14">{title}</text>',
           f'<line x1="{L}" y1="{H - B}" x2="{W - R}" y2="{H - B}" stroke="black"/>',
           f'<line x1="{L}" y1="{T}" x2="{L}" y2="{H - B}" stroke="black"/>',
           f'<text x="{(L + W - R) / 2}" y="{H - 15}" text-anchor="middle">throughput ({unit})</text>',
           f'<text x="18" y="{(T + H - B) / 2}" text-anchor="middle" transform="rotate(-90 18 {(T + H - B) / 2})">{ylab}</text>']
    for k in range(6):
        xv, yv = xmax * k / 5, ymax * k / 5
        out.append(f'<text x="{sx(xv)}" y="{H - B + 16}" text-anchor="middle">{fmt(xv)}</text>')
        out.append(f'<text x="{L - 6}" y="{sy(yv) + 4}" text-anchor="end">{fmt(yv)}</text>')
    front = pareto(pts)
    if len(front) > 1:
        d = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y, _ in front)
        out.append(f'<polyline points="{d}" fill="none" stroke="#1f77b4" stroke-width="1.5"/>')
    for x, y, i in pts:
        valid = rows[i]["result"] == "VALID"
        fill = "#1f77b4" if valid else "white"
        out.append(f'<circle cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="5" fill="{fill}" stroke="#1f77b4"/>')
        label = os.path.basename(rows[i]["run"].rstrip("/"))
        out.append(f'<text x="{sx(x) + 7:.1f}" y="{sy(y) - 7:.1f}" font-size="10">{label}</text>')
    out.append(f'<text x="{W - R}" y="{T - 6}" text-anchor="end" font-size="10">filled: VALID, hollow: INVALID; '
               f'line: Pareto front</text>')
    out.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


def report(dirs, args):
    rows = [row_of(d) for d in find_runs(dirs)]
    if not rows:
        print(f"runs: no mlperf_log_detail.txt under {', '.join(dirs)}", file=sys.stderr)
        return 1
    print_table(rows)
    if args.csv:
        with open(args.csv, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=COLUMNS)
            w.writeheader()
            w.writerows(rows)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    if args.svg:
        ycol = {"p99": "p99_ms", "ttft": "ttft_p99_ms", "tpot": "tpot_p99_ms"}[args.y]
        svg(rows, ycol, args.svg, args.title or f"{len(rows)} runs")
        print(f"runs: plot in {args.svg}")
    return 0


def sweep(args, command):
    if not command:
        raise SystemExit("runs: --sweep needs the loadgen-node command after --")
    if not args.out_dir:
        raise SystemExit("runs: --sweep needs --out-dir")
    m = re.fullmatch(r"(--?[A-Za-z0-9_.-]+|[A-Za-z0-9_.]+)=(.+)", args.sweep)
    if not m:
        raise SystemExit(f"runs: --sweep {args.sweep!r}: not KEY=V1,V2,...")
    key, values = m.group(1), [v for v in m.group(2).split(",") if v]
    if "--output-dir" in command:
        raise SystemExit("runs: --sweep sets --output-dir per point; leave it out of the command")
    os.makedirs(args.out_dir, exist_ok=True)
    dirs = []
    for v in values:
        point = os.path.join(args.out_dir, f"{key.lstrip('-')}={v}")
        os.makedirs(point, exist_ok=True)
        extra = [key, v] if key.startswith("-") else ["--set", f"{key}={v}"]
        cmd = list(command) + extra + ["--output-dir", point]
        print(f"runs: {key}={v}: {' '.join(cmd)}", flush=True)
        rc = subprocess.call(cmd)
        if rc not in (0, 1):
            print(f"runs: the point {key}={v} failed (exit {rc}); the sweep stops", file=sys.stderr)
            return 1
        dirs.append(point)
    args.svg = args.svg or os.path.join(args.out_dir, "sweep.svg")
    args.title = args.title or f"sweep of {key.lstrip('-')}: {', '.join(values)}"
    return report(dirs, args)


def main():
    argv = sys.argv[1:]
    command = []
    if "--" in argv:
        i = argv.index("--")
        argv, command = argv[:i], argv[i + 1:]
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0], epilog=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dirs", nargs="*", help="run folders, or folders of run folders")
    ap.add_argument("--csv", help="write the rows as CSV")
    ap.add_argument("--json", help="write the rows as JSON")
    ap.add_argument("--svg", help="draw throughput against --y")
    ap.add_argument("--y", choices=["p99", "ttft", "tpot"], default="p99", help="the plot's latency axis")
    ap.add_argument("--title", default="", help="the plot's title")
    ap.add_argument("--sweep", help="KEY=V1,V2,...: run the command after -- once per value")
    ap.add_argument("--out-dir", help="--sweep: where the points' folders go")
    args = ap.parse_args(argv)
    if args.sweep:
        if args.dirs:
            ap.error("--sweep takes no DIR (its folders are under --out-dir)")
        return sweep(args, command)
    if command:
        ap.error("a command after -- needs --sweep")
    if not args.dirs:
        ap.error("give run folders, or --sweep")
    return report(args.dirs, args)


if __name__ == "__main__":
    sys.exit(main())
