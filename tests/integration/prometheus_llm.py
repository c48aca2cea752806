#!/usr/bin/env python3
"""An LLM run scraped by Debian's real Prometheus: loadgen-node -> QDL -> sut-node --backend openai
-> the test LLM engine (tests/engines/llm_engine.py), and the LLM metrics of both programs agree
with the run's own records.

  prometheus_llm.py SUT_NODE LOADGEN_NODE OPENAI_PLUGIN SOURCE_DIR

A short Server performance run with token latencies (prompts of a fixed length, made here) while
Prometheus scrapes sut-node's and loadgen-node's --metrics-listen; loadgen-node lingers after the
run and pushes to a real Pushgateway (Debian's prometheus-pushgateway) when one is installed.
Checked against the run's sample_latencies CSV, detail log, summary and nodes.json:

  sut-node:  e2e and TTFT histogram counts = samples; TPOT count = samples; output tokens = the
             CSV's n_tokens sum; prompt tokens = samples x prompt length; streams running and
             waiting 0 at the end; engine_up 1; sut_node_build_info and process_* present.
  loadgen:   latency and TTFT counts = the CSV's completed samples; TTFT sum = the detail log's
             mean first-token latency x count (within 0.1 % + 1 us per sample: the mean is
             rounded); run_info labels; result_valid and result = the summary's; after the run,
             the lingering endpoint still serves those final values; the Pushgateway holds them.

Exit 77 (skip) when the prometheus program or the engine's Python packages are missing."""

import csv
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import prometheus_scrape as ps  # noqa: E402

PROMPTS = 16
PROMPT_LEN = 12
MAX_TOKENS = 6
EOS = 2
LINGER_MS = 20000  # long enough for Prometheus to scrape the final values on a loaded machine


def fail(msg):
    raise SystemExit(f"FAIL: {msg}")


def near(got, want, tol, what):
    if got is None or abs(got - want) > tol:
        fail(f"{what} is {got}, expected {want} +- {tol}")
    print(f"ok: {what} = {got} (expected {want} +- {tol:g})")


def detail_value(out, key):
    with open(os.path.join(out, "mlperf_log_detail.txt")) as f:
        for line in f:
            if f'"key": "{key}"' in line:
                return json.loads(line.split(":::MLLOG", 1)[1])["value"]
    fail(f"no {key} in the detail log")


def summary(out):
    text = open(os.path.join(out, "mlperf_log_summary.txt")).read()
    valid = re.search(r"Result is : (VALID|INVALID)", text).group(1) == "VALID"
    return text, valid


def parse_exposition(text):
    """{(name, frozenset(labels)): value} of a text exposition."""
    vals = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = re.match(r'([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$', line)
        if not m:
            continue
        labels = frozenset(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(3) or ""))
        vals[(m.group(1), labels)] = float(m.group(4))
    return vals


def one(vals, name, **want):
    """The value of the one series |name| whose labels include |want|."""
    hits = [v for (n, l), v in vals.items()
            if n == name and all((k, str(x)) in l for k, x in want.items())]
    if len(hits) != 1:
        fail(f"{len(hits)} series {name}{want} in the exposition")
    return hits[0]


def main():
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    sut, lg, plugin, src = sys.argv[1:]
    if not shutil.which("prometheus"):
        print("SKIP: no prometheus program (Debian package prometheus)")
        return 77
    r = subprocess.run(["/usr/bin/python3", "-c", "import torch, fastapi, uvicorn, numpy"],
                       capture_output=True, text=True)
    if r.returncode != 0:
        print(f"SKIP: Python packages missing: {r.stderr.strip().splitlines()[-1]}")
        return 77
    sys.path.insert(0, os.path.join(src, "tests", "engines"))
    import enginetest as et

    tmp = tempfile.mkdtemp(prefix="prom-llm-")
    procs = et.Procs()
    prom = ps.Prometheus(tmp)
    ok = False
    try:
        if not prom.ready_or_say():
            return 77
        tools = os.path.join(src, "loadgen-node", "tools")
        pkl, qsl = os.path.join(tmp, "tokens.pkl"), os.path.join(tmp, "qsl")
        subprocess.run([et.PY, os.path.join(tools, "make_llm_tokens.py"), "--out", pkl,
                        "--count", str(PROMPTS), "--min-len", str(PROMPT_LEN), "--max-len",
                        str(PROMPT_LEN), "--avoid", str(EOS)], check=True)
        subprocess.run([et.PY, os.path.join(tools, "llm_pickle_to_qsl.py"), "--pickle", pkl,
                        "--out-dir", qsl], check=True)

        elog, eport_file = os.path.join(tmp, "engine.log"), os.path.join(tmp, "engine.port")
        eng = procs.start([et.PY, os.path.join(src, "tests", "engines", "llm_engine.py"),
                           "--port-file", eport_file, "--eos", str(EOS)], elog)
        eport = et.wait_port(eport_file, eng, elog, timeout=40)

        node, addr, nlog = et.start_node(
            procs, sut, tmp, "llm-metrics", plugin,
            {"url": f"http://127.0.0.1:{eport}", "max_tokens": MAX_TOKENS},
            ["--max-batch", "8", "--metrics-listen", "127.0.0.1:0"])
        mport = ps.wait_for("sut-node metrics address in its log",
                            lambda: ps.log_match(nlog, r"metrics on http://127\.0\.0\.1:(\d+)/"),
                            procs=[(node, "sut-node")])

        pg_url = None
        if shutil.which("prometheus-pushgateway"):
            pg_port = ps.free_port()
            pg = procs.start(["prometheus-pushgateway",
                              f"--web.listen-address=127.0.0.1:{pg_port}"],
                             os.path.join(tmp, "pushgateway.log"))
            pg_url = f"http://127.0.0.1:{pg_port}"
            ps.wait_for("the Pushgateway", lambda: ps.log_match(
                os.path.join(tmp, "pushgateway.log"), r"(Listening on)"), procs=[(pg, "pg")])
        else:
            print("note: no prometheus-pushgateway here: --metrics-push not tried")

        lport = ps.free_port()
        prom.write_targets([f"127.0.0.1:{mport}", f"127.0.0.1:{lport}"])
        ps.wait_for("a scrape of sut-node",
                    lambda: prom.value(f'up{{instance="127.0.0.1:{mport}"}}') == 1,
                    procs=[(node, "sut-node"), (prom.proc, "prometheus")])
        ps.wait_for("Prometheus to know the loadgen-node target",
                    lambda: f"127.0.0.1:{lport}" in ps.http_get(prom.base + "/api/v1/targets"))

        out = os.path.join(tmp, "out")
        argv = [lg, "--scenario", "Server", "--mode", "PerformanceOnly", "--model", "llama2-70b",
                "--qsl-npy", qsl, "--nodes", addr, "--output-dir", out, "--quiet",
                "--progress", "off", "--drain-timeout-ms", "30000", "--sample-latencies",
                "--metrics-listen", f"127.0.0.1:{lport}", "--metrics-linger-ms", str(LINGER_MS)]
        if pg_url:
            argv += ["--metrics-push", pg_url]
        for s in ("server_target_qps=20", "use_token_latencies=1", "min_duration_ms=3000",
                  "min_query_count=60", "server_target_latency_ns=2000000000",
                  "server_ttft_latency=2000000000", "server_tpot_latency=200000000"):
            argv += ["--set", s]
        lglog = os.path.join(tmp, "lg.log")
        lgp = procs.start(argv, lglog)
        summ = os.path.join(out, "mlperf_log_summary.txt")
        ps.wait_for("the run's summary", lambda: os.path.exists(summ) and
                    "Result is" in open(summ).read(), timeout=120, procs=[(lgp, "loadgen-node")])
        # The run is over; loadgen-node lingers: its endpoint serves the final values.
        time.sleep(0.5)
        text, valid = summary(out)
        if "No errors encountered" not in text:
            fail(f"sample errors in the run:\n{text[-2000:]}")
        lvals = parse_exposition(ps.http_get(f"http://127.0.0.1:{lport}/metrics"))
        if lgp.poll() is not None:
            fail("loadgen-node exited before its linger ended")

        with open(os.path.join(out, "mlperf_log_sample_latencies.csv")) as f:
            rows = [r for r in csv.DictReader(f) if int(r["latency_ns"]) >= 0]
        n = len(rows)
        tokens = sum(int(r["n_tokens"]) for r in rows)
        if n < 60:
            fail(f"only {n} completed samples in the CSV")
        mean_ttft = detail_value(out, "result_first_token_mean_latency_ns")
        # The result metric the lingering endpoint names, and its value in the summary.
        res_series = [(dict(l), v) for (nm, l), v in lvals.items() if nm == "loadgen_run_result"]
        if len(res_series) != 1:
            fail(f"loadgen_run_result: {res_series}")
        metric_name, res = res_series[0][0].get("metric", ""), res_series[0][1]
        m = re.search(re.escape(metric_name) + r"\s*: (\S+)", text)
        if not m:
            fail(f"the summary has no '{metric_name}' line:\n{text[:1500]}")
        metric = float(m.group(1))
        print(f"run: {n} samples, {tokens} output tokens, mean TTFT {mean_ttft} ns, "
              f"{'VALID' if valid else 'INVALID'}")

        # The lingering endpoint, read directly after the run.
        near(one(lvals, "loadgen_sample_latency_seconds_count"), n, 0, "linger: latency count")
        near(one(lvals, "loadgen_time_to_first_token_seconds_count"), n, 0, "linger: TTFT count")
        near(one(lvals, "loadgen_time_per_output_token_seconds_count"), n, 0,
             "linger: TPOT count")
        near(one(lvals, "loadgen_time_to_first_token_seconds_sum"), mean_ttft * n / 1e9,
             mean_ttft * n / 1e9 * 0.001 + n * 1e-6, "linger: TTFT sum (s)")
        near(one(lvals, "loadgen_issue_lateness_seconds_count"), n, 0, "linger: lateness count")
        near(one(lvals, "loadgen_run_result_valid"), 1 if valid else 0, 0, "linger: result_valid")
        near(one(lvals, "loadgen_run_info", scenario="Server", model="llama2-70b",
                 mode="PerformanceOnly", target="server_target_qps=20"), 1, 0, "linger: run_info")
        # The summary rounds the metric to 2 decimals (the exposition keeps 6).
        near(res, metric, 0.006, f"linger: run_result ({metric_name})")
        near(one(lvals, "loadgen_build_info"), 1, 0, "linger: loadgen_build_info")
        if one(lvals, "process_resident_memory_bytes") <= 0:
            fail("loadgen process_resident_memory_bytes is not positive")

        try:
            rc = lgp.wait(LINGER_MS / 1000 + 60)
        except subprocess.TimeoutExpired:
            fail("loadgen-node did not end after its linger")
        if rc not in (0, 1):
            fail(f"loadgen-node exited {rc}:\n{open(lglog).read()[-3000:]}")
        sent = json.load(open(os.path.join(out, "mlperf_log_nodes.json")))["nodes"][0]
        if sent["samples_failed"] or sent["samples_completed"] != sent["samples_sent"]:
            fail(f"the run lost or failed samples: {sent}")
        sent = sent["samples_sent"]

        # Prometheus stored what it scraped: loadgen-node's final values (over a range: the
        # target is gone) and sut-node's, which is still up.
        ps.expect_eq(prom, "max_over_time(loadgen_time_to_first_token_seconds_count[5m])", n)
        ps.expect_eq(prom, "max_over_time(loadgen_run_result_valid[5m])", 1 if valid else 0)
        ps.expect_eq(prom, "sut_node_e2e_request_latency_seconds_count", sent)
        ps.expect_eq(prom, "sut_node_time_to_first_token_seconds_count", sent)
        ps.expect_eq(prom, "sut_node_time_per_output_token_seconds_count", sent)
        ps.expect_eq(prom, "sut_node_request_queue_time_seconds_count", sent)
        ps.expect_eq(prom, "sut_node_output_tokens_total", tokens)
        ps.expect_eq(prom, "sut_node_prompt_tokens_total", sent * PROMPT_LEN)
        ps.expect_eq(prom, "sut_node_streams_running", 0)
        ps.expect_eq(prom, "sut_node_streams_waiting", 0)
        ps.expect_eq(prom, "sut_node_engine_up", 1)
        ps.expect_eq(prom, 'count(sut_node_build_info{version!="",commit!=""})', 1)
        # Both processes, loadgen-node's over a range: it has exited, so its series are stale now.
        ps.expect_eq(prom, "count(max_over_time(process_start_time_seconds[5m]) > 1.5e9)", 2)
        # The node's TTFT is its part of loadgen-node's: never more on the whole.
        s_ttft = prom.value("sut_node_time_to_first_token_seconds_sum")
        l_ttft = prom.value("max_over_time(loadgen_time_to_first_token_seconds_sum[5m])")
        if s_ttft is None or l_ttft is None or not 0 < s_ttft <= l_ttft:
            fail(f"sut-node TTFT sum {s_ttft} s is not within loadgen-node's {l_ttft} s")
        print(f"ok: TTFT sum sut-node {s_ttft:.4f} s <= loadgen-node {l_ttft:.4f} s")

        if pg_url:
            pvals = parse_exposition(ps.http_get(pg_url + "/metrics"))
            near(one(pvals, "loadgen_time_to_first_token_seconds_count", job="loadgen"), n, 0,
                 "Pushgateway: TTFT count")
            near(one(pvals, "loadgen_run_result_valid", job="loadgen"), 1 if valid else 0, 0,
                 "Pushgateway: result_valid")
            near(one(pvals, "loadgen_run_result", job="loadgen"), metric, 0.006,
                 "Pushgateway: run_result")
        for name in ("llm-metrics.log", "lg.log"):
            t = open(os.path.join(tmp, name), errors="replace").read()
            if "Sanitizer" in t or "runtime error:" in t:
                fail(f"a sanitizer report in {name}")
        if procs.stop(node) != 0:
            fail(f"sut-node exited {node.returncode} on SIGTERM")
        ok = True
        print("PASS")
        return 0
    finally:
        procs.stop_all()
        prom.stop()
        if not ok:
            ps.dump_logs(tmp, ("llm-metrics.log", "lg.log", "engine.log", "prometheus.log",
                               "pushgateway.log"))
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
