#!/usr/bin/env python3
"""--issue-write-thread on|off: with on, the Server issue thread that runs the QDL's I/O hands every
batch of frames to its connection's write thread instead of calling writev itself. Over a Server
run against a null sut-node on loopback, with on and with off: every sample generated is answered
exactly once (the detail log's generated and result query counts, and the node's counters: sent
= completed, none failed, no error in the run), the same payload bytes leave for the same samples,
and the harness block's line "Writes by write threads : T of A batches" agrees with the detail log:
with on T > 0 and at most a few batches of the series (the loop thread's own, before the loop is
lent and after it is given back) not by the write thread; with off T = 0 and A > 0. A bad value
gets exit status 2 and a message naming the flag. Asserts outcomes, never speed; bounded in time.
Usage: cli_issue_write_thread.py LOADGEN_NODE SUT_NODE OUTDIR"""
import json
import os
import re
import shutil
import subprocess
import sys

from nullnode import detail_values, start_null_node

RUN_S = 3  # the series' length
QPS = 2000  # the Server schedule's rate
# Batches of the series the loop thread may write itself: around the lend (its start and end) and
# a ping a second while it is not lent; the series writes about one batch per query.
SLACK = 2 * RUN_S + 10


def run_mode(lg, addr, out, mode, fails):
    d = os.path.join(out, mode)
    p = subprocess.run([lg, "--scenario", "Server", "--nodes", addr, "--issue-write-thread", mode,
                        "--qsl-synthetic", "64", "--sample-size", "64", "--progress", "off",
                        "--quiet", "--set", f"server_target_qps={QPS}",
                        "--set", f"min_duration_ms={RUN_S * 1000}",
                        "--set", "server_target_latency_ns=100000000", "--output-dir", d],
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                       timeout=RUN_S + 120)
    # 1 (INVALID) is a verdict on latency, which a loaded test host may spoil; not a failure.
    if p.returncode not in (0, 1):
        fails.append(f"{mode}: exited {p.returncode}: {p.stderr.strip()}")
        return None
    summary = open(os.path.join(d, "mlperf_log_summary.txt")).read()
    det = detail_values(os.path.join(d, "mlperf_log_detail.txt"))
    nodes = json.load(open(os.path.join(d, "mlperf_log_nodes.json")))["nodes"]
    if "No errors encountered during test." not in summary:
        fails.append(f"{mode}: the run logged errors (a sample failed or was lost)")
    gen, res = det.get("generated_query_count"), det.get("result_query_count")
    sent = sum(n["samples_sent"] for n in nodes)
    done = sum(n["samples_completed"] for n in nodes)
    failed = sum(n["samples_failed"] for n in nodes)
    if not gen or gen != res or sent != gen or done != gen or failed:
        fails.append(f"{mode}: generated {gen}, results {res}, node sent {sent}, completed {done}, "
                     f"failed {failed}: want every sample answered once")
    if "SUT's I/O on the issue thread : yes" not in summary:
        fails.append(f"{mode}: the issue thread did not run the QDL's I/O")
    m = re.search(r"Writes by write threads *: (\d+) of (\d+) batches", summary)
    keys = [det.get("harness_batches_write_thread"), det.get("harness_batches_out")]
    if not m or keys != [int(m.group(1)), int(m.group(2))]:
        fails.append(f"{mode}: writes line {m.group(0) if m else None!r}, detail {keys!r}: want "
                     "the same figures in both")
        return None
    thr, all_ = int(m.group(1)), int(m.group(2))
    if mode == "on" and not (0 < thr <= all_ and all_ - thr <= SLACK):
        fails.append(f"on: {thr} of {all_} batches by the write thread: want all but at most "
                     f"{SLACK}")
    if mode == "off" and (thr != 0 or all_ == 0):
        fails.append(f"off: {thr} of {all_} batches by a write thread: want none of some")
    return gen, sum(n["bytes_out"] for n in nodes), thr, all_


def main():
    lg, sut, out = sys.argv[1:4]
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    fails = []
    p = subprocess.run([lg, "--scenario", "Server", "--sut", "null", "--issue-write-thread",
                        "maybe", "--qsl-synthetic", "64", "--output-dir", os.path.join(out, "bad")],
                       capture_output=True, text=True, timeout=60)
    if p.returncode != 2 or "--issue-write-thread: 'maybe' is not on or off" not in p.stderr:
        fails.append(f"--issue-write-thread maybe: status {p.returncode}, "
                     f"stderr {p.stderr.strip()}")
    node, addr = start_null_node(sut, out)
    try:
        if addr is None:
            print("FAIL: sut-node did not start")
            return 1
        on = run_mode(lg, addr, out, "on", fails)
        off = run_mode(lg, addr, out, "off", fails)
    finally:
        node.kill()
        node.wait()
    # The schedule is the same (its seed, rate and length): the same samples, the same bytes.
    if on and off and on[0] == off[0] and on[1] != off[1]:
        fails.append(f"{on[0]} samples each: payload bytes out {on[1]} with on, {off[1]} with off")
    for f in fails:
        print("FAIL:", f)
    if not fails:
        print(f"OK: on: {on[2]} of {on[3]} batches by the write thread, {on[0]} samples once; "
              f"off: {off[2]} of {off[3]}, {off[0]} samples once")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
