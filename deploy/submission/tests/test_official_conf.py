#!/usr/bin/env python3
"""loadgen-node --loadgen official --mlperf-conf PATH: the official LoadGen reads only the
mlperf.conf compiled into it, so PATH must hold the same settings (same keys, same values; the
comparison is key-equal, comments and layout do not count) or the run is refused before it starts
(exit 2, one line naming PATH, the LoadGen library and the first differing key).

usage: test_official_conf.py LOADGEN_NODE SUT_NODE
(exit 77 when the build has no official LoadGen or MLPERF_INFERENCE_DIR is not set: the
LoadGen's own loadgen/mlperf.conf there is the copy compiled in, when the LoadGen was built from
that checkout as CI does)"""
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nodes import Node, official_missing  # noqa: E402

KEY = "resnet50.*.performance_sample_count_override"


def main():
    lg, sut = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    inference = os.environ.get("MLPERF_INFERENCE_DIR")
    conf = os.path.join(inference or "", "loadgen", "mlperf.conf")
    if not inference or not os.path.isfile(conf):
        print("SKIP: set MLPERF_INFERENCE_DIR to the mlcommons/inference checkout the official "
              "LoadGen was built from")
        return 77
    missing = official_missing(lg)
    if missing:
        print(missing)
        return 77
    text = open(conf).read().splitlines()
    assert any(ln.startswith(KEY + " = 1024") for ln in text), f"{conf} has no '{KEY} = 1024'"
    # The same settings in another layout: no comments or blank lines, reversed, spaced out.
    pairs = [ln.split("#")[0].split() for ln in text if ln.split("#")[0].strip()]
    relaid = "\n".join("  ".join(p) for p in reversed(pairs)) + "\n"
    variants = {
        "unchanged": (open(conf).read(), None),
        "relaid": (relaid, None),
        "changed": ("\n".join(ln.replace(KEY + " = 1024", KEY + " = 512") for ln in text) + "\n",
                    f"key {KEY} is 512 there, 1024 in the compiled-in copy"),
        "added": (open(conf).read() + "resnet50.Offline.max_query_count = 5\n",
                  "key resnet50.Offline.max_query_count = 5 is not in the compiled-in copy"),
        "removed": ("\n".join(ln for ln in text if not ln.startswith(KEY)) + "\n",
                    f"key {KEY} (= 1024 in the compiled-in copy) is missing"),
    }
    with tempfile.TemporaryDirectory(prefix="lg_official_conf_") as tmp, \
            Node(sut, "conf-a", logdir=tmp) as node:
        failures = sum(not case(lg, node, tmp, name, body, want)
                       for name, (body, want) in variants.items())
    print(f"{'FAILED' if failures else 'passed'}: {failures} of {len(variants)} cases")
    return 1 if failures else 0


def case(lg, node, tmp, name, body, want):
    """One --mlperf-conf file: |want| None for a run, else the text its refusal must hold."""
    path = os.path.join(tmp, f"{name}.conf")
    with open(path, "w") as f:
        f.write(body)
    out = os.path.join(tmp, name)
    r = subprocess.run([lg, "--loadgen", "official", "--scenario", "Offline", "--model", "resnet50",
                        "--mlperf-conf", path, "--qsl-synthetic", "2048", "--sample-size", "64",
                        "--nodes", node.address, "--output-dir", out, "--quiet", "--progress",
                        "off", "--set", "min_duration_ms=200", "--set", "offline_expected_qps=2000"],
                       cwd=tmp, capture_output=True, text=True, timeout=120)
    detail = os.path.exists(os.path.join(out, "mlperf_log_detail.txt"))
    err = [ln for ln in r.stderr.splitlines() if ln.startswith("loadgen-node:")]
    if want is None:
        ok = r.returncode in (0, 1) and detail and not any("differs" in ln for ln in err)
    else:
        line = err[0] if len(err) == 1 else ""
        ok = (r.returncode == 2 and not detail and want in line and "libmlperf_loadgen.a" in line
              and f"--mlperf-conf {path} differs from the mlperf.conf compiled into " in line)
    print(f"{'ok' if ok else 'FAILED'}: {name}: exit {r.returncode}, detail log {detail}, "
          f"{len(err)} loadgen-node lines")
    if not ok:
        print(r.stderr[-2000:])
    return ok

if __name__ == "__main__":
    sys.exit(main())
