#!/usr/bin/python3
"""Top-1 accuracy of a classifier run from LoadGen's accuracy log, printed as MLPerf does.

    accuracy_classification.py --log mlperf_log_accuracy.json --labels labels.npy
                               [--output auto|argmax|raw] [--label-offset K] [--verbose]

The log is a JSON array of {"seq_id", "qsl_idx", "data"}, data being the response bytes as
upper-case hex. A response is either the class index as a 4-byte little-endian int32 (the onnx
backend's output=argmax) or the logits as float32 (output=raw), whose argmax is the class;
--output auto tells them apart by size (4 bytes: an index). --label-offset is subtracted from
every predicted class (1 for models with a background class 0). A sample logged more than once
counts once, as in MLPerf's reference accuracy scripts.

Prints: accuracy=XX.XXX%, good=N, total=N
"""
import argparse
import json
import sys

import numpy as np


def predicted_class(data, mode):
    if mode == "auto":
        mode = "argmax" if len(data) == 4 else "raw"
    if mode == "argmax":
        if len(data) != 4:
            raise ValueError(f"{len(data)} bytes where a 4-byte class index was expected")
        return int(np.frombuffer(data, dtype="<i4")[0])
    if len(data) == 0 or len(data) % 4:
        raise ValueError(f"{len(data)} bytes are not float32 logits")
    return int(np.argmax(np.frombuffer(data, dtype="<f4")))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--log", required=True, help="mlperf_log_accuracy.json")
    ap.add_argument("--labels", required=True, help=".npy of class indices, QSL order")
    ap.add_argument("--output", choices=["auto", "argmax", "raw"], default="auto")
    ap.add_argument("--label-offset", type=int, default=0)
    ap.add_argument("--verbose", action="store_true", help="list every wrong prediction")
    args = ap.parse_args()

    labels = np.load(args.labels)
    with open(args.log) as f:
        results = json.load(f)
    if not isinstance(results, list):
        sys.exit(f"{args.log}: expected a JSON array of results")

    seen = set()
    good = 0
    for r in results:
        idx = int(r["qsl_idx"])
        if idx in seen:
            continue
        seen.add(idx)
        if idx < 0 or idx >= len(labels):
            sys.exit(f"{args.log}: qsl_idx {idx} is outside the {len(labels)} labels")
        try:
            cls = predicted_class(bytes.fromhex(r["data"]), args.output) - args.label_offset
        except ValueError as e:
            sys.exit(f"{args.log}: seq_id {r.get('seq_id')}, qsl_idx {idx}: {e}")
        if cls == int(labels[idx]):
            good += 1
        elif args.verbose:
            print(f"qsl_idx {idx}: predicted {cls}, label {int(labels[idx])}")

    total = len(seen)
    acc = 100.0 * good / total if total else 0.0
    print(f"accuracy={acc:.3f}%, good={good}, total={total}")


if __name__ == "__main__":
    main()
