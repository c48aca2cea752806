#!/usr/bin/python3
"""Endpoint mode against a Python client (issue 39; bench/README.md): both drive the same null
engine (sse_source: every token at once, 8 per request, the answer in one write) with the same
number of requests in flight, and each run's requests per CPU-second of the client (user +
system, all its threads: what the client costs on one core), the engine's own CPU per request
apart, and requests per wall second are printed side by side, with the ratio. loadgen-node runs
an Offline PerformanceOnly run with --nodes openai+http://...; the reference is
aiohttp_client.py (asyncio + aiohttp, as NVIDIA's harness); the floor is sse_flood (raw C, one
write and one read per request: what the kernel's loopback costs). Rounds alternate the
clients, and --old-loadgen runs a second loadgen-node binary in turn with BUILD's.

Then the latency rows (latency_rows, lateness_rows; medians of --runs runs, ratios within each):
what each client adds to the engine's own TTFT and TPOT at a low rate, against sse_source's
--log (its send times, CLOCK_MONOTONIC) request by request, next to the floor, sse_raw (a plain
socket timestamping the first SSE data byte); and the issue lateness p99 of a Server run in
endpoint mode next to R6v (spingaps --all-cpus) and the run's own host floor probe.

    endpoint_bench.py BUILD_DIR [--requests 100000] [--py-requests 20000] [--concurrency 64]
                      [--rounds 3] [--old-loadgen BIN] [--per-event-writes] [--runs 3]
                      [--low-qps 10] [--low-s 5] [--late-qps 1000] [--no-capacity]
                      [--no-latency]
"""
import argparse
import csv
import glob
import json
import os
import re
import resource
import statistics
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def child_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


# ---- the latency rows (issue 39 item 4): TTFT and TPOT added over the engine's own clock ------

LAT_TTFT_US, LAT_TPOT_US, LAT_TOKENS = 20000, 5000, 8  # the engine of the low-rate rows


def add_latency_args(ap):
    ap.add_argument("--runs", type=int, default=3, help="runs per latency row (median)")
    ap.add_argument("--low-qps", type=float, default=10,
                    help="loadgen-node's Server rate, TTFT rows")
    ap.add_argument("--low-s", type=float, default=5, help="seconds per TTFT row run")
    ap.add_argument("--late-qps", type=float, default=1000, help="Server rate of the lateness row")
    ap.add_argument("--no-capacity", action="store_true", help="the latency rows only")


def start_source(build, tmp, tag, ttft_us, tpot_us, tokens):
    """sse_source with --log; returns (process, port, log path)."""
    pf, log = os.path.join(tmp, f"{tag}.port"), os.path.join(tmp, f"{tag}.log")
    for f in (pf, log):  # a run before's, not this engine's
        if os.path.exists(f):
            os.unlink(f)
    p = subprocess.Popen([os.path.join(build, "bench", "sse_source"), "--port-file", pf,
                          "--ttft-us", str(ttft_us), "--tpot-us", str(tpot_us), "--tokens",
                          str(tokens), "--log", log], stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    for _ in range(200):
        if os.path.exists(pf) and os.path.getsize(pf):
            return p, int(open(pf).read()), log
        time.sleep(0.05)
    p.kill()
    sys.exit(f"sse_source wrote no port to {pf}")


def stop_source(p, log):
    """SIGTERM (the log is flushed then); the engine's streams in arrival order:
    (arrival, first, last, tokens), ns."""
    p.terminate()
    p.wait(timeout=30)
    return sorted(tuple(int(x) for x in ln.split()) for ln in open(log) if ln.strip())


def per_request(tag, client, engine):
    """client: (ttft_ns, tpot_ns) per request in issue order; engine: its log in arrival order
    (one request in flight at a time, or few at a low rate: the same order). Returns the lists of
    the client's TTFT, its TTFT less the engine's and its TPOT less the engine's, ns."""
    if len(client) != len(engine):
        sys.exit(f"{tag}: {len(client)} requests reported, {len(engine)} in the engine's log")
    ttft, d_ttft, d_tpot = [], [], []
    for (c_ttft, c_tpot), (arr, first, last, n) in zip(client, engine):
        ttft.append(c_ttft)
        d_ttft.append(c_ttft - (first - arr))
        d_tpot.append(c_tpot - (last - first) / (n - 1))
    return ttft, d_ttft, d_tpot


def stamped(path):
    """sse_raw's or aiohttp_client.py's lines "start first last": (ttft, tpot) per request."""
    out = []
    for ln in open(path):
        t0, t1, t2 = (int(x) for x in ln.split())
        out.append((t1 - t0, (t2 - t1) / (LAT_TOKENS - 1)))
    return out


def low_rate_raw(a, tmp, n):
    p, port, log = start_source(a.build, tmp, "raw", LAT_TTFT_US, LAT_TPOT_US, LAT_TOKENS)
    rec = os.path.join(tmp, "raw.rec")
    with open(rec, "w") as f:
        r = subprocess.run([os.path.join(a.build, "bench", "sse_raw"), "--port", str(port),
                            "--requests", str(n), "--max-tokens", str(LAT_TOKENS)], stdout=f,
                           stderr=subprocess.PIPE, text=True, timeout=600)
    alive = p.poll() is None
    eng = stop_source(p, log)
    if r.returncode != 0:
        sys.exit(f"sse_raw failed: {r.stderr[-1500:]} (sse_source "
                 f"{'was running' if alive else f'had exited {p.returncode}'})")
    return per_request("sse_raw", stamped(rec), eng)


def low_rate_python(a, tmp, n):
    p, port, log = start_source(a.build, tmp, "py", LAT_TTFT_US, LAT_TPOT_US, LAT_TOKENS)
    rec = os.path.join(tmp, "py.rec")
    r = subprocess.run(["/usr/bin/python3", os.path.join(HERE, "aiohttp_client.py"), "--url",
                        f"http://127.0.0.1:{port}", "--requests", str(n), "--concurrency", "1",
                        "--max-tokens", str(LAT_TOKENS), "--records", rec], capture_output=True,
                       text=True, timeout=600)
    eng = stop_source(p, log)
    if r.returncode != 0:
        sys.exit(f"aiohttp_client failed: {r.stderr[-1500:]}")
    return per_request("aiohttp_client", stamped(rec), eng)


def lg_endpoint_server(a, tmp, tag, port, qps, seconds, extra=()):
    """A Server run of loadgen-node in endpoint mode with token latencies; its output folder."""
    out = os.path.join(tmp, tag)
    argv = [os.path.join(a.build, "loadgen-node", "loadgen-node"), "--scenario", "Server",
            "--mode", "PerformanceOnly", "--qsl-synthetic", "1024", "--sample-size", "400",
            "--nodes", f"openai+http://127.0.0.1:{port}", "--endpoint-max-tokens",
            str(LAT_TOKENS), "--output-dir", out, "--quiet", "--progress", "off", "--log-level",
            "warn", "--drain-timeout-ms", "30000"] + list(extra)
    for kv in (f"server_target_qps={qps}", "use_token_latencies=1",
               f"min_duration_ms={int(seconds * 1000)}", "min_query_count=1",
               "server_target_latency_ns=2000000000", "server_ttft_latency=2000000000",
               "server_tpot_latency=200000000"):
        argv += ["--set", kv]
    r = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    if r.returncode not in (0, 1):
        sys.exit(f"loadgen-node {tag} failed ({r.returncode}):\n{(r.stdout + r.stderr)[-2000:]}")
    return out


def low_rate_loadgen(a, tmp, run):
    p, port, log = start_source(a.build, tmp, f"lg{run}", LAT_TTFT_US, LAT_TPOT_US, LAT_TOKENS)
    try:
        out = lg_endpoint_server(a, tmp, f"lg{run}", port, a.low_qps, a.low_s,
                                 ["--sample-latencies"])
    finally:
        eng = stop_source(p, log)
    with open(glob.glob(os.path.join(out, "*sample_latencies*.csv"))[0]) as f:
        rows = sorted(csv.DictReader(f), key=lambda r: int(r["sample_seq"]))
    client, late = [], []
    for r in rows:
        ttft, lat, n = int(r["ttft_ns"]), int(r["latency_ns"]), int(r["n_tokens"])
        if ttft < 0 or lat < 0 or n != LAT_TOKENS:
            sys.exit(f"loadgen-node: sample {r['sample_seq']} has ttft_ns {ttft}, latency_ns "
                     f"{lat}, {n} tokens (not {LAT_TOKENS})")
        client.append((ttft, (lat - ttft) / (n - 1)))
        late.append(int(r["issue_late_ns"]))
    res = per_request("loadgen-node", client, eng)
    return res + ([d - x for d, x in zip(res[1], late)],)  # and the TTFT added less the lateness


def med(v):
    return statistics.median(v) if v else float("nan")


def print_row(what, unit, per_run, ratio_to=None, target=""):
    """One row: the median of the runs' values, min and max; the ratio of medians to
    ratio_to's (per run, then the median of those)."""
    m = med(per_run)
    line = f"  {what:64} {m:9.2f} [{min(per_run):.2f}..{max(per_run):.2f}] {unit}"
    if ratio_to is not None:
        ratios = [x / y for x, y in zip(per_run, ratio_to) if y]
        line += f"   {med(ratios):.3f}x" if ratios else "   (no ratio: a reference of 0)"
    print(line + (f"   (target {target})" if target else ""), flush=True)


def latency_rows(a):
    """TTFT and TPOT as each client reports them, less the engine's own (sse_source --log, its
    send times) request by request, at a low rate: sse_raw (the floor), loadgen-node's endpoint
    mode (a Server run at --low-qps, its sample_latencies CSV: what it reports, issue lateness
    included) and aiohttp_client.py (one request at a time)."""
    n = max(10, int(a.low_qps * a.low_s))
    res = {"raw": [], "lg": [], "py": []}
    tmp = tempfile.mkdtemp(prefix="epbench-lat-")
    try:
        for run in range(a.runs):
            res["raw"].append(low_rate_raw(a, tmp, n))
            res["lg"].append(low_rate_loadgen(a, tmp, run))
            res["py"].append(low_rate_python(a, tmp, n))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"\nTTFT and TPOT over the engine's own clock: sse_source --ttft-us {LAT_TTFT_US} "
          f"--tpot-us {LAT_TPOT_US} --tokens {LAT_TOKENS}, {a.runs} runs (median [min..max] of "
          f"the runs' medians; ratios within each run)")
    names = (("raw", "sse_raw (plain socket, the floor)"),
             ("lg", f"loadgen-node endpoint, Server {a.low_qps:g} QPS"),
             ("py", "python asyncio + aiohttp, 1 in flight"))
    raw_ttft = [med(r[0]) / 1e6 for r in res["raw"]]
    for key, name in names:
        ttft = [med(r[0]) / 1e6 for r in res[key]]
        print_row(f"TTFT p50, {name}", "ms", ttft, None if key == "raw" else raw_ttft,
                  "" if key == "raw" else "<= 1.02x the raw reader's")
    for key, name in names:
        print_row(f"TTFT added p50, {name}", "us", [med(r[1]) / 1e3 for r in res[key]])
        print_row("  p99", "us", [sorted(r[1])[int(len(r[1]) * 0.99)] / 1e3 for r in res[key]])
        if key == "lg":  # the transport's part: the issue lateness is the schedule's
            print_row("  p50 less the issue lateness", "us", [med(r[3]) / 1e3 for r in res[key]])
    for key, name in names:
        print_row(f"TPOT added per token p50, {name}", "us", [med(r[2]) / 1e3 for r in res[key]],
                  target="" if key == "raw" else "<= 1 us")


LATE_RE = {k: re.compile(k + r" \(ns\)\s*:\s*(\d+)") for k in ("Issue lateness p99",
                                                             "Host floor p99")}


def lateness_rows(a):
    """The Server issue lateness p99 in endpoint mode (the summary's harness block) against the
    null engine (every token at once) at --late-qps, beside R6v (spingaps --all-cpus, as
    bench/run.py measures it: the gaps every CPU shares) measured just before each run, and the
    run's own host floor probe ("Host floor p99")."""
    late, floor, r6v = [], [], []
    tmp = tempfile.mkdtemp(prefix="epbench-late-")
    try:
        for run in range(a.runs):
            g = subprocess.run([os.path.join(a.build, "bench", "spingaps"), "--seconds", "1",
                                "--all-cpus"], capture_output=True, text=True, timeout=60)
            if g.returncode != 0:
                sys.exit(f"spingaps failed: {g.stderr[-1000:]}")
            r6v.append(json.loads(g.stdout)["lateness_p99_us"])
            p, port, log = start_source(a.build, tmp, f"late{run}", 0, 0, LAT_TOKENS)
            try:
                out = lg_endpoint_server(a, tmp, f"late{run}", port, a.late_qps, 5)
            finally:
                stop_source(p, log)
            text = open(os.path.join(out, "mlperf_log_summary.txt")).read()
            got = {k: rx.search(text) for k, rx in LATE_RE.items()}
            if not all(got.values()):
                sys.exit(f"loadgen-node late{run}: no harness block lines in {out}")
            late.append(int(got["Issue lateness p99"].group(1)) / 1e3)
            floor.append(int(got["Host floor p99"].group(1)) / 1e3)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"\nServer issue lateness in endpoint mode, {a.late_qps:g} QPS against the null engine, "
          f"{a.runs} runs")
    print_row("R6v: a spinner on every CPU, the gaps all share, p99", "us", r6v)
    print_row("issue lateness p99 (harness), / R6v", "us", late, r6v, "<= 1.2x R6v")
    print_row("host floor p99 (the run's own probe)", "us", floor)
    print_row("issue lateness p99, / the run's floor", "us", late, floor)


def latency_main(a):
    latency_rows(a)
    lateness_rows(a)


def proc_cpu(pid):
    """A process's own user + system seconds so far (/proc/PID/stat): the engine's, apart."""
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


def cap_loadgen(a, binary, port, out, n):
    """One Offline PerformanceOnly run of about n samples in endpoint mode; (requests, wall)."""
    r = subprocess.run([binary, "--scenario", "Offline", "--mode", "PerformanceOnly",
                        "--qsl-synthetic", "1024", "--sample-size", "400", "--nodes",
                        f"openai+http://127.0.0.1:{port}", "--endpoint-max-tokens", "8",
                        "--endpoint-max-inflight", str(a.concurrency), "--output-dir", out,
                        "--quiet", "--progress", "off", "--log-level", "warn", "--set",
                        "min_duration_ms=1000", "--set", f"offline_expected_qps={n / 1.1:.0f}",
                        "--set", "min_query_count=1"], capture_output=True, text=True,
                       timeout=600)
    nodes = glob.glob(os.path.join(out, "*nodes.json"))
    done = json.load(open(nodes[0]))["nodes"][0]["samples_completed"] if nodes else 0
    if r.returncode not in (0, 1) or done == 0:  # 1: a result INVALID for its duration
        sys.exit(f"{binary} failed ({r.returncode}):\n{r.stdout[-1500:]}{r.stderr[-1500:]}")
    return done


def cap_flood(a, port, n):
    r = subprocess.run([os.path.join(a.build, "bench", "sse_flood"), "--port", str(port),
                        "--requests", str(n), "--concurrency", str(a.concurrency)],
                       capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        sys.exit(f"sse_flood failed:\n{r.stderr[-1500:]}")
    return json.loads(r.stdout)


def cap_python(a, port, n):
    r = subprocess.run(["/usr/bin/python3", os.path.join(HERE, "aiohttp_client.py"), "--url",
                        f"http://127.0.0.1:{port}", "--requests", str(n), "--concurrency",
                        str(a.concurrency)], capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        sys.exit(f"aiohttp_client failed:\n{r.stderr[-2000:]}")
    return json.loads(r.stdout)["requests"]


def capacity(a):
    """The capacity rows: --rounds rounds, each running every client once in turn against one
    null engine (every token at once; --one-write unless --per-event-writes): sse_flood (the
    floor: one write and one read per request), loadgen-node in endpoint mode (and --old-loadgen,
    alternating with it), aiohttp_client.py. Per client: requests per CPU-second of the client
    alone (getrusage of the child, or the floor's own), the engine's CPU over the same run apart
    (/proc), requests per wall second; the medians of the rounds and the ratios of medians."""
    eng = [os.path.join(a.build, "bench", "sse_source"), "--ttft-us", "0", "--tpot-us", "0",
           "--tokens", "8"] + ([] if a.per_event_writes else ["--one-write"])
    tmp = tempfile.mkdtemp(prefix="epbench-")
    pf = os.path.join(tmp, "port")
    src = subprocess.Popen(eng + ["--port-file", pf], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
    clients = [("floor", "sse_flood (raw C: 1 write + 1 read per request)")]
    if a.old_loadgen:
        clients.append(("old", f"loadgen-node endpoint mode, {a.old_loadgen}"))
    clients += [("lg", "loadgen-node endpoint mode"), ("py", "python asyncio + aiohttp")]
    res = {k: [] for k, _ in clients}
    try:
        for _ in range(100):
            if os.path.exists(pf) and os.path.getsize(pf):
                break
            time.sleep(0.05)
        port = int(open(pf).read())
        for rnd in range(a.rounds):
            for key, _ in clients:
                e0, c0, t0 = proc_cpu(src.pid), child_cpu(), time.monotonic()
                if key == "floor":
                    fl = cap_flood(a, port, a.requests)
                    n, cpu = fl["requests"], fl["cpu_s"]
                elif key == "py":
                    n = cap_python(a, port, a.py_requests)
                    cpu = child_cpu() - c0
                else:
                    n = cap_loadgen(a, a.old_loadgen if key == "old" else
                                    os.path.join(a.build, "loadgen-node", "loadgen-node"), port,
                                    os.path.join(tmp, f"{key}{rnd}"), a.requests)
                    cpu = child_cpu() - c0
                wall, ecpu = time.monotonic() - t0, proc_cpu(src.pid) - e0
                res[key].append((n, wall, cpu, ecpu))
    finally:
        src.terminate()
        src.wait()
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"engine: {' '.join(os.path.basename(x) if i == 0 else x for i, x in enumerate(eng))}; "
          f"{a.concurrency} in flight; {a.rounds} rounds, each client once per round in turn; "
          f"median [min..max]")
    print(f"{'client':52} {'req/cpu-s':>22} {'req/s wall':>9} {'engine us/req':>13}")
    meds = {}
    for key, name in clients:
        rc = [n / c for n, _, c, _ in res[key]]
        rw = [n / w for n, w, _, _ in res[key]]
        ec = [e / n * 1e6 for n, _, _, e in res[key]]
        meds[key] = med(rc)
        print(f"{name:52} {med(rc):9.0f} [{min(rc):.0f}..{max(rc):.0f}] {med(rw):9.0f} "
              f"{med(ec):13.1f}")
    for key, _ in clients:
        print(f"  {key} per round (req/cpu-s): " +
              " ".join(f"{n / c:.0f}" for n, _, c, _ in res[key]))
    ratios = [(x[0] / x[2]) / (y[0] / y[2]) for x, y in zip(res["lg"], res["py"])]
    print(f"capacity ratio loadgen-node / aiohttp (requests per CPU-second): {med(ratios):.1f}x "
          f"(target 20x); loadgen-node / the floor: {meds['lg'] / meds['floor']:.2f}; "
          f"the floor's system calls per request: {fl['writes_per_req']:.2f} write, "
          f"{fl['reads_per_req']:.2f} read, {fl['epoll_waits_per_req']:.2f} epoll_wait")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--requests", type=int, default=100000,
                    help="requests per run of the C clients (capacity rows)")
    ap.add_argument("--py-requests", type=int, default=20000,
                    help="requests per run of the Python client (capacity rows)")
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=3, help="rounds of the capacity rows")
    ap.add_argument("--old-loadgen", help="another loadgen-node binary, run in turn with BUILD's")
    ap.add_argument("--per-event-writes", action="store_true",
                    help="the engine writes each event on its own (not sse_source --one-write)")
    ap.add_argument("--no-latency", action="store_true", help="the capacity rows only")
    add_latency_args(ap)
    a = ap.parse_args()
    if not a.no_capacity:
        capacity(a)
    if not a.no_latency:
        latency_main(a)


if __name__ == "__main__":
    main()
