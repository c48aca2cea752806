#!/usr/bin/python3
"""An LLM Network-division submission end to end, checked by the official checker: submit.py
--submission (the unaltered official LoadGen in loadgen-node) for llama2-70b-99.9 (Offline +
Server) and llama3.1-8b (Offline + Interactive), each through two sut-nodes whose openai backend
forwards to the LLM engine of tests/engines (llm_engine.py, vLLM dialect), TEST06 run and verified
by the official script, then the official checker on the tree.

The checker must report nothing but what a short run cannot meet (ALLOWED below): the 600 s
duration, the data-set size and the sample and query counts of a 16-prompt QSL, and the targets a
stand-in accuracy cannot meet (the official accuracy scripts need Hugging Face packages Debian 12
lacks: the test uses accuracy_standin =, a token-ID ROUGE against the engine's own output, and
checks the tree is marked as not a valid result). What depends on this host's speed (TIMING: the
TTFT/TPOT bounds, early stopping of a short Server run) is printed, not failed. Everything else
fails the test: the layout, the tree names (llama2-70b-99.9, llama3.1-8b), the scenario sets,
the system description, the SUT name, seeds, token latencies, TEST06, the truncated logs.
The checker's output is kept in the build tree (its path is printed).

Also checked, before the runs: without accuracy_standin the runner stops (exit 3, nothing
written) naming the modules the official script lacks, where they are missing.

Interactive needs loadgen-node --scenario Interactive (branch llmqsl): once loadgen-node/README.md
documents it, a loadgen-node that refuses it fails the test; before that, the llama3.1-8b half is
reported NOT RUN (and the llama2-70b half runs alone).

    test_llm_submission.py LOADGEN_NODE SUT_NODE OPENAI_PLUGIN SOURCE_DIR ARTEFACT_DIR

Skipped (77) only when the official LoadGen or the inference checkout is not configured.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "tests", "engines"))
import enginetest as et  # noqa: E402
import fixture  # noqa: E402
import verdict  # noqa: E402
from nodes import official_skip  # noqa: E402

PY = et.PY  # Debian's, with the packages of deploy/install-deps.sh
SUBMIT = os.path.join(HERE, "..", "submit.py")
STANDIN = os.path.join(HERE, "llm_standin_accuracy.py")
N_PROMPTS = 16
MAX_TOKENS = 8
EOS = 2
ALLOWED = verdict.SHORT_RUN + verdict.SMALL_QSL + [
    r"accuracy not met",  # the stand-in's scores (counted by the runner, listed here)
]
TIMING = [
    r"Failed extra check for TTFT and TPOT",
    r"Early stopping condition was not met",
    r"Latency constraint with early stopping not met",
]


def has_interactive(lg, tmp):
    """Whether loadgen-node takes --scenario Interactive: its option parser refuses the word
    otherwise ('Interactive' is not SingleStream, ...). The probe is a one-query null-SUT run."""
    out = os.path.join(tmp, "probe")
    r = subprocess.run([lg, "--scenario", "Interactive", "--model", "llama3_1-8b", "--sut", "null",
                        "--qsl-synthetic", "1", "--sample-size", "4", "--output-dir", out,
                        "--set", "min_duration_ms=0", "--set", "min_query_count=1", "--quiet",
                        "--progress", "off"], capture_output=True, text=True, timeout=60)
    return "'Interactive' is not" not in r.stdout + r.stderr


def user_conf(path, interactive):
    """Short runs: each key as low as the official LoadGen takes it; the checker then reports the
    duration and counts (ALLOWED)."""
    lines = ["# short runs for the test: a real submission keeps mlperf.conf's minimums"]
    for m in ("llama2-70b", "llama3_1-8b") + (("llama3_1-8b-interactive",) if interactive else ()):
        lines += [f"{m}.Offline.target_qps = 100", f"{m}.Server.target_qps = 8",
                  f"{m}.*.min_duration = 1000", f"{m}.*.min_query_count = 16"]
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def benchmark(model, scenarios, qsl, uc, ref):
    return (f"\n[benchmark.{model}]\nscenarios = {scenarios}\nuser_conf = {uc}\n"
            f"qsl = --qsl-npy {qsl}\n"
            f"accuracy = {PY} {{inference}}/language/" + (
                "llama2-70b/evaluate-accuracy.py --checkpoint-path /nonexistent "
                "--dataset-file /nonexistent.pkl" if model == "llama2-70b" else
                "llama3.1-8b/evaluation.py --dataset-file /nonexistent.json")
            + " --mlperf-accuracy-file {accuracy_log} --dtype int32\n"
            f"accuracy_standin = {PY} {STANDIN} --mlperf-accuracy-file {{accuracy_log}} "
            f"--reference {ref}\n"
            f"verify_flags.TEST06 = --dtype int32 -e {EOS}\n"
            "measurements.input_data_types = int32 token IDs\nmeasurements.retraining = no\n"
            "measurements.starting_weights_filename = none (tests/engines/llm_engine.py, seeded)\n"
            "measurements.weight_data_types = fp32\nmeasurements.weight_transformations = none\n")


def main():
    if len(sys.argv) != 6:
        sys.exit(__doc__)
    lg, sut, plugin, src, artefacts = (os.path.abspath(a) for a in sys.argv[1:])
    skip = official_skip(lg)
    if skip:
        print(skip)
        return 77
    inference = os.environ["MLPERF_INFERENCE_DIR"]
    r = subprocess.run([PY, "-c", "import torch, fastapi, uvicorn, pandas, numpy"],
                       capture_output=True, text=True)
    if r.returncode != 0:  # not a skip: CI installs them (deploy/install-deps.sh)
        print("FAIL: the engine's Python packages are missing: "
              + r.stderr.strip().splitlines()[-1])
        return 1
    failures = []
    t0 = time.monotonic()
    tmp = tempfile.mkdtemp(prefix="submit_llm_")
    procs = et.Procs()
    interactive = False
    try:
        interactive = has_interactive(lg, tmp)
        with open(os.path.join(src, "loadgen-node", "README.md")) as f:
            documented = "--scenario Interactive" in f.read()
        qsl, prompts = et.llm_qsl(src, tmp, N_PROMPTS, EOS, extra=("--max-len", "24"))
        eport = et.start_llm_engine(procs, src, tmp, "engine", EOS, timeout=60)
        ref = os.path.join(tmp, "reference.json")
        with open(ref, "w") as f:
            json.dump([et.greedy(eport, p, MAX_TOKENS, timeout=60) for p in prompts], f)
        addrs = [et.start_node(procs, sut, tmp, f"llm{i}", plugin,
                               {"url": f"http://127.0.0.1:{eport}", "dialect": "vllm",
                                "max_tokens": MAX_TOKENS}, ["--max-batch", "8"])[1]
                 for i in range(2)]

        uc = os.path.join(tmp, "llm-user.conf")
        user_conf(uc, interactive)
        cfg = fixture.write(tmp, addrs, lg, inference=inference, python=PY,
                            mlperf_conf=os.path.join(inference, "loadgen", "mlperf.conf"))
        system = json.load(open(os.path.join(tmp, "system-base.json")))
        system.update(system_type="datacenter", accelerator_model_name="tests/engines LLM engine",
                      framework="llm_engine.py (PyTorch, FastAPI) behind sut-node --backend openai")
        with open(os.path.join(tmp, "system-base.json"), "w") as f:
            json.dump(system, f, indent=2)
        text = open(cfg).read().split("\n[benchmark.resnet50]")[0].replace("demo = yes\n", "")
        text += benchmark("llama2-70b", "Offline, Server", qsl, uc, ref)
        if interactive:
            text += benchmark("llama3_1-8b", "Offline, Interactive", qsl, uc, ref)
        elif documented:
            failures.append("loadgen-node/README.md documents --scenario Interactive, but this "
                            "loadgen-node refuses it: the llama3.1-8b Interactive half cannot run")
        else:
            print("NOT RUN: llama3.1-8b Offline + Interactive: this loadgen-node has no "
                  "--scenario Interactive (branch llmqsl); the llama2-70b half runs alone")
        with open(cfg, "w") as f:
            f.write(text)

        # Without the stand-in, the official scripts' modules are checked before any step.
        r = subprocess.run([PY, "-c", "import importlib.util as u; print(u.find_spec("
                            "'transformers') is None or u.find_spec('evaluate') is None)"],
                           capture_output=True, text=True)
        if r.stdout.strip() == "True":
            bare = os.path.join(tmp, "no-standin.ini")
            with open(bare, "w") as f:
                f.write(re.sub(r"accuracy_standin = [^\n]*\n", "", text))
            r = subprocess.run([PY, SUBMIT, bare, "--submission"], capture_output=True,
                               text=True, timeout=120)
            line = r.stderr.strip().splitlines()[0] if r.stderr.strip() else ""
            if r.returncode != 3 or "lacks: " not in line or "not in Debian 12" not in line \
                    or os.path.exists(os.path.join(tmp, "out", "network")):
                failures.append(f"without accuracy_standin: expected exit 3 naming the missing "
                                f"modules and nothing written, got {r.returncode}: {line[:300]}")
            else:
                print("ok without accuracy_standin, the runner stops: " + line[:240] + "...")

        r, lines, bad = verdict.submit_and_judge(PY, SUBMIT, cfg, tmp, artefacts, ALLOWED,
                                                 TIMING, timeout=1500, keep=("summary.csv",))
        failures += bad
        if not any("accuracy not met" in ln for ln in lines):
            print("note: the stand-in's scores met every target")
        res = os.path.join(tmp, "out", "network", "TestOrg", "results", "loopback_2x_sim")
        want = {"llama2-70b-99.9": ["Offline", "Server"]}
        if interactive:
            want["llama3.1-8b"] = ["Interactive", "Offline"]
        got = {b: sorted(os.listdir(os.path.join(res, b)))
               for b in (os.listdir(res) if os.path.isdir(res) else [])}
        if got != want:
            failures.append(f"tree: benchmarks and scenarios {got}, expected {want}")
        for b, ss in want.items():
            for s in ss:
                v = os.path.join(res, b, s, "TEST06", "verify_accuracy.txt")
                body = open(v).read() if os.path.exists(v) else "(missing)"
                if "TEST06 verification complete" not in body:
                    failures.append(f"{b}/{s} TEST06: {body.strip()}")
                acc = os.path.join(res, b, s, "accuracy", "accuracy.txt")
                if not os.path.exists(acc) or not open(acc).read().startswith("STAND-IN"):
                    failures.append(f"{acc}: not marked as a stand-in accuracy")
        if not os.path.exists(os.path.join(tmp, "out", "STAND_IN_ACCURACY.txt")):
            failures.append("the tree has no STAND_IN_ACCURACY.txt at its top")
        if "NOT A VALID RESULT: stand-in accuracy" not in r.stdout:
            failures.append("the runner's verdict does not say the stand-in is not a valid result")
    finally:
        procs.stop_all()
        shutil.rmtree(tmp, ignore_errors=True)
    for f in failures:
        print("FAILED: " + f)
    print(f"wall time {time.monotonic() - t0:.0f} s; "
          + ("llama2-70b-99.9 Offline+Server and llama3.1-8b Offline+Interactive" if interactive
             else "llama2-70b-99.9 Offline+Server only (llama3.1-8b Interactive NOT RUN)"))
    print(f"{len(failures)} failed" if failures else "passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
