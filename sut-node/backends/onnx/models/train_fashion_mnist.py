#!/usr/bin/python3
"""Trains the small Fashion-MNIST CNN that the onnx backend's tests and benchmark run, exports it
to ONNX and records its PyTorch FP32 test accuracy.

    /usr/bin/python3 train_fashion_mnist.py [--data DIR] [--out DIR] [--epochs N] [--threads N]

Input: Debian's dataset-fashion-mnist idx files (/usr/share/datasets/fashion-mnist/*.gz).
Output, next to this script by default:
  fashion_mnist_cnn.onnx  uint8 input [batch, 1, 28, 28] (raw pixels, as the QSL sends them),
                          float32 logits [batch, 10]; opset 13; the graph scales the pixels itself
                          (Cast, Div by 255) so that samples travel as 784 bytes, not 3136.
  fashion_mnist_cnn.json  the PyTorch FP32 top-1 accuracy on the 10 000 test images, which the
                          backend's accuracy test compares against.

Runs on Debian's python3-torch (CPU) in a few minutes on two cores. Training is seeded, but the
exact accuracy still depends on the CPU's floating-point reduction order.
"""
import argparse
import gzip
import json
import os
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_DATA = "/usr/share/datasets/fashion-mnist"
MODEL_NAME = "fashion_mnist_cnn"
OPSET = 13
# What the onnx backend implements (sut-node/backends/onnx/README.md); the export is checked
# against it so that a change of the network cannot silently produce a model the backend rejects.
SUPPORTED_OPS = {
    "Conv", "Relu", "MaxPool", "AveragePool", "GlobalAveragePool", "BatchNormalization", "Add",
    "Sub", "Mul", "Div", "Gemm", "MatMul", "Flatten", "Reshape", "Softmax", "Identity",
    "Constant", "Cast",
}


def read_idx(path):
    """Reads a gzip'd idx file (images: uint8 [n, rows, cols]; labels: uint8 [n])."""
    with gzip.open(path, "rb") as f:
        data = f.read()
    magic = int.from_bytes(data[0:4], "big")
    ndim = magic & 0xFF
    if magic >> 8 != 0x08:
        sys.exit(f"{path}: not an unsigned-byte idx file (magic 0x{magic:08x})")
    dims = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    arr = np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).copy()
    if arr.size != int(np.prod(dims)):
        sys.exit(f"{path}: {arr.size} bytes of data, header says {dims}")
    return arr.reshape(dims)


def load_split(data_dir, split):
    prefix = "train" if split == "train" else "t10k"
    images = read_idx(os.path.join(data_dir, f"{prefix}-images-idx3-ubyte.gz"))
    labels = read_idx(os.path.join(data_dir, f"{prefix}-labels-idx1-ubyte.gz"))
    return images[:, None, :, :], labels.astype(np.int64)


class FashionCNN(nn.Module):
    """Three 3x3 conv blocks (conv, batch norm, ReLU; max-pool after the last two), then two fully
    connected layers. About 0.23 M parameters; 91-93 % test accuracy after a few epochs."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(16)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(32)
        self.conv3 = nn.Conv2d(32, 64, 3, padding=1, bias=False)
        self.bn3 = nn.BatchNorm2d(64)
        self.flatten = nn.Flatten()
        self.fc1 = nn.Linear(64 * 7 * 7, 64)
        self.drop = nn.Dropout(0.3)
        self.fc2 = nn.Linear(64, 10)

    def forward(self, x):
        # uint8 pixels in, as the QSL stores them; the scaling is part of the model.
        x = x.float() / 255.0
        x = F.relu(self.bn1(self.conv1(x)))
        x = F.max_pool2d(F.relu(self.bn2(self.conv2(x))), 2)
        x = F.max_pool2d(F.relu(self.bn3(self.conv3(x))), 2)
        x = F.relu(self.fc1(self.flatten(x)))
        return self.fc2(self.drop(x))


def evaluate(model, images, labels, batch=500):
    model.eval()
    good = 0
    with torch.no_grad():
        for i in range(0, len(images), batch):
            x = torch.from_numpy(images[i:i + batch])
            good += int((model(x).argmax(1).numpy() == labels[i:i + batch]).sum())
    return good


def train(model, images, labels, epochs, batch=128, lr=2e-3, seed=0):
    gen = torch.Generator().manual_seed(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=1e-4)
    steps = epochs * ((len(images) + batch - 1) // batch)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=lr, total_steps=steps)
    x_all, y_all = torch.from_numpy(images), torch.from_numpy(labels)
    for epoch in range(epochs):
        model.train()
        t0 = time.time()
        perm = torch.randperm(len(images), generator=gen)
        total = 0.0
        for i in range(0, len(images), batch):
            idx = perm[i:i + batch]
            x, y = x_all[idx], y_all[idx]
            # Random horizontal flips: clothes are left-right symmetric, so this is free data.
            flip = torch.rand(len(idx), generator=gen) < 0.5
            x = torch.where(flip[:, None, None, None], x.flip(3), x)
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
            total += float(loss) * len(idx)
        print(f"epoch {epoch + 1}/{epochs}: loss {total / len(images):.4f} "
              f"({time.time() - t0:.0f} s)", flush=True)


def export(model, path):
    model.eval()
    dummy = torch.zeros(1, 1, 28, 28, dtype=torch.uint8)
    # PRESERVE keeps BatchNormalization as its own node (EVAL would fold it into the Conv in the
    # exporter): the backend folds it at load, and the initializers keep the state_dict names,
    # which lets bench/onnx/bench_torch.py load the same weights back into FashionCNN.
    torch.onnx.export(model, dummy, path, opset_version=OPSET, input_names=["input"],
                      output_names=["logits"], dynamic_axes={"input": {0: "batch"},
                                                             "logits": {0: "batch"}},
                      training=torch.onnx.TrainingMode.PRESERVE, do_constant_folding=False)


def check_ops(path):
    import onnx
    m = onnx.load(path)
    onnx.checker.check_model(m)
    ops = sorted({n.op_type for n in m.graph.node})
    bad = [op for op in ops if op not in SUPPORTED_OPS]
    if bad:
        sys.exit(f"{path}: the exported graph uses {bad}, which the onnx backend does not support")
    return ops


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default=DEFAULT_DATA, help="folder with the idx .gz files")
    ap.add_argument("--out", default=HERE, help="where to write the .onnx and .json")
    ap.add_argument("--epochs", type=int, default=6)
    ap.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    train_x, train_y = load_split(args.data, "train")
    test_x, test_y = load_split(args.data, "test")
    model = FashionCNN()
    t0 = time.time()
    train(model, train_x, train_y, args.epochs, seed=args.seed)
    train_s = time.time() - t0
    good = evaluate(model, test_x, test_y)
    acc = 100.0 * good / len(test_y)
    print(f"PyTorch FP32 test accuracy: accuracy={acc:.3f}%, good={good}, total={len(test_y)}")

    onnx_path = os.path.join(args.out, MODEL_NAME + ".onnx")
    export(model, onnx_path)
    ops = check_ops(onnx_path)
    print(f"exported {onnx_path} ({os.path.getsize(onnx_path)} bytes), ops: {' '.join(ops)}")
    record = {
        "model": MODEL_NAME + ".onnx",
        "dataset": "Fashion-MNIST test set (t10k, 10000 images)",
        "input": {"name": "input", "dtype": "uint8", "shape": ["batch", 1, 28, 28]},
        "output": {"name": "logits", "dtype": "float32", "shape": ["batch", 10]},
        "opset": OPSET,
        "ops": ops,
        "pytorch_fp32_top1": round(acc, 3),
        "good": good,
        "total": len(test_y),
        "epochs": args.epochs,
        "seed": args.seed,
        "train_seconds": round(train_s),
        "threads": args.threads,
        "torch": torch.__version__,
    }
    with open(os.path.join(args.out, MODEL_NAME + ".json"), "w") as f:
        json.dump(record, f, indent=2)
        f.write("\n")


if __name__ == "__main__":
    main()
