#!/usr/bin/python3
"""Writes synthetic KiTS19 cases in the exact format of the 3D-UNet reference's pre-processing.

    kits_synth.py --out-dir DIR [--cases N] [--shape DxHxW] [--roi N] [--seed S]

DIR receives what vision/medical_imaging/3d-unet-kits19/preprocess.py writes for the real data
set, so the reference's QSL, kits_pickle_to_qsl.py and accuracy_kits.py read it unchanged:
  DIR/preprocessed_files.pkl   {"file_list": [case names], "cases": {case: aux}}, aux holding
                               original_affine, reshaped_affine, zoom_factor, case, image_shape
  DIR/case_NNNNN.pkl           [image, label]: float32 and uint8 arrays of shape (1, D, H, W)
  DIR/nifti/case_NNNNN/        imaging.nii.gz and segmentation.nii.gz (the ground truth that
                               accuracy_kits.py compares predictions with)

Each case is a CT-like volume in Hounsfield units: air (-1000) around an elliptic body (soft
tissue, -10..50 HU), two kidneys (145..195 HU, label 1) and a tumour in one of them (80..120 HU,
label 2), each with seeded uniform noise. It then goes through the reference's own steps:
intensity clip to [-79, 304] and normalisation ((x - 101) / 76.9), edge padding up to the ROI,
crop or constant padding (-2.2) to a multiple of ROI/2. Shapes vary from case to case around
--shape. The bands do not overlap, so the label is a function of the intensity: sut-node's
unet-sim backend in mode=oracle maps the same bands back to labels, and must score DICE 1.0.

Needs python3-numpy and python3-nibabel (deploy/install-deps.sh).
"""
import argparse
import os
import pickle
import sys

import numpy as np

# The reference's constants (global_vars.py).
MEAN_VAL, STDDEV_VAL = 101.0, 76.9
MIN_CLIP_VAL, MAX_CLIP_VAL = -79.0, 304.0
PADDING_VAL = -2.2
TARGET_SPACING = [1.6, 1.2, 1.2]
# Intensity bands in HU, (centre, half width); sut-node's unet-sim oracle splits at 65 and 132.5.
AIR = -1000.0
BODY = (20.0, 30.0)
KIDNEY = (170.0, 25.0)
TUMOUR = (100.0, 20.0)


def ellipsoid(shape, centre, radii):
    grids = np.ogrid[tuple(slice(0, s) for s in shape)]
    d = sum(((g - c) / r) ** 2 for g, c, r in zip(grids, centre, radii))
    return d <= 1.0


def make_case(rng, shape):
    """A (D, H, W) volume in HU and its labels."""
    d, h, w = shape
    hu = np.full(shape, AIR, dtype=np.float64)
    label = np.zeros(shape, dtype=np.uint8)
    body = ellipsoid(shape, (d / 2, h / 2, w / 2), (d * 0.6, h * 0.42, w * 0.45))
    hu[body] = BODY[0] + rng.uniform(-BODY[1], BODY[1], int(body.sum()))
    tumour_side = int(rng.integers(0, 2))
    for side in (0, 1):
        cw = w * (0.3 if side == 0 else 0.7) + rng.uniform(-2, 2)
        centre = (d * rng.uniform(0.4, 0.6), h * rng.uniform(0.45, 0.55), cw)
        radii = (d * rng.uniform(0.18, 0.25), h * rng.uniform(0.12, 0.16), w * rng.uniform(0.08, 0.1))
        kidney = ellipsoid(shape, centre, radii) & body
        hu[kidney] = KIDNEY[0] + rng.uniform(-KIDNEY[1], KIDNEY[1], int(kidney.sum()))
        label[kidney] = 1
        if side == tumour_side:
            r = min(radii) * rng.uniform(0.5, 0.8)
            tc = (centre[0] + radii[0] * 0.3, centre[1], centre[2])
            tumour = ellipsoid(shape, tc, (r, r, r)) & kidney
            hu[tumour] = TUMOUR[0] + rng.uniform(-TUMOUR[1], TUMOUR[1], int(tumour.sum()))
            label[tumour] = 2
    return hu, label


def normalize_intensity(image):
    image = np.clip(image, MIN_CLIP_VAL, MAX_CLIP_VAL)
    return (image - MEAN_VAL) / STDDEV_VAL


def pad_to_min_shape(image, label, roi):
    """preprocess.py's pad_to_min_shape: edge padding up to the ROI."""
    bounds = [max(0, roi[i] - image.shape[1:][i]) for i in range(3)]
    paddings = [(0, 0)] + [(bounds[i] // 2, bounds[i] - bounds[i] // 2) for i in range(3)]
    return np.pad(image, paddings, mode="edge"), np.pad(label, paddings, mode="edge")


def constant_pad_volume(volume, roi, strides, padding_val):
    bounds = [(strides[i] - volume.shape[1:][i] % strides[i]) % strides[i] for i in range(3)]
    bounds = [bounds[i] if (volume.shape[1:][i] + bounds[i]) >= roi[i] else bounds[i] + strides[i]
              for i in range(3)]
    paddings = [(0, 0)] + [(bounds[i] // 2, bounds[i] - bounds[i] // 2) for i in range(3)]
    return np.pad(volume, paddings, mode="constant", constant_values=[padding_val])


def adjust_shape_for_sliding_window(image, label, roi):
    """preprocess.py's adjust_shape_for_sliding_window: crop or pad to a multiple of ROI/2."""
    shape = list(image.shape[1:])
    strides = [int(roi[i] * 0.5) for i in range(3)]
    bounds = [shape[i] % strides[i] for i in range(3)]
    bounds = [bounds[i] if bounds[i] < strides[i] // 2 else 0 for i in range(3)]
    sl = tuple(slice(bounds[i] // 2, shape[i] - (bounds[i] - bounds[i] // 2)) for i in range(3))
    image, label = image[(Ellipsis,) + sl], label[(Ellipsis,) + sl]
    return (constant_pad_volume(image, roi, strides, PADDING_VAL),
            constant_pad_volume(label, roi, strides, 0))


def parse_shape(s):
    try:
        v = [int(x) for x in s.lower().split("x")]
    except ValueError:
        v = []
    if len(v) != 3 or min(v) < 8:
        raise argparse.ArgumentTypeError(f"{s!r}: expected DxHxW, each at least 8")
    return v


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out-dir", required=True, help="folder to write (created; must hold no cases)")
    ap.add_argument("--cases", type=int, default=4, help="number of cases (default 4)")
    ap.add_argument("--shape", type=parse_shape, default=[150, 180, 180],
                    help="typical raw shape DxHxW before padding (default 150x180x180; the real "
                         "set averages about 33 million voxels after pre-processing)")
    ap.add_argument("--roi", type=int, default=128, help="patch edge of the sliding window (default "
                    "128, the reference's ROI); shapes are padded for it")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    if args.cases < 1 or args.roi < 2 or args.roi % 2:
        sys.exit("kits_synth.py: --cases must be >= 1 and --roi an even number >= 2")
    try:
        import nibabel
    except ImportError:
        sys.exit("kits_synth.py: python3-nibabel is missing (deploy/install-deps.sh)")
    os.makedirs(args.out_dir, exist_ok=True)
    if os.path.exists(os.path.join(args.out_dir, "preprocessed_files.pkl")):
        sys.exit(f"kits_synth.py: {args.out_dir} already holds preprocessed_files.pkl")
    rng = np.random.default_rng(args.seed)
    roi = [args.roi] * 3
    aux_all = {"file_list": [], "cases": {}}
    total = 0
    for i in range(args.cases):
        case = f"case_{i:05d}"
        raw_shape = [max(8, int(s * rng.uniform(0.8, 1.2))) for s in args.shape]
        hu, label = make_case(rng, raw_shape)
        image = normalize_intensity(hu)[np.newaxis].astype(np.float32)
        label = label[np.newaxis]
        image, label = pad_to_min_shape(image, label, roi)
        image, label = adjust_shape_for_sliding_window(image, label, roi)
        image, label = image.astype(np.float32), label.astype(np.uint8)
        affine = np.diag([-TARGET_SPACING[2], -TARGET_SPACING[1], TARGET_SPACING[0], 1.0])
        with open(os.path.join(args.out_dir, f"{case}.pkl"), "wb") as f:
            pickle.dump([image, label], f)
        nd = os.path.join(args.out_dir, "nifti", case)
        os.makedirs(nd, exist_ok=True)
        nibabel.save(nibabel.Nifti1Image(np.squeeze(image, 0), affine=affine),
                     os.path.join(nd, "imaging.nii.gz"))
        nibabel.save(nibabel.Nifti1Image(np.squeeze(label, 0), affine=affine),
                     os.path.join(nd, "segmentation.nii.gz"))
        aux_all["file_list"].append(case)
        aux_all["cases"][case] = {"original_affine": affine, "reshaped_affine": affine,
                                  "zoom_factor": np.ones(3), "case": case,
                                  "image_shape": image.shape}
        total += image.size
        print(f"{case}: shape {image.shape[1:]}, kidney {int((label == 1).sum())} voxels, "
              f"tumour {int((label == 2).sum())} voxels")
    with open(os.path.join(args.out_dir, "preprocessed_files.pkl"), "wb") as f:
        pickle.dump(aux_all, f)
    print(f"{args.cases} cases, {total} voxels ({total * 4 / 1e6:.1f} MB of float32) in "
          f"{args.out_dir}")


if __name__ == "__main__":
    main()
