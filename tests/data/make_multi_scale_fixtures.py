"""Make the torchvision fixtures of ``MultiScaleRoIAlign`` used by
cropgrad's PyTorch tests (``multi_scale_roi_align.npz``).

``cropgrad.torch.MultiScaleRoIAlign`` promises torchvision's levels,
scales and bits; ``roi_align.npz`` has one pyramid of three levels with the
default level mapping.  This file adds pyramids that reach the other paths
of the module: four levels with boxes clamped to the finest and the
coarsest, a canonical scale and level of the caller's, float64, an image
without boxes, a feature map that is not pooled from, and a single level
(no level mapping).  Run from the repository root with a Python that has
torchvision (never a test dependency):

    /path/to/tvenv/bin/python tests/data/make_multi_scale_fixtures.py

Inputs come from NumPy generators seeded from each case's name; rerunning
the script reproduces the file byte for byte.  torch runs on one thread.

Keys, per case ``NAME`` (listed in the 1-D unicode array ``cases``):
``NAME/maps`` (1-D str, the feature maps given, in order),
``NAME/featmap_names`` (1-D str, those pooled from),
``NAME/feature_<map>`` [N, C, H_l, W_l], ``NAME/boxes_<n>`` [K_n, 4]
(``x1, y1, x2, y2`` of image n, in the features' dtype),
``NAME/image_sizes`` int64 [N, 2], ``NAME/output_size`` int64 [2],
``NAME/sampling_ratio``, ``NAME/canonical_scale``,
``NAME/canonical_level`` (0-d int64), ``NAME/scales`` float64 [L] and
``NAME/levels`` int64 [K] as torchvision inferred them (``levels`` absent
with one level), ``NAME/out`` [K, C, out_h, out_w], ``NAME/grads`` (out's
shape and dtype) and ``NAME/grad_<map>`` (each pooled map's gradient: the
backward of ``(out * grads).sum()``).  The file also records
``torch_version``, ``torchvision_version`` and ``numpy_version``.
"""

import argparse
import os
import zlib

import numpy as np
import torch
import torchvision
from torchvision.ops import MultiScaleRoIAlign


def _rng(text):
    return np.random.default_rng(zlib.crc32(text.encode("utf-8")))


def _boxes(rng, count, height, width, sides, dtype):
    """`count` boxes inside an image of (height, width) whose sides are
    drawn from `sides` (a pair of bounds), some of them on whole pixels."""
    w = rng.uniform(*sides, count)
    h = w * rng.uniform(0.5, 2.0, count)
    x1 = rng.uniform(-4, width - 4, count)
    y1 = rng.uniform(-4, height - 4, count)
    boxes = np.stack([x1, y1, x1 + w, y1 + h], axis=1)
    boxes[::3] = np.round(boxes[::3])
    return boxes.astype(dtype)


# name: (dtype, image sizes, channels, maps given (name, stride), maps
# pooled from, boxes per image (count, side bounds), output_size,
# sampling_ratio, canonical_scale, canonical_level)
CASES = {
    "fpn4_adaptive_f32": (
        np.float32,
        [(128, 160), (112, 150)],
        2,
        [("p2", 4), ("p3", 8), ("p4", 16), ("p5", 32), ("pool", 64)],
        ["p2", "p3", "p4", "p5"],
        [
            [(3, (4, 60)), (3, (80, 150)), (2, (170, 300))],
            [(2, (2, 30)), (2, (330, 700))],
        ],
        (7, 5),
        0,
        224,
        4,
    ),
    "canonical_f64": (
        np.float64,
        [(96, 64), (80, 80), (64, 96)],
        3,
        [("c3", 8), ("c4", 16), ("c5", 32)],
        ["c3", "c4", "c5"],
        [[(4, (8, 70)), (2, (100, 150))], [], [(3, (320, 500))]],
        (3, 3),
        2,
        112,
        3,
    ),
    "single_level_f32": (
        np.float32,
        [(64, 64)],
        4,
        [("feat", 8)],
        ["feat"],
        [[(5, (4, 60))]],
        (4, 4),
        -1,
        224,
        4,
    ),
}


def make_case(name, spec):
    (
        dtype,
        sizes,
        channels,
        maps,
        pooled,
        box_spec,
        output_size,
        ratio,
        canonical_scale,
        canonical_level,
    ) = spec
    rng = _rng(name)
    height = max(h for h, _ in sizes)
    width = max(w for _, w in sizes)
    features = {
        m: rng.standard_normal(
            (len(sizes), channels, height // stride, width // stride)
        ).astype(dtype)
        for m, stride in maps
    }
    boxes = []
    for (h, w), parts in zip(sizes, box_spec):
        chunks = [_boxes(rng, count, h, w, sides, dtype) for count, sides in parts]
        boxes.append(np.concatenate(chunks) if chunks else np.zeros((0, 4), dtype))
    pooler = MultiScaleRoIAlign(
        pooled,
        output_size,
        ratio,
        canonical_scale=canonical_scale,
        canonical_level=canonical_level,
    )
    x = {
        m: torch.from_numpy(f).requires_grad_(m in pooled) for m, f in features.items()
    }
    tboxes = [torch.from_numpy(b) for b in boxes]
    out = pooler(x, tboxes, sizes)
    grads = _rng(f"grads/{name}").standard_normal(out.shape).astype(dtype)
    (out * torch.from_numpy(grads)).sum().backward()
    case = {
        "maps": np.array([m for m, _ in maps]),
        "featmap_names": np.array(pooled),
        "image_sizes": np.array(sizes, dtype=np.int64),
        "output_size": np.array(output_size, dtype=np.int64),
        "sampling_ratio": np.array(ratio, dtype=np.int64),
        "canonical_scale": np.array(canonical_scale, dtype=np.int64),
        "canonical_level": np.array(canonical_level, dtype=np.int64),
        "scales": np.array(pooler.scales, dtype=np.float64),
        "out": out.detach().numpy(),
        "grads": grads,
    }
    if len(pooled) > 1:
        case["levels"] = pooler.map_levels(tboxes).numpy()
    for m, f in features.items():
        case[f"feature_{m}"] = f
        if m in pooled:
            case[f"grad_{m}"] = x[m].grad.numpy()
    for n, b in enumerate(boxes):
        case[f"boxes_{n}"] = b
    return case


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--outdir", default=os.path.dirname(os.path.abspath(__file__)))
    args = parser.parse_args()
    torch.set_num_threads(1)
    arrays = {
        "cases": np.array(list(CASES)),
        "torch_version": np.array(torch.__version__),
        "torchvision_version": np.array(torchvision.__version__),
        "numpy_version": np.array(np.__version__),
    }
    for name, spec in CASES.items():
        case = make_case(name, spec)
        levels = case.get("levels")
        print(
            name,
            "scales",
            case["scales"].tolist(),
            "boxes per level",
            None if levels is None else np.bincount(levels).tolist(),
        )
        arrays.update({f"{name}/{k}": v for k, v in case.items()})
    path = os.path.join(args.outdir, "multi_scale_roi_align.npz")
    np.savez_compressed(path, **arrays)
    print("wrote", path, os.path.getsize(path), "bytes")


if __name__ == "__main__":
    main()
