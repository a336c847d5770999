"""Make the torchvision golden fixtures of RoIAlign used by cropgrad's tests.

The test suite compares cropgrad's RoIAlign with results that torchvision
computed once and that are committed next to this script
(``roi_align.npz``); torchvision is never imported by the tests.  Re-create
the file with a Python that has torchvision installed, from the repository
root:

    python3 -m venv /path/to/tvenv
    /path/to/tvenv/bin/pip install torch==2.14.1 torchvision==0.29.1 numpy
    /path/to/tvenv/bin/python tests/data/make_roi_align_fixtures.py

Options: ``--outdir DIR`` writes the file elsewhere (default: this script's
folder); ``--check`` compares the file bit for bit with the NumPy reference
(``cropgrad/_reference/roi_align``, loaded from its file, so no compiled
cropgrad is needed) and, when ``onnx`` and ``onnxruntime`` are installed,
with ONNX Runtime's ``RoiAlign`` (``tests/_onnx_roi_align.py``);
``--report`` prints facts measured with torchvision (supported dtypes,
crashes and errors on odd boxes, float16 accuracy, determinism).

The committed file was made with torch 2.14.1 and torchvision 0.29.1 (the
CUDA 13.0 wheels, run on the CPU), NumPy 2.4.6, Python 3.11.7 on x86-64
Linux; it records the versions under ``torch_version``,
``torchvision_version`` and ``numpy_version``.

torchvision's CPU kernels of ``roi_align`` and its backward are serial; the
script still runs torch on one thread.  All inputs come from NumPy
generators seeded from each case's name, so a case's inputs do not change
when cases are added, and rerunning the script reproduces the file byte for
byte.

Keys (every ``NAME`` is listed in the 1-D unicode array ``cases``; strings
are NumPy unicode arrays, so ``np.load(path, allow_pickle=False)`` reads
them).  ``NAME/kind`` says which keys a case has:

``roi_align`` -- one ``torchvision.ops.roi_align`` call and its backward
    image (float32 or float64) [N, C, H, W], boxes (image's dtype) [K, 4]
    as ``x1, y1, x2, y2``, box_ind int64 [K], output_size int64 [2],
    spatial_scale 0-d float64, sampling_ratio 0-d int64, aligned 0-d bool,
    box_format 0-d str (``tensor`` for ``Tensor[K, 5]``, ``list`` for a
    list of ``Tensor[L, 4]``, one per image), out [K, C, out_h, out_w],
    grads (out's shape and dtype), grad_image (image's shape and dtype:
    the backward of ``(out * grads).sum()``); out_float16 and
    grad_image_float16 (torchvision's float16 kernel on the image, boxes
    and grads rounded to float16; absent where the boxes overflow
    float16); note 0-d str (empty, or the documented difference the case
    shows).
``error`` -- torchvision raised: the inputs as above and ``error``, the
    exception's type and message; no outputs.
``multi_scale`` -- ``torchvision.ops.MultiScaleRoIAlign``
    feature_p2, feature_p3, feature_p4 float32 [N, C, H_l, W_l], boxes_0,
    boxes_1, ... float32 [K_n, 4] (the boxes of image n), image_sizes
    int64 [N, 2], output_size, sampling_ratio, scales float64 [3] and
    levels int64 [K] (as torchvision inferred them), out, grads,
    grad_p2, grad_p3, grad_p4.
"""

import argparse
import importlib.util
import os
import subprocess
import sys
import zlib

import numpy as np
import torch
import torchvision
from torchvision.ops import MultiScaleRoIAlign, roi_align

F16, F32, F64 = np.float16, np.float32, np.float64
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, os.pardir, os.pardir)

SCALES = (1.0, 0.5, 0.25, 0.125, 0.0625)
SAMPLING_RATIOS = (-1, 0, 1, 2, 3)
OUTPUT_SIZES = ((1, 1), (2, 3), (7, 7))
DTYPE_SUFFIX = {F32: "f32", F64: "f64"}


def load_by_path(name, *parts):
    """A package loaded from its folder, without importing the package that
    holds it (cropgrad, which would need its compiled modules)."""
    folder = os.path.join(ROOT, *parts)
    spec = importlib.util.spec_from_file_location(
        name, os.path.join(folder, "__init__.py"), submodule_search_locations=[folder]
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def load_file(name, *parts):
    """A module loaded from its file."""
    spec = importlib.util.spec_from_file_location(name, os.path.join(ROOT, *parts))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


reference = load_by_path("roi_align_reference", "cropgrad", "_reference", "roi_align")


def rng_for(name):
    return np.random.default_rng(zlib.crc32(name.encode("utf-8")))


# ---------------------------------------------------------------------------
# Boxes, in feature-map pixels (x1, y1, x2, y2); a case divides them by its
# spatial scale, a power of two, which is exact.


def b_inside(r, n, h, w, least=1.0):
    """n boxes inside the map, at least `least` pixels on each side."""
    x1 = r.uniform(0, w - least, n)
    y1 = r.uniform(0, h - least, n)
    x2 = x1 + least + r.uniform(0, 1, n) * (w - x1 - least)
    y2 = y1 + least + r.uniform(0, 1, n) * (h - y1 - least)
    return np.stack([x1, y1, x2, y2], 1)


def b_partly_outside(r, n, h, w):
    """n boxes that cross at least one edge of the map."""
    x1 = r.uniform(-0.5 * w, 0.6 * w, n)
    y1 = r.uniform(-0.5 * h, 0.6 * h, n)
    x2 = x1 + r.uniform(0.6, 1.2, n) * w
    y2 = y1 + r.uniform(0.6, 1.2, n) * h
    return np.stack([x1, y1, x2, y2], 1)


def b_tiny(r, n, h, w):
    """n boxes smaller than a pixel on both sides."""
    x1 = r.uniform(-0.5, w, n)
    y1 = r.uniform(-0.5, h, n)
    return np.stack(
        [x1, y1, x1 + r.uniform(0.02, 0.7, n), y1 + r.uniform(0.02, 0.7, n)], 1
    )


def b_zero(r, h, w):
    """A box of zero width, one of zero height and a point."""
    x, y = r.uniform(0, w, 3), r.uniform(0, h, 3)
    return np.array(
        [
            [x[0], y[0], x[0], y[0] + 0.5 * h],
            [x[1], y[1], x[1] + 0.5 * w, y[1]],
            [x[2], y[2], x[2], y[2]],
        ]
    )


def b_integer(r, n, h, w, half=False):
    """n ordered boxes on integer (or half-integer) coordinates."""
    x = np.sort(r.integers(-1, w + 2, (n, 2)), 1).astype(np.float64)
    y = np.sort(r.integers(-1, h + 2, (n, 2)), 1).astype(np.float64)
    b = np.stack([x[:, 0], y[:, 0], x[:, 1] + 1, y[:, 1] + 1], 1)
    return b + 0.5 if half else b


def b_flip(boxes, x=True, y=True):
    b = np.array(boxes, dtype=np.float64)
    if x:
        b[:, [0, 2]] = b[:, [2, 0]]
    if y:
        b[:, [1, 3]] = b[:, [3, 1]]
    return b


def b_mixed(r, h, w):
    """The matrix cases' boxes: inside, partly outside, tiny, a zero-width
    box, integer and half-integer coordinates."""
    return np.concatenate(
        [
            b_inside(r, 3, h, w),
            b_partly_outside(r, 1, h, w),
            b_tiny(r, 1, h, w),
            b_zero(r, h, w)[:1],
            b_integer(r, 1, h, w),
            b_integer(r, 1, h, w, half=True),
        ]
    )


# ---------------------------------------------------------------------------
# Cases


def spec(
    feature,
    boxes,
    output_size,
    scale=1.0,
    sampling_ratio=-1,
    aligned=False,
    dtype=F32,
    box_ind=None,
    box_format="tensor",
    image=None,
):
    """A case: boxes in feature pixels, scaled to image coordinates here."""
    boxes = np.asarray(boxes, dtype=np.float64).reshape(-1, 4) / scale
    if box_ind is None:
        box_ind = np.zeros(len(boxes), dtype=np.int64)
    return {
        "feature": tuple(int(v) for v in feature),
        "boxes": boxes.astype(dtype),
        "box_ind": np.asarray(box_ind, dtype=np.int64),
        "output_size": tuple(int(v) for v in output_size),
        "scale": float(scale),
        "sampling_ratio": int(sampling_ratio),
        "aligned": bool(aligned),
        "dtype": dtype,
        "box_format": box_format,
        "image": image,
    }


def matrix_cases():
    """Every sampling ratio with both alignments, in float32 and float64.

    Each (alignment, dtype) pair meets every spatial scale once; the output
    sizes rotate through 1x1, 2x3 and 7x7.
    """
    out = {}
    for dtype in (F32, F64):
        for aligned in (False, True):
            for i, ratio in enumerate(SAMPLING_RATIOS):
                name = "matrix_sr%d_%s_%s" % (
                    ratio,
                    "aligned" if aligned else "unaligned",
                    DTYPE_SUFFIX[dtype],
                )
                r = rng_for(name)
                h, w = (int(v) for v in r.integers(5, 24, 2))
                scale = SCALES[(i + 2 * (dtype == F64)) % len(SCALES)]
                boxes = b_mixed(r, h, w)
                out[name] = spec(
                    (2, 3, h, w),
                    boxes,
                    OUTPUT_SIZES[(i + aligned) % len(OUTPUT_SIZES)],
                    scale,
                    ratio,
                    aligned,
                    dtype,
                    r.integers(0, 2, len(boxes)),
                )
    return out


def edge_boxes(h, w, dtype):
    """Boxes whose single sample (1x1 output, sampling ratio 1, unaligned)
    lands on the edges of the sampled range: exactly at -1, 0, H - 1 and
    H, one step of `dtype` beyond -1 and H, and between."""

    def step(v, toward):
        return float(np.nextafter(dtype(v), dtype(toward)))

    ys = [-1.0, step(-1, -2), -0.5, 0.0, 0.25, h - 1.0, h - 0.5, h, step(h, h + 1)]
    xs = [-1.0, step(-1, -2), -0.75, 0.0, w - 1.0, w - 0.25, w, step(w, w + 1)]
    boxes = [[2.25 - 0.5, y - 0.5, 2.25 + 0.5, y + 0.5] for y in ys]
    boxes += [[x - 0.5, 1.75 - 0.5, x + 0.5, 1.75 + 0.5] for x in xs]
    boxes = np.array(boxes).astype(dtype)
    # The samples must land exactly where intended, in the case's arithmetic.
    for box, y in zip(boxes, ys):
        row = reference.axis_samples(box[1], box[3], h, 1, 1.0, 1, False, dtype)
        assert float(row.taps[0][0].coord) == y, (box, y)
    for box, x in zip(boxes[len(ys) :], xs):
        col = reference.axis_samples(box[0], box[2], w, 1, 1.0, 1, False, dtype)
        assert float(col.taps[0][0].coord) == x, (box, x)
    return boxes


def geometry_cases():
    c = {}

    def add(name, make):
        c[name] = make(rng_for(name))

    for dtype in (F32, F64):
        sfx = DTYPE_SUFFIX[dtype]
        add(
            "partly_outside_unaligned_adaptive_" + sfx,
            lambda r: spec(
                (1, 2, 9, 12), b_partly_outside(r, 5, 9, 12), (2, 3), dtype=dtype
            ),
        )
        add(
            "edge_bounds_" + sfx,
            lambda r: spec(
                (1, 2, 6, 7), edge_boxes(6, 7, dtype), (1, 1), 1.0, 1, dtype=dtype
            ),
        )
        add(
            "tiny_unaligned_adaptive_" + sfx,
            lambda r: spec((1, 3, 8, 9), b_tiny(r, 6, 8, 9), (2, 3), dtype=dtype),
        )
        add(
            "flipped_unaligned_adaptive_" + sfx,
            lambda r: spec(
                (1, 2, 10, 11),
                np.concatenate(
                    [
                        b_flip(b_inside(r, 2, 10, 11)),
                        b_flip(b_inside(r, 2, 10, 11), y=False),
                        b_flip(b_inside(r, 2, 10, 11), x=False),
                    ]
                ),
                (2, 3),
                dtype=dtype,
            ),
        )
        add(
            "multi_image_" + sfx,
            lambda r: spec(
                (3, 2, 7, 8),
                b_partly_outside(r, 9, 7, 8),
                (2, 3),
                0.5,
                2,
                dtype=dtype,
                box_ind=[2, 0, 1, 0, 2, 2, 1, 0, 1],
            ),
        )
        add(
            "list_boxes_" + sfx,
            lambda r: spec(
                (3, 2, 9, 8),
                b_inside(r, 7, 9, 8),
                (3, 2),
                0.25,
                -1,
                True,
                dtype,
                box_ind=[0, 0, 1, 2, 2, 2, 2],
                box_format="list",
            ),
        )
        add(
            "large_grid_" + sfx,
            lambda r: spec(
                (1, 2, 40, 40),
                [[0, 0, 40, 40], [0.3, 2.7, 39.1, 37.9]],
                (1, 1),
                dtype=dtype,
            ),
        )
        add(
            "overlapping_" + sfx,
            lambda r: spec(
                (1, 2, 9, 10),
                np.array([1.5, 2.0, 8.25, 7.5])
                + r.uniform(-0.2, 0.2, (10, 4)) * [0, 0, 1, 1],
                (3, 3),
                1.0,
                2,
                True,
                dtype,
            ),
        )

    add(
        "partly_outside_aligned_sr2_f32",
        lambda r: spec(
            (1, 2, 9, 12), b_partly_outside(r, 5, 9, 12), (2, 3), 1.0, 2, True
        ),
    )
    add(
        "wholly_outside_unaligned_sr2_f32",
        lambda r: spec(
            (1, 2, 6, 7),
            [
                [-9, 1, -3, 4],
                [1, -8, 5, -2.5],
                [9, 1, 12, 5],
                [1, 8, 6, 10],
                [-30, -30, -20, -25],
                [-1.9, -1.9, -1.2, -1.3],
                [7.1, 6.1, 7.9, 6.9],
            ],
            (2, 2),
            1.0,
            2,
        ),
    )
    add(
        "wholly_outside_aligned_adaptive_f32",
        lambda r: spec(
            (1, 2, 6, 7),
            [[-9, 1, -3, 4], [1, -8, 5, -2.5], [9, 1, 12, 5], [1, 8, 6, 10]],
            (2, 2),
            0.5,
            -1,
            True,
        ),
    )
    add(
        "tiny_aligned_adaptive_f32",
        lambda r: spec((1, 3, 8, 9), b_tiny(r, 6, 8, 9), (2, 3), 1.0, -1, True),
    )
    add(
        "tiny_aligned_sr3_f32",
        lambda r: spec((1, 3, 8, 9), b_tiny(r, 6, 8, 9), (2, 2), 0.5, 3, True),
    )
    for aligned, ratio in ((False, -1), (True, -1), (True, 2)):
        name = "zero_size_%s_%s_f32" % (
            "aligned" if aligned else "unaligned",
            "adaptive" if ratio < 1 else "sr%d" % ratio,
        )
        add(
            name,
            lambda r: spec((1, 2, 7, 9), b_zero(r, 7, 9), (2, 3), 1.0, ratio, aligned),
        )
    add(
        "flipped_unaligned_sr2_f32",
        lambda r: spec(
            (1, 2, 10, 11),
            np.concatenate(
                [b_flip(b_inside(r, 3, 10, 11)), b_flip(b_tiny(r, 2, 10, 11))]
            ),
            (2, 3),
            0.5,
            2,
        ),
    )
    for ratio in (1, 2):
        add(
            "flipped_aligned_sr%d_f32" % ratio,
            lambda r: spec(
                (1, 2, 10, 11),
                np.concatenate(
                    [
                        b_flip(b_inside(r, 2, 10, 11)),
                        b_flip(b_inside(r, 2, 10, 11), y=False),
                        b_flip(b_inside(r, 2, 10, 11), x=False),
                    ]
                ),
                (2, 3),
                1.0,
                ratio,
                True,
            ),
        )
    # Adaptive grid, aligned: ceil of a negative bin size.
    add(
        "flipped_aligned_adaptive_both_f32",
        lambda r: spec((1, 2, 10, 11), [[9.5, 8.0, 1.25, 0.5]], (2, 3), 1.0, -1, True),
    )
    add(
        "flipped_aligned_adaptive_small_f32",
        lambda r: spec((1, 2, 10, 11), [[5.5, 4.0, 5.25, 3.5]], (2, 3), 1.0, -1, True),
    )
    add(
        "flipped_aligned_adaptive_x_f32",
        lambda r: spec((1, 2, 10, 11), [[9.5, 0.5, 1.25, 8.0]], (2, 3), 1.0, -1, True),
    )
    add(
        "flipped_aligned_adaptive_y_f32",
        lambda r: spec((1, 2, 10, 11), [[1.25, 8.0, 9.5, 0.5]], (2, 3), 1.0, -1, True),
    )
    for aligned in (False, True):
        sfx = "aligned" if aligned else "unaligned"
        # Samples on integer and half-integer coordinates: bins of 2 pixels
        # with one sample (the bin's middle) or two (a quarter in).
        off = 0.5 if aligned else 0.0
        for ratio in (1, -1):
            add(
                "pixel_grid_%s_%s_f32" % (sfx, "sr1" if ratio == 1 else "adaptive"),
                lambda r: spec(
                    (1, 2, 9, 10),
                    np.concatenate(
                        [
                            [[0 + off, 0 + off, 6 + off, 4 + off]],
                            [[2 + off, 1 + off, 8 + off, 9 + off]],
                            b_integer(r, 2, 9, 10) + off,
                            b_integer(r, 2, 9, 10, half=True) + off,
                        ]
                    ),
                    (2, 3),
                    1.0,
                    ratio,
                    aligned,
                ),
            )
    add(
        "image_1x1_f32",
        lambda r: spec(
            (2, 2, 1, 1),
            [
                [0, 0, 1, 1],
                [-0.5, -0.5, 0.5, 0.5],
                [-2, -2, 3, 3],
                [0.2, 0.4, 0.3, 0.6],
            ],
            (2, 3),
            1.0,
            2,
            box_ind=[0, 1, 1, 0],
        ),
    )
    add(
        "image_h1_f32",
        lambda r: spec(
            (1, 2, 1, 9), b_partly_outside(r, 4, 1, 9), (2, 3), 1.0, -1, True
        ),
    )
    add(
        "image_w1_f32",
        lambda r: spec((1, 2, 9, 1), b_partly_outside(r, 4, 9, 1), (3, 2), 1.0, 2),
    )
    add(
        "feature_40x40_f32",
        lambda r: spec((1, 2, 40, 40), b_inside(r, 3, 40, 40, least=8), (7, 7), 0.5),
    )
    add(
        "channels_1_f32",
        lambda r: spec(
            (2, 1, 8, 9), b_mixed(r, 8, 9), (2, 3), 0.25, 2, False, box_ind=[1, 0] * 4
        ),
    )
    add(
        "channels_5_f32",
        lambda r: spec((1, 5, 8, 9), b_mixed(r, 8, 9), (2, 3), 0.125, -1, True),
    )
    add(
        "no_boxes_f32",
        lambda r: spec((2, 2, 5, 6), np.zeros((0, 4)), (2, 3)),
    )
    for aligned in (False, True):
        add(
            "large_coords_%s_sr2_f32" % ("aligned" if aligned else "unaligned"),
            lambda r: spec(
                (1, 2, 6, 7),
                [
                    [-1e4, -1e4, 1e4, 1e4],
                    [-1e6, 2, 1e6, 4],
                    [2, 3, 1e4, 1e4],
                    [1e4, 1e4, -1e4, -1e4],
                    [-1e4, -1e4, -1e4, -1e4],
                    [3e4, 2, 3e4 + 1, 3],
                ],
                (3, 3),
                1.0,
                2,
                aligned,
            ),
        )
    return c


def special_value_cases():
    """Non-finite pixels: inside samples read them as torchvision does, and
    an outside sample over a NaN pixel 0 (the documented difference)."""
    c = {}
    r = rng_for("special_values_f32")
    image = r.standard_normal((1, 2, 7, 8)).astype(F32)
    image[0, 0, 3, 4] = np.inf
    image[0, 1, 2, 5] = -np.inf
    image[0, 0, 5, 1] = np.nan
    image[0, 1, 6, 7] = np.nan
    c["special_values_f32"] = spec(
        (1, 2, 7, 8),
        [[3, 2, 6, 4], [0.5, 4, 2.5, 6], [4, 3, 8, 7], [1, 1, 2, 2], [4, 3, 4, 3]],
        (2, 2),
        1.0,
        2,
        image=image,
    )
    r = rng_for("nan_pixel0_f32")
    image = r.standard_normal((2, 2, 6, 7)).astype(F32)
    image[:, 0, 0, 0] = np.nan
    image[:, 1, 0, 0] = np.inf
    c["nan_pixel0_f32"] = spec(
        (2, 2, 6, 7),
        [[-4, -4, 3, 3], [1, 1, 5, 4], [5, 3, 12, 10], [-9, -9, -3, -3]],
        (2, 2),
        1.0,
        2,
        box_ind=[0, 1, 0, 1],
        image=image,
    )
    return c


NOTES = {
    "nan_pixel0_f32": (
        "pixel 0 of each channel is NaN or inf: torchvision's forward adds "
        "0 * pixel 0 for every outside sample and gives NaN; the reference "
        "skips outside samples"
    ),
}


def all_specs():
    specs = {}
    specs.update(matrix_cases())
    specs.update(geometry_cases())
    specs.update(special_value_cases())
    return specs


# ---------------------------------------------------------------------------
# torchvision


def rois_for(boxes, box_ind, box_format):
    """The boxes as torchvision takes them: Tensor[K, 5] or a list per image."""
    b = torch.from_numpy(np.ascontiguousarray(boxes))
    if box_format == "list":
        assert np.all(np.diff(box_ind) >= 0), "list boxes must be sorted by image"
        batch = int(box_ind.max()) + 1 if len(box_ind) else 0
        return [b[torch.from_numpy(box_ind == n)] for n in range(batch)]
    ind = torch.from_numpy(box_ind.astype(boxes.dtype)[:, None])
    return torch.cat([ind, b], 1)


def tv_forward_backward(image, boxes, box_ind, s, grads=None, rng=None):
    """torchvision's output, the grads and torchvision's input gradient.

    `grads` (of the output's shape) is drawn from `rng` when not given.
    Checks that autograd and the backward op give the same bits.
    """
    x = torch.from_numpy(image.copy()).requires_grad_()
    rois = rois_for(boxes, box_ind, s["box_format"])
    args = (s["output_size"], s["scale"], s["sampling_ratio"], s["aligned"])
    out = roi_align(x, rois, *args)
    if grads is None:
        grads = rng.standard_normal(tuple(out.shape)).astype(image.dtype)
    (out * torch.from_numpy(grads)).sum().backward()
    direct = torch.ops.torchvision._roi_align_backward(
        torch.from_numpy(grads),
        _k5(boxes, box_ind),
        s["scale"],
        s["output_size"][0],
        s["output_size"][1],
        *image.shape,
        s["sampling_ratio"],
        s["aligned"],
    )
    assert x.grad.numpy().tobytes() == direct.numpy().tobytes(), "autograd != op"
    return out.detach().numpy(), grads, x.grad.numpy()


def _k5(boxes, box_ind):
    ind = torch.from_numpy(box_ind.astype(boxes.dtype)[:, None])
    return torch.cat([ind, torch.from_numpy(boxes)], 1)


def make_image(name, s):
    if s["image"] is not None:
        return s["image"].astype(s["dtype"])
    r = rng_for("image/" + name)
    return r.standard_normal(s["feature"]).astype(s["dtype"])


def roi_align_case(name, s):
    image = make_image(name, s)
    boxes, box_ind = s["boxes"], s["box_ind"]
    case = {
        "kind": np.array("roi_align"),
        "image": image,
        "boxes": boxes,
        "box_ind": box_ind,
        "output_size": np.array(s["output_size"], dtype=np.int64),
        "spatial_scale": np.array(s["scale"], dtype=F64),
        "sampling_ratio": np.array(s["sampling_ratio"], dtype=np.int64),
        "aligned": np.array(s["aligned"]),
        "box_format": np.array(s["box_format"]),
    }
    try:
        out, grads, grad_image = tv_forward_backward(
            image, boxes, box_ind, s, rng=rng_for("grads/" + name)
        )
    except Exception as e:  # noqa: BLE001 - record whatever torchvision raises
        case["kind"] = np.array("error")
        case["error"] = np.array("%s: %s" % (type(e).__name__, e))
        return case
    case.update(out=out, grads=grads, grad_image=grad_image)
    case["note"] = np.array(NOTES.get(name, ""))
    with np.errstate(over="ignore"):
        boxes16 = boxes.astype(F16)
    if np.all(np.isfinite(boxes16)):
        # float16 boxes that overflow would crash torchvision (see --report).
        out16, _, grad16 = tv_forward_backward(
            image.astype(F16), boxes16, box_ind, s, grads=grads.astype(F16)
        )
        case["out_float16"] = out16
        case["grad_image_float16"] = grad16
    return case


# ---------------------------------------------------------------------------
# MultiScaleRoIAlign


FPN_NAMES = ("p2", "p3", "p4")


def multi_scale_case():
    name = "multi_scale_fpn_f32"
    r = rng_for(name)
    image_sizes = [(128, 160), (120, 150)]
    channels = 3
    features = {
        n: r.standard_normal((2, channels, 128 // stride, 160 // stride)).astype(F32)
        for n, stride in zip(FPN_NAMES, (4, 8, 16))
    }
    # sqrt(area) of about 20-60 maps to p2, 112-220 to p3, 224 and more to p4.
    boxes = [
        np.array(
            [
                [10.5, 12.25, 40.0, 50.5],
                [60.0, 30.0, 75.5, 52.0],
                [20.0, 8.0, 140.0, 120.0],
                [-30.0, -20.0, 210.0, 230.0],
                [100.25, 90.5, 159.0, 127.0],
            ],
            dtype=F32,
        ),
        np.array(
            [
                [0.0, 0.0, 112.0, 112.0],
                [30.5, 40.25, 58.0, 61.0],
                [5.0, 3.0, 149.0, 119.0],
            ],
            dtype=F32,
        ),
    ]
    pooler = MultiScaleRoIAlign(
        featmap_names=list(FPN_NAMES), output_size=7, sampling_ratio=2
    )
    inputs = {
        n: torch.from_numpy(f.copy()).requires_grad_() for n, f in features.items()
    }
    out = pooler(inputs, [torch.from_numpy(b) for b in boxes], image_sizes)
    grads = r.standard_normal(tuple(out.shape)).astype(F32)
    (out * torch.from_numpy(grads)).sum().backward()
    levels = pooler.map_levels([torch.from_numpy(b) for b in boxes]).numpy()
    case = {
        "kind": np.array("multi_scale"),
        "image_sizes": np.array(image_sizes, dtype=np.int64),
        "output_size": np.array([7, 7], dtype=np.int64),
        "sampling_ratio": np.array(2, dtype=np.int64),
        "scales": np.array(pooler.scales, dtype=F64),
        "levels": levels.astype(np.int64),
        "out": out.detach().numpy(),
        "grads": grads,
    }
    for n in FPN_NAMES:
        case["feature_" + n] = features[n]
        case["grad_" + n] = inputs[n].grad.numpy()
    for i, b in enumerate(boxes):
        case["boxes_%d" % i] = b
    return name, case


# ---------------------------------------------------------------------------
# The file


def all_cases():
    cases = {name: roi_align_case(name, s) for name, s in all_specs().items()}
    name, case = multi_scale_case()
    cases[name] = case
    return cases


def write_npz(path, cases):
    names = list(cases)
    assert len(set(names)) == len(names)
    flat = {
        "cases": np.array(names, dtype=str),
        "torch_version": np.array(torch.__version__),
        "torchvision_version": np.array(torchvision.__version__),
        "numpy_version": np.array(np.__version__),
    }
    for name, c in cases.items():
        assert "/" not in name and name not in flat
        for key, value in c.items():
            value = np.asarray(value)
            assert value.dtype != object
            flat[name + "/" + key] = value
    np.savez_compressed(path, **flat)
    with np.load(path, allow_pickle=False) as f:
        assert list(f["cases"]) == names
        for k in flat:
            f[k]
    print("wrote %s: %d cases, %d bytes" % (path, len(names), os.path.getsize(path)))


def load(path):
    with np.load(path, allow_pickle=False) as f:
        names = [str(n) for n in f["cases"]]
        cases = {
            n: {k[len(n) + 1 :]: f[k] for k in f.files if k.startswith(n + "/")}
            for n in names
        }
        versions = {k: str(f[k]) for k in ("torch_version", "torchvision_version")}
    return cases, versions


# ---------------------------------------------------------------------------
# --check


def bits_equal(a, b):
    a, b = np.asarray(a), np.asarray(b)
    return a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()


def same_but_nan(a, b):
    """Same bits wherever either is not NaN, and NaN at the same places."""
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    nan = np.isnan(a)
    return bool(np.array_equal(nan, np.isnan(b))) and bits_equal(a[~nan], b[~nan])


def args_of(c):
    return dict(
        spatial_scale=float(c["spatial_scale"]),
        sampling_ratio=int(c["sampling_ratio"]),
        aligned=bool(c["aligned"]),
    )


def check_case(name, c):
    """(ok, line) for one case against the reference."""
    kw = args_of(c)
    osz = tuple(c["output_size"])
    out = reference.roi_align(c["image"], c["boxes"], c["box_ind"], osz, **kw)
    if c["kind"] == "error":
        zero = not np.any(out)
        return zero, "torchvision raised; reference gives %s" % (
            "zeros" if zero else "NON-ZERO"
        )
    grad = reference.roi_align_grad_image(
        c["grads"], c["boxes"], c["box_ind"], c["image"].shape, **kw
    )
    same_grad = bits_equal(grad, c["grad_image"])
    if name == "nan_pixel0_f32":
        # Only where torchvision's NaN comes from an outside sample.
        differ = ~np.isfinite(c["out"]) & np.isfinite(out)
        same = bits_equal(out[~differ], c["out"][~differ]) and bool(differ.any())
        text = (
            "%d outputs NaN in torchvision, finite here; the rest bits" % differ.sum()
        )
    elif name.startswith("special_values"):
        same = same_but_nan(out, c["out"])
        same_grad = same_but_nan(grad, c["grad_image"])
        text = "bits (NaN at the same places)"
    else:
        same = bits_equal(out, c["out"])
        text = "forward %s" % ("bits" if same else "DIFF")
    text += ", image gradient %s" % ("bits" if same_grad else "DIFF")
    return same and same_grad, text


def check_multi_scale(c):
    features = [c["feature_" + n] for n in FPN_NAMES]
    boxes = [c[k] for k in sorted(k for k in c if k.startswith("boxes_"))]
    out, levels, scales = reference.multi_scale_roi_align(
        features,
        boxes,
        c["image_sizes"],
        tuple(c["output_size"]),
        int(c["sampling_ratio"]),
    )
    ok = bits_equal(out, c["out"]) and np.array_equal(levels, c["levels"])
    ok &= np.array_equal(scales, c["scales"])
    all_boxes = np.concatenate(boxes)
    box_ind = np.concatenate([np.full(len(b), n) for n, b in enumerate(boxes)])
    for level, (n, scale) in enumerate(zip(FPN_NAMES, scales)):
        at = np.flatnonzero(levels == level)
        grad = reference.roi_align_grad_image(
            c["grads"][at],
            all_boxes[at],
            box_ind[at],
            c["feature_" + n].shape,
            scale,
            int(c["sampling_ratio"]),
        )
        ok &= bits_equal(grad, c["grad_" + n])
    counts = np.bincount(levels, minlength=len(FPN_NAMES)).tolist()
    return ok, "levels %s, scales %s: %s" % (counts, scales, "bits" if ok else "DIFF")


def check(outdir):
    cases, versions = load(os.path.join(outdir, "roi_align.npz"))
    print(
        "roi_align.npz (torch %(torch_version)s, torchvision %(torchvision_version)s)"
        % versions
    )
    ok, counts = True, {}
    for name, c in cases.items():
        if c["kind"] == "multi_scale":
            good, text = check_multi_scale(c)
        else:
            good, text = check_case(name, c)
        ok &= good
        key = (str(c["kind"]), str(c["image"].dtype) if "image" in c else "float32")
        counts.setdefault(key, [0, 0])[0 if good else 1] += 1
        print("  %-44s %s" % (name, text))
    for (kind, dt), (good, bad) in sorted(counts.items()):
        print("  %s %s: %d as expected, %d not" % (kind, dt, good, bad))
    ok &= check_onnx(cases)
    print("reference check:", "all as expected" if ok else "MISMATCHES")
    return ok


def check_onnx(cases):
    """ONNX Runtime's forward against torchvision's bits, where installed."""
    try:
        import onnx
        import onnxruntime
    except ImportError:
        print("onnx/onnxruntime not installed: ONNX Runtime not compared")
        return True
    ort = load_file("onnx_roi_align", "tests", "_onnx_roi_align.py")
    print(
        "ONNX Runtime %s, onnx %s, opset 16:"
        % (onnxruntime.__version__, onnx.__version__)
    )
    tally = {}
    for name, c in cases.items():
        if c["kind"] == "multi_scale":
            continue
        dt = str(c["image"].dtype)
        try:
            got = ort.roi_align(
                c["image"],
                c["boxes"],
                c["box_ind"],
                tuple(c["output_size"]),
                **args_of(c),
            )
        except Exception as e:  # noqa: BLE001 - ONNX Runtime's errors vary
            got, what = None, "error: %s" % str(e).splitlines()[0][:120]
        if c["kind"] == "error":
            what = what if got is None else "returned (torchvision raised)"
            outcome = "torchvision raised"
        elif got is None:
            outcome = "ONNX Runtime raised"
        elif bits_equal(got, c["out"]) or (
            name.startswith("special_values") and same_but_nan(got, c["out"])
        ):
            outcome, what = "bits", ""
        else:
            outcome = "differs"
            nan = np.isnan(got) & ~np.isnan(c["out"])
            what = "%d of %d differ (%d NaN where torchvision is not)" % (
                np.sum(~((got == c["out"]) | (np.isnan(got) & np.isnan(c["out"])))),
                got.size,
                nan.sum(),
            )
        tally.setdefault((dt, outcome), []).append(name)
        if outcome != "bits":
            print("  %-44s %s %s" % (name, outcome, what))
    for (dt, outcome), names in sorted(tally.items()):
        print("  %s %s: %d cases" % (dt, outcome, len(names)))
    return True


# ---------------------------------------------------------------------------
# --report


_PROBE = r"""
import sys, torch
from torchvision.ops import roi_align
torch.set_num_threads(1)
x = torch.arange(42, dtype=torch.float32).reshape(1, 1, 6, 7)
box = [0.0] + [float(v) for v in sys.argv[1].split(",")]
try:
    out = roi_align(x, torch.tensor([box]), (2, 3), 1.0, int(sys.argv[3]),
                    sys.argv[2] == "1")
    print("returned", "zeros" if not out.any() else out.flatten().tolist())
except Exception as e:
    print("raised %s: %s" % (type(e).__name__, e))
"""


def probe(box, aligned, ratio):
    """What torchvision does with one box, in a child process (it may crash)."""
    run = subprocess.run(
        [sys.executable, "-c", _PROBE, box, "1" if aligned else "0", str(ratio)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    if run.returncode < 0:
        return "killed by signal %d" % -run.returncode
    return run.stdout.strip() or run.stderr.strip().splitlines()[-1]


def report(outdir):
    print(
        "torch",
        torch.__version__,
        "torchvision",
        torchvision.__version__,
        "numpy",
        np.__version__,
    )
    x = torch.ones((1, 1, 4, 4))
    rois = torch.tensor([[0.0, 0.5, 0.5, 3.0, 3.0]])
    for dt in (torch.float16, torch.bfloat16, torch.float32, torch.float64):
        try:
            xi = x.to(dt).requires_grad_()
            roi_align(xi, rois.to(dt), 2, 1.0, 2).sum().backward()
            what = "forward and backward"
        except Exception as e:  # noqa: BLE001
            what = "%s: %s" % (type(e).__name__, str(e).splitlines()[0])
        print("(a) %s on the CPU: %s" % (dt, what))

    print("(b) odd boxes, 6x7 map, 2x3 output (child processes):")
    for box in (
        "nan,1,4,3",
        "1,1,4,nan",
        "inf,1,4,3",
        "1,1,inf,3",
        "-inf,1,4,3",
        "1e30,1,4,3",
        "1,1,1e10,3",
        "-3e38,1,3e38,3",
        "4,1,1,3",
        "1,3,4,1",
        "4,3,1,1",
        "1.2,1,1,3",
    ):
        for aligned in (False, True):
            for ratio in (2, -1):
                print(
                    "    box %-16s aligned=%-5s ratio=%2d: %s"
                    % (box, aligned, ratio, probe(box, aligned, ratio))
                )

    cases, _ = load(os.path.join(outdir, "roi_align.npz"))
    torch.set_num_threads(2)
    c = cases["feature_40x40_f32"]
    kw = args_of(c)
    rois = _k5(c["boxes"], c["box_ind"])
    first = None
    same = True
    for _ in range(20):
        x = torch.from_numpy(c["image"].copy()).requires_grad_()
        out = roi_align(
            x,
            rois,
            tuple(c["output_size"]),
            kw["spatial_scale"],
            kw["sampling_ratio"],
            kw["aligned"],
        )
        (out * torch.from_numpy(c["grads"])).sum().backward()
        now = out.detach().numpy().tobytes() + x.grad.numpy().tobytes()
        same &= first is None or now == first
        first = first or now
    torch.set_num_threads(1)
    print("(c) 20 runs on 2 threads, forward and backward: identical bits = %s" % same)

    # torchvision's float16 kernel computes every operation in float16; the
    # reference in float16 arithmetic (torchvision's order) says whether
    # that is all it does.
    emulated = [0, 0]
    errors = {"tv16": [], "ref32": [], "f32": []}
    names = []
    for name, c in cases.items():
        if (
            c["kind"] != "roi_align"
            or "out_float16" not in c
            or name.startswith(("nan", "special"))
        ):
            continue
        kw = args_of(c)
        geometry = (kw["spatial_scale"], kw["sampling_ratio"], kw["aligned"])
        osz = tuple(c["output_size"])
        image16, boxes16 = c["image"].astype(F16), c["boxes"].astype(F16)
        grads16 = c["grads"].astype(F16)
        em_out = reference._roi_align(
            image16, boxes16, c["box_ind"], osz, *geometry, True, F16
        )
        em_grad = reference._roi_align_grad_image(
            grads16, boxes16, c["box_ind"], c["image"].shape, *geometry, True, F16
        )
        good = bits_equal(em_out, c["out_float16"]) and bits_equal(
            em_grad, c["grad_image_float16"]
        )
        emulated[0 if good else 1] += 1
        if not good:
            print("    float16 emulation differs: %s" % name)
        # Accuracy against the float64 yardstick of the same float16 inputs.
        yard = reference.roi_align(
            image16, boxes16.astype(F32), c["box_ind"], osz, exact=False, **kw
        )
        mine = reference.roi_align(
            image16, boxes16.astype(F32), c["box_ind"], osz, **kw
        )
        scale = max(1.0, float(np.max(np.abs(yard), initial=0)))
        errors["tv16"].append(
            np.max(np.abs(c["out_float16"] - yard), initial=0) / scale
        )
        errors["ref32"].append(
            np.max(np.abs(mine.astype(F16) - yard), initial=0) / scale
        )
        errors["f32"].append(np.max(np.abs(mine - yard), initial=0) / scale)
        names.append(name)
    print(
        "(d) torchvision float16 = the reference's arithmetic in float16 (forward "
        "and image gradient): %d cases bits, %d not" % tuple(emulated)
    )
    print(
        "(e) forward, float16 inputs, max error relative to max(1, max|out|) vs the "
        "float64 yardstick over %d cases: torchvision float16 %.3g (median %.3g); "
        "float32 arithmetic rounded once to float16 %.3g; float32 arithmetic %.3g"
        % (
            len(errors["tv16"]),
            max(errors["tv16"]),
            np.median(errors["tv16"]),
            max(errors["ref32"]),
            max(errors["f32"]),
        )
    )
    worst = np.argsort(errors["tv16"])[::-1][:3]
    print(
        "    torchvision float16's worst cases (its coordinates are float16): %s"
        % ", ".join("%s %.3g" % (names[i], errors["tv16"][i]) for i in worst)
    )


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--outdir", default=HERE)
    p.add_argument(
        "--check", action="store_true", help="compare with the NumPy reference"
    )
    p.add_argument(
        "--report", action="store_true", help="print facts measured with torchvision"
    )
    p.add_argument("--no-write", action="store_true", help="do not (re)write the file")
    a = p.parse_args(argv)
    torch.set_num_threads(1)
    if not a.no_write:
        os.makedirs(a.outdir, exist_ok=True)
        write_npz(os.path.join(a.outdir, "roi_align.npz"), all_cases())
    status = 0
    if a.check and not check(a.outdir):
        status = 1
    if a.report:
        report(a.outdir)
    return status


if __name__ == "__main__":
    sys.exit(main())
