#!/usr/bin/env python3
"""--issue-thread-io on|off: with on (the default) the Server issue thread runs the QDL's network
I/O between issues and the QDL's loop thread ("qdl-loop") sleeps while the series issues: over a
whole 1 s window of a run against a null sut-node on loopback it makes no context switch at all,
where with off it wakes for the queries. Either way every sample completes without error, and the
summary's harness block and the detail log say which it was, and with on the quiet window before
each issue, never above half the mean gap, and the spin's I/O turns by kind (writing, reading
only: p50 <= p99, some turns counted). A bad value gets exit status 2 and a
message naming the flag. Reads /proc/PID/task/*/status; bounded in time.
Usage: cli_issue_thread_io.py LOADGEN_NODE SUT_NODE OUTDIR"""
import os
import re
import shutil
import subprocess
import sys
import time

from nullnode import detail_values, start_null_node

RUN_S = 6  # the series' length
SAMPLE_S = 0.25  # how often the QDL's loop thread is read
WINDOW_S = 1.0  # a window of the run: with on, some whole window has no switch at all
QPS = 2000  # the Server schedule's rate


def switches(pid):
    """{tid: voluntary + involuntary context switches} of the QDL's loop thread ("qdl-loop")."""
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                if f.read().strip() != "qdl-loop":
                    continue
            with open(f"/proc/{pid}/task/{tid}/status") as f:
                out[tid] = sum(int(line.split()[1]) for line in f if "ctxt_switches" in line)
        except OSError:  # the thread ended meanwhile
            pass
    return out


def run_mode(lg, addr, out, mode, fails):
    d = os.path.join(out, mode)
    run = subprocess.Popen([lg, "--scenario", "Server", "--nodes", addr, "--issue-thread-io", mode,
                            "--qsl-synthetic", "64", "--sample-size", "64", "--progress", "off",
                            "--quiet", "--set", f"server_target_qps={QPS}",
                            "--set", f"min_duration_ms={RUN_S * 1000}",
                            "--set", "server_target_latency_ns=100000000", "--output-dir", d],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    # The thread's switches every SAMPLE_S while the process lives; each WINDOW_S window's count.
    # The series starts after the connection, Name() and the QSL, whose time a loaded host
    # stretches, so the verdict takes every window rather than fixed instants.
    samples = []
    try:
        deadline = time.monotonic() + RUN_S + 60
        while run.poll() is None and time.monotonic() < deadline:
            samples.append(switches(run.pid))
            time.sleep(SAMPLE_S)
        _, err = run.communicate(timeout=60)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
    step = int(WINDOW_S / SAMPLE_S)
    woke = []
    for a, b in zip(samples, samples[step:]):
        woke += [b[t] - a[t] for t in a if t in b]
    # 1 (INVALID) is a verdict on latency, which a loaded test host may spoil; not a failure.
    if run.returncode not in (0, 1):
        fails.append(f"{mode}: exited {run.returncode}: {err.strip()}")
        return woke
    summary = open(os.path.join(d, "mlperf_log_summary.txt")).read()
    if "No errors encountered during test." not in summary:
        fails.append(f"{mode}: the run logged errors (a sample failed or was lost)")
    want = "SUT's I/O on the issue thread : " + (
        "yes" if mode == "on" else "no (--issue-thread-io off)")
    if want not in summary:
        fails.append(f"{mode}: the harness block lacks '{want}'")
    det = detail_values(os.path.join(d, "mlperf_log_detail.txt"))
    v = det.get("harness_issue_thread_io")
    if v != (1 if mode == "on" else 0):
        fails.append(f"{mode}: harness_issue_thread_io is {v!r} in the detail log")
    # The quiet window before each issue (only with the I/O on the issue thread): reported, and
    # never above its cap, half the schedule's mean gap.
    m = re.search(r"Quiet window, largest \(ns\) *: (\d+) \(cap (\d+)", summary)
    if mode == "off" and m:
        fails.append("off: the harness block reports a quiet window")
    if mode == "on":
        cap = int(1e9 / QPS) // 2
        q = det.get("harness_quiet_window_ns")
        if not m or int(m.group(2)) != cap or int(m.group(1)) > cap or q != int(m.group(1)):
            fails.append(f"on: quiet window line {m.group(0) if m else None!r}, detail {q!r}: "
                         f"want a window of at most the cap {cap} ns in both")
    # The spin's I/O turns by kind (writing: the first poll after an issue; reading only): both
    # lines with on, each p50 <= p99 and as in the detail log, and some turns counted; none with off.
    turns = 0
    for kind, label in (("write", "writing"), ("read", "reading only")):
        t = re.search(r"I/O turns " + label + r" \(ns\) *: p50 (\d+), p99 (\d+) \((\d+) turns",
                      summary)
        if mode == "off":
            if t:
                fails.append(f"off: the harness block reports I/O turns ({t.group(0)!r})")
            continue
        keys = [det.get(f"harness_io_turn_{kind}_{k}") for k in ("p50_ns", "p99_ns", "count")]
        if not t or int(t.group(1)) > int(t.group(2)) or keys != [int(x) for x in t.groups()]:
            fails.append(f"on: I/O turns {label}: line {t.group(0) if t else None!r}, detail "
                         f"{keys!r}: want p50 <= p99, the same figures in both")
            continue
        turns += int(t.group(3))
    if mode == "on" and turns == 0:
        fails.append("on: no I/O turn counted in a run that spins before every issue")
    return woke


def main():
    lg, sut, out = sys.argv[1:4]
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    fails = []
    p = subprocess.run([lg, "--scenario", "Server", "--sut", "null", "--issue-thread-io", "maybe",
                        "--qsl-synthetic", "64", "--output-dir", os.path.join(out, "bad")],
                       capture_output=True, text=True, timeout=60)
    if p.returncode != 2 or "--issue-thread-io: 'maybe' is not on or off" not in p.stderr:
        fails.append(f"--issue-thread-io maybe: status {p.returncode}, stderr {p.stderr.strip()}")

    node, addr = start_null_node(sut, out)
    try:
        if addr is None:
            print("FAIL: sut-node did not start")
            return 1
        on = run_mode(lg, addr, out, "on", fails)
        off = run_mode(lg, addr, out, "off", fails)
    finally:
        node.kill()
        node.wait()
    if not off or max(off) == 0:
        fails.append(f"off: the QDL's loop thread was not seen waking (windows {off}); the "
                     "check sees nothing")
    if not on or min(on) != 0:
        fails.append(f"on: the QDL's loop thread woke in every {WINDOW_S} s window of the run: "
                     f"{on}")
    for f in fails:
        print("FAIL:", f)
    if not fails:
        print(f"OK: the QDL's loop thread's context switches per {WINDOW_S} s window: with on "
              f"{min(on)} at least once ({len(on)} windows), with off up to {max(off)}")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
