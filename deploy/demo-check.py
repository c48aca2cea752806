#!/usr/bin/env python3
"""Checks what a loadgen-node run did, apart from how fast the machine was: every detail line is
':::MLLOG ' plus JSON (as the MLCommons checker reads it), no errors were logged, the summary is
complete, and every sample was answered exactly once (from the per-sample latency file of a
performance run, or the accuracy log of an accuracy run). Prints one line: what was checked and
the run's verdict (VALID/INVALID, which depends on the machine's load and is not checked here).
Exit status 0 when the checks pass, 1 otherwise (the reason on the line).

Usage: demo-check.py OUTDIR SCENARIO {performance|accuracy}"""
import csv
import json
import sys


def fail(msg):
    print("check: FAILED: " + msg)
    sys.exit(1)


def read_detail(out):
    detail = {}
    try:
        with open(out + "/mlperf_log_detail.txt", encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                if not line.startswith(":::MLLOG "):
                    fail("detail line %d has no :::MLLOG marker" % n)
                try:
                    msg = json.loads(line[len(":::MLLOG "):])
                except ValueError as e:
                    fail("detail line %d is not JSON: %s" % (n, e))
                if "key" not in msg or "value" not in msg:
                    fail("detail line %d lacks key or value" % n)
                detail.setdefault(msg["key"], msg["value"])
    except OSError as e:
        fail("no detail log: %s" % e)
    return detail


def exactly_once(seqs, what):
    """seqs must be 0..n-1, each once."""
    seen = set()
    for s in seqs:
        if s in seen:
            fail("%s %d was answered twice" % (what, s))
        seen.add(s)
    if not seen:
        fail("no %s was answered" % what)
    if min(seen) != 0 or max(seen) != len(seen) - 1:
        fail("%d %ss answered, but the ids run from %d to %d: some are missing"
             % (len(seen), what, min(seen), max(seen)))
    return len(seen)


def main():
    if len(sys.argv) == 2 and sys.argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        sys.exit(0)
    if len(sys.argv) != 4 or sys.argv[3] not in ("performance", "accuracy"):
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        sys.exit(2)
    out, scenario, mode = sys.argv[1:]
    detail = read_detail(out)
    if detail.get("effective_scenario") != scenario:
        fail("effective_scenario is %r, expected %r" % (detail.get("effective_scenario"), scenario))
    errors = sorted(k for k in detail if k.startswith("error_"))
    if errors:
        fail("errors logged (%s), see %s/mlperf_log_detail.txt" % (", ".join(errors), out))
    # A performance run counts its errors (an accuracy run logs no num_errors).
    if mode == "performance" and detail.get("num_errors") != 0:
        fail("num_errors is %r (see %s/mlperf_log_detail.txt)" % (detail.get("num_errors"), out))
    if "Network SUT" not in str(detail.get("sut_name")):
        fail("sut_name %r lacks 'Network SUT'" % detail.get("sut_name"))
    try:
        with open(out + "/mlperf_log_summary.txt", encoding="utf-8") as f:
            summary = f.read()
    except OSError as e:
        fail("no summary: %s" % e)
    want = ["No errors encountered during test."]
    if mode == "performance":
        want += ["MLPerf Results Summary", "Scenario : " + scenario, "Result is : "]
    for text in want:
        if text not in summary:
            fail("the summary lacks %r" % text)
    try:
        with open(out + "/mlperf_log_accuracy.json", encoding="utf-8") as f:
            acc = json.load(f)
    except (OSError, ValueError) as e:
        fail("the accuracy log is not JSON: %s" % e)
    if not isinstance(acc, list):
        fail("the accuracy log is not a JSON array")

    if mode == "performance":
        try:
            with open(out + "/mlperf_log_sample_latencies.csv", encoding="utf-8") as f:
                header, *rows = list(csv.reader(f))
        except (OSError, ValueError) as e:
            fail("no per-sample latency file (--sample-latencies): %s" % e)
        # sample_seq, scheduled_ns, latency_ns (and more columns after them in newer versions)
        if header[:3] != ["sample_seq", "scheduled_ns", "latency_ns"]:
            fail("sample_latencies.csv header is %r" % header)
        for r in rows:
            if len(r) != len(header) or int(r[2]) < 0:
                fail("sample %s did not complete (%r)" % (r[0] if r else "?", r))
        n = exactly_once((int(r[0]) for r in rows), "sample")
        verdict = detail.get("result_validity")
        if verdict not in ("VALID", "INVALID"):
            fail("result_validity is %r" % verdict)
        why = ""
        if verdict == "INVALID":
            why = " (%s)" % (detail.get("result_invalid_reason") or "performance constraints not met")
        print("check: %d samples, each answered once; logs well-formed; %s%s" % (n, verdict, why))
    else:
        n = exactly_once((e["qsl_idx"] for e in acc), "QSL index")
        total = detail.get("qsl_reported_total_count")
        if n != total:
            fail("%d of the QSL's %r samples were answered" % (n, total))
        print("check: all %d samples answered once; logs well-formed" % n)


main()
