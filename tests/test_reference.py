"""The NumPy reference (``cropgrad._reference``) against TensorFlow's bits.

The reference is written from the semantics, independently of the kernels;
the other tests trust it.  Here it earns that trust: in its exact mode, with
flush-to-zero modelled, it reproduces every committed TensorFlow fixture bit
for bit (float16 included: TensorFlow's own float16 accumulation), and its
float64 mode stays within rounding of those results.  In the cases with NaN
and infinite inputs, NaN only has to meet NaN: which of two NaNs an addition
keeps is NumPy's choice here, the compiler's in TensorFlow.
"""

import numpy as np
import pytest
from _helpers import fixture_comparison, load_cases

from cropgrad import _reference as reference

GRAD_IMAGE = load_cases("grad_image.npz")
FORWARD = load_cases("forward.npz")
GRAD_BOXES = load_cases("grad_boxes.npz")


@pytest.mark.parametrize("name", sorted(GRAD_IMAGE))
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
def test_grad_image_is_tensorflow_bits(name, dtype):
    case = GRAD_IMAGE[name]
    args = (case["grads"], case["boxes"], case["box_ind"], case["image_size"])
    method = str(case["method"])
    with np.errstate(invalid="ignore"):
        out = reference.grad_image(*args, method, dtype=dtype, exact=True, flush=True)
    fixture_comparison(name)(out, case[f"out_{dtype}"], name)
    if "subnormal" not in name and dtype == "float32":
        # Without subnormals, flushing changes nothing.
        with np.errstate(invalid="ignore"):
            ieee = reference.grad_image(*args, method, dtype=dtype, exact=True)
        fixture_comparison(name)(ieee, case["out_float32"], name)


@pytest.mark.parametrize("name", sorted(FORWARD))
def test_forward_is_tensorflow_bits(name):
    case = FORWARD[name]
    with np.errstate(invalid="ignore"):
        out = reference.crop_and_resize(
            case["image"],
            case["boxes"],
            case["box_ind"],
            case["crop_size"],
            str(case["method"]),
            case["extrapolation_value"],
            exact=True,
            flush=True,
        )
    fixture_comparison(name)(out, case["out"], name)


@pytest.mark.parametrize("name", sorted(GRAD_BOXES))
def test_grad_boxes_is_tensorflow_bits(name):
    case = GRAD_BOXES[name]
    args = (case["grads"], case["image"], case["boxes"], case["box_ind"])
    with np.errstate(invalid="ignore"):
        out = reference.grad_boxes(*args, exact=True, flush=True)
    fixture_comparison(name)(out, case["out"], name)
    if "subnormal" not in name:
        with np.errstate(invalid="ignore"):
            approx = reference.grad_boxes(*args)
            scale = reference.grad_boxes_magnitude(*args)
            finite = np.isfinite(case["out"])
            err = np.abs(approx - case["out"])
        assert np.all(err[finite] <= 1e-4 * scale[finite])
        np.testing.assert_array_equal(np.isfinite(approx), finite)


def test_flush_changes_subnormal_results_only():
    grads = np.array([1e-39, 1.0], np.float32).reshape(1, 1, 2, 1)
    boxes = [[0.5, 0.0, 0.5, 1.0]]
    ieee = reference.grad_image(
        grads, boxes, [0], (1, 3, 3, 1), dtype="float32", exact=True
    )
    flushed = reference.grad_image(
        grads, boxes, [0], (1, 3, 3, 1), dtype="float32", exact=True, flush=True
    )
    assert ieee[0, 1, 0, 0] == np.float32(1e-39) and flushed[0, 1, 0, 0] == 0
    assert ieee[0, 1, 2, 0] == flushed[0, 1, 2, 0] == 1


def test_serial_sum_is_left_to_right():
    # In float32, (1 + 1e8) - 1e8 is 0 and (1e8 - 1e8) + 1 is 1.
    assert (
        reference.crop_and_resize_boxes._serial_sum(
            np.array([1, 1e8, -1e8], np.float32), False
        )
        == 0
    )
    assert (
        reference.crop_and_resize_boxes._serial_sum(
            np.array([1e8, -1e8, 1], np.float32), False
        )
        == 1
    )
    # A subnormal partial sum restarts from zero under flush-to-zero.
    tiny = np.array([3e-38, -2.5e-38, 2e-38], np.float32)  # all normal
    assert reference.crop_and_resize_boxes._serial_sum(tiny, True) == np.float32(2e-38)
    ieee = np.float32(np.float32(3e-38) - np.float32(2.5e-38)) + np.float32(2e-38)
    assert (
        reference.crop_and_resize_boxes._serial_sum(tiny, False)
        == ieee
        != np.float32(2e-38)
    )
