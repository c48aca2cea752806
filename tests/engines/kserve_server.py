#!/usr/bin/python3
"""A real KServe v2 (Open Inference Protocol) REST server for the tests, FastAPI + uvicorn,
serving an ONNX model run with PyTorch from the model's own weights (python3-onnx reads the
file; the graph's operators are executed one by one: Cast, Constant, Div, Conv,
BatchNormalization, Relu, MaxPool, Flatten, Gemm, which is what the committed Fashion-MNIST CNN
uses; any other operator is refused at start-up).

    kserve_server.py --model FILE.onnx [--name NAME] [--host 127.0.0.1] [--port 0]
                     [--port-file F]

    GET  /v2/health/ready, /v2/models/NAME          readiness, model metadata
    POST /v2/models/NAME[/versions/V]/infer         inference: JSON ("data" lists) or the binary
                                                    tensor extension (Inference-Header-Content-
                                                    Length, "binary_data_size", "binary_data")
"""
import argparse
import asyncio
import json
import sys

import numpy as np
import onnx
import torch
import torch.nn.functional as F
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from onnx import numpy_helper

import enginetest as et  # this folder's, on sys.path as the script's own

DTYPES = {"UINT8": np.uint8, "INT8": np.int8, "INT32": np.int32, "INT64": np.int64,
          "FP32": np.float32, "FP64": np.float64, "FP16": np.float16}
ONNX_TO_V2 = {onnx.TensorProto.UINT8: "UINT8", onnx.TensorProto.FLOAT: "FP32",
              onnx.TensorProto.INT32: "INT32", onnx.TensorProto.INT64: "INT64",
              onnx.TensorProto.INT8: "INT8"}
TORCH_OF_ONNX = {onnx.TensorProto.FLOAT: torch.float32, onnx.TensorProto.INT64: torch.int64,
                 onnx.TensorProto.INT32: torch.int32, onnx.TensorProto.UINT8: torch.uint8}


class OnnxModel:
    SUPPORTED = {"Cast", "Constant", "Div", "Conv", "BatchNormalization", "Relu", "MaxPool",
                 "Flatten", "Gemm"}

    def __init__(self, path):
        m = onnx.load(path)
        g = m.graph
        bad = {n.op_type for n in g.node} - self.SUPPORTED
        if bad:
            sys.exit(f"{path}: operators {sorted(bad)} are not implemented by this test server")
        self.weights = {t.name: torch.from_numpy(numpy_helper.to_array(t).copy())
                        for t in g.initializer}
        inits = set(self.weights)
        ins = [i for i in g.input if i.name not in inits]
        self.input = ins[0]
        self.input_dtype = ONNX_TO_V2[self.input.type.tensor_type.elem_type]
        self.input_shape = [d.dim_value if d.dim_value else -1
                            for d in self.input.type.tensor_type.shape.dim]
        self.output = g.output[0]
        self.output_dtype = ONNX_TO_V2[self.output.type.tensor_type.elem_type]
        self.nodes = list(g.node)

    @torch.no_grad()
    def run(self, x):
        env = dict(self.weights)
        env[self.input.name] = torch.from_numpy(x)
        for n in self.nodes:
            a = {at.name: onnx.helper.get_attribute_value(at) for at in n.attribute}
            i = [env[k] for k in n.input if k]
            op = n.op_type
            if op == "Cast":
                y = i[0].to(TORCH_OF_ONNX[a["to"]])
            elif op == "Constant":
                y = torch.from_numpy(numpy_helper.to_array(a["value"]).copy())
            elif op == "Div":
                y = i[0] / i[1]
            elif op == "Conv":
                p = a.get("pads", [0, 0, 0, 0])
                if p[0] != p[2] or p[1] != p[3]:
                    raise ValueError("asymmetric Conv padding")
                y = F.conv2d(i[0], i[1], i[2] if len(i) > 2 else None, a.get("strides", [1, 1]),
                             (p[0], p[1]), a.get("dilations", [1, 1]), a.get("group", 1))
            elif op == "BatchNormalization":
                y = F.batch_norm(i[0], i[3], i[4], i[1], i[2], False, 0.0,
                                 a.get("epsilon", 1e-5))
            elif op == "Relu":
                y = torch.relu(i[0])
            elif op == "MaxPool":
                p = a.get("pads", [0, 0, 0, 0])
                y = F.max_pool2d(i[0], a["kernel_shape"], a.get("strides"), (p[0], p[1]),
                                 ceil_mode=bool(a.get("ceil_mode", 0)))
            elif op == "Flatten":
                y = torch.flatten(i[0], a.get("axis", 1))
            elif op == "Gemm":
                A = i[0].t() if a.get("transA", 0) else i[0]
                B = i[1].t() if a.get("transB", 0) else i[1]
                y = a.get("alpha", 1.0) * (A @ B)
                if len(i) > 2:
                    y = y + a.get("beta", 1.0) * i[2]
            env[n.output[0]] = y
        return env[self.output.name].numpy()


def make_app(model, name):
    app = FastAPI()
    lock = asyncio.Lock()

    def err(status, msg):
        return JSONResponse({"error": msg}, status_code=status)

    @app.get("/v2/health/ready")
    async def ready():
        return {}

    @app.get("/v2/models/{mname}")
    async def meta(mname: str):
        if mname != name:
            return err(404, f"unknown model '{mname}'")
        return {"name": name, "platform": "onnx", "versions": ["1"],
                "inputs": [{"name": model.input.name, "datatype": model.input_dtype,
                            "shape": model.input_shape}],
                "outputs": [{"name": model.output.name, "datatype": model.output_dtype,
                             "shape": [-1, -1]}]}

    async def infer(mname, req):
        if mname != name:
            return err(404, f"unknown model '{mname}'")
        body = await req.body()
        hl = req.headers.get("inference-header-content-length")
        try:
            if hl is not None:
                hl = int(hl)
                if hl < 0 or hl > len(body):
                    raise ValueError(f"Inference-Header-Content-Length {hl} for a {len(body)}-"
                                     f"byte body")
            head = json.loads(body[:hl] if hl is not None else body)
            binary = memoryview(body)[hl:] if hl is not None else memoryview(b"")
            inputs = head.get("inputs")
            if not isinstance(inputs, list) or len(inputs) != 1:
                raise ValueError("exactly one input tensor is expected")
            t = inputs[0]
            if t.get("name") != model.input.name:
                raise ValueError(f"input '{t.get('name')}' is not the model's "
                                 f"'{model.input.name}'")
            if t.get("datatype") != model.input_dtype:
                raise ValueError(f"input datatype {t.get('datatype')} is not "
                                 f"{model.input_dtype}")
            shape = [int(d) for d in t["shape"]]
            dt = np.dtype(DTYPES[t["datatype"]])
            count = int(np.prod(shape))
            size = (t.get("parameters") or {}).get("binary_data_size")
            if size is not None:
                if size != count * dt.itemsize or size > len(binary):
                    raise ValueError(f"binary_data_size {size} for shape {shape} "
                                     f"({count * dt.itemsize} bytes, {len(binary)} sent)")
                x = np.frombuffer(binary[:size], dtype=dt).reshape(shape)
            else:
                x = np.asarray(t["data"], dtype=dt).reshape(shape)
        except (ValueError, KeyError, TypeError) as e:
            return err(400, str(e))
        async with lock:
            y = await asyncio.get_running_loop().run_in_executor(None, model.run, x.copy())
        want_binary = any((o.get("parameters") or {}).get("binary_data")
                          for o in head.get("outputs") or [] if o.get("name") == model.output.name)
        out = {"name": model.output.name, "datatype": model.output_dtype,
               "shape": list(y.shape)}
        resp = {"model_name": name, "model_version": "1", "outputs": [out]}
        if not want_binary:
            out["data"] = y.reshape(-1).tolist()
            return resp
        raw = np.ascontiguousarray(y, dtype=np.float32).tobytes()
        out["parameters"] = {"binary_data_size": len(raw)}
        js = json.dumps(resp).encode()
        return Response(js + raw, media_type="application/octet-stream",
                        headers={"Inference-Header-Content-Length": str(len(js))})

    @app.post("/v2/models/{mname}/infer")
    async def infer_latest(mname: str, req: Request):
        return await infer(mname, req)

    @app.post("/v2/models/{mname}/versions/{ver}/infer")
    async def infer_version(mname: str, ver: str, req: Request):
        if ver != "1":
            return err(404, f"model '{mname}' has no version '{ver}'")
        return await infer(mname, req)

    return app


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--name", default="fashion_mnist")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--port-file")
    args = ap.parse_args()
    torch.set_num_threads(1)
    et.serve_asgi(make_app(OnnxModel(args.model), args.name), args.host, args.port, args.port_file)


if __name__ == "__main__":
    sys.exit(main())
