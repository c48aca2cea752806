#!/usr/bin/python3
"""The openai backend against a real engine: for every prompt of a token data set made here, the
token IDs that come back through loadgen-node -> QDL -> sut-node -> engine equal the engine's own
greedy output for that prompt (asked directly), each sample exactly once, in Offline and Server,
in every dialect the test engine speaks, with read coalescing off, at its default and at long
periods (coalesce_us), through the lean client and libcurl (client=); an engine error fails the samples with the engine's message in the node's
log; an out-of-range option stops the node with its name; a Server performance run reports TTFT
and TPOT.

    test_llm_e2e.py SUT_NODE LOADGEN_NODE OPENAI_PLUGIN SOURCE_DIR

Exits 77 when the Python packages are missing (python3-torch, -fastapi, -uvicorn, -pandas).
"""
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import enginetest as et  # noqa: E402

MAX_TOKENS = 24
EOS = 2
N_PROMPTS = 24


def main():
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    sut, lg, plugin, src = sys.argv[1:]
    et.need_modules("torch", "fastapi", "uvicorn", "pandas", "numpy")
    with et.scratch("llm-e2e-") as (procs, tmp):
        # The data set in the official pickle form, converted as a real one would be.
        qsl, prompts = et.llm_qsl(src, tmp, N_PROMPTS, EOS)
        eport = et.start_llm_engine(procs, src, tmp, "engine", EOS, timeout=40)
        ref = [et.greedy(eport, p, MAX_TOKENS) for p in prompts]
        print(f"engine on port {eport}: reference outputs of {len(ref)} prompts, "
              f"{min(map(len, ref))}..{max(map(len, ref))} tokens")

        url = f"http://127.0.0.1:{eport}"
        common = ["--model", "llama2-70b"]
        server_sets = ["server_target_qps=40", "use_token_latencies=1"]
        # client: lean (the default for http://) and curl; coalesce_us (curl's): the default,
        # and periods long enough that one read brings several of the engine's events (the end
        # of a stream among them).
        runs = [("vllm", "Offline", {}), ("vllm", "Server", {"coalesce_us": 0}),
                ("vllm", "Offline", {"client": "curl"}),
                ("sglang", "Offline", {"client": "curl", "coalesce_us": 100000}),
                ("llamacpp", "Offline", {}),
                ("trtllm", "Server", {"client": "curl", "coalesce_us": 30000})]
        for dialect, scenario, extra in runs:
            tag = f"{dialect}-{scenario}" + ("-curl" if "client" in extra else "")
            node, addr, nlog = et.start_node(
                procs, sut, tmp, f"llm-{tag}", plugin,
                {"url": url, "dialect": dialect, "max_tokens": MAX_TOKENS, **extra},
                ["--max-batch", "8"])
            out = os.path.join(tmp, tag)
            rc, text = et.loadgen(lg, out, addr, qsl, scenario, "AccuracyOnly",
                                  server_sets if scenario == "Server" else [], common)
            if rc != 0:
                sys.exit(f"FAIL {dialect} {scenario}: loadgen-node exit {rc}\n{text[-3000:]}\n"
                         f"node log:\n{open(nlog).read()[-2000:]}")
            et.check_tokens(f"{dialect} {scenario} {extra or ''}".strip(), out, ref)
            procs.stop(node)
            client = "client=" + extra.get("client", "lean")
            if client not in open(nlog).read():
                sys.exit(f"FAIL {dialect} {scenario}: the node did not say {client}:\n"
                         f"{open(nlog).read()[-2000:]}")

        # An option out of its range stops the node, naming it.
        r = subprocess.run([sut, "--listen", "127.0.0.1:0", "--backend", plugin,
                            "--backend-opt", f"url={url}", "--backend-opt", "coalesce_us=2000000"],
                           capture_output=True, text=True, timeout=30)
        if r.returncode == 0 or "coalesce_us" not in r.stdout + r.stderr:
            sys.exit(f"FAIL coalesce_us=2000000 accepted (exit {r.returncode}):\n"
                     f"{(r.stdout + r.stderr)[-1000:]}")
        print("ok coalesce_us=2000000 refused: " + (r.stdout + r.stderr).strip().splitlines()[-1])
        for bad, word in ((f"url={url}", "client=tcp"),):
            r = subprocess.run([sut, "--listen", "127.0.0.1:0", "--backend", plugin,
                                "--backend-opt", bad, "--backend-opt", word],
                               capture_output=True, text=True, timeout=30)
            if r.returncode == 0 or f"option {word}" not in r.stdout + r.stderr:
                sys.exit(f"FAIL {bad} {word} accepted (exit {r.returncode}):\n"
                         f"{(r.stdout + r.stderr)[-1000:]}")
            print(f"ok {word} refused: " + (r.stdout + r.stderr).strip().splitlines()[-1])

        # Token latencies: a short Server performance run, reported (not judged: no speed
        # assertion on a shared machine).
        node, addr, nlog = et.start_node(procs, sut, tmp, "llm-perf", plugin,
                                         {"url": url, "max_tokens": 4}, ["--max-batch", "16"])
        out = os.path.join(tmp, "perf")
        rc, text = et.loadgen(lg, out, addr, qsl, "Server", "PerformanceOnly",
                              ["server_target_qps=60", "use_token_latencies=1",
                               "min_duration_ms=8000", "min_query_count=480",
                               "server_target_latency_ns=2000000000",
                               "server_ttft_latency=2000000000", "server_tpot_latency=200000000"],
                              common)
        lines = et.summary_lines(out, r"Result is|satisfied|^ \* |Completed samples per second|"
                                      r"Completed tokens per second|(50|99)\.00 percentile "
                                      r"(first token|time to output token)")
        print("Server performance run, 60 QPS, max_tokens=4 (loadgen-node exit %d):" % rc)
        for line in lines:
            print("  " + line)
        if not et.summary_lines(out, r"No errors encountered"):
            sys.exit(f"FAIL perf: sample errors:\n{text[-2000:]}")
        procs.stop(node)

        # An engine error: prompt + max_tokens over the engine's context fails every sample; the
        # node logs the engine's own message, and it reaches loadgen-node's log (naming the node
        # and the sample) and its detail log (naming the qsl_idx) with the failure.
        node, addr, nlog = et.start_node(procs, sut, tmp, "llm-err", plugin,
                                         {"url": url, "max_tokens": 1020})
        out = os.path.join(tmp, "err")
        rc, text = et.loadgen(lg, out, addr, qsl, "Offline", "AccuracyOnly", [], common)
        procs.stop(node)
        nl = open(nlog).read()
        if rc == 0 or "exceed the context" not in nl:
            sys.exit(f"FAIL error path: loadgen-node exit {rc}; node log:\n{nl[-2000:]}")
        print("ok engine error: samples failed, node logged the engine's message: " +
              next(l for l in nl.splitlines() if "exceed the context" in l)[-160:])
        want = re.compile(r"qdl: node llm-err failed id \d+ \(LoadGen response id \d+\): "
                          r"STATUS_BACKEND_ERROR: HTTP 400: prompt \(\d+ tokens\) \+ max_tokens "
                          r"\(1020\) exceed the context of 1024$", re.M)
        detail = open(os.path.join(out, "mlperf_log_detail.txt")).read()
        dwant = re.compile(r"Sample \d+ \(qsl_idx \d+\) failed in the SUT at node llm-err: "
                           r"inference backend failed \(CMN_EBACKEND\): HTTP 400: prompt "
                           r"\(\d+ tokens\) \+ max_tokens \(1020\) exceed the context")
        if not want.search(text) or not dwant.search(detail):
            sys.exit(f"FAIL error path: the engine's text is not in loadgen-node's log "
                     f"({bool(want.search(text))}) or detail log ({bool(dwant.search(detail))}):"
                     f"\n{text[-2000:]}\n--- detail:\n{detail[-2000:]}")
        print("ok the engine's text in loadgen-node's log: " + want.search(text).group(0)[-200:])
    print("PASS")


if __name__ == "__main__":
    main()
