#!/usr/bin/env python3
"""Checks a loadgen-node output directory the way the MLCommons tools read it: every detail line
is ':::MLLOG ' plus a JSON object (the submission checker's parser is strict), the run is VALID,
the summary says so, and the accuracy log is a JSON array.
Usage: check_logs.py OUTDIR SCENARIO"""
import json
import sys


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def main():
    out, scenario = sys.argv[1], sys.argv[2]
    detail = {}
    with open(out + "/mlperf_log_detail.txt", encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.startswith(":::MLLOG "):
                fail("detail line %d has no :::MLLOG marker" % n)
            try:
                msg = json.loads(line[len(":::MLLOG "):])
            except ValueError as e:
                fail("detail line %d is not JSON: %s" % (n, e))
            for k in ("key", "value", "time_ms", "namespace", "event_type", "metadata"):
                if k not in msg:
                    fail("detail line %d lacks %s" % (n, k))
            detail.setdefault(msg["key"], msg["value"])
    want = {"effective_scenario": scenario, "result_validity": "VALID", "num_errors": 0,
            "sut_name": "Null SUT"}
    for k, v in want.items():
        if detail.get(k) != v:
            fail("%s is %r, expected %r" % (k, detail.get(k), v))
    metric = {"Offline": "result_samples_per_second", "Server": "result_completed_samples_per_sec",
              "SingleStream": "early_stopping_latency_ss",
              "MultiStream": "early_stopping_latency_ms"}[scenario]
    if not isinstance(detail.get(metric), (int, float)) or detail[metric] <= 0:
        fail("%s is %r" % (metric, detail.get(metric)))
    for k in ("loaded_qsl_set", "generated_query_count", "get_sut_name_duration_ns",
              "effective_min_duration_ms", "power_begin", "early_stopping_met"):
        if k not in detail:
            fail("no %s in the detail log" % k)
    with open(out + "/mlperf_log_summary.txt", encoding="utf-8") as f:
        summary = f.read()
    for text in ("MLPerf Results Summary", "Scenario : " + scenario, "Result is : VALID",
                 "No errors encountered during test."):
        if text not in summary:
            fail("the summary lacks %r" % text)
    with open(out + "/mlperf_log_accuracy.json", encoding="utf-8") as f:
        if not isinstance(json.load(f), list):
            fail("the accuracy log is not a JSON array")
    extra = check_intervals(out)
    print("OK: %s VALID, %d detail keys%s" % (scenario, len(detail), extra))


def check_intervals(out):
    """With --sample-latencies and --latency-intervals (the Server run): every interval line
    must be what its samples in the per-sample file give, with the summary's percentile index."""
    import os
    path = out + "/mlperf_log_latency_intervals.csv"
    if not os.path.exists(path):
        return ""
    with open(out + "/mlperf_log_sample_latencies.csv", encoding="utf-8") as f:
        head, *body = list(f)
        rows = [tuple(int(x) for x in line.split(",")[:11]) for line in body]
        causes = [line.strip().split(",")[11] for line in body]
    if head.strip() != ("sample_seq,scheduled_ns,latency_ns,issue_late_ns,issue_call_ns,"
                        "qdl_queue_ns,ttft_ns,n_tokens,node_queue_ns,node_backend_ns,"
                        "wire_return_ns,issue_late_cause"):
        fail("sample_latencies.csv header is %r" % head)
    # This is the Server run: every sample has the cause of its lateness.
    if any(c not in ("spin", "offcpu", "io", "sleep", "work") for c in causes):
        fail("sample_latencies.csv: an issue_late_cause not known: %r" % sorted(set(causes)))
    # The node's share, as sut-nodes report it, and the wire and return: each sample sent to a
    # node and completed has all three (an in-process SUT reports none), and the QDL's queueing
    # plus them fits in its latency (the parts run one after the other from issue to completion).
    done = [r for r in rows if r[2] >= 0 and r[5] >= 0]
    if any(r[8] < 1 or r[9] < 1 or r[10] < 0 for r in done):
        fail("sample_latencies.csv: a completed sample without the node's times")
    over = [r for r in done if r[10] > 0 and r[5] + r[8] + r[9] + r[10] > r[2] + 1000]
    if over:
        fail("sample_latencies.csv: QDL queue + node queue + node backend + wire and return "
             "exceed the latency: %r" % (over[0],))
    # The breakdown: a Server sample is issued at or after its scheduled time, and its hand-off
    # takes some time; neither can exceed the sample's own latency by much (both are clamped).
    if not rows or any(r[3] < 0 or r[4] <= 0 for r in rows):
        fail("sample_latencies.csv: a negative lateness or a zero issue_call_ns")
    if any(r[5] < -1 for r in rows):
        fail("sample_latencies.csv: a qdl_queue_ns below -1 (not reported)")
    with open(path, encoding="utf-8") as f:
        header, *lines = [line.strip().split(",") for line in f]
    if header != ["interval_start_ms", "samples", "lost", "p50_ns", "p90_ns", "p99_ns",
                  "p99_9_ns", "max_ns"]:
        fail("latency_intervals.csv header is %r" % header)
    width_ms = int(os.environ.get("INTERVAL_MS", "100"))
    groups = {}
    for _, sched, lat, *_ in rows:
        groups.setdefault(sched // (width_ms * 1000000), []).append(lat)
    if len(lines) != len(groups):
        fail("%d interval lines for %d intervals with samples" % (len(lines), len(groups)))
    for line in lines:
        start, n, lost, *pct = (int(x) for x in line)
        lats = sorted(groups.get(start // width_ms, []))
        if n != len(lats) or lost != 0:
            fail("interval %d ms: %d samples (%d lost), the sample file has %d"
                 % (start, n, lost, len(lats)))
        want = [lats[min(int(len(lats) * p), len(lats) - 1)] for p in (0.5, 0.9, 0.99, 0.999)]
        if pct != want + [lats[-1]]:
            fail("interval %d ms: percentiles %r, the sample file gives %r"
                 % (start, pct, want + [lats[-1]]))
    return ", %d latency intervals match %d samples" % (len(lines), len(rows))


main()
