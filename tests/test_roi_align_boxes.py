"""RoIAlign's boxes derivatives: the reference's bits, calculus, transposes.

torchvision has no boxes gradient, so the definition is cropgrad's
(docs/semantics.md): the NumPy reference (`cropgrad._reference.roi_align`)
in its exact arithmetic gives the kernels' bits on every thread count and
in both layouts; its float64 version agrees with central differences of
the float64 forward where the sampling is smooth, and the gradient is the
JVP's transpose.
"""

import numpy as np
import pytest
from _helpers import assert_same_bits, starting_teams

import cropgrad
from cropgrad._reference import roi_align as ref

LAYOUTS = ("NCHW", "NHWC")


def _to(layout, a):
    return np.ascontiguousarray(a.transpose(0, 2, 3, 1)) if layout == "NHWC" else a


def _back(layout, a):
    return a.transpose(0, 3, 1, 2) if layout == "NHWC" else a


def _problem(rng, dtype, channels, num_boxes=9, batch=2, size=(13, 17), output=(3, 2)):
    image = rng.standard_normal((batch, channels, *size)).astype(dtype)
    lo = rng.uniform(-10, 60, (num_boxes, 2))
    hi = lo + rng.uniform(-4, 40, (num_boxes, 2))
    boxes = np.concatenate([lo, hi], axis=1)
    boxes[::4] = np.round(boxes[::4])  # samples on whole pixels
    boxes[1] = [5, 5, 5.3, 5.2]  # smaller than a pixel: held at one pixel
    box_ind = rng.integers(0, batch, num_boxes)
    grads = rng.standard_normal((num_boxes, channels, *output)).astype(dtype)
    tangent = rng.standard_normal((num_boxes, 4)).astype(dtype)
    return image, boxes.astype(dtype), box_ind, grads, tangent


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("channels", [1, 8, 13])
@pytest.mark.parametrize(
    "sampling_ratio, aligned", [(-1, False), (0, True), (2, False)]
)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_kernels_give_the_references_bits(
    dtype, channels, sampling_ratio, aligned, layout
):
    rng = np.random.default_rng([channels, sampling_ratio + 2, aligned])
    image, boxes, box_ind, grads, tangent = _problem(rng, dtype, channels)
    options = dict(spatial_scale=0.5, sampling_ratio=sampling_ratio, aligned=aligned)
    grad = ref.roi_align_grad_boxes(grads, image, boxes, box_ind, exact=True, **options)
    jvp = ref.roi_align_jvp_boxes(
        image, boxes, box_ind, tangent, (3, 2), exact=True, **options
    )
    for threads in (1, 2, 3):
        with starting_teams() as parallel:
            out = cropgrad.roi_align_grad_boxes(
                _to(layout, grads),
                _to(layout, image),
                boxes,
                box_ind,
                data_format=layout,
                num_threads=threads,
                **options,
            )
            assert parallel.last_team() == threads
            assert_same_bits(out, grad, (threads, layout))
            out = cropgrad.roi_align_jvp_boxes(
                _to(layout, image),
                boxes,
                box_ind,
                tangent,
                (3, 2),
                data_format=layout,
                num_threads=threads,
                **options,
            )
            assert parallel.last_team() == threads
            assert_same_bits(_back(layout, out), jvp, (threads, layout))


@pytest.mark.parametrize("sampling_ratio, aligned", [(-1, False), (2, True)])
def test_the_gradient_is_the_jvps_transpose(sampling_ratio, aligned):
    rng = np.random.default_rng([3, sampling_ratio + 2, aligned])
    image, boxes, box_ind, grads, tangent = _problem(rng, np.float64, 5)
    options = dict(spatial_scale=0.5, sampling_ratio=sampling_ratio, aligned=aligned)
    grad = cropgrad.roi_align_grad_boxes(grads, image, boxes, box_ind, **options)
    jvp = cropgrad.roi_align_jvp_boxes(
        image, boxes, box_ind, tangent, (3, 2), **options
    )
    lhs, rhs = np.sum(jvp * grads), np.sum(tangent * grad)
    # Float64 sums of a few thousand terms in two orders.
    scale = np.sum(np.abs(jvp * grads)) + np.sum(np.abs(tangent * grad))
    assert abs(lhs - rhs) <= 1e-12 * scale
    assert abs(lhs) > 1e-3 * scale  # not a trivial identity


def _smooth_boxes(rng, n, size, pooled, scale, margin=1e-3):
    """Boxes whose samples (sampling_ratio 2) all stay `margin` away from
    pixel boundaries and clamps: the forward is bilinear, smooth, around
    them."""
    boxes = []
    while len(boxes) < n:
        lo = rng.uniform(0, 30, 2)
        box = np.concatenate([lo, lo + rng.uniform(6, 20, 2)])
        good = True
        for axis, extent in ((1, size[0]), (0, size[1])):
            a = ref.axis_samples(
                box[axis], box[axis + 2], extent, pooled, scale, 2, True, np.float64
            )
            for tap in (t for row in a.taps for t in row):
                c = float(tap.coord)
                if (
                    not (margin < c < extent - 1 - margin)
                    or min(c % 1, 1 - c % 1) < margin
                ):
                    good = False
        if good:
            boxes.append(box)
    return np.array(boxes)


def test_the_jvp_is_the_derivative_where_the_sampling_is_smooth():
    rng = np.random.default_rng(5)
    size, pooled, scale = (21, 25), 3, 0.5
    image = rng.standard_normal((1, 4, *size))
    boxes = _smooth_boxes(rng, 6, size, pooled, scale)
    box_ind = np.zeros(len(boxes), np.int64)
    options = dict(spatial_scale=scale, sampling_ratio=2, aligned=True)
    worst = 0.0
    for _ in range(4):
        tangent = rng.standard_normal(boxes.shape)
        jvp = cropgrad.roi_align_jvp_boxes(
            image, boxes, box_ind, tangent, pooled, **options
        )
        h = 1e-6
        ahead = cropgrad.roi_align(
            image, boxes + h * tangent, box_ind, pooled, **options
        )
        behind = cropgrad.roi_align(
            image, boxes - h * tangent, box_ind, pooled, **options
        )
        central = (ahead - behind) / (2 * h)
        # Bilinear between samples: the differences' error is rounding,
        # about eps / h of the values' scale.
        error = np.abs(central - jvp).max() / np.abs(jvp).max()
        worst = max(worst, error)
    assert worst < 1e-7


def test_held_coordinates_do_not_move():
    image = np.random.default_rng(7).standard_normal((1, 2, 8, 8))
    grads = np.ones((3, 2, 2, 2))
    boxes = np.array(
        [
            [-30.0, -30.0, -20.0, -20.0],  # wholly outside: no sample reads
            [2.2, 2.1, 2.5, 2.6],  # smaller than a pixel, not aligned
            [-1.0, 1.5, 0.0, 5.5],  # x samples in [-1, 0]: clamped at 0
        ]
    )
    grad = cropgrad.roi_align_grad_boxes(grads, image, boxes, [0, 0, 0])
    assert not grad[0].any()
    # Held at one pixel: the box only moves, so x2 and y2 have no effect.
    assert grad[1, 2] == 0 and grad[1, 3] == 0 and grad[1, :2].any()
    assert grad[2, 0] == 0 and grad[2, 2] == 0 and grad[2, 1] != 0


def test_whole_pixel_samples_take_the_slope_of_the_cell_after_them():
    # One sample at x = 2 exactly (torchvision's corners: low = 2, high =
    # 3): the derivative from the right, not zero.
    image = np.zeros((1, 1, 4, 6))
    image[0, 0, :, 3] = 5.0  # slope 5 between columns 2 and 3, -5 after
    box = np.array([[1.5, 1.0, 2.5, 2.0]])  # x samples: 2.0 (ratio 1)
    grad = cropgrad.roi_align_grad_boxes(
        np.ones((1, 1, 1, 1)), image, box, [0], sampling_ratio=1
    )
    # dc/dx1 = dc/dx2 = 1/2 with one sample in the bin's middle.
    np.testing.assert_array_equal(grad[0, [0, 2]], [2.5, 2.5])
    right = cropgrad.roi_align(
        image, box + [[1e-3, 0, 1e-3, 0]], [0], 1, sampling_ratio=1
    )
    assert right[0, 0, 0, 0] > 0  # moving right goes up the slope


def test_a_nonfinite_tangent_propagates():
    rng = np.random.default_rng(9)
    image, boxes, box_ind, _, tangent = _problem(rng, np.float32, 3)
    tangent[2] = [np.inf, 0, 0, 0]
    tangent[3] = [np.nan, np.nan, np.nan, np.nan]
    jvp = cropgrad.roi_align_jvp_boxes(
        image, boxes, box_ind, tangent, (3, 2), spatial_scale=0.5
    )
    assert np.isnan(jvp[3]).any() or not jvp[3].any()
    finite = np.ones(len(boxes), bool)
    finite[[2, 3]] = False
    assert np.isfinite(jvp[finite]).all()
