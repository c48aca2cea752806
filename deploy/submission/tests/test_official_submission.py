#!/usr/bin/env python3
"""A short submission with the unaltered official LoadGen, checked by the official submission
checker: resnet50 in every scenario the checker requires of it (SingleStream, MultiStream,
Offline, Server; resnet is an edge model in v6.x and Server is allowed for datacenter,edge),
two sim sut-nodes on loopback, TEST01 and TEST04 run and verified by the official scripts.

Skipped (exit 77) unless loadgen-node was built with an official LoadGen (-DMLPERF_LOADGEN_ROOT)
and MLPERF_INFERENCE_DIR names a checkout of mlcommons/inference.

The checker must report nothing but what a short run cannot meet (ALLOWED below):
  - "Test duration less than 600s": the runs last a second, not ten minutes;
  - "accuracy run does not cover all dataset": the QSL is 1024 synthetic images, not the 50000
    of ImageNet (their labels are what the sim nodes answer, so accuracy is 100%);
  - what depends on the timing of two short runs on a shared host (TIMING below): the early
    stopping estimate of a Server run of a thousand queries, and TEST01/TEST04's performance
    comparison of a p99 or a throughput between two runs of a second each (a single stall of
    the host moves them by more than the 10-20% the scripts allow; a ten-minute run does not);
    they are counted and printed, not failed, since a test must not depend on the machine's speed;
and the lines that only summarise those ("Some ... checks Checks failed", "NoResults",
"SUMMARY: submission has errors"). Everything else fails the test: the layout, the system
description and its network fields, the SUT name, seeds, settings, the accuracy of the accuracy
runs and TEST01's accuracy check, the compliance folders, the truncated accuracy logs.

    test_official_submission.py LOADGEN_NODE SUT_NODE
"""
import glob
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import fixture  # noqa: E402
import verdict  # noqa: E402
from nodes import Node, official_skip  # noqa: E402

SUBMIT = os.path.join(HERE, "..", "submit.py")
ALLOWED = verdict.SHORT_RUN
TIMING = [
    r"Early stopping condition was not met",
    r"Latency constraint with early stopping not met",
    r"Compliance test performance check in .*/TEST0[14] failed",
]


def main():
    lg, sut = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    skip = official_skip(lg)
    if skip:
        print(skip)
        return 77
    inference = os.environ["MLPERF_INFERENCE_DIR"]
    failures = []
    with tempfile.TemporaryDirectory(prefix="submit_official_") as tmp:
        # 2 ms per batch: the p99 that TEST04 compares between two short runs must be the
        # nodes' latency, not the scheduling noise of a shared host (a 1.2x margin).
        nodes = [Node(sut, f"sim{i}", backend="sim", logdir=tmp,
                      extra=["--backend-opt", "a_us=2000", "--backend-opt", "engines=4"])
                 for i in range(2)]
        try:
            cfg = fixture.write(tmp, [n.address for n in nodes], lg, inference=inference,
                                scenarios="SingleStream, MultiStream, Offline, Server",
                                python=sys.executable)
            r = subprocess.run([sys.executable, SUBMIT, cfg, "--submission"], capture_output=True,
                               text=True, timeout=900)
            print(r.stderr[-4000:])
            print(r.stdout)
            if r.returncode != 1:  # a short run cannot pass the checker
                failures.append(f"submit.py --submission exited {r.returncode}, expected 1")
            lines, bad = verdict.judge(os.path.join(tmp, "work", "logs", "check.log"), ALLOWED,
                                       TIMING)
            failures += bad
            for v in sorted(glob.glob(os.path.join(tmp, "out", "network", "*", "results", "*", "*",
                                                   "*", "TEST0*", "verify_performance.txt"))):
                lines_v = [x.strip() for x in open(v) if "score" in x or "TEST" in x]
                print(f"  {os.path.relpath(v, tmp)}: {'; '.join(lines_v)}")
            for ln in lines:
                if "verify" in ln.lower() and "fail" in ln.lower():
                    failures.append("compliance: " + ln)
        finally:
            for n in nodes:
                n.stop()
    for f in failures:
        print("FAILED: " + f)
    print(f"{len(failures)} failed" if failures else "passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
