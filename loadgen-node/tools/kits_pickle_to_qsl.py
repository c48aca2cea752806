#!/usr/bin/python3
"""Turns the 3D-UNet reference's pre-processed KiTS19 cases into the folder --qsl-kits reads.

    kits_pickle_to_qsl.py --preprocessed-dir DIR --out-dir OUT

DIR is what the reference's preprocess.py (vision/medical_imaging/3d-unet-kits19) writes, or
kits_synth.py: preprocessed_files.pkl (the case list, file_list, whose order is the QSL index
order, and per-case aux with image_shape) and one CASE.pkl per case holding [image, label]. A C
program cannot unpickle, so this writes each case's image, unchanged, as OUT/NNNNN_CASE.npy
(float32, shape (1, D, H, W), C order; NNNNN is its index in file_list, so the names sort in
QSL order). loadgen-node --qsl-kits OUT then sends each case with its shape in a 32-byte volume
header (common/include/cmn/vol.h). Labels stay behind: accuracy_kits.py reads the ground truth
from DIR/nifti. Prints the number of cases, the shape range and the bytes.

Reading a pickle runs code from it: only convert files from a source you trust.
"""
import argparse
import os
import pickle
import sys

import numpy as np


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--preprocessed-dir", required=True,
                    help="the reference pre-processing's output (preprocessed_files.pkl, CASE.pkl)")
    ap.add_argument("--out-dir", required=True, help="QSL folder to write (created)")
    args = ap.parse_args()

    index = os.path.join(args.preprocessed_dir, "preprocessed_files.pkl")
    try:
        with open(index, "rb") as f:
            meta = pickle.load(f)
    except OSError as e:
        sys.exit(f"kits_pickle_to_qsl.py: {index}: {e.strerror}")
    if not isinstance(meta, dict) or "file_list" not in meta or "cases" not in meta:
        sys.exit(f"kits_pickle_to_qsl.py: {index}: not a dict with file_list and cases")
    cases = list(meta["file_list"])
    if not cases:
        sys.exit(f"kits_pickle_to_qsl.py: {index}: file_list is empty")
    os.makedirs(args.out_dir, exist_ok=True)
    if any(n.endswith(".npy") for n in os.listdir(args.out_dir)):
        sys.exit(f"kits_pickle_to_qsl.py: {args.out_dir} already holds .npy files "
                 "(the QSL would read them too)")
    voxels, shapes = 0, []
    for i, case in enumerate(cases):
        path = os.path.join(args.preprocessed_dir, f"{case}.pkl")
        with open(path, "rb") as f:
            data = pickle.load(f)
        image = np.asarray(data[0])
        want = tuple(meta["cases"].get(case, {}).get("image_shape", image.shape))
        if image.ndim != 4 or image.shape[0] != 1:
            sys.exit(f"kits_pickle_to_qsl.py: {path}: image of shape {image.shape}, "
                     "expected (1, D, H, W)")
        if image.shape != want:
            sys.exit(f"kits_pickle_to_qsl.py: {path}: image of shape {image.shape}, but "
                     f"preprocessed_files.pkl says {want}")
        if image.dtype != np.float32:
            sys.exit(f"kits_pickle_to_qsl.py: {path}: image of dtype {image.dtype}, "
                     "expected float32")
        np.save(os.path.join(args.out_dir, f"{i:05d}_{case}.npy"),
                np.ascontiguousarray(image, dtype="<f4"))
        voxels += image.size
        shapes.append(image.shape[1:])
    small = min(shapes, key=lambda s: s[0] * s[1] * s[2])
    large = max(shapes, key=lambda s: s[0] * s[1] * s[2])
    print(f"{len(cases)} cases in {args.out_dir}: shapes {small} .. {large}, "
          f"{voxels / len(cases):.0f} voxels per case on average, {voxels * 4 / 1e6:.1f} MB")


if __name__ == "__main__":
    main()
