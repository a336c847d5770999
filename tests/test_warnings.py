"""No call lets a warning escape.

A conversion that overflows (a float64 beyond float32's range) or has no
value (NaN to an integer) is handled as docs/semantics.md says: the result
or the exception is the whole answer, without NumPy's RuntimeWarning on
top.  The suite also runs with warnings as errors (pyproject.toml), which
catches the rest; these tests record warnings explicitly, so they hold
under any warning filter.
"""

import warnings

import numpy as np
import pytest

import cropgrad
from cropgrad import raw_ops

G = cropgrad.crop_and_resize_grad_image
F = cropgrad.crop_and_resize
B = cropgrad.crop_and_resize_grad_boxes

IMAGE = np.ones((1, 3, 3, 1))
GRADS = np.ones((1, 2, 2, 1))
SIZE = [1, 3, 3, 1]
HUGE_BOX = np.array([[0.0, 0.0, 1e40, 1.0]])  # float64, infinite as float32


def _no_warnings(call):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            result = call()
        except (ValueError, TypeError, IndexError, MemoryError) as exc:
            result = exc
    assert not caught, [f"{w.category.__name__}: {w.message}" for w in caught]
    return result


@pytest.mark.parametrize(
    "call",
    [
        lambda: G(GRADS, HUGE_BOX, [0], SIZE),
        lambda: F(IMAGE, HUGE_BOX, [0], [2, 2]),
        lambda: B(GRADS, IMAGE, HUGE_BOX, [0]),
        lambda: raw_ops.CropAndResizeGradImage(
            grads=GRADS, boxes=HUGE_BOX, box_ind=[0], image_size=SIZE, T="float"
        ),
        lambda: raw_ops.CropAndResize(
            image=IMAGE, boxes=HUGE_BOX, box_ind=[0], crop_size=[2, 2]
        ),
    ],
    ids=["grad_image", "forward", "grad_boxes", "raw_grad_image", "raw_forward"],
)
def test_box_beyond_float32_is_a_value_error_without_a_warning(call):
    result = _no_warnings(call)
    assert isinstance(result, ValueError) and "boxes[0]" in str(result)


def test_gradient_beyond_float32_is_an_infinity_without_a_warning():
    # IEEE arithmetic from there on: the sample sits on pixel (1, 1), which
    # receives inf times the weights 1 and 0, and inf + NaN is NaN.
    out = _no_warnings(lambda: G(np.full((1, 1, 1, 1), 1e40), [[0.5] * 4], [0], SIZE))
    assert np.isnan(out[0, 1, 1, 0]) and np.count_nonzero(out) == 1


@pytest.mark.parametrize("value", [1e40, -1e300, 10**39])
def test_extrapolation_value_beyond_float32_is_an_infinity(value):
    crops = _no_warnings(
        lambda: F(IMAGE, [[2, 2, 3, 3]], [0], [1, 1], "bilinear", value)
    )
    assert crops[0, 0, 0, 0] == np.copysign(np.inf, value)


@pytest.mark.parametrize(
    "box_ind",
    [[np.nan], [np.inf], [1e10], [-1e300]],
    ids=["nan", "inf", "1e10", "-1e300"],
)
def test_raw_float_box_ind_without_int32_value(box_ind):
    result = _no_warnings(
        lambda: raw_ops.CropAndResize(
            image=IMAGE,
            boxes=[[0, 0, 1, 1]],
            box_ind=np.array(box_ind),
            crop_size=[2, 2],
        )
    )
    assert isinstance(result, IndexError)


@pytest.mark.parametrize(
    "size",
    [
        np.array([1, 3, 3, np.nan]),
        np.array([1e300, 3, 3, 1]),
        np.array([1, 3, 3, 1e40], object),
    ],
    ids=["nan", "1e300", "object-1e40"],
)
def test_raw_float_image_size_without_int32_value(size):
    result = _no_warnings(
        lambda: raw_ops.CropAndResizeGradImage(
            grads=GRADS, boxes=[[0, 0, 1, 1]], box_ind=[0], image_size=size, T="float"
        )
    )
    assert isinstance(result, ValueError) and "image_size" in str(result)


def test_raw_object_arrays_beyond_float32():
    # Object arrays go through NumPy's casts: no overflow warning either.
    out = _no_warnings(
        lambda: raw_ops.CropAndResizeGradImage(
            grads=np.full((1, 1, 1, 1), 10**39, object),
            boxes=[[0.5] * 4],
            box_ind=[0],
            image_size=SIZE,
            T="float",
        )
    )
    assert np.isnan(out[0, 1, 1, 0]) and np.count_nonzero(out) == 1


@pytest.mark.parametrize("data_format", ["NCHW", "NHWC"])
@pytest.mark.parametrize(
    "op", ["grid_sample", "grid_sample_grad_image", "grid_sample_jvp_grid"]
)
def test_grid_sample_float16_results_beyond_float16_are_infinities(op, data_format):
    # A float32 result beyond float16 rounds to infinity (the result dtype
    # asked for), without NumPy's overflow warning of the conversion.
    data = np.full((1, 2, 2, 2), 65520.0, np.float32)
    grid = np.zeros((1, 2, 2, 2), np.float32)  # the centre: every tap's mean
    ramp = np.arange(8, dtype=np.float32).reshape(data.shape) * 65520.0
    calls = {
        "grid_sample": lambda: cropgrad.grid_sample(
            data, grid, dtype=np.float16, data_format=data_format
        ),
        "grid_sample_grad_image": lambda: cropgrad.grid_sample_grad_image(
            data, grid, data.shape, dtype=np.float16, data_format=data_format
        ),
        "grid_sample_jvp_grid": lambda: cropgrad.grid_sample_jvp_grid(
            ramp, grid, np.ones_like(grid), dtype=np.float16, data_format=data_format
        ),
    }
    result = _no_warnings(calls[op])
    assert result.dtype == np.float16 and np.isinf(result).any(), result
