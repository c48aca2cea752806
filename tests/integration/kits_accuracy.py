#!/usr/bin/python3
"""3D-UNet (KiTS19) end to end, scored by the official accuracy_kits.py (issue 37).

Synthetic cases in the reference pre-processing's exact format (kits_synth.py: pickles and nifti
ground truth), converted for the C QSL (kits_pickle_to_qsl.py), sent by loadgen-node --qsl-kits in
an Offline accuracy run with LZ4 both ways (samples compressed in the QSL, segmentations by the
node) to a sut-node running the sliding window over the unet-sim backend. The accuracy log then
goes, unchanged, through the reference's accuracy_kits.py:
  1. oracle, patch 32, 3 cases of different shapes, 5 patches per backend batch (so batches
     span cases): mean DICE exactly 1.0 for every case, kidney and tumour;
  2. perturbed oracle (tumour labelled kidney): mean DICE below 1, tumour near 0;
  3. oracle at the reference's patch of 128 on 2 cases padded for it: DICE exactly 1.0.
Each run must answer every case once with no error, and both directions must have been
compressed (fewer bytes on the wire than the float32 voxels out and the uint8 labels back).

Usage: kits_accuracy.py --sut-node BIN --loadgen BIN --out DIR [--reference DIR]
--reference: the 3d-unet-kits19 folder of an mlcommons/inference checkout (default: from
MLPERF_INFERENCE_DIR, else ../shared/reference/mlcommons-inference next to the source tree).
Exit 77 (skipped) when accuracy_kits.py or python3-nibabel/pandas is missing.
"""
import argparse
import csv
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(os.path.dirname(HERE))
TOOLS = os.path.join(SRC, "loadgen-node", "tools")
PY = "/usr/bin/python3"
DEADLINE_S = 120


def fail(msg):
    print(f"FAIL: {msg}", flush=True)
    sys.exit(1)


def run(cmd, cwd=None):
    r = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=DEADLINE_S)
    if r.returncode != 0:
        fail(f"{' '.join(cmd)} exited {r.returncode}:\n{r.stdout}\n{r.stderr}")
    return r.stdout


def reference_dir(arg):
    if arg:
        return arg
    inf = os.environ.get("MLPERF_INFERENCE_DIR") or os.path.join(  # empty: not configured
        SRC, "..", "shared", "reference", "mlcommons-inference")
    return os.path.join(inf, "vision", "medical_imaging", "3d-unet-kits19")


def make_data(out, name, cases, shape, roi, seed):
    pre, qsl = os.path.join(out, name, "pre"), os.path.join(out, name, "qsl")
    run([PY, os.path.join(TOOLS, "kits_synth.py"), "--out-dir", pre, "--cases", str(cases),
         "--shape", shape, "--roi", str(roi), "--seed", str(seed)])
    run([PY, os.path.join(TOOLS, "kits_pickle_to_qsl.py"), "--preprocessed-dir", pre,
         "--out-dir", qsl])
    return pre, qsl


def one_run(a, out, tag, pre, qsl, patch, perturb, backend=None):
    d = os.path.join(out, tag)
    os.makedirs(d)
    port_file = os.path.join(d, "port")
    backend = backend or ["--backend", "unet-sim", "--backend-opt", f"perturb={perturb}"]
    sut_cmd = [a.sut_node, "--listen", "127.0.0.1:0", "--port-file", port_file, "--name", tag] + \
        backend + ["--sliding-window", str(patch), "--window-batch", "5", "--result-codec", "lz4",
                   "--max-wait-us", "20000"]
    with open(os.path.join(d, "sut.log"), "w") as log:
        sut = subprocess.Popen(sut_cmd, stdout=log, stderr=subprocess.STDOUT)
    try:
        t0 = time.monotonic()
        while not (os.path.exists(port_file) and open(port_file).read().strip()):
            if sut.poll() is not None or time.monotonic() - t0 > 30:
                fail(f"{tag}: sut-node did not start: {open(os.path.join(d, 'sut.log')).read()}")
            time.sleep(0.05)
        port = open(port_file).read().strip()
        logs = os.path.join(d, "logs")
        run([a.loadgen, "--scenario", "Offline", "--model", "3d-unet-99", "--mode", "AccuracyOnly",
             "--qsl-kits", qsl, "--compress", "lz4", "--result-codec", "lz4",
             "--nodes", f"127.0.0.1:{port}", "--output-dir", logs, "--quiet", "--progress", "off"])
    finally:
        sut.send_signal(signal.SIGTERM)
        try:
            rc = sut.wait(timeout=30)
        except subprocess.TimeoutExpired:
            sut.kill()
            fail(f"{tag}: sut-node did not stop on SIGTERM")
    if rc != 0:
        fail(f"{tag}: sut-node exited {rc}: {open(os.path.join(d, 'sut.log')).read()}")
    with open(os.path.join(logs, "mlperf_log_accuracy.json")) as f:
        acc = json.load(f)
    ncases = len([n for n in os.listdir(qsl) if n.endswith(".npy")])
    idx = sorted(e["qsl_idx"] for e in acc)
    if idx != list(range(ncases)):
        fail(f"{tag}: the accuracy log holds qsl_idx {idx}, want each of 0..{ncases - 1} once")
    with open(os.path.join(logs, "mlperf_log_nodes.json")) as f:
        node = json.load(f)["nodes"][0]
    voxels = sum(len(e["data"]) // 2 for e in acc)
    if node["samples_failed"] or node["errors"] or node["samples_completed"] != ncases:
        fail(f"{tag}: node record {node}")
    if not (node["bytes_out"] < voxels * 4 and node["bytes_in"] < voxels):
        fail(f"{tag}: not compressed both ways: {node['bytes_out']} bytes out for {voxels * 4} "
             f"bytes of float32, {node['bytes_in']} bytes back for {voxels} labels")
    print(f"{tag}: {ncases} cases, {voxels} voxels; wire {node['bytes_out']} bytes out "
          f"(float32 {voxels * 4}, ratio {voxels * 4 / node['bytes_out']:.2f}), "
          f"{node['bytes_in']} bytes back (labels {voxels}, ratio {voxels / node['bytes_in']:.1f})")
    post = os.path.join(d, "post")
    text = run([PY, os.path.join(a.reference, "accuracy_kits.py"), "--log_file",
                os.path.join(logs, "mlperf_log_accuracy.json"), "--preprocessed_data_dir", pre,
                "--postprocessed_data_dir", post, "--num_proc", "1"], cwd=d)
    m = re.search(r"Accuracy: mean = ([0-9.]+), kidney = ([0-9.]+), tumor = ([0-9.]+)", text)
    if not m:
        fail(f"{tag}: accuracy_kits.py printed no accuracy line:\n{text}")
    print(f"{tag}: accuracy_kits.py: {m.group(0)}")
    with open(os.path.join(post, "summary.csv")) as f:
        rows = {r["case"]: r for r in csv.DictReader(f)}
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sut-node", required=True)
    ap.add_argument("--loadgen", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--reference")
    ap.add_argument("--unet3d-onnx", help="bench/onnx/unet3d_onnx: also run the small 3D-UNet "
                    "(seeded weights) on the onnx backend under the sliding window")
    a = ap.parse_args()
    a.reference = reference_dir(a.reference)
    if not os.path.exists(os.path.join(a.reference, "accuracy_kits.py")):
        print(f"SKIP: no accuracy_kits.py in {a.reference} (set MLPERF_INFERENCE_DIR)")
        sys.exit(77)
    probe = subprocess.run([PY, "-c", "import numpy, nibabel, pandas"], capture_output=True)
    if probe.returncode != 0:
        print("SKIP: python3-numpy, python3-nibabel or python3-pandas is missing "
              "(deploy/install-deps.sh)")
        sys.exit(77)
    shutil.rmtree(a.out, ignore_errors=True)
    os.makedirs(a.out)

    pre, qsl = make_data(a.out, "p32", 3, "40x56x56", 32, 7)
    rows = one_run(a, a.out, "oracle32", pre, qsl, 32, 0)
    for case, r in rows.items():
        for col in ("kidney", "tumor", "composite"):
            if float(r[col]) != 1.0:
                fail(f"oracle32: {case} {col} DICE {r[col]}, want exactly 1.0")
    rows = one_run(a, a.out, "perturbed32", pre, qsl, 32, 1)
    mean = rows["mean"]
    if not (float(mean["composite"]) < 1.0 and float(mean["kidney"]) < 1.0 and
            float(mean["tumor"]) < 0.01):
        fail(f"perturbed32: mean DICE {dict(mean)}, want composite and kidney < 1, tumour < 0.01")

    pre, qsl = make_data(a.out, "p128", 2, "100x120x140", 128, 11)
    rows = one_run(a, a.out, "oracle128", pre, qsl, 128, 0)
    for case, r in rows.items():
        if float(r["composite"]) != 1.0:
            fail(f"oracle128: {case} DICE {r['composite']}, want exactly 1.0")

    if a.unet3d_onnx:
        # The real network's operators (3-D Conv, InstanceNorm, ReLU, ConvTranspose, Concat) on
        # the onnx backend under the window: seeded weights, so the DICE means nothing, but
        # every case must come back once, whole, and be scored.
        model = os.path.join(a.out, "unet3d_small.onnx")
        run([a.unet3d_onnx, model, "--small"])
        pre, qsl = make_data(a.out, "onnx-data", 2, "40x56x56", 32, 13)
        rows = one_run(a, a.out, "onnx32", pre, qsl, 32, 0,
                       ["--backend", "onnx", "--backend-opt", f"model={model}",
                        "--backend-opt", "output=raw", "--backend-opt", "batch_sizes=1,2,5",
                        "--max-batch", "5"])
        for case, r in rows.items():
            for col in ("kidney", "tumor", "composite"):
                if not 0.0 <= float(r[col]) <= 1.0:
                    fail(f"onnx32: {case} {col} DICE {r[col]} outside [0, 1]")
        print(f"onnx32: the small 3D-UNet on the onnx backend, every case scored "
              f"(mean composite {rows['mean']['composite']}, seeded weights)")
    print("PASS")


if __name__ == "__main__":
    main()
