"""crop_and_resize and crop_and_resize_grad_boxes: TensorFlow's bits, and
checks of the three ops against each other (adjoint identity, finite
differences)."""

import numpy as np
import pytest
from _helpers import (
    IMAGE_DTYPES,
    as_image_dtype,
    assert_same_bits,
    assert_same_values,
    crop_fixture,
    fixture_comparison,
    grad_boxes_fixture,
    load_cases,
    starting_teams,
    team_of,
)

import cropgrad
from cropgrad import _reference as reference

FORWARD = load_cases("forward.npz")
GRAD_BOXES = load_cases("grad_boxes.npz")


def boxes_team_limit(case):
    """The largest team of the boxes gradient's tasks (at most 4 here):
    groups of four boxes, or one box each for one-row or one-column crops."""
    num_boxes, crop_h, crop_w = case["grads"].shape[:3]
    tasks = num_boxes if 1 in (crop_h, crop_w) else -(-num_boxes // 4)
    return min(tasks, 4)


# The forward op's tasks are the crop rows of every box: each case has
# enough for a team of 4.
@pytest.mark.parametrize("name", sorted(FORWARD))
@pytest.mark.parametrize("num_threads", [1, 2, 3, 4])
def test_forward_tensorflow_bits(name, num_threads):
    case = FORWARD[name]
    with starting_teams():
        out, team = team_of(
            lambda: crop_fixture(case, case["image"], num_threads=num_threads)
        )
    assert team == num_threads
    fixture_comparison(name)(out, case["out"], name)


@pytest.mark.parametrize("name", sorted(FORWARD))
def test_forward_raw_op(name):
    case = FORWARD[name]
    out = cropgrad.raw_ops.CropAndResize(
        image=case["image"],
        boxes=case["boxes"],
        box_ind=case["box_ind"],
        crop_size=case["crop_size"],
        method=str(case["method"]),
        extrapolation_value=case["extrapolation_value"],
        name="crop",
    )
    fixture_comparison(name)(out, case["out"], name)


@pytest.mark.parametrize(
    "name, num_threads",
    [
        (name, n)
        for name in sorted(GRAD_BOXES)
        for n in (1, 2, 3, 4)
        if n <= boxes_team_limit(GRAD_BOXES[name])
    ],
)
def test_grad_boxes_tensorflow_bits(name, num_threads):
    case = GRAD_BOXES[name]
    with starting_teams():
        out, team = team_of(
            lambda: grad_boxes_fixture(
                case, case["grads"], case["image"], num_threads=num_threads
            )
        )
    assert team == num_threads
    fixture_comparison(name)(out, case["out"], name)
    raw = cropgrad.raw_ops.CropAndResizeGradBoxes(
        grads=case["grads"],
        image=case["image"],
        boxes=case["boxes"],
        box_ind=case["box_ind"],
    )
    fixture_comparison(name)(raw, case["out"], name)


def _random_case(rng, dtype, num_boxes=9, depth=3, crop=(4, 6), spread=0.3):
    """Image of `dtype` (NaN and infinite pixels in float ones), boxes partly
    outside, flipped, on pixel centres, a few huge; grads with NaN and
    infinities."""
    image = as_image_dtype(rng.standard_normal((2, 9, 7, depth)) * 40, dtype)
    if np.dtype(dtype).kind == "f":
        image.flat[::23] = np.inf
        image.flat[5::31] = -np.inf
        image.flat[11::37] = np.nan
    boxes = rng.uniform(-spread, 1 + spread, (num_boxes, 4)).astype(np.float32)
    boxes[0] = [0.0, 0.0, 1.0, 1.0]  # every sample on a pixel centre
    boxes[1] = [0.9, 0.8, 0.1, 0.2]  # flipped
    boxes[2] = [-3e38, 0.2, 3e38, 0.7]  # coordinates that overflow
    box_ind = rng.integers(0, 2, num_boxes)
    grads = rng.standard_normal((num_boxes, *crop, depth)).astype(np.float32)
    grads.flat[::41] = np.inf
    grads.flat[7::43] = -np.inf
    grads.flat[3::47] = np.nan
    return image, boxes, box_ind, grads


def _nchw(a):
    return np.ascontiguousarray(np.asarray(a).transpose(0, 3, 1, 2))


@pytest.mark.parametrize("dtype", IMAGE_DTYPES, ids=lambda t: np.dtype(t).name)
@pytest.mark.parametrize("method", ["bilinear", "nearest"])
@pytest.mark.parametrize("data_format", ["NHWC", "NCHW"])
def test_forward_matches_reference_bits(dtype, method, data_format):
    # The reference's float32 arithmetic, bit for bit, for every image
    # dtype, a NaN extrapolation value, on 1 to 3 threads.  Where NaNs meet,
    # which one a sum keeps is the compiler's choice (assert_same_values),
    # but the same for every thread count (the bits of one thread).
    rng = np.random.default_rng([4, np.dtype(dtype).num, len(method)])
    image, boxes, box_ind, _ = _random_case(rng, dtype)
    for extrapolation in (-2.5, np.nan):
        with np.errstate(invalid="ignore"):
            expected = reference.crop_and_resize(
                image, boxes, box_ind, (4, 6), method, extrapolation, exact=True
            )
        if data_format == "NCHW":
            image_in, expected = _nchw(image), _nchw(expected)
        else:
            image_in = image
        first = None
        for threads in (1, 2, 3):
            with starting_teams():
                out, team = team_of(
                    lambda t=threads: cropgrad.crop_and_resize(
                        image_in,
                        boxes,
                        box_ind,
                        (4, 6),
                        method,
                        extrapolation,
                        num_threads=t,
                        data_format=data_format,
                    )
                )
            # NCHW's tasks are images (two here).
            assert team == (min(threads, 2) if data_format == "NCHW" else threads)
            assert_same_values(out, expected, (extrapolation, threads))
            first = out if first is None else first
            assert_same_bits(out, first, (extrapolation, threads))


@pytest.mark.parametrize("dtype", IMAGE_DTYPES, ids=lambda t: np.dtype(t).name)
@pytest.mark.parametrize("crop", [(4, 6), (1, 5), (3, 1), (1, 1)])
@pytest.mark.parametrize("data_format", ["NHWC", "NCHW"])
def test_grad_boxes_matches_reference_bits(dtype, crop, data_format):
    # Four float32 sums per box in the serial order (the reference's exact
    # arithmetic), bit for bit, on 1 to 3 threads, NaN and infinities in
    # the pixels and gradients included (NaN bits: those of one thread).
    rng = np.random.default_rng([5, np.dtype(dtype).num, *crop])
    image, boxes, box_ind, grads = _random_case(rng, dtype, num_boxes=13, crop=crop)
    with np.errstate(invalid="ignore", over="ignore"):
        expected = reference.grad_boxes(grads, image, boxes, box_ind, exact=True)
    assert np.isfinite(expected).any() and not np.isfinite(expected).all()
    if data_format == "NCHW":
        image, grads = _nchw(image), _nchw(grads)
    first = None
    for threads in (1, 2, 3):
        with starting_teams():
            out, team = team_of(
                lambda t=threads: cropgrad.crop_and_resize_grad_boxes(
                    grads, image, boxes, box_ind, num_threads=t, data_format=data_format
                )
            )
        assert team == threads
        assert_same_values(out, expected, threads)
        first = out if first is None else first
        assert_same_bits(out, first, threads)


def _random_geometry(rng, num_boxes, inside=False):
    lo, hi = (0.05, 0.95) if inside else (-0.3, 1.3)
    boxes = rng.uniform(lo, hi, (num_boxes, 4)).astype(np.float32)
    return boxes


@pytest.mark.parametrize("method", ["bilinear", "nearest"])
@pytest.mark.parametrize("crop", [(5, 4), (1, 3), (1, 1)])
def test_adjoint_identity(method, crop):
    # <crop_and_resize(image), g> == <image, crop_and_resize_grad_image(g)>:
    # the image gradient is the transpose of the forward op.
    rng = np.random.default_rng(4)
    image = rng.standard_normal((3, 11, 8, 4))
    boxes = _random_geometry(rng, 9)
    box_ind = rng.integers(0, 3, 9)
    g = rng.standard_normal((9, *crop, 4))
    forward = cropgrad.crop_and_resize(
        image.astype(np.float32), boxes, box_ind, crop, method
    )
    backward = cropgrad.crop_and_resize_grad_image(
        g.astype(np.float32), boxes, box_ind, image.shape, np.float64, method
    )
    lhs = np.sum(forward.astype(np.float64) * g.astype(np.float32))
    rhs = np.sum(image.astype(np.float32) * backward)
    scale = np.sum(np.abs(forward) * np.abs(g)) + 1.0
    assert abs(lhs - rhs) <= 1e-5 * scale


def test_grad_boxes_matches_finite_differences():
    rng = np.random.default_rng(5)
    image = rng.standard_normal((2, 12, 10, 3))
    boxes = rng.uniform(0.1, 0.9, (6, 4)).astype(np.float32)
    box_ind = np.array([0, 1, 0, 1, 1, 0])
    crop = (5, 6)
    g = rng.standard_normal((6, *crop, 3)).astype(np.float32)
    analytic = cropgrad.crop_and_resize_grad_boxes(g, image, boxes, box_ind)

    def loss(b):
        # The forward op in float64 on the same samples (the reference).
        out = reference.crop_and_resize(image, b, box_ind, crop)
        return np.sum(out * g)

    h = 1e-3
    numeric = np.zeros((6, 4))
    for i in range(6):
        for k in range(4):
            plus = boxes.astype(np.float64).copy()
            minus = plus.copy()
            plus[i, k] += h
            minus[i, k] -= h
            numeric[i, k] = (loss(plus) - loss(minus)) / (2 * h)
    # Bilinear interpolation is piecewise linear: a step of 1e-3 crosses a
    # pixel boundary only rarely, and then the error is O(h).
    np.testing.assert_allclose(analytic, numeric, rtol=2e-2, atol=2e-2)
    assert np.mean(np.abs(analytic - numeric) < 1e-3 * (1 + np.abs(numeric))) > 0.8


@pytest.mark.parametrize(
    "dtype", [np.uint8, np.int16, np.int64, np.float16, np.float64]
)
def test_image_dtypes_are_read_as_float32(dtype):
    rng = np.random.default_rng(6)
    image = rng.integers(0, 100, (1, 6, 5, 2)).astype(dtype)
    boxes = _random_geometry(rng, 4, inside=True)
    as_float = cropgrad.crop_and_resize(
        image.astype(np.float32), boxes, [0] * 4, (3, 3)
    )
    assert_same_bits(cropgrad.crop_and_resize(image, boxes, [0] * 4, (3, 3)), as_float)
    g = rng.standard_normal((4, 3, 3, 2)).astype(np.float32)
    assert_same_bits(
        cropgrad.crop_and_resize_grad_boxes(g, image, boxes, [0] * 4),
        cropgrad.crop_and_resize_grad_boxes(
            g, image.astype(np.float32), boxes, [0] * 4
        ),
    )


@pytest.mark.parametrize("data_format", ["NHWC", "NCHW"])
@pytest.mark.parametrize("dtype", [np.float32, np.uint8])
def test_grad_boxes_of_a_group_are_each_box_alone(data_format, dtype):
    # A task sums several boxes together, padding the ones with fewer
    # samples inside the image; the bits must be those of each box alone
    # (one box per call), NaN, infinities and signed zeros included.
    rng = np.random.default_rng(11)
    n = 23
    image = as_image_dtype(rng.standard_normal((2, 17, 13, 6)) * 40, dtype)
    boxes = _random_geometry(rng, n)  # many partly outside the image
    boxes[3] = [0.2, 0.3, 0.2, 0.9]  # one crop row inside, all on one row
    boxes[4] = [1.5, 1.5, 2.0, 2.0]  # wholly outside: no terms at all
    box_ind = rng.integers(0, 2, n)
    grads = rng.standard_normal((n, 5, 4, 6)).astype(np.float32)
    grads[1, 2, 1, 3] = np.nan
    grads[6, 0, 0, 0] = np.inf
    grads[7] = -0.0
    grads[9, 1, 2, 2] = -np.inf
    if data_format == "NCHW":
        image = np.ascontiguousarray(image.transpose(0, 3, 1, 2))
        grads = np.ascontiguousarray(grads.transpose(0, 3, 1, 2))
    together = cropgrad.crop_and_resize_grad_boxes(
        grads, image, boxes, box_ind, data_format=data_format
    )
    alone = np.concatenate(
        [
            cropgrad.crop_and_resize_grad_boxes(
                grads[i : i + 1],
                image,
                boxes[i : i + 1],
                box_ind[i : i + 1],
                data_format=data_format,
            )
            for i in range(n)
        ]
    )
    assert_same_bits(together, alone)
    assert np.isnan(together[1]).any() and np.isinf(together[6]).any()


def test_same_bits_for_any_thread_count():
    rng = np.random.default_rng(8)
    image = rng.standard_normal((2, 40, 30, 16)).astype(np.float32)
    boxes = _random_geometry(rng, 64)
    box_ind = rng.integers(0, 2, 64)
    g = rng.standard_normal((64, 9, 7, 16)).astype(np.float32)
    # Work enough for a team at the default serial threshold.
    fwd, bwd = [], []
    for n in (1, 2, 3, 4):
        out, team = team_of(
            lambda n=n: cropgrad.crop_and_resize(
                image, boxes, box_ind, (9, 7), num_threads=n
            )
        )
        assert team == n
        fwd.append(out)
        out, team = team_of(
            lambda n=n: cropgrad.crop_and_resize_grad_boxes(
                g, image, boxes, box_ind, num_threads=n
            )
        )
        assert team == n
        bwd.append(out)
    for other in fwd[1:]:
        assert_same_bits(other, fwd[0])
    for other in bwd[1:]:
        assert_same_bits(other, bwd[0])


def test_forward_out_and_empty():
    image = np.ones((1, 4, 4, 2), np.float32)
    out = np.full((2, 3, 3, 2), np.nan, np.float32)
    result = cropgrad.crop_and_resize(
        image,
        [[0, 0, 1, 1], [2, 2, 3, 3]],
        [0, 0],
        (3, 3),
        extrapolation_value=7,
        out=out,
    )
    assert result is out
    assert np.all(out[0] == 1) and np.all(out[1] == 7)
    empty = cropgrad.crop_and_resize(image, np.zeros((0, 4)), [], (3, 3))
    assert empty.shape == (0, 3, 3, 2)
    assert cropgrad.crop_and_resize_grad_boxes(
        np.zeros((0, 3, 3, 2)), image, np.zeros((0, 4)), []
    ).shape == (0, 4)


def test_grad_boxes_is_bilinear_only():
    with pytest.raises(ValueError, match="method"):
        cropgrad.crop_and_resize_grad_boxes(
            np.ones((1, 2, 2, 1)),
            np.ones((1, 3, 3, 1)),
            [[0, 0, 1, 1]],
            [0],
            method="nearest",
        )


@pytest.mark.parametrize("op", ["forward", "grad_boxes"])
def test_non_finite_boxes_are_an_error(op):
    image = np.ones((1, 3, 3, 1), np.float32)
    boxes = [[0, 0, 1, 1], [0, np.nan, 1, 1]]
    with pytest.raises(ValueError, match=r"boxes\[1\]"):
        if op == "forward":
            cropgrad.crop_and_resize(image, boxes, [0, 0], (2, 2))
        else:
            cropgrad.crop_and_resize_grad_boxes(
                np.ones((2, 2, 2, 1)), image, boxes, [0, 0]
            )


def test_whole_pixel_samples_give_no_boxes_gradient():
    # docs/semantics.md, "Whole pixels give no slope": a crop the size of
    # the image over the whole image samples every pixel, where TensorFlow's
    # floor and ceil corners coincide.
    rng = np.random.default_rng(5)
    image = rng.standard_normal((1, 33, 33, 2)).astype(np.float32)
    grads = rng.standard_normal((1, 33, 33, 2)).astype(np.float32)
    on_pixels = cropgrad.crop_and_resize_grad_boxes(grads, image, [[0, 0, 1, 1]], [0])
    np.testing.assert_array_equal(on_pixels, np.zeros((1, 4), np.float32))
    jvp = cropgrad.crop_and_resize_jvp_boxes(
        image, [[0, 0, 1, 1]], [0], [[1.0, -2.0, 3.0, 0.5]], [33, 33]
    )
    np.testing.assert_array_equal(jvp, np.zeros_like(jvp))
    # Between pixels, every coordinate moves the crops.
    between = cropgrad.crop_and_resize_grad_boxes(
        grads, image, [[0.251, 0.251, 0.751, 0.751]], [0]
    )
    assert (between != 0).all()
    # RoIAlign's corners give a whole-pixel sample the next cell's slope: a
    # box whose samples all fall on pixel centres (aligned=False, one
    # sample per bin: x1 + 0.5 + bin) still has a gradient.
    nchw = np.ascontiguousarray(image.transpose(0, 3, 1, 2))
    roi = cropgrad.roi_align_grad_boxes(
        np.ones((1, 2, 8, 8), np.float32),
        nchw,
        [[3.5, 3.5, 11.5, 11.5]],
        [0],
        sampling_ratio=1,
    )
    assert (roi != 0).all()
