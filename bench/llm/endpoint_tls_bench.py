#!/usr/bin/python3
"""Endpoint mode over HTTPS: the lean client's TLS against libcurl's (--endpoint-client curl), and
openai+http:// for scale (issue 39; bench/README.md, "HTTPS"). The null engine (sse_source, 8
tokens a request) sits behind socat's TLS (a private CA made here with the openssl command).

Capacity: an Offline PerformanceOnly run of about --requests samples, --concurrency in flight:
requests per loadgen-node CPU-second (user + system, all its threads) and per wall second.
Latency: Server at 20/s for 4 s against sse_source --ttft-us 20000 --tpot-us 5000: the TTFT and
TPOT loadgen-node reports less the engine's own (socat's relay included, the same for both).
Medians of --runs. Needs socat (Debian's socat) and openssl; not a bench/run.sh row.

    endpoint_tls_bench.py BUILD_DIR [--requests 6000] [--concurrency 64] [--runs 3]
"""
import argparse
import csv
import glob
import json
import os
import random
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time


def cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def pki(tmp):
    def ossl(*argv):
        subprocess.run(["openssl", *argv], check=True, capture_output=True)
    ossl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{tmp}/ca.key", "-out",
         f"{tmp}/ca.crt", "-days", "1", "-subj", "/CN=bench CA")
    ossl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{tmp}/srv.key", "-out",
         f"{tmp}/srv.csr", "-subj", "/CN=127.0.0.1")
    with open(f"{tmp}/ext", "w") as f:
        f.write("subjectAltName=IP:127.0.0.1\n")
    ossl("x509", "-req", "-in", f"{tmp}/srv.csr", "-CA", f"{tmp}/ca.crt", "-CAkey",
         f"{tmp}/ca.key", "-CAcreateserial", "-days", "1", "-extfile", f"{tmp}/ext", "-out",
         f"{tmp}/srv.crt")


def start(build, tmp, ttft_us, tpot_us):
    """sse_source and a socat TLS front for it: (processes, plain port, TLS port)."""
    pf = f"{tmp}/port"
    if os.path.exists(pf):
        os.unlink(pf)
    src = subprocess.Popen([f"{build}/bench/sse_source", "--port-file", pf, "--ttft-us",
                            str(ttft_us), "--tpot-us", str(tpot_us), "--tokens", "8"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    while not (os.path.exists(pf) and os.path.getsize(pf)):
        time.sleep(0.05)
    port = int(open(pf).read())
    fp = random.randint(20000, 60000)
    # backlog: socat's default (5) drops the SYNs of 64 connections opened at once (1 s retry)
    front = subprocess.Popen(["socat", f"OPENSSL-LISTEN:{fp},reuseaddr,fork,backlog=1024,"
                              f"nodelay,cert={tmp}/srv.crt,key={tmp}/srv.key,verify=0",
                              f"TCP:127.0.0.1:{port},nodelay"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", fp), 1).close()
            break
        except OSError:
            time.sleep(0.05)
    return (front, src), port, fp


def stop(procs):
    for p in procs:
        p.terminate()
        p.wait()


def loadgen(a, tmp, url, extra, argv):
    out = f"{tmp}/out"
    shutil.rmtree(out, ignore_errors=True)
    r = subprocess.run([f"{a.build}/loadgen-node/loadgen-node", "--mode", "PerformanceOnly",
                        "--qsl-synthetic", "1024", "--sample-size", "400", "--nodes", url,
                        "--endpoint-max-tokens", "8", "--endpoint-ca", f"{tmp}/ca.crt",
                        "--output-dir", out, "--quiet", "--progress", "off", "--log-level",
                        "warn"] + argv + extra, capture_output=True, text=True, timeout=600)
    if r.returncode not in (0, 1):  # 1: a result INVALID for its duration, still measured
        sys.exit(f"loadgen-node {url} {extra} exit {r.returncode}:\n{r.stderr[-2000:]}")
    return out


def capacity(a, tmp, url, extra):
    c0, t0 = cpu(), time.monotonic()
    out = loadgen(a, tmp, url, extra, [
        "--scenario", "Offline", "--endpoint-max-inflight", str(a.concurrency), "--set",
        "min_duration_ms=1000", "--set", f"offline_expected_qps={a.requests / 1.1:.0f}", "--set",
        "min_query_count=1"])
    wall, c = time.monotonic() - t0, cpu() - c0
    n = json.load(open(glob.glob(f"{out}/*nodes.json")[0]))["nodes"][0]["samples_completed"]
    return n / c, n / wall


def latency(a, tmp, url, extra):
    argv = ["--scenario", "Server", "--sample-latencies"]
    for kv in ("server_target_qps=20", "use_token_latencies=1", "min_duration_ms=4000",
               "min_query_count=1", "server_target_latency_ns=2000000000",
               "server_ttft_latency=2000000000", "server_tpot_latency=200000000"):
        argv += ["--set", kv]
    out = loadgen(a, tmp, url, extra, argv)
    rows = list(csv.DictReader(open(glob.glob(f"{out}/*sample_latencies*.csv")[0])))
    ttft = sorted(int(r["ttft_ns"]) / 1e3 - 20000 for r in rows)
    tpot = [(int(r["latency_ns"]) - int(r["ttft_ns"])) / 7e3 - 5000 for r in rows]
    return statistics.median(ttft), ttft[int(len(ttft) * 0.99)], statistics.median(tpot)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("build")
    ap.add_argument("--requests", type=int, default=6000)
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--runs", type=int, default=3)
    a = ap.parse_args()
    for tool in ("socat", "openssl"):
        if not shutil.which(tool):
            sys.exit(f"endpoint_tls_bench: needs {tool} (apt-get install {tool})")
    tmp = tempfile.mkdtemp(prefix="eptls-")
    curl = ["--endpoint-client", "curl"]
    try:
        pki(tmp)
        procs, port, fp = start(a.build, tmp, 0, 0)
        cap = {}
        try:
            for _ in range(a.runs):
                for name, url, extra in (("http lean", f"openai+http://127.0.0.1:{port}", []),
                                         ("https lean", f"openai+https://127.0.0.1:{fp}", []),
                                         ("https curl", f"openai+https://127.0.0.1:{fp}", curl)):
                    cap.setdefault(name, []).append(capacity(a, tmp, url, extra))
        finally:
            stop(procs)
        print(f"capacity: Offline, 8 tokens a request, {a.concurrency} in flight, median of "
              f"{a.runs}")
        for k, v in cap.items():
            print(f"  {k:11} {statistics.median(x[0] for x in v):8.0f} requests/CPU-s "
                  f"{statistics.median(x[1] for x in v):8.0f} requests/s   (runs "
                  f"{[round(x[0]) for x in v]})")
        procs, port, fp = start(a.build, tmp, 20000, 5000)
        lat = {}
        try:
            for _ in range(a.runs):
                for name, extra in (("https lean", []), ("https curl", curl)):
                    lat.setdefault(name, []).append(
                        latency(a, tmp, f"openai+https://127.0.0.1:{fp}", extra))
        finally:
            stop(procs)
        print(f"added over the engine's TTFT 20 ms, TPOT 5 ms (Server 20/s, 4 s; median of "
              f"{a.runs}; socat's relay included)")
        for k, v in lat.items():
            print(f"  {k:11} TTFT p50 {statistics.median(x[0] for x in v):7.0f} us  p99 "
                  f"{statistics.median(x[1] for x in v):7.0f} us  TPOT p50 "
                  f"{statistics.median(x[2] for x in v):6.1f} us")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
