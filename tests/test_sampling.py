"""The shared sampling-coordinate helper and the float16 conversions, bit for
bit against NumPy float32 arithmetic."""

import numpy as np
import pytest

from cropgrad import _reference as reference
from cropgrad._kernels import testing as _testing


def _boxes(rng, n=64):
    boxes = rng.uniform(-0.5, 1.5, (n, 4)).astype(np.float32)
    boxes[:4] = [
        [0, 0, 1, 1],
        [1, 1, 0, 0],
        [0.5, 0.25, 0.5, 0.25],
        [1e-39, -1e-39, 3e38, -3e38],
    ]
    return boxes


@pytest.mark.parametrize("size", [1, 2, 7, 64, 1000, 2**24 + 3])
@pytest.mark.parametrize("crop", [1, 2, 5, 14, 224])
@pytest.mark.parametrize("axis", [0, 1])
@pytest.mark.parametrize("boxes_gradient", [False, True])
def test_sample_coords_bits(size, crop, axis, boxes_gradient):
    boxes = _boxes(np.random.default_rng(size + crop))
    got = _testing.sample_coords(boxes, size, crop, axis, boxes_gradient)
    expected = np.array(
        [
            reference.sample_coords(
                b[axis], b[axis + 2], size, crop, ratio=boxes_gradient
            )
            for b in boxes
        ],
        dtype=np.float32,
    )
    np.testing.assert_array_equal(got.view(np.uint32), expected.view(np.uint32))


def test_single_sample_is_the_box_centre():
    # 0.5 * (y1 + y2) * (H - 1): float32 sum, double products, one rounding.
    rng = np.random.default_rng(0)
    boxes = rng.uniform(0, 1, (20000, 4)).astype(np.float32)
    got = _testing.sample_coords(boxes, 1000, 1, 0)[:, 0]
    s = (boxes[:, 0] + boxes[:, 2]).astype(np.float32)
    double = (0.5 * s.astype(np.float64) * 999.0).astype(np.float32)
    np.testing.assert_array_equal(got, double)


def _nan_bits(bits, exponent, mantissa):
    """Which of `bits` are NaN, from the bits alone (NaN, payload ignored).

    No float operation touches a NaN here or in the casts below: a
    signalling NaN sets the invalid flag in a compare or a NumPy cast on
    aarch64 (NumPy then warns), not on x86-64, and the test is about the
    conversions, not about NumPy's handling of those NaNs.
    """
    return ((bits & exponent) == exponent) & ((bits & mantissa) != 0)


def test_half_conversions_match_numpy():
    every = np.arange(2**16, dtype=np.uint16)
    half_nan = _nan_bits(every, 0x7C00, 0x03FF)
    as_float = every[~half_nan].view(np.float16).astype(np.float32)
    ours = _testing.half_bits_to_float(every).view(np.uint32)
    np.testing.assert_array_equal(ours[~half_nan], as_float.view(np.uint32))
    assert _nan_bits(ours[half_nan], 0x7F800000, 0x007FFFFF).all()
    assert half_nan.sum() == 2 * (2**10 - 1)
    rng = np.random.default_rng(1)
    bits = rng.integers(0, 2**32, 1 << 20, dtype=np.uint64).astype(np.uint32)
    values = bits[~_nan_bits(bits, 0x7F800000, 0x007FFFFF)].view(np.float32)
    sweep = np.arange(0x32000000, 0x48000000, 97, dtype=np.uint32).view(np.float32)
    for x in (values, sweep, as_float):
        with np.errstate(over="ignore"):
            expected = x.astype(np.float16).view(np.uint16)
        np.testing.assert_array_equal(_testing.float_to_half_bits(x), expected)
    nan_bits = _testing.float_to_half_bits(np.array([np.nan, -np.nan], np.float32))
    assert np.isnan(nan_bits.view(np.float16)).all()


def _f16c_clone():
    """Whether this build and CPU have the F16C clone of the float16
    rounding (x86-64 with F16C); the portable code is then checked above."""
    return _testing.round_half_mismatches(0, 0) is not None


@pytest.mark.slow
@pytest.mark.parametrize("flush", [False, True])
def test_f16c_rounding_is_the_portable_rounding_on_every_float32(flush):
    # All 2**32 bit patterns: every float16 result and both neighbours of
    # every rounding boundary, ties, overflow to infinity, float16
    # subnormals, float32 subnormals (which denormals-are-zero would read as
    # zero), infinities and NaNs with every payload.  Under flush-to-zero too:
    # the kernels round while the caller's mode (flush_denormals) is set.
    if not _f16c_clone():
        pytest.skip("no F16C clone here (not x86-64, or a CPU without F16C)")

    def mismatches():
        return _testing.round_half_mismatches(0, 1 << 32)

    if flush:
        count = _testing.with_flush_to_zero(mismatches)
        if count is None:
            pytest.skip("the flush-to-zero mode cannot be set here")
    else:
        count = mismatches()
    assert count == 0


def test_f16c_rounding_matches_numpy():
    # The clone against an independent rounding (NumPy's astype), on every
    # float16 value, the midpoints between neighbours and their float32
    # neighbours: the exhaustive comparison above compares two of
    # cropgrad's own codes.
    if not _f16c_clone():
        pytest.skip("no F16C clone here (not x86-64, or a CPU without F16C)")
    every = np.arange(2**16, dtype=np.uint16)
    finite = every[(every & 0x7C00) != 0x7C00].view(np.float16).astype(np.float32)
    bits = np.sort(finite).view(np.uint32)
    mids = ((bits[:-1].astype(np.uint64) + bits[1:]) // 2).astype(np.uint32)
    near = np.concatenate([bits, mids, mids - 1, mids + 1]).view(np.float32)
    with np.errstate(over="ignore"):
        expected = near.astype(np.float16).view(np.uint16)
    np.testing.assert_array_equal(_testing.float_to_half_bits(near, True), expected)
    np.testing.assert_array_equal(_testing.float_to_half_bits(near, False), expected)
