"""RoIAlign's bad arguments: the documented exception, a message that names
the argument and says what to pass, nothing written.

Each row changes one argument of a valid call of one of the four functions
(docs/semantics.md, "RoIAlign": the validation table).
"""

import numpy as np
import pytest

import cropgrad

IMAGE = np.random.default_rng(1).standard_normal((2, 3, 8, 9)).astype(np.float32)
BOXES = np.array([[0, 0, 4, 4], [1, 2, 7, 6], [2, 2, 3, 3]], np.float32)
BOX_IND = np.array([0, 1, 1])
GRADS = np.ones((3, 3, 2, 2), np.float32)
TANGENT = np.ones((3, 4), np.float32)


def _args(op):
    """A valid call of `op`: (positional arguments, keyword arguments)."""
    if op == "roi_align":
        return [IMAGE, BOXES, BOX_IND, 2], {}
    if op == "roi_align_grad_image":
        return [GRADS, BOXES, BOX_IND, IMAGE.shape], {}
    if op == "roi_align_grad_boxes":
        return [GRADS, IMAGE, BOXES, BOX_IND], {}
    return [IMAGE, BOXES, BOX_IND, TANGENT, 2], {}


OPS = (
    "roi_align",
    "roi_align_grad_image",
    "roi_align_grad_boxes",
    "roi_align_jvp_boxes",
)
# Position of each array argument, per op.
AT = {
    "roi_align": {"image": 0, "boxes": 1, "box_ind": 2, "size": 3},
    "roi_align_grad_image": {"grads": 0, "boxes": 1, "box_ind": 2, "size": 3},
    "roi_align_grad_boxes": {"grads": 0, "image": 1, "boxes": 2, "box_ind": 3},
    "roi_align_jvp_boxes": {
        "image": 0,
        "boxes": 1,
        "box_ind": 2,
        "tangent": 3,
        "size": 4,
    },
}

_nan_box = BOXES.copy()
_nan_box[1, 2] = np.nan
_inf_box = BOXES.copy()
_inf_box[2, 0] = -np.inf
_huge_box = BOXES.copy()
_huge_box[0] = [0, 0, 1e9, 2]

# (name, argument to change (a position's name or a keyword), value, the
# ops it applies to, exception, message pattern)
ROWS = [
    (
        "nan box",
        "boxes",
        _nan_box,
        OPS,
        ValueError,
        r"boxes must be finite: boxes\[1\] = \[1, 2, nan, 6\]",
    ),
    ("infinite box", "boxes", _inf_box, OPS, ValueError, r"boxes\[2\]"),
    (
        "five columns",
        "boxes",
        np.ones((3, 5)),
        OPS,
        ValueError,
        r"4 columns \[x1, y1, x2, y2\]",
    ),
    (
        "box_ind outside",
        "box_ind",
        np.array([0, 2, 1]),
        OPS,
        IndexError,
        r"box_ind\[1\] = 2",
    ),
    (
        "negative box_ind",
        "box_ind",
        np.array([0, -1, 1]),
        OPS,
        IndexError,
        r"box_ind\[1\] = -1",
    ),
    (
        "box_ind of floats",
        "box_ind",
        np.array([0.5, 1, 1]),
        OPS,
        TypeError,
        "box_ind must hold integers",
    ),
    (
        "box_ind too short",
        "box_ind",
        np.array([0, 1]),
        OPS,
        ValueError,
        r"box_ind has incompatible shape \(2,\)",
    ),
    (
        "adaptive grid too large",
        "boxes",
        _huge_box,
        OPS,
        ValueError,
        r"boxes\[0\] .* samples in each bin .* pass a positive sampling_ratio",
    ),
    (
        "output size 0",
        "size",
        0,
        ("roi_align", "roi_align_jvp_boxes"),
        ValueError,
        r"output_size must be positive, got \[0, 0\]",
    ),
    (
        "output size of 3",
        "size",
        (2, 2, 2),
        ("roi_align", "roi_align_jvp_boxes"),
        ValueError,
        "output_size must have 2 elements",
    ),
    (
        "output size of floats",
        "size",
        (2.5, 2),
        ("roi_align", "roi_align_jvp_boxes"),
        TypeError,
        "output_size must hold integers",
    ),
    (
        "image 3-D",
        "image",
        IMAGE[0],
        ("roi_align", "roi_align_grad_boxes", "roi_align_jvp_boxes"),
        ValueError,
        "image must be 4-D",
    ),
    (
        "complex image",
        "image",
        IMAGE.astype(np.complex64),
        ("roi_align", "roi_align_grad_boxes", "roi_align_jvp_boxes"),
        TypeError,
        "image must hold real numbers",
    ),
    (
        "empty image",
        "image",
        np.ones((2, 3, 0, 9), np.float32),
        ("roi_align", "roi_align_grad_boxes", "roi_align_jvp_boxes"),
        ValueError,
        "image dimensions must be positive",
    ),
    (
        "grads 3-D",
        "grads",
        GRADS[0],
        ("roi_align_grad_image", "roi_align_grad_boxes"),
        ValueError,
        r"grads must be 4-D \[num_boxes, channels, out_height",
    ),
    (
        "grads of other boxes",
        "grads",
        np.ones((2, 3, 2, 2), np.float32),
        ("roi_align_grad_image", "roi_align_grad_boxes"),
        ValueError,
        "3 boxes but grads has shape",
    ),
    (
        "grads of other channels",
        "grads",
        np.ones((3, 4, 2, 2), np.float32),
        ("roi_align_grad_image", "roi_align_grad_boxes"),
        ValueError,
        "has 3 channels but grads has 4",
    ),
    (
        "image size of 3",
        "size",
        (2, 3, 8),
        ("roi_align_grad_image",),
        ValueError,
        "image_size must have 4 elements",
    ),
    (
        "tangent of other boxes",
        "tangent",
        np.ones((2, 4)),
        ("roi_align_jvp_boxes",),
        ValueError,
        r"boxes_tangent must have the shape",
    ),
    (
        "nan scale",
        "spatial_scale",
        np.nan,
        OPS,
        ValueError,
        "spatial_scale must be finite",
    ),
    (
        "scale as a string",
        "spatial_scale",
        "0.5",
        OPS,
        TypeError,
        "spatial_scale must be a real number",
    ),
    (
        "sampling ratio too large",
        "sampling_ratio",
        4097,
        OPS,
        ValueError,
        r"sampling_ratio must be at most 4096 .* 0 or less is adaptive",
    ),
    (
        "sampling ratio beyond int",
        "sampling_ratio",
        2**40,
        OPS,
        ValueError,
        "sampling_ratio must be from",
    ),
    (
        "sampling ratio of a float",
        "sampling_ratio",
        2.0,
        OPS,
        TypeError,
        "sampling_ratio must be an int",
    ),
    (
        "sampling ratio of a bool",
        "sampling_ratio",
        True,
        OPS,
        TypeError,
        "sampling_ratio must be an int",
    ),
    (
        "aligned as a string",
        "aligned",
        "yes",
        OPS,
        TypeError,
        "aligned must be True or False",
    ),
    (
        "integer dtype",
        "dtype",
        np.int32,
        ("roi_align", "roi_align_grad_image", "roi_align_jvp_boxes"),
        TypeError,
        "dtype must be float16, float32 or float64",
    ),
    (
        "layout",
        "data_format",
        "NWHC",
        OPS,
        ValueError,
        "data_format must be 'NHWC' or 'NCHW'",
    ),
    (
        "no threads",
        "num_threads",
        0,
        OPS,
        ValueError,
        "num_threads must be from 1 to 1024",
    ),
    (
        "longdouble-grads",
        "grads",
        GRADS.astype(np.longdouble),
        ("roi_align_grad_image",),
        TypeError,
        r"grads must be float16, float32, float64, bfloat16 or integers, got "
        r"float\d+: convert them first",
    ),
    (
        "tangent-none",
        "tangent",
        None,
        ("roi_align_jvp_boxes",),
        TypeError,
        "boxes_tangent must hold real numbers",
    ),
]


def _cases():
    for name, arg, value, ops, exc, pattern in ROWS:
        for op in ops:
            yield pytest.param(op, arg, value, exc, pattern, id=f"{op}-{name}")


@pytest.mark.parametrize("op, arg, value, exc, pattern", list(_cases()))
def test_bad_arguments_are_refused_before_any_work(op, arg, value, exc, pattern):
    args, kwargs = _args(op)
    if arg in AT[op]:
        args[AT[op][arg]] = value
    else:
        kwargs[arg] = value
    valid_args, valid_kwargs = _args(op)
    expected = getattr(cropgrad, op)(*valid_args, **valid_kwargs)
    out = np.full_like(expected, np.nan)
    with pytest.raises(exc, match=pattern):
        getattr(cropgrad, op)(*args, out=out, **kwargs)
    # Nothing written (the gate ran before the kernel).
    assert np.isnan(out).all()


def test_float16_output_from_float64_arithmetic_is_refused():
    with pytest.raises(TypeError, match="CG_FLOAT32 or CG_FLOAT64 for float64"):
        cropgrad.roi_align(
            IMAGE.astype(np.float64), BOXES, BOX_IND, 2, dtype=np.float16
        )


@pytest.mark.parametrize("what", ["dtype", "shape", "order"])
def test_a_bad_out_is_refused(what):
    good = cropgrad.roi_align(IMAGE, BOXES, BOX_IND, 2)
    out = {
        "dtype": np.empty(good.shape, np.float64),
        "shape": np.empty((3, 3, 2, 3), np.float32),
        "order": np.empty(good.shape, np.float32, order="F"),
    }[what]
    exc = TypeError if what == "dtype" else ValueError
    with pytest.raises(exc, match="out must"):
        cropgrad.roi_align(IMAGE, BOXES, BOX_IND, 2, out=out)


def test_out_may_not_share_memory_with_an_input():
    image = np.zeros((1, 1, 4, 4), np.float32)
    with pytest.raises(ValueError, match="out must not share memory with an input"):
        cropgrad.roi_align(
            image, [[0, 0, 1, 1]], [0], 2, out=image.reshape(-1)[:4].reshape(1, 1, 2, 2)
        )


@pytest.mark.parametrize("dtype", [np.float16, np.float64])
def test_longdouble_grads_are_refused_whatever_the_output_dtype(dtype):
    if np.dtype(np.longdouble).itemsize <= 8:
        pytest.skip("longdouble is float64 on this platform")
    with pytest.raises(TypeError, match="grads must be float16, float32"):
        cropgrad.roi_align_grad_image(
            GRADS.astype(np.longdouble), BOXES, BOX_IND, IMAGE.shape, dtype=dtype
        )


@pytest.mark.parametrize("op", ["roi_align_grad_image", "roi_align_grad_boxes"])
def test_big_endian_grads_give_the_native_bits(op):
    # float64 gradients are computed in float64 in either byte order.
    args, _ = _args(op)
    grads = np.random.default_rng(2).standard_normal(GRADS.shape) / 3
    image = IMAGE.astype(np.float64)
    if op == "roi_align_grad_boxes":
        args[AT[op]["image"]] = image
    args[0] = grads
    native = getattr(cropgrad, op)(*args)
    args[0] = grads.astype(">f8")
    swapped = getattr(cropgrad, op)(*args)
    assert swapped.dtype == native.dtype == np.float64
    np.testing.assert_array_equal(swapped, native)
