#!/usr/bin/python3
"""A 3D-UNet (KiTS19) Network-division submission end to end, checked by the official checker:
submit.py --submission (the unaltered official LoadGen in loadgen-node) for 3d-unet-99 and
3d-unet-99.9 Offline, both from mlperf.conf's 3d-unet (model = 3d-unet), through two sut-nodes
running the sliding window (patch 32) over the unet-sim oracle backend, LZ4 both ways, on tiny
synthetic cases in the reference pre-processing's format (tools/kits_synth.py, nifti ground
truth); TEST01 run and verified by the official script; the official accuracy_kits.py as the
accuracy step (no stand-in); then the official checker on the tree.

The checker must report nothing but what a short run on 3 cases cannot meet (ALLOWED below: the
600 s duration, the data-set size and the performance sample count of 3 cases against 43);
TEST01's performance comparison of two one-second runs on a shared host (TIMING) is printed, not
failed. Everything else fails the test: the layout, the tree names, the scenario set, the
system description, TEST01's accuracy check, the truncated logs, and any "accuracy not met":
the oracle's DICE must be exactly 1.0 (mean, kidney and tumour) in each accuracy.txt of the
tree, with TEST01's accuracy.txt recording the deterministic pass and that score.

    test_unet_submission.py LOADGEN_NODE SUT_NODE SOURCE_DIR ARTEFACT_DIR

Skipped (77) only when the official LoadGen or the inference checkout is not configured.
"""
import json
import os
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
CASES, SHAPE, PATCH = 3, "40x56x56", 32
TREES = ("3d-unet-99", "3d-unet-99.9")
ALLOWED = verdict.SHORT_RUN + verdict.SMALL_QSL
TIMING = [r"Compliance test performance check in .*/TEST01 failed"]
ONE = "Accuracy: mean = 1.00000, kidney = 1.0000, tumor = 1.0000"


def benchmark(tree, qsl, pre, uc, inference):
    script = os.path.join("{inference}", "vision", "medical_imaging", "3d-unet-kits19",
                          "accuracy_kits.py")
    return (f"\n[benchmark.{tree}]\nmodel = 3d-unet\nscenarios = Offline\nuser_conf = {uc}\n"
            f"qsl = --qsl-kits {qsl} --compress lz4 --result-codec lz4\n"
            f"accuracy = {PY} {script} --log_file {{accuracy_log}} --preprocessed_data_dir {pre} "
            "--postprocessed_data_dir postprocessed --num_proc 1\n"
            "measurements.input_data_types = fp32\nmeasurements.retraining = no\n"
            "measurements.starting_weights_filename = none (unet-sim oracle backend)\n"
            "measurements.weight_data_types = N/A\nmeasurements.weight_transformations = none\n")


def main():
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    lg, sut, src, artefacts = (os.path.abspath(a) for a in sys.argv[1:])
    skip = official_skip(lg)
    if skip:
        print(skip)
        return 77
    inference = os.environ["MLPERF_INFERENCE_DIR"]
    r = subprocess.run([PY, "-c", "import numpy, pandas, nibabel"], capture_output=True,
                       text=True)
    if r.returncode != 0:  # not a skip: CI installs them (deploy/install-deps.sh)
        print("FAIL: accuracy_kits.py's Python packages are missing: "
              + r.stderr.strip().splitlines()[-1])
        return 1
    failures = []
    t0 = time.monotonic()
    tmp = tempfile.mkdtemp(prefix="submit_unet_")
    procs = et.Procs()
    try:
        tools = os.path.join(src, "loadgen-node", "tools")
        pre, qsl = os.path.join(tmp, "preprocessed"), os.path.join(tmp, "kits_qsl")
        subprocess.run([PY, os.path.join(tools, "kits_synth.py"), "--out-dir", pre, "--cases",
                        str(CASES), "--shape", SHAPE, "--roi", str(PATCH), "--seed", "7"],
                       check=True, stdout=subprocess.DEVNULL)
        subprocess.run([PY, os.path.join(tools, "kits_pickle_to_qsl.py"), "--preprocessed-dir",
                        pre, "--out-dir", qsl], check=True, stdout=subprocess.DEVNULL)
        addrs = [et.start_node(procs, sut, tmp, f"unet{i}", "unet-sim", {"perturb": 0},
                               ["--sliding-window", str(PATCH), "--window-batch", "5",
                                "--result-codec", "lz4", "--max-wait-us", "20000"])[1]
                 for i in range(2)]
        uc = os.path.join(tmp, "unet-user.conf")
        with open(uc, "w") as f:  # short runs; the checker reports the duration (ALLOWED)
            f.write("# short runs for the test: a real submission keeps mlperf.conf's minimums\n"
                    "3d-unet.Offline.target_qps = 20\n3d-unet.Offline.min_duration = 1000\n")
        cfg = fixture.write(tmp, addrs, lg, inference=inference, python=PY,
                            mlperf_conf=os.path.join(inference, "loadgen", "mlperf.conf"))
        system = fixture.BASE_SYSTEM | {
            "system_type": "datacenter", "accelerator_model_name": "unet-sim oracle backend",
            "framework": "sut-node --sliding-window over the unet-sim backend"}
        with open(os.path.join(tmp, "system-base.json"), "w") as f:
            json.dump(system, f, indent=2)
        text = open(cfg).read().split("\n[benchmark.resnet50]")[0].replace("demo = yes\n", "")
        for tree in TREES:
            text += benchmark(tree, qsl, pre, uc, inference)
        with open(cfg, "w") as f:
            f.write(text)

        r, _, bad = verdict.submit_and_judge(PY, SUBMIT, cfg, tmp, artefacts, ALLOWED, TIMING,
                                             timeout=1000)
        failures += bad
        res = os.path.join(tmp, "out", "network", "TestOrg", "results", "loopback_2x_sim")
        got = {b: sorted(os.listdir(os.path.join(res, b)))
               for b in (os.listdir(res) if os.path.isdir(res) else [])}
        want = {t: ["Offline"] for t in TREES}
        if got != want:
            failures.append(f"tree: benchmarks and scenarios {got}, expected {want}")
        for tree in TREES:
            sdir = os.path.join(res, tree, "Offline")
            acc = os.path.join(sdir, "accuracy", "accuracy.txt")
            body = open(acc).read() if os.path.exists(acc) else "(missing)"
            if ONE not in body or "STAND-IN" in body:
                failures.append(f"{acc}: no '{ONE}' from accuracy_kits.py: {body[-300:]}")
            for name in ("verify_accuracy.txt", os.path.join("accuracy", "accuracy.txt")):
                v = os.path.join(sdir, "TEST01", name)
                body = open(v).read() if os.path.exists(v) else "(missing)"
                if "TEST PASS" not in body or (name != "verify_accuracy.txt" and ONE not in body):
                    failures.append(f"{v}: {body.strip()[-300:]}")
            v = os.path.join(sdir, "TEST01", "verify_performance.txt")
            if not os.path.exists(v):
                failures.append(f"{v} is missing")
            elif "TEST PASS" not in open(v).read():
                print(f"timing: {tree} TEST01 performance comparison of two short runs failed "
                      "(printed, not failed)")
        if os.path.exists(os.path.join(tmp, "out", "STAND_IN_ACCURACY.txt")) or \
                "NOT A VALID RESULT" in r.stdout:
            failures.append("the tree is marked as a stand-in, but the official script scored it")
    finally:
        procs.stop_all()
        shutil.rmtree(tmp, ignore_errors=True)
    for f in failures:
        print("FAILED: " + f)
    print(f"wall time {time.monotonic() - t0:.0f} s; 3d-unet-99 and 3d-unet-99.9 Offline, TEST01")
    print(f"{len(failures)} failed" if failures else "passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
