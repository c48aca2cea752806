#!/usr/bin/python3
"""The openai backend's own cost: node CPU per streamed token and the TTFT it adds, at >= 10 000
tokens/s through one sut-node against a fast token source (sse_source), next to the same
requests made directly (llm_direct, the backend's own HTTP and parsing code without the harness).

    bench/llm/llm_bench.py [--build build] [--qps 200] [--tokens 64] [--duration-s 10]
                           [--ttft-ms 20] [--tpot-ms 4] [--runs 1] [--coalesce-us N]
                           [--stream-interval K] [--client lean|curl]

--coalesce-us sets the backend's read coalescing (its coalesce_us option) and llm_direct's alike,
so both read the streams the same way; without it both use the backend's default.
--stream-interval K makes the source stream as an engine given its stream interval does (SGLang's
and vLLM's --stream-interval, TensorRT-LLM's stream_interval): the first token alone, then one
event per K tokens at the same token pace (default 1: one event per token).
--client sets the backend's HTTP client (its client option; default: the backend's, lean for
http://); llm_direct always reads with libcurl's pool.

Prints the figures and one row for bench/README.md. Nothing is asserted.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
TICK = os.sysconf("SC_CLK_TCK")
CHILDREN = []  # killed on the way out, whatever happens


def cpu_s(pid):
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / TICK


def thread_cpu_s(pid):
    """CPU seconds of the backend's HTTP loop thread ("oai-http") and of the rest, from each
    thread's schedstat (nanoseconds on a CPU; /proc's stat counts 10 ms ticks, about 0.16 us per
    token over a 5 s run, as coarse as the differences measured)."""
    http = rest = 0.0
    for t in os.listdir(f"/proc/{pid}/task"):
        try:
            comm = open(f"/proc/{pid}/task/{t}/comm").read().strip()
            v = int(open(f"/proc/{pid}/task/{t}/schedstat").read().split()[0]) / 1e9
        except OSError:
            continue
        if comm == "oai-http":
            http += v
        else:
            rest += v
    return http, rest


def wait_port(path, timeout=10):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if os.path.exists(path) and os.path.getsize(path):
            return int(open(path).read())
        time.sleep(0.02)
    sys.exit(f"no port in {path}")


def source(b, tmp, tag, a):
    pf = os.path.join(tmp, f"{tag}.port")
    log = os.path.join(tmp, f"{tag}.log")
    if os.path.exists(pf):  # a previous run's
        os.unlink(pf)
    p = subprocess.Popen([os.path.join(b, "bench", "sse_source"), "--port-file", pf,
                          "--ttft-us", str(a.ttft_ms * 1000), "--tpot-us", str(a.tpot_ms * 1000),
                          "--stream-interval", str(a.stream_interval)],
                         stdout=open(log, "w"))
    CHILDREN.append(p)
    p.log = log
    return p, wait_port(pf)


def stop_source(p):
    p.cpu_end = cpu_s(p.pid)
    p.terminate()
    try:
        p.wait(10)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
        sys.exit("sse_source did not stop on SIGTERM")
    p.cpu = p.cpu_end  # read just before SIGTERM
    return int(re.search(r"tokens=(\d+)", open(p.log).read()).group(1))


def one_run(a, b, tmp, qsl):
    # Direct: the same rate and request shape, no harness in between.
    src, port = source(b, tmp, "src-direct", a)
    coal = [] if a.coalesce_us is None else ["--coalesce-us", str(a.coalesce_us)]
    r = subprocess.run([os.path.join(b, "bench", "llm_direct"), "--url",
                        f"http://127.0.0.1:{port}", "--qps", str(a.qps), "--duration-s",
                        str(a.duration_s), "--max-tokens", str(a.tokens), "--prompt-tokens", "64"]
                       + coal,
                       capture_output=True, text=True, timeout=a.duration_s * 4 + 60)
    stop_source(src)
    if r.returncode != 0:
        sys.exit(f"llm_direct failed ({r.returncode}):\n{r.stderr[-2000:]}")
    d = dict(l.split("=") for l in r.stdout.split())
    direct_ttft = float(d["ttft_p50_us"])
    bopt = [] if a.coalesce_us is None else ["--backend-opt", f"coalesce_us={a.coalesce_us}"]
    bopt += [] if a.client is None else ["--backend-opt", f"client={a.client}"]

    # Through loadgen-node -> QDL -> sut-node (openai) -> the source.
    src, port = source(b, tmp, "src-node", a)
    pf = os.path.join(tmp, "node.port")
    if os.path.exists(pf):
        os.unlink(pf)
    node = subprocess.Popen([os.path.join(b, "sut-node", "sut-node"), "--listen", "127.0.0.1:0",
                             "--port-file", pf, "--name", "llm-bench", "--log-level", "warn",
                             "--backend", "openai",
                             "--backend-opt", f"url=http://127.0.0.1:{port}",
                             "--backend-opt", f"max_tokens={a.tokens}",
                             "--backend-opt", "max_concurrency=128", "--max-batch", "32"] + bopt)
    CHILDREN.append(node)
    nport = wait_port(pf)
    out = tempfile.mkdtemp(prefix="lg-", dir=tmp)  # loadgen-node refuses a used folder
    t0 = time.monotonic()
    h0, r0 = thread_cpu_s(node.pid)
    s0 = cpu_s(src.pid)
    lg = subprocess.run([os.path.join(b, "loadgen-node", "loadgen-node"), "--scenario", "Server",
                         "--model", "llama2-70b", "--qsl-npy", qsl, "--nodes",
                         f"127.0.0.1:{nport}", "--output-dir", out, "--quiet", "--progress",
                         "off", "--log-level", "warn",
                         "--set", f"server_target_qps={a.qps}", "--set", "use_token_latencies=1",
                         "--set", f"min_duration_ms={int(a.duration_s * 1000)}",
                         "--set", "min_query_count=1", "--set", "server_ttft_latency=2000000000",
                         "--set", "server_tpot_latency=200000000",
                         "--set", "server_target_latency_ns=60000000000"],
                        capture_output=True, text=True, timeout=a.duration_s * 4 + 60)
    wall = time.monotonic() - t0
    h1, r1 = thread_cpu_s(node.pid)
    c0, c1 = h0 + r0, h1 + r1  # the node's threads live through the run
    node.terminate()
    node.wait(10)
    tokens = stop_source(src)
    if lg.returncode not in (0, 1) or tokens == 0:  # 1: INVALID (short runs), still measured
        sys.exit(f"loadgen-node failed ({lg.returncode}, {tokens} tokens):\n{lg.stderr[-3000:]}")
    s = open(os.path.join(out, "mlperf_log_summary.txt")).read()
    node_ttft = int(re.search(r"50\.00 percentile first token latency \(ns\)\s*:\s*(\d+)",
                              s).group(1)) / 1e3
    node_tpot = int(re.search(r"50\.00 percentile time to output token \(ns\)\s*:\s*(\d+)",
                              s).group(1)) / 1e3
    return {"direct_ttft_us": direct_ttft, "node_ttft_us": node_ttft,
            "ratio": node_ttft / direct_ttft, "tokens": tokens,
            "tokens_per_s": tokens / wall, "node_cpu_ns_per_token": (c1 - c0) * 1e9 / tokens,
            "node_http_thread_ns_per_token": (h1 - h0) * 1e9 / tokens,
            "node_other_threads_ns_per_token": (r1 - r0) * 1e9 / tokens,
            "direct_client_cpu_ns_per_token": float(d["cpu_ns_per_token"]),
            "source_cpu_ns_per_token": (src.cpu - s0) * 1e9 / tokens,
            "node_tpot_us": node_tpot, "direct_tpot_us": float(d.get("tpot_p50_us", "nan")),
            "load1": os.getloadavg()[0], "lg_rc": lg.returncode}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--qps", type=float, default=200)
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--duration-s", type=float, default=10)
    ap.add_argument("--ttft-ms", type=int, default=20)
    ap.add_argument("--tpot-ms", type=int, default=4)
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--coalesce-us", type=int, default=None)
    ap.add_argument("--stream-interval", type=int, default=1)
    ap.add_argument("--client", choices=["lean", "curl"], default=None)
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="llm-bench-")
    try:
        qsl = os.path.join(tmp, "qsl")
        os.makedirs(qsl)
        rng = np.random.default_rng(1)
        for i in range(256):
            np.save(os.path.join(qsl, f"{i:08d}.npy"), rng.integers(3, 32000, 64).astype("<i4"))
        p = subprocess.run([os.path.join(a.build, "bench", "llm_direct"), "--parse", "200000"],
                           capture_output=True, text=True)
        print(p.stdout.strip())
        runs = [one_run(a, a.build, tmp, qsl) for _ in range(a.runs)]
        for r in runs:
            print(" ".join(f"{k}={v:.3f}" if isinstance(v, float) else f"{k}={v}"
                           for k, v in r.items()))
        med = {k: float(np.median([r[k] for r in runs])) for k in runs[0]}
        print(f"| L1 openai streaming | {med['tokens_per_s']:.0f} tokens/s | node CPU "
              f"{med['node_cpu_ns_per_token'] / 1000:.2f} us/token (target <= 1) | TTFT p50 "
              f"{med['node_ttft_us'] / 1000:.2f} ms vs {med['direct_ttft_us'] / 1000:.2f} ms direct:"
              f" {med['ratio']:.3f}x (target <= 1.05) |")
    finally:
        for p in CHILDREN:
            if p.poll() is None:
                p.kill()
                p.wait()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
