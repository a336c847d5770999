"""The RoIAlign NumPy reference against torchvision's bits and against calculus.

The reference (``cropgrad/_reference/roi_align``) is written from
torchvision's arithmetic, independently of any kernel; the kernels' tests
will trust it.  Here it earns that trust: in its exact mode it reproduces
every committed torchvision fixture (``tests/data/roi_align.npz``) bit for
bit, forward and image gradient, float32 and float64; where cropgrad
defines what torchvision leaves undefined it differs exactly there; and
its boxes derivatives agree with finite differences of its float64 forward
and are each other's transpose.
"""

import doctest

import numpy as np
import pytest
from _helpers import (
    ROI_SPECIAL,
    assert_nan_places,
    assert_pixel0_unread,
    assert_same_bits,
    load_cases,
    roi_case_names,
    roi_case_options,
)

from cropgrad._reference import roi_align as ref

CASES = load_cases("roi_align.npz")


def _names(kind, exclude=()):
    return roi_case_names(CASES, kind, exclude)


def _forward(case, **kw):
    return ref.roi_align(
        case["image"],
        case["boxes"],
        case["box_ind"],
        tuple(case["output_size"]),
        **roi_case_options(case),
        **kw,
    )


def _grad_image(case):
    return ref.roi_align_grad_image(
        case["grads"],
        case["boxes"],
        case["box_ind"],
        case["image"].shape,
        **roi_case_options(case),
    )


def test_fixture_file_covers_the_cases():
    kinds = [str(c["kind"]) for c in CASES.values()]
    assert kinds.count("roi_align") >= 60
    assert kinds.count("error") >= 2 and kinds.count("multi_scale") == 1
    dtypes = {c["image"].dtype.name for c in CASES.values() if "image" in c}
    assert dtypes == {"float32", "float64"}


@pytest.mark.parametrize("name", _names("roi_align", ROI_SPECIAL))
def test_forward_is_torchvision_bits(name):
    case = CASES[name]
    assert_same_bits(_forward(case), case["out"], name)


@pytest.mark.parametrize("name", _names("roi_align"))
def test_grad_image_is_torchvision_bits(name):
    case = CASES[name]
    assert_same_bits(_grad_image(case), case["grad_image"], name)


def test_nonfinite_pixels_read_as_torchvision_reads_them():
    # Inside samples read all four corners: a zero weight times an infinite
    # pixel is NaN in both.  NaN payloads may differ; the places may not.
    case = CASES["special_values_f32"]
    assert_nan_places(_forward(case), case["out"])


def test_outside_samples_read_no_pixel():
    # torchvision adds 0 * pixel 0 for a sample outside the image, NaN when
    # pixel 0 is NaN or infinite; the reference reads nothing for it.
    case = CASES["nan_pixel0_f32"]
    assert "0 * pixel 0" in str(case["note"])
    assert_pixel0_unread(_forward(case), case["out"])


@pytest.mark.parametrize("name", _names("error"))
def test_where_torchvision_raises_the_output_is_zero(name):
    # An aligned box flipped along one axis with the adaptive grid: a
    # negative grid count, which torchvision turns into a vector size.
    case = CASES[name]
    assert "std::vector" in str(case["error"])
    out = _forward(case)
    assert out.shape == (1, 2, 2, 3) and not out.any()
    grads = np.ones_like(out)
    grad = ref.roi_align_grad_image(
        grads,
        case["boxes"],
        case["box_ind"],
        case["image"].shape,
        **roi_case_options(case),
    )
    assert not grad.any()


def test_multi_scale_is_torchvision_bits():
    case = CASES["multi_scale_fpn_f32"]
    names = ("p2", "p3", "p4")
    features = [case["feature_" + n] for n in names]
    boxes = [case["boxes_0"], case["boxes_1"]]
    out, levels, scales = ref.multi_scale_roi_align(
        features,
        boxes,
        case["image_sizes"],
        tuple(case["output_size"]),
        int(case["sampling_ratio"]),
    )
    np.testing.assert_array_equal(levels, case["levels"])
    np.testing.assert_array_equal(scales, case["scales"])
    assert set(levels.tolist()) == {0, 1, 2}
    assert_same_bits(out, case["out"])
    all_boxes = np.concatenate(boxes)
    box_ind = np.repeat([0, 1], [len(b) for b in boxes])
    for level, (n, scale) in enumerate(zip(names, scales)):
        at = np.flatnonzero(levels == level)
        grad = ref.roi_align_grad_image(
            case["grads"][at],
            all_boxes[at],
            box_ind[at],
            case["feature_" + n].shape,
            scale,
            int(case["sampling_ratio"]),
        )
        assert_same_bits(grad, case["grad_" + n], n)


def test_float32_arithmetic_beats_torchvision_float16():
    # torchvision computes float16 inputs in float16; cropgrad will compute
    # them in float32 and round once.  Against the float64 yardstick of the
    # same float16 inputs, the latter is never less accurate.
    compared = 0
    for name in _names("roi_align", ROI_SPECIAL):
        case = CASES[name]
        if "out_float16" not in case:
            continue
        image16 = case["image"].astype(np.float16)
        boxes = case["boxes"].astype(np.float16).astype(np.float32)
        args = (image16, boxes, case["box_ind"], tuple(case["output_size"]))
        yardstick = ref.roi_align(*args, **roi_case_options(case), exact=False)
        ours = ref.roi_align(*args, **roi_case_options(case)).astype(np.float16)
        ours_err = np.max(np.abs(ours - yardstick), initial=0)
        theirs_err = np.max(np.abs(case["out_float16"] - yardstick), initial=0)
        assert ours_err <= theirs_err, name
        compared += 1
    assert compared >= 55


def test_float64_yardstick_is_close_to_the_exact_bits():
    for name in _names("roi_align", ROI_SPECIAL):
        case = CASES[name]
        approx = _forward(case, exact=False)
        scale = max(1.0, float(np.max(np.abs(approx), initial=0)))
        eps = np.finfo(case["out"].dtype).eps
        assert np.max(np.abs(approx - case["out"]), initial=0) <= 64 * eps * scale


def test_docstring_examples():
    attempted = 0
    for module in (ref, ref.forward, ref.boxes, ref.pyramid):
        result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
        assert result.failed == 0, module.__name__
        attempted += result.attempted
    assert attempted >= 10


# --------------------------------------------------------------------------
# What cropgrad defines where torchvision is undefined


@pytest.mark.parametrize(
    "box",
    [
        [np.nan, 1, 4, 3],
        [1, 1, 4, np.inf],
        [-np.inf, 1, 4, 3],
        [-3e38, 1, 3e38, 3],
    ],
)
@pytest.mark.parametrize("sampling_ratio", [2, -1])
@pytest.mark.parametrize("aligned", [False, True])
def test_nonfinite_samples_are_outside(box, sampling_ratio, aligned):
    # The library will refuse non-finite boxes; its arithmetic, modelled
    # here, treats their samples (and those of overflowing sizes) as outside.
    image = np.arange(42, dtype=np.float32).reshape(1, 1, 6, 7)
    kw = dict(sampling_ratio=sampling_ratio, aligned=aligned)
    assert not ref.roi_align(image, [box], [0], (2, 3), **kw).any()
    grads = np.ones((1, 1, 2, 3), np.float32)
    assert not ref.roi_align_grad_image(grads, [box], [0], image.shape, **kw).any()
    for exact in (False, True):
        assert not ref.roi_align_grad_boxes(
            grads, image, [box], [0], **kw, exact=exact
        ).any()


def test_samples_per_bin_are_bounded():
    # 4096 x 4096 samples per bin are allowed, 4097 x 4097 are not.
    assert ref.MAX_SAMPLES_PER_BIN == 4096**2
    image = np.zeros((1, 1, 4, 4), np.float32)
    with pytest.raises(ValueError, match="samples per bin"):
        ref.roi_align(image, [[0, 0, 5e3, 5e3]], [0], (1, 1))
    with pytest.raises(ValueError, match="samples per bin"):
        ref.roi_align(image, [[0, 0, 1, 1]], [0], (1, 1), sampling_ratio=4097)


def test_box_ind_out_of_range():
    image = np.zeros((2, 1, 4, 4), np.float32)
    with pytest.raises(IndexError, match=r"box_ind\[1\] = 2"):
        ref.roi_align(image, [[0, 0, 1, 1]] * 2, [0, 2], 1)
    with pytest.raises(IndexError, match=r"box_ind\[0\] = -1"):
        ref.roi_align(image, [[0, 0, 1, 1]], [-1], 1)


# --------------------------------------------------------------------------
# The boxes derivatives


def _smooth_problem(seed, aligned, sampling_ratio, spatial_scale, h):
    """A float64 problem whose samples stay in their cells for box moves of h.

    No sample crosses a pixel boundary, a clamp's edge or the edge of the
    sampled range, no size crosses 1 and no adaptive grid changes within
    ``[-h, h]`` on any coordinate: there the forward is smooth in the boxes.
    """
    rng = np.random.default_rng(seed)
    for _ in range(100):
        image = rng.standard_normal((2, 3, 9, 11))
        x1 = rng.uniform(-2, 9, 4)
        y1 = rng.uniform(-2, 7, 4)
        boxes = np.stack(
            [x1, y1, x1 + rng.uniform(0.3, 6, 4), y1 + rng.uniform(0.3, 5, 4)], 1
        )
        boxes /= spatial_scale
        if _stable(boxes, image.shape, aligned, sampling_ratio, spatial_scale, h):
            return image, boxes, np.array([0, 1, 1, 0])
    raise AssertionError("no smooth problem found")


def _taps(boxes, shape, aligned, sampling_ratio, spatial_scale):
    out = []
    for x1, y1, x2, y2 in boxes:
        for lo, hi, size in ((y1, y2, shape[2]), (x1, x2, shape[3])):
            axis = ref.axis_samples(
                lo, hi, size, 3, spatial_scale, sampling_ratio, aligned, np.float64
            )
            out.append((axis.grid, axis.size_held))
            out += [(t.inside, t.low, t.held) for row in axis.taps for t in row]
    return out


def _stable(boxes, shape, aligned, sampling_ratio, spatial_scale, h):
    base = _taps(boxes, shape, aligned, sampling_ratio, spatial_scale)
    for j in range(4):
        for sign in (-1, 1):
            moved = boxes.copy()
            moved[:, j] += sign * h
            if _taps(moved, shape, aligned, sampling_ratio, spatial_scale) != base:
                return False
    return True


CONFIGS = [
    (False, -1, 1.0),
    (False, 2, 0.5),
    (True, -1, 0.25),
    (True, 3, 1.0),
    (True, 1, 0.5),
]


@pytest.mark.parametrize("aligned, sampling_ratio, spatial_scale", CONFIGS)
def test_grad_boxes_matches_finite_differences(aligned, sampling_ratio, spatial_scale):
    h = 1e-6
    image, boxes, box_ind = _smooth_problem(
        int(sampling_ratio + 10 * aligned + 100 * spatial_scale),
        aligned,
        sampling_ratio,
        spatial_scale,
        h,
    )
    kw = dict(
        spatial_scale=spatial_scale, sampling_ratio=sampling_ratio, aligned=aligned
    )
    grads = np.random.default_rng(7).standard_normal((4, 3, 3, 3))
    grad = ref.roi_align_grad_boxes(grads, image, boxes, box_ind, **kw)
    fd = np.zeros_like(grad)
    for j in range(4):
        moved = []
        for sign in (1, -1):
            b = boxes.copy()
            b[:, j] += sign * h
            out = ref.roi_align(image, b, box_ind, (3, 3), **kw, exact=False)
            moved.append(np.sum(out * grads, axis=(1, 2, 3)))
        fd[:, j] = (moved[0] - moved[1]) / (2 * h)
    assert np.any(grad != 0)
    scale = max(1.0, float(np.max(np.abs(grad))))
    assert np.max(np.abs(fd - grad)) <= 1e-7 * scale


@pytest.mark.parametrize("aligned, sampling_ratio, spatial_scale", CONFIGS)
def test_jvp_and_grad_are_transposes(aligned, sampling_ratio, spatial_scale):
    rng = np.random.default_rng(3)
    image = rng.standard_normal((2, 3, 9, 11))
    boxes = np.concatenate(
        [rng.uniform(-3, 12, (6, 4)), [[1, 1, 1.4, 1.3], [6, 5, 2, 1]]]
    )
    boxes /= spatial_scale
    box_ind = rng.integers(0, 2, len(boxes))
    tangent = rng.standard_normal(boxes.shape)
    grads = rng.standard_normal((len(boxes), 3, 2, 3))
    kw = dict(
        spatial_scale=spatial_scale, sampling_ratio=sampling_ratio, aligned=aligned
    )
    jvp = ref.roi_align_jvp_boxes(image, boxes, box_ind, tangent, (2, 3), **kw)
    grad = ref.roi_align_grad_boxes(grads, image, boxes, box_ind, **kw)
    lhs, rhs = np.sum(jvp * grads), np.sum(tangent * grad)
    magnitude = np.sum(np.abs(jvp * grads)) + np.sum(np.abs(tangent * grad))
    assert abs(lhs - rhs) <= 1e-13 * magnitude
    # The float32 order proposed for the kernels: the same derivative,
    # rounded in float32.
    image32, boxes32 = image.astype(np.float32), boxes.astype(np.float32)
    tangent32, grads32 = tangent.astype(np.float32), grads.astype(np.float32)
    args = (image32, boxes32, box_ind, tangent32, (2, 3))
    jvp32 = ref.roi_align_jvp_boxes(*args, **kw, exact=True)
    jvp64 = ref.roi_align_jvp_boxes(*args, **kw)
    assert jvp32.dtype == np.float32
    assert np.max(np.abs(jvp32 - jvp64)) <= 1e-5 * max(1.0, np.max(np.abs(jvp64)))
    args = (grads32, image32, boxes32, box_ind)
    grad32 = ref.roi_align_grad_boxes(*args, **kw, exact=True)
    grad64 = ref.roi_align_grad_boxes(*args, **kw)
    assert grad32.dtype == np.float32
    assert np.max(np.abs(grad32 - grad64)) <= 1e-5 * max(1.0, np.max(np.abs(grad64)))


def test_jvp_matches_a_finite_difference():
    image, boxes, box_ind = _smooth_problem(11, True, 2, 0.5, 1e-6)
    kw = dict(spatial_scale=0.5, sampling_ratio=2, aligned=True)
    tangent = np.random.default_rng(5).standard_normal(boxes.shape)
    jvp = ref.roi_align_jvp_boxes(image, boxes, box_ind, tangent, (3, 3), **kw)
    h = 1e-7
    up = ref.roi_align(image, boxes + h * tangent, box_ind, 3, **kw, exact=False)
    down = ref.roi_align(image, boxes - h * tangent, box_ind, 3, **kw, exact=False)
    fd = (up - down) / (2 * h)
    assert np.max(np.abs(fd - jvp)) <= 1e-6 * max(1.0, np.max(np.abs(jvp)))


def test_clamps_hold_the_derivative_at_zero():
    image = np.random.default_rng(2).standard_normal((1, 2, 6, 7))
    grads = np.ones((1, 2, 2, 2))
    kw = dict(sampling_ratio=2)
    # Every sample in the band [-1, 0] of the rows and columns: clamped.
    grad = ref.roi_align_grad_boxes(grads, image, [[-0.9, -0.9, -0.1, -0.2]], [0], **kw)
    assert not grad.any()
    # Rows in [H - 1, H]: only the columns move the output.
    grad = ref.roi_align_grad_boxes(grads, image, [[1, 5.1, 4, 5.9]], [0], **kw)
    assert grad[0, 1] == grad[0, 3] == 0 and grad[0, 0] != 0 and grad[0, 2] != 0
    # Unaligned and smaller than a pixel: the size is held at 1, so x2 and
    # y2 do not move the samples; x1 and y1 move all of them alike.
    grad = ref.roi_align_grad_boxes(grads, image, [[2.2, 1.3, 2.7, 1.5]], [0], **kw)
    assert grad[0, 2] == grad[0, 3] == 0 and grad[0, 0] != 0 and grad[0, 1] != 0
    # Aligned, the same box keeps its size: x2 and y2 count.
    grad = ref.roi_align_grad_boxes(
        grads, image, [[2.2, 1.3, 2.7, 1.5]], [0], aligned=True, **kw
    )
    assert np.all(grad != 0)


def test_derivative_on_a_pixel_row_is_from_the_right():
    # One sample (1x1 output, ratio 1, unaligned) exactly on row 3: the
    # derivative is the slope of the cell below it, rows 3 to 4.
    image = np.random.default_rng(4).standard_normal((1, 1, 7, 7))
    box = np.array([[2.25, 2.0, 3.25, 4.0]])  # sample at (y, x) = (3, 2.75)
    kw = dict(sampling_ratio=1)
    grad = ref.roi_align_grad_boxes(np.ones((1, 1, 1, 1)), image, box, [0], **kw)
    h = 1e-6

    def value(b):
        return ref.roi_align(image, b, [0], 1, **kw, exact=False)[0, 0, 0, 0]

    right = (value(box + [[0, h, 0, 0]]) - value(box)) / h
    assert grad[0, 1] == pytest.approx(right, rel=1e-6)
    v = image[0, 0]
    slope_y = 0.25 * (v[4, 2] - v[3, 2]) + 0.75 * (v[4, 3] - v[3, 3])
    assert grad[0, 1] == pytest.approx(0.5 * slope_y, rel=1e-12)
