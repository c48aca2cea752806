#!/usr/bin/python3
"""3D-UNet patch inference: the onnx backend (oneDNN) against PyTorch CPU, same patch, same weights.

    bench_unet3d.py [--build build] [--patch 128] [--filters 32,64,128,256,320] [--small]
                    [--model M.onnx] [--threads 2] [--runs 3] [--torch eager,jit] [--check]

The model is bench/onnx/unet3d_onnx's (MLCommons' 3D-UNet for KiTS19 with seeded weights, batch
1, input [1, 1, N, N, N], logits [1, 3, N, N, N]), written to a temporary folder, or --model's
(the reference's own export, whose Identity nodes pass shared weights on). PyTorch runs that
same file: each ONNX node (Conv, ConvTranspose, InstanceNormalization, Relu, Concat) as the
torch.nn.functional call that nn.Conv3d, nn.ConvTranspose3d, nn.InstanceNorm3d (affine) and
torch.cat make in the reference's Unet3D, on the weights read back from the file, under
torch.no_grad(), with torch.set_num_threads(--threads). Modes:
  eager     NCDHW tensors, as the reference's pytorch_SUT runs the model
  eager_cl  the same in channels_last_3d memory format (input and weights)
  jit       torch.jit.trace + freeze + optimize_for_inference of that graph (NCDHW)
  jit_cl    the same in channels_last_3d
The backend runs through the plugin ABI in onnx_bench (a fresh process per run: the plans are
built, one patch runs untimed, then one patch is timed). The contenders take turns run by run;
each figure is the median of --runs. Prints seconds per patch, patches/s and the ratio
onnx / PyTorch (above 1: the backend is faster) against eager and the best mode.

--check also runs the patch through the backend (tests/unit/onnx/npy_infer, raw logits) and
prints the largest difference from PyTorch's logits and the share of voxels whose argmax agrees.
Nothing is asserted: figures on a shared machine are for reading, not for tests.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnx
from onnx import helper, numpy_helper

try:
    import torch
    import torch.nn.functional as F
except ImportError as e:
    raise SystemExit("bench_unet3d: PyTorch is missing (%s): apt install python3-torch" % e)


class TorchGraph:
    """The ONNX graph as torch.nn.functional calls on the file's weights."""

    def __init__(self, path, channels_last):
        m = onnx.load(path)
        fmt = torch.channels_last_3d if channels_last else torch.contiguous_format
        self.consts = {}
        for t in m.graph.initializer:
            a = torch.from_numpy(numpy_helper.to_array(t).copy())
            self.consts[t.name] = a.contiguous(memory_format=fmt) if a.dim() == 5 else a
        self.nodes = []
        for n in m.graph.node:
            attrs = {a.name: helper.get_attribute_value(a) for a in n.attribute}
            self.nodes.append((n.op_type, list(n.input), n.output[0], attrs))
        self.input = m.graph.input[0].name
        self.output = m.graph.output[0].name
        self.fmt = fmt

    def __call__(self, x):
        v = dict(self.consts)
        v[self.input] = x.contiguous(memory_format=self.fmt)
        for op, ins, out, a in self.nodes:
            t = [v[i] for i in ins]
            if op == "Conv":
                p = a.get("pads", [0] * 6)
                v[out] = F.conv3d(t[0], t[1], t[2] if len(t) > 2 else None,
                                  stride=a.get("strides", 1), padding=tuple(p[:3]))
            elif op == "ConvTranspose":
                v[out] = F.conv_transpose3d(t[0], t[1], t[2] if len(t) > 2 else None,
                                            stride=a.get("strides", 1))
            elif op == "InstanceNormalization":
                v[out] = F.instance_norm(t[0], weight=t[1], bias=t[2], eps=a.get("epsilon", 1e-5))
            elif op == "Relu":
                v[out] = F.relu(t[0])
            elif op == "Concat":
                v[out] = torch.cat(t, dim=a["axis"])
            elif op == "Identity":  # torch.onnx.export passes shared weights on so
                v[out] = t[0]
            else:
                raise SystemExit("bench_unet3d: %s is not in the 3D-UNet" % op)
        return v[self.output]


class TorchModule(torch.nn.Module):
    """The same graph as a module, for torch.jit: weights as buffers, forward() the node loop."""

    def __init__(self, graph):
        super().__init__()
        self.graph = graph
        self.names = {}
        for i, (k, t) in enumerate(graph.consts.items()):
            self.register_buffer("w%d" % i, t)
            self.names[k] = "w%d" % i

    def forward(self, x):
        self.graph.consts = {k: getattr(self, b) for k, b in self.names.items()}
        return self.graph(x)


def jit_graph(graph, x):
    """torch.jit.trace + freeze + optimize_for_inference: PyTorch's fastest CPU path without
    extra packages (prepacked oneDNN weights, fused ops)."""
    with torch.inference_mode(False), torch.no_grad():
        m = torch.jit.trace(TorchModule(graph).eval(), x)
        m = torch.jit.optimize_for_inference(torch.jit.freeze(m))
    return lambda t: m(t.contiguous(memory_format=graph.fmt))


def run_backend(args, model):
    """Seconds for one patch through the backend, in a fresh onnx_bench process."""
    cmd = [os.path.join(args.build, "bench", "onnx", "onnx_bench"), "--model", model,
           "--batch", "1", "--threads", str(args.threads), "--runs", "1",
           "--seconds", "0.001", "--warmup", "0.001"]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    m = re.search(r"RESULT batch=1 samples_per_s=([0-9.eE+-]+)", out)
    if not m:
        raise SystemExit("bench_unet3d: no RESULT line from onnx_bench:\n" + out)
    return 1.0 / float(m.group(1))


def run_torch(graph, x):
    with torch.no_grad():
        t0 = time.perf_counter()
        y = graph(x)
        return time.perf_counter() - t0, y


def check(args, model, x, y_torch, tmp):
    npy = os.path.join(tmp, "patch.npy")
    log = os.path.join(tmp, "log.json")
    np.save(npy, x.numpy())
    subprocess.run([os.path.join(args.build, "tests", "unit", "onnx", "npy_infer"), "--model",
                    model, "--npy", npy, "--out", log, "--batch", "1"], check=True)
    with open(log) as f:
        data = bytes.fromhex(json.load(f)[0]["data"])
    y = np.frombuffer(data, dtype="<f4").reshape(y_torch.shape)
    yt = y_torch.contiguous().numpy()
    diff = float(np.max(np.abs(y - yt)))
    agree = float(np.mean(np.argmax(y, axis=1) == np.argmax(yt, axis=1)))
    print("check: largest |onnx - torch| logit difference %.3g (logits up to %.3g); argmax "
          "agrees on %.4f%% of voxels" % (diff, float(np.max(np.abs(yt))), 100 * agree))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--small", action="store_true", help="unet3d_onnx --small")
    ap.add_argument("--model", help="an existing 3D-UNet .onnx (e.g. the reference's export) "
                    "instead of unet3d_onnx's")
    ap.add_argument("--patch", type=int)
    ap.add_argument("--filters")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--torch", default="eager,jit")
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    modes = args.torch.split(",")
    with tempfile.TemporaryDirectory(prefix="bench_unet3d.") as tmp:
        model = args.model or os.path.join(tmp, "unet3d.onnx")
        gen = [os.path.join(args.build, "bench", "onnx", "unet3d_onnx"), model]
        if args.small:
            gen.append("--small")
        if args.patch:
            gen += ["--patch", str(args.patch)]
        if args.filters:
            gen += ["--filters", args.filters]
        if args.model:
            print("%s: %d bytes" % (model, os.path.getsize(model)))
        else:
            print(subprocess.run(gen, check=True, capture_output=True, text=True).stdout.strip())
        n = onnx.load(model).graph.input[0].type.tensor_type.shape.dim[2].dim_value
        x = torch.from_numpy(
            np.random.default_rng(37).normal(0, 1, size=(1, 1, n, n, n)).astype(np.float32))
        graphs = {m: TorchGraph(model, m.endswith("_cl")) for m in modes}
        for m in modes:
            if m.startswith("jit"):
                graphs[m] = jit_graph(graphs[m], x)
        for m in modes:  # warm-up: first calls allocate and pick kernels
            run_torch(graphs[m], x)
        print("load average before: %s" % " ".join(open("/proc/loadavg").read().split()[:3]))
        times = {m: [] for m in ["onnx"] + modes}
        y_torch = None
        for r in range(args.runs):
            times["onnx"].append(run_backend(args, model))
            for m in modes:
                t, y = run_torch(graphs[m], x)
                times[m].append(t)
                if m == "eager":
                    y_torch = y
            print("run %d: %s" % (r + 1, ", ".join("%s %.3f s" % (k, v[-1])
                                                   for k, v in times.items())), flush=True)
        print("load average after: %s" % " ".join(open("/proc/loadavg").read().split()[:3]))
        med = {k: statistics.median(v) for k, v in times.items()}
        best = min(modes, key=lambda m: med[m])
        print("\n%-10s %12s %10s" % ("contender", "s/patch", "patches/s"))
        for k in ["onnx"] + modes:
            print("%-10s %12.3f %10.3f" % (k, med[k], 1.0 / med[k]))
        line = "RESULT patch=%d threads=%d runs=%d onnx_s=%.3f" % (n, args.threads, args.runs,
                                                                  med["onnx"])
        for m in modes:
            line += " %s_s=%.3f" % (m, med[m])
        if "eager" in med:
            line += " ratio_vs_eager=%.2f" % (med["eager"] / med["onnx"])
        line += " ratio_vs_best=%.2f (best: %s)" % (med[best] / med["onnx"], best)
        print(line)
        if args.check:
            if y_torch is None:
                y_torch = run_torch(graphs[modes[0]], x)[1]
            check(args, model, x, y_torch, tmp)
    return 0


if __name__ == "__main__":
    sys.exit(main())
