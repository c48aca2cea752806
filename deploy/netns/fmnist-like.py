#!/usr/bin/env python3
"""Writes Fashion-MNIST images as ResNet50-sized int8 input tensors, back to back in one raw file.

    fmnist-like.py OUT.raw [--count N] [--data DIR] [--layout chw|hwc]

Each 28x28 Fashion-MNIST test image is upscaled bilinearly to 224x224, turned into three channels
with the ImageNet per-channel normalisation ((x/255 - mean) / std), and quantised to int8 (scale
127/2.7), the way an int8 ResNet50 input is prepared: 150 528 bytes per sample. The file is what
`loadgen-node --qsl-raw OUT.raw --sample-size 150528` and `qdl-drive --qsl-raw` read. The data is
"Fashion-MNIST-like" in the sense of the benchmark issue: real image content with the mostly flat
background of product photos, so lossless LZ4 shrinks it by a realistic, not a contrived, factor.

Needs python3-numpy and the Debian package dataset-fashion-mnist (deploy/install-deps.sh).
"""
import argparse
import gzip
import os
import sys

np = None  # numpy, imported in main() so that --help works without it

DEFAULT_DATA = "/usr/share/datasets/fashion-mnist"
MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)
SIZE = 224


def read_images(path):
    """The images of an idx3-ubyte file (gzip'd or plain) as an (n, 28, 28) uint8 array."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    if len(data) < 16 or data[:4] != b"\x00\x00\x08\x03":
        sys.exit(f"fmnist-like.py: {path} is not an idx3-ubyte image file")
    n, rows, cols = (int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(3))
    body = np.frombuffer(data, dtype=np.uint8, offset=16)
    if body.size != n * rows * cols:
        sys.exit(f"fmnist-like.py: {path}: {body.size} bytes of pixels, the header says {n}x{rows}x{cols}")
    return body.reshape(n, rows, cols)


def resize_axis(img, axis, out):
    """Bilinear resampling of one axis (pixel centres aligned, edges clamped)."""
    n = img.shape[axis]
    pos = (np.arange(out) + 0.5) * n / out - 0.5
    lo = np.clip(np.floor(pos).astype(int), 0, n - 1)
    hi = np.clip(lo + 1, 0, n - 1)
    w = np.clip(pos - lo, 0.0, 1.0).astype(np.float32)
    a = np.take(img, lo, axis=axis)
    b = np.take(img, hi, axis=axis)
    shape = [1] * img.ndim
    shape[axis] = out
    w = w.reshape(shape)
    return a * (1.0 - w) + b * w


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out", help="output raw file")
    ap.add_argument("--count", type=int, default=512, help="samples to write (default 512)")
    ap.add_argument("--data", default=DEFAULT_DATA, help=f"Fashion-MNIST folder (default {DEFAULT_DATA})")
    ap.add_argument("--layout", choices=("chw", "hwc"), default="chw",
                    help="tensor layout (default chw, as ResNet50 ONNX models take it)")
    a = ap.parse_args()
    global np
    try:
        import numpy
    except ImportError:
        sys.exit("fmnist-like.py: python3-numpy is missing; run deploy/install-deps.sh "
                 "(and use the system python3)")
    np = numpy

    src = os.path.join(a.data, "t10k-images-idx3-ubyte.gz")
    if not os.path.exists(src):
        sys.exit(f"fmnist-like.py: {src} not found; install dataset-fashion-mnist (deploy/install-deps.sh)")
    imgs = read_images(src)
    if not 1 <= a.count <= len(imgs):
        sys.exit(f"fmnist-like.py: --count must be 1 to {len(imgs)}")
    x = imgs[:a.count].astype(np.float32) / 255.0
    x = resize_axis(resize_axis(x, 1, SIZE), 2, SIZE)                       # (n, 224, 224)
    chans = [(x - np.float32(m)) / np.float32(s) for m, s in zip(MEAN, STD)]
    t = np.stack(chans, axis=1 if a.layout == "chw" else 3)                 # (n, 3, 224, 224)
    q = np.clip(np.rint(t * np.float32(127.0 / 2.7)), -128, 127).astype(np.int8)
    tmp = a.out + ".tmp"
    q.tofile(tmp)
    os.replace(tmp, a.out)
    per = q[0].nbytes
    print(f"fmnist-like.py: wrote {a.count} samples of {per} bytes ({a.layout}, int8) to {a.out}")


if __name__ == "__main__":
    main()
