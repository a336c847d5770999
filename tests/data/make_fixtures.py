"""Make the TensorFlow golden fixtures used by cropgrad's tests.

The test suite compares cropgrad with results that TensorFlow computed once and
that are committed next to this script; TensorFlow is never imported by the
tests. Re-create the files with a Python that has TensorFlow installed, from
the repository root:

    python3 -m venv /path/to/tfvenv
    /path/to/tfvenv/bin/pip install tensorflow-cpu numpy
    /path/to/tfvenv/bin/python tests/data/make_fixtures.py

Options: ``--outdir DIR`` writes the files elsewhere (default: this script's
folder); ``--check`` compares the files bit for bit with cropgrad's NumPy
reference (``cropgrad/_reference/``, written from ``docs/semantics.md``
and loaded from its folder, so no compiled cropgrad is needed; a NaN only
has to meet a NaN there, see `nan_signs_apart`); ``--report``
prints facts measured with TensorFlow (determinism, denormal flushing,
float16 accuracy, accepted dtypes, error messages).

The committed files were made with TensorFlow 2.21.0 (tensorflow-cpu wheel),
NumPy 2.4.6, Python 3.11.7 on x86-64 Linux. Each file records the version
that made it under the key ``tf_version``.

TensorFlow runs with op determinism enabled and with one inter-op and one
intra-op thread, set before any op runs: its multi-threaded CPU kernel for
CropAndResizeGradImage loses updates on overlapping boxes, so only the serial
result is a usable reference. All inputs come from NumPy generators seeded
from each case's name, so a case's inputs do not change when cases are added.

Files and keys (every ``NAME`` is listed in the 1-D unicode array ``cases``;
strings are stored as NumPy unicode arrays, so ``np.load(path,
allow_pickle=False)`` reads them):

grad_image.npz  -- tf.raw_ops.CropAndResizeGradImage
    NAME/grads       float32 [N, crop_h, crop_w, D]
    NAME/boxes       float32 [N, 4]
    NAME/box_ind     int32 [N]
    NAME/image_size  int32 [4]
    NAME/method      0-d str, "bilinear" or "nearest"
    NAME/out_float32, NAME/out_float64, NAME/out_float16
                     TensorFlow's output for T = float32 / float64 / float16
forward.npz  -- tf.raw_ops.CropAndResize
    NAME/image (its own dtype), NAME/boxes, NAME/box_ind,
    NAME/crop_size int32 [2], NAME/method, NAME/extrapolation_value (0-d
    float32), NAME/out float32 [N, crop_h, crop_w, D]
grad_boxes.npz  -- tf.raw_ops.CropAndResizeGradBoxes (bilinear)
    NAME/grads float32, NAME/image (its own dtype), NAME/boxes,
    NAME/box_ind, NAME/method, NAME/out float32 [N, 4]

Case names containing ``threads`` are large enough for teams of 2 to 4
workers (with the tests' serial threshold lowered); ``nonfinite`` and
``nan_extrapolation`` cases hold infinite and NaN gradients, pixels or
extrapolation values.

Case names containing ``subnormal`` involve subnormal float32 values.
TensorFlow's CPU kernels run with flush-to-zero and denormals-are-zero, so
those outputs are the flushed results; an IEEE computation differs from them.
"""

import argparse
import importlib.util
import os
import sys
import zlib

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

F32 = np.float32
HERE = os.path.dirname(os.path.abspath(__file__))


def configure_tensorflow():
    """Single-threaded, deterministic kernels; must run before any op."""
    tf.config.threading.set_inter_op_parallelism_threads(1)
    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.experimental.enable_op_determinism()


# ---------------------------------------------------------------------------
# Inputs


def rng_for(name):
    return np.random.default_rng(zlib.crc32(name.encode("utf-8")))


def ordered_boxes(rng, n, lo, hi):
    """n random boxes with y1 <= y2 and x1 <= x2, coordinates in [lo, hi]."""
    b = rng.uniform(lo, hi, size=(n, 4))
    y = np.sort(b[:, 0::2], axis=1)
    x = np.sort(b[:, 1::2], axis=1)
    return np.stack([y[:, 0], x[:, 0], y[:, 1], x[:, 1]], axis=1).astype(F32)


def any_order_boxes(rng, n, lo, hi):
    return rng.uniform(lo, hi, size=(n, 4)).astype(F32)


def geom(image_size, crop, boxes, box_ind=None):
    boxes = np.asarray(boxes, dtype=F32).reshape(-1, 4)
    if box_ind is None:
        box_ind = np.zeros(len(boxes), dtype=np.int32)
    return {
        "image_size": np.asarray(image_size, dtype=np.int32),
        "crop": tuple(int(c) for c in crop),
        "boxes": boxes,
        "box_ind": np.asarray(box_ind, dtype=np.int32),
    }


# Geometries shared by the three ops. Each takes a seeded generator.


def g_random_inside(r):
    return geom(
        (2, 8, 9, 3), (4, 5), ordered_boxes(r, 5, 0.0, 1.0), r.integers(0, 2, 5)
    )


def g_overlapping(r):
    base = np.array([0.15, 0.1, 0.85, 0.9])
    jitter = r.uniform(-0.03, 0.03, size=(12, 4))
    boxes = np.concatenate([np.tile(base, (4, 1)), base + jitter])
    return geom((1, 6, 7, 2), (5, 6), boxes)


def g_flipped(r):
    boxes = [
        [0.9, 0.8, 0.1, 0.2],  # both flipped
        [0.8, 0.1, 0.2, 0.9],  # y flipped only
        [0.1, 0.9, 0.9, 0.2],  # x flipped only
        [1.0, 1.0, 0.0, 0.0],
    ]  # whole image, upside down
    flip = ordered_boxes(r, 3, 0.0, 1.0)[:, [2, 3, 0, 1]]
    return geom((1, 7, 8, 3), (4, 4), np.concatenate([boxes, flip]))


def g_degenerate(r):
    boxes = [
        [0.3, 0.2, 0.3, 0.8],  # y1 == y2
        [0.1, 0.5, 0.9, 0.5],  # x1 == x2
        [0.4, 0.4, 0.4, 0.4],  # a point
        [0.0, 0.0, 0.0, 0.0],
        [1.0, 1.0, 1.0, 1.0],
        [0.55, 0.35, 0.55, 0.35],
    ]
    return geom((1, 6, 6, 2), (3, 4), boxes)


def g_partly_outside(r):
    boxes = [
        [-0.5, -0.2, 0.5, 0.6],
        [0.5, 0.5, 1.5, 1.4],
        [-0.3, 0.2, 1.3, 0.8],
        [0.2, -0.7, 0.8, 1.7],
        [1.4, 1.2, -0.4, -0.3],
    ]  # flipped and outside on all sides
    boxes = np.concatenate([boxes, any_order_boxes(r, 3, -0.6, 1.6)])
    return geom((1, 7, 9, 2), (5, 5), boxes)


def g_wholly_outside(r):
    just_above_one = np.nextafter(F32(1.0), F32(2.0))
    just_below_zero = -np.float32(1e-7)
    boxes = [
        [1.1, 0.2, 1.9, 0.8],
        [-0.9, -0.8, -0.1, -0.2],
        [0.2, 1.05, 0.8, 2.0],
        [-2.0, -2.0, -1.5, -1.01],
        [just_above_one, 0.0, 1.5, 1.0],
        [0.0, just_below_zero, 1.0, -0.5],
    ]
    return geom((1, 5, 6, 2), (3, 3), boxes)


def g_crop_1x1(r):
    boxes = np.concatenate(
        [
            [
                [0.25, 0.1, 0.5, 0.5],  # centre row exactly 1.5 (nearest: halves)
                [0.0, 0.0, 1.0, 1.0],
                [0.9, 0.8, 0.1, 0.3],
                [-0.5, -0.5, 0.5, 0.5],
                [1.2, 0.2, 1.6, 0.9],  # centre outside
                [0.7, 0.7, 0.7, 0.7],
            ],
            ordered_boxes(r, 3, -0.2, 1.2),
        ]
    )
    return geom((2, 5, 7, 3), (1, 1), boxes, r.integers(0, 2, len(boxes)))


def g_crop_h1(r):
    boxes = np.concatenate(
        [
            [[0.25, 0.0, 0.5, 1.0], [0.9, 0.9, 0.2, 0.1]],
            any_order_boxes(r, 3, -0.2, 1.2),
        ]
    )
    return geom((1, 6, 8, 2), (1, 5), boxes)


def g_crop_w1(r):
    boxes = np.concatenate(
        [
            [[0.0, 0.25, 1.0, 0.5], [0.9, 0.9, 0.2, 0.1]],
            any_order_boxes(r, 3, -0.2, 1.2),
        ]
    )
    return geom((1, 8, 6, 2), (4, 1), boxes)


def g_image_h1(r):
    boxes = np.concatenate(
        [
            [[0.0, 0.0, 1.0, 1.0], [0.5, 0.9, 0.5, 0.1], [-3.0, 0.2, 5.0, 0.7]],
            any_order_boxes(r, 3, -0.3, 1.3),
        ]
    )
    return geom((2, 1, 6, 2), (3, 4), boxes, r.integers(0, 2, len(boxes)))


def g_image_w1(r):
    boxes = np.concatenate(
        [
            [[0.0, 0.0, 1.0, 1.0], [0.9, 0.5, 0.1, 0.5], [0.2, -3.0, 0.7, 5.0]],
            any_order_boxes(r, 3, -0.3, 1.3),
        ]
    )
    return geom((2, 6, 1, 2), (4, 3), boxes, r.integers(0, 2, len(boxes)))


def g_image_1x1(r):
    boxes = np.concatenate(
        [[[0.0, 0.0, 1.0, 1.0], [1.0, 1.0, 0.0, 0.0]], any_order_boxes(r, 2, -1.0, 2.0)]
    )
    return geom((1, 1, 1, 3), (2, 3), boxes)


def g_pixel_centres(r):
    # H=5, W=9, crop 5x9: coordinates that are multiples of 1/8 give sample
    # positions that are exact integers or exact halves.
    boxes = [
        [0.0, 0.0, 1.0, 1.0],  # every sample on a pixel centre
        [1.0, 1.0, 0.0, 0.0],  # same, flipped
        [0.25, 0.125, 0.75, 0.875],  # in_y 1,1.5,..,3; in_x 1,1.75,..
        [0.125, 0.0625, 0.625, 0.5625],  # halves: nearest rounds them up
        [0.5, 0.5, 0.5, 0.5],  # a point on a centre
        [1.0, 0.0, 1.0, 1.0],
    ]  # the last row, exactly H-1
    return geom((1, 5, 9, 2), (5, 9), boxes)


def g_multi_image(r):
    box_ind = [3, 0, 2, 0, 1, 3, 2, 2, 0]
    boxes = ordered_boxes(r, len(box_ind), -0.1, 1.1)
    return geom((4, 5, 6, 2), (3, 3), boxes, box_ind)


def g_depth1(r):
    return geom(
        (2, 9, 7, 1), (6, 5), any_order_boxes(r, 6, -0.1, 1.1), r.integers(0, 2, 6)
    )


def g_depth17(r):
    return geom((1, 6, 5, 17), (3, 4), ordered_boxes(r, 3, 0.0, 1.0))


def g_uneven_13x11(r):
    return geom(
        (2, 13, 11, 3), (7, 5), any_order_boxes(r, 5, -0.1, 1.1), r.integers(0, 2, 5)
    )


def g_large_1e4(r):
    # crop 5x5: the middle row/column of a symmetric box lands on pixel 0.
    boxes = [
        [-1e4, -1e4, 1e4, 1e4],
        [1e4, -1e4, -1e4, 1e4],
        [-1e4, 0.2, 0.8, 0.9],
        [0.1, 0.1, 1e4, 1e4],
        [1e4, 1e4, 1e4, 1e4],
        [-1e4, -1e4, -1e4, -1e4],
        [0.2, 0.3, 0.7, 0.6],
    ]
    return geom((1, 6, 7, 2), (5, 5), boxes)


def g_large_1e30(r):
    # crop 5x1: rows take the regular path, the column the box-centre path.
    boxes = [
        [-1e30, -1e30, 1e30, 1e30],
        [1e30, 1e30, -1e30, -1e30],
        [-1e30, 0.2, 0.8, 0.9],
        [0.1, 1e30, 1e30, -1e30],
        [1e30, 1e30, 1e30, 1e30],
        [-1e30, -1e30, -1e30, -1e30],
        [0.2, 0.3, 0.7, 0.6],
    ]
    return geom((1, 6, 7, 2), (5, 1), boxes)


def g_no_boxes(r):
    return geom((2, 3, 4, 2), (2, 2), np.zeros((0, 4)), np.zeros(0))


def g_random_mixed(r):
    return geom(
        (3, 10, 12, 4), (6, 7), any_order_boxes(r, 8, -0.25, 1.25), r.integers(0, 3, 8)
    )


def g_subnormal_box_coords(r):
    s = 1e-39
    boxes = [
        [s, 0.2, 0.8, 0.9],
        [0.1, -s, 0.7, 0.6],
        [-3e-40, -3e-40, 0.5, 0.5],
        [s, s, s, s],
        [-s, -s, -s, -s],  # IEEE: just below 0 (skipped); flushed: 0
        [0.2, 0.2, s, 0.8],
        [0.6, 0.3, -s, -s],
    ]
    return geom((1, 5, 6, 2), (3, 4), boxes)


def g_subnormal_grads(r):
    # Box 0 samples only pixel centres (0, 2, 4), so a pixel of channel 0,
    # which receives only subnormal gradients, shows the flushing directly.
    boxes = np.concatenate([[[0.0, 0.0, 1.0, 1.0]], ordered_boxes(r, 2, 0.0, 1.0)])
    return geom((1, 5, 5, 3), (3, 3), boxes)


def g_subnormal_underflow(r):
    # Sample positions 0.3, 1.3, 2.3: lerps of about 0.3 and 0.7.
    boxes = [
        [0.075, 0.075, 0.575, 0.575],
        [0.575, 0.075, 0.075, 0.575],
        [0.1, 0.2, 0.6, 0.7],
    ]
    return geom((1, 5, 5, 2), (3, 3), boxes)


def repeated(r, base, copies, jitter=0.02):
    """`base` boxes `copies` times: once exactly, then jittered (overlapping
    boxes, many samples on the same pixels)."""
    base = np.asarray(base, dtype=F32)
    parts = [base] + [
        base + r.uniform(-jitter, jitter, base.shape) for _ in range(copies - 1)
    ]
    return np.concatenate(parts).astype(F32)


def g_threads_bands(r):
    # Enough rows for bands of 4 threads (26 rows per image), tall boxes
    # that every band cuts through, flipped and partly outside ones, each
    # box 4 times: the cases that start a team of 2 to 4 workers.
    base = np.concatenate(
        [
            [[0.0, 0.1, 1.0, 0.9], [0.95, 0.0, 0.05, 1.0]],
            ordered_boxes(r, 3, -0.1, 1.1),
            any_order_boxes(r, 3, -0.25, 1.25),
        ]
    )
    boxes = repeated(r, base, 4)
    return geom((2, 26, 9, 3), (7, 5), boxes, np.tile(r.integers(0, 2, 8), 4))


def g_threads_channels(r):
    # Two rows of deep pixels: a team splits the channels, not the rows.
    boxes = repeated(r, any_order_boxes(r, 3, -0.2, 1.2), 4)
    return geom((1, 2, 5, 64), (2, 3), boxes)


def g_threads_images(r):
    # Four images, boxes spread over them: NCHW forward tasks are images.
    boxes = repeated(r, any_order_boxes(r, 6, -0.2, 1.2), 4)
    return geom((4, 7, 6, 3), (5, 4), boxes, np.tile(r.integers(0, 4, 6), 4))


def g_threads_crop_h1(r):
    # One-row crops: the boxes gradient gives each box a task of its own.
    return geom(
        (2, 6, 8, 2), (1, 5), any_order_boxes(r, 8, -0.2, 1.2), r.integers(0, 2, 8)
    )


def g_nonfinite(r):
    # Samples on pixel centres (weights of exactly 0 and 1: 0 * inf is NaN)
    # and overlapping random boxes (inf - inf is NaN).
    boxes = np.concatenate(
        [
            [[0.0, 0.0, 1.0, 1.0], [1.0, 1.0, 0.0, 0.0], [0.25, 0.0, 0.75, 0.6]],
            repeated(r, any_order_boxes(r, 3, -0.2, 1.2), 2),
        ]
    )
    return geom((2, 9, 8, 3), (5, 4), boxes, r.integers(0, 2, len(boxes)))


SUBNORMALS = np.array([1e-39, -3e-40, 5e-41, -1.1e-38, 1e-45, -7e-42], dtype=F32)


def make_grads(name, g, r):
    n = len(g["boxes"])
    ch, cw = g["crop"]
    d = int(g["image_size"][3])
    grads = r.standard_normal((n, ch, cw, d)).astype(F32)
    if "threads" in name:
        # The boxes' copies get their original's gradients (small files).
        grads = np.tile(grads[: n // 4], (4, 1, 1, 1))
    if "nonfinite_grads" in name:
        pick = r.random(grads.shape)
        grads[pick < 0.03] = np.inf
        grads[pick > 0.97] = -np.inf
        grads[(pick > 0.5) & (pick < 0.52)] = np.nan
    if "subnormal_grads" in name:
        mask = r.random(grads.shape) < 0.4
        grads[mask] = r.choice(SUBNORMALS, size=int(mask.sum()))
        grads[0, :, :, 0] = r.choice(SUBNORMALS, size=(ch, cw))
    elif "subnormal_underflow" in name:
        # Normal values near the bottom of float32's range: most products
        # with lerps around 0.3 are subnormal.
        sign = np.where(r.random(grads.shape) < 0.5, -1.0, 1.0)
        grads = (sign * r.uniform(1.0, 4.0, grads.shape) * 1e-38).astype(F32)
    return np.ascontiguousarray(grads)


# ---------------------------------------------------------------------------
# Cases


GRAD_IMAGE_GEOMETRIES = [
    ("random_inside", g_random_inside),
    ("overlapping", g_overlapping),
    ("flipped", g_flipped),
    ("degenerate", g_degenerate),
    ("partly_outside", g_partly_outside),
    ("wholly_outside", g_wholly_outside),
    ("crop_1x1", g_crop_1x1),
    ("crop_h1", g_crop_h1),
    ("crop_w1", g_crop_w1),
    ("image_h1", g_image_h1),
    ("image_w1", g_image_w1),
    ("image_1x1", g_image_1x1),
    ("pixel_centres", g_pixel_centres),
    ("multi_image", g_multi_image),
    ("depth1", g_depth1),
    ("depth17", g_depth17),
    ("uneven_13x11", g_uneven_13x11),
    ("large_1e4", g_large_1e4),
    ("large_1e30", g_large_1e30),
    ("no_boxes", g_no_boxes),
    ("random_mixed", g_random_mixed),
    ("subnormal_grads", g_subnormal_grads),
    ("subnormal_box_coords", g_subnormal_box_coords),
    ("subnormal_underflow", g_subnormal_underflow),
    ("threads_bands", g_threads_bands),
    ("threads_channels", g_threads_channels),
    ("nonfinite_grads", g_nonfinite),
]

METHODS = ("bilinear", "nearest")


def tf_grad_image(grads, boxes, box_ind, image_size, dtype, method):
    return tf.raw_ops.CropAndResizeGradImage(
        grads=tf.constant(grads),
        boxes=tf.constant(boxes),
        box_ind=tf.constant(box_ind),
        image_size=tf.constant(image_size),
        T=tf.as_dtype(dtype),
        method=method,
    ).numpy()


def tf_forward(image, boxes, box_ind, crop_size, method, extrapolation_value):
    return tf.raw_ops.CropAndResize(
        image=tf.constant(image),
        boxes=tf.constant(boxes),
        box_ind=tf.constant(box_ind),
        crop_size=tf.constant(crop_size),
        method=method,
        extrapolation_value=float(extrapolation_value),
    ).numpy()


def tf_grad_boxes(grads, image, boxes, box_ind, method="bilinear"):
    return tf.raw_ops.CropAndResizeGradBoxes(
        grads=tf.constant(grads),
        image=tf.constant(image),
        boxes=tf.constant(boxes),
        box_ind=tf.constant(box_ind),
        method=method,
    ).numpy()


def grad_image_cases():
    cases = {}
    for gname, gfun in GRAD_IMAGE_GEOMETRIES:
        r = rng_for("grad_image/" + gname)
        g = gfun(r)
        grads = make_grads(gname, g, r)
        for method in METHODS:
            c = {
                "grads": grads,
                "boxes": g["boxes"],
                "box_ind": g["box_ind"],
                "image_size": g["image_size"],
                "method": np.array(method),
            }
            for dt in ("float32", "float64", "float16"):
                c["out_" + dt] = tf_grad_image(
                    grads, g["boxes"], g["box_ind"], g["image_size"], dt, method
                )
            cases[gname + "_" + method] = c
    return cases


def make_image(shape, dtype, r, subnormal=False, nonfinite=False):
    dtype = np.dtype(dtype)
    if dtype.kind in "ui":
        info = np.iinfo(dtype)
        if dtype.itemsize == 8:
            # Mix small values with ones far beyond float32's 24-bit mantissa.
            big = r.integers(-(2**62), 2**62, size=shape, dtype=np.int64)
            small = r.integers(-1000, 1000, size=shape, dtype=np.int64)
            img = np.where(r.random(shape) < 0.5, big, small)
        else:
            img = r.integers(
                info.min, info.max, size=shape, endpoint=True, dtype=np.int64
            )
        return img.astype(dtype)
    if dtype == np.float16:
        img = (r.standard_normal(shape) * 30).astype(np.float16)
        img.flat[::7] = np.float16(3e-6)  # a float16 subnormal
        if nonfinite:
            _nonfinite_pixels(img, r)
        return img
    if dtype == np.float64:
        # Values that float32 cannot hold exactly, some large.
        img = r.standard_normal(shape) * 10.0 ** r.integers(-3, 9, size=shape)
        return img.astype(np.float64)
    img = (r.standard_normal(shape) * 5).astype(F32)
    if subnormal:
        mask = r.random(shape) < 0.5
        img[mask] = r.choice(SUBNORMALS, size=int(mask.sum()))
    if nonfinite:
        _nonfinite_pixels(img, r)
    return img


def _nonfinite_pixels(img, r):
    """About 4% each of inf and -inf pixels and 2% NaN, in place."""
    pick = r.random(img.shape)
    img[pick < 0.04] = np.inf
    img[pick > 0.96] = -np.inf
    img[(pick > 0.5) & (pick < 0.52)] = np.nan


def g_dtype_mix(r):
    """Inside, partly outside, flipped, degenerate and outside boxes."""
    boxes = np.concatenate(
        [
            ordered_boxes(r, 2, 0.0, 1.0),
            [
                [-0.3, 0.2, 0.7, 1.2],
                [0.9, 0.8, 0.1, 0.05],
                [0.5, 0.25, 0.5, 0.75],
                [1.2, -0.5, 1.8, 0.5],
                [0.0, 0.0, 1.0, 1.0],
            ],
        ]
    )
    return geom((2, 6, 7, 3), (4, 5), boxes, r.integers(0, 2, len(boxes)))


IMAGE_DTYPES = (
    "uint8",
    "uint16",
    "int8",
    "int16",
    "int32",
    "int64",
    "float16",
    "float32",
    "float64",
)


def g_forward_subnormal(r):
    g = g_subnormal_box_coords(r)
    g["image_size"] = np.array([1, 5, 6, 3], dtype=np.int32)
    return g


FORWARD_GEOMETRIES = [
    # (name, geometry, extrapolation_value)
    ("partly_outside", g_partly_outside, -1.5),
    ("wholly_outside", g_wholly_outside, -1.5),
    ("flipped", g_flipped, 0.0),
    ("degenerate", g_degenerate, 0.0),
    ("crop_1x1", g_crop_1x1, -1.5),
    ("crop_h1", g_crop_h1, -1.5),
    ("crop_w1", g_crop_w1, 0.0),
    ("image_h1", g_image_h1, -1.5),
    ("image_w1", g_image_w1, 0.0),
    ("pixel_centres", g_pixel_centres, 0.0),
    ("multi_image", g_multi_image, -1.5),
    ("depth17", g_depth17, 0.0),
    ("large_1e4", g_large_1e4, -1.5),
    ("large_1e30", g_large_1e30, -1.5),
    ("subnormal", g_forward_subnormal, 0.0),
    ("threads_images", g_threads_images, -1.5),
    ("nonfinite_pixels", g_nonfinite, 0.0),
    ("nan_extrapolation", g_partly_outside, np.nan),
]


def forward_case(image, g, method, extrapolation_value):
    crop_size = np.array(g["crop"], dtype=np.int32)
    ev = np.array(extrapolation_value, dtype=F32)
    return {
        "image": image,
        "boxes": g["boxes"],
        "box_ind": g["box_ind"],
        "crop_size": crop_size,
        "method": np.array(method),
        "extrapolation_value": ev,
        "out": tf_forward(image, g["boxes"], g["box_ind"], crop_size, method, ev),
    }


def forward_cases():
    cases = {}
    for i, dt in enumerate(IMAGE_DTYPES):
        r = rng_for("forward/" + dt)
        g = g_dtype_mix(r)
        image = make_image(tuple(g["image_size"]), dt, r)
        ev = -1.5 if i % 2 == 0 else 0.0
        for method in METHODS:
            cases["%s_%s" % (dt, method)] = forward_case(image, g, method, ev)
    for gname, gfun, ev in FORWARD_GEOMETRIES:
        r = rng_for("forward/" + gname)
        g = gfun(r)
        image = make_image(
            tuple(g["image_size"]),
            "float32",
            r,
            subnormal="subnormal" in gname,
            nonfinite="nonfinite" in gname,
        )
        for method in METHODS:
            cases["%s_%s" % (gname, method)] = forward_case(image, g, method, ev)
    # float16 infinities and NaN, read as float32 ones.
    r = rng_for("forward/nonfinite_pixels_float16")
    g = g_nonfinite(r)
    image = make_image(tuple(g["image_size"]), "float16", r, nonfinite=True)
    for method in METHODS:
        cases["nonfinite_pixels_float16_%s" % method] = forward_case(
            image, g, method, -1.5
        )
    return cases


GRAD_BOXES_GEOMETRIES = [
    ("random_inside", g_random_inside),
    ("overlapping", g_overlapping),
    ("flipped", g_flipped),
    ("degenerate", g_degenerate),
    ("partly_outside", g_partly_outside),
    ("wholly_outside", g_wholly_outside),
    ("crop_1x1", g_crop_1x1),
    ("crop_h1", g_crop_h1),
    ("crop_w1", g_crop_w1),
    ("image_h1", g_image_h1),
    ("image_w1", g_image_w1),
    ("pixel_centres", g_pixel_centres),
    ("multi_image", g_multi_image),
    ("depth17", g_depth17),
    ("uneven_13x11", g_uneven_13x11),
    ("large_1e4", g_large_1e4),
    ("large_1e30", g_large_1e30),
    ("subnormal", g_forward_subnormal),
    ("threads_images", g_threads_images),
    ("threads_crop_h1", g_threads_crop_h1),
    ("nonfinite_grads", g_nonfinite),
    ("nonfinite_pixels", g_nonfinite),
]


def grad_boxes_case(grads, image, g):
    return {
        "grads": grads,
        "image": image,
        "boxes": g["boxes"],
        "box_ind": g["box_ind"],
        "method": np.array("bilinear"),
        "out": tf_grad_boxes(grads, image, g["boxes"], g["box_ind"]),
    }


def grad_boxes_cases():
    cases = {}
    for dt in IMAGE_DTYPES:
        r = rng_for("grad_boxes/" + dt)
        g = g_dtype_mix(r)
        image = make_image(tuple(g["image_size"]), dt, r)
        grads = make_grads(dt, g, r)
        cases[dt] = grad_boxes_case(grads, image, g)
    for gname, gfun in GRAD_BOXES_GEOMETRIES:
        r = rng_for("grad_boxes/" + gname)
        g = gfun(r)
        sub = "subnormal" in gname
        image = make_image(tuple(g["image_size"]), "float32", r, subnormal=sub)
        # A few non-finite values, not the image gradient's many: a box
        # that meets one has a non-finite gradient, the others stay finite.
        grads = make_grads("sparse" if "nonfinite" in gname else gname, g, r)
        if gname == "nonfinite_grads":
            grads[1, 2, 1, 0] = np.nan
            grads[3, 0, 0, 2] = np.inf
            grads[5, 4, 3, 1] = -np.inf
            grads[6, 1, 2, 0] = np.inf
            grads[6, 3, 2, 0] = -np.inf
        if gname == "nonfinite_pixels":
            image[0, 4, 3, 0] = np.inf
            image[1, 2, 5, 1] = np.nan
            image[0, 7, 6, 2] = -np.inf
            image[1, 6, 1, 0] = np.inf
        if sub:
            mask = r.random(grads.shape) < 0.4
            grads[mask] = r.choice(SUBNORMALS, size=int(mask.sum()))
        cases[gname] = grad_boxes_case(grads, image, g)
    return cases


def write_npz(path, cases):
    names = list(cases)
    assert len(set(names)) == len(names)
    flat = {"cases": np.array(names, dtype=str), "tf_version": np.array(tf.__version__)}
    for name, c in cases.items():
        assert "/" not in name and name not in ("cases", "tf_version")
        for key, value in c.items():
            value = np.asarray(value)
            assert value.dtype != object
            flat[name + "/" + key] = value
    np.savez_compressed(path, **flat)
    # The files must load without pickle support.
    with np.load(path, allow_pickle=False) as f:
        assert list(f["cases"]) == names
        for k in flat:
            f[k]
    print("wrote %s: %d cases, %d bytes" % (path, len(names), os.path.getsize(path)))


# ---------------------------------------------------------------------------
# The NumPy reference (used by --check and --report only)


def _load_reference():
    """cropgrad's NumPy reference, loaded from its folder.

    ``cropgrad/_reference/`` imports nothing but NumPy (its modules import
    each other relatively), so it runs in an environment that has
    TensorFlow but no compiled cropgrad.
    """
    folder = os.path.join(HERE, os.pardir, os.pardir, "cropgrad", "_reference")
    spec = importlib.util.spec_from_file_location(
        "cropgrad_reference",
        os.path.join(folder, "__init__.py"),
        submodule_search_locations=[folder],
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


reference = _load_reference()


def bits_equal(a, b):
    a, b = np.asarray(a), np.asarray(b)
    return a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()


def nan_signs_apart(a, b):
    """How many NaNs differ (sign or payload) where `a` and `b` have the
    same bits everywhere else and NaNs at the same places; None otherwise.

    Where two NaNs meet in one addition, which one the sum keeps depends on
    the compiler's operand order (docs/semantics.md): TensorFlow's, NumPy's
    and cropgrad's may differ there.
    """
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape or a.dtype != b.dtype:
        return None
    nan = np.isnan(a)
    if not np.array_equal(nan, np.isnan(b)):
        return None
    bits = "u%d" % a.itemsize
    differ = a.view(bits) != b.view(bits)
    return None if (differ & ~nan).any() else int(differ.sum())


def verdict(out, expected):
    """(ok, word): bits, bits apart from n NaNs' signs, or DIFF."""
    if bits_equal(out, expected):
        return True, "bits"
    apart = nan_signs_apart(out, expected)
    if apart is None:
        return False, "DIFF"
    return True, "bits but %d NaN signs" % apart


def check(outdir):
    """Compare the files with the reference's exact arithmetic; print a summary.

    Every case is computed with flush-to-zero as TensorFlow computes it; the
    ``subnormal`` cases also say whether IEEE arithmetic would differ.
    """
    ok = True
    with np.load(os.path.join(outdir, "grad_image.npz"), allow_pickle=False) as f:
        print("grad_image.npz (tf %s)" % f["tf_version"])
        for name in f["cases"]:
            k = lambda s: f["%s/%s" % (name, s)]  # noqa: E731
            args = (
                k("grads"),
                k("boxes"),
                k("box_ind"),
                k("image_size"),
                str(k("method")),
            )
            res = []
            for dt in ("float32", "float64", "float16"):
                e = reference.grad_image(*args, dtype=dt, exact=True, flush=True)
                same, word = verdict(k("out_" + dt), e)
                ok &= same
                res.append("%s:%s" % (dt, word))
            if "subnormal" in name:
                ieee = reference.grad_image(*args, dtype="float32", exact=True)
                res.append("ieee-differs:%s" % (not bits_equal(k("out_float32"), ieee)))
            print("  %-34s %s" % (name, " ".join(res)))
    with np.load(os.path.join(outdir, "forward.npz"), allow_pickle=False) as f:
        print("forward.npz")
        for name in f["cases"]:
            k = lambda s: f["%s/%s" % (name, s)]  # noqa: E731
            args = (
                k("image"),
                k("boxes"),
                k("box_ind"),
                k("crop_size"),
                str(k("method")),
                k("extrapolation_value"),
            )
            e = reference.crop_and_resize(*args, exact=True, flush=True)
            same, word = verdict(k("out"), e)
            ok &= same
            extra = ""
            if "subnormal" in name:
                ieee = reference.crop_and_resize(*args, exact=True)
                extra = " ieee-differs:%s" % (not bits_equal(k("out"), ieee))
            print("  %-34s %s%s" % (name, word, extra))
    with np.load(os.path.join(outdir, "grad_boxes.npz"), allow_pickle=False) as f:
        print("grad_boxes.npz (and the float64 reference's relative difference)")
        for name in f["cases"]:
            k = lambda s: f["%s/%s" % (name, s)]  # noqa: E731
            args = (k("grads"), k("image"), k("boxes"), k("box_ind"))
            e = reference.grad_boxes(*args, exact=True, flush=True)
            same, word = verdict(k("out"), e)
            ok &= same
            ref = reference.grad_boxes(*args, flush="subnormal" in name)
            out = k("out").astype(np.float64)
            finite = np.isfinite(out) & np.isfinite(ref)
            scale = max(1.0, float(np.max(np.abs(ref[finite]), initial=0)))
            with np.errstate(invalid="ignore"):  # inf - inf where not finite
                err = float(np.max(np.abs(out - ref)[finite], initial=0)) / scale
            print("  %-34s %s, max rel diff %.2e" % (name, word, err))
    print("reference check:", "all as expected" if ok else "MISMATCHES")
    return ok


# ---------------------------------------------------------------------------
# Facts measured with TensorFlow (--report)


def report(outdir):
    print("tf.__version__ =", tf.__version__, " numpy", np.__version__)
    r = rng_for("report/determinism")
    g = geom(
        (1, 16, 16, 4),
        (16, 16),
        np.tile([0.1, 0.1, 0.9, 0.9], (64, 1)) + r.uniform(-0.05, 0.05, (64, 4)),
    )
    grads = r.standard_normal((64, 16, 16, 4)).astype(F32)
    for method in METHODS:
        for dt in ("float32", "float64", "float16"):
            first = tf_grad_image(
                grads, g["boxes"], g["box_ind"], g["image_size"], dt, method
            )
            same = all(
                bits_equal(
                    first,
                    tf_grad_image(
                        grads, g["boxes"], g["box_ind"], g["image_size"], dt, method
                    ),
                )
                for _ in range(30)
            )
            print(
                "(a) 30 repeats of 64 overlapping boxes, %s %s: "
                "bitwise identical = %s" % (method, dt, same)
            )

    one = tf_grad_image(
        np.full((1, 1, 1, 1), 1e-39, F32),
        np.array([[0.5, 0.5, 0.5, 0.5]], F32),
        np.zeros(1, np.int32),
        np.array([1, 3, 3, 1], np.int32),
        "float32",
        "bilinear",
    )
    print(
        "(b) one gradient 1e-39 at a pixel centre -> out[0,1,1,0] = %r "
        "(IEEE would give 1e-39)" % float(one[0, 1, 1, 0])
    )
    two = tf_grad_image(
        np.array([[[[1.0]], [[1e-39]]]], F32).reshape(1, 2, 1, 1),
        np.array([[0.5, 0.5, 0.5, 0.5]], F32),
        np.zeros(1, np.int32),
        np.array([1, 3, 3, 1], np.int32),
        "float64",
        "nearest",
    )
    print("    grads [1.0, 1e-39] on one pixel, T=float64: %r" % float(two[0, 1, 1, 0]))
    with np.load(os.path.join(outdir, "grad_image.npz"), allow_pickle=False) as f:
        for name in (
            "subnormal_grads_bilinear",
            "subnormal_underflow_bilinear",
            "subnormal_box_coords_nearest",
        ):
            k = lambda s: f["%s/%s" % (name, s)]  # noqa: E731
            ieee = reference.grad_image(
                k("grads"),
                k("boxes"),
                k("box_ind"),
                k("image_size"),
                str(k("method")),
                dtype="float32",
                exact=True,
            )
            tfo = k("out_float32")
            diff = np.flatnonzero(tfo.ravel() != ieee.ravel())
            if len(diff):
                i = diff[0]
                print(
                    "    %s: %d elements differ from IEEE; e.g. flat[%d]: "
                    "TF %r, IEEE %r"
                    % (
                        name,
                        len(diff),
                        i,
                        float(tfo.ravel()[i]),
                        float(ieee.ravel()[i]),
                    )
                )
        for name in (
            "random_mixed_bilinear",
            "overlapping_bilinear",
            "random_mixed_nearest",
        ):
            k = lambda s: f["%s/%s" % (name, s)]  # noqa: E731
            ref = reference.grad_image(  # float64 arithmetic
                k("grads"),
                k("boxes"),
                k("box_ind"),
                k("image_size"),
                str(k("method")),
            )
            e16 = np.abs(k("out_float16").astype(np.float64) - ref).max()
            e32 = np.abs(k("out_float32").astype(np.float64) - ref).max()
            once = np.abs(
                k("out_float32").astype(np.float16).astype(np.float64) - ref
            ).max()
            print(
                "(c) %s: max|ref| %.3f; max abs error vs float64 reference: "
                "TF float16 %.3g, TF float32 rounded once to float16 %.3g, "
                "TF float32 %.3g" % (name, np.abs(ref).max(), e16, once, e32)
            )

    def accepted(fn, dtypes):
        ok = []
        for dt in dtypes:
            try:
                fn(dt)
                ok.append(dt)
            except (tf.errors.InvalidArgumentError, TypeError):
                pass
        return ok

    all_dtypes = [
        "float16",
        "bfloat16",
        "float32",
        "float64",
        "uint8",
        "uint16",
        "uint32",
        "uint64",
        "int8",
        "int16",
        "int32",
        "int64",
        "bool",
        "complex64",
        "complex128",
    ]
    g1 = np.ones((1, 2, 2, 1), F32)
    b1 = np.array([[0, 0, 1, 1]], F32)
    i1 = np.zeros(1, np.int32)
    print(
        "(d) CropAndResizeGradImage T:",
        accepted(
            lambda dt: tf.raw_ops.CropAndResizeGradImage(
                grads=g1,
                boxes=b1,
                box_ind=i1,
                image_size=[1, 3, 3, 1],
                T=tf.as_dtype(dt),
            ),
            all_dtypes,
        ),
    )
    print(
        "    CropAndResize image:",
        accepted(
            lambda dt: tf.raw_ops.CropAndResize(
                image=tf.zeros((1, 3, 3, 1), dt), boxes=b1, box_ind=i1, crop_size=[2, 2]
            ),
            all_dtypes,
        ),
    )
    print(
        "    CropAndResizeGradBoxes image:",
        accepted(
            lambda dt: tf.raw_ops.CropAndResizeGradBoxes(
                grads=g1, image=tf.zeros((1, 3, 3, 1), dt), boxes=b1, box_ind=i1
            ),
            all_dtypes,
        ),
    )

    def error(label, fn):
        try:
            fn()
            print("(e) %s: no error" % label)
        except Exception as e:  # noqa: BLE001 - report whatever TF raises
            print(
                "(e) %s: %s.%s: %s"
                % (
                    label,
                    type(e).__module__,
                    type(e).__name__,
                    str(e).replace("\n", "\\n"),
                )
            )

    def gi(**kw):
        args = dict(
            grads=g1, boxes=b1, box_ind=i1, image_size=[1, 3, 3, 1], T=tf.float32
        )
        args.update(kw)
        return tf.raw_ops.CropAndResizeGradImage(**args)

    error("box_ind out of range", lambda: gi(box_ind=np.array([1], np.int32)))
    error("image_size with 3 elements", lambda: gi(image_size=[3, 3, 1]))
    error("crop_height 0", lambda: gi(grads=np.ones((1, 0, 2, 1), F32)))
    error("method bicubic", lambda: gi(method="bicubic"))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--outdir", default=HERE)
    p.add_argument(
        "--check",
        action="store_true",
        help="compare the files with the NumPy reference, bit for bit",
    )
    p.add_argument(
        "--report", action="store_true", help="print facts measured with TensorFlow"
    )
    p.add_argument("--no-write", action="store_true", help="do not (re)write the files")
    a = p.parse_args(argv)
    configure_tensorflow()
    if not a.no_write:
        os.makedirs(a.outdir, exist_ok=True)
        write_npz(os.path.join(a.outdir, "grad_image.npz"), grad_image_cases())
        write_npz(os.path.join(a.outdir, "forward.npz"), forward_cases())
        write_npz(os.path.join(a.outdir, "grad_boxes.npz"), grad_boxes_cases())
    status = 0
    if a.check and not check(a.outdir):
        status = 1
    if a.report:
        report(a.outdir)
    return status


if __name__ == "__main__":
    sys.exit(main())
