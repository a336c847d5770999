"""crop_and_resize_grad_image: TensorFlow's bits, the NumPy reference, threads."""

import threading

import numpy as np
import pytest
from _helpers import (
    SMALL_GRAD_IMAGE_TASKS,
    assert_same_bits,
    assert_same_values,
    load_cases,
    random_problem,
    starting_teams,
    team_of,
)

import cropgrad
from cropgrad import _reference as reference

GRAD_IMAGE = load_cases("grad_image.npz")
SUBNORMAL = sorted(n for n in GRAD_IMAGE if "subnormal" in n)
NORMAL = sorted(n for n in GRAD_IMAGE if "subnormal" not in n)
# NaN and infinite gradients: NaN where TensorFlow has NaN, every other
# element TensorFlow's bits (see assert_same_values).
NONFINITE = sorted(n for n in GRAD_IMAGE if "nonfinite" in n)

# The largest team each case's tasks allow (4 unless listed): a task is a
# band of rows of one image (and, for deep pixels, a range of channels), so
# only the small cases limit it.
TEAM_LIMIT = SMALL_GRAD_IMAGE_TASKS


def fixture_threads(cases, limits, counts=(1, 2, 3, 4)):
    """(case, thread count) for every count the case's tasks can occupy: a
    test named for n threads runs on a team of n."""
    return [
        (name, n)
        for name in sorted(cases)
        for n in counts
        if n == 1 or n <= limits.get(name, 4)
    ]


def compare(name):
    return assert_same_values if name in NONFINITE else assert_same_bits


def _call(case, dtype, **kwargs):
    return cropgrad.crop_and_resize_grad_image(
        case["grads"],
        case["boxes"],
        case["box_ind"],
        case["image_size"],
        dtype=dtype,
        method=str(case["method"]),
        **kwargs,
    )


def _reference(case, **kwargs):
    """The NumPy reference's gradient of a fixture case."""
    return reference.grad_image(
        case["grads"],
        case["boxes"],
        case["box_ind"],
        case["image_size"],
        str(case["method"]),
        **kwargs,
    )


@pytest.mark.parametrize("name, num_threads", fixture_threads(GRAD_IMAGE, TEAM_LIMIT))
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_tensorflow_bits_with_flush(name, dtype, num_threads):
    # Every case on a team of 1 to 4 workers (however small its work), each
    # team asserted to have started.
    case = GRAD_IMAGE[name]
    with starting_teams():
        out, team = team_of(
            lambda: _call(case, dtype, num_threads=num_threads, flush_denormals=True)
        )
    assert team == min(num_threads, TEAM_LIMIT.get(name, 4))
    compare(name)(out, case[f"out_{dtype}"], name)


@pytest.mark.parametrize("name", NORMAL)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_tensorflow_bits_by_default_without_subnormals(name, dtype):
    case = GRAD_IMAGE[name]
    compare(name)(_call(case, dtype), case[f"out_{dtype}"], name)


@pytest.mark.parametrize("name", SUBNORMAL)
def test_default_is_ieee_on_subnormal_cases(name):
    # Without flushing, subnormals count: the result is the IEEE serial sum,
    # which the NumPy reference computes in float32.
    case = GRAD_IMAGE[name]
    expected = _reference(case, dtype=np.float32, exact=True)
    assert_same_bits(_call(case, "float32"), expected.astype(np.float32))


def test_subnormal_gradient_is_flushed_only_on_request():
    grads = np.array([1e-39], dtype=np.float32).reshape(1, 1, 1, 1)
    boxes = [[0.5, 0.5, 0.5, 0.5]]
    ieee = cropgrad.crop_and_resize_grad_image(grads, boxes, [0], [1, 3, 3, 1])
    flushed = cropgrad.crop_and_resize_grad_image(
        grads, boxes, [0], [1, 3, 3, 1], flush_denormals=True
    )
    assert ieee[0, 1, 1, 0] == np.float32(1e-39)
    assert flushed[0, 1, 1, 0] == 0
    raw = cropgrad.raw_ops.CropAndResizeGradImage(
        grads=grads, boxes=boxes, box_ind=[0], image_size=[1, 3, 3, 1], T="float32"
    )
    assert raw[0, 1, 1, 0] == 0


@pytest.mark.parametrize("op", ["grad_image", "forward", "grad_boxes"])
def test_callers_flush_mode_does_not_leak_into_the_result(op):
    # A caller whose thread computes with flush-to-zero (XLA's and
    # TensorFlow's threads do) still gets IEEE arithmetic by default, on
    # every thread of the team: the bits must not depend on the thread count.
    from cropgrad._kernels import testing as _testing

    rng = np.random.default_rng(5)
    # Many subnormal gradients spread over many rows: with two threads both
    # the calling thread and a worker sum some of them.
    grads = (rng.standard_normal((64, 9, 9, 8)) * 1e-39).astype(np.float32)
    image = (rng.standard_normal((2, 40, 40, 8)) * 1e-38).astype(np.float32)
    normal_grads = rng.standard_normal((64, 9, 9, 8)).astype(np.float32)
    boxes = np.sort(rng.uniform(0, 1, (64, 4)), axis=1).astype(np.float32)
    box_ind = rng.integers(0, 2, 64)

    def run(threads):
        if op == "grad_image":
            return cropgrad.crop_and_resize_grad_image(
                grads, boxes, box_ind, [2, 40, 40, 8], num_threads=threads
            )
        if op == "forward":
            return cropgrad.crop_and_resize(
                image, boxes, box_ind, [9, 9], num_threads=threads
            )
        # Normal gradients times subnormal pixel differences.
        return cropgrad.crop_and_resize_grad_boxes(
            normal_grads, image, boxes, box_ind, num_threads=threads
        )

    ieee = run(1)
    assert np.any((ieee != 0) & (np.abs(ieee) < np.finfo(np.float32).tiny))
    for threads in (1, 2, 3):
        under_ftz, team = team_of(
            lambda t=threads: _testing.with_flush_to_zero(lambda: run(t))
        )
        if under_ftz is None:
            pytest.skip("no flush-to-zero control on this architecture")
        assert team == threads
        np.testing.assert_array_equal(under_ftz.view(np.uint32), ieee.view(np.uint32))


@pytest.mark.parametrize("name", sorted(GRAD_IMAGE))
def test_float16_is_float32_rounded_once(name):
    case = GRAD_IMAGE[name]
    out16 = _call(case, "float16", flush_denormals=True)
    assert out16.dtype == np.float16
    compare(name)(out16, case["out_float32"].astype(np.float16), name)


@pytest.mark.parametrize("name", sorted(set(NORMAL) - set(NONFINITE)))
def test_float16_at_least_as_accurate_as_tensorflow(name):
    case = GRAD_IMAGE[name]
    exact = _reference(case)
    out16 = _call(case, "float16").astype(np.float64)
    ours = np.abs(out16 - exact)
    theirs = np.abs(case["out_float16"].astype(np.float64) - exact)
    assert np.nanmax(ours, initial=0) <= np.nanmax(theirs, initial=0)
    # Rounded once: within half a float16 ulp of the float32 sum (which is
    # TensorFlow's float32 result).  Not within an ulp of the exact value:
    # where the terms cancel, the float32 sum's own error can be larger.
    sum32 = case["out_float32"]
    half_ulp = np.spacing(np.abs(sum32).astype(np.float16)).astype(np.float64) / 2
    assert np.all(np.abs(out16 - sum32) <= half_ulp)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("method", ["bilinear", "nearest"])
def test_matches_numpy_reference(seed, method, out_dtype):
    rng = np.random.default_rng(seed)
    grads, boxes, box_ind, size = random_problem(rng, num_boxes=5 + seed)
    out = cropgrad.crop_and_resize_grad_image(
        grads, boxes, box_ind, size, out_dtype, method
    )
    # float16: the float32 sum rounded once (docs/semantics.md).
    acc = np.float64 if out_dtype == np.float64 else np.float32
    exact = reference.grad_image(
        grads, boxes, box_ind, size, method, dtype=acc, exact=True
    )
    assert_same_bits(out, exact.astype(out_dtype))
    if out_dtype != np.float16:
        approx = reference.grad_image(grads, boxes, box_ind, size, method)
        np.testing.assert_allclose(out, approx, rtol=1e-5, atol=1e-5)


# Shapes that force every partition: many rows and few channels (row bands),
# few rows and many channels (channel ranges), uneven everything; each with
# the thread counts its tasks can occupy (a channel range is at least 16
# channels: 97 channels of 2 rows make 6 bilinear tasks, 33 channels of
# 2 rows make 4).
THREAD_SHAPES = [
    (dict(batch=3, height=37, width=5, depth=3, num_boxes=40, crop=(9, 7)), 7),
    (dict(batch=1, height=2, width=3, depth=97, num_boxes=23, crop=(5, 4)), 6),
    (dict(batch=2, height=1, width=50, depth=33, num_boxes=17, crop=(3, 11)), 4),
    (dict(batch=5, height=64, width=64, depth=1, num_boxes=3, crop=(33, 29)), 7),
]


@pytest.mark.parametrize(
    "shape, most",
    THREAD_SHAPES,
    ids=["x".join(map(str, s.values())) for s, _ in THREAD_SHAPES],
)
@pytest.mark.parametrize("method", ["bilinear", "nearest"])
def test_same_bits_for_any_thread_count(shape, most, method, out_dtype):
    rng = np.random.default_rng(7)
    grads, boxes, box_ind, size = random_problem(rng, spread=0.05, **shape)
    results = []
    # Teams of every size, however small the shape's work.
    with starting_teams():
        for n in sorted({1, 2, 3, 4, most}):
            out, team = team_of(
                lambda n=n: cropgrad.crop_and_resize_grad_image(
                    grads, boxes, box_ind, size, out_dtype, method, num_threads=n
                )
            )
            assert team == n, (n, team)
            results.append(out)
    for other in results[1:]:
        assert_same_bits(other, results[0])
    if out_dtype == np.float32:
        exact = reference.grad_image(
            grads, boxes, box_ind, size, method, dtype=np.float32, exact=True
        )
        assert_same_bits(results[0], exact.astype(np.float32))


@pytest.mark.parametrize("depth", [32, 67, 256])
def test_out_at_any_offset_in_a_cache_line_same_bits(depth, out_dtype):
    # Where `out` starts within a 64-byte line (NumPy's large arrays start
    # 16 bytes past one) never changes the bits: the deep scatter's vector
    # loop meets the line boundaries at other channels.
    rng = np.random.default_rng(depth)
    # Crops larger than the image: many samples add to each pixel.
    grads, boxes, box_ind, size = random_problem(
        rng, batch=2, height=9, width=8, depth=depth, num_boxes=12, crop=(15, 13)
    )
    if out_dtype == np.float32:
        exact = reference.grad_image(
            grads, boxes, box_ind, size, dtype=np.float32, exact=True
        )
        assert_same_bits(
            cropgrad.crop_and_resize_grad_image(grads, boxes, box_ind, size),
            exact.astype(np.float32),
        )
    # Non-finite gradients too: which NaN an addition of two returns depends
    # on the order of its operands, which every split keeps.
    nonfinite = grads.copy()
    pick = rng.random(grads.shape)
    nonfinite[pick < 0.05] = np.inf
    nonfinite[pick > 0.95] = -np.inf
    nonfinite[(pick > 0.5) & (pick < 0.52)] = np.nan
    nbytes = int(np.prod(size)) * out_dtype.itemsize
    block = np.empty(nbytes + 128, np.uint8)
    line = -block.ctypes.data % 64
    for g in (grads, nonfinite):
        expected = cropgrad.crop_and_resize_grad_image(
            g, boxes, box_ind, size, out_dtype
        )
        for offset in range(0, 64, out_dtype.itemsize):
            at = line + offset
            out = block[at : at + nbytes].view(out_dtype).reshape(size)
            got = cropgrad.crop_and_resize_grad_image(
                g, boxes, box_ind, size, out_dtype, out=out
            )
            assert got is out
            assert_same_bits(out, expected, f"out {offset} bytes past a line")


def _enlarging_problem(rng, depth, batch=3, height=23, width=19, num_boxes=12):
    """Crops much larger than their boxes: many samples per pixel.

    Half the boxes are flipped, some reach past the image edges, and some
    edges sit exactly on pixels (integer sampling coordinates, where the
    two taps of an axis coincide).
    """
    crop = (31, 29)
    grads = rng.standard_normal((num_boxes, *crop, depth)).astype(np.float32)
    y1 = rng.uniform(-0.2, 0.9, num_boxes)
    x1 = rng.uniform(-0.2, 0.9, num_boxes)
    y2 = y1 + rng.uniform(0.05, 0.4, num_boxes)
    x2 = x1 + rng.uniform(0.05, 0.4, num_boxes)
    boxes = np.stack([y1, x1, y2, x2], axis=1).astype(np.float32)
    boxes[::2] = boxes[::2][:, [2, 3, 0, 1]]
    boxes[1::4] = [0, 0, 1, 1]
    boxes[3::4, 1::2] = [0.5, 1.0]
    box_ind = rng.integers(0, batch, num_boxes).astype(np.int32)
    return grads, boxes, box_ind, [batch, height, width, depth]


@pytest.mark.parametrize("width", [19, 2, 1])
@pytest.mark.parametrize("depth", [1, 2, 3, 4, 5])
def test_enlarging_crops_of_shallow_images(depth, width, out_dtype):
    # Pixels of 1 to 4 channels are summed a crop row at a time with the
    # current pixels held in registers (two columns of a row in one vector
    # on AVX2): same bits as the serial reference and for any partition of
    # the rows among threads.  Images of 1 and 2 columns: every sample is
    # at the last column, or next to it.
    rng = np.random.default_rng(depth)
    grads, boxes, box_ind, size = _enlarging_problem(rng, depth, width=width)
    results = []
    with starting_teams():
        for n in (1, 2, 3, 5):
            out, team = team_of(
                lambda n=n: cropgrad.crop_and_resize_grad_image(
                    grads, boxes, box_ind, size, out_dtype, num_threads=n
                )
            )
            assert team == n, (n, team)
            results.append(out)
    for other in results[1:]:
        assert_same_bits(other, results[0])
    acc = np.float64 if out_dtype == np.float64 else np.float32
    exact = reference.grad_image(grads, boxes, box_ind, size, dtype=acc, exact=True)
    assert_same_bits(results[0], exact.astype(out_dtype))


@pytest.mark.parametrize(
    "depth, height", [(1, 23), (3, 23), (4, 23), (8, 23), (160, 2)]
)
def test_non_finite_gradients_same_bits_for_any_thread_count(depth, height):
    # inf - inf makes a NaN whose sign and payload depend on the operands'
    # order in each addition: the bits must still not depend on the threads,
    # whether the rows are split into bands or (few deep rows) channel ranges.
    rng = np.random.default_rng(11)
    grads, boxes, box_ind, size = _enlarging_problem(rng, depth, height=height)
    pick = rng.random(grads.shape)
    grads[pick < 0.05] = np.inf
    grads[pick > 0.95] = -np.inf
    grads[(pick > 0.5) & (pick < 0.52)] = np.nan
    for dtype in ("float32", "float64", "float16"):
        one = cropgrad.crop_and_resize_grad_image(
            grads, boxes, box_ind, size, dtype, num_threads=1
        )
        assert np.isnan(one).any()
        # The NaN bits the serial reference computes, too.
        acc = np.float64 if dtype == "float64" else np.float32
        with np.errstate(invalid="ignore"):
            exact = reference.grad_image(
                grads, boxes, box_ind, size, dtype=acc, exact=True
            ).astype(dtype)
        assert_same_values(one, exact, dtype)
        for n in (2, 3, 4):
            with starting_teams():
                many, team = team_of(
                    lambda n=n: cropgrad.crop_and_resize_grad_image(
                        grads, boxes, box_ind, size, dtype, num_threads=n
                    )
                )
            assert team == n, (dtype, n, team)
            assert many.tobytes() == one.tobytes(), (dtype, n)


def test_large_overlapping_boxes_same_bits_across_threads():
    # The race TensorFlow's default kernel has: many boxes on the same pixels.
    rng = np.random.default_rng(3)
    grads = rng.standard_normal((256, 14, 14, 32)).astype(np.float32)
    boxes = np.tile(np.array([[0.1, 0.1, 0.9, 0.9]], np.float32), (256, 1))
    boxes += rng.uniform(-0.05, 0.05, boxes.shape).astype(np.float32)
    box_ind = np.zeros(256, np.int32)
    one = cropgrad.crop_and_resize_grad_image(
        grads, boxes, box_ind, [1, 32, 32, 32], num_threads=1
    )
    for n in (2, 3, 4):
        # Work enough for a team at the default serial threshold.
        many, team = team_of(
            lambda n=n: cropgrad.crop_and_resize_grad_image(
                grads, boxes, box_ind, [1, 32, 32, 32], num_threads=n
            )
        )
        assert team == n
        assert_same_bits(many, one)


def test_out_is_overwritten_and_returned(out_dtype):
    rng = np.random.default_rng(1)
    grads, boxes, box_ind, size = random_problem(rng)
    expected = cropgrad.crop_and_resize_grad_image(
        grads, boxes, box_ind, size, out_dtype
    )
    out = np.full(size, 7, dtype=out_dtype)
    result = cropgrad.crop_and_resize_grad_image(
        grads, boxes, box_ind, size, out_dtype, out=out
    )
    assert result is out
    assert_same_bits(out, expected)


def test_input_forms_give_the_same_result():
    rng = np.random.default_rng(2)
    grads, boxes, box_ind, size = random_problem(rng)
    expected = cropgrad.crop_and_resize_grad_image(grads, boxes, box_ind, size)
    wide = np.zeros(
        (grads.shape[0], grads.shape[1], grads.shape[2], 2 * grads.shape[3]), np.float32
    )
    wide[..., ::2] = grads
    strided = wide[..., ::2]
    assert not strided.flags.c_contiguous
    readonly = grads.copy()
    readonly.flags.writeable = False
    fortran = np.asfortranarray(boxes)
    variants = [
        (strided, boxes, box_ind, size),
        (readonly, boxes, box_ind, size),
        (grads.astype(">f4"), boxes.astype(">f4"), box_ind.astype(">i4"), size),
        (grads.astype(np.float64), fortran, box_ind.astype(np.int64), np.array(size)),
        (grads.tolist(), boxes.tolist(), box_ind.tolist(), tuple(size)),
        (grads, boxes, box_ind.astype(np.uint8), np.array(size, dtype=np.int32)),
    ]
    for args in variants:
        assert_same_bits(cropgrad.crop_and_resize_grad_image(*args), expected)


def test_contiguous_float32_inputs_are_not_copied(monkeypatch):
    rng = np.random.default_rng(2)
    grads, boxes, box_ind, size = random_problem(rng)
    seen = {}
    real = cropgrad._core.crop_and_resize_grad_image

    def spy(g, b, *args):
        seen["grads"], seen["boxes"] = g, b
        return real(g, b, *args)

    monkeypatch.setattr(cropgrad._core, "crop_and_resize_grad_image", spy)
    cropgrad.crop_and_resize_grad_image(grads, boxes, box_ind, size)
    assert seen["grads"] is grads
    assert seen["boxes"] is boxes


@pytest.mark.parametrize(
    "dtype, expected",
    [
        ("float16", np.float16),
        ("half", np.float16),
        ("float32", np.float32),
        ("float", np.float32),
        ("float64", np.float64),
        ("double", np.float64),
        (np.float32, np.float32),
        (np.dtype("float64"), np.float64),
        ("f2", np.float16),
    ],
)
def test_dtype_names(dtype, expected):
    out = cropgrad.crop_and_resize_grad_image(
        np.ones((1, 1, 1, 1)), [[0, 0, 1, 1]], [0], [1, 2, 2, 1], dtype=dtype
    )
    assert out.dtype == expected


def test_dtype_as_numpy_dtype_attribute():
    class FakeTFDType:
        as_numpy_dtype = np.float64

    out = cropgrad.crop_and_resize_grad_image(
        np.ones((1, 1, 1, 1)), [[0, 0, 1, 1]], [0], [1, 2, 2, 1], FakeTFDType()
    )
    assert out.dtype == np.float64


def test_empty_problems(out_dtype):
    no_boxes = cropgrad.crop_and_resize_grad_image(
        np.zeros((0, 3, 3, 2)),
        np.zeros((0, 4)),
        np.zeros(0, np.int32),
        [2, 4, 5, 2],
        out_dtype,
    )
    assert no_boxes.shape == (2, 4, 5, 2) and no_boxes.dtype == out_dtype
    assert not no_boxes.any()
    no_depth = cropgrad.crop_and_resize_grad_image(
        np.zeros((1, 3, 3, 0)), [[0, 0, 1, 1]], [0], [1, 4, 5, 0], out_dtype
    )
    assert no_depth.shape == (1, 4, 5, 0)
    no_batch = cropgrad.crop_and_resize_grad_image(
        np.zeros((0, 3, 3, 2)), np.zeros((0, 4)), [], [0, 4, 5, 2], out_dtype
    )
    assert no_batch.shape == (0, 4, 5, 2)


def test_huge_finite_boxes_are_skipped():
    grads = np.ones((3, 4, 4, 2), np.float32)
    boxes = np.array(
        [[-3e38, -3e38, 3e38, 3e38], [1e30, 1e30, -1e30, -1e30], [0, 0, 3.4e38, 1]],
        np.float32,
    )
    for method in ("bilinear", "nearest"):
        out = cropgrad.crop_and_resize_grad_image(
            grads, boxes, [0, 0, 0], [1, 5, 5, 2], method=method
        )
        expected = reference.grad_image(grads, boxes, [0, 0, 0], [1, 5, 5, 2], method)
        np.testing.assert_array_equal(out, expected.astype(np.float32))


def test_concurrent_python_threads_get_exact_results():
    rng = np.random.default_rng(11)
    problems = [random_problem(rng, num_boxes=30 + i, depth=8 + i) for i in range(8)]
    expected = [
        cropgrad.crop_and_resize_grad_image(*p, num_threads=1) for p in problems
    ]
    results = [None] * len(problems)

    def work(i):
        for _ in range(20):
            results[i] = cropgrad.crop_and_resize_grad_image(
                *problems[i], num_threads=1 + i % 3
            )

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(problems))]
    # Teams for these small problems too (the threshold set before the
    # threads start and restored after they end).
    with starting_teams() as parallel:
        started = parallel.teams_started()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert parallel.teams_started() > started
    for got, want in zip(results, expected):
        assert_same_bits(got, want)


@pytest.mark.parametrize("data_format", ["NHWC", "NCHW"])
def test_no_boxes_is_zeros_in_every_dtype(out_dtype, data_format):
    # Written without the float32 accumulator of a float16 output: the same
    # +0.0 bits as a call whose boxes all miss the image.
    size = [2, 7, 5, 6] if data_format == "NHWC" else [2, 6, 7, 5]
    depth = size[3] if data_format == "NHWC" else size[1]
    kw = dict(data_format=data_format)
    shape = (2, 2, depth) if data_format == "NHWC" else (depth, 2, 2)
    out = np.full(size, 3, out_dtype)
    none = cropgrad.crop_and_resize_grad_image(
        np.zeros((0, *shape), np.float32),
        np.zeros((0, 4)),
        [],
        size,
        out_dtype,
        out=out,
        **kw,
    )
    grads = np.ones((1, *shape))
    missed = cropgrad.crop_and_resize_grad_image(
        grads, [[2, 2, 3, 3]], [0], size, out_dtype, **kw
    )
    assert none is out and not out.view(f"u{out.itemsize}").any()
    assert_same_bits(none, missed)


def test_no_boxes_float16_allocates_no_scratch():
    # A zero-box float16 call for a large image writes its zeros straight
    # into the output: its peak memory grows by the output (64 MiB), not by
    # a float32 accumulator of twice that besides.
    code = """
import resource
import numpy as np
import cropgrad
cropgrad.crop_and_resize_grad_image(
    np.zeros((0, 1, 1, 1), np.float32), np.zeros((0, 4)), [], [1, 8, 8, 1],
    np.float16)
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
out = cropgrad.crop_and_resize_grad_image(
    np.zeros((0, 1, 1, 4), np.float32), np.zeros((0, 4)), [], [1, 4096, 2048, 4],
    np.float16)
grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
assert not out.view(np.uint16).any()
print(grown)
"""
    import subprocess
    import sys

    run = subprocess.run(
        [sys.executable, "-P", "-c", code], capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, run.stderr
    grown_kib = int(run.stdout)
    # (ru_maxrss is a peak, in KiB: the growth may show less than the
    # output, never the 192 MiB of output and accumulator together.)
    assert grown_kib <= 100 * 1024, grown_kib
