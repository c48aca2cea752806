#!/usr/bin/python3
"""Tests of loadgen-node/tools/fmnist_to_npy.py and accuracy_classification.py.

    test_tools.py unit                      synthetic idx files and accuracy logs
    test_tools.py pipeline NPY_INFER MODEL   the real data set through the backend (npy_infer)
                                             and the accuracy script, in both output modes
"""
import gzip
import json
import os
import re
import struct
import subprocess
import sys
import tempfile
import unittest

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(
    __file__)))))
TOOLS = os.path.join(ROOT, "loadgen-node", "tools")
TO_NPY = os.path.join(TOOLS, "fmnist_to_npy.py")
ACCURACY = os.path.join(TOOLS, "accuracy_classification.py")
LINE = re.compile(r"^accuracy=(\d+\.\d{3})%, good=(\d+), total=(\d+)$", re.M)


def run(*args, ok=True):
    p = subprocess.run([sys.executable] + list(args), capture_output=True, text=True)
    if ok and p.returncode != 0:
        raise AssertionError(f"{args} failed ({p.returncode}): {p.stderr}")
    return p


def write_idx(path, arr):
    header = struct.pack(">BBBB", 0, 0, 0x08, arr.ndim) + b"".join(
        struct.pack(">I", d) for d in arr.shape)
    with gzip.open(path, "wb") as f:
        f.write(header + arr.astype(np.uint8).tobytes())


def write_log(path, entries):
    with open(path, "w") as f:
        json.dump([{"seq_id": i, "qsl_idx": q, "data": d.hex().upper()}
                   for i, (q, d) in enumerate(entries)], f)


class ToNpy(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        d = self.tmp.name
        rng = np.random.default_rng(1)
        self.images = rng.integers(0, 256, (7, 28, 28), dtype=np.uint8)
        self.labels = np.array([3, 1, 4, 1, 5, 9, 2], dtype=np.uint8)
        write_idx(os.path.join(d, "t10k-images-idx3-ubyte.gz"), self.images)
        write_idx(os.path.join(d, "t10k-labels-idx1-ubyte.gz"), self.labels)

    def tearDown(self):
        self.tmp.cleanup()

    def test_uint8_default(self):
        out = os.path.join(self.tmp.name, "out")
        run(TO_NPY, "--data", self.tmp.name, "--out-dir", out)
        x = np.load(os.path.join(out, "fmnist_test_images.npy"))
        y = np.load(os.path.join(out, "fmnist_test_labels.npy"))
        self.assertEqual(x.dtype, np.uint8)
        self.assertEqual(x.shape, (7, 1, 28, 28))
        self.assertTrue(x.flags["C_CONTIGUOUS"])
        np.testing.assert_array_equal(x[:, 0], self.images)
        np.testing.assert_array_equal(y, self.labels)

    def test_float_scaled_flat(self):
        out = os.path.join(self.tmp.name, "f")
        run(TO_NPY, "--data", self.tmp.name, "--out-dir", out, "--dtype", "float32",
            "--shape", "784", "--scale", "0.5", "--count", "3")
        x = np.load(os.path.join(out, "fmnist_test_images.npy"))
        self.assertEqual(x.dtype, np.float32)
        self.assertEqual(x.shape, (3, 784))
        np.testing.assert_array_equal(x, self.images[:3].reshape(3, 784) * np.float32(0.5))

    def test_refusals(self):
        p = run(TO_NPY, "--data", self.tmp.name, "--shape", "1,27,28", ok=False)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("does not hold 28x28", p.stderr)
        p = run(TO_NPY, "--data", self.tmp.name, "--scale", "2", ok=False)
        self.assertIn("--scale needs --dtype float32", p.stderr)


class Accuracy(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.labels = os.path.join(self.tmp.name, "labels.npy")
        np.save(self.labels, np.array([0, 1, 2, 3, 4], dtype=np.uint8))
        self.log = os.path.join(self.tmp.name, "mlperf_log_accuracy.json")

    def tearDown(self):
        self.tmp.cleanup()

    def accuracy(self, *extra, ok=True):
        return run(ACCURACY, "--log", self.log, "--labels", self.labels, *extra, ok=ok)

    def test_argmax(self):
        pred = [0, 1, 2, 0, 4]
        entries = [(q, struct.pack("<i", c)) for q, c in enumerate(pred)]
        entries.append((3, struct.pack("<i", 3)))  # a repeated sample counts once (the first)
        write_log(self.log, entries)
        out = self.accuracy().stdout
        self.assertEqual(LINE.search(out).groups(), ("80.000", "4", "5"))

    def test_raw_logits(self):
        entries = []
        for q, c in enumerate([0, 1, 1, 3, 4]):
            logits = np.full(10, -1.0, dtype="<f4")
            logits[c] = 2.5
            entries.append((q, logits.tobytes()))
        write_log(self.log, entries)
        self.assertEqual(LINE.search(self.accuracy().stdout).groups(), ("80.000", "4", "5"))
        # forced argmax on 40-byte responses is an error, naming the sample
        p = self.accuracy("--output", "argmax", ok=False)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("40 bytes where a 4-byte class index was expected", p.stderr)

    def test_label_offset_and_bad_index(self):
        write_log(self.log, [(q, struct.pack("<i", q + 1)) for q in range(5)])
        self.assertEqual(LINE.search(self.accuracy("--label-offset", "1").stdout).groups(),
                         ("100.000", "5", "5"))
        write_log(self.log, [(7, struct.pack("<i", 0))])
        p = self.accuracy(ok=False)
        self.assertIn("qsl_idx 7 is outside the 5 labels", p.stderr)


def pipeline(npy_infer, model):
    """Fashion-MNIST -> .npy -> backend -> accuracy log -> accuracy script, in both output modes;
    each must reach 99 % of the PyTorch accuracy recorded beside the model."""
    with open(os.path.splitext(model)[0] + ".json") as f:
        ref = json.load(f)["pytorch_fp32_top1"]
    with tempfile.TemporaryDirectory() as d:
        run(TO_NPY, "--out-dir", d, "--dtype", "uint8", "--shape", "1,28,28")
        images = os.path.join(d, "fmnist_test_images.npy")
        labels = os.path.join(d, "fmnist_test_labels.npy")
        for mode in ("argmax", "raw"):
            log = os.path.join(d, f"log_{mode}.json")
            p = subprocess.run([npy_infer, "--model", model, "--npy", images, "--out", log,
                                "--output", mode], capture_output=True, text=True)
            if p.returncode != 0:
                raise AssertionError(f"npy_infer failed: {p.stderr}")
            out = run(ACCURACY, "--log", log, "--labels", labels).stdout
            m = LINE.search(out)
            if not m:
                raise AssertionError(f"no accuracy line in {out!r}")
            acc, good, total = float(m.group(1)), int(m.group(2)), int(m.group(3))
            print(f"{mode}: {out.strip()} (PyTorch FP32 {ref:.3f}%)")
            if total != 10000 or acc < 0.99 * ref:
                raise AssertionError(f"{mode}: accuracy {acc}% over {total} images is under 99% "
                                     f"of PyTorch's {ref}%")


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "pipeline":
        pipeline(sys.argv[2], sys.argv[3])
    elif len(sys.argv) == 2 and sys.argv[1] == "unit":
        unittest.main(argv=[sys.argv[0], "-v"])
    else:
        sys.exit(__doc__)
