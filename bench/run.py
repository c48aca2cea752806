#!/usr/bin/env python3
"""The benchmark suite: every harness figure next to the physical limit measured in the same run.

The machine is shared and noisy, so absolute numbers drift; the ratios to the references measured
minutes apart hold. Each row is the median of several runs, with min and max. Prints one table and
writes the same as JSON. Run through bench/run.sh, which builds the programs first.

Rows (bench/README.md explains each, and what limits it):
  R1-R5 references: plain-socket request/response (rawrr) at the harness's sizes, iperf3
  R6 the host's share of the issue lateness: a perfect spinner's lateness (spingaps); R6v: of one
     on every CPU at once, the gaps they all share
  B1 Server capacity    B2 Offline bandwidth   B3 SingleStream latency   B4 Name() round trip
  B5 memory, start-up   B6 CPU per sample      B7 compression (B7n: 1 Gbit/s netns, root)
  B8 multi-node scaling   B9 3D-UNet Offline over 10/25 Gbit/s netns, LZ4 vs none (root; unet_fabric.py)
  B10 1, 4, 16, 64 null nodes: Server capacity, Offline bandwidth, CPU per query, RSS per node
  T1 TLS cost
  U  the B1-B3 rows over ucx:// (Ut: UCX over TCP, Us: UCX over shared memory), next to tcp://
"""
import argparse
import calendar
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

from unet_fabric import b9_unet_fabric

HZ = os.sysconf("SC_CLK_TCK")


class Env:
    def __init__(self, build, quick, runs, out):
        self.build = build
        self.quick = quick
        self.runs = runs
        self.out = out
        self.sut = os.path.join(build, "sut-node", "sut-node")
        self.lg = os.path.join(build, "loadgen-node", "loadgen-node")
        self.rawrr = os.path.join(build, "bench", "rawrr")
        self.qdlbench = os.path.join(build, "bench", "qdlbench")
        self.spingaps = os.path.join(build, "bench", "spingaps")
        self.official = os.path.join(build, "bench", "official_null")
        self.official_root = ""
        self.tmp = tempfile.mkdtemp(prefix="mlperf-bench.")
        self.procs = []
        self.errors = []  # runs that failed (not a missed target): the bench exits 1 when any did
        for p in (self.sut, self.lg, self.rawrr, self.qdlbench, self.spingaps):
            if not os.access(p, os.X_OK):
                sys.exit(f"bench: {p} is missing; build first (bench/run.sh does)")

    def dur(self, full_ms, quick_ms):
        return quick_ms if self.quick else full_ms

    def cleanup(self):
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
        self.procs = []


class Node:
    """A sut-node on an ephemeral loopback port."""

    def __init__(self, env, name, args, tls=None, cpus=None):
        self.env = env
        port_file = os.path.join(env.tmp, f"{name}.port")
        if os.path.exists(port_file):
            os.unlink(port_file)
        scheme = os.environ.get("NSUT_BENCH_SCHEME", "")  # "ucx://" inside ucx_transport()
        cmd = [env.sut, "--listen", scheme + "127.0.0.1:0", "--port-file", port_file, "--name", name,
               "--log-level", "warn"] + args
        if scheme:  # the bench's own loopback: a trusted fabric (cmn/ucx.h)
            cmd += ["--ucx-trusted-fabric"]
        if tls:
            cmd += ["--tls-cert", tls["cert"], "--tls-key", tls["key"]]
        if cpus:  # the CPUs it may run on (taskset)
            cmd = ["taskset", "-c", ",".join(str(c) for c in sorted(cpus))] + cmd
        self.log = open(os.path.join(env.tmp, f"{name}.log"), "w")
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT)
        env.procs.append(self.proc)
        for _ in range(200):
            if os.path.exists(port_file) and open(port_file).read().strip():
                break
            if self.proc.poll() is not None:
                sys.exit(f"bench: sut-node {name} exited; see {self.log.name}")
            time.sleep(0.02)
        self.addr = scheme + "127.0.0.1:" + open(port_file).read().strip()

    def cpu_s(self):
        """User + system CPU seconds so far (/proc/PID/stat)."""
        with open(f"/proc/{self.proc.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / HZ

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(timeout=30)
        self.env.procs.remove(self.proc)


def run_cmd(cmd, timeout=600):
    """Runs a child; returns (exit code, stdout, rusage of that child)."""
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
    # wait4 already happened inside communicate; fall back to RUSAGE_CHILDREN deltas instead.
    return p.returncode, out, err


def loadgen(env, scenario, nodes, sets, extra=(), size=64, samples=1024, kind="random", compress="none",
            model="resnet50", rss=False):
    """One loadgen-node run; returns the parsed summary plus CPU seconds of loadgen-node (and,
    with rss, its peak RSS in bytes from GNU time, which reports the child's own)."""
    outdir = tempfile.mkdtemp(dir=env.tmp)
    cmd = (["/usr/bin/time", "-f", "%M"] if rss else []) + [env.lg, "--scenario", scenario, "--model", model, "--qsl-synthetic", str(samples),
           "--sample-size", str(size), "--synthetic-kind", kind, "--compress", compress,
           "--output-dir", outdir, "--quiet", "--progress", "off", "--log-level", "warn"]
    cmd += ["--nodes", ",".join(n.addr for n in nodes)] if nodes else ["--sut", "null"]
    if nodes and nodes[0].addr.startswith("ucx://"):
        cmd += ["--ucx-trusted-fabric"]
    for k, v in sets.items():
        cmd += ["--set", f"{k}={v}"]
    cmd += list(extra)
    before = os.times()
    cpu_nodes = [n.cpu_s() for n in nodes]
    t0 = time.monotonic()
    code, out, err = run_cmd(cmd)
    wall = time.monotonic() - t0
    after = os.times()
    r = parse_summary(os.path.join(outdir, "mlperf_log_summary.txt"))
    r["exit"] = code
    r["wall_s"] = wall
    r["lg_cpu_s"] = (after.children_user - before.children_user) + (after.children_system - before.children_system)
    r["node_cpu_s"] = sum(n.cpu_s() - c for n, c in zip(nodes, cpu_nodes))
    r["outdir"] = outdir
    if rss and err.strip() and err.strip().splitlines()[-1].isdigit():
        r["rss"] = int(err.strip().splitlines()[-1]) * 1024
    if code not in (0, 1):
        r["error"] = err.strip().splitlines()[-1] if err.strip() else f"exit {code}"
        env.errors.append(f"loadgen-node {scenario} ({' '.join(cmd[1:5])}...): {r['error']}")
    return r


def parse_summary(path):
    r = {"valid": False}
    if not os.path.exists(path):
        return r
    text = open(path).read()
    r["valid"] = "Result is : VALID" in text
    m = re.search(r"Samples per second\s*:\s*([0-9.e+]+)", text)
    if m:
        r["samples_per_s"] = float(m.group(1))
    m = re.search(r"Completed samples per second\s*:\s*([0-9.]+)", text)
    if m:
        r["samples_per_s"] = float(m.group(1))
    for pct in ("50.00", "90.00", "99.00"):
        m = re.search(pct + r" percentile latency \(ns\)\s*:\s*(\d+)", text)
        if m:
            r["p" + pct.split(".")[0]] = int(m.group(1))
    m = re.search(r"\n([0-9.]+)th percentile latency \(ns\)\s*:\s*(\d+)", text)
    if m:
        r["metric_latency"] = int(m.group(2))
    # The harness block (loadgen-node's own lateness), when the run has one.
    for key, label in (("late_p50", "Issue lateness p50"), ("late_p99", "Issue lateness p99"),
                       ("call_p99", "Issue hand-off p99"), ("floor_p99", "Host floor p99")):
        m = re.search(label + r" \(ns\)\s*:\s*(\d+)", text)
        if m:
            r[key] = int(m.group(1))
    # Why the issues at the tail of the lateness were late (shares of them, by cause).
    m = re.search(r"Issues at p99 lateness or more: \d+ \((.*)\)", text)
    if m:
        r["late_causes"] = {k.strip(): float(v) for k, v in re.findall(r"([^,]+?) ([0-9.]+) %", m.group(1))}
    m = re.search(r"Issue thread spinning \(%\)\s*:\s*([0-9.]+)", text)
    if m:
        r["spin_pct"] = float(m.group(1))
    return r


def rawrr(env, size, inflight, seconds, buffers=1, cross_cpu=False):
    cmd = [env.rawrr, "--size", str(size), "--inflight", str(inflight), "--seconds", str(seconds), "--buffers",
           str(buffers)]
    if cross_cpu and (os.cpu_count() or 1) > 1:
        cmd += ["--cpus", "0,1"]
    code, out, err = run_cmd(cmd)
    if code != 0:
        sys.exit(f"bench: rawrr failed: {err}")
    return json.loads(out)


def spingaps(env, seconds, all_cpus=False):
    code, out, err = run_cmd([env.spingaps, "--seconds", str(seconds)] + (["--all-cpus"] if all_cpus else []))
    if code != 0:
        sys.exit(f"bench: spingaps failed: {err}")
    return json.loads(out)


def median_row(values):
    vals = [v for v in values if v is not None]
    if not vals:
        return None, None, None
    return statistics.median(vals), min(vals), max(vals)


class Table:
    def __init__(self):
        self.rows = []

    def add(self, key, what, unit, values, ref=None, ref_what="", higher_better=True, target=None, note=""):
        med, lo, hi = median_row(values)
        ratio = None
        if med is not None and ref:
            ratio = med / ref
        verdict = ""
        if target is not None and med is not None:
            ok = target(med, ratio)
            verdict = "meets" if ok else "MISSES"
        row = {"row": key, "figure": what, "unit": unit, "median": med, "min": lo, "max": hi,
               "runs": len([v for v in values if v is not None]), "reference": ref, "reference_is": ref_what,
               "ratio": ratio, "target": note, "verdict": verdict}
        self.rows.append(row)
        print(fmt_row(row), flush=True)
        return row


def num(v):
    if v is None:
        return "-"
    if abs(v) >= 1e6:
        return f"{v / 1e6:.2f}M"
    if abs(v) >= 1e4:
        return f"{v / 1e3:.1f}k"
    if abs(v) >= 100:
        return f"{v:.0f}"
    return f"{v:.3g}"


def fmt_row(r):
    ratio = f"{r['ratio']:.2f}x" if r["ratio"] is not None else "-"
    return (f"{r['row']:<4} {r['figure']:<46} {num(r['median']):>9} {r['unit']:<9} "
            f"[{num(r['min'])}..{num(r['max'])}] {num(r['reference']):>9} {ratio:>7}  {r['target']:<34} {r['verdict']}")


def header():
    print(f"{'row':<4} {'figure':<46} {'median':>9} {'unit':<9} [min..max] {'reference':>9} {'ratio':>7}  "
          f"{'target':<34} verdict")
    print("-" * 150)


# ---- the rows ---------------------------------------------------------------------------------

def references(env, t):
    secs = 0.3 if env.quick else 3
    # Round trips with the two ends on different CPUs, as the harness's processes mostly are;
    # unpinned, the figure jumps between ~12 us (same CPU) and ~55 us from run to run.
    small = [rawrr(env, 64, 1, secs, cross_cpu=True) for _ in range(env.runs)]
    t.add("R1", "raw 64 B ping-pong RTT p50, ends on 2 CPUs", "us", [x["rtt_p50_us"] for x in small])
    rate = [rawrr(env, 64, 32, secs) for _ in range(env.runs)]
    t.add("R2", "raw 64 B x 32 in flight, one write/request", "req/s", [x["req_per_s"] for x in rate])
    # As the QSL: 1024 distinct 150528 B samples, so the source bytes come from DRAM, not cache.
    big = [rawrr(env, 150528, 4, secs, buffers=1024) for _ in range(env.runs)]
    t.add("R3", "raw 150528 B x 4 in flight, 1024 buffers", "B/s", [x["bytes_per_s"] for x in big])
    hot = [rawrr(env, 150528, 4, secs) for _ in range(env.runs)]
    t.add("R3h", "  the same from one cache-hot buffer", "B/s", [x["bytes_per_s"] for x in hot])
    big1 = [rawrr(env, 150528, 1, secs, cross_cpu=True) for _ in range(env.runs)]
    t.add("R4", "raw 150528 B ping-pong RTT p50, ends on 2 CPUs", "us", [x["rtt_p50_us"] for x in big1])
    ref = {
        "rtt64": statistics.median(x["rtt_p50_us"] for x in small),
        "rate64": statistics.median(x["req_per_s"] for x in rate),
        "bw": statistics.median(x["bytes_per_s"] for x in big),
        "rtt150k": statistics.median(x["rtt_p50_us"] for x in big1),
    }
    # What the host takes from a thread that only spins: the host's part of the issue lateness
    # (B1's lateness rows at 100k are divided by it; a reference, not a strict floor).
    spin = [spingaps(env, secs) for _ in range(env.runs)]
    t.add("R6", "a lone spinner's issue lateness p99 (host)", "us", [x["lateness_p99_us"] for x in spin])
    t.add("R6l", "  its time lost in gaps >= 10 us", "%", [x["lost_pct"] for x in spin])
    ref["spin99"] = statistics.median(x["lateness_p99_us"] for x in spin)
    # The same for the time every CPU lost at once: the lateness of an issuer that could issue
    # from whichever CPU runs, which no placement of the harness's threads beats.
    if (os.cpu_count() or 1) > 1:
        every = [spingaps(env, secs, all_cpus=True) for _ in range(env.runs)]
        t.add("R6v", "  the same, the gaps all CPUs share", "us", [x["lateness_p99_us"] for x in every])
        t.add("R6vl", "  their time lost in gaps >= 10 us", "%", [x["lost_pct"] for x in every])
        ref["vm99"] = statistics.median(x["lateness_p99_us"] for x in every)
    if shutil.which("iperf3"):
        port = "5299"
        srv = subprocess.Popen(["iperf3", "-s", "-1", "-p", port], stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
        time.sleep(0.3)
        code, out, _ = run_cmd(["iperf3", "-c", "127.0.0.1", "-p", port, "-t", str(max(1, int(secs))), "-J"])
        srv.wait(timeout=10)
        if code == 0:
            bps = json.loads(out)["end"]["sum_received"]["bits_per_second"]
            t.add("R5", "iperf3 loopback, 1 stream", "bit/s", [bps])
    return ref


# B1's ladder: from 25k up to the first step where most runs fail (the ceiling measured here is
# about 300k; the last steps only run if the earlier ones pass).
B1_LADDER = [25000, 50000, 75000, 100000, 125000, 150000, 175000, 200000, 225000, 250000, 275000,
             300000, 350000, 400000, 500000, 600000, 800000, 1000000]


def climb(env, ladder, run_step):
    """B1's ladder rules: every step env.runs times, up to the first step where most runs fail;
    the capacity is the highest step at which it and every lower step pass most runs (a lucky
    pass above a failing step does not count). Returns (steps, capacity or None, its runs)."""
    steps = []  # (qps, runs)
    for q in ladder:
        runs = [run_step(q) for _ in range(env.runs)]
        steps.append((q, runs))
        if 2 * sum(r["valid"] for r in runs) <= len(runs):
            break  # the failure step: most runs INVALID
    best, confirm = None, []
    for q, runs in steps:
        if 2 * sum(r["valid"] for r in runs) <= len(runs):
            break
        best, confirm = q, runs
    return steps, best, confirm


def ladder_text(steps):
    return " ".join(f"{q // 1000}k:{sum(r['valid'] for r in runs)}/{len(runs)}" for q, runs in steps)


# The official LoadGen 6.0.17 sometimes never returns from StartTest: its main thread waits in
# Logger::StopLogging() for the logging thread, which sleeps on its condition variable (seen at
# 75k QPS, 2026-11-27, the summary still empty). Such a run says nothing about capacity: it is
# killed after the run's length plus this grace, and run once more.
OFFICIAL_GRACE_S = 60


def official_null(env, qps, sets):
    """One Server run of the official LoadGen with its in-process null SUT (bench/official_null.cc)."""
    for attempt in range(2):
        outdir = tempfile.mkdtemp(dir=env.tmp)
        cmd = [env.official, "--qps", str(qps), "--duration-ms", str(sets["min_duration_ms"]),
               "--latency-ns", str(sets["server_target_latency_ns"]), "--samples", "1024",
               "--outdir", outdir]
        code, _, err = run_cmd(cmd, timeout=int(sets["min_duration_ms"]) // 1000 + OFFICIAL_GRACE_S)
        summary = os.path.join(outdir, "mlperf_log_summary.txt")
        hung = code == -9 and (not os.path.exists(summary) or os.path.getsize(summary) == 0)
        if hung and attempt == 0:
            print(f"     official LoadGen at {qps // 1000}k hung at its end (killed after "
                  f"{OFFICIAL_GRACE_S} s of grace); run again", flush=True)
            continue
        break
    r = parse_summary(summary)
    if code != 0:
        r["error"] = err.strip().splitlines()[-1] if err.strip() else f"exit {code}"
        env.errors.append(f"official LoadGen at {qps} QPS: {r['error']}")
    return r


def b1_official(env, t, sets, ladder, ours):
    """The reference row: the official LoadGen's in-process null-SUT Server ceiling, same ladder
    rules, measured in the same run; and loadgen-node's ceiling (through the network) over it."""
    if not env.official_root:
        print("     B1 reference (official LoadGen, in-process null SUT): skipped; give "
              "--official-loadgen-root PATH (an installed official LoadGen) to measure it", flush=True)
        return
    if not os.access(env.official, os.X_OK):
        print(f"     B1 reference: skipped; {env.official} is missing (bench/run.sh "
              "--official-loadgen-root PATH builds it with -DMLPERF_LOADGEN_ROOT)", flush=True)
        return
    steps, best, confirm = climb(env, ladder, lambda q: official_null(env, q, dict(sets)))
    print(f"     B1 official ladder (VALID runs per step): {ladder_text(steps)}", flush=True)
    valid_share = sum(r["valid"] for r in confirm) if confirm else 0
    t.add("B1o", f"official LoadGen null-SUT ceiling ({valid_share}/{len(confirm)} VALID)", "QPS",
          [best] if best else [None])
    for q, runs in steps:
        n_ok = sum(r["valid"] for r in runs)
        t.add("", f"  official {q // 1000}k QPS: {n_ok}/{len(runs)} VALID, p99", "us",
              [r["p99"] / 1e3 if "p99" in r else None for r in runs])
    t.add("B1r", "loadgen-node (network) / official (in-process)", "QPS", [ours] if ours else [None],
          ref=best, ref_what="B1o", target=lambda m, r: (r or 0) >= 1.2, note=">= 1.2x B1o")
    # Like for like: loadgen-node's own in-process null SUT (--sut null, completing inline as
    # official_null does) on the same ladder, from the official ceiling's step up.
    start = [q for q in ladder if best is None or q >= best] or ladder[-1:]
    steps, mine, confirm = climb(env, start,
                                 lambda q: loadgen(env, "Server", [], dict(sets, server_target_qps=q)))
    print(f"     B1n ladder (loadgen-node in-process, from B1o's step): {ladder_text(steps)}", flush=True)
    t.add("B1n", "loadgen-node in-process null-SUT ceiling", "QPS", [mine] if mine else [None],
          ref=best, ref_what="B1o", note="like for like with B1o")


def late_reference(ref):
    """What the 100k lateness rows are divided by: R6v (the gaps every CPU shares, the floor of
    any placement of threads) where measured, else R6."""
    return (ref["vm99"], "R6v") if "vm99" in ref else (ref.get("spin99"), "R6")


# The steps where the issue lateness is judged against the host's floor (issue 38: <= 1.2x).
LATE_STEPS = (25000, 100000)


def step_rows(t, key, what, qps, runs, late_ref=(None, "R6")):
    """One Server step's rows: its VALID count with each run's p99, the harness's p99 issue
    lateness divided by late_ref (R6v where measured, else R6: the lateness the host alone gives
    a perfect spinner), the host's floor each run probed at its start (the harness block's "Host
    floor p99", the same measure as R6v over a quarter second) and the lateness over it, per run;
    at 25k and 100k judged against <= 1.2x."""
    n_ok = sum(r["valid"] for r in runs)
    t.add(key, f"{what}: {n_ok}/{len(runs)} VALID, p99", "us",
          [r.get("p99", 0) / 1e3 if "p99" in r else None for r in runs])
    judged = qps in LATE_STEPS
    t.add("", "    issue lateness p99 (harness)", "us",
          [r["late_p99"] / 1e3 if "late_p99" in r else None for r in runs], ref=late_ref[0],
          ref_what=late_ref[1], **({"target": lambda m, r: r is not None and r <= 1.2,
                                    "note": f"<= 1.2x {late_ref[1]} at 25k, 100k"} if judged else {}))
    t.add("", "    host floor p99 (the run's own probe)", "us",
          [r["floor_p99"] / 1e3 if "floor_p99" in r else None for r in runs])
    t.add("", "    issue lateness / the run's floor", "x",
          [r["late_p99"] / r["floor_p99"] if r.get("floor_p99") and "late_p99" in r else None
           for r in runs], **({"target": lambda m, r: m <= 1.2, "note": "<= 1.2x at 25k, 100k"}
                              if judged else {}))
    if qps == 100000:  # where the thread was when the late issues at the tail fell due
        for cause in ("off its CPU", "the SUT's I/O"):
            t.add("", f"    late at the tail: {cause}", "%",
                  [r["late_causes"].get(cause, 0.0) if "late_causes" in r else None for r in runs])


def b1_server(env, t, ref):
    """Server capacity as a ladder (see climb). One row per step with its VALID count, its p99 and
    the harness's issue lateness; then the official LoadGen's reference row when one is given."""
    node = Node(env, "b1-null", ["--backend", "null"])
    dur = env.dur(10000, 1000)
    sets = {"server_target_latency_ns": 1000000, "min_duration_ms": dur}
    ladder = [25000, 100000] if env.quick else B1_LADDER
    steps, best, confirm = climb(env, ladder,
                                 lambda q: loadgen(env, "Server", [node], dict(sets, server_target_qps=q)))
    print(f"     B1 ladder (VALID runs per step): {ladder_text(steps)}", flush=True)
    valid_share = sum(r["valid"] for r in confirm) if confirm else 0
    t.add("B1", f"Server capacity, 1 ms p99 ({valid_share}/{len(confirm)} VALID)", "QPS",
          [best] if best else [None], ref=ref["rate64"], ref_what="R2",
          target=lambda m, r: m >= 150000 and (r or 0) >= 0.8, note=">= 150k and >= 0.8x R2")
    # Issue 20's dependability target: every run VALID at every step up to 300k (a step the
    # ladder never reached counts as not passed).
    low = [q for q in ladder if q <= 300000]
    clean = sum(1 for q, runs in steps if q <= 300000 and all(r["valid"] for r in runs))
    t.add("B1s", f"  steps {low[0] // 1000}k-{low[-1] // 1000}k with every run VALID", "steps", [clean],
          target=lambda m, r, n=len(low): m >= n, note=f"all {len(low)}")
    for q, runs in steps:
        step_rows(t, f"B1.{q // 1000}k", f"  {q // 1000}k QPS", q, runs, late_ref=late_reference(ref))
    if confirm:
        t.add("B1p", "  p99 at that QPS", "us", [r.get("p99", 0) / 1e3 for r in confirm])
        per = [(r["lg_cpu_s"] / max(1, r["samples_per_s"] * r["wall_s"]) * 1e6) for r in confirm]
        pern = [(r["node_cpu_s"] / max(1, r["samples_per_s"] * r["wall_s"]) * 1e6) for r in confirm]
        t.add("B6a", "CPU per sample, Server: loadgen-node", "us", per)
        t.add("B6b", "CPU per sample, Server: sut-node", "us", pern)
    node.stop()
    b1_own_cpu(env, t, sets, ref)
    b1_official(env, t, sets, ladder, best)


def b1_own_cpu(env, t, sets, ref, qps=100000):
    """B1i: the issue lateness target's step again with the issue thread on a CPU of its own
    (--issue-cpu: loadgen-node's other threads kept off it) and the null node pinned off it too,
    as a node on its own host would be. On a host with few cores this trades capacity (everything
    but the issue thread shares the other CPUs) for an issue thread nobody preempts."""
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        print("     B1i (issue thread on its own CPU): skipped; needs 2 CPUs", flush=True)
        return
    own, rest = cpus[-1], cpus[:-1]
    node = Node(env, "b1i-null", ["--backend", "null"], cpus=rest)
    runs = [loadgen(env, "Server", [node], dict(sets, server_target_qps=qps),
                    extra=["--issue-cpu", str(own)]) for _ in range(env.runs)]
    node.stop()
    step_rows(t, "B1i", f"{qps // 1000}k, --issue-cpu {own}, node on CPU {','.join(map(str, rest))}",
              qps, runs, late_ref=late_reference(ref))


def b2_offline(env, t, ref):
    node = Node(env, "b2-null", ["--backend", "null"])
    dur = env.dur(5000, 500)
    runs = [loadgen(env, "Offline", [node], {"min_duration_ms": dur, "offline_expected_qps": 60000},
                    size=150528, samples=256 if env.quick else 1024) for _ in range(env.runs)]
    bw = [r["samples_per_s"] * 150528 if r.get("samples_per_s") and r["valid"] else None for r in runs]
    t.add("B2", "Offline bandwidth, 150528 B samples", "B/s", bw, ref=ref["bw"], ref_what="R3",
          target=lambda m, r: (r or 0) >= 0.85, note=">= 0.85x R3")
    per = [(r["lg_cpu_s"] / max(1, r.get("samples_per_s", 1) * r["wall_s"]) * 1e6) for r in runs]
    pern = [(r["node_cpu_s"] / max(1, r.get("samples_per_s", 1) * r["wall_s"]) * 1e6) for r in runs]
    t.add("B6c", "CPU per sample, Offline 150 KB: loadgen-node", "us", per)
    t.add("B6d", "CPU per sample, Offline 150 KB: sut-node", "us", pern)
    node.stop()


def b3_singlestream(env, t, ref):
    node = Node(env, "b3-null", ["--backend", "null"])
    dur = env.dur(5000, 400)
    for size, key, rtt in ((64, "B3a", ref["rtt64"]), (150528, "B3b", ref["rtt150k"])):
        runs = [loadgen(env, "SingleStream", [node], {"min_duration_ms": dur,
                                                      "single_stream_expected_latency_ns": 10000},
                        size=size) for _ in range(env.runs)]
        t.add(key, f"SingleStream p50, {size} B", "us", [r.get("p50", 0) / 1e3 if r["valid"] else None for r in runs],
              ref=rtt, ref_what="R1" if size == 64 else "R4", target=lambda m, r: (r or 9) <= 1.5,
              note="p50 <= 1.5x raw RTT")
        t.add(key + "9", f"  SingleStream p99, {size} B", "us",
              [r.get("p99", 0) / 1e3 if r["valid"] else None for r in runs])
    node.stop()


def b4_name(env, t):
    for count in (1, 4):
        nodes = [Node(env, f"b4-{count}-{i}", ["--backend", "null"]) for i in range(count)]
        vals = []
        for _ in range(env.runs):
            code, out, err = run_cmd([env.qdlbench, "--nodes", ",".join(n.addr for n in nodes), "--name-calls",
                                      "500" if env.quick else "2000"])
            if code != 0:
                env.errors.append(f"qdlbench over {count} node(s): exit {code}: {err.strip()[-300:]}")
            vals.append(json.loads(out)["name_p50_us"] if code == 0 else None)
        t.add(f"B4{'ab'[count > 1]}", f"Name() round trip p50, {count} node{'s' if count > 1 else ''}", "us", vals,
              target=lambda m, r: m < 200, note="< 200 us")
        for n in nodes:
            n.stop()


def b5_memory(env, t):
    """The generator alone, as the issue allows: RSS per issued query from two Server runs of the
    in-process null SUT, and the start-up time of a 600 s, 100k QPS run."""
    def peak_rss(queries):
        # GNU time reports the child's own peak; a fork from here would count Python's memory.
        outdir = tempfile.mkdtemp(dir=env.tmp)
        cmd = ["/usr/bin/time", "-f", "%M", env.lg, "--scenario", "Server", "--sut", "null", "--qsl-synthetic",
               "1024", "--sample-size", "64", "--set", "server_target_qps=1000000", "--set", "min_duration_ms=10000",
               "--set", f"max_query_count={queries}", "--output-dir", outdir, "--quiet", "--progress", "off",
               "--log-level", "error"]
        code, out, err = run_cmd(cmd)
        return int(err.strip().splitlines()[-1]) * 1024

    small, large = (100000, 600000) if env.quick else (200000, 2000000)
    slopes = []
    for _ in range(env.runs):
        slopes.append((peak_rss(large) - peak_rss(small)) / (large - small))
    t.add("B5a", "memory per issued query (RSS slope)", "B", slopes, target=lambda m, r: m <= 32,
          note="<= 32 B")
    starts = []
    for _ in range(env.runs):
        outdir = tempfile.mkdtemp(dir=env.tmp)
        t0 = time.time()
        run_cmd([env.lg, "--scenario", "Server", "--sut", "null", "--qsl-synthetic", "1024", "--sample-size", "64",
                 "--set", "server_target_qps=100000", "--set", "min_duration_ms=600000", "--set",
                 "max_query_count=1000", "--output-dir", outdir, "--quiet", "--progress", "off", "--log-level",
                 "error"])
        detail = open(os.path.join(outdir, "mlperf_log_detail.txt")).read()
        m = re.search(r'"key": "power_begin", "value": "([0-9-]+) ([0-9:.]+)"', detail)
        if m:
            # power_begin is UTC wall time with milliseconds.
            whole, frac = m.group(2).split(".")
            begin = calendar.timegm(time.strptime(m.group(1) + " " + whole, "%m-%d-%Y %H:%M:%S"))
            starts.append(max(0.0, begin + float("0." + frac) - t0))
    t.add("B5b", "start-up of a 600 s, 100k QPS Server run", "s", starts or [None], target=lambda m, r: m < 1,
          note="< 1 s")


def b7_compression(env, t):
    node = Node(env, "b7-digest", ["--backend", "digest"])
    dur = env.dur(4000, 250)
    for kind, label in (("random", "random bytes"), ("image", "image-like"), ("tokens", "BERT-like tokens")):
        vals = {}
        for codec in ("none", "lz4"):
            # Codec throughput on each kind of bytes, all under 3D-UNet's name: the rules approve
            # LZ4 for 3D-UNet and DLRMv3 only (6.2.4).
            model = "3d-unet-99"
            runs = [loadgen(env, "Offline", [node], {"min_duration_ms": dur,
                                                     "offline_expected_qps": 30000 if env.quick else 40000},
                            size=150528, samples=256 if env.quick else 1024, kind=kind, compress=codec,
                            model=model) for _ in range(env.runs)]
            # A throughput comparison: the rate counts even when a short run misses min_duration.
            vals[codec] = [r.get("samples_per_s") for r in runs]
        none_med = median_row(vals["none"])[0]
        t.add("B7", f"Offline, {label}: lz4 vs none (loopback)", "samples/s", vals["lz4"], ref=none_med,
              ref_what="none")
    node.stop()
    if not env.quick:
        b7_netns(env, t)


def b7_netns(env, t):
    """B7 over a slow fabric: deploy/netns/bench-lz4.sh (root only; full suite only)."""
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "deploy", "netns", "bench-lz4.sh")
    if os.geteuid() != 0 or not shutil.which("ip"):
        print("B7n: skipped (needs root and iproute2 for network namespaces)")
        return
    out = os.path.join(env.tmp, "bench-lz4.json")
    code, _, err = run_cmd([script, "--build", env.build, "--runs", str(env.runs), "--out", out], timeout=900)
    if code != 0 or not os.path.exists(out):
        why = err.strip().splitlines()[-1] if err.strip() else f"exit {code}"
        env.errors.append(f"B7n: deploy/netns/bench-lz4.sh failed as root: {why}")
        return
    d = json.load(open(out))
    none = d["codecs"]["none"]["samples_per_second_runs"]
    lz4 = d["codecs"]["lz4"]["samples_per_second_runs"]
    t.add("B7n", "Offline, 1 Gbit/s netns, fmnist-like: lz4 vs none", "samples/s", lz4,
          ref=median_row(none)[0], ref_what="none")


def b8_scaling(env, t):
    # Fixed simulated speed per node: one engine, 2000 + 100*batch us at batch 8 = 2.8 ms per 8,
    # about 2860 samples/s per node, far below what the harness itself can carry.
    sim = ["--backend", "sim", "--backend-opt", "engines=1", "--backend-opt", "a_us=2000", "--backend-opt",
           "b_us=100", "--backend-opt", "jitter=0", "--max-batch", "8"]
    dur = env.dur(5000, 400)
    base = {}
    for scenario in ("Offline", "Server"):
        for count in (1, 2, 4):
            nodes = [Node(env, f"b8-{scenario}-{count}-{i}", sim) for i in range(count)]
            sets = {"min_duration_ms": dur}
            if scenario == "Offline":
                sets["offline_expected_qps"] = 3000 * count
            else:
                sets.update({"server_target_qps": 1500 * count, "server_target_latency_ns": 50000000})
            runs = [loadgen(env, scenario, nodes, sets, size=4096) for _ in range(env.runs)]
            vals = [r.get("samples_per_s") for r in runs]
            med = median_row(vals)[0]
            if count == 1:
                base[scenario] = med
                t.add(f"B8{scenario[0]}1", f"{scenario}, 1 sim node (fixed speed)", "samples/s", vals)
            else:
                t.add(f"B8{scenario[0]}{count}", f"{scenario}, {count} sim nodes: scaling vs {count} x 1 node",
                      "samples/s", vals, ref=(base[scenario] or 0) * count, ref_what=f"{count} x B8{scenario[0]}1",
                      target=lambda m, r: (r or 0) >= 0.9, note=">= 0.9x linear")
            for n in nodes:
                n.stop()


def b10_many_nodes(env, t):
    """Scale: 1, 4, 16 and 64 null sut-nodes on loopback ports, every one on this host. Server
    capacity (a short ladder), Offline bandwidth, loadgen-node CPU per query at the ladder's first
    step, and loadgen-node's peak RSS per node (the slope from 1 node to N, as B5a)."""
    counts = (1, 64) if env.quick else (1, 4, 16, 64)
    ladder = [10000, 40000] if env.quick else [10000, 25000, 50000, 75000, 100000, 150000, 200000, 250000]
    runs = 1 if env.quick else env.runs
    dur = env.dur(3000, 400)
    size, off_size = 64, 16384
    light = ["--backend", "null", "--max-batch", "8", "--workers", "1"]
    base, base_rss = {}, None
    for count in counts:
        nodes = [Node(env, f"b10-{count}-{i}", light) for i in range(count)]
        # 50 ms: 64 nodes and the harness share this host's CPUs, whose stalls reach 10 ms when
        # it is busy (R6); B1 holds the 1 ms figure
        sets = {"server_target_latency_ns": 50000000, "min_duration_ms": dur}
        steps = []
        for q in ladder:  # climb's rules, with this section's run count
            rs = [loadgen(env, "Server", nodes, dict(sets, server_target_qps=q), size=size, rss=True)
                  for _ in range(runs)]
            steps.append((q, rs))
            if 2 * sum(r["valid"] for r in rs) <= len(rs):
                break
        best = None
        for q, rs in steps:
            if 2 * sum(r["valid"] for r in rs) <= len(rs):
                break
            best = q
        print(f"     B10 {count} node(s) ladder (VALID runs per step): {ladder_text(steps)}", flush=True)
        first = steps[0][1]
        off = [loadgen(env, "Offline", nodes, {"min_duration_ms": dur, "min_query_count": 1000,
                                                   "offline_expected_qps": 150000},
                       size=off_size, samples=256, rss=True) for _ in range(runs)]
        for n in nodes:
            n.stop()
        label = f"{count} node{'s' if count > 1 else ''}"
        if count == 1:
            base["cap"] = best
            t.add("B10c1", "Server capacity, 1 null node, 50 ms p99", "QPS", [best])
        else:
            t.add(f"B10c{count}", f"Server capacity, {label}: vs 1 node", "QPS", [best], ref=base.get("cap"),
                  ref_what="B10c1", target=(lambda m, r: (r or 0) >= 0.9) if count == 64 else None,
                  note=">= 0.9x 1 node" if count == 64 else "")
        # every finished run: a short run may miss its duration (the nodes outrun the estimate)
        bw = [r["samples_per_s"] * off_size if r.get("samples_per_s") else None for r in off]
        t.add(f"B10o{count}", f"  Offline bandwidth, {off_size} B, {label}", "B/s", bw)
        t.add(f"B10u{count}", f"  loadgen-node CPU per query, {ladder[0] // 1000}k QPS", "us",
              [r["lg_cpu_s"] / max(1, r["samples_per_s"] * r["wall_s"]) * 1e6 if r.get("samples_per_s") else None
               for r in first])
        rss = [r.get("rss") for r in first if r.get("rss")]  # Server runs only: same QSL
        peak = median_row(rss)[0]
        if count == 1:
            base_rss = peak
            t.add("B10m1", "  loadgen-node peak RSS, 1 node", "B", rss)
        else:
            t.add(f"B10m{count}", "  loadgen-node RSS per node ((N - 1 node) / (N - 1))", "B",
                  [(v - base_rss) / (count - 1) if base_rss else None for v in rss],
                  target=lambda m, r: m <= 1 << 20, note="<= 1 MB per node")


def t1_tls(env, t):
    certs = os.path.join(env.tmp, "certs")
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "deploy", "tls", "make-certs.sh")
    if run_cmd([script, certs])[0] != 0:
        print("T1: skipped (cannot make certificates)")
        return
    tls = {"cert": os.path.join(certs, "node.pem"), "key": os.path.join(certs, "node.key")}
    dur = env.dur(4000, 300)
    for scenario in ("Offline", "Server"):
        vals = {}
        for mode in ("plain", "tls"):
            node = Node(env, f"t1-{scenario}-{mode}", ["--backend", "null"], tls=tls if mode == "tls" else None)
            extra = ["--tls-ca", os.path.join(certs, "ca.pem")] if mode == "tls" else []
            if scenario == "Offline":
                sets, size = {"min_duration_ms": dur, "offline_expected_qps": 15000 if env.quick else 60000}, 150528
            else:
                sets, size = {"min_duration_ms": dur, "server_target_qps": 20000,
                              "server_target_latency_ns": 10000000}, 4096
            runs = [loadgen(env, scenario, [node], sets, extra=extra, size=size,
                            samples=256 if env.quick else 1024) for _ in range(env.runs)]
            key = "samples_per_s" if scenario == "Offline" else "p99"
            vals[mode] = [r.get(key) for r in runs]
            node.stop()
        if scenario == "Offline":
            t.add("T1a", "TLS 1.3 vs plaintext: Offline 150 KB samples/s", "samples/s", vals["tls"],
                  ref=median_row(vals["plain"])[0], ref_what="plaintext")
        else:
            t.add("T1b", "TLS 1.3 vs plaintext: Server 20k QPS, p99", "us", [v / 1e3 if v else None for v in vals["tls"]],
                  ref=(median_row(vals["plain"])[0] or 0) / 1e3 or None, ref_what="plaintext")


# ucx:// next to tcp://: the B1-B3 rows again with sut-node listening on ucx:// and the QDL
# connecting over UCX, with UCX's TCP transport (Ut) and its shared-memory transports (Us; UCX
# 1.13 needs UCX_MM_ERROR_HANDLING=y for them), both with progress through UCX's event fd, and
# B3 over shared memory with both sides busy-polling (Ub, --ucx-busy-poll's lowest latency).
UCX_VARIANTS = (
    ("Ut", "ucx tcp", {"UCX_TLS": "tcp"}, ("B1", "B2", "B3")),
    ("Us", "ucx shm", {"UCX_TLS": "sm,tcp", "UCX_MM_ERROR_HANDLING": "y"}, ("B1", "B2", "B3")),
    ("Ub", "ucx shm busy", {"UCX_TLS": "sm,tcp", "UCX_MM_ERROR_HANDLING": "y", "NSUT_UCX_BUSY_POLL": "1"},
     ("B3",)),
)


class Tagged:
    """A Table whose rows get a transport tag: B2 -> B2.Ut, "Offline ..." -> "Offline ... [ucx tcp]"."""

    def __init__(self, t, tag, label):
        self.t, self.tag, self.label = t, tag, label

    def add(self, key, what, *args, **kw):
        self.t.add(f"{key}.{self.tag}", f"{what} [{self.label}]", *args, **kw)


def b_ucx(env, t, ref):
    for tag, label, extra, rows in UCX_VARIANTS:
        saved = dict(os.environ)
        # sut-node and loadgen-node take the scheme (and --ucx-trusted-fabric) from it; qdlbench's
        # QDL takes the trust from NSUT_UCX_TRUSTED_FABRIC
        os.environ.update(extra, NSUT_BENCH_SCHEME="ucx://", NSUT_UCX_TRUSTED_FABRIC="1")
        try:
            for key in rows:
                ROWS[key](env, Tagged(t, tag, label), ref)
        finally:
            os.environ.clear()
            os.environ.update(saved)


ROWS = {"ref": None, "B1": b1_server, "B2": b2_offline, "B3": b3_singlestream, "B4": b4_name, "B5": b5_memory,
        "B7": b7_compression, "B8": b8_scaling, "B9": b9_unet_fabric, "B10": b10_many_nodes,
        "T1": t1_tls,
        "U": b_ucx}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "build-bench"))
    ap.add_argument("--quick", action="store_true", help="short runs (the whole suite in about two minutes)")
    ap.add_argument("--runs", type=int, default=3, help="runs per row (default 3)")
    ap.add_argument("--only", default="", help="comma-separated rows to run (B1,B2,...), references always")
    ap.add_argument("--json", default="", help="write the table here (default: bench-results.json in the build)")
    ap.add_argument("--loadgen-node", default="", help="the loadgen-node binary to measure (default: the build's);"
                    " for before/after comparisons against the same sut-node")
    ap.add_argument("--official-loadgen-root", default=os.environ.get("MLPERF_LOADGEN_ROOT", ""),
                    help="an installed official LoadGen (default: $MLPERF_LOADGEN_ROOT): B1 then measures its"
                    " in-process null-SUT ceiling as a reference row (bench/run.sh builds official_null with it)")
    args = ap.parse_args()
    env = Env(os.path.abspath(args.build), args.quick, max(3, args.runs), None)
    if args.loadgen_node:
        env.lg = os.path.abspath(args.loadgen_node)
    env.official_root = args.official_loadgen_root
    only = [x.strip() for x in args.only.split(",") if x.strip()]
    t = Table()
    timings = {}
    started = time.time()
    print(f"bench: {'quick' if args.quick else 'full'} suite, {env.runs} runs per row, on {os.uname().nodename} "
          f"({os.cpu_count()} CPUs), {time.strftime('%Y-%m-%d %H:%M:%S')}")
    header()
    try:
        section_t0 = time.time()
        ref = references(env, t)
        timings = {"ref": time.time() - section_t0}
        for key, fn in ROWS.items():
            if fn is None or (only and key not in only):
                continue
            section_t0 = time.time()
            if key in ("B4", "B5", "B7", "B8", "B9", "B10", "T1"):
                fn(env, t)
            else:
                fn(env, t, ref)
            timings[key] = time.time() - section_t0
    finally:
        env.cleanup()
    took = time.time() - started
    print("-" * 150)
    print(f"bench: {len(t.rows)} rows in {took:.0f} s; ratio = median / reference; medians of {env.runs} runs")
    print("bench: seconds per section: " + ", ".join(f"{k} {v:.1f}" for k, v in timings.items()))
    path = args.json or os.path.join(env.build, "bench-results.json")
    with open(path, "w") as f:
        json.dump({"host": os.uname().nodename, "cpus": os.cpu_count(), "quick": args.quick, "seconds": took,
                   "date": time.strftime("%Y-%m-%dT%H:%M:%S"), "rows": t.rows}, f, indent=1)
    print(f"bench: results also in {path}")
    shutil.rmtree(env.tmp, ignore_errors=True)
    missed, last = [], ""
    for r in t.rows:  # a sub-row without a key is named after the row above it
        last = r["row"] or last
        if r["verdict"] == "MISSES":
            missed.append(r["row"] or f"{last} ({r['figure'].strip()})")
    if missed:
        print(f"bench: targets missed: {', '.join(missed)} (see bench/README.md for where the time goes)")
    # A missed target or a step with no VALID run is a figure, not a failure (the machine is
    # shared); a run that failed (a crash, a refused option, a timeout) is: the exit status then
    # says the bench itself is broken, which is what CI's bench step checks.
    if env.errors:
        for e in env.errors:
            print(f"bench: ERROR: {e}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
