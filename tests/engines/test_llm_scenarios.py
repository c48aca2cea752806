#!/usr/bin/python3
"""The LLM benchmarks from their official data-file forms, in every scenario the Network division
takes them in, through sut-node's openai backend to the test engine (tests/engines/llm_engine.py),
with the official mlperf.conf:

  - llama3.1-8b-like: a cnn_eval.json written here (texts, tok_input, output), read by
    loadgen-node --qsl-llm-json, in Offline and Interactive (--model llama3_1-8b);
  - llama2-70b-like: the official pickle form, converted by llm_pickle_to_qsl.py --model
    llama2-70b-99.9, in Server.

For each: an AccuracyOnly run answers every sample exactly once with the token IDs the engine
gives for that prompt asked directly (so the IDs reached the engine exactly), and a short
PerformanceOnly run writes the token metrics (tokens per second, first-token and time-per-output-
token percentiles) in the summary; the Server-scheduled runs carry their scenario's TTFT/TPOT
bounds from mlperf.conf (Interactive: 500 ms and 30 ms of llama3_1-8b-interactive; Server: 2000
ms and 200 ms of llama2-70b) in the summary and the detail log, and the TTFT and TPOT
early-stopping lines.

With FRONT_END official (the official LoadGen behind loadgen-node, exit 77 when this build has
none), the same runs go through the official LoadGen, and an Interactive run of each front end
through a sim sut-node with fixed, fast token times (far below the bounds, so the verdict does not
depend on the machine's speed) must agree: every requested_*/effective_* setting, the validity,
the summary's constraint lines and the early-stopping results.

    test_llm_scenarios.py SUT_NODE LOADGEN_NODE OPENAI_PLUGIN SOURCE_DIR builtin|official

Exits 77 when the Python packages are missing (python3-torch, -fastapi, -uvicorn, -pandas) or no
official mlperf.conf is found (MLPERF_INFERENCE_DIR/loadgen, or ../shared/reference beside the
source tree).
"""
import json
import os
import re
import subprocess
import sys
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import enginetest as et  # noqa: E402

MAX_TOKENS = 8
EOS = 2
N_PROMPTS = 24
PERF_QUERIES = 48
BOUNDS = {"Interactive": (500000000, 30000000), "Server": (2000000000, 200000000)}


def mlperf_conf(src):
    cands = []
    if os.environ.get("MLPERF_INFERENCE_DIR"):
        cands.append(os.path.join(os.environ["MLPERF_INFERENCE_DIR"], "loadgen", "mlperf.conf"))
    ref = os.path.join(src, "..", "shared", "reference")
    cands += [os.path.join(ref, "mlcommons-inference", "loadgen", "mlperf.conf"),
              os.path.join(ref, "mlperf.conf")]
    return next((os.path.abspath(c) for c in cands if os.path.isfile(c)), None)


def direct(port, prompt):
    body = json.dumps({"model": "model", "prompt": prompt, "max_tokens": MAX_TOKENS,
                       "temperature": 0, "return_token_ids": True}).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/completions", body,
                                 {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.load(r)["choices"][0]["token_ids"]


def detail(out):
    """{key: value} of the detail log (the first entry of each key)."""
    d = {}
    with open(os.path.join(out, "mlperf_log_detail.txt")) as f:
        for line in f:
            if line.startswith(":::MLLOG "):
                e = json.loads(line[len(":::MLLOG "):])
                d.setdefault(e["key"], e["value"])
    return d


def summary(out):
    with open(os.path.join(out, "mlperf_log_summary.txt")) as f:
        return f.read()


def fail(msg):
    print(f"FAIL {msg}")
    sys.exit(1)


def run_lg(lg, fe, out, node, qsl, scenario, mode, model, conf, sets):
    argv = [lg, "--loadgen", fe, "--scenario", scenario, "--mode", mode, "--model", model,
            "--mlperf-conf", conf, "--nodes", node, "--output-dir", out, "--quiet",
            "--progress", "off", "--log-level", "warn"]
    if fe == "builtin":  # a sample that never completes fails the run instead of hanging it
        argv += ["--drain-timeout-ms", "30000"]
    argv += ["--qsl-llm-json", qsl] if qsl.endswith(".json") else ["--qsl-npy", qsl]
    for s in sets:
        argv += ["--set", s]
    # The official LoadGen reads ./audit.config when present: run where there is none.
    r = subprocess.run(argv, capture_output=True, text=True, timeout=180, cwd=out + "-cwd")
    return r.returncode, r.stdout + r.stderr


def check_perf(tag, out, scenario):
    s, d = summary(out), detail(out)
    # As the official summary has them: Offline gives tokens per second only.
    want = ["Tokens per second:"] if scenario == "Offline" else [
        "Completed tokens per second", "99.00 percentile first token latency (ns)",
        "99.00 percentile time to output token (ns)"]
    if scenario != "Offline":
        ttft, tpot = BOUNDS[scenario]
        want += ["Scenario : Server", f"ttft_latency (ns): {ttft}", f"tpot_latency (ns): {tpot}",
                 "TTFT Early Stopping Result:", "TPOT Early Stopping Result:"]
        for k, v in (("requested_scenario", "Server"), ("effective_scenario", "Server"),
                     ("requested_use_token_latencies", True),
                     ("requested_server_ttft_latency", ttft),
                     ("requested_server_tpot_latency", tpot)):
            if d.get(k) != v:
                fail(f"{tag}: detail {k} = {d.get(k)!r}, want {v!r}")
        for k in ("result_first_token_99.00_percentile_latency_ns",
                  "result_time_per_output_token_99.00_percentile_ns"):
            if not isinstance(d.get(k), int) or d[k] <= 0:
                fail(f"{tag}: detail {k} = {d.get(k)!r}, want a positive latency")
    else:
        want.append("Scenario : Offline")
    missing = [w for w in want if w not in s]
    if missing:
        fail(f"{tag}: the summary lacks {missing}:\n{s[:3000]}")
    print(f"ok {tag}: token metrics" + (f", TTFT/TPOT bounds {BOUNDS[scenario]} ns and both "
                                        f"early-stopping results" if scenario != "Offline"
                                        else "") + " in the logs")


def perf_sets(scenario):
    base = ["min_duration_ms=1", f"min_query_count={PERF_QUERIES}"]
    if scenario == "Offline":
        return base + ["offline_expected_qps=10"]
    return base + ["server_target_qps=8"]


def engine_runs(lg, fe, tmp, node, conf, data, refs):
    cases = [("llama3_1-8b", "json", "Offline"), ("llama3_1-8b", "json", "Interactive"),
             ("llama2-70b", "npy", "Server")]
    for model, kind, scenario in cases:
        for mode in ("AccuracyOnly", "PerformanceOnly"):
            tag = f"{fe} {model} {scenario} {mode}"
            out = os.path.join(tmp, fe, model, scenario, mode)
            os.makedirs(out + "-cwd")
            sets = ["server_target_qps=20"] if mode == "AccuracyOnly" else perf_sets(scenario)
            rc, text = run_lg(lg, fe, out, node, data[kind], scenario, mode, model, conf, sets)
            # A short performance run is INVALID (exit 1: early stopping wants more queries).
            if rc not in ((0,) if mode == "AccuracyOnly" else (0, 1)) or \
                    "samples failed" in text or "errors were logged" in text:
                fail(f"{tag}: loadgen-node exit {rc}\n{text[-3000:]}")
            if mode == "AccuracyOnly":
                et.check_tokens(tag, out, refs[kind])
            else:
                check_perf(tag, out, scenario)


def compare_front_ends(procs, sut, lg, tmp, conf, qsl):
    """An Interactive run of each front end through a sim node whose token times are fixed and
    far below the bounds: the same settings, verdict and early-stopping results."""
    node, addr, nlog = et.start_node(procs, sut, tmp, "sim-llm", "sim",
                                     {"llm": 1, "ttft_us": 1000, "tpot_us": 200, "tokens": 8})
    got = {}
    for fe in ("builtin", "official"):
        out = os.path.join(tmp, "compare", fe)
        os.makedirs(out + "-cwd")
        rc, text = run_lg(lg, fe, out, addr, qsl, "Interactive", "PerformanceOnly",
                          "llama3_1-8b", conf, perf_sets("Interactive"))
        if rc not in (0, 1):
            fail(f"compare {fe}: loadgen-node exit {rc}\n{text[-3000:]}")
        d, s = detail(out), summary(out)
        keys = {k: v for k, v in d.items()
                if k.startswith(("requested_", "effective_", "early_stopping_"))
                or k in ("result_validity", "result_scheduled_samples_per_sec")}
        lines = [ln for ln in s.splitlines()
                 if re.match(r"(Scenario|Result is|  .* satisfied|.*Early Stopping Result| \* )",
                             ln)]
        params = s[s.index("Test Parameters Used"):].split("\n\n")[0]
        got[fe] = (keys, lines, params, rc)
    procs.stop(node)
    (kb, lb, pb, rb), (ko, lo, po, ro) = got["builtin"], got["official"]
    diff = sorted(k for k in set(kb) | set(ko) if kb.get(k) != ko.get(k))
    if diff:
        fail("compare: the front ends differ in " + "; ".join(
            f"{k}: builtin {kb.get(k)!r} official {ko.get(k)!r}" for k in diff[:8]))
    if lb != lo or pb != po or rb != ro:
        fail(f"compare: summaries differ (exit {rb} / {ro}):\nbuiltin:\n" + "\n".join(lb) +
             f"\n{pb}\nofficial:\n" + "\n".join(lo) + f"\n{po}")
    print(f"ok compare: builtin and official Interactive runs agree on {len(kb)} settings and "
          f"results keys ({kb.get('result_validity')}, {kb.get('effective_scenario')}, TTFT/TPOT "
          f"bounds {kb.get('requested_server_ttft_latency')}/"
          f"{kb.get('requested_server_tpot_latency')} ns) and the summary's verdict lines:")
    for ln in lb:
        print("  " + ln)


def main():
    if len(sys.argv) != 6 or sys.argv[5] not in ("builtin", "official"):
        sys.exit(__doc__)
    sut, lg, plugin, src, fe = sys.argv[1:]
    et.need_modules("torch", "fastapi", "uvicorn", "pandas", "numpy")
    conf = mlperf_conf(src)
    if not conf:
        et.skip("no official mlperf.conf (MLPERF_INFERENCE_DIR/loadgen/mlperf.conf or "
                "../shared/reference/)")
    if fe == "official":
        probe = subprocess.run([lg, "--loadgen", "official", "--scenario", "Offline", "--sut",
                                "null", "--qsl-synthetic", "1", "--sample-size", "1"],
                               capture_output=True, text=True, timeout=30)
        if "this build has no official LoadGen" in probe.stderr:
            et.skip("loadgen-node was built without an official LoadGen (-DMLPERF_LOADGEN_ROOT)")
    tools = os.path.join(src, "loadgen-node", "tools")
    with et.scratch("llm-scenarios-") as (procs, tmp):
        # llama2-70b's form: the pickle, converted with the model's column.
        pkl, npy = os.path.join(tmp, "openorca.pkl"), os.path.join(tmp, "qsl-llama2")
        subprocess.run([et.PY, os.path.join(tools, "make_llm_tokens.py"), "--out", pkl,
                        "--count", str(N_PROMPTS), "--avoid", str(EOS), "--seed", "7"],
                       check=True)
        conv = subprocess.run([et.PY, os.path.join(tools, "llm_pickle_to_qsl.py"), "--model",
                               "llama2-70b-99.9", "--pickle", pkl, "--out-dir", npy],
                              check=True, capture_output=True, text=True)
        if "column=tok_input" not in conv.stdout:
            fail(f"llm_pickle_to_qsl.py --model llama2-70b-99.9 read another column: "
                 f"{conv.stdout}")
        import numpy as np
        import pandas as pd
        llama2 = [np.load(os.path.join(npy, f)).tolist() for f in sorted(os.listdir(npy))]
        # llama3.1-8b's form: cnn_eval.json as pandas writes it (to_json, records), with texts.
        rng = np.random.default_rng(3)
        allowed = [t for t in range(512) if t != EOS]
        cnn = [[int(t) for t in rng.choice(allowed, size=4 + (i * 11) % 60)]
               for i in range(N_PROMPTS)]
        jpath = os.path.join(tmp, "cnn_eval.json")
        pd.DataFrame({"instruction": [{"llama": "Summarize the following news article:"}] *
                      N_PROMPTS,
                      "input": [f"(CNN) \u2014 article {i} \"quoted\"\n" + "text " * i
                                for i in range(N_PROMPTS)],
                      "tok_input": cnn,
                      "output": [f"highlights {i}" for i in range(N_PROMPTS)]}
                     ).to_json(jpath, orient="records")
        back = pd.read_json(jpath).tok_input.tolist()  # as the reference's dataset.py reads it
        if back != cnn:
            fail("pandas does not read back the JSON written")

        eport = et.start_llm_engine(procs, src, tmp, "engine", EOS, timeout=40)
        refs = {"json": [direct(eport, p) for p in cnn], "npy": [direct(eport, p) for p in llama2]}
        node, addr, nlog = et.start_node(
            procs, sut, tmp, "llm", plugin,
            {"url": f"http://127.0.0.1:{eport}", "max_tokens": MAX_TOKENS}, ["--max-batch", "8"])
        engine_runs(lg, fe, tmp, addr, conf, {"json": jpath, "npy": npy}, refs)
        procs.stop(node)
        if fe == "official":
            compare_front_ends(procs, sut, lg, tmp, conf, jpath)
    print("PASS")


if __name__ == "__main__":
    main()
