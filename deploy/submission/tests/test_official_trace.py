#!/usr/bin/env python3
"""loadgen-node --loadgen official against the built-in scheduler on the same settings: both must
load the same QSL set and generate the same queries (loaded_qsl_set and generated_* in the detail
log), for Offline and Server, through one digest sut-node on loopback.

usage: test_official_trace.py LOADGEN_NODE SUT_NODE   (exit 77 when the build has no official
LoadGen: configure with -DMLPERF_LOADGEN_ROOT=PREFIX)"""
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nodes import Node, detail_entries, official_missing  # noqa: E402

KEYS = ["loaded_qsl_set", "generated_query_count", "generated_samples_per_query",
        "generated_query_duration"]
SEEDS = ["qsl_rng_seed=1624344308455410291", "sample_index_rng_seed=517984244576520566",
         "schedule_rng_seed=10051496985653635065"]
CASES = {
    "Offline": ["min_duration_ms=300", "offline_expected_qps=20000"],
    "Server": ["min_duration_ms=300", "server_target_qps=2000", "min_query_count=100",
               "server_target_latency_ns=100000000"],
}


def main():
    lg, sut = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    missing = official_missing(lg)
    if missing:
        print(missing)
        return 77
    failures = 0
    with tempfile.TemporaryDirectory(prefix="lg_official_") as tmp:
        node = Node(sut, "trace-a", logdir=tmp)
        try:
            for scenario, sets in CASES.items():
                got = {}
                for loadgen in ("builtin", "official"):
                    out = os.path.join(tmp, scenario, loadgen)
                    args = [lg, "--loadgen", loadgen, "--scenario", scenario, "--model", "resnet50",
                            "--qsl-synthetic", "2048", "--sample-size", "256",
                            "--performance-count", "512", "--nodes", node.address,
                            "--output-dir", out, "--quiet", "--progress", "off"]
                    for s in SEEDS + sets:
                        args += ["--set", s]
                    r = subprocess.run(args, cwd=tmp, capture_output=True, text=True, timeout=120)
                    if r.returncode not in (0, 1):
                        print(f"FAILED: {loadgen} {scenario} exited {r.returncode}:\n{r.stderr}")
                        failures += 1
                        continue
                    got[loadgen] = detail_entries(os.path.join(out, "mlperf_log_detail.txt"), KEYS)
                if len(got) != 2:
                    continue
                for k in KEYS:
                    a, b = got["builtin"].get(k), got["official"].get(k)
                    if a is None or a != b:
                        print(f"FAILED: {scenario} {k}: builtin {str(a)[:80]} official {str(b)[:80]}")
                        failures += 1
                    else:
                        print(f"ok: {scenario} {k} equal ({str(a)[:40]})")
        finally:
            node.stop()
    print(f"{'FAILED' if failures else 'passed'}: {failures} differences")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
