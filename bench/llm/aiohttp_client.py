#!/usr/bin/python3
"""The reference Python client of the endpoint comparison (issue 39, bench/README.md "Endpoint
mode against a Python client"): built the way NVIDIA's MLPerf harness drives serving endpoints,
asyncio with one aiohttp ClientSession (Debian's python3-aiohttp), streaming completions read
line by line, least-pending balancing over the endpoints, as many requests in flight as asked
(closed loop, as an Offline run). Prints one JSON line: requests, tokens, wall and CPU seconds,
TTFT percentiles as this client saw them. --records F also writes one line per request to F:
"start first last" on CLOCK_MONOTONIC in ns (time.monotonic_ns(), the clock of sse_source --log):
before the POST, when the first and the last token's event were read.

    aiohttp_client.py --url http://127.0.0.1:PORT [--url ...] [--requests N] [--concurrency C]
                      [--prompt-tokens P] [--max-tokens T] [--records F]
"""
import argparse
import asyncio
import json
import resource
import time

import aiohttp


async def one(session, url, body, stats, pending, idx):
    t0 = time.monotonic_ns()
    first = last = None
    toks = 0
    pending[idx] += 1
    try:
        async with session.post(url, data=body,
                                headers={"Content-Type": "application/json"}) as r:
            async for line in r.content:
                if not line.startswith(b"data: "):
                    continue
                data = line[6:].strip()
                if data == b"[DONE]":
                    break
                ev = json.loads(data)
                ch = ev.get("choices") or []
                if ch and ch[0].get("token_ids"):
                    last = time.monotonic_ns()
                    if first is None:
                        first = last
                    toks += len(ch[0]["token_ids"])
    finally:
        pending[idx] -= 1
    stats["tokens"] += toks
    stats["ttft"].append(((first or time.monotonic_ns()) - t0) / 1e9)
    stats["rec"].append((t0, first or 0, last or 0))


async def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", action="append", required=True)
    ap.add_argument("--requests", type=int, default=20000)
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--prompt-tokens", type=int, default=100)
    ap.add_argument("--max-tokens", type=int, default=8)
    ap.add_argument("--records")
    a = ap.parse_args()
    urls = [u.rstrip("/") + "/v1/completions" for u in a.url]
    body = json.dumps({"model": "model", "prompt": list(range(1000, 1000 + a.prompt_tokens)),
                       "max_tokens": a.max_tokens, "stream": True,
                       "return_token_ids": True}).encode()
    stats = {"tokens": 0, "ttft": [], "rec": []}
    pending = [0] * len(urls)
    left = a.requests
    conn = aiohttp.TCPConnector(limit=a.concurrency)
    c0 = resource.getrusage(resource.RUSAGE_SELF)
    t0 = time.monotonic()
    async with aiohttp.ClientSession(connector=conn) as session:
        async def worker():
            nonlocal left
            while left > 0:
                left -= 1
                idx = min(range(len(urls)), key=lambda i: pending[i])  # least pending
                await one(session, urls[idx], body, stats, pending, idx)
        await asyncio.gather(*(worker() for _ in range(a.concurrency)))
    wall = time.monotonic() - t0
    c1 = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (c1.ru_utime - c0.ru_utime) + (c1.ru_stime - c0.ru_stime)
    tt = sorted(stats["ttft"])
    if a.records:
        with open(a.records, "w") as f:
            f.writelines(f"{t0} {t1} {t2}\n" for t0, t1, t2 in sorted(stats["rec"]))
    print(json.dumps({"client": "python-aiohttp", "requests": a.requests,
                      "tokens": stats["tokens"], "wall_s": wall, "cpu_s": cpu,
                      "ttft_p50_ms": 1e3 * tt[len(tt) // 2],
                      "ttft_p99_ms": 1e3 * tt[int(len(tt) * 0.99)]}))


if __name__ == "__main__":
    asyncio.run(main())
