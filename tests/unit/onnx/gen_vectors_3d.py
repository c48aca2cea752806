#!/usr/bin/python3
"""Writes the onnx backend's 3-D conformance vectors in the layout of ONNX's own node tests.

    gen_vectors_3d.py OUTDIR [UNET3D_ONNX]

Debian's libonnx-testdata has no 5-D vectors for Conv, ConvTranspose, InstanceNormalization,
LeakyRelu or Concat, and python3-onnx 1.12 has no reference evaluator, so the expected outputs
are computed here in float64 with numpy, straight from the ONNX operator definitions (a sum over
kernel offsets for Conv and ConvTranspose, population statistics for InstanceNormalization). The
models are written with onnx.helper. Each case is OUTDIR/<name>/model.onnx and
test_data_set_0/{input,output}_N.pb, as test_node.c reads them (its node_3d table lists the
names). With UNET3D_ONNX (bench/onnx/unet3d_onnx), the case unet3d_small is that tool's --small
model (32^3 patch) with its expected logits from the same numpy operators, node by node.
"""
import os
import subprocess
import sys
import zlib

import numpy as np
import onnx
from onnx import helper, numpy_helper, TensorProto


def conv_ref(x, w, b=None, strides=None, pads=None, dil=None, group=1):
    ns = x.ndim - 2
    strides = strides or [1] * ns
    pads = pads or [0] * (2 * ns)
    dil = dil or [1] * ns
    ks = w.shape[2:]
    xp = np.pad(x.astype(np.float64),
                [(0, 0), (0, 0)] + [(pads[i], pads[ns + i]) for i in range(ns)])
    osp = [(xp.shape[2 + i] - ((ks[i] - 1) * dil[i] + 1)) // strides[i] + 1 for i in range(ns)]
    m, cg = w.shape[0], x.shape[1] // group
    mg = m // group
    y = np.zeros((x.shape[0], m) + tuple(osp))
    for k in np.ndindex(*ks):
        sl = tuple(slice(k[i] * dil[i], k[i] * dil[i] + (osp[i] - 1) * strides[i] + 1, strides[i])
                   for i in range(ns))
        patch = xp[(slice(None), slice(None)) + sl]
        for g in range(group):
            wk = w[(slice(g * mg, (g + 1) * mg), slice(None)) + k].astype(np.float64)
            y[:, g * mg:(g + 1) * mg] += np.einsum("mc,nc...->nm...", wk,
                                                   patch[:, g * cg:(g + 1) * cg])
    if b is not None:
        y += b.reshape((1, m) + (1,) * ns)
    return y


def convtranspose_ref(x, w, b=None, strides=None, pads=None, dil=None, group=1, out_pad=None):
    ns = x.ndim - 2
    strides = strides or [1] * ns
    pads = pads or [0] * (2 * ns)
    dil = dil or [1] * ns
    out_pad = out_pad or [0] * ns
    ks, isp = w.shape[2:], x.shape[2:]
    cg, mg = x.shape[1] // group, w.shape[1]
    full = [strides[i] * (isp[i] - 1) + out_pad[i] + (ks[i] - 1) * dil[i] + 1 for i in range(ns)]
    y = np.zeros((x.shape[0], mg * group) + tuple(full))
    for k in np.ndindex(*ks):
        sl = tuple(slice(k[i] * dil[i], k[i] * dil[i] + (isp[i] - 1) * strides[i] + 1, strides[i])
                   for i in range(ns))
        for g in range(group):
            wk = w[(slice(g * cg, (g + 1) * cg), slice(None)) + k].astype(np.float64)
            y[(slice(None), slice(g * mg, (g + 1) * mg)) + sl] += np.einsum(
                "cm,nc...->nm...", wk, x[:, g * cg:(g + 1) * cg].astype(np.float64))
    y = y[(slice(None), slice(None)) +
          tuple(slice(pads[i], full[i] - pads[ns + i]) for i in range(ns))]
    if b is not None:
        y = y + b.reshape((1, -1) + (1,) * ns)
    return y


def instancenorm_ref(x, s, b, eps=1e-5):
    axes = tuple(range(2, x.ndim))
    x = x.astype(np.float64)
    mean = x.mean(axis=axes, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=axes, keepdims=True)
    shape = (1, -1) + (1,) * (x.ndim - 2)
    return (x - mean) / np.sqrt(var + eps) * s.reshape(shape) + b.reshape(shape)


def leakyrelu_ref(x, alpha=0.01):
    return np.where(x >= 0, x, alpha * x)


def run_graph(model, feeds):
    """The model's output, evaluated node by node with the references above."""
    vals = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    vals.update(feeds)
    for n in model.graph.node:
        a = {at.name: helper.get_attribute_value(at) for at in n.attribute}
        ins = [vals[i] if i else None for i in n.input]
        if n.op_type == "Conv":
            y = conv_ref(ins[0], ins[1], ins[2] if len(ins) > 2 else None, a.get("strides"),
                         a.get("pads"), a.get("dilations"), a.get("group", 1))
        elif n.op_type == "ConvTranspose":
            y = convtranspose_ref(ins[0], ins[1], ins[2] if len(ins) > 2 else None,
                                  a.get("strides"), a.get("pads"), a.get("dilations"),
                                  a.get("group", 1), a.get("output_padding"))
        elif n.op_type == "InstanceNormalization":
            y = instancenorm_ref(ins[0], ins[1], ins[2], a.get("epsilon", 1e-5))
        elif n.op_type == "Relu":
            y = np.maximum(ins[0], 0)
        elif n.op_type == "LeakyRelu":
            y = leakyrelu_ref(ins[0], a.get("alpha", 0.01))
        elif n.op_type == "Concat":
            y = np.concatenate(ins, axis=a["axis"])
        elif n.op_type == "Identity":
            y = ins[0]
        else:
            raise SystemExit("gen_vectors_3d: no reference for %s" % n.op_type)
        vals[n.output[0]] = y
    return [vals[o.name] for o in model.graph.output]


class Case:
    """One model: inputs (runtime, with data), initializers, nodes; output computed by run_graph."""

    def __init__(self, name, opset=13):
        self.name, self.opset = name, opset
        self.inputs, self.inits, self.nodes = [], [], []
        self.rng = np.random.default_rng(zlib.crc32(name.encode()))

    def rand(self, *shape, lo=-1.0, hi=1.0):
        return self.rng.uniform(lo, hi, size=shape).astype(np.float32)

    def input(self, name, data):
        self.inputs.append((name, data))
        return name

    def init(self, name, data):
        self.inits.append(numpy_helper.from_array(data, name))
        return name

    def node(self, op, ins, out, **attrs):
        self.nodes.append(helper.make_node(op, ins, [out], name=out, **attrs))
        return out

    def write(self, root, output="y"):
        g_in = [helper.make_tensor_value_info(n, TensorProto.FLOAT, d.shape)
                for n, d in self.inputs]
        draft = helper.make_model(
            helper.make_graph(self.nodes, self.name, g_in,
                              [helper.make_tensor_value_info(output, TensorProto.FLOAT, None)],
                              self.inits),
            opset_imports=[helper.make_opsetid("", self.opset)])
        ys = run_graph(draft, {n: d for n, d in self.inputs})
        y = ys[0].astype(np.float32)
        draft.graph.output[0].CopyFrom(
            helper.make_tensor_value_info(output, TensorProto.FLOAT, y.shape))
        onnx.checker.check_model(draft)
        write_case(root, self.name, draft, [d for _, d in self.inputs], [y])


def write_case(root, name, model, inputs, outputs):
    d = os.path.join(root, name, "test_data_set_0")
    os.makedirs(d, exist_ok=True)
    onnx.save(model, os.path.join(root, name, "model.onnx"))
    for i, a in enumerate(inputs):
        with open(os.path.join(d, "input_%d.pb" % i), "wb") as f:
            f.write(numpy_helper.from_array(a).SerializeToString())
    for i, a in enumerate(outputs):
        with open(os.path.join(d, "output_%d.pb" % i), "wb") as f:
            f.write(numpy_helper.from_array(a.astype(np.float32)).SerializeToString())


def cases():
    c = Case("conv3d_bias_pads")
    c.node("Conv", [c.input("x", c.rand(1, 3, 5, 6, 7)), c.init("w", c.rand(4, 3, 3, 3, 3)),
                    c.init("b", c.rand(4))], "y", kernel_shape=[3, 3, 3], pads=[1] * 6)
    yield c
    c = Case("conv3d_stride2")
    c.node("Conv", [c.input("x", c.rand(1, 4, 7, 6, 5)), c.init("w", c.rand(8, 4, 3, 3, 3))],
           "y", strides=[2, 2, 2], pads=[1] * 6)
    yield c
    c = Case("conv3d_group_dilation_asym_pads")
    c.node("Conv", [c.input("x", c.rand(1, 4, 6, 7, 8)), c.init("w", c.rand(6, 2, 3, 2, 3))],
           "y", group=2, dilations=[2, 1, 1], strides=[1, 2, 1], pads=[1, 0, 2, 0, 1, 1])
    yield c
    c = Case("convtranspose3d_stride2_bias")  # the U-Net's upsampling
    c.node("ConvTranspose", [c.input("x", c.rand(1, 8, 3, 4, 5)),
                             c.init("w", c.rand(8, 4, 2, 2, 2)), c.init("b", c.rand(4))],
           "y", kernel_shape=[2, 2, 2], strides=[2, 2, 2])
    yield c
    c = Case("convtranspose3d_pads_output_padding_group")
    c.node("ConvTranspose", [c.input("x", c.rand(1, 4, 3, 3, 4)),
                             c.init("w", c.rand(4, 3, 3, 3, 3))],
           "y", group=2, strides=[2, 2, 2], pads=[1, 1, 0, 1, 0, 1], output_padding=[1, 0, 1])
    yield c
    c = Case("instancenorm3d")
    c.node("InstanceNormalization", [c.input("x", c.rand(1, 5, 3, 4, 6, lo=-2, hi=3)),
                                     c.init("s", c.rand(5)), c.init("b", c.rand(5))],
           "y", epsilon=1e-3)
    yield c
    # scale and bias as runtime inputs: one whole tensor of two samples per batch
    c = Case("instancenorm3d_runtime_scale")
    c.node("InstanceNormalization", [c.input("x", c.rand(2, 3, 2, 3, 4)),
                                     c.input("s", c.rand(3)), c.input("b", c.rand(3))], "y")
    yield c
    c = Case("leakyrelu3d")
    c.node("LeakyRelu", [c.input("x", c.rand(1, 3, 4, 5, 6))], "y", alpha=0.1)
    yield c
    c = Case("concat3d_axis1")
    c.node("Concat", [c.input("a", c.rand(1, 3, 2, 3, 4)), c.input("b", c.rand(1, 5, 2, 3, 4))],
           "y", axis=1)
    yield c
    c = Case("concat3d_axis_last")
    c.node("Concat", [c.input("a", c.rand(1, 3, 2, 3, 4)), c.input("b", c.rand(1, 3, 2, 3, 2)),
                      c.input("c", c.rand(1, 3, 2, 3, 1))], "y", axis=-1)
    yield c
    # Conv -> InstanceNormalization -> Relu: channel-blocked layouts (32 channels) and the ReLU
    # fused into the normalisation; 20 channels do not fill the blocks (a plain fallback).
    for ch in (32, 20):
        c = Case("conv_instancenorm_relu3d_c%d" % ch)
        t = c.node("Conv", [c.input("x", c.rand(1, 2, 6, 6, 6)),
                            c.init("w", c.rand(ch, 2, 3, 3, 3))], "t", pads=[1] * 6)
        t = c.node("InstanceNormalization", [t, c.init("s", c.rand(ch, lo=0.5, hi=1.5)),
                                             c.init("b", c.rand(ch))], "n")
        c.node("Relu", [t], "y")
        yield c
    # an upsampling block: ConvTranspose, Concat with the skip, Conv, InstanceNormalization,
    # LeakyRelu (the training repo's other activation)
    c = Case("unet_up_block3d")
    u = c.node("ConvTranspose", [c.input("x", c.rand(1, 16, 2, 2, 2)),
                                 c.init("wu", c.rand(16, 16, 2, 2, 2, lo=-0.3, hi=0.3)),
                                 c.init("bu", c.rand(16))], "u", strides=[2, 2, 2])
    t = c.node("Concat", [u, c.input("skip", c.rand(1, 16, 4, 4, 4))], "cat", axis=1)
    t = c.node("Conv", [t, c.init("w", c.rand(16, 32, 3, 3, 3, lo=-0.2, hi=0.2))], "t",
               pads=[1] * 6)
    t = c.node("InstanceNormalization", [t, c.init("s", c.rand(16)), c.init("b", c.rand(16))],
               "n")
    c.node("LeakyRelu", [t], "y")
    yield c


def main():
    if len(sys.argv) not in (2, 3):
        raise SystemExit("usage: gen_vectors_3d.py OUTDIR [UNET3D_ONNX]")
    root = sys.argv[1]
    n = 0
    for c in cases():
        c.write(root)
        n += 1
    if len(sys.argv) == 3:
        d = os.path.join(root, "unet3d_small")
        os.makedirs(d, exist_ok=True)
        subprocess.run([sys.argv[2], os.path.join(d, "model.onnx"), "--small"], check=True,
                       stdout=subprocess.DEVNULL)
        model = onnx.load(os.path.join(d, "model.onnx"))
        x = np.random.default_rng(37).normal(0, 1, size=(1, 1, 32, 32, 32)).astype(np.float32)
        y = run_graph(model, {"input": x})[0]
        write_case(root, "unet3d_small", model, [x], [y])
        n += 1
    print("gen_vectors_3d: %d cases in %s" % (n, root))


if __name__ == "__main__":
    main()
