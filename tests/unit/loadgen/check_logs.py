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
    print("OK: %s VALID, %d detail keys" % (scenario, len(detail)))


main()
