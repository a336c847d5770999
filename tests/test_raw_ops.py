"""The raw_ops drop-ins convert their arguments as TensorFlow does.

docs/semantics.md ("The raw_ops drop-ins") lists the conversions;
tests/data/check_raw_ops_conversions.py compared them with TensorFlow 2.21
once.  Here each converted form must give the bits of the same call with
the converted values written out, and the NumPy API must keep refusing
what it refuses.
"""

import os
import subprocess
import sys

import ml_dtypes
import numpy as np
import pytest

import cropgrad
from cropgrad import raw_ops

BATCH, HEIGHT, WIDTH, DEPTH = 3, 6, 5, 4
NUM_BOXES, CROP = 5, (4, 3)


def _problem():
    rng = np.random.default_rng(11)
    return dict(
        grads=rng.standard_normal((NUM_BOXES, *CROP, DEPTH)).astype(np.float32),
        image=rng.standard_normal((BATCH, HEIGHT, WIDTH, DEPTH)).astype(np.float32),
        boxes=rng.uniform(-0.1, 1.1, (NUM_BOXES, 4)).astype(np.float32),
        box_ind=np.array([2, 0, 1, 1, 0], np.int32),
    )


def _call(op, p, **changes):
    """`op` on problem `p` with some arguments replaced."""
    args = {
        "grad_image": dict(
            grads=p["grads"],
            boxes=p["boxes"],
            box_ind=p["box_ind"],
            image_size=[BATCH, HEIGHT, WIDTH, DEPTH],
            T=np.float32,
        ),
        "forward": dict(
            image=p["image"], boxes=p["boxes"], box_ind=p["box_ind"], crop_size=CROP
        ),
        "grad_boxes": dict(
            grads=p["grads"], image=p["image"], boxes=p["boxes"], box_ind=p["box_ind"]
        ),
    }[op]
    args.update(changes)
    func = {
        "grad_image": raw_ops.CropAndResizeGradImage,
        "forward": raw_ops.CropAndResize,
        "grad_boxes": raw_ops.CropAndResizeGradBoxes,
    }[op]
    return func(**args)


OPS = ["grad_image", "forward", "grad_boxes"]


def _same(a, b):
    assert a.dtype == b.dtype and a.shape == b.shape
    assert a.tobytes() == b.tobytes()


# --------------------------------------------------------------------------
# box_ind


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.float16, ">f8"], ids=str)
def test_float_box_ind_is_truncated_toward_zero(op, dtype):
    p = _problem()
    expected = _call(op, p)
    # Fractions on both sides of zero: -0.75 truncates to 0, not -1.
    fractions = np.array([0.5, -0.75, 0.25, 0.875, 0.0])
    floats = (p["box_ind"] + fractions).astype(dtype)
    assert floats.dtype.kind == "f"
    _same(_call(op, p, box_ind=floats), expected)


@pytest.mark.parametrize("op", OPS)
def test_float_box_ind_truncating_out_of_range_is_an_index_error(op):
    p = _problem()
    floats = p["box_ind"].astype(np.float64)
    floats[3] = BATCH + 0.25  # truncates to BATCH
    with pytest.raises(IndexError, match=r"box_ind\[3\] = 3\b"):
        _call(op, p, box_ind=floats)


@pytest.mark.parametrize("value", [np.nan, np.inf, -np.inf, 1e10, -(2.0**31) - 1])
def test_float_box_ind_without_int32_value_names_position_and_value(value):
    p = _problem()
    floats = p["box_ind"].astype(np.float64)
    floats[2] = value
    with pytest.raises(IndexError, match=r"box_ind\[2\] = ") as info:
        _call("forward", p, box_ind=floats)
    assert repr(float(value)) in str(info.value)


def test_list_of_floats_as_box_ind_is_refused_as_by_tensorflow():
    p = _problem()
    with pytest.raises(TypeError, match="box_ind"):
        _call("forward", p, box_ind=[float(v) for v in p["box_ind"]])


@pytest.mark.parametrize("op", OPS)
def test_boolean_box_ind_counts_as_0_and_1(op):
    p = _problem()
    flags = np.array([True, False, True, True, False])
    expected = _call(op, p, box_ind=flags.astype(np.int32))
    _same(_call(op, p, box_ind=flags), expected)
    _same(_call(op, p, box_ind=flags.tolist()), expected)


@pytest.mark.parametrize("op", OPS)
def test_object_box_ind(op):
    p = _problem()
    expected = _call(op, p)
    _same(_call(op, p, box_ind=p["box_ind"].astype(object)), expected)
    mixed = np.array([2.5, 0, 1.75, 1, 0.0], dtype=object)  # floats truncated
    _same(_call(op, p, box_ind=mixed), expected)


@pytest.mark.parametrize(
    "value",
    [np.array([0, 2**32], np.int64), [0, 2**32], np.array([0, 2**32], object)],
    ids=["int64", "list", "object"],
)
def test_box_ind_beyond_int32_is_not_wrapped_around(value):
    # TensorFlow wraps 2**32 around to the valid index 0; cropgrad refuses.
    rng = np.random.default_rng(0)
    with pytest.raises((IndexError, TypeError), match="box_ind"):
        raw_ops.CropAndResize(
            image=rng.standard_normal((1, 3, 3, 1)),
            boxes=[[0, 0, 1, 1], [0, 0, 1, 1]],
            box_ind=value,
            crop_size=[2, 2],
        )


# --------------------------------------------------------------------------
# grads and boxes


@pytest.mark.parametrize("op", OPS)
def test_boolean_and_object_boxes(op):
    p = _problem()
    flags = np.array([[True, False, True, True]] * NUM_BOXES)
    expected = _call(op, p, boxes=flags.astype(np.float32))
    _same(_call(op, p, boxes=flags), expected)
    _same(_call(op, p, boxes=p["boxes"].astype(object)), _call(op, p))


@pytest.mark.parametrize("op", ["grad_image", "grad_boxes"])
def test_boolean_and_object_grads(op):
    p = _problem()
    flags = p["grads"] > 0
    _same(_call(op, p, grads=flags), _call(op, p, grads=flags.astype(np.float32)))
    # Object arrays of Python floats: each rounded to float32 once.
    doubles = p["grads"].astype(np.float64) + 1e-9
    _same(
        _call(op, p, grads=doubles.astype(object)),
        _call(op, p, grads=doubles.astype(np.float32)),
    )


@pytest.mark.parametrize("op", ["grad_image", "grad_boxes"])
def test_bfloat16_grads_are_widened(op):
    p = _problem()
    narrow = p["grads"].astype(ml_dtypes.bfloat16)
    _same(_call(op, p, grads=narrow), _call(op, p, grads=narrow.astype(np.float32)))


def test_object_grads_that_are_not_numbers_are_a_type_error():
    p = _problem()
    grads = p["grads"].astype(object)
    grads[1, 2, 0, 3] = "x"
    with pytest.raises(TypeError, match="grads"):
        _call("grad_image", p, grads=grads)


@pytest.mark.parametrize("op", OPS)
def test_complex_and_strings_stay_refused(op):
    p = _problem()
    with pytest.raises(TypeError, match="boxes"):
        _call(op, p, boxes=p["boxes"].astype(np.complex64))
    with pytest.raises(TypeError, match="boxes"):
        _call(op, p, boxes=p["boxes"].astype(str))
    with pytest.raises(TypeError, match="box_ind"):
        _call(op, p, box_ind=p["box_ind"].astype(str))


# --------------------------------------------------------------------------
# image_size and crop_size


def test_float_image_size_is_truncated():
    p = _problem()
    expected = _call("grad_image", p)
    for size in (
        np.array([BATCH, HEIGHT, WIDTH, DEPTH], np.float64),
        np.array([BATCH + 0.5, HEIGHT + 0.99, WIDTH, DEPTH + 0.25], np.float32),
        np.array([BATCH, HEIGHT, WIDTH, DEPTH], object),
        np.array([BATCH + 0.5, HEIGHT, WIDTH, DEPTH], object),
    ):
        _same(_call("grad_image", p, image_size=size), expected)


def test_float_crop_size_is_truncated():
    p = _problem()
    expected = _call("forward", p)
    for size in (
        np.array(CROP, np.float64),
        np.array([CROP[0] + 0.9, CROP[1] + 0.1]),
        np.array(CROP, ">f4"),
    ):
        _same(_call("forward", p, crop_size=size), expected)


def test_boolean_sizes_count_as_ones():
    p = _problem()
    crops = _call("forward", p, crop_size=np.ones(2, bool))
    _same(crops, _call("forward", p, crop_size=[1, 1]))
    _same(_call("forward", p, crop_size=[True, True]), crops)


@pytest.mark.parametrize(
    "size",
    [
        np.array([BATCH, HEIGHT, WIDTH, 2**32 + DEPTH], np.int64),
        [BATCH, HEIGHT, WIDTH, 2**32 + DEPTH],
        np.array([BATCH, HEIGHT, WIDTH, 2**32 + DEPTH], np.uint64),
    ],
    ids=["int64", "list", "uint64"],
)
def test_sizes_beyond_int32_are_refused_not_wrapped(size):
    # TensorFlow reads a depth of 2**32 + 4 as 4.
    p = _problem()
    with pytest.raises(ValueError, match="image_size.*beyond int32"):
        _call("grad_image", p, image_size=size)


# --------------------------------------------------------------------------
# Attributes: method, extrapolation_value, T


@pytest.mark.parametrize("op", OPS)
def test_method_none_is_the_default(op):
    p = _problem()
    _same(_call(op, p, method=None), _call(op, p, method="bilinear"))


def test_extrapolation_value_none_and_python_bool():
    p = _problem()
    _same(
        _call("forward", p, extrapolation_value=None),
        _call("forward", p, extrapolation_value=0.0),
    )
    _same(
        _call("forward", p, extrapolation_value=True),
        _call("forward", p, extrapolation_value=1.0),
    )
    with pytest.raises(TypeError, match="extrapolation_value"):
        _call("forward", p, extrapolation_value=np.bool_(True))


def test_T_float_is_float32_as_in_tensorflow():
    p = _problem()
    out = _call("grad_image", p, T=float)
    assert out.dtype == np.float32
    # The NumPy API keeps NumPy's meaning of float.
    numpy_api = cropgrad.crop_and_resize_grad_image(
        p["grads"], p["boxes"], p["box_ind"], [BATCH, HEIGHT, WIDTH, DEPTH], float
    )
    assert numpy_api.dtype == np.float64


# --------------------------------------------------------------------------
# The NumPy API is unchanged


@pytest.mark.parametrize(
    "changes",
    [
        {"box_ind": np.array([2.0, 0, 1, 1, 0])},
        {"box_ind": np.array([True, False, True, True, False])},
        {"boxes": np.zeros((NUM_BOXES, 4), object)},
        {"crop_size": np.array(CROP, np.float64)},
        {"method": None},
        {"extrapolation_value": None},
    ],
    ids=lambda c: f"{next(iter(c))}-{type(next(iter(c.values()))).__name__}",
)
def test_numpy_api_refuses_what_raw_ops_convert(changes):
    p = _problem()
    args = dict(
        image=p["image"], boxes=p["boxes"], box_ind=p["box_ind"], crop_size=CROP
    )
    args.update(changes)
    with pytest.raises((TypeError, ValueError), match=next(iter(changes))):
        cropgrad.crop_and_resize(**args)


# --------------------------------------------------------------------------
# The module imports on its own

# The docstring's example, in a child process whose first import is
# cropgrad.raw_ops.
_FIRST_IMPORT = """
import sys
{before}
import numpy as np
import cropgrad.raw_ops as raw_ops
crops = raw_ops.CropAndResize(
    image=np.arange(9.0).reshape(1, 3, 3, 1), boxes=[[0, 0, 1, 1]],
    box_ind=np.array([0.9]), crop_size=[2, 2])
assert crops[0, :, :, 0].tolist() == [[0.0, 2.0], [6.0, 8.0]], crops
assert sys.modules["cropgrad"].raw_ops is raw_ops
print("raw_ops works")
"""

# An empty module in the package's place: its submodules import, but none
# of cropgrad/__init__.py runs, so raw_ops finds none of the face's names.
_BARE_PACKAGE = """
import importlib.util, types
spec = importlib.util.find_spec("cropgrad")
bare = types.ModuleType("cropgrad")
bare.__path__ = list(spec.submodule_search_locations)
sys.modules["cropgrad"] = bare
"""


@pytest.mark.parametrize(
    "before", ["", _BARE_PACKAGE], ids=["first-import", "package-face-not-run"]
)
def test_raw_ops_imports_without_the_package_face(before):
    # raw_ops takes what it calls from the private modules, so it works
    # whether or not the package face (which imports it) has finished.
    run = subprocess.run(
        [sys.executable, "-P", "-c", _FIRST_IMPORT.format(before=before)],
        capture_output=True,
        text=True,
        env=dict(os.environ),  # PYTHONPATH kept: the same cropgrad
        timeout=120,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.strip() == "raw_ops works", run.stdout + run.stderr
