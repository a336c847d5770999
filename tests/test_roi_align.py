"""RoIAlign: torchvision's and ONNX Runtime's bits, on every thread count.

The fixtures (``data/roi_align.npz``, made by torchvision 0.29.1's CPU
kernel: ``data/README.md``) are checked in both layouts, on one thread and
on a team of two (started whatever the problem's size: `starting_teams`);
random problems on 1 to 7 threads, every team asserted to have started;
ONNX Runtime's CPU ``RoiAlign`` as a live second witness of the forward;
float16 and bfloat16 against torchvision's float16; the output dtypes.
The boxes derivatives are in test_roi_align_boxes.py, bad arguments in
test_validation.py.
"""

import ml_dtypes
import numpy as np
import pytest
from _helpers import (
    ROI_SPECIAL,
    assert_nan_places,
    assert_pixel0_unread,
    assert_same_bits,
    load_cases,
    missing,
    roi_case_names,
    roi_case_options,
    starting_teams,
)

import cropgrad
from cropgrad._reference import roi_align as ref

CASES = load_cases("roi_align.npz")
COMPUTED = roi_case_names(CASES, exclude=ROI_SPECIAL)
LAYOUTS = ("NCHW", "NHWC")


def _to(layout, a):
    """An NCHW array in `layout` (NHWC: transposed, C-contiguous)."""
    return np.ascontiguousarray(a.transpose(0, 2, 3, 1)) if layout == "NHWC" else a


def _back(layout, a):
    """A result in `layout` as NCHW."""
    return a.transpose(0, 3, 1, 2) if layout == "NHWC" else a


def forward(case, layout="NCHW", image=None, **kw):
    image = case["image"] if image is None else image
    out = cropgrad.roi_align(
        _to(layout, image),
        case["boxes"],
        case["box_ind"],
        tuple(int(v) for v in case["output_size"]),
        data_format=layout,
        **roi_case_options(case),
        **kw,
    )
    return _back(layout, out)


def grad_image(case, layout="NCHW", grads=None, **kw):
    grads = case["grads"] if grads is None else grads
    shape = case["image"].shape
    if layout == "NHWC":
        shape = (shape[0], shape[2], shape[3], shape[1])
    out = cropgrad.roi_align_grad_image(
        _to(layout, grads),
        case["boxes"],
        case["box_ind"],
        shape,
        data_format=layout,
        **roi_case_options(case),
        **kw,
    )
    return _back(layout, out)


# --------------------------------------------------------------------------
# torchvision's bits


def test_the_fixtures_are_there():
    assert len(COMPUTED) >= 60
    dtypes = {CASES[n]["image"].dtype.name for n in COMPUTED}
    assert dtypes == {"float32", "float64"}


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("name", COMPUTED)
def test_forward_is_torchvision_bits(name, layout):
    case = CASES[name]
    assert_same_bits(forward(case, layout, num_threads=1), case["out"], name)
    with starting_teams() as parallel:
        out = forward(case, layout, num_threads=2)
        if len(case["boxes"]) >= 2:
            assert parallel.last_team() == 2
    assert_same_bits(out, case["out"], name)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("name", COMPUTED)
def test_grad_image_is_torchvision_bits(name, layout):
    case = CASES[name]
    assert_same_bits(grad_image(case, layout, num_threads=1), case["grad_image"])
    with starting_teams() as parallel:
        out = grad_image(case, layout, num_threads=2)
        # A task owns an image (and, with many channels, a range of them).
        if case["image"].shape[0] >= 2 and len(case["boxes"]):
            assert parallel.last_team() == 2
    assert_same_bits(out, case["grad_image"], name)


def test_multi_scale_levels_are_torchvision_bits():
    # MultiScaleRoIAlign is roi_align per pyramid level on that level's
    # boxes (the reference's level assignment is checked against the
    # fixture in test_reference_roi_align.py).
    case = CASES["multi_scale_fpn_f32"]
    names = ("p2", "p3", "p4")
    boxes = np.concatenate([case["boxes_0"], case["boxes_1"]])
    box_ind = np.repeat([0, 1], [len(case["boxes_0"]), len(case["boxes_1"])])
    levels, scales = case["levels"], case["scales"]
    grads = case["grads"]
    for level, (n, scale) in enumerate(zip(names, scales)):
        at = np.flatnonzero(levels == level)
        feature = case["feature_" + n]
        options = dict(spatial_scale=float(scale), sampling_ratio=2)
        out = cropgrad.roi_align(feature, boxes[at], box_ind[at], 7, **options)
        assert_same_bits(out, case["out"][at], n)
        grad = cropgrad.roi_align_grad_image(
            grads[at], boxes[at], box_ind[at], feature.shape, **options
        )
        assert_same_bits(grad, case["grad_" + n], n)


def test_nonfinite_pixels_are_read_as_torchvision_reads_them():
    # Inside samples read their four corners: zero weight times infinity
    # is NaN in both (NaN payloads are compared on the same machine code
    # elsewhere; here the places).
    case = CASES["special_values_f32"]
    assert_nan_places(forward(case), case["out"])


def test_outside_samples_read_no_pixel():
    # torchvision adds 0 * pixel 0 for a sample outside the image (NaN when
    # pixel 0 is NaN); cropgrad reads nothing for it (docs/semantics.md).
    case = CASES["nan_pixel0_f32"]
    out, expected = forward(case), case["out"]
    assert_pixel0_unread(out, expected)
    assert_same_bits(
        out,
        ref.roi_align(
            case["image"],
            case["boxes"],
            case["box_ind"],
            tuple(case["output_size"]),
            **roi_case_options(case),
        ),
    )


@pytest.mark.parametrize(
    "name", sorted(n for n, c in CASES.items() if str(c["kind"]) == "error")
)
def test_where_torchvision_fails_the_result_is_zero(name):
    # An aligned box flipped along one axis with the adaptive grid: no
    # samples (torchvision: "cannot create std::vector larger than
    # max_size()").
    case = CASES[name]
    assert "std::vector" in str(case["error"])
    out = forward(case)
    assert out.shape[0] == len(case["boxes"]) and not out.any()
    grads = np.ones_like(out)
    assert not grad_image(case, grads=grads).any()


# --------------------------------------------------------------------------
# Threads and layouts on problems large enough for every team


def _random_problem(
    rng,
    dtype=np.float32,
    batch=4,
    channels=40,
    num_boxes=40,
    size=(23, 29),
    output=(5, 4),
):
    image = rng.standard_normal((batch, channels, *size)).astype(dtype)
    lo = rng.uniform(-12, 110, (num_boxes, 2))
    hi = lo + rng.uniform(-6, 70, (num_boxes, 2))  # some flipped, some outside
    boxes = np.concatenate([lo, hi], axis=1)
    boxes[::7] = np.round(boxes[::7])  # samples on whole pixels too
    box_ind = rng.integers(0, batch, num_boxes)
    grads = rng.standard_normal((num_boxes, channels, *output)).astype(dtype)
    return image, boxes.astype(dtype), box_ind, grads


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("sampling_ratio, aligned", [(-1, False), (2, True), (0, True)])
def test_every_thread_count_gives_the_same_bits(dtype, sampling_ratio, aligned):
    rng = np.random.default_rng([7, sampling_ratio + 3, aligned])
    image, boxes, box_ind, grads = _random_problem(rng, dtype)
    options = dict(spatial_scale=0.25, sampling_ratio=sampling_ratio, aligned=aligned)
    forward = ref.roi_align(image, boxes, box_ind, (5, 4), **options)
    backward = ref.roi_align_grad_image(grads, boxes, box_ind, image.shape, **options)
    with starting_teams() as parallel:
        for threads in range(1, 8):
            for layout in LAYOUTS:
                out = cropgrad.roi_align(
                    _to(layout, image),
                    boxes,
                    box_ind,
                    (5, 4),
                    data_format=layout,
                    num_threads=threads,
                    **options,
                )
                assert parallel.last_team() == threads
                assert_same_bits(_back(layout, out), forward, (threads, layout))
                shape = _to(layout, image).shape
                out = cropgrad.roi_align_grad_image(
                    _to(layout, grads),
                    boxes,
                    box_ind,
                    shape,
                    data_format=layout,
                    num_threads=threads,
                    **options,
                )
                assert parallel.last_team() == threads
                assert_same_bits(_back(layout, out), backward, (threads, layout))


def test_large_problems_start_teams_without_being_told():
    rng = np.random.default_rng(11)
    image, boxes, box_ind, grads = _random_problem(rng, channels=64, num_boxes=200)
    from cropgrad._runtime import parallel

    cropgrad.roi_align(image, boxes, box_ind, 7, num_threads=2)
    assert parallel.last_team() == 2
    cropgrad.roi_align_grad_image(
        np.ones((200, 64, 7, 7), np.float32), boxes, box_ind, image.shape, num_threads=2
    )
    assert parallel.last_team() == 2


# --------------------------------------------------------------------------
# ONNX Runtime, a second witness of the forward


def _onnx():
    try:
        import onnxruntime  # noqa: F401
        from _onnx_roi_align import roi_align
    except ImportError as exc:
        missing(f"ONNX Runtime cannot be imported ({exc})", "CROPGRAD_REQUIRE_ADAPTERS")
    return roi_align


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("sampling_ratio", [0, 1, 2, 3])
@pytest.mark.parametrize("aligned", [False, True])
def test_forward_is_onnx_runtime_bits(dtype, sampling_ratio, aligned):
    onnx_roi_align = _onnx()
    rng = np.random.default_rng([13, sampling_ratio, aligned])
    image, boxes, box_ind, _ = _random_problem(rng, dtype, batch=2, channels=6)
    # ONNX Runtime refuses flipped boxes with the adaptive grid.
    boxes[:, 2:] = np.maximum(boxes[:, 2:], boxes[:, :2])
    options = dict(spatial_scale=0.25, sampling_ratio=sampling_ratio, aligned=aligned)
    expected = onnx_roi_align(image, boxes, box_ind, (5, 4), **options)
    with starting_teams():
        out = cropgrad.roi_align(
            image, boxes, box_ind, (5, 4), num_threads=2, **options
        )
    assert_same_bits(out, expected)


# --------------------------------------------------------------------------
# float16, bfloat16 and other dtypes


@pytest.mark.parametrize(
    "name",
    [
        n
        for n in COMPUTED
        if "out_float16" in CASES[n] and CASES[n]["image"].dtype == np.float32
    ],
)
def test_float16_is_no_less_accurate_than_torchvision(name):
    # torchvision computes a float16 image in float16, every operation
    # rounded to float16 (its boxes too); cropgrad in float32, rounded once.
    # The yardstick: the same float16 inputs in float64 arithmetic, where
    # the samples fall as the float32 geometry puts them (a degenerate box's
    # adaptive grid can differ by one sample between float16, float32 and
    # float64 geometry; torchvision's float32 kernel takes the float32 one).
    case = dict(CASES[name])
    image16 = case["image"].astype(np.float16)
    case["boxes"] = case["boxes"].astype(np.float16).astype(np.float32)
    exact = ref.roi_align(
        image16,
        case["boxes"],
        case["box_ind"],
        tuple(case["output_size"]),
        exact=False,
        **roi_case_options(case),
    )
    ours = forward(case, image=image16)
    assert ours.dtype == np.float16
    # The float32 result rounded once.
    float32 = forward(case, image=image16.astype(np.float32))
    assert_same_bits(ours, float32.astype(np.float16))
    with np.errstate(invalid="ignore"):
        ours_error = np.abs(ours.astype(np.float64) - exact)
        theirs_error = np.abs(case["out_float16"].astype(np.float64) - exact)
    finite = np.isfinite(theirs_error)
    if finite.any():
        assert ours_error[finite].max() <= theirs_error[finite].max()
        assert ours_error[finite].mean() <= theirs_error[finite].mean()


def test_bfloat16_image_is_read_exactly_and_rounded_once():
    rng = np.random.default_rng(17)
    image, boxes, box_ind, grads = _random_problem(rng, batch=2, channels=5)
    image_bf = image.astype(ml_dtypes.bfloat16)
    out = cropgrad.roi_align(image_bf, boxes, box_ind, 3, sampling_ratio=2)
    assert out.dtype == image_bf.dtype
    float32 = cropgrad.roi_align(
        image_bf.astype(np.float32), boxes, box_ind, 3, sampling_ratio=2
    )
    assert_same_bits(out, float32.astype(ml_dtypes.bfloat16))
    grad = cropgrad.roi_align_grad_image(
        grads[:, :, :3, :3].astype(ml_dtypes.bfloat16),
        boxes,
        box_ind,
        image.shape,
        sampling_ratio=2,
    )
    assert grad.dtype == image_bf.dtype


@pytest.mark.parametrize("dtype", [np.uint8, np.int16, np.int64, np.float16])
def test_other_image_dtypes_are_read_as_float32(dtype):
    rng = np.random.default_rng(19)
    image, boxes, box_ind, _ = _random_problem(rng, batch=2, channels=3)
    image = image * 50
    if np.issubdtype(dtype, np.integer):
        # In range: a float cast out of an integer's range is undefined
        # (and warns on AArch64).
        image = np.clip(image, np.iinfo(dtype).min, np.iinfo(dtype).max)
    image = image.astype(dtype)
    out = cropgrad.roi_align(image, boxes, box_ind, 3, spatial_scale=0.25)
    expected = cropgrad.roi_align(
        image.astype(np.float32), boxes, box_ind, 3, spatial_scale=0.25
    )
    assert out.dtype == (np.float16 if dtype == np.float16 else np.float32)
    assert_same_bits(out, expected.astype(out.dtype))


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_dtype_rounds_the_result_once(dtype):
    rng = np.random.default_rng(23)
    image, boxes, box_ind, grads = _random_problem(rng, batch=2, channels=3)
    out = cropgrad.roi_align(image, boxes, box_ind, 3, dtype=dtype)
    expected = cropgrad.roi_align(image, boxes, box_ind, 3)
    assert out.dtype == dtype
    assert_same_bits(out, expected.astype(dtype))
    out = cropgrad.roi_align_grad_image(
        grads[:, :, :3, :3], boxes, box_ind, image.shape, dtype=dtype
    )
    expected = cropgrad.roi_align_grad_image(
        grads[:, :, :3, :3], boxes, box_ind, image.shape
    )
    assert out.dtype == dtype
    assert_same_bits(out, expected.astype(dtype))


def test_float64_gradients_are_computed_in_float64():
    rng = np.random.default_rng(29)
    image, boxes, box_ind, grads = _random_problem(rng, np.float64, channels=3)
    out = cropgrad.roi_align_grad_image(grads, boxes, box_ind, image.shape)
    assert out.dtype == np.float64
    assert_same_bits(out, ref.roi_align_grad_image(grads, boxes, box_ind, image.shape))


def test_out_is_written_in_place():
    rng = np.random.default_rng(31)
    image, boxes, box_ind, _ = _random_problem(rng, batch=2, channels=3)
    out = np.full((len(boxes), 3, 2, 2), np.nan, np.float32)
    result = cropgrad.roi_align(image, boxes, box_ind, 2, out=out)
    assert result is out
    assert_same_bits(out, cropgrad.roi_align(image, boxes, box_ind, 2))


def test_empty_problems():
    image = np.ones((2, 3, 5, 5), np.float32)
    out = cropgrad.roi_align(image, np.zeros((0, 4)), [], 2)
    assert out.shape == (0, 3, 2, 2)
    grad = cropgrad.roi_align_grad_image(
        np.zeros((0, 3, 2, 2), np.float32), np.zeros((0, 4)), [], image.shape
    )
    assert grad.shape == image.shape and not grad.any()
    assert cropgrad.roi_align_grad_boxes(
        np.zeros((0, 3, 2, 2), np.float32), image, np.zeros((0, 4)), []
    ).shape == (0, 4)
