#!/usr/bin/python3
"""The kserve backend against a real KServe v2 server: the 10 000 Fashion-MNIST test images go
loadgen-node -> QDL -> sut-node (kserve, binary tensor extension) -> kserve_server.py, which runs
the committed ONNX model with PyTorch; the top-1 accuracy must equal the onnx backend's on the
same images (run here when sut-node has it) and the figure recorded with the model.

    test_kserve_e2e.py SUT_NODE LOADGEN_NODE KSERVE_PLUGIN SOURCE_DIR

Exits 77 when python3-torch, -fastapi, -uvicorn or -onnx is missing.
"""
import json
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import enginetest as et  # noqa: E402


def accuracy(src, out, labels):
    r = subprocess.run([et.PY, os.path.join(src, "loadgen-node", "tools",
                                            "accuracy_classification.py"),
                        "--log", os.path.join(out, "mlperf_log_accuracy.json"),
                        "--labels", labels], capture_output=True, text=True, check=True)
    m = re.search(r"accuracy=([0-9.]+)%, good=(\d+), total=(\d+)", r.stdout)
    return float(m.group(1)), int(m.group(2)), int(m.group(3))


def main():
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    sut, lg, plugin, src = sys.argv[1:]
    et.need_modules("torch", "fastapi", "uvicorn", "onnx", "numpy")
    model = os.path.join(src, "sut-node", "backends", "onnx", "models", "fashion_mnist_cnn.onnx")
    ref = json.load(open(model[:-5] + ".json"))
    with et.scratch("kserve-e2e-") as (procs, tmp):
        subprocess.run([et.PY, os.path.join(src, "loadgen-node", "tools", "fmnist_to_npy.py"),
                        "--split", "test", "--out-dir", tmp], check=True, capture_output=True)
        images = os.path.join(tmp, "fmnist_test_images.npy")
        labels = os.path.join(tmp, "fmnist_test_labels.npy")

        slog, sport_file = os.path.join(tmp, "server.log"), os.path.join(tmp, "server.port")
        srv = procs.start([et.PY, os.path.join(src, "tests", "engines", "kserve_server.py"),
                           "--model", model, "--name", "fashion_mnist", "--port-file",
                           sport_file], slog)
        sport = et.wait_port(sport_file, srv, slog, timeout=40)

        opts = {"url": f"http://127.0.0.1:{sport}", "model": "fashion_mnist", "version": "1",
                "input": "input", "output": "logits", "datatype": "UINT8", "shape": "1,28,28",
                "max_batch": 128, "engines": 2,
                # A stalled request fails with its cause, inside loadgen-node's 30 s drain.
                "timeout_ms": 15000}
        node, addr, nlog = et.start_node(procs, sut, tmp, "kserve-node", plugin, opts)
        out = os.path.join(tmp, "kserve")
        rc, text = et.loadgen(lg, out, addr, images, "Offline", "AccuracyOnly", [],
                              ["--model", "fashion-mnist"], timeout=300)
        if rc != 0:
            sys.exit(f"FAIL kserve: loadgen-node exit {rc}\n{text[-3000:]}\nnode log:\n"
                     f"{open(nlog).read()[-2000:]}\nserver log:\n{open(slog).read()[-2000:]}")
        acc, good, total = accuracy(src, out, labels)
        print(f"kserve backend: accuracy={acc:.3f}% good={good} total={total}")
        procs.stop(node)
        if total != 10000:
            sys.exit(f"FAIL kserve: {total} samples scored, 10000 expected")

        # The onnx backend on the same images, when this sut-node has it.
        hl = subprocess.run([sut, "--help"], capture_output=True, text=True).stdout
        if re.search(r"Backends built in:.*onnx", hl):
            node, addr, nlog = et.start_node(
                procs, sut, tmp, "onnx-node", "onnx", {"model": model},
                ["--threads", "1", "--max-batch", "64"])
            out2 = os.path.join(tmp, "onnx")
            rc, text = et.loadgen(lg, out2, addr, images, "Offline", "AccuracyOnly", [],
                                  ["--model", "fashion-mnist"], timeout=300)
            procs.stop(node)
            if rc != 0:
                sys.exit(f"FAIL onnx: loadgen-node exit {rc}\n{text[-2000:]}")
            acc2, good2, _ = accuracy(src, out2, labels)
            print(f"onnx backend:   accuracy={acc2:.3f}% good={good2}")
            if good2 != good:
                sys.exit(f"FAIL: kserve {good} correct, onnx backend {good2}")
        else:
            print("onnx backend not built into this sut-node: compared with the recorded figure")
        if good != ref["good"]:
            sys.exit(f"FAIL: kserve {good} correct, the model's record says {ref['good']}")
        print(f"ok: equal to the onnx backend and to the recorded {ref['good']}/{ref['total']}")
    print("PASS")


if __name__ == "__main__":
    main()
