#!/usr/bin/python3
"""test-debs.sh's metrics check of an LLM run (Python standard library only): scrapes loadgen-node's
lingering endpoint and sut-node's, and counts them against the run's own logs: the samples of the
detail log (result_query_count, one sample per Server query) and of the summary's early-stopping
lines, completed by loadgen-node and taken by the node with none failed; each LLM histogram's
count and the output-token counter (samples x TOKENS, the sim backend's fixed answer) where this
build has them, and the end-of-run gauges (run info and verdict, streams idle, engine up). With
`required` a missing LLM metric fails; with `optional` the names found and
missing are printed.

    metrics_check.py LOADGEN_URL SUT_URL RUN_DIR TOKENS required|optional
"""
import re
import sys
import urllib.request

LOADGEN_LLM = ["loadgen_sample_latency_seconds_count", "loadgen_time_to_first_token_seconds_count",
               "loadgen_time_per_output_token_seconds_count"]
SUT_LLM = ["sut_node_time_to_first_token_seconds_count",
           "sut_node_time_per_output_token_seconds_count", "sut_node_output_tokens_total",
           "sut_node_prompt_tokens_total"]


def fail(msg):
    print(f"test-debs: metrics: {msg}")
    sys.exit(1)


def scrape(url):
    """{series (name with labels): value} of one scrape."""
    try:
        text = urllib.request.urlopen(url, timeout=10).read().decode()
    except OSError as e:
        fail(f"cannot scrape {url}: {e}")
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            out[name] = float(value)
    return out


def main():
    if len(sys.argv) != 6 or sys.argv[5] not in ("required", "optional"):
        sys.exit(__doc__)
    lg_url, sut_url, run, tokens, mode = sys.argv[1:]
    lg, sut = scrape(lg_url), scrape(sut_url)
    detail = open(f"{run}/mlperf_log_detail.txt").read()
    m = re.search(r'"key": "result_query_count", "value": (\d+)', detail)
    if not m:
        fail(f"{run}/mlperf_log_detail.txt has no result_query_count")
    n = int(m.group(1))
    summary = open(f"{run}/mlperf_log_summary.txt").read()
    for said in re.findall(r"Processed (?:at least )?(\d+) queries", summary):
        if int(said) != n:
            fail(f"the summary says {said} queries, the detail log {n}")
    want = {"loadgen_samples_completed_total": n, "loadgen_samples_failed_total": 0,
            "sut_node_samples_total": n, "sut_node_samples_failed_total": 0}
    got = {**lg, **sut}
    for name, value in want.items():
        if got.get(name) != value:
            fail(f"{name} is {got.get(name)}, the run's logs say {value}")
    print(f"test-debs: metrics: {n} samples completed by loadgen-node and served by sut-node, "
          "none failed, as the run's logs say")
    found = [k for k in LOADGEN_LLM + SUT_LLM if k in got]
    missing = [k for k in LOADGEN_LLM + SUT_LLM if k not in got]
    for k in found:
        expect = n * int(tokens) if k == "sut_node_output_tokens_total" else n
        if k == "sut_node_prompt_tokens_total":
            if got[k] <= 0:
                fail(f"{k} is {got[k]} after {n} samples")
        elif got[k] != expect:
            fail(f"{k} is {got[k]}, expected {expect} ({n} samples)")
    # Gauges at the end of the run: the run's identity and verdict, the node idle and its engine up.
    valid = 1 if re.search(r"^Result is : VALID", summary, re.M) else 0
    info = [k for k in lg if k.startswith("loadgen_run_info{")]
    gauges = {"loadgen_run_result_valid": valid, "sut_node_streams_running": 0,
              "sut_node_streams_waiting": 0, "sut_node_engine_up": 1}
    for k, v in gauges.items():
        if k in got:
            found.append(k)
            if got[k] != v:
                fail(f"{k} is {got[k]}, expected {v} (the summary, an idle node)")
        else:
            missing.append(k)
    if info:
        found.append("loadgen_run_info")
        if not ('scenario="Server"' in info[0] and 'model="llama3_1-8b"' in info[0]):
            fail(f"{info[0]} does not name this Server llama3_1-8b run")
    else:
        missing.append("loadgen_run_info")
    print("test-debs: metrics: LLM metrics in this build, checked: " +
          (", ".join(found) or "none"))
    if "sut_node_output_tokens_total" in got:
        print(f"test-debs: metrics: {n} samples, {got['sut_node_output_tokens_total']:.0f} output "
              f"and {got.get('sut_node_prompt_tokens_total', 0):.0f} prompt tokens at the node")
    if missing:
        print("test-debs: metrics: LLM metrics absent from this build: " + ", ".join(missing))
        if mode == "required":
            fail("this loadgen-node has --metrics-push, so these should be there")


if __name__ == "__main__":
    main()
