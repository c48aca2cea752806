#!/usr/bin/python3
"""Endpoint mode against a Python client (issue 39; bench/README.md): both drive the same null
engine (sse_source: every token at once, 8 per request) with the same number of requests in
flight, and each run's requests per CPU-second of the client (user + system, all its threads:
what the client costs on one core) and per wall second are printed side by side, with the
ratio. loadgen-node runs an Offline PerformanceOnly run with --nodes openai+http://...; the
reference is aiohttp_client.py (asyncio + aiohttp, as NVIDIA's harness).

    endpoint_bench.py BUILD_DIR [--requests 20000] [--concurrency 64]
"""
import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def child_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--requests", type=int, default=20000)
    ap.add_argument("--concurrency", type=int, default=64)
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="epbench-")
    pf = os.path.join(tmp, "port")
    src = subprocess.Popen([os.path.join(a.build, "bench", "sse_source"), "--port-file", pf,
                            "--ttft-us", "0", "--tpot-us", "0", "--tokens", "8"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):
            if os.path.exists(pf) and os.path.getsize(pf):
                break
            time.sleep(0.05)
        port = int(open(pf).read())
        rows = []
        # loadgen-node, endpoint mode: an Offline run of about --requests samples.
        out = os.path.join(tmp, "lg")
        c0, t0 = child_cpu(), time.monotonic()
        r = subprocess.run([os.path.join(a.build, "loadgen-node", "loadgen-node"), "--scenario",
                            "Offline", "--mode", "PerformanceOnly", "--qsl-synthetic", "1024",
                            "--sample-size", "400", "--nodes", f"openai+http://127.0.0.1:{port}",
                            "--endpoint-max-tokens", "8", "--endpoint-max-inflight",
                            str(a.concurrency), "--output-dir", out, "--quiet", "--progress",
                            "off", "--log-level", "warn", "--set", "min_duration_ms=1000",
                            "--set", f"offline_expected_qps={a.requests / 1.1:.0f}", "--set",
                            "min_query_count=1"], capture_output=True, text=True, timeout=600)
        wall, cpu = time.monotonic() - t0, child_cpu() - c0
        nodes = json.load(open(next(os.path.join(out, f) for f in os.listdir(out)
                                    if f.endswith("nodes.json"))))["nodes"]
        n = nodes[0]["samples_completed"]
        if r.returncode != 0 or n == 0:
            sys.exit(f"loadgen-node failed ({r.returncode}):\n{r.stdout[-1500:]}{r.stderr[-1500:]}")
        rows.append(("loadgen-node endpoint mode", n, wall, cpu))
        # The Python reference client, same engine, same concurrency.
        c0, t0 = child_cpu(), time.monotonic()
        r = subprocess.run(["/usr/bin/python3", os.path.join(HERE, "aiohttp_client.py"), "--url",
                            f"http://127.0.0.1:{port}", "--requests", str(n), "--concurrency",
                            str(a.concurrency)], capture_output=True, text=True, timeout=600)
        if r.returncode != 0:
            sys.exit(f"aiohttp_client failed:\n{r.stderr[-2000:]}")
        py = json.loads(r.stdout)
        rows.append(("python asyncio + aiohttp", n, time.monotonic() - t0, child_cpu() - c0))
        print(f"{'client':28} {'requests':>9} {'wall s':>8} {'cpu s':>8} {'req/s':>9} "
              f"{'req/cpu-s':>10} {'tok/cpu-s':>10}")
        for name, n, wall, cpu in rows:
            print(f"{name:28} {n:9d} {wall:8.2f} {cpu:8.2f} {n / wall:9.0f} {n / cpu:10.0f} "
                  f"{8 * n / cpu:10.0f}")
        print(f"capacity ratio (requests per CPU-second): "
              f"{(rows[0][1] / rows[0][3]) / (rows[1][1] / rows[1][3]):.1f}x; python client's "
              f"own TTFT p50 {py['ttft_p50_ms']:.2f} ms p99 {py['ttft_p99_ms']:.2f} ms")
    finally:
        src.terminate()
        src.wait()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
