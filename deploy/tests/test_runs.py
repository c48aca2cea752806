#!/usr/bin/env python3
"""deploy/plot/runs.py: a Server load sweep of loadgen-node (null SUT) into one folder per point,
the table, CSV, JSON and SVG over them, and its refusals of bad arguments.

    LOADGEN_NODE=path test_runs.py
"""
import csv
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
RUNS = os.path.join(HERE, "..", "plot", "runs.py")
LG = os.environ.get("LOADGEN_NODE", "")


def fail(msg):
    print(f"test_runs: {msg}", file=sys.stderr)
    sys.exit(1)


def run(args, expect=0):
    p = subprocess.run([sys.executable, RUNS] + args, capture_output=True, text=True, timeout=120)
    if p.returncode != expect:
        fail(f"runs.py {' '.join(args)}: exit {p.returncode}, wanted {expect}\n{p.stdout}\n{p.stderr}")
    return p


def main():
    if not os.access(LG, os.X_OK):
        print(f"SKIP: LOADGEN_NODE={LG!r} is not a program")
        return 77
    tmp = tempfile.mkdtemp(prefix="test_runs.")
    out = os.path.join(tmp, "sweep")
    lg = [LG, "--scenario", "Server", "--sut", "null", "--qsl-synthetic", "64", "--sample-size", "16",
          "--set", "min_duration_ms=500", "--set", "min_query_count=1", "--quiet", "--progress", "off",
          "--log-level", "error"]
    p = run(["--sweep", "server_target_qps=100,400", "--out-dir", out, "--"] + lg)
    points = sorted(os.listdir(out))
    if points != ["server_target_qps=100", "server_target_qps=400", "sweep.svg"]:
        fail(f"the sweep's folder holds {points}")
    rows = [l for l in p.stdout.splitlines() if l.startswith(out)]
    if len(rows) != 2 or not all(" Server " in r and "samples/s" in r for r in rows):
        fail(f"the table has not one Server row per point:\n{p.stdout}")
    svg = open(os.path.join(out, "sweep.svg")).read()
    if svg.count("<circle") != 2 or "Pareto" not in svg:
        fail("the plot has not one point per run")
    # The report over the same folders: CSV and JSON hold the same rows, throughput near the
    # target (the null SUT keeps up at these rates: a wide margin, not a speed check).
    csv_path, json_path = os.path.join(tmp, "r.csv"), os.path.join(tmp, "r.json")
    run([out, "--csv", csv_path, "--json", json_path])
    with open(csv_path) as f:
        rows = list(csv.DictReader(f))
    data = json.load(open(json_path))
    if len(rows) != 2 or len(data) != 2:
        fail(f"CSV {len(rows)} rows, JSON {len(data)}: wanted 2 each")
    for r, target in zip(rows, (100, 400)):
        thr = float(r["throughput"])
        if not 0.5 * target < thr < 1.5 * target or r["result"] not in ("VALID", "INVALID"):
            fail(f"row {r}: throughput {thr} for a target of {target} QPS")
        if r["errors"] != "0" or r["sut_name"] != "Null SUT" or not r["p99_ms"]:
            fail(f"row {r}: errors, SUT name or p99 missing")
    # Refusals: exit 2 and a message naming what is wrong.
    p = run(["--sweep", "server_target_qps", "--out-dir", out, "--"] + lg, expect=1)
    if "not KEY=V1,V2" not in p.stderr:
        fail(f"a sweep without values: {p.stderr}")
    p = run([tmp + "/nothing-here"], expect=1)
    if "not a folder" not in p.stderr:
        fail(f"a missing folder: {p.stderr}")
    p = run(["--svg", os.path.join(tmp, "x.svg"), "--y", "ttft", out], expect=1)
    if "nothing to draw" not in p.stderr:
        fail(f"a TTFT plot of runs without tokens: {p.stderr}")
    print("test_runs: sweep of 2 points, table, CSV, JSON, SVG and refusals: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
