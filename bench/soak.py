#!/usr/bin/env python3
"""Soak benchmark: a long Server run over two sut-nodes at a fixed share of the measured maximum,
reporting errors, resident memory over time and latency percentiles minute by minute.

    bench/soak.sh                      10 minutes at 80 % of the maximum found by a short sweep
    bench/soak.sh --minutes 2 --qps 100000 --out DIR

Steps: two sut-nodes (null backend, 64-byte samples as in row B1 of bench/run.py) on loopback;
unless --qps is given, a sweep of short Server runs (1 ms p99 bound) finds the highest VALID
target QPS; then one run of --minutes at --share of it, with loadgen-node's --latency-intervals
writing one line of percentiles per minute, while this script samples the RSS of the three
processes every --rss-every seconds. Prints the per-minute table, the RSS table and a verdict, and
writes everything as JSON (default build-bench/soak-results.json). Not part of CI.

What "flat" means here: a sut-node keeps nothing per sample after it answers (the rules forbid
caching), so its RSS after the first minute must not grow (the verdict allows 2 MiB of allocator
noise). loadgen-node keeps, as the official LoadGen does, every sample's latency until the end
(12 bytes a sample here, 8 more for the scheduled time --latency-intervals keeps): its growth is
expected, and the script reports it per sample so a leak (more than those 20 bytes) stands out.
"""
import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from run import Env, Node, loadgen  # noqa: E402  (the suite's process helpers)

SLOT_BYTES = 12 + 8  # per sample in loadgen-node: latency slot + QSL index, + scheduled time


def rss_kib(pid):
    """Resident set of a process in KiB (VmRSS), or None once it has exited."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def sweep(env, nodes, args):
    """The highest target QPS with a VALID short Server run (two tries per step)."""
    best = None
    q = args.sweep_start
    while q <= args.sweep_max:
        ok = False
        for _ in range(2):
            r = loadgen(env, "Server", nodes, {"server_target_qps": q, "server_target_latency_ns": 1000000,
                                               "min_duration_ms": args.sweep_ms})
            print(f"soak: sweep {q:>7} QPS: {'VALID' if r['valid'] else 'INVALID'}"
                  f" (p99 {r.get('p99', 0) / 1e3:.0f} us)", flush=True)
            if r["valid"]:
                ok = True
                break
        if not ok:
            break
        best = q
        q += args.sweep_step
    return best


def soak(env, nodes, qps, args):
    outdir = tempfile.mkdtemp(dir=env.tmp, prefix="soak.")
    interval_ms = 60000
    cmd = [env.lg, "--scenario", "Server", "--model", "resnet50", "--qsl-synthetic", "1024",
           "--sample-size", "64", "--output-dir", outdir, "--quiet", "--progress", "off",
           "--log-level", "warn", "--nodes", ",".join(n.addr for n in nodes),
           "--latency-intervals", str(interval_ms),
           "--set", f"server_target_qps={qps}", "--set", "server_target_latency_ns=1000000",
           "--set", f"min_duration_ms={int(args.minutes * 60000)}"]
    lg = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    env.procs.append(lg)
    t0 = time.monotonic()
    samples = []  # (seconds since start, lg KiB, node KiB...)
    while lg.poll() is None:
        row = [round(time.monotonic() - t0, 1), rss_kib(lg.pid)] + [rss_kib(n.proc.pid) for n in nodes]
        if row[1]:
            samples.append(row)
        try:
            lg.wait(timeout=args.rss_every)
        except subprocess.TimeoutExpired:
            pass
    out, err = lg.communicate()
    env.procs.remove(lg)
    return outdir, lg.returncode, err, samples


def node_table(err):
    """loadgen-node's end-of-run node table (printed on stderr): per-node counters."""
    rows = {}
    lines = err.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("node ") and "completed" in line:
            head = line.split()
            for body in lines[i + 1:]:
                cells = body.split()
                if len(cells) != len(head):
                    break
                rows[cells[0]] = dict(zip(head, cells))
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                                                    "build-bench"))
    ap.add_argument("--minutes", type=float, default=10.0)
    ap.add_argument("--share", type=float, default=0.8, help="share of the maximum QPS (default 0.8)")
    ap.add_argument("--qps", type=int, help="soak at this QPS (no sweep)")
    ap.add_argument("--sweep-start", type=int, default=100000)
    ap.add_argument("--sweep-step", type=int, default=20000)
    ap.add_argument("--sweep-max", type=int, default=400000)
    ap.add_argument("--sweep-ms", type=int, default=5000, help="duration of each sweep run")
    ap.add_argument("--rss-every", type=float, default=10.0, help="seconds between RSS samples")
    ap.add_argument("--json", help="results file (default BUILD/soak-results.json)")
    args = ap.parse_args()
    build = os.path.abspath(args.build)
    env = Env(build, quick=False, runs=1, out=None)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(3))
    try:
        nodes = [Node(env, f"soak-{i}", ["--backend", "null"]) for i in (1, 2)]
        maximum = args.qps and round(args.qps / args.share)
        if not args.qps:
            maximum = sweep(env, nodes, args)
            if not maximum:
                sys.exit(f"soak: no VALID Server run at {args.sweep_start} QPS; nothing to soak at")
        qps = args.qps or int(maximum * args.share / 1000) * 1000
        print(f"soak: {args.minutes:g} min of Server at {qps} QPS"
              f" ({args.share:.0%} of {maximum}), 2 sut-nodes (null), 64 B samples, p99 bound 1 ms", flush=True)
        outdir, code, err, rss = soak(env, nodes, qps, args)
        node_rows = node_table(err)
        rss_end = [rss_kib(n.proc.pid) for n in nodes]
        for n in nodes:
            n.stop()
    finally:
        env.cleanup()

    summary = open(os.path.join(outdir, "mlperf_log_summary.txt")).read()
    detail = open(os.path.join(outdir, "mlperf_log_detail.txt")).read()
    valid = "Result is : VALID" in summary
    m = re.search(r'"key": "num_errors", "value": (\d+)', detail)
    errors = int(m.group(1)) if m else None
    m = re.search(r"Completed samples per second\s*:\s*([0-9.]+)", summary)
    rate = float(m.group(1)) if m else 0.0
    intervals = []
    with open(os.path.join(outdir, "mlperf_log_latency_intervals.csv")) as f:
        next(f)
        for line in f:
            start, n, lost, p50, p90, p99, p999, mx = (int(x) for x in line.split(","))
            intervals.append({"minute": start // 60000 + 1, "samples": n, "lost": lost, "p50_us": p50 / 1e3,
                              "p90_us": p90 / 1e3, "p99_us": p99 / 1e3, "p99_9_us": p999 / 1e3,
                              "max_us": mx / 1e3})

    print()
    print("| minute | samples | p50 us | p90 us | p99 us | p99.9 us | max us |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for iv in intervals:
        # Samples scheduled after min_duration (the query count's round-up) form a short tail.
        label = iv["minute"] if (iv["minute"] - 1) * 60 < args.minutes * 60 else "tail"
        print(f"| {label} | {iv['samples']} | {iv['p50_us']:.1f} | {iv['p90_us']:.1f} | {iv['p99_us']:.1f}"
              f" | {iv['p99_9_us']:.1f} | {iv['max_us']:.0f} |")

    # RSS: one row per minute (the sample nearest each minute mark) plus the last.
    print()
    print("| t (s) | loadgen-node MiB | sut-node 1 MiB | sut-node 2 MiB |")
    print("|---:|---:|---:|---:|")
    marks, shown = [], set()
    for minute in range(0, int(args.minutes) + 1):
        near = min(rss, key=lambda r: abs(r[0] - minute * 60)) if rss else None
        if near and id(near) not in shown:
            marks.append(near)
            shown.add(id(near))
    if rss and id(rss[-1]) not in shown:
        marks.append(rss[-1])
    for r in marks:
        print(f"| {r[0]:.0f} | " + " | ".join("-" if v is None else f"{v / 1024:.1f}" for v in r[1:]) + " |")

    # Flatness: the nodes from the first minute on; loadgen-node per sample against its slots.
    after = [r for r in rss if r[0] >= 60] or rss
    verdict = []
    node_growth = []
    for i in range(len(nodes)):
        vals = [r[2 + i] for r in after if r[2 + i] is not None]
        growth = (max(vals) - vals[0]) if vals else 0
        node_growth.append(growth)
        verdict.append(f"sut-node {i + 1}: RSS {vals[0] / 1024:.1f} -> {vals[-1] / 1024:.1f} MiB after the first"
                       f" minute (max growth {growth} KiB)" if vals else f"sut-node {i + 1}: no RSS samples")
    # While issuing only: after the last issue loadgen-node writes its logs and frees its slots.
    lg_vals = [(r[0], r[1]) for r in after if r[0] <= args.minutes * 60 and r[1]]
    per_sample = None
    if len(lg_vals) >= 2 and rate > 0:
        (ta, a), (tb, b) = lg_vals[0], lg_vals[-1]
        if tb > ta:
            per_sample = (b - a) * 1024 / ((tb - ta) * rate)
            verdict.append(f"loadgen-node: {per_sample:.1f} bytes of RSS per sample while issuing"
                           f" (its latency slots are {SLOT_BYTES})")
    flat = all(g <= 2048 for g in node_growth)
    print()
    for v in verdict:
        print("soak: " + v)
    for name, row in sorted(node_rows.items()):
        print(f"soak: node {name}: sent {row.get('sent')}, completed {row.get('completed')}, failed"
              f" {row.get('failed')}, errors {row.get('errors')}, reconnects {row.get('recon')}")
    print(f"soak: {'VALID' if valid else 'INVALID'}, {rate:.0f} samples/s completed, num_errors {errors},"
          f" node RSS {'flat' if flat else 'GROWING'}; logs in {outdir}")

    result = {"qps": qps, "maximum_qps": maximum, "share": args.share, "minutes": args.minutes,
              "valid": valid, "num_errors": errors, "completed_per_s": rate, "intervals": intervals,
              "rss_kib": rss, "node_rss_growth_kib": node_growth, "node_rss_end_kib": rss_end,
              "loadgen_bytes_per_sample": per_sample, "nodes": node_rows, "exit": code,
              "outdir": outdir}
    path = args.json or os.path.join(build, "soak-results.json")
    with open(path, "w") as f:
        json.dump(result, f, indent=1)
    print(f"soak: results in {path}")
    return 0 if valid and errors == 0 and flat else 1


if __name__ == "__main__":
    sys.exit(main())
