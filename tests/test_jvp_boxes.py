"""crop_and_resize_jvp_boxes: the reference's bits, the boxes gradient as its
transpose, finite differences of the forward op, errors, threads (teams
started and checked), out=."""

import numpy as np
import pytest
from _helpers import IMAGE_DTYPES, assert_same_bits, crop_rows, on_team

import cropgrad
from cropgrad import _reference as reference

# float32 unit roundoff
U = 2.0**-24


def _image(rng, dtype, shape):
    dtype = np.dtype(dtype)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        # int32 and int64 beyond float32's exact integers too
        return rng.integers(
            max(info.min, -(2**40)), min(info.max, 2**40), shape, endpoint=True
        ).astype(dtype)
    scale = 100.0 if dtype == np.float16 else 1e4
    return (rng.standard_normal(shape) * scale).astype(dtype)


def _problem(
    rng,
    dtype=np.float32,
    batch=2,
    height=9,
    width=7,
    depth=3,
    num_boxes=6,
    crop=(4, 3),
    spread=0.4,
):
    """Random image, boxes (some outside the image, some flipped), box_ind,
    tangents."""
    image = _image(rng, dtype, (batch, height, width, depth))
    boxes = rng.uniform(-spread, 1 + spread, (num_boxes, 4)).astype(np.float32)
    box_ind = rng.integers(0, batch, num_boxes)
    tangent = rng.standard_normal((num_boxes, 4)).astype(np.float32)
    return image, boxes, box_ind, tangent, crop


def _nchw(a):
    return np.ascontiguousarray(a.transpose(0, 3, 1, 2))


def _jvp(image, boxes, box_ind, tangent, crop, data_format="NHWC", **kwargs):
    """The NumPy API's JVP, NHWC in and out whatever the layout computed."""
    if data_format == "NCHW":
        out = cropgrad.crop_and_resize_jvp_boxes(
            _nchw(image), boxes, box_ind, tangent, crop, data_format="NCHW", **kwargs
        )
        return np.ascontiguousarray(out.transpose(0, 2, 3, 1))
    return cropgrad.crop_and_resize_jvp_boxes(
        image, boxes, box_ind, tangent, crop, **kwargs
    )


def _jvp_on_team(threads, image, boxes, box_ind, tangent, crop, data_format):
    """`_jvp` on a team of `threads` however small the work, checked to have
    started (a task per crop row of every box)."""
    return on_team(
        threads,
        crop_rows(boxes, crop, image.shape[3]),
        lambda: _jvp(
            image, boxes, box_ind, tangent, crop, data_format, num_threads=threads
        ),
    )


# --------------------------------------------------------------------------
# The reference's bits


@pytest.mark.parametrize("dtype", IMAGE_DTYPES, ids=lambda t: np.dtype(t).name)
@pytest.mark.parametrize("data_format", ["NHWC", "NCHW"])
@pytest.mark.parametrize("crop", [(4, 3), (1, 5), (6, 1), (1, 1), (2, 2)])
def test_matches_reference_bits(dtype, data_format, crop):
    rng = np.random.default_rng([7, len(data_format), *crop, np.dtype(dtype).num])
    image, boxes, box_ind, tangent, _ = _problem(rng, dtype, crop=crop)
    boxes[0] = [0.9, 0.8, 0.1, 0.2]  # flipped both ways
    boxes[1] = [-0.5, 1.2, -0.1, 1.6]  # wholly outside
    boxes[2] = [0.25, 0.5, 0.25, 0.5]  # a point: every sample on one pixel
    expected = reference.jvp_boxes(image, boxes, box_ind, tangent, crop, exact=True)
    for threads in (1, 2, 3):
        out = _jvp_on_team(threads, image, boxes, box_ind, tangent, crop, data_format)
        assert_same_bits(out, expected)
    assert np.all(expected[1] == 0)


@pytest.mark.parametrize("data_format", ["NHWC", "NCHW"])
@pytest.mark.parametrize("dtype", [np.float32, np.uint8, np.float16])
def test_big_problem_matches_reference_on_threads(data_format, dtype):
    # Enough work for a team of threads at the default serial threshold.
    from cropgrad._runtime import parallel

    rng = np.random.default_rng(3)
    image, boxes, box_ind, tangent, crop = _problem(
        rng, dtype, height=23, width=19, depth=5, num_boxes=40, crop=(11, 9)
    )
    expected = reference.jvp_boxes(image, boxes, box_ind, tangent, crop, exact=True)
    for threads in (1, 2, 3):
        out = _jvp(
            image, boxes, box_ind, tangent, crop, data_format, num_threads=threads
        )
        assert parallel.last_team() == threads
        assert_same_bits(out, expected)


def test_flush_denormals_matches_reference():
    rng = np.random.default_rng(5)
    image, boxes, box_ind, tangent, crop = _problem(rng, np.float32, crop=(4, 1))
    image = image * np.float32(1e-40)  # subnormal pixels and slopes
    tangent[0] = [1e-39, -1e-39, 3.0, 1e-41]  # subnormal tangents
    tangent[1] *= np.float32(1e-36)  # subnormal products
    for flush in (False, True):
        expected = reference.jvp_boxes(
            image, boxes, box_ind, tangent, crop, exact=True, flush=flush
        )
        out = cropgrad.crop_and_resize_jvp_boxes(
            image, boxes, box_ind, tangent, crop, flush_denormals=flush
        )
        assert_same_bits(out, expected)
    assert np.any(
        out != cropgrad.crop_and_resize_jvp_boxes(image, boxes, box_ind, tangent, crop)
    )


def test_example_ramp():
    image = np.arange(9, dtype=np.float32).reshape(1, 3, 3, 1)
    box = [[0.25, 0.25, 0.75, 0.75]]
    # Down by t: every sample moves 2 * t rows, a ramp of 3 per row.
    down = cropgrad.crop_and_resize_jvp_boxes(image, box, [0], [[1, 0, 1, 0]], [2, 2])
    np.testing.assert_array_equal(down, np.full((1, 2, 2, 1), 6, np.float32))
    # Right by t: 2 * t columns of a ramp of 1 per column.
    right = cropgrad.crop_and_resize_jvp_boxes(image, box, [0], [[0, 1, 0, 1]], [2, 2])
    np.testing.assert_array_equal(right, np.full((1, 2, 2, 1), 2, np.float32))
    # Growing the box downwards (y2 only) moves the lower row, not the upper.
    grow = cropgrad.crop_and_resize_jvp_boxes(image, box, [0], [[0, 0, 1, 0]], [2, 2])
    np.testing.assert_array_equal(grow[0, :, :, 0], [[0, 0], [6, 6]])


# --------------------------------------------------------------------------
# The boxes gradient is its transpose


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("crop", [(5, 4), (1, 3), (4, 1), (1, 1)])
def test_grad_boxes_is_the_transpose(seed, crop):
    rng = np.random.default_rng([seed, *crop])
    image, boxes, box_ind, tangent, _ = _problem(
        rng, np.float32, height=11, width=8, depth=4, num_boxes=7, crop=crop
    )
    grads = rng.standard_normal((7, *crop, 4)).astype(np.float32)
    jvp = cropgrad.crop_and_resize_jvp_boxes(image, boxes, box_ind, tangent, crop)
    vjp = cropgrad.crop_and_resize_grad_boxes(grads, image, boxes, box_ind)
    lhs = float(np.sum(jvp.astype(np.float64) * grads))
    rhs = float(np.sum(tangent.astype(np.float64) * vjp))
    # Both sides are the same float64 sum of products of float32 values
    # (pixels, lerps, the boxes gradient's factors) but rounded differently:
    # each JVP element after at most 10 float32 operations on its path
    # (pixel differences, lerp weights, products, sums, the tangent's rate),
    # each boxes-gradient sum after 6 per term plus a serial sum of
    # crop_h * crop_w * depth terms.  Both errors are bounded by gamma_n
    # times the same magnitude: the products with every difference of
    # pixels replaced by the sum of their magnitudes (grad_boxes_magnitude,
    # weighted by |tangent|).
    n_terms = crop[0] * crop[1] * 4
    magnitude = float(
        np.sum(
            np.abs(tangent)
            * reference.grad_boxes_magnitude(grads, image, boxes, box_ind)
        )
    )

    def gamma(n):
        return n * U / (1 - n * U)

    bound = (gamma(10) + gamma(n_terms + 6)) * magnitude + 1e-12 * magnitude
    assert magnitude > 0
    assert abs(lhs - rhs) <= bound, (lhs, rhs, bound)


# --------------------------------------------------------------------------
# Finite differences of the forward op


def _forward64(image, boxes, crop):
    """crop_and_resize of one float64 image in float64, coordinates too
    (the boxes gradient's sampling positions, which are the forward op's
    in exact arithmetic); NaN outside the image."""
    height, width = image.shape[:2]
    ch, cw = crop
    out = np.full((len(boxes), ch, cw, image.shape[2]), np.nan)
    for b, (y1, x1, y2, x2) in enumerate(boxes.astype(np.float64)):
        ys = (
            [0.5 * (y1 + y2) * (height - 1)]
            if ch == 1
            else y1 * (height - 1) + np.arange(ch) * (y2 - y1) * (height - 1) / (ch - 1)
        )
        xs = (
            [0.5 * (x1 + x2) * (width - 1)]
            if cw == 1
            else x1 * (width - 1) + np.arange(cw) * (x2 - x1) * (width - 1) / (cw - 1)
        )
        for y, py in enumerate(ys):
            for x, px in enumerate(xs):
                if not (0 <= py <= height - 1 and 0 <= px <= width - 1):
                    continue
                top, left = min(int(py), height - 2), min(int(px), width - 2)
                wy, wx = py - top, px - left
                upper = image[top, left] * (1 - wx) + image[top, left + 1] * wx
                lower = image[top + 1, left] * (1 - wx) + image[top + 1, left + 1] * wx
                out[b, y, x] = upper * (1 - wy) + lower * wy
    return out


def _positions(boxes, size, crop):
    lo, hi = boxes[:, 0].astype(np.float64), boxes[:, 1].astype(np.float64)
    if crop == 1:
        return (0.5 * (lo + hi) * (size - 1))[:, None]
    i = np.arange(crop)
    return lo[:, None] * (size - 1) + i * ((hi - lo) * (size - 1) / (crop - 1))[:, None]


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("crop", [(5, 4), (1, 3), (3, 1)])
def test_central_difference_of_the_forward_op(seed, crop):
    rng = np.random.default_rng([11, seed, *crop])
    height, width, depth, n = 10, 9, 3, 8
    image = rng.standard_normal((1, height, width, depth))
    boxes = rng.uniform(-0.2, 1.2, (n, 4)).astype(np.float32)
    tangent = rng.standard_normal((n, 4)).astype(np.float32)
    h = 1e-6
    plus = _forward64(image[0], boxes + h * tangent.astype(np.float64), crop)
    minus = _forward64(image[0], boxes - h * tangent.astype(np.float64), crop)
    numeric = (plus - minus) / (2 * h)
    numeric = np.where(np.isnan(plus) & np.isnan(minus), 0.0, numeric)
    jvp = cropgrad.crop_and_resize_jvp_boxes(image, boxes, [0] * n, tangent, crop)
    # Compare where every sample stays well inside one pixel cell (or well
    # outside the image): there the forward op is bilinear in the
    # coordinates, whose second-order term the central difference cancels.
    margin = 1e-3
    rows = _positions(boxes[:, [0, 2]], height, crop[0])
    cols = _positions(boxes[:, [1, 3]], width, crop[1])

    def clear(p, size):
        frac = p - np.floor(p)
        inner = (
            (p > margin)
            & (p < size - 1 - margin)
            & (frac > margin)
            & (frac < 1 - margin)
        )
        return inner | (p < -margin) | (p > size - 1 + margin)

    ok = clear(rows, height)[:, :, None] & clear(cols, width)[:, None, :]
    ok = np.broadcast_to(ok[..., None], jvp.shape)
    assert ok.mean() > 0.5
    # The JVP's float32 coordinates differ from the float64 ones by at most
    # about 16 roundings of a value below n = max(height, width), i.e.
    # 16 * n * U pixels; a slope changes by at most 4 * max|pixel| per pixel
    # of its lerp, and a rate is at most 2 * n * max|tangent|.  With the
    # float32 roundings of the slopes and rates (a few U each), an error of
    # at most 2 * (64 * n * U * max|pixel| * 2 * n * max|t|
    # + 4 * max|pixel| * 8 * n * U * max|t|) <= 256 * n**2 * U * max|pixel|
    # * max|t|.  The central difference's own error is below 1e-9 here.
    size = max(height, width)
    tol = 256 * size**2 * U * np.abs(image).max() * np.abs(tangent).max() + 1e-9
    np.testing.assert_allclose(jvp[ok], numeric[ok], rtol=0, atol=tol)
    assert np.abs(numeric[ok]).max() > 100 * tol


# --------------------------------------------------------------------------
# Threads, non-finite values, out=, empty problems


def test_same_bits_for_every_thread_count():
    rng = np.random.default_rng(21)
    image, boxes, box_ind, tangent, crop = _problem(
        rng, np.float32, height=31, width=17, depth=7, num_boxes=41, crop=(13, 11)
    )
    image[0, 3, 4, 1] = np.nan
    image[1, 5, 2, 0] = np.inf
    tangent[4, 1] = np.inf
    tangent[5, 2] = np.nan
    for data_format in ("NHWC", "NCHW"):
        first = _jvp(image, boxes, box_ind, tangent, crop, data_format, num_threads=1)
        assert np.isnan(first).any() and np.isinf(first).any()
        for threads in range(2, 8):
            out = _jvp_on_team(
                threads, image, boxes, box_ind, tangent, crop, data_format
            )
            assert out.tobytes() == first.tobytes(), (data_format, threads)


def test_nonfinite_tangents_propagate():
    image = np.arange(12, dtype=np.float32).reshape(1, 3, 4, 1)
    boxes = [[0.1, 0.1, 0.9, 0.9], [0.1, 0.1, 0.9, 0.9]]
    tangent = [[np.inf, 0, 0, 0], [np.nan, 0, 0, 0]]
    out = cropgrad.crop_and_resize_jvp_boxes(image, boxes, [0, 0], tangent, [3, 3])
    # inf times a factor of 0 (the last crop row's y1 factor) is NaN
    assert np.isinf(out[0, 0]).all() and np.isnan(out[0, 2]).all()
    assert np.isnan(out[1, :2]).all()
    # beyond float32: an infinity, as boxes are converted
    big = cropgrad.crop_and_resize_jvp_boxes(
        image, boxes[:1], [0], [[1e300, 0, 0, 0]], [3, 3]
    )
    assert np.isinf(big[0, 0]).all()


@pytest.mark.parametrize("data_format", ["NHWC", "NCHW"])
def test_out_is_written_and_returned(data_format):
    rng = np.random.default_rng(2)
    image, boxes, box_ind, tangent, crop = _problem(rng)
    if data_format == "NCHW":
        image = _nchw(image)
    expected = cropgrad.crop_and_resize_jvp_boxes(
        image, boxes, box_ind, tangent, crop, data_format=data_format
    )
    out = np.full(expected.shape, 1234.5, np.float32)
    got = cropgrad.crop_and_resize_jvp_boxes(
        image, boxes, box_ind, tangent, crop, out=out, data_format=data_format
    )
    assert got is out
    assert_same_bits(out, expected)
    assert np.any(expected == 0)  # samples outside were written too


def test_out_must_not_alias_the_tangent():
    rng = np.random.default_rng(2)
    image, boxes, box_ind, _, crop = _problem(rng, num_boxes=6, crop=(4, 3), depth=3)
    out = np.zeros((6, 4, 3, 3), np.float32)
    tangent = out.reshape(-1)[:24].reshape(6, 4)
    with pytest.raises(ValueError, match="out"):
        cropgrad.crop_and_resize_jvp_boxes(
            image, boxes, box_ind, tangent, crop, out=out
        )
    assert np.all(out == 0)


@pytest.mark.parametrize("data_format", ["NHWC", "NCHW"])
def test_empty_problems(data_format):
    image = np.ones((2, 4, 5, 3), np.float32)
    out = cropgrad.crop_and_resize_jvp_boxes(
        image, np.zeros((0, 4)), [], np.zeros((0, 4)), [3, 2], data_format=data_format
    )
    # depth is the image's axis 1 in NCHW (4 here), axis 3 in NHWC (3)
    assert out.shape == ((0, 4, 3, 2) if data_format == "NCHW" else (0, 3, 2, 3))
    no_depth = np.ones((2, 0, 4, 5) if data_format == "NCHW" else (2, 4, 5, 0))
    out = cropgrad.crop_and_resize_jvp_boxes(
        no_depth, [[0, 0, 1, 1]], [1], [[1, 1, 1, 1]], [3, 2], data_format=data_format
    )
    assert out.size == 0 and out.dtype == np.float32


# --------------------------------------------------------------------------
# Errors (the whole table of bad arguments is in test_validation.py)


def _args():
    rng = np.random.default_rng(4)
    image, boxes, box_ind, tangent, crop = _problem(rng, num_boxes=3)
    return dict(
        image=image, boxes=boxes, box_ind=box_ind, boxes_tangent=tangent, crop_size=crop
    )


@pytest.mark.parametrize(
    "tangent",
    [np.zeros((3, 3)), np.zeros((4, 4)), np.zeros(12), np.zeros((3, 4, 1))],
    ids=["3-columns", "4-rows", "1-d", "3-d"],
)
def test_bad_tangent_shape(tangent):
    with pytest.raises(
        ValueError,
        match=r"boxes_tangent must have the shape of "
        r"boxes \(3, 4\), got shape",
    ):
        cropgrad.crop_and_resize_jvp_boxes(**dict(_args(), boxes_tangent=tangent))


def test_bad_tangent_dtype():
    with pytest.raises(TypeError, match="boxes_tangent must hold real numbers"):
        cropgrad.crop_and_resize_jvp_boxes(
            **dict(_args(), boxes_tangent=np.zeros((3, 4), complex))
        )


def test_nonfinite_box_is_refused():
    args = _args()
    args["boxes"][2, 1] = np.inf
    with pytest.raises(ValueError, match=r"boxes must be finite: boxes\[2\] = "):
        cropgrad.crop_and_resize_jvp_boxes(**args)


def test_box_ind_out_of_range_is_refused():
    args = _args()
    args["box_ind"] = [0, 2, 1]
    with pytest.raises(IndexError, match=r"\[0, 2\): box_ind\[1\] = 2"):
        cropgrad.crop_and_resize_jvp_boxes(**args)


def test_nearest_is_refused_as_by_the_boxes_gradient():
    with pytest.raises(ValueError) as jvp:
        cropgrad.crop_and_resize_jvp_boxes(**_args(), method="nearest")
    with pytest.raises(ValueError) as vjp:
        cropgrad.crop_and_resize_grad_boxes(
            np.zeros((3, 4, 3, 3), np.float32),
            _args()["image"],
            _args()["boxes"],
            _args()["box_ind"],
            method="nearest",
        )
    assert (
        str(jvp.value)
        == str(vjp.value)
        == ("method must be one of 'bilinear', got 'nearest'")
    )


def test_bad_shapes_are_refused():
    args = _args()
    with pytest.raises(ValueError, match="image must be 4-D"):
        cropgrad.crop_and_resize_jvp_boxes(**dict(args, image=args["image"][0]))
    with pytest.raises(ValueError, match="boxes must be 2-D with 4 columns"):
        cropgrad.crop_and_resize_jvp_boxes(**dict(args, boxes=np.zeros((3, 3))))
    with pytest.raises(ValueError, match="box_ind has incompatible shape"):
        cropgrad.crop_and_resize_jvp_boxes(**dict(args, box_ind=[0, 1]))
    with pytest.raises(ValueError, match="crop dimensions must be positive"):
        cropgrad.crop_and_resize_jvp_boxes(**dict(args, crop_size=[0, 3]))
    with pytest.raises(ValueError, match="image dimensions must be positive"):
        cropgrad.crop_and_resize_jvp_boxes(
            **dict(args, image=np.zeros((2, 0, 3, 3), np.float32))
        )
