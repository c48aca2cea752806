#!/usr/bin/env python3
"""--issue-cpu N: while a Server series issues, loadgen-node's issue thread (its main thread) may
run on CPU N only and every other thread of the process (the QDL's loop among them) on the other
CPUs only; afterwards the summary's harness block says so. Bad CPUs get exit status 2 and a message
that names the flag and the reason. Reads /proc/PID/task/*/status while a run against a null
sut-node on loopback lasts; polls, bounded in time. Exits 77 (skipped) with fewer than 2 CPUs.
Usage: cli_issue_cpu.py LOADGEN_NODE SUT_NODE OUTDIR"""
import os
import shutil
import subprocess
import sys
import time

from nullnode import start_null_node


def cpus(text):
    """'0-2,5' -> {0, 1, 2, 5}"""
    out = set()
    for part in text.strip().split(","):
        lo, _, hi = part.partition("-")
        out.update(range(int(lo), int(hi or lo) + 1))
    return out


def allowed(pid, tid):
    try:
        with open(f"/proc/{pid}/task/{tid}/status") as f:
            for line in f:
                if line.startswith("Cpus_allowed_list:"):
                    return cpus(line.split(":", 1)[1])
    except OSError:  # the thread ended meanwhile
        return None
    return None


def main():
    lg, sut, out = sys.argv[1:4]
    mine = sorted(os.sched_getaffinity(0))
    if len(mine) < 2:
        print(f"SKIP: this process may use {len(mine)} CPU; --issue-cpu needs 2")
        return 77
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    fails = []
    qsl = ["--qsl-synthetic", "64", "--sample-size", "64", "--progress", "off", "--quiet"]

    def expect_usage(pattern, args, restrict=None):
        pre = ["taskset", "-c", str(restrict)] if restrict is not None else []
        p = subprocess.run(pre + [lg, "--scenario", "Server", "--sut", "null", "--output-dir",
                                  os.path.join(out, "bad")] + qsl + args,
                           capture_output=True, text=True, timeout=60)
        if p.returncode != 2 or pattern not in p.stderr:
            fails.append(f"{args} (restricted to {restrict}): status {p.returncode}, want 2 and "
                         f"'{pattern}'; stderr: {p.stderr.strip()}")

    expect_usage("--issue-cpu: '5000' is not an integer from 0 to", ["--issue-cpu", "5000"])
    expect_usage(f"--issue-cpu {mine[1]}: not one of the 1 CPUs", ["--issue-cpu", str(mine[1])],
                 restrict=mine[0])
    expect_usage(f"--issue-cpu {mine[0]}: it is the only CPU", ["--issue-cpu", str(mine[0])],
                 restrict=mine[0])
    expect_usage("--issue-cpu: '-1' is not an integer from 0 to", ["--issue-cpu", "-1"])

    cpu = mine[-1]
    node, addr = start_null_node(sut, out)
    run = None
    try:
        if addr is None:
            print("FAIL: sut-node did not start")
            return 1
        run = subprocess.Popen([lg, "--scenario", "Server", "--nodes", addr,
                                "--issue-cpu", str(cpu),
                                "--set", "server_target_qps=2000", "--set", "min_duration_ms=4000",
                                "--set", "server_target_latency_ns=100000000",
                                "--output-dir", os.path.join(out, "run")] + qsl,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        # The pinned state lasts while the series issues (about 4 s); poll until it is seen.
        seen, others_seen, deadline = None, 0, time.monotonic() + 30
        while seen is None and run.poll() is None and time.monotonic() < deadline:
            main_set = allowed(run.pid, run.pid)
            if main_set == {cpu}:
                tids = [t for t in os.listdir(f"/proc/{run.pid}/task") if int(t) != run.pid]
                sets = [s for s in (allowed(run.pid, t) for t in tids) if s is not None]
                seen = [s for s in sets if cpu in s]
                others_seen = len(sets)
            time.sleep(0.02)
        _, err = run.communicate(timeout=60)
        if seen is None:
            fails.append(f"the issue thread was never seen pinned to CPU {cpu} alone")
        elif others_seen == 0:
            fails.append("no other thread of loadgen-node was seen while it issued")
        elif seen:
            fails.append(f"{len(seen)} other threads may still run on CPU {cpu}: {seen}")
        # 1 (INVALID) is a verdict on latency, which a loaded test host may spoil; not a failure.
        if run.returncode not in (0, 1):
            fails.append(f"the pinned run exited {run.returncode}: {err.strip()}")
        summary = open(os.path.join(out, "run", "mlperf_log_summary.txt")).read()
        want = f"Issue thread's own CPU        : {cpu} (no other thread of the process on it)"
        if want not in summary:
            fails.append("the harness block does not name the issue thread's own CPU")
        if "No errors encountered during test." not in summary:
            fails.append("the pinned run logged errors (a sample failed or was lost)")
        after = allowed(os.getpid(), os.getpid())
        if after != set(mine):
            fails.append(f"the test's own CPUs changed: {after}")
    finally:
        for p in (run, node):
            if p and p.poll() is None:
                p.kill()
                p.wait()
    for f in fails:
        print("FAIL:", f)
    if not fails:
        print(f"OK: the issue thread had CPU {cpu} alone while {others_seen} other threads ran "
              "elsewhere; bad CPUs refused with status 2")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
