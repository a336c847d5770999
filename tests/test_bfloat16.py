"""bfloat16 (ml_dtypes.bfloat16): images read exactly as float32, the image
gradient rounded once to bfloat16, raw_ops refusing it as TensorFlow does,
and the package without ml_dtypes.  RoIAlign's ops too: bfloat16 images
(and the image gradient's grads) read exactly as float32, and its
bfloat16 results (``dtype=``: the forward op, the image gradient, the boxes
JVP) the float32 result rounded once; grid_sample's likewise (images and
the image gradient's grads read exactly, the forward op's, image
gradient's and grid JVP's bfloat16 results the float32 ones rounded
once)."""

import os
import subprocess
import sys

import ml_dtypes
import numpy as np
import pytest
from _helpers import assert_same_bits, on_team, random_problem

import cropgrad
from cropgrad import _reference as reference
from cropgrad import raw_ops

BF16 = np.dtype(ml_dtypes.bfloat16)
U32 = 2.0**-24
TINY32 = 2.0**-149


def _nchw(a):
    return np.ascontiguousarray(a.transpose(0, 3, 1, 2))


def _nhwc(a):
    return np.ascontiguousarray(a.transpose(0, 2, 3, 1))


def _bf16_image(rng, shape):
    """Random bfloat16 pixels with the special values: signed zeros,
    subnormals, infinities, a NaN, the largest finite values."""
    image = (rng.standard_normal(shape) * 50).astype(BF16)
    flat = image.reshape(-1).view(np.uint16)
    specials = [0x0000, 0x8000, 0x0001, 0x807F, 0x7F7F, 0xFF7F, 0x3F81, 0xFFC3]
    flat[: len(specials)] = specials
    flat[-1] = 0x7F80  # inf, far from the others
    return image


# --------------------------------------------------------------------------
# bfloat16 images: exactly the float32 image's bits


@pytest.mark.parametrize("data_format", ["NHWC", "NCHW"])
@pytest.mark.parametrize("flush", [False, True])
def test_images_read_exactly_as_float32(data_format, flush):
    rng = np.random.default_rng(1)
    grads, boxes, box_ind, size = random_problem(
        rng, batch=2, height=9, width=7, depth=5, num_boxes=8, crop=(4, 3)
    )
    image = _bf16_image(rng, size)
    wide = image.astype(np.float32)
    assert wide.reshape(-1).view(np.uint32).tolist() == [
        v << 16 for v in image.reshape(-1).view(np.uint16).tolist()
    ]
    tangent = rng.standard_normal(boxes.shape).astype(np.float32)
    if data_format == "NCHW":
        image, wide, grads = _nchw(image), _nchw(wide), _nchw(grads)
    common = dict(flush_denormals=flush, data_format=data_format)
    for method in ("bilinear", "nearest"):
        assert_same_bits(
            cropgrad.crop_and_resize(image, boxes, box_ind, (4, 3), method, **common),
            cropgrad.crop_and_resize(wide, boxes, box_ind, (4, 3), method, **common),
        )
    assert_same_bits(
        cropgrad.crop_and_resize_grad_boxes(grads, image, boxes, box_ind, **common),
        cropgrad.crop_and_resize_grad_boxes(grads, wide, boxes, box_ind, **common),
    )
    assert_same_bits(
        cropgrad.crop_and_resize_jvp_boxes(
            image, boxes, box_ind, tangent, (4, 3), **common
        ),
        cropgrad.crop_and_resize_jvp_boxes(
            wide, boxes, box_ind, tangent, (4, 3), **common
        ),
    )


def test_bfloat16_image_forms():
    rng = np.random.default_rng(2)
    image = _bf16_image(rng, (1, 6, 5, 3))
    boxes, box_ind = [[0.1, 0.2, 0.9, 0.7]], [0]
    expected = cropgrad.crop_and_resize(
        image.astype(np.float32), boxes, box_ind, (3, 3)
    )
    # strided and read-only arrays are accepted as the other dtypes are
    strided = np.repeat(image, 2, axis=3)[..., ::2]
    assert not strided.flags.c_contiguous
    readonly = image.copy()
    readonly.flags.writeable = False
    for form in (strided, readonly):
        assert_same_bits(
            cropgrad.crop_and_resize(form, boxes, box_ind, (3, 3)), expected
        )


def test_bfloat16_grads_and_boxes_stay_refused():
    # Only images take bfloat16 in the NumPy API (raw_ops widen grads and
    # boxes, as TensorFlow does).
    g = np.zeros((1, 2, 2, 1), BF16)
    with pytest.raises(TypeError, match="grads"):
        cropgrad.crop_and_resize_grad_image(g, [[0, 0, 1, 1]], [0], [1, 3, 3, 1])
    with pytest.raises(TypeError, match="boxes"):
        cropgrad.crop_and_resize(
            np.zeros((1, 3, 3, 1)), np.zeros((1, 4), BF16), [0], (2, 2)
        )


# --------------------------------------------------------------------------
# The bfloat16 image gradient: the float32 result rounded once


def _round_bf16(x):
    """float32 -> bfloat16 bits, independently of the library: the nearer
    of the two neighbouring bfloat16 values by float64 distance, ties to the
    even one, values from 2**128 on (the next value after the largest
    finite one) infinite; NaN keeps its sign and the upper 7 bits of its
    payload, with the quiet bit set."""
    bits = np.ascontiguousarray(x, np.float32).view(np.uint32).reshape(-1)
    out = np.empty(bits.shape, np.uint16)
    for i, b in enumerate(bits.tolist()):
        sign, mag = b & 0x80000000, b & 0x7FFFFFFF
        if mag > 0x7F800000:
            out[i] = (b >> 16) | 0x0040
            continue
        if mag == 0x7F800000:
            out[i] = b >> 16
            continue
        value = float(np.uint32(mag).view(np.float32))
        low = mag >> 16  # truncated: the neighbour toward zero

        def as_float(h):
            return (
                2.0**128 if h == 0x7F80 else float(np.uint32(h << 16).view(np.float32))
            )

        below, above = as_float(low), as_float(low + 1)
        if value - below < above - value:
            pick = low
        elif value - below > above - value:
            pick = low + 1
        else:
            pick = low if low % 2 == 0 else low + 1
        if value == below:
            pick = low
        out[i] = (sign >> 16) | pick
    return out.reshape(np.shape(x))


def _check_rounded_once_on_team(op, args, options, threads):
    """`op(*args)` in bfloat16, on a team of ``min(threads, 3)`` (3 tasks),
    is its float32 result rounded once; that result holds infinities, NaN
    and subnormals."""
    kw = dict(options, num_threads=threads)
    out32 = op(*args, dtype=np.float32, **kw)
    out = on_team(threads, 3, lambda: op(*args, dtype="bfloat16", **kw))
    assert out.dtype == BF16 and out.shape == out32.shape
    assert np.array_equal(out.view(np.uint16), _round_bf16(out32))
    finite = out32[np.isfinite(out32)]
    assert np.isinf(out32).any() and np.isnan(out32).any()
    assert (np.abs(finite[finite != 0]) < 2.0**-126).any()  # subnormals


def test_independent_rounding_agrees_with_ml_dtypes():
    # The test's own rounding against ml_dtypes' on finite values and
    # infinities (ml_dtypes makes every NaN the same quiet NaN instead).
    rng = np.random.default_rng(3)
    bits = rng.integers(0, 2**32, 20000, dtype=np.uint64).astype(np.uint32)
    bits[:8] = [
        0x3F808000,
        0x3F818000,
        0x7F7FFFFF,
        0x7F7F8000,
        0x7F7F7FFF,
        1,
        0x00008000,
        0x80018000,
    ]
    values = bits.view(np.float32)
    finite = ~np.isnan(values)
    with np.errstate(invalid="ignore"):
        theirs = values[finite].astype(BF16).view(np.uint16)
    assert np.array_equal(_round_bf16(values[finite]), theirs)


def _special_sums():
    """grads whose image gradient (one sample per pixel, on the pixel, weight
    1) is chosen float32 values: ties, values that round to infinities, inf
    and NaNs (which become NaN: inf times a weight of 0), subnormals."""
    values = np.array(
        [
            0x3F808000,  # 1 + 2**-8: a tie, to the even 1.0
            0x3F818000,  # a tie, to the even 0x3F82
            0x3F808001,  # just above a tie: up
            0x7F7FFFFF,  # the largest float32: rounds to inf
            0x7F7F8000,  # the largest bfloat16 plus half an ulp: a tie, to inf
            0x7F7F7FFF,  # just below it: the largest bfloat16
            0xFF7FFFFF,  # the most negative float32: rounds to -inf
            0x7F800000,  # inf
            0x7FA12345,  # NaN with a payload (a signalling one, made quiet)
            0xFFC00001,  # negative quiet NaN with a payload
            0x00008000,  # subnormal tie: to the even 0
            0x00018000,  # subnormal tie: to the even 0x0002
            0x807FFFFF,  # largest subnormal, negative: rounds up to -2**-126
            0x80008000,  # negative subnormal tie: to the even -0.0
        ],
        np.uint32,
    ).view(np.float32)
    n = len(values)
    grads = values.reshape(n, 1, 1, 1)
    # Box i is the point on pixel (0, i): the sample's four corners are that
    # one pixel, with weights 1, 0, 0, 0 (inf and NaN times 0 is NaN there).
    boxes = np.array([[0, i / (n - 1), 0, i / (n - 1)] for i in range(n)], np.float32)
    return grads, boxes, np.zeros(n, np.int32), [1, 2, n, 1]


@pytest.mark.parametrize("data_format", ["NHWC", "NCHW"])
def test_special_values_round_once(data_format):
    grads, boxes, box_ind, size = _special_sums()
    if data_format == "NCHW":
        grads, size = _nchw(grads), [size[0], size[3], size[1], size[2]]
    kw = dict(data_format=data_format)
    out32 = cropgrad.crop_and_resize_grad_image(grads, boxes, box_ind, size, **kw)
    out = cropgrad.crop_and_resize_grad_image(
        grads, boxes, box_ind, size, ml_dtypes.bfloat16, **kw
    )
    assert out.dtype == BF16 and out.shape == out32.shape
    assert np.array_equal(out.view(np.uint16), _round_bf16(out32))
    # The finite float32 sums reached the output unchanged, so their
    # roundings are those the list describes.
    row = out.reshape(-1).view(np.uint16)[: len(boxes)].tolist()
    assert row[:7] == [0x3F80, 0x3F82, 0x3F81, 0x7F80, 0x7F80, 0x7F7F, 0xFF80]
    assert row[10:] == [0x0000, 0x0002, 0x8080, 0x8000]
    # inf and the NaNs: quiet NaNs
    assert all((v & 0x7FFF) > 0x7F80 and v & 0x0040 for v in row[7:10])


def test_nan_payload_and_sign_are_kept():
    # A NaN gradient with a payload, added once into a zero pixel: its
    # float32 result keeps that payload (the additions only quieten it).
    grads = np.array([0x7FA12345, 0xFFD5A5A5], np.uint32).view(np.float32)
    grads = grads.reshape(2, 1, 1, 1)
    boxes = np.array([[0, 0, 0, 0], [1, 1, 1, 1]], np.float32)
    out32 = cropgrad.crop_and_resize_grad_image(grads, boxes, [0, 0], [1, 2, 2, 1])
    out = cropgrad.crop_and_resize_grad_image(
        grads, boxes, [0, 0], [1, 2, 2, 1], "bfloat16"
    )
    bits32 = out32.reshape(-1).view(np.uint32)[[0, 3]]
    assert np.isnan(out32.reshape(-1)[[0, 3]]).all()
    bits = out.reshape(-1).view(np.uint16)[[0, 3]]
    assert bits.tolist() == [((b >> 16) | 0x40) for b in bits32.tolist()]
    assert bits[1] & 0x8000 and bits[0] & 0x3F != bits[1] & 0x3F


@pytest.mark.parametrize(
    "data_format, depth", [("NHWC", 3), ("NHWC", 9), ("NCHW", 2), ("NCHW", 9)]
)
@pytest.mark.parametrize("threads", [1, 3])
def test_random_gradients_are_float32_rounded_once(data_format, depth, threads):
    # NCHW depth 2 runs the planes, depth 9 the tiles.
    rng = np.random.default_rng([4, depth, threads])
    grads, boxes, box_ind, size = random_problem(
        rng, batch=2, height=23, width=19, depth=depth, num_boxes=30, crop=(9, 7)
    )
    # sums beyond float32 and bfloat16 too
    grads = np.clip(grads, -3, 3) * np.float32(1e38)
    boxes[:2] = [[0.2, 0.1, 0.8, 0.9], [0.1, 0.3, 0.7, 0.6]]  # inside
    grads[0, 0, 0, 0] = np.inf
    grads[1, 1, 1, 0] = np.nan
    grads[2, :2] = rng.standard_normal((2, 7, depth)) * np.float32(1e-39)
    if data_format == "NCHW":
        grads, size = _nchw(grads), [size[0], size[3], size[1], size[2]]
    kw = dict(data_format=data_format, num_threads=threads)
    out32 = cropgrad.crop_and_resize_grad_image(grads, boxes, box_ind, size, **kw)
    # 46 rows: tasks for a team of 3, however small the work.
    out = on_team(
        threads,
        threads,
        lambda: cropgrad.crop_and_resize_grad_image(
            grads, boxes, box_ind, size, "bfloat16", **kw
        ),
    )
    assert np.array_equal(out.view(np.uint16), _round_bf16(out32))
    assert np.isinf(out32).any() and np.isnan(out32).any()
    assert (np.abs(out32[np.isfinite(out32)]) < 2.0**-126).any()  # subnormals


@pytest.mark.parametrize("method", ["bilinear", "nearest"])
def test_error_within_half_an_ulp_and_the_float32_bound(method):
    rng = np.random.default_rng(5)
    grads, boxes, box_ind, size = random_problem(
        rng, batch=2, height=11, width=9, depth=4, num_boxes=12, crop=(6, 5)
    )
    out = cropgrad.crop_and_resize_grad_image(
        grads, boxes, box_ind, size, ml_dtypes.bfloat16, method
    ).astype(np.float64)
    exact = reference.grad_image(grads, boxes, box_ind, size, method)
    # The float32 sum (as test_properties.py bounds it): each term after at
    # most 4 roundings, a serial sum of at most n terms; then one rounding
    # to bfloat16, at most half an ulp: 2**-8 relative (8 significant bits)
    # of the float32 value, or half the smallest subnormal, 2**-134.
    n = 4 * grads.shape[0] * grads.shape[1] * grads.shape[2]
    product = 4.01 * U32 if method == "bilinear" else 0.0
    abs_terms = reference.grad_image(np.abs(grads), boxes, box_ind, size, method)
    bound32 = (product + n * U32) * abs_terms + 4 * n * TINY32
    bound = bound32 + 2.0**-8 * (np.abs(exact) + bound32) + 2.0**-134
    err = np.abs(out - exact)
    assert np.all(err <= bound)
    # and it is a bfloat16 result: coarser than float32's bound alone
    assert np.any(err > bound32)


def test_out_of_bfloat16():
    grads, boxes, box_ind, size = random_problem(np.random.default_rng(6))
    expected = cropgrad.crop_and_resize_grad_image(
        grads, boxes, box_ind, size, "bfloat16"
    )
    out = np.full(size, 7, BF16)
    got = cropgrad.crop_and_resize_grad_image(
        grads, boxes, box_ind, size, BF16, out=out
    )
    assert got is out
    assert np.array_equal(out.view(np.uint16), expected.view(np.uint16))
    with pytest.raises(TypeError, match="out must have dtype bfloat16"):
        cropgrad.crop_and_resize_grad_image(
            grads, boxes, box_ind, size, BF16, out=np.zeros(size, np.float16)
        )


def test_zero_boxes_give_zeros():
    out = cropgrad.crop_and_resize_grad_image(
        np.zeros((0, 2, 2, 3), np.float32),
        np.zeros((0, 4)),
        [],
        [2, 4, 5, 3],
        "bfloat16",
    )
    assert out.dtype == BF16 and not out.view(np.uint16).any()


# --------------------------------------------------------------------------
# RoIAlign: bfloat16 read exactly, bfloat16 results rounded once

ROI_OPTIONS = [
    dict(spatial_scale=0.5, sampling_ratio=2, aligned=False),
    dict(spatial_scale=1.0, sampling_ratio=-1, aligned=True),
]


def _roi_boxes(rng, num_boxes, height, width, spatial_scale=0.5):
    """[x1, y1, x2, y2] boxes in the input image's pixels: some flipped,
    some partly outside, some on whole pixels."""
    x = rng.uniform(-2, width + 2, (num_boxes, 2))
    y = rng.uniform(-2, height + 2, (num_boxes, 2))
    boxes = np.stack([x[:, 0], y[:, 0], x[:, 1], y[:, 1]], 1) / spatial_scale
    boxes[::4] = np.round(boxes[::4])
    return boxes.astype(np.float32)


def _roi(op, layout, image, boxes, box_ind, grads, tangent, **kw):
    """RoIAlign's `op` on NCHW arrays, run in `layout` (its result as it
    comes)."""
    to = _nhwc if layout == "NHWC" else np.asarray
    kw = dict(kw, data_format=layout)
    if op == "roi_align":
        return cropgrad.roi_align(to(image), boxes, box_ind, (3, 2), **kw)
    if op == "roi_align_grad_image":
        size = to(np.empty(image.shape, np.uint8)).shape
        return cropgrad.roi_align_grad_image(to(grads), boxes, box_ind, size, **kw)
    if op == "roi_align_grad_boxes":
        return cropgrad.roi_align_grad_boxes(to(grads), to(image), boxes, box_ind, **kw)
    return cropgrad.roi_align_jvp_boxes(
        to(image), boxes, box_ind, tangent, (3, 2), **kw
    )


@pytest.mark.parametrize("data_format", ["NCHW", "NHWC"])
@pytest.mark.parametrize("flush", [False, True])
@pytest.mark.parametrize("options", ROI_OPTIONS, ids=["ratio2", "adaptive"])
def test_roi_align_images_read_exactly_as_float32(options, flush, data_format):
    rng = np.random.default_rng(8)
    image = _bf16_image(rng, (2, 5, 9, 7))
    wide = image.astype(np.float32)
    boxes = _roi_boxes(rng, 10, 9, 7)
    box_ind = rng.integers(0, 2, 10)
    grads = rng.standard_normal((10, 5, 3, 2)).astype(np.float32)
    tangent = rng.standard_normal((10, 4)).astype(np.float32)
    kw = dict(options, flush_denormals=flush)
    for op in ("roi_align", "roi_align_grad_boxes", "roi_align_jvp_boxes"):
        out_dtype = {} if op == "roi_align_grad_boxes" else {"dtype": np.float32}
        assert_same_bits(
            _roi(
                op,
                data_format,
                image,
                boxes,
                box_ind,
                grads,
                tangent,
                **kw,
                **out_dtype,
            ),
            _roi(op, data_format, wide, boxes, box_ind, grads, tangent, **kw),
            op,
        )
    # The image gradient takes bfloat16 grads, read exactly too (its
    # result in their dtype by default).
    grads_bf16 = _bf16_image(rng, grads.shape)
    out = _roi(
        "roi_align_grad_image",
        data_format,
        image,
        boxes,
        box_ind,
        grads_bf16,
        None,
        **kw,
    )
    assert out.dtype == BF16
    expected = _roi(
        "roi_align_grad_image",
        data_format,
        image,
        boxes,
        box_ind,
        grads_bf16.astype(np.float32),
        None,
        dtype=BF16,
        **kw,
    )
    assert np.array_equal(out.view(np.uint16), expected.view(np.uint16))


@pytest.mark.parametrize("threads", [1, 3])
@pytest.mark.parametrize("data_format", ["NCHW", "NHWC"])
@pytest.mark.parametrize(
    "op", ["roi_align", "roi_align_grad_image", "roi_align_jvp_boxes"]
)
def test_roi_align_bfloat16_results_are_float32_rounded_once(op, data_format, threads):
    # Values beyond float32 and bfloat16 (sums that overflow), infinities,
    # NaN and subnormals in the pixels, gradients and tangents: the
    # bfloat16 result is the float32 one rounded once, as the test's own
    # rounding rounds it.
    rng = np.random.default_rng([9, threads, len(op)])
    options = ROI_OPTIONS[threads == 3]
    image = rng.standard_normal((3, 4, 11, 9)).astype(np.float32)
    image = np.clip(image, -3, 3) * np.float32(1e38)
    image[0, :, :3] = rng.standard_normal((4, 3, 9)) * np.float32(1e-39)
    image[1, :, 4, 4] = np.nan
    image[2, :, 5:7, 2:4] = np.inf
    boxes = _roi_boxes(rng, 30, 11, 9, options["spatial_scale"])
    box_ind = rng.integers(0, 3, 30)
    # In the feature map's pixels: on the subnormal rows of image 0, around
    # the NaN of image 1 and the infinities of image 2, inside image 0.
    planted = [[0, 0, 8, 2], [1, 2, 7, 6], [1, 4, 5, 8], [1, 1, 7, 9]]
    boxes[:4] = np.array(planted, np.float32) / np.float32(options["spatial_scale"])
    box_ind[:4] = [0, 1, 2, 0]
    grads = np.clip(rng.standard_normal((30, 4, 3, 2)), -3, 3) * np.float32(1e38)
    grads = grads.astype(np.float32)
    grads[0] = rng.standard_normal((4, 3, 2)) * np.float32(1e-39)
    grads[3, 1, 1, 1] = np.inf
    grads[3, 2, 0, 0] = np.nan
    tangent = (rng.standard_normal((30, 4)) * 1e30).astype(np.float32)
    tangent[0] = rng.standard_normal(4) * np.float32(1e-3)
    tangent[3, 2] = np.nan
    args = (op, data_format, image, boxes, box_ind, grads, tangent)
    # Three images, boxes on each: tasks for a team of 3 from every op.
    _check_rounded_once_on_team(_roi, args, options, threads)


def test_roi_align_out_of_bfloat16():
    rng = np.random.default_rng(10)
    image = _bf16_image(rng, (2, 3, 8, 8))
    boxes = _roi_boxes(rng, 6, 8, 8)
    box_ind = rng.integers(0, 2, 6)
    expected = cropgrad.roi_align(image, boxes, box_ind, 2, spatial_scale=0.5)
    assert expected.dtype == BF16  # the image's dtype by default
    out = np.full((6, 3, 2, 2), 7, BF16)
    got = cropgrad.roi_align(image, boxes, box_ind, 2, spatial_scale=0.5, out=out)
    assert got is out
    assert np.array_equal(out.view(np.uint16), expected.view(np.uint16))


def test_roi_align_bfloat16_results_need_float32_arithmetic():
    # float64 data is computed in float64, rounded only to float32 or
    # float64 (docs/semantics.md).
    image = np.ones((1, 2, 4, 4))
    boxes = np.array([[0.0, 0.0, 3.0, 3.0]])
    with pytest.raises(TypeError, match="float64 arithmetic, got CG_BFLOAT16"):
        cropgrad.roi_align(image, boxes, [0], 2, dtype=BF16)
    with pytest.raises(TypeError, match="float64 arithmetic, got CG_BFLOAT16"):
        cropgrad.roi_align_grad_image(
            np.ones((1, 2, 2, 2)), boxes, [0], image.shape, dtype="bfloat16"
        )


# --------------------------------------------------------------------------
# grid_sample: bfloat16 read exactly, bfloat16 results rounded once

GRID_OPTIONS = [
    dict(mode="bilinear", padding_mode="zeros", align_corners=False),
    dict(mode="bicubic", padding_mode="border", align_corners=True),
    dict(mode="nearest", padding_mode="reflection", align_corners=False),
]


def _grid_at(rows, cols, height, width, align_corners):
    """Normalised (x, y) of pixel coordinates (fractions allowed)."""
    if align_corners:
        x, y = 2 * cols / (width - 1) - 1, 2 * rows / (height - 1) - 1
    else:
        x, y = (2 * cols + 1) / width - 1, (2 * rows + 1) / height - 1
    return np.stack([x, y], -1)


def _grid_op(op, layout, image, grid, grads, tangent, **kw):
    """grid_sample's `op` on NCHW arrays, run in `layout` (its result as it
    comes)."""
    to = _nhwc if layout == "NHWC" else np.asarray
    kw = dict(kw, data_format=layout)
    if op == "grid_sample":
        return cropgrad.grid_sample(to(image), grid, **kw)
    if op == "grid_sample_grad_image":
        size = to(np.empty(image.shape, np.uint8)).shape
        return cropgrad.grid_sample_grad_image(to(grads), grid, size, **kw)
    if op == "grid_sample_grad_grid":
        return cropgrad.grid_sample_grad_grid(to(grads), to(image), grid, **kw)
    return cropgrad.grid_sample_jvp_grid(to(image), grid, tangent, **kw)


@pytest.mark.parametrize("data_format", ["NCHW", "NHWC"])
@pytest.mark.parametrize("flush", [False, True])
def test_grid_sample_images_read_exactly_as_float32(flush, data_format):
    rng = np.random.default_rng(11)
    image = _bf16_image(rng, (2, 5, 9, 7))
    wide = image.astype(np.float32)
    grid = rng.uniform(-1.2, 1.2, (2, 3, 4, 2)).astype(np.float32)
    grads = rng.standard_normal((2, 5, 3, 4)).astype(np.float32)
    tangent = rng.standard_normal(grid.shape).astype(np.float32)
    for options in GRID_OPTIONS:
        kw = dict(options, flush_denormals=flush)
        for op in ("grid_sample", "grid_sample_grad_grid", "grid_sample_jvp_grid"):
            out_dtype = {} if op == "grid_sample_grad_grid" else {"dtype": np.float32}
            args = (op, data_format)
            assert_same_bits(
                _grid_op(*args, image, grid, grads, tangent, **kw, **out_dtype),
                _grid_op(*args, wide, grid, grads, tangent, **kw),
                (op, options),
            )
        # The image gradient takes bfloat16 grads, read exactly too (its
        # result in their dtype by default).
        grads_bf16 = _bf16_image(rng, grads.shape)
        args = ("grid_sample_grad_image", data_format, image, grid)
        out = _grid_op(*args, grads_bf16, None, **kw)
        assert out.dtype == BF16
        expected = _grid_op(
            *args, grads_bf16.astype(np.float32), None, dtype=BF16, **kw
        )
        assert np.array_equal(out.view(np.uint16), expected.view(np.uint16))


@pytest.mark.parametrize("threads", [1, 3])
@pytest.mark.parametrize("data_format", ["NCHW", "NHWC"])
@pytest.mark.parametrize(
    "op", ["grid_sample", "grid_sample_grad_image", "grid_sample_jvp_grid"]
)
def test_grid_sample_bfloat16_results_are_float32_rounded_once(
    op, data_format, threads
):
    # Values beyond float32 and bfloat16 (sums that overflow), infinities,
    # NaN and subnormals in the pixels, gradients and tangents: the
    # bfloat16 result is the float32 one rounded once, as the test's own
    # rounding rounds it.
    rng = np.random.default_rng([12, threads, len(op)])
    options = GRID_OPTIONS[threads == 3]
    aligned = options["align_corners"]
    image = rng.standard_normal((3, 4, 11, 9)).astype(np.float32)
    image = np.clip(image, -3, 3) * np.float32(1e38)
    image[0, :, :5] = rng.standard_normal((4, 5, 9)) * np.float32(1e-39)
    image[1, :, 4, 4] = np.nan
    image[2, :, 5:7, 2:4] = np.inf
    grid = rng.uniform(-1.1, 1.1, (3, 4, 5, 2))
    # Points on the subnormal rows of image 0, around the NaN of image 1
    # and the infinities of image 2.
    grid[0, :2] = _grid_at(
        rng.uniform(1.2, 2.8, (2, 5)), rng.uniform(0, 8, (2, 5)), 11, 9, aligned
    )
    grid[1, 0] = _grid_at(
        rng.uniform(3.2, 4.8, 5), rng.uniform(3.2, 4.8, 5), 11, 9, aligned
    )
    grid[2, 0] = _grid_at(rng.uniform(5, 6, 5), rng.uniform(2, 3, 5), 11, 9, aligned)
    grid = grid.astype(np.float32)
    grads = np.clip(rng.standard_normal((3, 4, 4, 5)), -3, 3) * np.float32(1e38)
    grads = grads.astype(np.float32)
    grads[0] = rng.standard_normal((4, 4, 5)) * np.float32(1e-39)
    grads[1, 1, 1, 1] = np.inf
    grads[1, 2, 0, 0] = np.nan
    tangent = (rng.standard_normal(grid.shape) * 1e30).astype(np.float32)
    tangent[0] = rng.standard_normal(grid.shape[1:]) * np.float32(1e-3)
    tangent[1, 3, 2, 0] = np.nan
    args = (op, data_format, image, grid, grads, tangent)
    # Three images, rows of points and channels on each: tasks for a team
    # of 3 from every op.
    _check_rounded_once_on_team(_grid_op, args, options, threads)


def test_grid_sample_bfloat16_results_need_float32_arithmetic():
    # float64 data is computed in float64, rounded only to float32 or
    # float64 (docs/semantics.md).
    image, grid = np.ones((1, 2, 4, 4)), np.zeros((1, 2, 2, 2))
    with pytest.raises(TypeError, match="rounded twice"):
        cropgrad.grid_sample(image, grid, dtype=BF16)
    with pytest.raises(TypeError, match="rounded twice"):
        cropgrad.grid_sample_grad_image(
            np.ones((1, 2, 2, 2)), grid, image.shape, dtype="bfloat16"
        )
    with pytest.raises(TypeError, match="rounded twice"):
        cropgrad.grid_sample_jvp_grid(image, grid, grid, dtype=BF16)


# --------------------------------------------------------------------------
# raw_ops refuse bfloat16 as TensorFlow 2.21 does


def test_raw_ops_refuse_bfloat16():
    grads, boxes, box_ind, size = random_problem(np.random.default_rng(7))
    image = np.zeros(size, BF16)
    with pytest.raises(TypeError, match="image of dtype bfloat16"):
        raw_ops.CropAndResize(
            image=image, boxes=boxes, box_ind=box_ind, crop_size=(4, 3)
        )
    with pytest.raises(TypeError, match="image of dtype bfloat16"):
        raw_ops.CropAndResizeGradBoxes(
            grads=grads, image=image, boxes=boxes, box_ind=box_ind
        )
    for T in ("bfloat16", ml_dtypes.bfloat16, BF16):
        with pytest.raises(TypeError, match="T must be float16, float32 or float64"):
            raw_ops.CropAndResizeGradImage(
                grads=grads, boxes=boxes, box_ind=box_ind, image_size=size, T=T
            )


def test_capi_code():
    assert cropgrad.capi._CODES["CG_BFLOAT16"] == 10


# --------------------------------------------------------------------------
# Without ml_dtypes


def test_package_works_without_ml_dtypes():
    # ml_dtypes made unimportable: the package imports, computes, never
    # imports ml_dtypes itself, and says what a bfloat16 name needs.
    code = """
import sys
sys.modules["ml_dtypes"] = None  # import ml_dtypes raises ImportError
import numpy as np
import cropgrad
assert sys.modules["ml_dtypes"] is None
image = np.arange(9, dtype=np.float32).reshape(1, 3, 3, 1)
crops = cropgrad.crop_and_resize(image, [[0, 0, 1, 1]], [0], (2, 2))
assert crops.tolist() == [[[[0.0], [2.0]], [[6.0], [8.0]]]]
try:
    cropgrad.crop_and_resize_grad_image(crops, [[0, 0, 1, 1]], [0], image.shape,
                                        "bfloat16")
except TypeError as exc:
    assert "ml_dtypes" in str(exc), exc
else:
    raise AssertionError("no TypeError")
"""
    run = subprocess.run(
        [sys.executable, "-P", "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONWARNINGS": "error"},
    )
    assert run.returncode == 0, run.stdout + run.stderr


def test_import_does_not_load_ml_dtypes():
    run = subprocess.run(
        [
            sys.executable,
            "-P",
            "-c",
            "import sys, cropgrad; print('ml_dtypes' in sys.modules)",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "False"
