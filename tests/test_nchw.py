"""data_format="NCHW": the NHWC results transposed, bit for bit.

NCHW has kernels of its own (the image gradient's in
cropgrad/_kernels/crop_and_resize/grad_image_nchw.pyx: planes for depths 1
to 4, channel-group tiles above; NCHW strides in the forward op and the
boxes gradient), so
every TensorFlow fixture is checked again transposed, for several thread
counts, and random problems (small ones from the property strategies, big
ones that start threads, NaN and infinite gradients, depths around every
switch of the kernels) against the NHWC result transposed.

RoIAlign's ops take NCHW by default (cropgrad/_kernels/roi_align: planes
read where they are, or gathered into tiles of channels side by side) and
NHWC on request: random problems of every image dtype, output dtypes and
sampling options, NaN and infinite pixels and gradients, on teams of 1 to 3
workers, give the NHWC result transposed, bit for bit, NaN bits included.

grid_sample's ops take NCHW by default too, and NHWC with kernels of their
own: NaN and infinite data on teams of 1 and 3, the default layout and the
wording of the messages.
"""

import sys

import numpy as np
import pytest
from _helpers import (
    METHODS,
    OUT_DTYPES,
    SMALL_GRAD_IMAGE_TASKS,
    as_image_dtype,
    assert_same_bits,
    assert_same_values,
    big_problems,
    box_groups,
    crop_fixture,
    crop_rows,
    examples,
    fixture_comparison,
    forward_problems,
    grad_boxes_fixture,
    grad_image_problems,
    grad_image_rows,
    grads_elements,
    load_cases,
    on_team,
    roi_align_problems,
    roi_arithmetic,
    roi_tasks,
    starting_teams,
    team_of,
)
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import cropgrad
from cropgrad._kernels import testing as _testing
from cropgrad._kernels.crop_and_resize import forward_nchw as _forward_nchw
from cropgrad._ops import FAMILIES

GRAD_IMAGE = load_cases("grad_image.npz")
FORWARD = load_cases("forward.npz")
GRAD_BOXES = load_cases("grad_boxes.npz")

TO_NCHW = (0, 3, 1, 2)
THREADS = (1, 2, 3, 4)


def nchw(array):
    """An NHWC array as a C-contiguous NCHW array."""
    return np.ascontiguousarray(np.asarray(array).transpose(TO_NCHW))


def nchw_size(size):
    batch, height, width, depth = (int(v) for v in size)
    return [batch, depth, height, width]


# Where NaNs meet, which one an addition keeps may differ between the
# layouts' kernels where the compiler orders the operands differently
# (docs/semantics.md): the forward op's NaN bits are the same in both with
# GCC, not promised with other compilers.
if cropgrad.show_config("dicts")["compiler"] == "gcc":
    same_layout_bits = assert_same_bits
else:
    same_layout_bits = assert_same_values


# --------------------------------------------------------------------------
# TensorFlow's fixtures, transposed, on teams of 1 to 4 workers (started
# however small the work: starting_teams), each test named for n threads
# asserting a team of n.  The largest team a case's tasks allow:

# The image gradient: bands of rows of one image times channel groups (64
# channels are one group); the small cases as in NHWC, two rows of 64
# channels 2.
GRAD_IMAGE_LIMIT = {
    **SMALL_GRAD_IMAGE_TASKS,
    "threads_channels_bilinear": 2,
    "threads_channels_nearest": 2,
}


def forward_limit(case):
    """The forward op: one task per image, channel group and band of rows;
    the fixtures' planes fit one group and one band, so one per image."""
    return min(case["image"].shape[0], 4)


def boxes_limit(case):
    """The boxes gradient: groups of four boxes, or one box each for
    one-row or one-column crops."""
    num_boxes, crop_h, crop_w = case["grads"].shape[:3]
    return min(num_boxes if 1 in (crop_h, crop_w) else -(-num_boxes // 4), 4)


def with_threads(cases, limit):
    """(case, n) for n threads up to the case's limit (and 1 always)."""
    return [
        (name, n)
        for name in sorted(cases)
        for n in THREADS
        if n == 1 or n <= limit(name)
    ]


def _run(call, num_threads, limit):
    with starting_teams():
        out, team = team_of(call)
    assert team == min(num_threads, limit), (num_threads, team)
    return out


@pytest.mark.parametrize(
    "name, num_threads", with_threads(GRAD_IMAGE, lambda n: GRAD_IMAGE_LIMIT.get(n, 4))
)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_grad_image_tensorflow_bits(name, dtype, num_threads):
    case = GRAD_IMAGE[name]
    out = _run(
        lambda: cropgrad.crop_and_resize_grad_image(
            nchw(case["grads"]),
            case["boxes"],
            case["box_ind"],
            nchw_size(case["image_size"]),
            dtype=dtype,
            method=str(case["method"]),
            num_threads=num_threads,
            flush_denormals=True,
            data_format="NCHW",
        ),
        num_threads,
        GRAD_IMAGE_LIMIT.get(name, 4),
    )
    fixture_comparison(name)(out, nchw(case[f"out_{dtype}"]), name)


@pytest.mark.parametrize(
    "name, num_threads", with_threads(GRAD_IMAGE, lambda n: GRAD_IMAGE_LIMIT.get(n, 4))
)
def test_grad_image_float16_is_the_nhwc_result(name, num_threads):
    # float16: TensorFlow rounds after every addition, cropgrad once (see
    # test_grad_image.py); NCHW is NHWC's float16 result transposed.
    case = GRAD_IMAGE[name]
    args = (case["boxes"], case["box_ind"])
    method = str(case["method"])
    nhwc = cropgrad.crop_and_resize_grad_image(
        case["grads"], *args, case["image_size"], "float16", method, num_threads=1
    )
    out = _run(
        lambda: cropgrad.crop_and_resize_grad_image(
            nchw(case["grads"]),
            *args,
            nchw_size(case["image_size"]),
            "float16",
            method,
            num_threads=num_threads,
            data_format="NCHW",
        ),
        num_threads,
        GRAD_IMAGE_LIMIT.get(name, 4),
    )
    assert_same_bits(out, nchw(nhwc))


@pytest.mark.parametrize(
    "name, num_threads", with_threads(FORWARD, lambda n: forward_limit(FORWARD[n]))
)
def test_forward_tensorflow_bits(name, num_threads):
    case = FORWARD[name]
    out = _run(
        lambda: crop_fixture(
            case, nchw(case["image"]), num_threads=num_threads, data_format="NCHW"
        ),
        num_threads,
        forward_limit(case),
    )
    fixture_comparison(name)(out, nchw(case["out"]), name)


@pytest.mark.parametrize(
    "name, num_threads", with_threads(GRAD_BOXES, lambda n: boxes_limit(GRAD_BOXES[n]))
)
def test_grad_boxes_tensorflow_bits(name, num_threads):
    case = GRAD_BOXES[name]
    out = _run(
        lambda: grad_boxes_fixture(
            case,
            nchw(case["grads"]),
            nchw(case["image"]),
            num_threads=num_threads,
            data_format="NCHW",
        ),
        num_threads,
        boxes_limit(case),
    )
    fixture_comparison(name)(out, case["out"], name)


# --------------------------------------------------------------------------
# Random problems against NHWC, transposed


def grad_image_pair(
    grads, boxes, box_ind, size, dtype, method, num_threads, tasks=None
):
    """(NHWC result transposed, NCHW result on a team of `num_threads`,
    checked where its `tasks` are known: planes, for up to 4 channels, are
    split by rows)."""
    nhwc = cropgrad.crop_and_resize_grad_image(
        grads, boxes, box_ind, size, dtype, method, num_threads=1
    )
    if tasks is None and size[3] <= 4:
        tasks = grad_image_rows(grads, size)
    out = on_team(
        num_threads,
        tasks,
        lambda: cropgrad.crop_and_resize_grad_image(
            nchw(grads),
            boxes,
            box_ind,
            nchw_size(size),
            dtype,
            method,
            num_threads=num_threads,
            data_format="NCHW",
        ),
    )
    return nchw(nhwc), out


def forward_pair(
    image, boxes, box_ind, crop, method, extrapolation, num_threads, tasks
):
    """(NHWC crops transposed, NCHW crops on a team of `num_threads` running
    `tasks`)."""
    nhwc = cropgrad.crop_and_resize(
        image, boxes, box_ind, crop, method, extrapolation, num_threads=1
    )
    out = on_team(
        num_threads,
        tasks,
        lambda: cropgrad.crop_and_resize(
            nchw(image),
            boxes,
            box_ind,
            crop,
            method,
            extrapolation,
            num_threads=num_threads,
            data_format="NCHW",
        ),
    )
    return nchw(nhwc), out


def grad_boxes_pair(grads, image, boxes, box_ind, crop, num_threads):
    """(NHWC boxes gradient, NCHW one on a team of `num_threads`, a task per
    group of boxes)."""
    nhwc = cropgrad.crop_and_resize_grad_boxes(
        grads, image, boxes, box_ind, num_threads=1
    )
    out = on_team(
        num_threads,
        box_groups(boxes, crop, image.shape),
        lambda: cropgrad.crop_and_resize_grad_boxes(
            nchw(grads),
            nchw(image),
            boxes,
            box_ind,
            num_threads=num_threads,
            data_format="NCHW",
        ),
    )
    return nhwc, out


@examples(600)
@given(
    problem=grad_image_problems(max_depth=6),
    method=st.sampled_from(METHODS),
    dtype=st.sampled_from(OUT_DTYPES),
    num_threads=st.integers(1, 4),
)
def test_grad_image_small_problems(problem, method, dtype, num_threads):
    expected, out = grad_image_pair(*problem, dtype, method, num_threads)
    assert_same_bits(out, expected)


@examples(120)
@given(
    problem=big_problems(
        widths=(1, 2, 5, 31, 64, 1500),
        depths=(1, 2, 3, 4, 5, 16, 17, 64, 70, 130),
    ),
    method=st.sampled_from(METHODS),
    dtype=st.sampled_from(OUT_DTYPES),
    num_threads=st.integers(1, 4),
)
def test_grad_image_big_problems(problem, method, dtype, num_threads):
    expected, out = grad_image_pair(*problem, dtype, method, num_threads)
    assert_same_bits(out, expected)


@pytest.mark.parametrize("depth", [1, 3, 4, 5, 8, 70, 160])
def test_non_finite_gradients(depth):
    # inf - inf makes a NaN whose bits depend on the operands' order in each
    # addition: in NCHW too, every element is updated by the same code for
    # any thread count (so the bits agree), and the values are NHWC's.
    rng = np.random.default_rng(depth)
    height = 2 if depth > 64 else 23
    grads = rng.standard_normal((40, 6, 9, depth)).astype(np.float32)
    pick = rng.random(grads.shape)
    grads[pick < 0.05] = np.inf
    grads[pick > 0.95] = -np.inf
    grads[(pick > 0.5) & (pick < 0.52)] = np.nan
    # Enlarging crops: samples of a crop row share pixels.
    y1 = rng.uniform(0, 0.9, 40)
    x1 = rng.uniform(0, 0.9, 40)
    boxes = np.stack([y1, x1, y1 + 0.1, x1 + 0.1], axis=1).astype(np.float32)
    box_ind = rng.integers(0, 2, 40)
    size = [2, height, 19, depth]
    for dtype in ("float32", "float64", "float16"):
        expected, one = grad_image_pair(
            grads, boxes, box_ind, size, dtype, "bilinear", 1
        )
        assert np.isnan(one).any()
        np.testing.assert_array_equal(one, expected)
        for n in (2, 3, 4):
            many = on_team(
                n,
                n,  # rows or channel groups enough for 4
                lambda n=n: cropgrad.crop_and_resize_grad_image(
                    nchw(grads),
                    boxes,
                    box_ind,
                    nchw_size(size),
                    dtype,
                    num_threads=n,
                    data_format="NCHW",
                ),
            )
            assert many.tobytes() == one.tobytes(), (dtype, n)


@pytest.mark.parametrize("seed", range(8))
def test_non_finite_gradients_on_planes_one_pixel_wide(seed):
    # Planes one pixel wide, bands of two rows cutting through the samples,
    # NaN and infinite gradients: the NaN bits of 2 threads are those of 1.
    # (A build that inlined the planes' walk differently per band, GCC with
    # -fsanitize=address,undefined, gave NaNs of the other sign here.)
    rng = np.random.default_rng(seed)
    grads = rng.standard_normal((2, 2, 7, 3)).astype(np.float32)
    pick = rng.random(grads.shape)
    grads[pick < 0.1] = np.inf
    grads[pick > 0.9] = -np.inf
    grads[(pick > 0.5) & (pick < 0.6)] = np.nan
    boxes = rng.uniform(-0.4, 1.4, (2, 4)).astype(np.float32)
    args = (grads, boxes, [1, 1], [2, 2, 8, 1])
    one = cropgrad.crop_and_resize_grad_image(*args, num_threads=1, data_format="NCHW")
    two = on_team(
        2,
        2,
        lambda: cropgrad.crop_and_resize_grad_image(
            *args, num_threads=2, data_format="NCHW"
        ),
    )
    assert np.isnan(one).any()
    assert_same_bits(two, one)


@pytest.mark.parametrize("num_threads", [1, 2, 3])
def test_tall_boxes_cross_every_tile(num_threads):
    # Crop rows whose top and bottom rows fall in different tiles (or
    # bands), and boxes spanning many tiles: a wide, deep image gets tiles
    # of a few rows.
    rng = np.random.default_rng(5)
    grads = rng.standard_normal((12, 40, 7, 96)).astype(np.float32)
    boxes = np.array([[0.0, 0.1, 1.0, 0.9]] * 6 + [[0.95, 0.0, 0.05, 1.0]] * 6)
    boxes = (boxes + rng.uniform(-0.01, 0.01, boxes.shape)).astype(np.float32)
    box_ind = np.repeat([0, 1], 6)
    for dtype in OUT_DTYPES:
        # Tiles of 122 rows: a team of every size asked for.
        expected, out = grad_image_pair(
            grads,
            boxes,
            box_ind,
            [2, 61, 700, 96],
            dtype,
            "bilinear",
            num_threads,
            tasks=num_threads,
        )
        assert_same_bits(out, expected)


@examples(300)
@given(
    problem=forward_problems(max_depth=6),
    method=st.sampled_from(METHODS),
    num_threads=st.integers(1, 4),
)
def test_forward_small_problems(problem, method, num_threads):
    image, boxes, box_ind, crop, extrapolation = problem
    # A task per image (these planes fit one channel group and one band).
    tasks = image.shape[0] if crop_rows(boxes, crop, image.shape[3]) else 0
    expected, out = forward_pair(
        image, boxes, box_ind, crop, method, extrapolation, num_threads, tasks
    )
    same_layout_bits(out, expected)


@examples(150)
@given(
    problem=forward_problems(max_depth=6), num_threads=st.integers(1, 4), data=st.data()
)
def test_grad_boxes_small_problems(problem, num_threads, data):
    image, boxes, box_ind, crop, _ = problem
    seed = data.draw(st.integers(0, 2**32 - 1))
    grads = (
        np.random.default_rng(seed)
        .standard_normal((boxes.shape[0], *crop, image.shape[3]))
        .astype(np.float32)
    )
    expected, out = grad_boxes_pair(grads, image, boxes, box_ind, crop, num_threads)
    # NaN pixels: NaN at the same boxes, not always of the same sign
    # (docs/semantics.md).
    assert_same_values(out, expected)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("num_threads", [1, 2, 3])
def test_forward_and_boxes_gradient_big_problems(seed, num_threads):
    rng = np.random.default_rng(seed)
    dtype = [np.uint8, np.int16, np.float16, np.float32, np.float64, np.int64][seed]
    depth = [1, 3, 16, 64, 130, 5][seed]
    crop = (int(rng.integers(1, 17)), int(rng.integers(1, 90)))
    image = as_image_dtype(rng.standard_normal((3, 37, 45, depth)) * 50, dtype)
    boxes = rng.uniform(-0.3, 1.3, (80, 4)).astype(np.float32)
    box_ind = rng.integers(0, 3, 80)
    grads = rng.standard_normal((80, *crop, depth)).astype(np.float32)
    # Three images (forward tasks) and 20 groups of boxes: teams of 1 to 3.
    for method in METHODS:
        expected, out = forward_pair(
            image, boxes, box_ind, crop, method, np.nan, num_threads, 3
        )
        assert_same_bits(out, expected)
    expected, out = grad_boxes_pair(grads, image, boxes, box_ind, crop, num_threads)
    assert_same_bits(out, expected)


@pytest.mark.parametrize("stream", [True, False])
@pytest.mark.parametrize("num_threads", [1, 2])
def test_forward_crops_written_around_the_caches(stream, num_threads):
    # Crops larger than the last-level cache are written with streaming
    # stores (the threshold set here to stream or not): the same bits as
    # the NHWC crops either way.
    rng = np.random.default_rng(7)
    image = rng.standard_normal((2, 20, 24, 40)).astype(np.float32)
    y1, x1 = rng.uniform(-0.1, 0.6, (2, 90))
    boxes = np.stack([y1, x1, y1 + 0.4, x1 + 0.5], 1).astype(np.float32)
    box_ind = rng.integers(0, 2, 90)
    expected = cropgrad.crop_and_resize(image, boxes, box_ind, (14, 13), num_threads=1)
    # Only into memory written before (streaming stores into pages that
    # fault in as they are written cost more than ordinary ones).
    out = np.full((90, 40, 14, 13), np.nan, np.float32)
    saved = _forward_nchw.use_stream_bytes(0 if stream else 1 << 62)
    try:
        # Two images: tasks for two threads.
        on_team(
            num_threads,
            2,
            lambda: cropgrad.crop_and_resize(
                nchw(image),
                boxes,
                box_ind,
                (14, 13),
                out=out,
                num_threads=num_threads,
                data_format="NCHW",
            ),
        )
    finally:
        _forward_nchw.use_stream_bytes(saved)
    assert_same_bits(out, nchw(expected))


def test_streaming_waits_for_resident_pages():
    # A fresh 64 MiB block (larger than any size glibc serves from its
    # heap) has no page in memory until it is written.
    block = np.empty(16 << 20, np.float32)
    if sys.platform.startswith("linux"):
        assert _testing.pages_resident(block) == 0
        block[: 1 << 20] = 1
        assert _testing.pages_resident(block) == 0
    block.fill(1)
    assert _testing.pages_resident(block) != 0


@pytest.mark.parametrize(
    "num_boxes, num_threads", [(1, 1), (7, 1), (7, 2), (200, 1), (200, 2)]
)
def test_boxes_gradient_staged_whole_or_by_rows(num_boxes, num_threads):
    # A float32 NCHW image is copied whole with its channels side by side
    # when that is less than the rows its crop rows would stage (200 boxes
    # on a small image), else a crop row's rows are staged (1 and 7 boxes
    # on a large one): the same bits as NHWC either way.  (Tasks are groups
    # of four boxes: one box makes one task, 7 boxes two.)
    rng = np.random.default_rng(num_boxes)
    size = (2, 70, 90, 24) if num_boxes < 10 else (2, 9, 11, 24)
    image = rng.standard_normal(size).astype(np.float32)
    y1, x1 = rng.uniform(-0.1, 0.7, (2, num_boxes))
    boxes = np.stack([y1, x1, y1 + 0.35, x1 + 0.3], 1).astype(np.float32)
    box_ind = rng.integers(0, 2, num_boxes)
    grads = rng.standard_normal((num_boxes, 7, 5, size[3])).astype(np.float32)
    expected, out = grad_boxes_pair(grads, image, boxes, box_ind, (7, 5), num_threads)
    assert_same_bits(out, expected)


# --------------------------------------------------------------------------
# RoIAlign: NCHW (its default) against NHWC transposed

ROI_OPS = (
    "roi_align",
    "roi_align_grad_image",
    "roi_align_grad_boxes",
    "roi_align_jvp_boxes",
)


def nhwc(array):
    """An NCHW array as a C-contiguous NHWC array."""
    return np.ascontiguousarray(np.asarray(array).transpose(0, 2, 3, 1))


def roi_run(op, layout, image, boxes, box_ind, output_size, grads, tangent, **kw):
    """RoIAlign's `op` on NCHW arrays (`grads` too), run in `layout`; its
    result as NCHW (the boxes gradient: as it is)."""
    to = nhwc if layout == "NHWC" else np.asarray
    kw = dict(kw, data_format=layout)
    if op == "roi_align":
        out = cropgrad.roi_align(to(image), boxes, box_ind, output_size, **kw)
    elif op == "roi_align_grad_image":
        size = to(image).shape
        out = cropgrad.roi_align_grad_image(to(grads), boxes, box_ind, size, **kw)
    elif op == "roi_align_grad_boxes":
        kw.pop("dtype", None)
        return cropgrad.roi_align_grad_boxes(to(grads), to(image), boxes, box_ind, **kw)
    else:
        out = cropgrad.roi_align_jvp_boxes(
            to(image), boxes, box_ind, tangent, output_size, **kw
        )
    return nchw(out) if layout == "NHWC" else out


def roi_pair(op, num_threads, problem, grads, tangent, **kw):
    """(the NHWC result on one thread, as NCHW; the NCHW result on a team of
    `num_threads`, checked against the tasks the problem has at least)."""
    image, boxes = problem[:2]
    expected = roi_run(op, "NHWC", *problem[:4], grads, tangent, num_threads=1, **kw)
    out = on_team(
        num_threads,
        roi_tasks(image, boxes),
        lambda: roi_run(
            op, "NCHW", *problem[:4], grads, tangent, num_threads=num_threads, **kw
        ),
    )
    return expected, out


@pytest.mark.parametrize("op", ROI_OPS)
@examples(60)
@given(
    problem=roi_align_problems(),
    num_threads=st.integers(1, 3),
    out_dtype=st.sampled_from([None, np.float16, np.float32, np.float64]),
    data=st.data(),
)
def test_roi_align_small_problems(op, problem, num_threads, out_dtype, data):
    image, boxes, box_ind, output_size, options = problem
    arithmetic = roi_arithmetic(image)
    # grads and the tangent in the arithmetic type (the image gradient's
    # is the grads' dtype); float16 results from float32 arithmetic only.
    shape = (len(boxes), image.shape[1], *output_size)
    grads = data.draw(hnp.arrays(arithmetic, shape, elements=grads_elements()))
    tangent = data.draw(hnp.arrays(arithmetic, boxes.shape, elements=grads_elements()))
    if out_dtype == np.float16 and arithmetic == np.float64:
        out_dtype = None
    kw = dict(options, dtype=out_dtype)
    expected, out = roi_pair(op, num_threads, problem, grads, tangent, **kw)
    # Where a NaN of the data meets another NaN in one addition, which one
    # the sum keeps is the compiler's choice in each layout's loops
    # (docs/semantics.md): NaN where NHWC has NaN, every other bit the same.
    # Without NaN in the data, every NaN is made by the arithmetic itself
    # (inf - inf, 0 * inf), all alike: every bit.
    data = [a for a in (image, grads, tangent) if a.dtype.kind == "f"]
    if any(np.isnan(a).any() for a in data):
        assert_same_values(out, expected)
    else:
        assert_same_bits(out, expected)


@pytest.mark.parametrize("num_threads", [1, 2, 3])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, np.uint8])
@pytest.mark.parametrize("op", ROI_OPS)
def test_roi_align_non_finite_values(op, dtype, num_threads):
    # NaN and infinite pixels (float dtypes), gradients and tangents: the
    # NaN bits of NCHW on every team are NHWC's.  Three images and twelve
    # boxes: tasks for a team of 3 from every op, channels as planes (5)
    # and as tiles (24).
    rng = np.random.default_rng([num_threads, np.dtype(dtype).num])
    # float16 pixels: where a NaN pixel meets the NaN of 0 * inf, the two
    # layouts' loops may keep either (docs/semantics.md): NaN at the same
    # elements, every other bit the same.
    same = assert_same_values if dtype == np.float16 else assert_same_bits
    seen = 0
    for channels in (5, 24):
        image = as_image_dtype(rng.standard_normal((3, channels, 9, 11)) * 40, dtype)
        if np.dtype(dtype).kind == "f":
            pick = rng.random(image.shape)
            image[pick < 0.03] = np.inf
            image[pick > 0.97] = -np.inf
            image[(pick > 0.5) & (pick < 0.52)] = np.nan
        arithmetic = np.float64 if dtype == np.float64 else np.float32
        corners = rng.uniform(-3, 14, (12, 2, 2))
        boxes = np.concatenate([corners.min(1), corners.max(1)], 1).astype(arithmetic)
        boxes[::5] = boxes[::5, [2, 3, 0, 1]]  # flipped
        boxes[::4] = np.round(boxes[::4])  # samples on whole pixels
        box_ind = rng.integers(0, 3, 12)
        grads = rng.standard_normal((12, channels, 3, 2)).astype(arithmetic)
        grads[::3, 1] = np.inf
        grads[1::4, -1, 0] = -np.inf
        grads[2::5, 0, 1] = np.nan
        tangent = rng.standard_normal((12, 4)).astype(arithmetic)
        tangent[3, 1] = np.inf
        for options in (
            dict(spatial_scale=1.0, sampling_ratio=2, aligned=False),
            dict(spatial_scale=0.5, sampling_ratio=-1, aligned=True),
        ):
            problem = (image, boxes, box_ind, (3, 2))
            expected = roi_run(op, "NHWC", *problem, grads, tangent, **options)
            seen += np.isnan(expected).sum()
            out = on_team(
                num_threads,
                3,
                lambda o=options, p=problem: roi_run(
                    op, "NCHW", *p, grads, tangent, num_threads=num_threads, **o
                ),
            )
            same(out, expected, (channels, options))
    # NaNs met on the way (the forward op of integer pixels reads nothing
    # non-finite).
    assert seen or (op == "roi_align" and np.dtype(dtype).kind != "f")


@pytest.mark.parametrize("op", ROI_OPS)
def test_roi_align_default_layout_is_nchw(op):
    rng = np.random.default_rng(8)
    image = rng.standard_normal((2, 3, 7, 6)).astype(np.float32)
    boxes = np.array([[0.5, 1, 5, 6], [2, 0, 3.5, 4.5], [1, 1, 1, 1]], np.float32)
    box_ind = np.array([1, 0, 1])
    grads = rng.standard_normal((3, 3, 2, 3)).astype(np.float32)
    tangent = rng.standard_normal((3, 4)).astype(np.float32)
    args = {
        "roi_align": (image, boxes, box_ind, (2, 3)),
        "roi_align_grad_image": (grads, boxes, box_ind, image.shape),
        "roi_align_grad_boxes": (grads, image, boxes, box_ind),
        "roi_align_jvp_boxes": (image, boxes, box_ind, tangent, (2, 3)),
    }[op]
    default = getattr(cropgrad, op)(*args)
    expected = roi_run(op, "NHWC", image, boxes, box_ind, (2, 3), grads, tangent)
    assert_same_bits(default, expected)


# --------------------------------------------------------------------------
# grid_sample: NCHW (its default) against NHWC transposed (the layouts'
# random problems in every mode: test_grid_sample.py; here the non-finite
# data on teams, the default and the messages)

GRID_OPS = tuple(op.name for op in FAMILIES["grid_sample"].ops.values())
# Each mode once, each padding mode once, both alignments.
GRID_OPTIONS = (
    dict(mode="bilinear", padding_mode="zeros", align_corners=False),
    dict(mode="nearest", padding_mode="border", align_corners=True),
    dict(mode="bicubic", padding_mode="reflection", align_corners=False),
)


def grid_run(op, layout, image, grid, grads, tangent, **kw):
    """grid_sample's `op` on NCHW arrays (`grads` too), run in `layout`; its
    result as NCHW (the grid gradient: as it is)."""
    to = nhwc if layout == "NHWC" else np.asarray
    kw = dict(kw, data_format=layout)
    if op == "grid_sample":
        out = cropgrad.grid_sample(to(image), grid, **kw)
    elif op == "grid_sample_grad_image":
        out = cropgrad.grid_sample_grad_image(to(grads), grid, to(image).shape, **kw)
    elif op == "grid_sample_grad_grid":
        return cropgrad.grid_sample_grad_grid(to(grads), to(image), grid, **kw)
    else:
        out = cropgrad.grid_sample_jvp_grid(to(image), grid, tangent, **kw)
    return nchw(out) if layout == "NHWC" else out


@pytest.mark.parametrize("num_threads", [1, 3])
@pytest.mark.parametrize("dtype", ["float16", "float32", "float64", "uint8", ">f4"])
def test_images_in_the_other_layouts_memory(dtype, num_threads):
    # An image that views the other layout's memory (PyTorch's
    # channels_last seen as NCHW, or NCHW memory seen as NHWC) is copied
    # C-contiguous by the parallel layout change (its own dtype of 2, 4 or
    # 8 bytes) or by NumPy: the contiguous image's bits either way.
    rng = np.random.default_rng(11)
    nchw = as_image_dtype(rng.standard_normal((3, 5, 9, 7)) * 40, np.dtype(dtype))
    nhwc = np.ascontiguousarray(nchw.transpose(0, 2, 3, 1))
    nchw = np.ascontiguousarray(nchw)
    boxes = np.array([[0.1, 0.2, 0.9, 0.7], [-0.2, 0.0, 0.5, 1.3]], np.float32)
    rois = np.array([[1.0, 0.5, 6.0, 7.5], [0.0, 2.0, 4.5, 8.0]], np.float32)
    index = np.array([2, 0])
    calls = (
        (cropgrad.crop_and_resize, nchw.transpose(0, 2, 3, 1), nhwc, boxes, "NHWC"),
        (cropgrad.roi_align, nhwc.transpose(0, 3, 1, 2), nchw, rois, "NCHW"),
    )
    for op, view, contiguous, coords, layout in calls:
        assert not view.flags.c_contiguous
        kw = dict(data_format=layout, num_threads=num_threads)
        assert_same_bits(
            op(view, coords, index, (4, 3), **kw),
            op(contiguous, coords, index, (4, 3), **kw),
            (op.__name__, dtype),
        )


@pytest.mark.parametrize("num_threads", [1, 3])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, np.uint8])
@pytest.mark.parametrize("op", GRID_OPS)
def test_grid_sample_non_finite_values(op, dtype, num_threads):
    # NaN and infinite pixels (float dtypes), gradients and tangents, points
    # inside, around and far outside the image: each layout on every team
    # gives its bits on one thread, NaN bits included, and NCHW gives
    # NHWC's values (where two NaNs meet, which one is kept is the
    # compiler's choice in each layout's loops: docs/semantics.md).  Three
    # images of three rows of points and 5 channels: tasks for a team of 3
    # from every op.
    rng = np.random.default_rng([num_threads, np.dtype(dtype).num, len(op)])
    image = as_image_dtype(rng.standard_normal((3, 5, 7, 6)) * 40, dtype)
    if np.dtype(dtype).kind == "f":
        pick = rng.random(image.shape)
        image[pick < 0.03] = np.inf
        image[pick > 0.97] = -np.inf
        image[(pick > 0.5) & (pick < 0.52)] = np.nan
    arithmetic = np.float64 if dtype == np.float64 else np.float32
    grid = rng.uniform(-1.3, 1.3, (3, 3, 4, 2)).astype(arithmetic)
    grid[0, 0, 0] = (40.0, -25.0)  # far outside
    grid[1, 1, 1] = (1.0, -1.0)  # on the edges
    grads = rng.standard_normal((3, 5, 3, 4)).astype(arithmetic)
    grads[::2, 1] = np.inf
    grads[1, -1, 0] = -np.inf
    grads[2, 0, 1] = np.nan
    tangent = rng.standard_normal(grid.shape).astype(arithmetic)
    tangent[0, 2, 1, 0] = np.inf
    tangent[2, 1, 3, 1] = np.nan
    seen = 0
    for options in GRID_OPTIONS:
        problem = (image, grid, grads, tangent)
        alone = {
            layout: grid_run(op, layout, *problem, num_threads=1, **options)
            for layout in ("NCHW", "NHWC")
        }
        seen += np.isnan(alone["NHWC"]).sum()
        assert_same_values(alone["NCHW"], alone["NHWC"], options)
        for layout, expected in alone.items():
            out = on_team(
                num_threads,
                3,
                lambda o=options, p=problem, f=layout: grid_run(
                    op, f, *p, num_threads=num_threads, **o
                ),
            )
            assert_same_bits(out, expected, (layout, options))
    # NaNs met on the way (the forward op of integer pixels reads nothing
    # non-finite).
    assert seen or (op == "grid_sample" and np.dtype(dtype).kind != "f")


@pytest.mark.parametrize("op", GRID_OPS)
def test_grid_sample_default_layout_is_nchw(op):
    rng = np.random.default_rng(9)
    image = rng.standard_normal((2, 3, 7, 6)).astype(np.float32)
    grid = rng.uniform(-1.1, 1.1, (2, 2, 3, 2)).astype(np.float32)
    grads = rng.standard_normal((2, 3, 2, 3)).astype(np.float32)
    tangent = rng.standard_normal(grid.shape).astype(np.float32)
    args = {
        "grid_sample": (image, grid),
        "grid_sample_grad_image": (grads, grid, image.shape),
        "grid_sample_grad_grid": (grads, image, grid),
        "grid_sample_jvp_grid": (image, grid, tangent),
    }[op]
    default = getattr(cropgrad, op)(*args, mode="bicubic")
    expected = grid_run(op, "NHWC", image, grid, grads, tangent, mode="bicubic")
    assert_same_bits(default, expected)


# --------------------------------------------------------------------------
# Validation speaks of the NCHW shapes


def test_messages_speak_of_nchw_shapes():
    boxes = [[0.0, 0.0, 1.0, 1.0]]
    grads = np.ones((1, 3, 2, 2), np.float32)  # NCHW: depth 3, crop 2 x 2
    with pytest.raises(ValueError, match=r"\[num_boxes, depth, crop_height, crop_"):
        cropgrad.crop_and_resize_grad_image(
            grads[0], boxes, [0], [1, 3, 5, 5], data_format="NCHW"
        )
    with pytest.raises(ValueError, match="image_size depth is 4 but grads depth is 3"):
        cropgrad.crop_and_resize_grad_image(
            grads, boxes, [0], [1, 4, 5, 5], data_format="NCHW"
        )
    with pytest.raises(
        ValueError,
        match=r"image_size must have 4 elements \[batch, "
        r"depth, image_height, image_width\]",
    ):
        cropgrad.crop_and_resize_grad_image(
            grads, boxes, [0], [1, 3, 5], data_format="NCHW"
        )
    with pytest.raises(
        ValueError,
        match=r"image dimensions must be positive: "
        r"image_size = \[1, 3, 0, 5\]",
    ):
        cropgrad.crop_and_resize_grad_image(
            grads, boxes, [0], [1, 3, 0, 5], data_format="NCHW"
        )
    with pytest.raises(ValueError, match="crop_height and crop_width are 0 and 2"):
        cropgrad.crop_and_resize_grad_image(
            np.ones((1, 3, 0, 2), np.float32),
            boxes,
            [0],
            [1, 3, 5, 5],
            data_format="NCHW",
        )
    with pytest.raises(ValueError, match=r"\[batch, depth, image_height, image_wi"):
        cropgrad.crop_and_resize(
            np.ones((3, 5, 5)), boxes, [0], [2, 2], data_format="NCHW"
        )
    with pytest.raises(
        ValueError,
        match=r"image dimensions must be positive, got "
        r"shape \[1, 3, 5, 0\]",
    ):
        cropgrad.crop_and_resize(
            np.ones((1, 3, 5, 0)), boxes, [0], [2, 2], data_format="NCHW"
        )
    with pytest.raises(
        ValueError, match="image and grads must have the same depth, got 4 and 3"
    ):
        cropgrad.crop_and_resize_grad_boxes(
            grads, np.ones((1, 4, 5, 5)), boxes, [0], data_format="NCHW"
        )
    with pytest.raises(ValueError, match=r"out must have shape \(1, 3, 2, 2\)"):
        cropgrad.crop_and_resize(
            np.ones((1, 3, 5, 5)),
            boxes,
            [0],
            [2, 2],
            out=np.empty((1, 2, 2, 3), np.float32),
            data_format="NCHW",
        )


@pytest.mark.parametrize("data_format", ["NCHW", None])
def test_roi_align_messages_speak_of_nchw_shapes(data_format):
    # NCHW by default too.
    kw = {} if data_format is None else {"data_format": data_format}
    boxes, box_ind = [[0.0, 0.0, 2.0, 3.0], [1.0, 0.5, 4.5, 3.5]], [0, 1]
    image = np.ones((2, 3, 5, 6), np.float32)
    grads = np.ones((2, 3, 2, 2), np.float32)  # NCHW: 3 channels, 2 x 2 bins
    with pytest.raises(
        ValueError,
        match=r"image must be 4-D \[batch, depth, image_height, image_width\] "
        r"\(NCHW\), got shape \(3, 5, 6\)",
    ):
        cropgrad.roi_align(image[0], boxes, box_ind, 2, **kw)
    with pytest.raises(
        ValueError, match=r"image dimensions must be positive, got shape \[2, 3, 0, 6\]"
    ):
        cropgrad.roi_align(image[:, :, :0], boxes, box_ind, 2, **kw)
    with pytest.raises(ValueError, match=r"out must have shape \(2, 3, 2, 2\)"):
        cropgrad.roi_align(
            image, boxes, box_ind, 2, out=np.empty((2, 2, 2, 3), np.float32), **kw
        )
    with pytest.raises(
        ValueError,
        match=r"grads must be 4-D \[num_boxes, channels, out_height, out_width\] "
        r"\(NCHW\)",
    ):
        cropgrad.roi_align_grad_image(grads[0], boxes, box_ind, image.shape, **kw)
    with pytest.raises(
        ValueError,
        match=r"image_size must have 4 elements \[batch, depth, image_height, "
        r"image_width\]",
    ):
        cropgrad.roi_align_grad_image(grads, boxes, box_ind, [2, 3, 5], **kw)
    with pytest.raises(ValueError, match="image_size has 4 channels but grads has 3"):
        cropgrad.roi_align_grad_image(grads, boxes, box_ind, [2, 4, 5, 6], **kw)
    with pytest.raises(
        ValueError,
        match=r"image dimensions must be positive: image_size = \[2, 3, 0, 6\]",
    ):
        cropgrad.roi_align_grad_image(grads, boxes, box_ind, [2, 3, 0, 6], **kw)
    with pytest.raises(
        ValueError,
        match=r"image has 2 channels but grads has 3 \(read as data_format 'NCHW'; "
        r"grads would fit 'NHWC' and image 'NCHW'",
    ):
        cropgrad.roi_align_grad_boxes(grads, image[:, :2], boxes, box_ind, **kw)
    with pytest.raises(ValueError, match=r"\[num_boxes, channels, out_height, out_w"):
        cropgrad.roi_align_grad_boxes(grads[0], image, boxes, box_ind, **kw)
    with pytest.raises(ValueError, match=r"\[batch, depth, image_height, image_wi"):
        cropgrad.roi_align_jvp_boxes(image[0], boxes, box_ind, boxes, 2, **kw)
    with pytest.raises(ValueError, match=r"out must have shape \(2, 3, 2, 2\)"):
        cropgrad.roi_align_jvp_boxes(
            image,
            boxes,
            box_ind,
            boxes,
            2,
            out=np.empty((2, 2, 2, 3), np.float32),
            **kw,
        )


@pytest.mark.parametrize("data_format", ["NCHW", None])
def test_grid_sample_messages_speak_of_nchw_shapes(data_format):
    # NCHW by default too.
    kw = {} if data_format is None else {"data_format": data_format}
    image = np.ones((2, 3, 5, 6), np.float32)
    grid = np.zeros((2, 4, 7, 2), np.float32)
    grads = np.ones((2, 3, 4, 7), np.float32)  # NCHW: 3 channels, 4 x 7 points
    with pytest.raises(ValueError, match=r"image must be 4-D .*\(NCHW\)"):
        cropgrad.grid_sample(image[0], grid, **kw)
    with pytest.raises(ValueError, match=r"image must be 4-D \(N, C, H, W\)"):
        cropgrad.grid_sample(image[:, :, None], grid, **kw)
    with pytest.raises(ValueError, match=r"out must have shape \(2, 3, 4, 7\)"):
        cropgrad.grid_sample(image, grid, out=np.empty((2, 4, 7, 3), np.float32), **kw)
    with pytest.raises(
        ValueError,
        match=r"grads must have the shape of the sampled output "
        r"\(N, C, H_out, W_out\) = \(2, 3, 4, 7\), got \(2, 4, 7, 3\)",
    ):
        cropgrad.grid_sample_grad_image(nhwc(grads), grid, image.shape, **kw)
    with pytest.raises(ValueError, match=r"\(N, C, H_out, W_out\) = \(2, 4, 4, 7\)"):
        cropgrad.grid_sample_grad_image(grads, grid, (2, 4, 5, 6), **kw)
    with pytest.raises(ValueError, match=r"\(N, C, H_out, W_out\) = \(2, 2, 4, 7\)"):
        cropgrad.grid_sample_grad_grid(grads, image[:, :2], grid, **kw)
    with pytest.raises(ValueError, match=r"out must have shape \(2, 3, 4, 7\)"):
        cropgrad.grid_sample_jvp_grid(
            image, grid, grid, out=np.empty((2, 4, 7, 3), np.float32), **kw
        )
    # The NHWC words, for contrast.
    with pytest.raises(ValueError, match=r"\(N, H_out, W_out, C\) = \(2, 4, 7, 3\)"):
        cropgrad.grid_sample_grad_grid(grads, nhwc(image), grid, data_format="NHWC")


def test_nchw_shapes_of_results():
    image = np.ones((2, 3, 5, 7), np.float32)
    boxes = [[0.0, 0.0, 1.0, 1.0]] * 2
    crops = cropgrad.crop_and_resize(image, boxes, [0, 1], [4, 6], data_format="NCHW")
    assert crops.shape == (2, 3, 4, 6)
    assert (crops == 1).all()
    out = cropgrad.crop_and_resize_grad_image(
        crops, boxes, [0, 1], image.shape, data_format="NCHW"
    )
    assert out.shape == image.shape
    # The adjoint identity <crop(x), g> = <x, grad_image(g)> on ones.
    assert np.isclose(out.sum(dtype=np.float64), crops.sum(dtype=np.float64))


class _EqualsAnything(str):
    """A str whose ``==`` says True to anything."""

    def __eq__(self, other):
        return True

    __hash__ = str.__hash__


@pytest.mark.parametrize("value", ["NHWC", "NCHW"])
def test_layout_follows_the_value_not_equality(value):
    # The result's shape and the kernel's layout both follow what the value
    # holds: a shape of the other layout would have the wrong size here
    # (height 1 < depth 7), and the kernel would write past its end.
    data_format = _EqualsAnything(value)
    nhwc = np.arange(21, dtype=np.float32).reshape(1, 1, 3, 7)
    image = (
        nhwc if value == "NHWC" else np.ascontiguousarray(nhwc.transpose(0, 3, 1, 2))
    )
    boxes = [[0.0, 0.0, 1.0, 1.0]]
    crops = cropgrad.crop_and_resize(image, boxes, [0], [1, 3], data_format=data_format)
    expected = cropgrad.crop_and_resize(nhwc, boxes, [0], [1, 3])
    if value == "NCHW":
        expected = expected.transpose(0, 3, 1, 2)
    assert crops.shape == expected.shape
    assert_same_bits(crops, expected)
