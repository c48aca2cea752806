#!/usr/bin/python3
"""The openai backend's own cost: node CPU per streamed token and the TTFT it adds, at >= 10 000
tokens/s through one sut-node against a fast token source (sse_source), next to the same
requests made directly (llm_direct, the backend's own HTTP and parsing code without the harness).

    bench/llm/llm_bench.py [--build build] [--qps 200] [--tokens 64] [--duration-s 10]
                           [--ttft-ms 20] [--tpot-ms 4] [--runs 1]

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
                          "--ttft-us", str(a.ttft_ms * 1000), "--tpot-us", str(a.tpot_ms * 1000)],
                         stdout=open(log, "w"))
    CHILDREN.append(p)
    p.log = log
    return p, wait_port(pf)


def stop_source(p):
    p.terminate()
    try:
        p.wait(10)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
        sys.exit("sse_source did not stop on SIGTERM")
    return int(re.search(r"tokens=(\d+)", open(p.log).read()).group(1))


def one_run(a, b, tmp, qsl):
    # Direct: the same rate and request shape, no harness in between.
    src, port = source(b, tmp, "src-direct", a)
    r = subprocess.run([os.path.join(b, "bench", "llm_direct"), "--url",
                        f"http://127.0.0.1:{port}", "--qps", str(a.qps), "--duration-s",
                        str(a.duration_s), "--max-tokens", str(a.tokens), "--prompt-tokens", "64"],
                       capture_output=True, text=True, timeout=a.duration_s * 4 + 60)
    stop_source(src)
    if r.returncode != 0:
        sys.exit(f"llm_direct failed ({r.returncode}):\n{r.stderr[-2000:]}")
    d = dict(l.split("=") for l in r.stdout.split())
    direct_ttft = float(d["ttft_p50_us"])

    # Through loadgen-node -> QDL -> sut-node (openai) -> the source.
    src, port = source(b, tmp, "src-node", a)
    pf = os.path.join(tmp, "node.port")
    if os.path.exists(pf):
        os.unlink(pf)
    node = subprocess.Popen([os.path.join(b, "sut-node", "sut-node"), "--listen", "127.0.0.1:0",
                             "--port-file", pf, "--name", "llm-bench", "--log-level", "warn",
                             "--backend", os.path.join(b, "sut-node", "backends", "openai",
                                                       "libsut_backend_openai.so"),
                             "--backend-opt", f"url=http://127.0.0.1:{port}",
                             "--backend-opt", f"max_tokens={a.tokens}",
                             "--backend-opt", "max_concurrency=128", "--max-batch", "32"])
    CHILDREN.append(node)
    nport = wait_port(pf)
    out = os.path.join(tmp, "lg")
    c0, t0 = cpu_s(node.pid), time.monotonic()
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
    c1 = cpu_s(node.pid)
    node.terminate()
    node.wait(10)
    tokens = stop_source(src)
    s = open(os.path.join(out, "mlperf_log_summary.txt")).read()
    node_ttft = int(re.search(r"50\.00 percentile first token latency \(ns\)\s*:\s*(\d+)",
                              s).group(1)) / 1e3
    return {"direct_ttft_us": direct_ttft, "node_ttft_us": node_ttft,
            "ratio": node_ttft / direct_ttft, "tokens": tokens,
            "tokens_per_s": tokens / wall, "node_cpu_ns_per_token": (c1 - c0) * 1e9 / tokens,
            "direct_client_cpu_ns_per_token": float(d["cpu_ns_per_token"]),
            "lg_rc": lg.returncode}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--qps", type=float, default=200)
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--duration-s", type=float, default=10)
    ap.add_argument("--ttft-ms", type=int, default=20)
    ap.add_argument("--tpot-ms", type=int, default=4)
    ap.add_argument("--runs", type=int, default=1)
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
