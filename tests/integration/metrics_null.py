#!/usr/bin/env python3
"""loadgen-node's metrics without the QDL: a Server run against the in-process null SUT with
--metrics-listen and --metrics-linger-ms, read over HTTP after the run while it lingers.

  metrics_null.py LOADGEN_NODE

The latency and issue-lateness histogram counts equal the completed samples of the run's
sample_latencies CSV, the lateness sum equals the CSV's issue_late_ns sum (within 1 ns per sample:
the CSV column is clamped to 32 bits, far above any lateness here), loadgen_run_info names the
run, loadgen_run_result_valid and loadgen_run_result equal the summary, the QDL-only series are
absent, process_* and loadgen_build_info are present; the program ends after its linger with the
run's exit status."""

import csv
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import prometheus_llm as pl  # noqa: E402
import prometheus_scrape as ps  # noqa: E402

LINGER_MS = 4000


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    lg = sys.argv[1]
    tmp = tempfile.mkdtemp(prefix="metrics-null-")
    proc = None
    try:
        out = os.path.join(tmp, "out")
        log = os.path.join(tmp, "lg.log")
        proc = subprocess.Popen(
            [lg, "--sut", "null", "--scenario", "Server", "--model", "resnet50",
             "--qsl-synthetic", "64", "--sample-size", "64", "--output-dir", out, "--quiet",
             "--progress", "off", "--sample-latencies", "--set", "server_target_qps=500",
             "--set", "min_duration_ms=1000", "--set", "min_query_count=200",
             "--metrics-listen", "127.0.0.1:0", "--metrics-linger-ms", str(LINGER_MS)],
            stdout=open(log, "w"), stderr=subprocess.STDOUT)
        port = ps.wait_for("the metrics address in the log",
                           lambda: ps.log_match(log, r"metrics on http://127\.0\.0\.1:(\d+)/"),
                           procs=[(proc, "loadgen-node")])
        summ = os.path.join(out, "mlperf_log_summary.txt")
        ps.wait_for("the run's summary", lambda: os.path.exists(summ) and
                    "Result is" in open(summ).read(), procs=[(proc, "loadgen-node")])
        time.sleep(0.3)
        vals = pl.parse_exposition(ps.http_get(f"http://127.0.0.1:{port}/metrics"))
        if proc.poll() is not None:
            pl.fail("loadgen-node exited before its linger ended")
        text, valid = pl.summary(out)
        with open(os.path.join(out, "mlperf_log_sample_latencies.csv")) as f:
            rows = [r for r in csv.DictReader(f) if int(r["latency_ns"]) >= 0]
        n = len(rows)
        late = sum(int(r["issue_late_ns"]) for r in rows) / 1e9
        pl.near(pl.one(vals, "loadgen_sample_latency_seconds_count"), n, 0, "latency count")
        pl.near(pl.one(vals, "loadgen_issue_lateness_seconds_count"), n, 0, "lateness count")
        pl.near(pl.one(vals, "loadgen_issue_lateness_seconds_sum"), late, n * 1e-9 + 1e-9,
                "lateness sum (s)")
        pl.near(pl.one(vals, "loadgen_time_to_first_token_seconds_count"), 0, 0,
                "TTFT count (not a token run)")
        pl.near(pl.one(vals, "loadgen_run_info", scenario="Server", model="resnet50",
                       mode="PerformanceOnly", target="server_target_qps=500"), 1, 0, "run_info")
        pl.near(pl.one(vals, "loadgen_run_result_valid"), 1 if valid else 0, 0, "result_valid")
        pl.near(pl.one(vals, "loadgen_run_result", metric="Completed samples per second"),
                float(text.split("Completed samples per second")[1].split(":")[1].split()[0]),
                0.006, "run_result")
        pl.near(pl.one(vals, "loadgen_build_info"), 1, 0, "build_info")
        if pl.one(vals, "process_open_fds") < 3:
            pl.fail("process_open_fds below 3")
        qdl = [k[0] for k in vals if k[0].startswith("loadgen_node_") or
               k[0] == "loadgen_samples_issued_total"]
        if qdl:
            pl.fail(f"QDL series without the QDL: {qdl}")
        print("ok: no QDL series")
        rc = proc.wait(LINGER_MS / 1000 + 30)
        if rc != (0 if valid else 1):
            pl.fail(f"loadgen-node exited {rc} for a {'VALID' if valid else 'INVALID'} run")
        t = open(log, errors="replace").read()
        if "Sanitizer" in t or "runtime error:" in t:
            pl.fail("a sanitizer report in the log")
        print("PASS")
        return 0
    finally:
        if proc and proc.poll() is None:
            proc.kill()
            proc.wait()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
