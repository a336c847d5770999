"""Bad input, argument by argument: the documented exception, never a crash.

Every row of the validation tables in docs/semantics.md and more, for every
op of both families: crop_and_resize's four and their ``raw_ops`` drop-ins
(which convert some arguments as TensorFlow does, docs/semantics.md "The
raw_ops drop-ins": those forms are refused by the NumPy API only), and
RoIAlign's four, in their default NCHW layout (the table's shapes are
written in NHWC and transposed for them).  Each case must

- raise the documented exception type (``ValueError``, ``TypeError``,
  ``IndexError`` or ``MemoryError``),
- with a non-empty message that names the offending argument,
- before any kernel runs,
- and leave every array and list the caller passed untouched;

and where a row gives a pattern, its message must match it too.
"""

import copy
import datetime
import re
import sys

import numpy as np
import pytest

import cropgrad
from cropgrad import _ops, raw_ops
from cropgrad import _reference as reference

# --------------------------------------------------------------------------
# Valid arguments each case starts from (fresh objects for every case).

BATCH, HEIGHT, WIDTH, DEPTH = 2, 4, 5, 3
NUM_BOXES, CROP_H, CROP_W = 2, 3, 2


def _grads():
    rng = np.random.default_rng(0)
    return rng.standard_normal((NUM_BOXES, CROP_H, CROP_W, DEPTH)).astype(np.float32)


def _image():
    rng = np.random.default_rng(1)
    return rng.standard_normal((BATCH, HEIGHT, WIDTH, DEPTH)).astype(np.float32)


def _boxes():
    return np.array([[0.1, 0.2, 0.8, 0.9], [0.9, 0.0, 0.2, 1.0]], dtype=np.float32)


def _box_ind():
    return np.array([1, 0], dtype=np.int32)


def grad_image_args():
    return dict(
        grads=_grads(),
        boxes=_boxes(),
        box_ind=_box_ind(),
        image_size=[BATCH, HEIGHT, WIDTH, DEPTH],
    )


def forward_args():
    return dict(
        image=_image(), boxes=_boxes(), box_ind=_box_ind(), crop_size=[CROP_H, CROP_W]
    )


def grad_boxes_args():
    return dict(grads=_grads(), image=_image(), boxes=_boxes(), box_ind=_box_ind())


def _tangent():
    return np.array([[1.0, -2.0, 0.5, 3.0], [0.0, 1.0, -1.0, 2.0]], dtype=np.float32)


def jvp_boxes_args():
    return dict(
        image=_image(),
        boxes=_boxes(),
        box_ind=_box_ind(),
        boxes_tangent=_tangent(),
        crop_size=[CROP_H, CROP_W],
    )


# RoIAlign: NCHW, boxes [x1, y1, x2, y2] in pixels, output_size the crop's.
def _roi_image():
    return np.ascontiguousarray(_image().transpose(0, 3, 1, 2))


def _roi_grads():
    return np.ascontiguousarray(_grads().transpose(0, 3, 1, 2))


def _roi_boxes():
    return np.array([[0, 0, 4, 3], [1, 2, 5, 4]], dtype=np.float32)


def roi_align_args():
    return dict(
        image=_roi_image(),
        boxes=_roi_boxes(),
        box_ind=_box_ind(),
        output_size=[CROP_H, CROP_W],
    )


def roi_grad_image_args():
    return dict(
        grads=_roi_grads(),
        boxes=_roi_boxes(),
        box_ind=_box_ind(),
        image_size=[BATCH, DEPTH, HEIGHT, WIDTH],
    )


def roi_grad_boxes_args():
    return dict(
        grads=_roi_grads(), image=_roi_image(), boxes=_roi_boxes(), box_ind=_box_ind()
    )


def roi_jvp_boxes_args():
    return dict(roi_align_args(), boxes_tangent=_tangent())


# grid_sample: NCHW, a grid [N, H_out, W_out, 2] of (x, y) in [-1, 1] with
# the crop's size (NUM_BOXES == BATCH: the gradients are RoIAlign's).
assert NUM_BOXES == BATCH


def _grid():
    rng = np.random.default_rng(3)
    return rng.uniform(-1.2, 1.2, (BATCH, CROP_H, CROP_W, 2)).astype(np.float32)


def _grid_tangent():
    rng = np.random.default_rng(4)
    return rng.standard_normal((BATCH, CROP_H, CROP_W, 2)).astype(np.float32)


def grid_sample_args():
    return dict(image=_roi_image(), grid=_grid())


def grid_grad_image_args():
    return dict(
        grads=_roi_grads(), grid=_grid(), image_size=[BATCH, DEPTH, HEIGHT, WIDTH]
    )


def grid_grad_grid_args():
    return dict(grads=_roi_grads(), image=_roi_image(), grid=_grid())


def grid_jvp_grid_args():
    return dict(grid_sample_args(), grid_tangent=_grid_tangent())


OPS = {
    "grad_image": (cropgrad.crop_and_resize_grad_image, grad_image_args),
    "forward": (cropgrad.crop_and_resize, forward_args),
    "grad_boxes": (cropgrad.crop_and_resize_grad_boxes, grad_boxes_args),
    "jvp_boxes": (cropgrad.crop_and_resize_jvp_boxes, jvp_boxes_args),
    "raw_grad_image": (
        raw_ops.CropAndResizeGradImage,
        lambda: dict(grad_image_args(), T=np.float32),
    ),
    "raw_forward": (raw_ops.CropAndResize, forward_args),
    "raw_grad_boxes": (raw_ops.CropAndResizeGradBoxes, grad_boxes_args),
    "roi_align": (cropgrad.roi_align, roi_align_args),
    "roi_align_grad_image": (cropgrad.roi_align_grad_image, roi_grad_image_args),
    "roi_align_grad_boxes": (cropgrad.roi_align_grad_boxes, roi_grad_boxes_args),
    "roi_align_jvp_boxes": (cropgrad.roi_align_jvp_boxes, roi_jvp_boxes_args),
    "grid_sample": (cropgrad.grid_sample, grid_sample_args),
    "grid_sample_grad_image": (cropgrad.grid_sample_grad_image, grid_grad_image_args),
    "grid_sample_grad_grid": (cropgrad.grid_sample_grad_grid, grid_grad_grid_args),
    "grid_sample_jvp_grid": (cropgrad.grid_sample_jvp_grid, grid_jvp_grid_args),
}
GRAD_IMAGE_OPS = ("grad_image", "raw_grad_image")
FORWARD_OPS = ("forward", "raw_forward")
GRAD_BOXES_OPS = ("grad_boxes", "raw_grad_boxes")
# The boxes JVP takes the forward op's arguments and a tangent of the boxes,
# and is bilinear only, as the boxes gradient.
JVP_OPS = ("jvp_boxes",)
PUBLIC_OPS = ("grad_image", "forward", "grad_boxes", "jvp_boxes")
RAW_OPS = ("raw_grad_image", "raw_forward", "raw_grad_boxes")
# RoIAlign's ops, by the crop_and_resize ops they mirror: output_size is
# crop_size, the image gradient's image_size is in NCHW order.
ROI_OPS = (
    "roi_align",
    "roi_align_grad_image",
    "roi_align_grad_boxes",
    "roi_align_jvp_boxes",
)
ROI_FORWARD_OPS = ("roi_align",)
ROI_GRAD_IMAGE_OPS = ("roi_align_grad_image",)
ROI_GRAD_BOXES_OPS = ("roi_align_grad_boxes",)
ROI_JVP_OPS = ("roi_align_jvp_boxes",)
ROI_POOLED_OPS = ROI_FORWARD_OPS + ROI_JVP_OPS  # they take output_size
# grid_sample's ops (NCHW by default, as RoIAlign's): a grid instead of
# boxes and box indices.
GRID_OPS = (
    "grid_sample",
    "grid_sample_grad_image",
    "grid_sample_grad_grid",
    "grid_sample_jvp_grid",
)
GRID_SAMPLED_OPS = ("grid_sample", "grid_sample_jvp_grid")  # the output's shape
GRID_GRAD_IMAGE_OPS = ("grid_sample_grad_image",)
GRID_GRAD_GRID_OPS = ("grid_sample_grad_grid",)
GRID_JVP_OPS = ("grid_sample_jvp_grid",)
GRID_IMAGE_OPS = GRID_SAMPLED_OPS + GRID_GRAD_GRID_OPS  # they take the image
GRID_GRADS_OPS = GRID_GRAD_IMAGE_OPS + GRID_GRAD_GRID_OPS  # they take grads
NCHW_OPS = ROI_OPS + GRID_OPS  # NCHW by default
_GRID_BATCH = "batch entries"
ALL_OPS = tuple(OPS)
BOX_OPS = tuple(op for op in ALL_OPS if op not in GRID_OPS)  # boxes, box_ind
NUMPY_OPS = PUBLIC_OPS + ROI_OPS + GRID_OPS


def public(ops):
    """The NumPy API's ops among `ops` (raw_ops converts what they refuse)."""
    return tuple(op for op in ops if op in NUMPY_OPS)


def raw(ops):
    return tuple(op for op in ops if op in RAW_OPS)


def _odd_ragged():
    return [[[[1.0]]], [[[1.0, 2.0]]]]


def _datetimes(shape):
    return np.zeros(shape, dtype="datetime64[s]")


# --------------------------------------------------------------------------
# The table: (ops, argument changes, exception, names one of which the
# message must contain, and optionally a pattern the message must match).
# A change wrapped in `Derived` is a function of the case's arguments that
# returns the new value (for `out=` arrays that alias an input).  Changes
# given as a function are called with each op's name: shapes are written
# in NHWC order and `layout(op, shape)` puts them in the op's.

CASES = []


class Derived:
    def __init__(self, make):
        self.make = make

    def __repr__(self):
        return f"Derived({self.make.__name__})"


def case(ops, changes, exc, *names, id, match=None):
    for op in ops:
        op_changes = changes(op) if callable(changes) else changes
        op_match = match(op) if callable(match) else match
        if op_match is None and op in ROI_OPS:
            op_match = ROI_WORDS.get(id)
        CASES.append(
            pytest.param(op, op_changes, exc, names, op_match, id=f"{op}-{id}")
        )


def roi_says(pattern):
    """`pattern` for RoIAlign's ops, no pattern for the others."""
    return lambda op: pattern if op in ROI_OPS else None


# RoIAlign's messages say what to pass: the patterns its ops' messages
# match, by case id (the torchvision-style wording of docs/semantics.md's
# RoIAlign table).
ROI_WORDS = {
    "boxes-5-columns": r"4 columns \[x1, y1, x2, y2\]",
    "box_ind-batch": r"box_ind\[1\] = 2",
    "box_ind-negative": r"box_ind\[0\] = -1",
    "box_ind-fraction": "box_ind must hold integers",
    "box_ind-short": r"box_ind has incompatible shape \(1,\)",
    "image-3d": "image must be 4-D",
    "image-complex": "image must hold real numbers",
    "image-width-0": "image dimensions must be positive",
    "grads-3d": r"grads must be 4-D \[num_boxes, channels, out_height",
    "grads-num-boxes": "2 boxes but grads has shape",
    "grads-depth": "has 3 channels but grads has 4",
    "image_size-3-values": "image_size must have 4 elements",
    "output_size-3-values": "output_size must have 2 elements",
    "boxes_tangent-more-rows-than-boxes": "boxes_tangent must have the shape",
    "boxes_tangent-None": "boxes_tangent must hold real numbers",
    "dtype-int32": "dtype must be float16, float32 or float64",
    "num_threads-0": "num_threads must be from 1 to 1024",
}


def layout(op, shape):
    """`shape`, given in NHWC order, in `op`'s layout (NCHW for RoIAlign's
    and grid_sample's)."""
    if op in NCHW_OPS and len(shape) == 4:
        n, h, w, c = shape
        return (n, c, h, w)
    return shape


def sizes_in(op, value):
    """An image_size written in NHWC order, in `op`'s order: a list, tuple
    or 1-D array of four is reordered; any other value is passed as is."""
    if op not in NCHW_OPS:
        return value
    if isinstance(value, np.ndarray):
        return value[[0, 3, 1, 2]] if value.shape == (4,) else value
    if isinstance(value, (list, tuple)) and len(value) == 4:
        return type(value)(layout(op, tuple(value)))
    return value


# The ops that take each argument.
G_OPS = GRAD_IMAGE_OPS + GRAD_BOXES_OPS + ROI_GRAD_IMAGE_OPS + ROI_GRAD_BOXES_OPS
I_OPS = FORWARD_OPS + GRAD_BOXES_OPS + JVP_OPS + ROI_POOLED_OPS + ROI_GRAD_BOXES_OPS
T_OPS = JVP_OPS + ROI_JVP_OPS
BOX_SIZE_OPS = GRAD_IMAGE_OPS + ROI_GRAD_IMAGE_OPS
SIZE_OPS = BOX_SIZE_OPS + GRID_GRAD_IMAGE_OPS

_GRID_SHAPE = (BATCH, CROP_H, CROP_W, 2)

_ARRAY_ARGS = {
    # argument -> (ops that take it, a valid shape for it in NHWC)
    "grads": (G_OPS + GRID_GRADS_OPS, (NUM_BOXES, CROP_H, CROP_W, DEPTH)),
    "image": (I_OPS + GRID_IMAGE_OPS, (BATCH, HEIGHT, WIDTH, DEPTH)),
    "boxes": (BOX_OPS, (NUM_BOXES, 4)),
    "boxes_tangent": (T_OPS, (NUM_BOXES, 4)),
    "box_ind": (BOX_OPS, (NUM_BOXES,)),
    "grid": (GRID_OPS, _GRID_SHAPE),
    "grid_tangent": (GRID_JVP_OPS, _GRID_SHAPE),
}
# The grid and its tangent have one shape in both layouts.
_ANY_LAYOUT = ("grid", "grid_tangent")


def shaped(arg, nhwc, make, **changes):
    """Changes that set `arg` to `make(shape)`, shape `nhwc` in each op's
    layout (and the other `changes`)."""

    def changed(op):
        shape = nhwc if arg in _ANY_LAYOUT else layout(op, nhwc)
        return dict(changes, **{arg: make(shape)})

    return changed


# Wrong dtypes for every array argument: complex, bool, object, strings,
# bytes, datetimes, timedeltas, structured (the shapes are the op's, so
# that only the dtype is wrong).  Each: its id, how to make it from a shape,
# and whether raw_ops take it as TensorFlow does (booleans and object arrays
# of numbers, except for the image: TensorFlow refuses those images too).
_WRONG_DTYPES = [
    ("complex", lambda s: np.zeros(s, np.complex64), False),
    ("bool", lambda s: np.ones(s, bool), True),
    ("object", lambda s: np.zeros(s, object), True),
    # (NumPy, and so TensorFlow, casts None to NaN.)
    ("object-None", lambda s: np.full(s, None, object), True),
    ("object-str", lambda s: np.full(s, "a", object), False),
    ("str", lambda s: np.full(s, "1"), False),
    ("bytes", lambda s: np.full(s, b"1"), False),
    ("datetime", _datetimes, False),
    ("timedelta", lambda s: np.zeros(s, "timedelta64[s]"), False),
    ("structured", lambda s: np.zeros(s, [("a", "f4")]), False),
]
for arg, (ops, nhwc) in _ARRAY_ARGS.items():
    converted = ops if arg == "image" else public(ops)
    for label, make, raw_takes in _WRONG_DTYPES:
        case(
            converted if raw_takes else ops,
            shaped(arg, nhwc, make),
            TypeError,
            arg,
            id=f"{arg}-{label}",
        )
    case(ops, {arg: None}, TypeError, arg, id=f"{arg}-None")
    case(ops, {arg: "grads"}, TypeError, arg, id=f"{arg}-a-string")
    case(ops, {arg: _odd_ragged()}, ValueError, arg, id=f"{arg}-ragged")
    zero_d = np.int32(0) if arg == "box_ind" else np.float32(1)
    case(ops, {arg: zero_d}, ValueError, arg, id=f"{arg}-0d")
    case(ops, {arg: np.array(zero_d)}, ValueError, arg, id=f"{arg}-0d-array")

# grads (the image gradient and the boxes gradient)
for nhwc, label in [
    ((NUM_BOXES, CROP_H, CROP_W, DEPTH, 1), "5d"),
    ((NUM_BOXES, 0, CROP_W, DEPTH), "crop-height-0"),
    ((NUM_BOXES, CROP_H, 0, DEPTH), "crop-width-0"),
    ((NUM_BOXES + 1, CROP_H, CROP_W, DEPTH), "num-boxes"),
    ((NUM_BOXES, CROP_H, CROP_W, DEPTH + 1), "depth"),
]:
    case(
        G_OPS, shaped("grads", nhwc, np.zeros), ValueError, "grads", id=f"grads-{label}"
    )
case(
    G_OPS,
    {"grads": np.zeros((NUM_BOXES, CROP_H, CROP_W))},
    ValueError,
    "grads",
    id="grads-3d",
)
case(G_OPS, {"grads": [[[[1, 2], [3]]]]}, ValueError, "grads", id="grads-ragged-inner")

# image (the forward op, the boxes gradient and the boxes JVP)
case(
    I_OPS,
    {"image": np.zeros((BATCH, HEIGHT, WIDTH))},
    ValueError,
    "image",
    id="image-3d",
)
for nhwc, label in [
    ((BATCH, 0, WIDTH, DEPTH), "height-0"),
    ((BATCH, HEIGHT, 0, DEPTH), "width-0"),
]:
    case(
        I_OPS, shaped("image", nhwc, np.zeros), ValueError, "image", id=f"image-{label}"
    )
_UNSUPPORTED_IMAGE = ["uint32", "uint64"] + (
    ["longdouble"] if np.dtype(np.longdouble).itemsize > 8 else []
)
for dt in _UNSUPPORTED_IMAGE:
    case(
        I_OPS,
        shaped(
            "image", (BATCH, HEIGHT, WIDTH, DEPTH), lambda s, dt=dt: np.zeros(s, dt)
        ),
        TypeError,
        "image",
        id=f"image-{dt}",
    )
case(
    I_OPS,
    shaped("image", (0, HEIGHT, WIDTH, DEPTH), lambda s: np.zeros(s, np.float32)),
    IndexError,
    "box_ind",
    id="image-batch-0-with-boxes",
)
case(
    GRAD_BOXES_OPS + ROI_GRAD_BOXES_OPS,
    shaped("image", (BATCH, HEIGHT, WIDTH, DEPTH + 1), np.zeros),
    ValueError,
    "image",
    id="image-depth",
)

# boxes
case(
    BOX_OPS,
    {"boxes": np.zeros((NUM_BOXES, 3))},
    ValueError,
    "boxes",
    id="boxes-3-columns",
)
case(
    BOX_OPS,
    {"boxes": np.zeros((NUM_BOXES, 5))},
    ValueError,
    "boxes",
    id="boxes-5-columns",
)
case(BOX_OPS, {"boxes": np.zeros(4 * NUM_BOXES)}, ValueError, "boxes", id="boxes-1d")
case(
    BOX_OPS, {"boxes": np.zeros((NUM_BOXES, 4, 1))}, ValueError, "boxes", id="boxes-3d"
)
case(
    BOX_OPS,
    {"boxes": [[0, 0, 1, 1], [0, 0, 1]]},
    ValueError,
    "boxes",
    id="boxes-ragged-rows",
)
case(
    BOX_OPS,
    {"boxes": np.zeros((NUM_BOXES + 1, 4))},
    ValueError,
    "boxes",
    "box_ind",
    id="boxes-more-than-box_ind",
)
for bad in (np.nan, np.inf, -np.inf):
    for col in (0, 3):
        boxes = _boxes().astype(np.float64)
        boxes[1, col] = bad
        case(
            BOX_OPS,
            {"boxes": boxes},
            ValueError,
            r"boxes[1]",
            id=f"boxes-{bad}-col{col}",
        )
# finite in float64 but infinite once rounded to float32, the op's dtype
case(
    BOX_OPS,
    {"boxes": [[0, 0, 1, 1], [0, 0, 1e300, 1]]},
    ValueError,
    "boxes[1]",
    id="boxes-overflow-to-inf",
)
case(
    BOX_OPS,
    {"boxes": np.array([[0, 0, 1, 1], [0, 0, 1, np.nan]], ">f8")},
    ValueError,
    "boxes[1]",
    id="boxes-nan-big-endian",
)

# boxes_tangent (boxes JVP): the shape of boxes; any values
for value, label in [
    (np.zeros((NUM_BOXES, 3)), "3-columns"),
    (np.zeros((NUM_BOXES + 1, 4)), "more-rows-than-boxes"),
    (np.zeros(4 * NUM_BOXES), "1d"),
    (np.zeros((NUM_BOXES, 4, 1)), "3d"),
    ([[0, 0, 1, 1], [0, 0, 1]], "ragged-rows"),
]:
    case(
        T_OPS,
        {"boxes_tangent": value},
        ValueError,
        "boxes_tangent",
        id=f"boxes_tangent-{label}",
    )

# box_ind
case(
    BOX_OPS,
    {"box_ind": [0]},
    ValueError,
    "box_ind",
    id="box_ind-short",
)
case(BOX_OPS, {"box_ind": [0, 1, 0]}, ValueError, "box_ind", id="box_ind-long")
case(BOX_OPS, {"box_ind": [[0, 1]]}, ValueError, "box_ind", id="box_ind-2d")
case(BOX_OPS, {"box_ind": 0}, ValueError, "box_ind", id="box_ind-scalar")
case(BOX_OPS, {"box_ind": [0.0, 1.0]}, TypeError, "box_ind", id="box_ind-floats")
case(
    public(BOX_OPS),
    {"box_ind": np.array([0.5, 1])},
    TypeError,
    "box_ind",
    id="box_ind-fraction",
)
# raw_ops truncate a float box_ind to int32, as TensorFlow: what has no int32
# value, or truncates outside [0, batch), is an IndexError.
for value, label in [
    ([0.0, np.nan], "nan"),
    ([0.0, np.inf], "inf"),
    ([0.0, -1e10], "-1e10"),
    ([0.0, 2.0**31], "2**31"),
]:
    case(
        RAW_OPS,
        {"box_ind": np.array(value)},
        IndexError,
        "box_ind[1]",
        id=f"box_ind-float-{label}",
    )
case(
    RAW_OPS,
    {"box_ind": np.array([0.5, BATCH + 0.5], np.float32)},
    IndexError,
    "box_ind[1]",
    id="box_ind-float-truncates-to-batch",
)
case(
    RAW_OPS,
    {"box_ind": np.array([0, 2**32], np.int64)},
    IndexError,
    "box_ind[1]",
    id="box_ind-int64-2**32-is-not-wrapped",
)
case(
    BOX_OPS,
    {"box_ind": [0, 2**40]},
    IndexError,
    "box_ind[1]",
    "1099511627776",
    id="box_ind-2**40",
)
case(
    BOX_OPS,
    {"box_ind": [0, BATCH]},
    IndexError,
    "box_ind[1]",
    id="box_ind-batch",
)
case(
    BOX_OPS,
    {"box_ind": [-1, 0]},
    IndexError,
    "box_ind[0]",
    id="box_ind-negative",
)
case(
    BOX_OPS,
    {"box_ind": [0, -(2**63)]},
    IndexError,
    "box_ind[1]",
    id="box_ind-int64-min",
)
case(
    BOX_OPS,
    {"box_ind": np.array([0, 2**64 - 1], np.uint64)},
    IndexError,
    "box_ind[1]",
    id="box_ind-uint64-max",
)
case(
    BOX_OPS,
    {"box_ind": np.array([0, 255], np.uint8)},
    IndexError,
    "box_ind[1]",
    id="box_ind-uint8",
)
case(
    BOX_OPS,
    {"box_ind": np.array([-128, 0], np.int8)},
    IndexError,
    "box_ind[0]",
    id="box_ind-int8",
)
case(BOX_OPS, {"box_ind": [0, 2**64]}, TypeError, "box_ind", id="box_ind-beyond-uint64")

# image_size (image gradient), written in NHWC order: `sized` reorders it
# for each op.


def sized(value, **changes):
    return lambda op: dict(changes, image_size=sizes_in(op, value))


for value, exc, label in [
    ([BATCH, HEIGHT, WIDTH], ValueError, "3-values"),
    ([BATCH, HEIGHT, WIDTH, DEPTH, 1], ValueError, "5-values"),
    ([], ValueError, "empty"),
    (np.array([[BATCH, HEIGHT], [WIDTH, DEPTH]]), ValueError, "2d"),
    (np.int64(4), ValueError, "0d"),
    (4, ValueError, "int"),
    (None, ValueError, "None"),
    ("2453", ValueError, "string"),
    ([BATCH, HEIGHT, [WIDTH], DEPTH], ValueError, "ragged"),
    ([2.0, 4.0, 5.0, 3.0], TypeError, "floats"),
    (np.array([BATCH, HEIGHT, WIDTH, DEPTH], "f4"), TypeError, "float-array"),
    ([BATCH, 4.5, WIDTH, DEPTH], TypeError, "fraction"),
    (np.array([BATCH, HEIGHT, WIDTH, DEPTH], complex), TypeError, "complex"),
    (np.ones(4, bool), TypeError, "bool"),
    (["2", "4", "5", "3"], TypeError, "strings"),
    ([BATCH, None, WIDTH, DEPTH], TypeError, "holds-None"),
    (_datetimes(4), TypeError, "datetime"),
    ([BATCH, 0, WIDTH, DEPTH], ValueError, "height-0"),
    ([BATCH, HEIGHT, 0, DEPTH], ValueError, "width-0"),
    ([BATCH, -1, WIDTH, DEPTH], ValueError, "height-negative"),
    ([-1, HEIGHT, WIDTH, DEPTH], ValueError, "batch-negative"),
    ([BATCH, HEIGHT, WIDTH, -1], ValueError, "depth-negative"),
    ([BATCH, HEIGHT, WIDTH, DEPTH + 1], ValueError, "depth-mismatch"),
    ([2**63, HEIGHT, WIDTH, DEPTH], ValueError, "batch-2**63"),
    ([2**70, HEIGHT, WIDTH, DEPTH], ValueError, "batch-2**70"),
    (
        np.array([2**64 - 1, HEIGHT, WIDTH, DEPTH], np.uint64),
        ValueError,
        "batch-uint64-max",
    ),
    ([BATCH, 2**70, WIDTH, DEPTH], ValueError, "height-2**70"),
    ([BATCH, HEIGHT, 2**63, DEPTH], ValueError, "width-2**63"),
    ([BATCH, HEIGHT, WIDTH, 2**70], ValueError, "depth-2**70"),
    ([BATCH, -(2**70), WIDTH, DEPTH], ValueError, "height-minus-2**70"),
    ([2**62, 2**62, WIDTH, DEPTH], (ValueError, MemoryError), "product-overflows"),
]:
    names = (
        ("image_size", "output") if label == "product-overflows" else ("image_size",)
    )
    # raw_ops convert float and boolean arrays to int32, as TensorFlow.
    ops = public(SIZE_OPS) if label in ("float-array", "bool") else SIZE_OPS
    if label in ("depth-mismatch", "product-overflows"):
        # grid_sample's batch is the grid's and its depth that of grads:
        # the cases after this table.
        ops = BOX_SIZE_OPS
    case(ops, sized(value), exc, *names, id=f"image_size-{label}")
# grid_sample's image gradient: image_size against the grid and grads.
for value, label, name, pattern in [
    ([BATCH + 1, HEIGHT, WIDTH, DEPTH], "batch-mismatch", "grid", _GRID_BATCH),
    ([2**62, 2**62, WIDTH, DEPTH], "product-overflows", "grid", _GRID_BATCH),
    ([BATCH, HEIGHT, WIDTH, DEPTH + 1], "depth-mismatch", "grads", "sampled output"),
]:
    case(
        GRID_GRAD_IMAGE_OPS,
        sized(value),
        ValueError,
        name,
        id=f"image_size-{label}",
        match=pattern,
    )
case(
    GRID_GRAD_IMAGE_OPS,
    lambda op: dict(
        grid=np.zeros((0, CROP_H, CROP_W, 2), np.float32),
        grads=np.zeros((0, DEPTH, CROP_H, CROP_W), np.float32),
        image_size=sizes_in(op, [0, 2**62, WIDTH, DEPTH]),
    ),
    ValueError,
    "output",
    "image_size",
    id="image_size-empty-batch-0-height-2**62",
)
for value, exc, label in [
    (np.ones(4, bool), ValueError, "bool-is-ones"),  # depth 1, not DEPTH
    (np.array([BATCH, HEIGHT, WIDTH, np.nan]), ValueError, "float-nan"),
    (np.array([BATCH, HEIGHT, WIDTH, 1e10]), ValueError, "float-1e10"),
    (np.array([BATCH, -1.5, WIDTH, DEPTH]), ValueError, "float-negative"),
    (np.array([BATCH, HEIGHT, WIDTH, 2**32 + DEPTH]), ValueError, "int64-wraps"),
    ([BATCH, HEIGHT, WIDTH, 2**32 + DEPTH], ValueError, "list-wraps"),
    (np.array([BATCH, "a", WIDTH, DEPTH], object), TypeError, "object-str"),
]:
    case(
        raw(SIZE_OPS),
        {"image_size": value},
        exc,
        "image_size",
        id=f"image_size-{label}",
    )
# Too large to allocate, but indexable: MemoryError or ValueError, before any work.
case(
    BOX_SIZE_OPS,
    sized([2**40, 2**20, 1, DEPTH]),
    (MemoryError, ValueError),
    "output",
    "image_size",
    id="image_size-unallocatable",
)
case(
    SIZE_OPS,
    sized([BATCH, 2**40, 2**18, DEPTH]),
    (MemoryError, ValueError),
    "output",
    "image_size",
    id="image_size-unallocatable-tall",
)

# Empty outputs whose other dimensions multiply beyond the index range:
# NumPy refuses to make them even though they hold no element.
_NO_BOXES = {
    "boxes": np.zeros((0, 4), np.float32),
    "box_ind": np.zeros(0, np.int32),
}


def no_boxes(value, depth=DEPTH, **changes):
    """image_size `value` with no boxes (grads of `depth` channels)."""
    return lambda op: dict(
        _NO_BOXES,
        grads=np.zeros(layout(op, (0, CROP_H, CROP_W, depth)), np.float32),
        image_size=sizes_in(op, value),
        **changes,
    )


for value, label in [
    ([0, 2**62, WIDTH, DEPTH], "batch-0-height-2**62"),
    ([0, 2**40, 2**40, DEPTH], "batch-0-height-width-2**40"),
]:
    case(
        BOX_SIZE_OPS,
        no_boxes(value),
        ValueError,
        "output",
        "image_size",
        id=f"image_size-empty-{label}",
    )
case(
    FORWARD_OPS,
    {
        "image": np.zeros((BATCH, HEIGHT, WIDTH, 0), np.float32),
        "boxes": np.zeros((0, 4)),
        "box_ind": [],
        "crop_size": [2**62, 2**40],
    },
    ValueError,
    "output",
    "crop_size",
    id="crop_size-empty-output-2**102",
)
case(
    ROI_FORWARD_OPS,
    {
        "image": np.zeros((BATCH, 0, HEIGHT, WIDTH), np.float32),
        "boxes": np.zeros((0, 4)),
        "box_ind": [],
        "output_size": [2**62, 2**40],
    },
    ValueError,
    "output",
    "output_size",
    id="output_size-empty-output-2**102",
)

# A float16 output that NumPy can make, whose float32 accumulator it cannot.
for op, dtype_arg in (
    ("grad_image", "dtype"),
    ("raw_grad_image", "T"),
    ("roi_align_grad_image", "dtype"),
):
    case(
        (op,),
        no_boxes([0, 2**61 + 1, 1, 1], depth=1, **{dtype_arg: np.float16}),
        ValueError,
        "output",
        "image_size",
        id="image_size-float16-accumulator-beyond-index",
    )

# crop_size (forward)
for value, exc, label in [
    ([CROP_H], ValueError, "1-value"),
    ([CROP_H, CROP_W, 1], ValueError, "3-values"),
    (np.array([[CROP_H, CROP_W]]), ValueError, "2d"),
    (None, ValueError, "None"),
    ([3.0, 2.0], TypeError, "floats"),
    (np.array([CROP_H, CROP_W], complex), TypeError, "complex"),
    (np.ones(2, bool), TypeError, "bool"),
    (["3", "2"], TypeError, "strings"),
    (_datetimes(2), TypeError, "datetime"),
    ([0, CROP_W], ValueError, "height-0"),
    ([CROP_H, 0], ValueError, "width-0"),
    ([-1, CROP_W], ValueError, "negative"),
    ([2**63, CROP_W], ValueError, "2**63"),
    ([CROP_H, 2**70], ValueError, "2**70"),
]:
    ops = public(FORWARD_OPS) if label == "bool" else FORWARD_OPS
    case(ops + JVP_OPS, {"crop_size": value}, exc, "crop_size", id=f"crop_size-{label}")
    case(
        ROI_POOLED_OPS,
        {"output_size": value},
        exc,
        "output_size",
        id=f"output_size-{label}",
    )
# An int is a square crop in the NumPy API; raw_ops keep TensorFlow's two
# ints.
case(raw(FORWARD_OPS), {"crop_size": 3}, ValueError, "crop_size", id="crop_size-int")
for value, label in [
    (np.array([CROP_H, np.inf]), "float-inf"),
    (np.array([0.5, CROP_W]), "float-truncates-to-0"),
    (np.array([CROP_H, 2**32 + CROP_W], np.int64), "int64-wraps"),
]:
    case(
        raw(FORWARD_OPS),
        {"crop_size": value},
        ValueError,
        "crop_size",
        id=f"crop_size-{label}",
    )
case(
    FORWARD_OPS + JVP_OPS,
    {"crop_size": [2**31, 2**31]},
    (MemoryError, ValueError),
    "output",
    "crop_size",
    id="crop_size-unallocatable",
)
case(
    ROI_POOLED_OPS,
    {"output_size": [2**31, 2**31]},
    (MemoryError, ValueError),
    "output",
    "output_size",
    id="output_size-unallocatable",
)

# extrapolation_value (forward)
for value, label in [
    (None, "None"),
    (True, "bool"),
]:
    # raw_ops: None is the default, a Python bool a number (as TensorFlow).
    case(
        public(FORWARD_OPS),
        {"extrapolation_value": value},
        TypeError,
        "extrapolation_value",
        id=f"extrapolation_value-{label}",
    )
for value, label in [
    ("0", "str"),
    (b"0", "bytes"),
    (1j, "complex"),
    (np.bool_(False), "numpy-bool"),
    ([0.0], "list"),
    (np.zeros(2), "array"),
    (np.datetime64(1, "s"), "datetime"),
    (datetime.timedelta(1), "timedelta"),
    (object(), "object"),
]:
    case(
        FORWARD_OPS,
        {"extrapolation_value": value},
        TypeError,
        "extrapolation_value",
        id=f"extrapolation_value-{label}",
    )

# dtype / T (image gradient)
# (RoIAlign's and grid_sample's ops with a dtype, the data's by default.)
_DATA_DTYPE_OPS = (
    ROI_GRAD_IMAGE_OPS + ROI_POOLED_OPS + GRID_GRAD_IMAGE_OPS + GRID_SAMPLED_OPS
)
for value, label in [
    (np.int32, "int32"),
    ("int64", "int64-name"),
    (complex, "complex"),
    (np.complex64, "complex64"),
    (bool, "bool"),
    (object, "object"),
    ("foo", "unknown-name"),
    ("f8x", "bad-name"),
    (None, "None"),
    (np.longdouble, "longdouble"),
    ("datetime64[s]", "datetime"),
    ("U4", "str"),
    ([("a", "f4")], "structured"),
    (3, "int-value"),
    (object(), "object-instance"),
]:
    if np.dtype(np.longdouble) == np.float64 and label == "longdouble":
        continue
    # (RoIAlign's default dtype is None: the data's.)
    roi = () if value is None else _DATA_DTYPE_OPS
    case(
        ("grad_image",) + roi,
        {"dtype": value},
        TypeError,
        "dtype",
        id=f"dtype-{label}",
    )
    case(("raw_grad_image",), {"T": value}, TypeError, "T", id=f"T-{label}")
# RoIAlign's float64 arithmetic (float64 images) has no float16 or bfloat16
# result (the gate's words: the C-level API's output_dtype).
case(
    ROI_POOLED_OPS,
    shaped("image", (BATCH, HEIGHT, WIDTH, DEPTH), np.zeros, dtype=np.float16),
    TypeError,
    "output_dtype",
    id="dtype-float16-from-float64",
    match="CG_FLOAT32 or CG_FLOAT64 for float64",
)

# method (raw_ops take None for the default, as TensorFlow)
for op in PUBLIC_OPS:
    case((op,), {"method": None}, ValueError, "method", id="method-None")
for value, label in [
    ("bilinearx", "unknown"),
    ("Bilinear", "case"),
    ("", "empty"),
    (0, "int"),
    (["bilinear"], "list"),
    (b"\xff", "bad-bytes"),
    ("area", "area"),
]:
    case(
        GRAD_IMAGE_OPS + FORWARD_OPS,
        {"method": value},
        ValueError,
        "method",
        "bilinear",
        id=f"method-{label}",
    )
    case(
        GRAD_BOXES_OPS + JVP_OPS,
        {"method": value},
        ValueError,
        "method",
        id=f"method-{label}",
    )
case(
    GRAD_BOXES_OPS + JVP_OPS,
    {"method": "nearest"},
    ValueError,
    "method",
    "bilinear",
    id="method-nearest-has-no-boxes-gradient",
)

# num_threads
for value, exc, label in [
    (0, ValueError, "0"),
    (-1, ValueError, "-1"),
    (10**6, ValueError, "10**6"),
    (1025, ValueError, "1025"),
    (2**70, ValueError, "2**70"),
    (np.uint8(0), ValueError, "uint8-0"),
    (True, TypeError, "True"),
    (False, TypeError, "False"),
    (np.bool_(True), TypeError, "numpy-bool"),
    (1.5, TypeError, "1.5"),
    (2.0, TypeError, "2.0"),
    (np.float64(2), TypeError, "numpy-float"),
    ("2", TypeError, "str"),
    ([2], TypeError, "list"),
]:
    case(
        NUMPY_OPS,
        {"num_threads": value},
        exc,
        "num_threads",
        id=f"num_threads-{label}",
    )

# flush_denormals
for value, label in [
    ("yes", "str"),
    (None, "None"),
    (np.ones(2, bool), "array"),
    (2, "int-2"),
    (0.5, "float"),
]:
    case(
        NUMPY_OPS,
        {"flush_denormals": value},
        TypeError,
        "flush_denormals",
        id=f"flush_denormals-{label}",
    )

# data_format (every NumPy op; raw_ops are NHWC only)
for value, label in [
    ("nhwc", "lower-case"),
    ("NHCW", "NHCW"),
    ("NWHC", "NWHC"),
    (None, "None"),
    (0, "int"),
    (b"NHWC", "bytes"),
]:
    case(
        NUMPY_OPS,
        {"data_format": value},
        ValueError,
        "data_format",
        id=f"data_format-{label}",
        match=roi_says("data_format must be 'NHWC' or 'NCHW'"),
    )

# RoIAlign's options: spatial_scale (a finite real number), sampling_ratio
# (an int32 up to 4096; 0 or less is adaptive), aligned (a bool)
for value, exc, label, words in [
    (np.nan, ValueError, "nan", "spatial_scale must be finite"),
    (np.inf, ValueError, "inf", "spatial_scale must be finite"),
    (-np.inf, ValueError, "minus-inf", "spatial_scale must be finite"),
    (2**1024, ValueError, "int-beyond-float64", "too large for float64"),
    ("0.5", TypeError, "str", "spatial_scale must be a real number"),
    (None, TypeError, "None", "spatial_scale must be a real number"),
    (True, TypeError, "bool", "spatial_scale must be a real number"),
    (np.bool_(False), TypeError, "numpy-bool", "spatial_scale must be a real"),
    (1j, TypeError, "complex", "spatial_scale must be a real number"),
    ([0.5], TypeError, "list", "spatial_scale must be a real number"),
    (np.ones(2), TypeError, "array", "spatial_scale must be a real number"),
]:
    case(
        ROI_OPS,
        {"spatial_scale": value},
        exc,
        "spatial_scale",
        id=f"spatial_scale-{label}",
        match=words,
    )
for value, exc, label, words in [
    (4097, ValueError, "4097", r"sampling_ratio must be at most 4096 .* 0 or less"),
    (2**31, ValueError, "2**31", "sampling_ratio must be from"),
    (2**40, ValueError, "2**40", "sampling_ratio must be from"),
    (-(2**40), ValueError, "minus-2**40", "sampling_ratio must be from"),
    (2.0, TypeError, "float", "sampling_ratio must be an int"),
    (np.float32(2), TypeError, "numpy-float", "sampling_ratio must be an int"),
    (True, TypeError, "bool", "sampling_ratio must be an int"),
    (None, TypeError, "None", "sampling_ratio must be an int"),
    ("2", TypeError, "str", "sampling_ratio must be an int"),
    ([2], TypeError, "list", "sampling_ratio must be an int"),
]:
    case(
        ROI_OPS,
        {"sampling_ratio": value},
        exc,
        "sampling_ratio",
        id=f"sampling_ratio-{label}",
        match=words,
    )
for value, label in [
    ("yes", "str"),
    (None, "None"),
    (2, "int-2"),
    (0.5, "float"),
    (np.ones(2, bool), "array"),
]:
    case(
        ROI_OPS,
        {"aligned": value},
        TypeError,
        "aligned",
        id=f"aligned-{label}",
        match="aligned must be True or False",
    )

# RoIAlign's data checks and sizes that say more than the argument's name
_nan_box = _roi_boxes()
_nan_box[1, 2] = np.nan
case(
    ROI_OPS,
    {"boxes": _nan_box},
    ValueError,
    "boxes[1]",
    id="boxes-nan-shows-the-box",
    match=r"boxes must be finite: boxes\[1\] = \[1, 2, nan, 4\]",
)
# An adaptive grid of more than 2**24 samples in a bin.
case(
    ROI_OPS,
    {"boxes": np.array([[0, 0, 1e9, 2], [1, 2, 5, 4]], np.float32)},
    ValueError,
    "boxes[0]",
    id="boxes-adaptive-grid-too-large",
    match=r"boxes\[0\] .* samples in each bin .* pass a positive sampling_ratio",
)
for value, exc, label, words in [
    (0, ValueError, "int-0", r"output_size must be positive, got \[0, 0\]"),
    (-2, ValueError, "int-negative", "output_size must be positive"),
    ((2.5, 2), TypeError, "fraction", "output_size must hold integers"),
]:
    case(
        ROI_POOLED_OPS,
        {"output_size": value},
        exc,
        "output_size",
        id=f"output_size-{label}",
        match=words,
    )
# longdouble gradients, whatever the result's dtype (no dtype has their
# precision)
if np.dtype(np.longdouble).itemsize > 8:
    for value, label in [(None, "default"), (np.float16, "f16"), (np.float64, "f64")]:
        case(
            ROI_GRAD_IMAGE_OPS,
            shaped(
                "grads",
                (NUM_BOXES, CROP_H, CROP_W, DEPTH),
                lambda s: np.ones(s, np.longdouble),
                dtype=value,
            ),
            TypeError,
            "grads",
            id=f"grads-longdouble-dtype-{label}",
            match=r"grads must be float16, float32, float64, bfloat16 or integers, "
            r"got float\d+: convert them first",
        )

# grid_sample's arguments (docs/semantics.md "Grid sampling"): the image
# (4-D, 5-D volumetric refused), the grid [N, H_out, W_out, 2] (finite, the
# image's batch), grads of the sampled output's shape, the JVP's tangent of
# the grid's shape, the image gradient's image_size, the sampling options.
_GRID_4D = r"grid must be 4-D \(N, H_out, W_out, 2\) holding \(x, y\)"
case(
    GRID_IMAGE_OPS,
    {"image": np.zeros((BATCH, DEPTH, HEIGHT))},
    ValueError,
    "image",
    id="grid-image-3d",
    match=r"image must be 4-D .*\(NCHW\), got shape \(2, 3, 4\)",
)
case(
    GRID_IMAGE_OPS,
    {"image": np.zeros((BATCH, DEPTH, 2, HEIGHT, WIDTH), np.float32)},
    ValueError,
    "image",
    id="grid-image-5d",
    match=r"volumetric \(5-D\) grid sampling is not provided",
)
case(
    GRID_IMAGE_OPS,
    {
        "image": np.zeros((BATCH, 2, HEIGHT, WIDTH, DEPTH), np.float32),
        "data_format": "NHWC",
    },
    ValueError,
    "image",
    id="grid-image-5d-nhwc",
    match=r"image must be 4-D \(N, H, W, C\), got shape .*volumetric",
)
for nhwc, label in [
    ((BATCH, 0, WIDTH, DEPTH), "height-0"),
    ((BATCH, HEIGHT, 0, DEPTH), "width-0"),
]:
    case(
        GRID_IMAGE_OPS,
        shaped("image", nhwc, np.zeros),
        ValueError,
        "image",
        id=f"grid-image-{label}",
        match="image must be at least 1 pixel high and wide",
    )
for dt in _UNSUPPORTED_IMAGE:
    case(
        GRID_IMAGE_OPS,
        shaped(
            "image", (BATCH, HEIGHT, WIDTH, DEPTH), lambda s, dt=dt: np.zeros(s, dt)
        ),
        TypeError,
        "image",
        id=f"grid-image-{dt}",
    )
for nhwc, label in [
    ((BATCH + 1, HEIGHT, WIDTH, DEPTH), "batch-more"),
    ((BATCH - 1, HEIGHT, WIDTH, DEPTH), "batch-fewer"),
    ((0, HEIGHT, WIDTH, DEPTH), "batch-0"),
]:
    case(
        GRID_IMAGE_OPS,
        shaped("image", nhwc, np.zeros),
        ValueError,
        "grid",
        id=f"grid-image-{label}",
        match=_GRID_BATCH,
    )
case(
    GRID_GRAD_GRID_OPS,
    shaped("image", (BATCH, HEIGHT, WIDTH, DEPTH + 1), np.zeros),
    ValueError,
    "grads",
    id="grid-image-depth",
    match="grads must have the shape of the sampled output",
)

# the grid (every op)
for shape, label, pattern in [
    ((BATCH, CROP_H, CROP_W), "3d", _GRID_4D),
    ((BATCH, CROP_H, CROP_W, 2, 1), "5d", _GRID_4D),
    ((BATCH, CROP_H * CROP_W * 2), "2d", _GRID_4D),
    ((BATCH, CROP_H, CROP_W, 3), "3-coordinates", _GRID_4D),
    ((BATCH, CROP_H, CROP_W, 1), "1-coordinate", _GRID_4D),
    ((BATCH, CROP_H, CROP_W, 0), "0-coordinates", _GRID_4D),
    ((BATCH + 1, CROP_H, CROP_W, 2), "batch-more", _GRID_BATCH),
    ((BATCH - 1, CROP_H, CROP_W, 2), "batch-fewer", _GRID_BATCH),
    ((0, CROP_H, CROP_W, 2), "batch-0", _GRID_BATCH),
]:
    case(
        GRID_OPS,
        {"grid": np.zeros(shape, np.float32)},
        ValueError,
        "grid",
        id=f"grid-{label}",
        match=pattern,
    )


def _grid_with(value, at=(1, 2, 0, 1), dtype=np.float32):
    def make(args):
        grid = args["grid"].astype(dtype)
        grid[at] = value
        return grid

    return Derived(make)


for value, label, pattern in [
    (np.nan, "nan", r"grid must be finite: grid\[1, 2, 0, 1\] = nan$"),
    (np.inf, "inf", r"grid must be finite: grid\[1, 2, 0, 1\] = inf$"),
    (-np.inf, "minus-inf", r"grid must be finite: grid\[1, 2, 0, 1\] = -inf$"),
]:
    case(
        GRID_OPS,
        {"grid": _grid_with(value)},
        ValueError,
        "grid",
        id=f"grid-{label}",
        match=pattern,
    )
# The first non-finite value in C order is the one named.
case(
    GRID_OPS,
    lambda op: {
        "grid": np.where(
            np.arange(BATCH * CROP_H * CROP_W * 2).reshape(_GRID_SHAPE) >= 5,
            np.float32(np.nan),
            _grid(),
        )
    },
    ValueError,
    "grid",
    id="grid-first-nan",
    match=r"grid\[0, 1, 0, 1\] = nan",
)
# Finite in float64, infinite once converted to float32 arithmetic.
case(
    GRID_OPS,
    {"grid": _grid_with(1e39, at=(0, 0, 1, 0), dtype=np.float64)},
    ValueError,
    "grid",
    id="grid-beyond-float32",
    match=r"grid\[0, 0, 1, 0\] = 1e\+39 \(beyond float32\)",
)
case(
    GRID_OPS,
    {"grid": _grid_with(np.nan, at=(0, 0, 0, 0), dtype=np.float16)},
    ValueError,
    "grid",
    id="grid-float16-nan",
    match=r"grid\[0, 0, 0, 0\] = nan",
)

# grads (the image gradient and the grid gradient): the sampled output's
# shape, NCHW [N, C, H_out, W_out]
for nhwc, label in [
    ((NUM_BOXES, CROP_H, CROP_W, DEPTH, 1), "5d"),
    ((NUM_BOXES, CROP_H + 1, CROP_W, DEPTH), "height"),
    ((NUM_BOXES, CROP_H, CROP_W - 1, DEPTH), "width"),
    ((NUM_BOXES, 0, CROP_W, DEPTH), "height-0"),
    ((NUM_BOXES + 1, CROP_H, CROP_W, DEPTH), "batch"),
    ((NUM_BOXES, CROP_H, CROP_W, DEPTH + 1), "depth"),
    ((NUM_BOXES, CROP_W, CROP_H, DEPTH), "transposed"),
]:
    case(
        GRID_GRADS_OPS,
        shaped("grads", nhwc, np.zeros),
        ValueError,
        "grads",
        id=f"grid-grads-{label}",
        match=r"grads must have the shape of the sampled output \(N, C, H_out, W_out\)",
    )
case(
    GRID_GRADS_OPS,
    {"grads": np.zeros((NUM_BOXES, DEPTH, CROP_H), np.float32)},
    ValueError,
    "grads",
    id="grid-grads-3d",
)
case(
    GRID_GRADS_OPS,
    {"grads": [[[[1, 2], [3]]]]},
    ValueError,
    "grads",
    id="grid-grads-ragged-inner",
)
# The image gradient with NHWC: the shapes say so.
case(
    GRID_GRAD_IMAGE_OPS,
    {
        "data_format": "NHWC",
        "image_size": [BATCH, HEIGHT, WIDTH, DEPTH],
        "grads": np.zeros((NUM_BOXES, DEPTH, CROP_H, CROP_W), np.float32),
    },
    ValueError,
    "grads",
    id="grid-grads-nchw-for-nhwc",
    match=r"\(N, H_out, W_out, C\) = \(2, 3, 2, 3\), got \(2, 3, 3, 2\)",
)

# grid_tangent (the grid JVP): the grid's shape; any values
for shape, label in [
    ((BATCH, CROP_H, CROP_W, 3), "3-coordinates"),
    ((BATCH, CROP_H + 1, CROP_W, 2), "height"),
    ((BATCH + 1, CROP_H, CROP_W, 2), "batch"),
    ((BATCH, CROP_H, CROP_W), "3d"),
    ((BATCH * CROP_H * CROP_W * 2,), "flat"),
]:
    case(
        GRID_JVP_OPS,
        {"grid_tangent": np.zeros(shape, np.float32)},
        ValueError,
        "grid_tangent",
        id=f"grid_tangent-{label}",
        match=r"grid_tangent must have the grid's shape \(2, 3, 2, 2\)",
    )

# mode and padding_mode: PyTorch's spellings only
for value, label in [
    ("Bilinear", "case"),
    ("bilinearx", "unknown"),
    ("", "empty"),
    (None, "None"),
    (0, "int"),
    (["bilinear"], "list"),
    (b"bilinear", "bytes"),
    ("area", "area"),
    ("linear", "linear"),
]:
    case(
        GRID_OPS,
        {"mode": value},
        ValueError,
        "mode",
        id=f"grid-mode-{label}",
        match=r"mode must be one of 'bilinear', 'nearest', 'bicubic', got ",
    )
for value, label in [
    ("Zeros", "case"),
    ("zero", "zero"),
    ("constant", "constant"),
    ("reflect", "reflect"),
    ("", "empty"),
    (None, "None"),
    (0, "int"),
    (("zeros",), "tuple"),
]:
    case(
        GRID_OPS,
        {"padding_mode": value},
        ValueError,
        "padding_mode",
        id=f"grid-padding_mode-{label}",
        match=r"padding_mode must be one of 'zeros', 'border', 'reflection', got ",
    )
# align_corners: a bool (PyTorch's None is its default in cropgrad.torch only)
for value, label in [
    ("yes", "str"),
    (None, "None"),
    (np.ones(2, bool), "array"),
    (2, "int-2"),
    (0.5, "float"),
]:
    case(
        GRID_OPS,
        {"align_corners": value},
        TypeError,
        "align_corners",
        id=f"grid-align_corners-{label}",
    )
# float64 arithmetic has no float16 or bfloat16 result.
case(
    GRID_SAMPLED_OPS,
    shaped("image", (BATCH, HEIGHT, WIDTH, DEPTH), np.zeros, dtype=np.float16),
    TypeError,
    "dtype",
    id="grid-dtype-float16-from-float64",
    match="would be rounded twice",
)
case(
    GRID_GRAD_IMAGE_OPS,
    shaped("grads", (NUM_BOXES, CROP_H, CROP_W, DEPTH), np.zeros, dtype=np.float16),
    TypeError,
    "dtype",
    id="grid-dtype-float16-from-float64",
    match="would be rounded twice",
)
# No boxes, no method, no sampling options of RoIAlign; the grid gradient
# has no dtype (the arithmetic type's).
for arg, value in [
    ("boxes", _roi_boxes()),
    ("box_ind", _box_ind()),
    ("method", "bilinear"),
    ("extrapolation_value", 0.0),
    ("output_size", [CROP_H, CROP_W]),
    ("sampling_ratio", 2),
    ("aligned", True),
    ("T", np.float32),
]:
    case(GRID_OPS, {arg: value}, TypeError, arg, id=f"grid-has-no-{arg}")
case(
    GRID_GRAD_GRID_OPS,
    {"dtype": np.float32},
    TypeError,
    "dtype",
    id="grid-grad_grid-has-no-dtype",
)

# unknown keyword arguments (every op), positional raw ops, a missing T
for op in ALL_OPS:
    case(
        (op,),
        {"no_such_argument": 1},
        TypeError,
        "no_such_argument",
        id="unknown-keyword",
    )
case(("raw_grad_boxes",), {"out": None}, TypeError, "out", id="raw-has-no-out")
case(
    GRAD_BOXES_OPS + JVP_OPS,
    {"extrapolation_value": 0.0},
    TypeError,
    "extrapolation_value",
    id="grad_boxes-has-no-extrapolation_value",
)
case(
    ("raw_grad_image",), {"dtype": np.float32}, TypeError, "dtype", id="raw-dtype-is-T"
)
case(
    ("raw_grad_image",),
    {"num_threads": 2},
    TypeError,
    "num_threads",
    id="raw-has-no-num_threads",
)
case(("grad_image",), {"T": np.float32}, TypeError, "T", id="public-has-no-T")
# RoIAlign has no method, no extrapolation value (its samples outside add
# nothing) and no T; its boxes gradient no dtype (the arithmetic type's).
for arg, value in [
    ("method", "bilinear"),
    ("extrapolation_value", 0.0),
    ("crop_size", [CROP_H, CROP_W]),
    ("T", np.float32),
]:
    case(ROI_OPS, {arg: value}, TypeError, arg, id=f"roi-has-no-{arg}")
case(
    ROI_GRAD_BOXES_OPS,
    {"dtype": np.float32},
    TypeError,
    "dtype",
    id="grad_boxes-has-no-dtype",
)

# out= (image gradient and forward)
_GI_SHAPE = (BATCH, HEIGHT, WIDTH, DEPTH)
_FW_SHAPE = (NUM_BOXES, CROP_H, CROP_W, DEPTH)


def _readonly(shape, dtype=np.float32):
    arr = np.zeros(shape, dtype)
    arr.flags.writeable = False
    return arr


def _strided(shape, dtype=np.float32):
    return np.zeros(shape[:-1] + (2 * shape[-1],), dtype)[..., ::2]


for op, shape in (
    ("grad_image", _GI_SHAPE),
    ("forward", _FW_SHAPE),
    ("jvp_boxes", _FW_SHAPE),
    ("roi_align", layout("roi_align", _FW_SHAPE)),
    ("roi_align_grad_image", layout("roi_align", _GI_SHAPE)),
    ("roi_align_grad_boxes", (NUM_BOXES, 4)),
    ("roi_align_jvp_boxes", layout("roi_align", _FW_SHAPE)),
    ("grid_sample", layout("grid_sample", _FW_SHAPE)),
    ("grid_sample_grad_image", layout("grid_sample", _GI_SHAPE)),
    ("grid_sample_grad_grid", _GRID_SHAPE),
    ("grid_sample_jvp_grid", layout("grid_sample", _FW_SHAPE)),
):
    for value, exc, label in [
        (np.zeros(shape[:-1] + (shape[-1] + 1,), np.float32), ValueError, "shape"),
        (np.zeros(shape[1:], np.float32), ValueError, "rank"),
        (np.zeros(shape, np.float64), TypeError, "dtype-float64"),
        (np.zeros(shape, np.float16), TypeError, "dtype-float16"),
        (np.zeros(shape, np.int32), TypeError, "dtype-int"),
        (np.zeros(shape, ">f4"), TypeError, "big-endian"),
        (np.zeros(shape, np.float32, order="F"), ValueError, "fortran-order"),
        (_strided(shape), ValueError, "strided"),
        (_readonly(shape), ValueError, "read-only"),
        (np.zeros(shape, np.float32).tolist(), TypeError, "list"),
        (memoryview(np.zeros(shape, np.float32)), TypeError, "memoryview"),
        (0.0, TypeError, "scalar"),
    ]:
        # RoIAlign's and grid_sample's messages say what out must be.
        says_what = op in NCHW_OPS and label in (
            "shape",
            "dtype-float64",
            "fortran-order",
        )
        match = "out must" if says_what else None
        case((op,), {"out": value}, exc, "out", id=f"out-{label}", match=match)


def _alias_grads(args):
    # out viewing the memory of grads (grads made big enough to hold it)
    buf = np.zeros(BATCH * HEIGHT * WIDTH * DEPTH + args["grads"].size, np.float32)
    args["grads"] = buf[: args["grads"].size].reshape(args["grads"].shape)
    return buf[args["grads"].size // 2 :][: BATCH * HEIGHT * WIDTH * DEPTH].reshape(
        _GI_SHAPE
    )


def _alias_boxes_float16(args):
    buf = np.zeros(BATCH * HEIGHT * WIDTH * DEPTH, np.float16)
    args["boxes"] = buf[:16].view(np.float32).reshape(NUM_BOXES, 4)
    args["boxes"][:] = _boxes()
    args["dtype"] = np.float16
    return buf.reshape(_GI_SHAPE)


def _alias_image(args):
    buf = np.zeros(
        BATCH * HEIGHT * WIDTH * DEPTH + NUM_BOXES * CROP_H * CROP_W * DEPTH, np.float32
    )
    args["image"] = buf[: BATCH * HEIGHT * WIDTH * DEPTH].reshape(_GI_SHAPE)
    args["image"][:] = _image()
    return buf[-NUM_BOXES * CROP_H * CROP_W * DEPTH - 1 : -1].reshape(_FW_SHAPE)


case(
    ("grad_image",),
    {"out": Derived(_alias_grads)},
    ValueError,
    "out",
    id="out-aliases-grads",
)
case(
    ("grad_image",),
    {"out": Derived(_alias_boxes_float16)},
    ValueError,
    "out",
    id="out-aliases-boxes-float16",
)
case(
    ("forward", "jvp_boxes"),
    {"out": Derived(_alias_image)},
    ValueError,
    "out",
    id="out-aliases-image",
)


def _alias_tangent(args):
    out = np.zeros(_FW_SHAPE, np.float32)
    args["boxes_tangent"] = out.reshape(-1)[-4 * NUM_BOXES :].reshape(NUM_BOXES, 4)
    args["boxes_tangent"][:] = _tangent()
    return out


case(
    ("jvp_boxes",),
    {"out": Derived(_alias_tangent)},
    ValueError,
    "out",
    id="out-aliases-boxes_tangent",
)


# RoIAlign: out viewing an input's memory, in the op's layout.
def _roi_alias_image(args):
    image = args["image"]
    buf = np.zeros(image.size + NUM_BOXES * CROP_H * CROP_W * DEPTH, np.float32)
    args["image"] = buf[: image.size].reshape(image.shape)
    args["image"][:] = image
    shape = layout("roi_align", _FW_SHAPE)
    return buf[-NUM_BOXES * CROP_H * CROP_W * DEPTH - 1 : -1].reshape(shape)


def _roi_alias_grads(args):
    out = _alias_grads(args)
    return out.reshape(layout("roi_align", _GI_SHAPE))


def _roi_alias_boxes(args):
    out = np.zeros((NUM_BOXES, 4), np.float32)
    args["boxes"] = out
    args["boxes"][:] = _roi_boxes()
    return out


_SHARES = "out must not share memory with an input"
case(
    ROI_POOLED_OPS,
    {"out": Derived(_roi_alias_image)},
    ValueError,
    "out",
    id="out-aliases-image",
    match=_SHARES,
)
case(
    ROI_GRAD_IMAGE_OPS,
    {"out": Derived(_roi_alias_grads)},
    ValueError,
    "out",
    id="out-aliases-grads",
    match=_SHARES,
)
case(
    ROI_GRAD_BOXES_OPS,
    {"out": Derived(_roi_alias_boxes)},
    ValueError,
    "out",
    id="out-aliases-boxes",
    match=_SHARES,
)

case(
    GRID_SAMPLED_OPS,
    {"out": Derived(_roi_alias_image)},
    ValueError,
    "out",
    id="out-aliases-image",
    match=_SHARES,
)
case(
    GRID_GRAD_IMAGE_OPS,
    {"out": Derived(_roi_alias_grads)},
    ValueError,
    "out",
    id="out-aliases-grads",
    match=_SHARES,
)


def _alias_grid(args):
    out = np.zeros(_GRID_SHAPE, np.float32)
    out[:] = args["grid"]
    args["grid"] = out
    return out


def _alias_grid_tangent(args):
    # The tangent's memory inside the output's.
    out = np.zeros(layout("grid_sample", _FW_SHAPE), np.float32)
    tangent = out.reshape(-1)[: args["grid_tangent"].size]
    tangent[:] = args["grid_tangent"].reshape(-1)
    args["grid_tangent"] = tangent.reshape(_GRID_SHAPE)
    return out


case(
    GRID_GRAD_GRID_OPS,
    {"out": Derived(_alias_grid)},
    ValueError,
    "out",
    id="out-aliases-grid",
    match=_SHARES,
)
case(
    GRID_JVP_OPS,
    {"out": Derived(_alias_grid_tangent)},
    ValueError,
    "out",
    id="out-aliases-grid_tangent",
    match=_SHARES,
)


# --------------------------------------------------------------------------
# Checking a case


def _snapshot(value):
    if isinstance(value, np.ndarray):
        return (
            "array",
            value.copy(order="K"),
            value.shape,
            value.strides,
            value.dtype,
            value.flags.writeable,
            value.tobytes(order="A"),
        )
    if isinstance(value, (list, tuple, dict)):
        return ("container", copy.deepcopy(value), repr(value))
    return ("other", value)


def _assert_unchanged(name, value, snap):
    if snap[0] == "array":
        _, _, shape, strides, dtype, writeable, raw = snap
        assert value.shape == shape and value.strides == strides, name
        assert value.dtype == dtype, name
        assert value.flags.writeable == writeable, f"{name} changed its writeable flag"
        assert value.tobytes(order="A") == raw, f"{name} was modified"
    elif snap[0] == "container":
        assert repr(value) == snap[2], f"{name} was modified"


def _names_in(message, names):
    for name in names:
        pattern = re.escape(name)
        if name[0].isalnum() or name[0] == "_":
            pattern = r"(?<![\w.])" + pattern
        if name[-1].isalnum() or name[-1] == "_":
            pattern += r"(?!\w)"
        if re.search(pattern, message):
            return True
    return False


@pytest.fixture
def no_kernel():
    """How many times calls have run their tasks since the test started.

    The runtime counts every time a call runs its tasks (on the calling
    thread or on a team), whichever entry point and wherever in the call an
    error is raised afterwards: every check must come before any work, so
    a rejected call leaves the count at 0.  (A call without tasks, such as
    zeros for no boxes, is caught by the prefilled ``out=`` of the cases
    below instead.)
    """
    from cropgrad._runtime import parallel

    before = parallel.task_runs()
    return lambda: parallel.task_runs() - before


def _run_case(op, changes, exc, names, match, no_kernel, extra=None):
    func, make = OPS[op]
    args = make()
    for key, value in changes.items():
        args[key] = value.make(args) if isinstance(value, Derived) else value
    if extra:
        args.update(extra)
    snaps = {key: _snapshot(value) for key, value in args.items()}
    with pytest.raises(exc) as info:
        func(**args)
    message = str(info.value)
    assert message.strip(), f"{info.type.__name__} with an empty message"
    assert _names_in(message, names), (
        f"{info.type.__name__} message does not name {' or '.join(names)}: {message!r}"
    )
    if match is not None:
        assert re.search(match, message), f"{message!r} does not match {match!r}"
    assert no_kernel() == 0, "a kernel ran before the error"
    for key, value in args.items():
        _assert_unchanged(key, value, snaps[key])
    return info


@pytest.mark.parametrize("op, changes, exc, names, match", CASES)
def test_bad_input_is_rejected(op, changes, exc, names, match, no_kernel):
    _run_case(op, changes, exc, names, match, no_kernel)


# The same cases again with a valid, prefilled out= array: a rejected call
# must not have written into it either.
_OUT_SHAPES = {
    "grad_image": _GI_SHAPE,
    "forward": _FW_SHAPE,
    "grad_boxes": (NUM_BOXES, 4),
    "jvp_boxes": _FW_SHAPE,
    "roi_align": layout("roi_align", _FW_SHAPE),
    "roi_align_grad_image": layout("roi_align", _GI_SHAPE),
    "roi_align_grad_boxes": (NUM_BOXES, 4),
    "roi_align_jvp_boxes": layout("roi_align", _FW_SHAPE),
    "grid_sample": layout("grid_sample", _FW_SHAPE),
    "grid_sample_grad_image": layout("grid_sample", _GI_SHAPE),
    "grid_sample_grad_grid": _GRID_SHAPE,
    "grid_sample_jvp_grid": layout("grid_sample", _FW_SHAPE),
}
_SHAPE_ARGS = {
    "out",
    "image_size",
    "crop_size",
    "dtype",
    "image",
    "grads",
    "boxes",
    "boxes_tangent",
    "box_ind",
    "no_such_argument",
    "T",
}


def _keeps_output_shape(param):
    op, changes, _, names, _ = param.values
    if op in NCHW_OPS:
        # RoIAlign's and grid_sample's ops take out= last, after every
        # other check: a valid out= changes no case but those of out
        # itself and those of an output too large to allocate (out= is not
        # allocated).
        return "out" not in changes and "output" not in names
    if op not in _OUT_SHAPES:
        return False
    if not set(changes) & _SHAPE_ARGS:
        return True
    # Bad values (not shapes) of boxes and box_ind: the message names a
    # position such as boxes[1].
    return set(changes) <= {"boxes", "box_ind"} and any("[" in n for n in names)


OUT_CASES = [p for p in CASES if _keeps_output_shape(p)]


@pytest.mark.parametrize("op, changes, exc, names, match", OUT_CASES)
def test_rejected_call_leaves_valid_out_untouched(
    op, changes, exc, names, match, no_kernel
):
    out = np.full(_OUT_SHAPES[op], 1234.5, np.float32)
    _run_case(op, changes, exc, names, match, no_kernel, extra={"out": out})
    assert np.all(out == np.float32(1234.5))


def test_jvp_boxes_writes_into_out():
    args = jvp_boxes_args()
    out = np.full(_FW_SHAPE, 1234.5, np.float32)
    result = cropgrad.crop_and_resize_jvp_boxes(**args, out=out)
    assert result is out
    np.testing.assert_array_equal(out, cropgrad.crop_and_resize_jvp_boxes(**args))


def test_grad_boxes_writes_into_out():
    args = grad_boxes_args()
    out = np.full((NUM_BOXES, 4), 1234.5, np.float32)
    result = cropgrad.crop_and_resize_grad_boxes(**args, out=out)
    assert result is out
    np.testing.assert_array_equal(out, cropgrad.crop_and_resize_grad_boxes(**args))


def test_table_is_not_empty():
    # Guard against a refactoring that silently drops the parametrization.
    assert len(CASES) > 300
    assert len(OUT_CASES) > 20
    # Every op of both families has its cases, and every pattern of
    # RoIAlign's words is checked by a case.
    assert {p.values[0] for p in CASES} == set(OPS)
    assert {p.values[0] for p in OUT_CASES} >= set(ROI_OPS + GRID_OPS)
    # Every op of the op model (cropgrad._ops) is in the table.
    assert {func.__name__ for func, _ in OPS.values()} >= set(_ops.OPS)
    ids = {p.id.split("-", 1)[1] for p in CASES if p.values[0] in ROI_OPS}
    assert set(ROI_WORDS) <= ids


# --------------------------------------------------------------------------
# Messages that must say more than the argument's name


def test_unknown_method_lists_the_allowed_ones():
    args = grad_image_args()
    with pytest.raises(ValueError) as info:
        cropgrad.crop_and_resize_grad_image(**args, method="bicubic")
    assert "'bilinear'" in str(info.value) and "'nearest'" in str(info.value)
    assert "bicubic" in str(info.value)


def test_bad_box_index_names_position_and_value():
    args = grad_image_args()
    args["box_ind"] = [1, 7]
    with pytest.raises(IndexError, match=r"box_ind\[1\] = 7"):
        cropgrad.crop_and_resize_grad_image(**args)


def test_nonfinite_box_names_the_first_bad_box():
    args = forward_args()
    args["boxes"] = np.array(
        [[0, 0, 1, 1], [0, np.nan, 1, 1], [np.inf, 0, 1, 1]], np.float32
    )
    args["box_ind"] = [0, 0, 0]
    with pytest.raises(ValueError, match=r"boxes\[1\]"):
        cropgrad.crop_and_resize(**args)


def test_memory_error_says_what_and_how_big():
    args = grad_image_args()
    args["image_size"] = [2**40, 2**20, 1, DEPTH]
    with pytest.raises((MemoryError, ValueError)) as info:
        cropgrad.crop_and_resize_grad_image(**args)
    message = str(info.value)
    assert "output" in message
    assert re.search(r"\d", message), "no size in the message"


def test_float16_accumulator_that_cannot_be_allocated():
    # The float16 output fits in the address space but its float32
    # accumulator would not: still refused before any work.
    grads = np.zeros((0, 1, 1, 1), np.float32)
    size = [
        2**32,
        2**29,
        1,
        1,
    ]  # 2**61 float16 elements: 2**62 bytes, 2**63 for float32
    with pytest.raises((MemoryError, ValueError)) as info:
        cropgrad.crop_and_resize_grad_image(
            grads, np.zeros((0, 4)), [], size, np.float16
        )
    assert str(info.value).strip()


def test_raw_ops_are_keyword_only():
    args = grad_image_args()
    with pytest.raises(TypeError):
        raw_ops.CropAndResizeGradImage(*args.values(), np.float32)
    with pytest.raises(TypeError, match="T"):
        raw_ops.CropAndResizeGradImage(**args)
    with pytest.raises(TypeError):
        raw_ops.CropAndResize(*forward_args().values())
    with pytest.raises(TypeError):
        raw_ops.CropAndResizeGradBoxes(*grad_boxes_args().values())


# --------------------------------------------------------------------------
# Not errors: the edges of what is allowed


@pytest.mark.parametrize(
    "value", [np.float32, "float32", "float", np.dtype("<f4"), np.dtype(">f4"), "f4"]
)
def test_float32_spellings(value):
    out = cropgrad.crop_and_resize_grad_image(**grad_image_args(), dtype=value)
    assert out.dtype == np.float32 and out.dtype.isnative


@pytest.mark.parametrize("value", [1, 1024, np.int64(2), np.uint8(3), None])
def test_num_threads_allowed(value):
    expected = cropgrad.crop_and_resize_grad_image(**grad_image_args(), num_threads=1)
    got = cropgrad.crop_and_resize_grad_image(**grad_image_args(), num_threads=value)
    assert got.tobytes() == expected.tobytes()


@pytest.mark.parametrize("value", [True, False, np.bool_(True), 0, 1])
def test_flush_denormals_allowed(value):
    out = cropgrad.crop_and_resize_grad_image(
        **grad_image_args(), flush_denormals=value
    )
    assert out.shape == (BATCH, HEIGHT, WIDTH, DEPTH)


@pytest.mark.parametrize(
    "value",
    [
        0,
        -3,
        2.5,
        np.float64(1e3),
        np.float32(-7),
        np.int8(4),
        np.array(2.0),
        float("nan"),
        float("inf"),
    ],
)
def test_extrapolation_value_allowed(value):
    args = forward_args()
    args["boxes"] = [[2, 2, 3, 3], [-3, -3, -2, -2]]  # every sample outside
    out = cropgrad.crop_and_resize(**args, extrapolation_value=value)
    np.testing.assert_array_equal(out, np.full(out.shape, np.float32(value)))


def test_image_size_forms_allowed():
    base = cropgrad.crop_and_resize_grad_image(**grad_image_args())
    for size in (
        [BATCH, HEIGHT, WIDTH, DEPTH],
        (BATCH, HEIGHT, WIDTH, DEPTH),
        np.array([BATCH, HEIGHT, WIDTH, DEPTH], np.int32),
        np.array([BATCH, HEIGHT, WIDTH, DEPTH], np.uint64),
        np.array([BATCH, HEIGHT, WIDTH, DEPTH], ">i8"),
        np.array([BATCH, HEIGHT, WIDTH, DEPTH], object),
        [np.int64(BATCH), np.uint8(HEIGHT), WIDTH, np.int16(DEPTH)],
    ):
        args = grad_image_args()
        args["image_size"] = size
        assert cropgrad.crop_and_resize_grad_image(**args).tobytes() == base.tobytes()


def test_large_but_valid_batch_without_boxes_is_not_an_error():
    # batch is only a bound for box_ind: an empty output of a huge batch is fine.
    out = cropgrad.crop_and_resize_grad_image(
        np.zeros((0, 1, 1, 0), np.float32), np.zeros((0, 4)), [], [2**40, 3, 3, 0]
    )
    assert out.shape == (2**40, 3, 3, 0)


def test_nan_and_inf_gradients_propagate_without_error():
    # Not an input error: IEEE arithmetic, as TensorFlow (inf * 0 is NaN).
    args = grad_image_args()
    args["grads"][0, 0, 0, 0] = np.nan
    args["grads"][1, 0, 0, 1] = np.inf
    args["grads"][1, 2, 1, 2] = -np.inf
    out = cropgrad.crop_and_resize_grad_image(**args)
    assert not np.isfinite(out).all()
    with np.errstate(invalid="ignore"):
        expected = reference.grad_image(**args, dtype=np.float32, exact=True)
    np.testing.assert_array_equal(out, expected.astype(np.float32))


@pytest.mark.parametrize("op", ROI_GRAD_IMAGE_OPS + ROI_GRAD_BOXES_OPS)
def test_big_endian_grads_give_the_native_bits(op):
    # float64 gradients are computed in float64 in either byte order.
    func, make = OPS[op]
    args = make()
    grads = np.random.default_rng(2).standard_normal(args["grads"].shape) / 3
    if "image" in args:
        args["image"] = args["image"].astype(np.float64)
    native = func(**dict(args, grads=grads))
    swapped = func(**dict(args, grads=grads.astype(">f8")))
    assert swapped.dtype == native.dtype == np.float64
    np.testing.assert_array_equal(swapped, native)


def test_limits_fit_the_platform():
    # The checks use sys.maxsize as the indexable limit; a 64-bit build is assumed
    # by the huge-output tests.
    assert sys.maxsize == 2**63 - 1


def _without_channels(op, args):
    """`args` of `op` with no channels: nothing to compute (but for the boxes
    gradients, whose output is [num_boxes, 4] whatever the depth)."""
    axis = 1 if op in ROI_OPS else 3
    for name in ("image", "grads"):
        if name in args:
            index = [slice(None)] * 4
            index[axis] = slice(0)
            args[name] = np.ascontiguousarray(args[name][tuple(index)])
    if "image_size" in args:
        args["image_size"] = list(args["image_size"])
        args["image_size"][axis] = 0
    return args


@pytest.mark.parametrize("channels", [True, False], ids=["channels", "no-channels"])
@pytest.mark.parametrize("op", PUBLIC_OPS + ROI_OPS)
def test_data_checks_run_in_one_order(op, channels):
    """box_ind before the boxes' finiteness, and both even where there is
    nothing to compute."""
    function, make = OPS[op]
    args = make() if channels else _without_channels(op, make())
    args["boxes"][0, 1] = np.nan
    args["box_ind"] = np.array([1, BATCH], np.int32)
    with pytest.raises(IndexError, match=rf"box_ind\[1\] = {BATCH}"):
        function(**args)
    args["box_ind"] = _box_ind()
    with pytest.raises(ValueError, match=r"finite: boxes\[0\]"):
        function(**args)


@pytest.mark.parametrize("channels", [True, False], ids=["channels", "no-channels"])
@pytest.mark.parametrize("op", ROI_OPS)
def test_roi_align_checks_samples_after_finiteness(op, channels):
    """Every box finite before any box's samples per bin are counted."""
    function, make = OPS[op]
    args = make() if channels else _without_channels(op, make())
    args["boxes"] = np.array([[0, 0, 1e8, 1e8], [0, np.nan, 4, 3]], np.float32)
    with pytest.raises(ValueError, match=r"finite: boxes\[1\]"):
        function(**args)
    args["boxes"][1, 1] = 0
    with pytest.raises(ValueError, match=r"boxes\[0\] = .*samples in each bin"):
        function(**args)


@pytest.mark.parametrize("value", [True, False, np.bool_(True), 0, 1])
@pytest.mark.parametrize("op", GRID_OPS)
def test_grid_sample_align_corners_allowed(op, value):
    func, make = OPS[op]
    got = func(**make(), align_corners=value)
    assert got.tobytes() == func(**make(), align_corners=bool(value)).tobytes()


@pytest.mark.parametrize("op", GRID_OPS)
def test_grid_forms_allowed(op):
    # Any real array_like: converted to the arithmetic type first.
    func, make = OPS[op]
    grid = np.array([[[-1, 0], [1, 1]], [[0, -1], [1, 0]], [[-1, 1], [0, 0]]])
    grid = np.stack([grid, grid[::-1]])  # [BATCH, CROP_H, CROP_W, 2] of ints
    base = func(**dict(make(), grid=grid.astype(np.float32)))
    for form in (
        grid,
        grid.tolist(),
        grid.astype(np.int8),
        grid.astype(np.float16),
        grid.astype(">f8"),
        np.asfortranarray(grid.astype(np.float64)),
    ):
        assert func(**dict(make(), grid=form)).tobytes() == base.tobytes()


def test_non_finite_grid_tangent_propagates_without_error():
    # Not an input error: IEEE arithmetic (docs: NaN and infinities in the
    # tangent are allowed and propagate).
    args = grid_jvp_grid_args()
    args["grid_tangent"][0, 0, 0] = (np.nan, np.inf)
    args["grid_tangent"][1, 2, 1] = (-np.inf, 0.0)
    out = cropgrad.grid_sample_jvp_grid(**args)
    assert np.isnan(out[0, :, 0, 0]).all()
    assert not np.isfinite(out[1, :, 2, 1]).all()
    assert np.isfinite(out[:, :, 1]).all()
