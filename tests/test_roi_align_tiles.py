"""RoIAlign in NCHW: through tiles or where the planes are, the same bits.

An NCHW problem either gathers groups of planes into tiles whose channels
lie side by side (the NHWC loops, SIMD clones included) or reads the planes
where they are (scalar loops); which one is a matter of speed only.  Each
op is run both ways, with groups that divide the channels and groups that
leave a remainder, on tasks that split an image's boxes into parts, and
compared bit for bit with the NHWC result transposed (and the NumPy
reference where it is exact), for several image and output dtypes.
"""

import contextlib

import ml_dtypes
import numpy as np
import pytest
from _helpers import assert_same_bits, starting_teams

import cropgrad
from cropgrad._capi import roi_align as capi_roi
from cropgrad._kernels import testing
from cropgrad._reference import roi_align as ref

PLANES = 0
# Tile budgets, with the image below (12 x 10 float32 planes, 480 bytes):
# groups of 16 channels (40 = 16 + 16 + 8), and one group of all 40.
SMALL = 16 * 480
LARGE = 64 * 480
SHAPE = (2, 40, 12, 10)
OUTPUT = (3, 4)


@contextlib.contextmanager
def tile_bytes(nbytes):
    previous = capi_roi.use_tile_bytes(nbytes)
    try:
        yield
    finally:
        capi_roi.use_tile_bytes(previous)


def problem(seed, dtype=np.float32, num_boxes=24):
    rng = np.random.default_rng(seed)
    image = rng.standard_normal(SHAPE).astype(dtype)
    corners = rng.uniform(-8, 48, (num_boxes, 2, 2))
    boxes = np.concatenate([corners.min(1), corners.max(1)], axis=1)
    boxes[::5] = boxes[::5, [2, 3, 0, 1]]  # some flipped
    boxes[::7] = np.round(boxes[::7])  # samples on whole pixels too
    arith = np.float64 if dtype == np.float64 else np.float32
    box_ind = rng.integers(0, SHAPE[0], num_boxes)
    grads = rng.standard_normal((num_boxes, SHAPE[1], *OUTPUT)).astype(arith)
    tangent = rng.standard_normal((num_boxes, 4)).astype(arith)
    return image, boxes.astype(arith), box_ind, grads, tangent


OPTIONS = [
    dict(spatial_scale=0.25, sampling_ratio=2, aligned=False),
    dict(spatial_scale=0.25, sampling_ratio=0, aligned=True),
    dict(spatial_scale=0.5, sampling_ratio=-1, aligned=False),
]


def nhwc(a):
    return np.ascontiguousarray(a.transpose(0, 2, 3, 1))


def nchw(a):
    return a.transpose(0, 3, 1, 2)


def run(op, layout, image, boxes, box_ind, grads, tangent, options, **kw):
    """`op` on the NCHW arrays, in `layout`; the result as NCHW (or [K, 4])."""
    to = nhwc if layout == "NHWC" else (lambda a: a)
    back = nchw if layout == "NHWC" else (lambda a: a)
    kw = dict(options, data_format=layout, **kw)
    if op == "forward":
        return back(cropgrad.roi_align(to(image), boxes, box_ind, OUTPUT, **kw))
    if op == "jvp":
        out = cropgrad.roi_align_jvp_boxes(
            to(image), boxes, box_ind, tangent, OUTPUT, **kw
        )
        return back(out)
    if op == "grad_image":
        shape = to(image).shape
        return back(
            cropgrad.roi_align_grad_image(to(grads), boxes, box_ind, shape, **kw)
        )
    return cropgrad.roi_align_grad_boxes(to(grads), to(image), boxes, box_ind, **kw)


def test_the_budgets_choose_what_the_tests_say():
    image, boxes, box_ind, *_ = problem(0)
    boxes32 = boxes.astype(np.float32)
    box_ind = box_ind.astype(np.int64)

    def plan(nbytes, nthreads=1, read_only=True, k=len(boxes), shape=SHAPE):
        return testing.roi_tiles(
            boxes32[:k], box_ind[:k], shape, OUTPUT, 0.25, 2, False, nbytes,
            nthreads, read_only,
        )  # fmt: skip

    assert plan(PLANES) is None
    assert plan(SMALL) == (16, 3, 1)
    assert plan(LARGE) == (40, 1, 1)
    # Two threads: parts of an image's boxes for the read-only ops, smaller
    # groups for the image gradient (whose sums are one task's each).
    assert plan(LARGE, nthreads=2) == (40, 1, 2)
    assert plan(LARGE, nthreads=2, read_only=False) == (32, 2, 1)
    # Fewer than one sample for every eight pixels moved (one box's 48 on
    # a 40 x 40 image): the planes, but for the image gradient.
    big = (2, 40, 40, 40)
    assert plan(LARGE * 20, k=1) == (40, 1, 1)
    assert plan(LARGE * 20, k=1, shape=big) is None
    assert plan(LARGE * 20, k=1, shape=big, read_only=False) == (40, 1, 1)
    # Below eight planes to a tile: the planes.
    assert plan(7 * 480) is None


@pytest.mark.parametrize("op", ["forward", "jvp", "grad_image", "grad_boxes"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("options", OPTIONS, ids=["ratio2", "adaptive", "ratio-1"])
def test_tiles_and_planes_give_the_nhwc_bits(op, dtype, options):
    arrays = problem([1, OPTIONS.index(options)], dtype)
    expected = run(op, "NHWC", *arrays, options)
    with starting_teams():
        for nbytes in (PLANES, SMALL, LARGE):
            with tile_bytes(nbytes):
                for threads in (1, 2, 3):
                    got = run(op, "NCHW", *arrays, options, num_threads=threads)
                    assert_same_bits(got, expected, (nbytes, threads))


@pytest.mark.parametrize("op", ["forward", "grad_image"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_tiles_give_the_reference_bits(op, dtype):
    image, boxes, box_ind, grads, _ = problem(2, dtype)
    options = OPTIONS[0]
    if op == "forward":
        expected = ref.roi_align(image, boxes, box_ind, OUTPUT, **options)
    else:
        expected = ref.roi_align_grad_image(grads, boxes, box_ind, SHAPE, **options)
    for nbytes in (SMALL, LARGE):
        with tile_bytes(nbytes):
            got = run(op, "NCHW", image, boxes, box_ind, grads, None, options)
            assert_same_bits(got, expected, nbytes)


@pytest.mark.parametrize(
    "image_dtype", [np.float16, ml_dtypes.bfloat16, np.uint8, np.int32]
)
@pytest.mark.parametrize("op", ["forward", "jvp", "grad_boxes"])
def test_tiles_convert_pixels_as_the_planes_do(image_dtype, op):
    image, boxes, box_ind, grads, tangent = problem(3)
    if np.dtype(image_dtype).kind in "iu":
        image = np.abs(image * 40).astype(image_dtype)
    else:
        image = image.astype(image_dtype)
    arrays = (image, boxes, box_ind, grads, tangent)
    expected = run(op, "NHWC", *arrays, OPTIONS[1])
    for nbytes in (PLANES, SMALL):
        with tile_bytes(nbytes):
            got = run(op, "NCHW", *arrays, OPTIONS[1], num_threads=2)
            assert_same_bits(got, expected, nbytes)


@pytest.mark.parametrize("out_dtype", [np.float16, ml_dtypes.bfloat16, np.float64])
@pytest.mark.parametrize("op", ["forward", "grad_image"])
def test_tiles_round_each_output_dtype_once(out_dtype, op):
    arrays = problem(4)
    expected = run(op, "NHWC", *arrays, OPTIONS[0], dtype=out_dtype)
    assert expected.dtype == out_dtype
    for nbytes in (PLANES, SMALL, LARGE):
        with tile_bytes(nbytes):
            got = run(op, "NCHW", *arrays, OPTIONS[0], dtype=out_dtype)
            assert_same_bits(got, expected, nbytes)


def test_images_without_boxes_get_a_zero_gradient():
    image, boxes, _, grads, _ = problem(5)
    box_ind = np.zeros(len(boxes), np.int64)  # every box on image 0
    for nbytes in (PLANES, SMALL):
        with tile_bytes(nbytes):
            got = run("grad_image", "NCHW", image, boxes, box_ind, grads, None,
                      OPTIONS[0], num_threads=2)  # fmt: skip
            assert not got[1].any()
            assert got[0].any()


@pytest.mark.parametrize("op", ["forward", "jvp", "grad_image", "grad_boxes"])
def test_non_finite_values_give_the_same_nan_bits(op):
    image, boxes, box_ind, grads, tangent = problem(6)
    image[:, 3, 4:7, 2:5] = np.inf
    image[:, 17, 1:3, :] = -np.inf
    image[1, 33, 5, 5] = np.nan
    grads[::3, 5] = np.inf
    grads[1::4, 20] = -np.inf
    grads[2, 36, 1, 1] = np.nan
    arrays = (image, boxes, box_ind, grads, tangent)
    expected = run(op, "NHWC", *arrays, OPTIONS[1])
    assert np.isnan(expected).any()
    with starting_teams():
        for nbytes in (PLANES, SMALL, LARGE):
            with tile_bytes(nbytes):
                for threads in (1, 2, 3):
                    got = run(op, "NCHW", *arrays, OPTIONS[1], num_threads=threads)
                    assert_same_bits(got, expected, (nbytes, threads))
