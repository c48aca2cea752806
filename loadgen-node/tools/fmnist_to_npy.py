#!/usr/bin/python3
"""Turns Fashion-MNIST idx files into the QSL's .npy inputs and a labels .npy.

    fmnist_to_npy.py [--data DIR] [--split test|train] [--model M.onnx | --dtype T --shape S]
                     [--scale F] [--out-dir DIR] [--count N]

Writes <out-dir>/fmnist_<split>_images.npy, one array with the sample axis first and each sample
in the model's declared input type and shape (uint8 [1, 28, 28] for the committed
sut-node/backends/onnx/models/fashion_mnist_cnn.onnx), and <out-dir>/fmnist_<split>_labels.npy
(uint8 class indices, same order). The pixels are written as they are (0..255): the model graph
does its own scaling. --scale multiplies them, for a float32 model that expects another range.

With --model the dtype and per-sample shape are read from the model's first input (needs
python3-onnx); otherwise --dtype (default uint8) and --shape (default 1,28,28) give them.
"""
import argparse
import gzip
import os
import sys

import numpy as np

DEFAULT_DATA = "/usr/share/datasets/fashion-mnist"
ONNX_TYPES = {1: "float32", 2: "uint8", 3: "int8", 6: "int32"}


def read_idx(path):
    """Reads a gzip'd (or plain) idx file of unsigned bytes into an array of its dimensions."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    if len(data) < 4 or data[0] != 0 or data[1] != 0 or data[2] != 0x08:
        sys.exit(f"{path}: not an unsigned-byte idx file")
    ndim = data[3]
    dims = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    body = np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim)
    if body.size != int(np.prod(dims)):
        sys.exit(f"{path}: {body.size} bytes of data, the header says {dims}")
    return body.reshape(dims)


def model_input(path):
    """(dtype, per-sample shape) of the model's first graph input that is not an initializer."""
    try:
        import onnx
    except ImportError:
        sys.exit("--model needs python3-onnx; give --dtype and --shape instead")
    m = onnx.load(path, load_external_data=False)
    inits = {t.name for t in m.graph.initializer}
    inp = next(i for i in m.graph.input if i.name not in inits)
    tt = inp.type.tensor_type
    if tt.elem_type not in ONNX_TYPES:
        sys.exit(f"{path}: input {inp.name} has ONNX type {tt.elem_type}, not one of "
                 f"{sorted(ONNX_TYPES.values())}")
    dims = [d.dim_value if d.HasField("dim_value") else None for d in tt.shape.dim]
    if len(dims) < 2 or any(d is None for d in dims[1:]):
        sys.exit(f"{path}: input {inp.name} has shape {dims}; expected [batch, fixed dims...]")
    return ONNX_TYPES[tt.elem_type], tuple(dims[1:])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default=DEFAULT_DATA, help="folder with the idx .gz files")
    ap.add_argument("--split", choices=["test", "train"], default="test")
    ap.add_argument("--model", help="take dtype and sample shape from this .onnx model")
    ap.add_argument("--dtype", choices=sorted(ONNX_TYPES.values()), default=None)
    ap.add_argument("--shape", default=None, help="per-sample shape, e.g. 1,28,28 or 784")
    ap.add_argument("--scale", type=float, default=1.0, help="multiply the pixels (float only)")
    ap.add_argument("--count", type=int, default=0, help="first N samples only (0: all)")
    ap.add_argument("--out-dir", default=".")
    args = ap.parse_args()

    if args.model:
        if args.dtype or args.shape:
            sys.exit("give either --model or --dtype/--shape")
        dtype, shape = model_input(args.model)
    else:
        dtype = args.dtype or "uint8"
        shape = tuple(int(s) for s in (args.shape or "1,28,28").split(","))
    if int(np.prod(shape)) != 28 * 28:
        sys.exit(f"a sample shape of {shape} does not hold 28x28 pixels")
    if args.scale != 1.0 and dtype != "float32":
        sys.exit("--scale needs --dtype float32 (integers are written as they are)")

    prefix = "train" if args.split == "train" else "t10k"
    images = read_idx(os.path.join(args.data, f"{prefix}-images-idx3-ubyte.gz"))
    labels = read_idx(os.path.join(args.data, f"{prefix}-labels-idx1-ubyte.gz"))
    if images.shape[0] != labels.shape[0] or images.shape[1:] != (28, 28):
        sys.exit(f"images {images.shape} and labels {labels.shape} do not match")
    if args.count:
        images, labels = images[:args.count], labels[:args.count]

    samples = images.reshape((images.shape[0],) + shape)
    if dtype == "float32":
        samples = samples.astype(np.float32) * np.float32(args.scale)
    elif dtype == "int8":
        sys.exit("int8 samples would need the model's own offset; not supported here")
    else:
        samples = samples.astype(dtype)
    os.makedirs(args.out_dir, exist_ok=True)
    img_path = os.path.join(args.out_dir, f"fmnist_{args.split}_images.npy")
    lab_path = os.path.join(args.out_dir, f"fmnist_{args.split}_labels.npy")
    np.save(img_path, np.ascontiguousarray(samples))
    np.save(lab_path, labels.astype(np.uint8))
    print(f"{img_path}: {samples.dtype} {list(samples.shape)} "
          f"({samples[0].nbytes} bytes per sample)")
    print(f"{lab_path}: uint8 [{labels.shape[0]}]")


if __name__ == "__main__":
    main()
