#!/usr/bin/env python3
"""Test fixture, for CI runs without an mlcommons/inference checkout: scores an accuracy log the
way vision/classification_and_detection/tools/accuracy-imagenet.py does (first int32 of each
response against the label of its qsl_idx in a val_map file) and prints its line.

    label_accuracy.py --mlperf-accuracy-file LOG --imagenet-val-file VAL_MAP
"""
import argparse
import json
import struct

ap = argparse.ArgumentParser()
ap.add_argument("--mlperf-accuracy-file", required=True)
ap.add_argument("--imagenet-val-file", required=True)
a = ap.parse_args()
with open(a.imagenet_val_file) as f:
    labels = [int(line.split()[1]) for line in f if line.strip()]
with open(a.mlperf_accuracy_file) as f:
    results = json.load(f)
seen, good = set(), 0
for r in results:
    if r["qsl_idx"] in seen:
        continue
    seen.add(r["qsl_idx"])
    found = struct.unpack("<i", bytes.fromhex(r["data"])[:4])[0]
    good += labels[r["qsl_idx"]] == found
print("accuracy={:.3f}%, good={}, total={}".format(100.0 * good / max(len(seen), 1), good,
                                                     len(seen)))
