#!/usr/bin/env python3
"""Walks every numeric option of loadgen-node or sut-node with hostile values (issue 34, item 12).

The options come from the program's own table (the hidden --list-options), so options added later
are walked too. Every numeric option, and for loadgen-node every --set field and every conf key,
for sut-node every numeric key of the built-in backends (--backend-opt), is given each of
0, -1, 2^63 and 2^64. Each invocation must either exit 2 with a message naming the option, or
run: loadgen-node a short valid run against the null SUT (exit 0); sut-node start listening and
exit 0 on SIGTERM. A signal (status < 0 or >= 128) or a hang (no exit within the deadline) fails.
Options that are not numeric are skipped only when listed below, so a new option cannot slip
through: add it to the program's numeric table, or here with the reason it takes no number.

Usage: options_walk.py --mode loadgen|sut --bin PROGRAM --out DIR [--jobs N]
"""
import argparse
import concurrent.futures
import os
import re
import shutil
import signal
import subprocess
import sys
import time

VALUES = ["0", "-1", "9223372036854775808", "18446744073709551616"]
# Per invocation; a run or a start takes well under a second on an idle machine.
DEADLINE_S = 30

# Options that take no number: paths, names, addresses, enumerations and flags.
LOADGEN_NOT_NUMERIC = {
    "scenario", "mode", "model", "mlperf-conf", "user-conf", "audit-config", "set", "qsl-npy",
    "qsl-kits", "qsl-raw", "synthetic-kind", "compress", "sut", "nodes", "policy", "result-codec", "tls-ca",
    "qsl-llm-json", "llm-field", "endpoint-dialect", "endpoint-model", "endpoint-api-key-file",
    "endpoint-session-header", "endpoint-ca", "endpoint-client",
    "tls-cert", "tls-key", "tls-server-name", "ucx-busy-poll", "ucx-trusted-fabric",
    "null-threaded", "null-digest", "verify-digest", "output-dir", "metrics-listen", "metrics-push",
    "log-prefix", "log-suffix",
    "prefix-datetime", "quiet", "progress", "sample-latencies", "issue-thread-io", "issue-write-thread", "wait-spin-adapt", "loadgen",
    "log-level", "config", "version", "help",
}
SUT_NOT_NUMERIC = {
    "listen", "name", "backend", "backend-opt", "device", "result-codec", "ucx-busy-poll",
    "ucx-trusted-fabric",
    "port-file", "metrics-listen", "stats", "tls-cert", "tls-key", "tls-ca", "tls-allow",
    "log-level", "config", "version", "list-backends", "help",
}


def list_options(binary):
    p = subprocess.run([binary, "--list-options"], capture_output=True, text=True, timeout=30)
    if p.returncode != 0:
        sys.exit(f"FAIL: {binary} --list-options exited {p.returncode}: {p.stderr.strip()}")
    rows = [line.split() for line in p.stdout.splitlines() if line.strip()]
    return rows


def help_options(binary):
    p = subprocess.run([binary, "--help"], capture_output=True, text=True, timeout=30)
    return set(re.findall(r"^\s+--([a-z0-9-]+)", p.stdout, re.M)), p.stdout


def check_listed(binary, rows, not_numeric, fails):
    """Every option --help documents is in the list; every non-numeric one is known here."""
    listed = {r[1] for r in rows if r[0] == "option"}
    documented, _ = help_options(binary)
    for name in sorted(documented - listed):
        fails.append(f"--{name} is in --help but not in --list-options")
    numeric = []
    for r in rows:
        if r[0] != "option":
            continue
        name, kind = r[1], r[2]
        if kind in ("int", "size"):
            numeric.append(name)
        elif name not in not_numeric:
            fails.append(f"--{name} ({kind}) is neither numeric in the program's table nor in "
                         "this test's list of options that take no number")
    return numeric


def judge(what, names, rc, out, err, ran_ok):
    """None when the outcome is acceptable, else the failure."""
    text = out + err
    if rc is None:
        return f"{what}: no exit within {DEADLINE_S} s (hang)"
    if rc < 0 or rc >= 128:
        return f"{what}: killed by a signal or crashed (status {rc}); stderr: {err.strip()[-400:]}"
    if rc == 2:
        if not any(n in text for n in names):
            return f"{what}: exit 2 without naming {' or '.join(names)}: {text.strip()[-400:]}"
        return None
    if rc == 0 and ran_ok:
        return None
    return f"{what}: status {rc} (want 2, or 0 for a valid run); output: {text.strip()[-600:]}"


def run_loadgen(binary, out, extra, what, names, conf=None):
    outdir = os.path.join(out, re.sub(r"[^A-Za-z0-9_.=-]", "_", what))
    shutil.rmtree(outdir, ignore_errors=True)
    os.makedirs(outdir)
    args = [binary, "--scenario", "SingleStream", "--sut", "null", "--qsl-synthetic", "16",
            "--sample-size", "16", "--set", "min_duration_ms=0", "--set", "min_query_count=64",
            "--progress", "off", "--quiet", "--audit-config", "none", "--output-dir", outdir]
    if conf is not None:
        path = os.path.join(outdir, "user.conf")
        with open(path, "w") as f:
            f.write(conf)
        args += ["--model", "resnet50", "--user-conf", path]
    args += extra
    try:
        p = subprocess.run(args, capture_output=True, text=True, timeout=DEADLINE_S)
        rc, so, se = p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired as e:
        rc, so, se = None, "", str(e.stderr or "")
    ok = False
    if rc == 0:
        with open(os.path.join(outdir, "mlperf_log_summary.txt")) as f:
            ok = "Result is : VALID" in f.read()
    result = judge(what, names, rc, so, se, ok)
    if result is None:
        shutil.rmtree(outdir, ignore_errors=True)
    return result, rc


def run_sut(binary, out, extra, what, names):
    """Starts sut-node; a start must listen (port file written) and end 0 on SIGTERM."""
    d = os.path.join(out, re.sub(r"[^A-Za-z0-9_.=-]", "_", what))
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    port_file = os.path.join(d, "port")
    args = [binary, "--listen", "127.0.0.1:0", "--port-file", port_file] + extra
    with open(os.path.join(d, "stderr"), "w+") as errf:
        p = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=errf)
        deadline = time.monotonic() + DEADLINE_S
        rc, started = None, False
        while time.monotonic() < deadline:
            rc = p.poll()
            if rc is not None:
                break
            if os.path.exists(port_file):
                started = True
                p.send_signal(signal.SIGTERM)
                try:
                    rc = p.wait(timeout=DEADLINE_S)
                except subprocess.TimeoutExpired:
                    rc = None
                break
            time.sleep(0.02)
        if p.poll() is None:
            p.kill()
            p.wait()
        errf.seek(0)
        err = errf.read()
    result = judge(what, names, rc, "", err, started)
    if result is None:
        shutil.rmtree(d, ignore_errors=True)
    return result, (rc if not started else "started")


def loadgen_cases(binary, rows, fails):
    numeric = check_listed(binary, rows, LOADGEN_NOT_NUMERIC, fails)
    fields = [r[1] for r in rows if r[0] == "set"]
    keys = [r[1] for r in rows if r[0] == "conf"]
    if not fields or not keys:
        fails.append("--list-options lists no --set fields or no conf keys")
    cases = []
    for v in VALUES:
        for name in numeric:
            cases.append((f"--{name} {v}", ["--" + name, v], ["--" + name], None))
        for name in fields:
            cases.append((f"--set {name}={v}", ["--set", f"{name}={v}"], [name], None))
        for key in keys:
            cases.append((f"conf {key} = {v}", [], [key], f"*.*.{key} = {v}\n"))
    print(f"loadgen-node: {len(numeric)} numeric options, {len(fields)} --set fields, "
          f"{len(keys)} conf keys, {len(cases)} runs; not numeric (skipped): "
          f"{', '.join(sorted(LOADGEN_NOT_NUMERIC))}")
    return [lambda c=c: run_loadgen(binary, OUT, c[1], c[0], c[2], c[3])
            for c in cases], [c[0] for c in cases]


def backend_keys(binary, backend):
    """The backend's option keys, from the message an unknown key gets ("known: a b c")."""
    p = subprocess.run([binary, "--listen", "127.0.0.1:0", "--backend", backend, "--backend-opt",
                        "options_walk_unknown=1"], capture_output=True, text=True,
                       timeout=DEADLINE_S)
    m = re.search(r"\(known:([^)]*)\)", p.stderr)
    return (m.group(1).split() if m else None), p


def sut_cases(binary, rows, fails):
    numeric = check_listed(binary, rows, SUT_NOT_NUMERIC, fails)
    _, text = help_options(binary)
    m = re.search(r"Backends built in: ([^.]*)\.", text)
    backends = [b.strip() for b in m.group(1).split(",")] if m else []
    if not backends:
        fails.append("sut-node --help names no built-in backend")
    cases = []
    for v in VALUES:
        for name in numeric:
            cases.append((f"--{name} {v}", ["--" + name, v], ["--" + name]))
    walked = []
    for b in backends:
        keys, p = backend_keys(binary, b)
        if keys is None:
            # A backend that cannot start here (a model or a library missing) says so before
            # its options are read; its keys are its own README's to check.
            print(f"note: backend {b} not walked (status {p.returncode}: "
                  f"{p.stderr.strip()[-200:]})")
            continue
        if p.returncode != 2:
            fails.append(f"--backend {b} with an unknown option: status {p.returncode}, want 2")
        walked.append(f"{b} ({' '.join(keys)})")
        for k in keys:
            for v in VALUES:
                cases.append((f"--backend {b} --backend-opt {k}={v}",
                              ["--backend", b, "--backend-opt", f"{k}={v}"], [k]))
    print(f"sut-node: {len(numeric)} numeric options, backends {'; '.join(walked)}; "
          f"{len(cases)} starts; not numeric (skipped): {', '.join(sorted(SUT_NOT_NUMERIC))}")
    return [lambda c=c: run_sut(binary, OUT, c[1], c[0], c[2]) for c in cases], \
        [c[0] for c in cases]


OUT = None


def main():
    global OUT
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", choices=["loadgen", "sut"], required=True)
    ap.add_argument("--bin", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--jobs", type=int, default=4)
    a = ap.parse_args()
    OUT = a.out
    shutil.rmtree(OUT, ignore_errors=True)
    os.makedirs(OUT)
    fails = []
    rows = list_options(a.bin)
    if a.mode == "loadgen":
        jobs, names = loadgen_cases(a.bin, rows, fails)
    else:
        jobs, names = sut_cases(a.bin, rows, fails)
    t0 = time.monotonic()
    outcomes = {}
    with concurrent.futures.ThreadPoolExecutor(max_workers=a.jobs) as ex:
        futs = {ex.submit(j): n for j, n in zip(jobs, names)}
        for f in concurrent.futures.as_completed(futs):
            result, rc = f.result()
            outcomes[futs[f]] = rc
            if result:
                fails.append(result)
    refused = sum(1 for rc in outcomes.values() if rc == 2)
    print(f"{len(outcomes)} invocations in {time.monotonic() - t0:.1f} s: {refused} refused "
          f"(exit 2), {len(outcomes) - refused} ran or failed")
    for n in sorted(outcomes):
        if outcomes[n] != 2:
            print(f"  ran: {n} -> {outcomes[n]}")
    for f in fails:
        print("FAIL:", f)
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
