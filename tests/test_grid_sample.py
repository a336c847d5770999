"""cropgrad.grid_sample and its derivatives against PyTorch's bits.

Every committed PyTorch fixture (``tests/data/grid_sample.npz``, the AVX2
dispatch) bit for bit, forward, image gradient and grid gradient, float32
and float64; random problems bit for bit against the NumPy reference (which
the fixtures hold to PyTorch, tests/test_reference_grid_sample.py); NHWC
the transpose of NCHW; the same bits on 1 to 7 threads, every team
asserted to have started; the adjoint identities and central differences in
float64; the argument checks; huge finite coordinates.
"""

import concurrent.futures
import itertools

import ml_dtypes
import numpy as np
import pytest
from _helpers import assert_same_bits, load_cases, starting_teams, team_of

import cropgrad
from cropgrad._kernels.grid_sample import kernels as _kernels
from cropgrad._reference import grid_sample as ref
from cropgrad._runtime import simd as _simd

CASES = load_cases("grid_sample.npz")
NAMES = sorted(CASES)
COMBOS = list(itertools.product(ref.MODES, ref.PADDING_MODES, (False, True)))
DTYPES = (np.float32, np.float64)


@pytest.fixture(autouse=True, params=["simd", "portable"])
def code_path(request):
    """Every test on the SIMD clone (where this CPU runs it) and on the
    portable loops: both must give the bits."""
    before = _kernels.use_simd(request.param == "simd")
    yield request.param
    _kernels.use_simd(before)


def test_the_simd_clone_runs_where_the_cpu_has_it(code_path):
    on = _kernels.use_simd(code_path == "simd")
    if code_path == "portable":
        assert not on
    elif _simd.simd_target() in ("avx2", "avx512"):
        assert on


def _options(case):
    return {
        "mode": str(case["mode"]),
        "padding_mode": str(case["padding_mode"]),
        "align_corners": bool(case["align_corners"]),
    }


def _ref_args(kw):
    return kw["mode"], kw["padding_mode"], kw["align_corners"]


# --------------------------------------------------------------------------
# PyTorch's fixtures


@pytest.mark.parametrize("name", NAMES)
def test_fixtures_are_pytorch_bits(name):
    case = CASES[name]
    kw = _options(case)
    image, grid, grads = case["image"], case["grid"], case["grads"]
    out = cropgrad.grid_sample(image, grid, **kw)
    assert_same_bits(out, case["out"], f"{name} forward")
    grad_image = cropgrad.grid_sample_grad_image(grads, grid, image.shape, **kw)
    assert_same_bits(grad_image, case["grad_image"], f"{name} grad_image")
    grad_grid = cropgrad.grid_sample_grad_grid(grads, image, grid, **kw)
    assert_same_bits(grad_grid, case["grad_grid"], f"{name} grad_grid")


def test_fixtures_cover_every_combination():
    seen = {(*_options(c).values(), c["image"].dtype.name) for c in CASES.values()}
    for combo in COMBOS:
        for dtype in ("float32", "float64"):
            assert (*combo, dtype) in seen


# --------------------------------------------------------------------------
# Random problems against the reference


def _problem(dtype, seed, n=2, c=3, h=5, w=6, ho=4, wo=5):
    """An image, a grid reaching past the edges (with points crowded into
    one pixel and points on pixel centres) and a cotangent."""
    rng = np.random.default_rng(seed)
    image = rng.standard_normal((n, c, h, w)).astype(dtype)
    grid = rng.uniform(-1.4, 1.4, (n, ho, wo, 2)).astype(dtype)
    grid[:, 0, :3] = rng.uniform(0.1, 0.14, (n, min(3, wo), 2))  # crowded
    grid[:, -1, 0] = (-1.0, 1.0)
    grads = rng.standard_normal((n, c, ho, wo)).astype(dtype)
    tangent = rng.standard_normal((n, ho, wo, 2)).astype(dtype)
    return image, grid, grads, tangent


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("mode, padding_mode, align_corners", COMBOS)
def test_random_problems_are_the_references_bits(
    mode, padding_mode, align_corners, dtype
):
    kw = dict(mode=mode, padding_mode=padding_mode, align_corners=align_corners)
    image, grid, grads, _ = _problem(dtype, 7)
    args = _ref_args(kw)
    assert_same_bits(
        cropgrad.grid_sample(image, grid, **kw),
        ref.grid_sample(image, grid, *args),
        "forward",
    )
    assert_same_bits(
        cropgrad.grid_sample_grad_image(grads, grid, image.shape, **kw),
        ref.grid_sample_grad_image(grads, grid, image.shape, *args),
        "grad_image",
    )
    assert_same_bits(
        cropgrad.grid_sample_grad_grid(grads, image, grid, **kw),
        ref.grid_sample_grad_grid(grads, image, grid, *args),
        "grad_grid",
    )


# --------------------------------------------------------------------------
# Layouts, dtypes, out=


def _nhwc(a):
    return np.ascontiguousarray(a.transpose(0, 2, 3, 1))


def _assert_nhwc_is_nchw_transposed(image, grid, grads, tangent, **kw):
    nhwc = dict(kw, data_format="NHWC")
    assert_same_bits(
        cropgrad.grid_sample(_nhwc(image), grid, **nhwc),
        _nhwc(cropgrad.grid_sample(image, grid, **kw)),
        "forward",
    )
    assert_same_bits(
        cropgrad.grid_sample_grad_image(_nhwc(grads), grid, _nhwc(image).shape, **nhwc),
        _nhwc(cropgrad.grid_sample_grad_image(grads, grid, image.shape, **kw)),
        "grad_image",
    )
    assert_same_bits(
        cropgrad.grid_sample_grad_grid(_nhwc(grads), _nhwc(image), grid, **nhwc),
        cropgrad.grid_sample_grad_grid(grads, image, grid, **kw),
        "grad_grid",
    )
    assert_same_bits(
        cropgrad.grid_sample_jvp_grid(_nhwc(image), grid, tangent, **nhwc),
        _nhwc(cropgrad.grid_sample_jvp_grid(image, grid, tangent, **kw)),
        "jvp_grid",
    )
    # NCHW views of NHWC memory (PyTorch's channels_last, read in place
    # where the NHWC kernels are the faster) likewise, and the other way
    # round.
    view = _nhwc(image).transpose(0, 3, 1, 2)
    assert_same_bits(
        cropgrad.grid_sample(view, grid, **kw),
        cropgrad.grid_sample(image, grid, **kw),
        "forward, NCHW view",
    )
    assert_same_bits(
        cropgrad.grid_sample_grad_grid(grads, view, grid, **kw),
        cropgrad.grid_sample_grad_grid(grads, image, grid, **kw),
        "grad_grid, NCHW view",
    )
    assert_same_bits(
        cropgrad.grid_sample_jvp_grid(view, grid, tangent, **kw),
        cropgrad.grid_sample_jvp_grid(image, grid, tangent, **kw),
        "jvp_grid, NCHW view",
    )
    assert_same_bits(
        cropgrad.grid_sample(image.transpose(0, 2, 3, 1), grid, **nhwc),
        _nhwc(cropgrad.grid_sample(image, grid, **kw)),
        "forward, NHWC view",
    )


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("mode, padding_mode, align_corners", COMBOS)
@pytest.mark.parametrize("num_threads", [1, 3])
def test_nhwc_is_nchw_transposed(mode, padding_mode, align_corners, dtype, num_threads):
    # NHWC has kernels of its own: the same bits, on one thread and on more
    # threads than images (the image gradient then cuts them into bands).
    kw = dict(
        mode=mode,
        padding_mode=padding_mode,
        align_corners=align_corners,
        num_threads=num_threads,
    )
    _assert_nhwc_is_nchw_transposed(*_problem(dtype, 3, c=11), **kw)


@pytest.mark.parametrize("op", ["grid_sample", "grid_sample_grad_grid"])
def test_channels_last_images_are_read_in_place(op):
    # An NCHW view of NHWC memory (PyTorch's channels_last) of 16 channels
    # goes to the NHWC kernels where it is: the call allocates the layout
    # change of the few samples (or of their gradient), not a copy of the
    # image, and gives the contiguous image's bits.
    import tracemalloc

    rng = np.random.default_rng(4)
    memory = rng.standard_normal((2, 64, 64, 16)).astype(np.float32)
    view = memory.transpose(0, 3, 1, 2)
    grid = rng.uniform(-1.1, 1.1, (2, 4, 4, 2)).astype(np.float32)
    grads = rng.standard_normal((2, 16, 4, 4)).astype(np.float32)
    out = np.empty(grads.shape if op == "grid_sample" else grid.shape, np.float32)

    def call(image):
        if op == "grid_sample":
            return cropgrad.grid_sample(image, grid, out=out)
        return cropgrad.grid_sample_grad_grid(grads, image, grid, out=out)

    expected = call(np.ascontiguousarray(view)).copy()
    tracemalloc.start()
    try:
        call(view)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < memory.nbytes // 8, peak
    assert_same_bits(out, expected, op)


@pytest.mark.parametrize("mode", ref.MODES)
def test_nhwc_results_square_in_every_axis(mode):
    # As many channels as rows and columns (and output points): the NCHW
    # and NHWC shapes are the same tuple, and an NHWC result computed by
    # the NCHW kernels must still be transposed back.
    kw = dict(mode=mode, padding_mode="border", align_corners=True)
    problem = _problem(np.float32, 5, n=3, c=4, h=4, w=4, ho=4, wo=4)
    _assert_nhwc_is_nchw_transposed(*problem, **kw)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("shape", [(1, 1, 1, 1), (2, 1, 70, 3), (1, 65, 65, 33)])
@pytest.mark.parametrize("num_threads", [1, 2, 3])
def test_layout_changes_copy_every_element_on_any_team(dtype, shape, num_threads):
    # Tiles of 64 pixels and tasks of 4096: sizes astride both, every
    # itemsize, on teams of 1 to 3 threads.
    from cropgrad._kernels.layout import change_layout

    nhwc = np.random.default_rng(7).standard_normal(shape).astype(dtype)
    nchw = np.full(nhwc.transpose(0, 3, 1, 2).shape, np.nan, dtype)
    back = np.full_like(nhwc, np.nan)
    with starting_teams() as parallel:
        _, team = team_of(lambda: change_layout(nhwc, nchw, True, num_threads))
        assert team == min(num_threads, shape[0] * -(-shape[1] * shape[2] // 4096))
        change_layout(nchw, back, False, num_threads)
    assert_same_bits(nchw, nhwc.transpose(0, 3, 1, 2), "to NCHW")
    assert_same_bits(back, nhwc, "back to NHWC")
    assert parallel.last_team() <= num_threads


@pytest.mark.parametrize(
    "shape", [(2, 3, 3, 40), (1, 64, 64, 16), (3, 5, 7, 9), (1, 5, 5, 9)]
)
def test_layout_changes_of_32_bit_values_move_every_bit(shape):
    # 8 channels or more go through 8 x 8 blocks of registers: spans
    # shorter and longer than the channels, whole blocks and edges, and
    # any bits of 32 (NaN payloads among them) as they were.
    from cropgrad._kernels.layout import change_layout

    bits = np.random.default_rng(3).integers(0, 2**32, shape, dtype=np.uint32)
    for values in (bits, bits.view(np.float32)):
        nchw = np.zeros(values.transpose(0, 3, 1, 2).shape, values.dtype)
        back = np.zeros_like(values)
        change_layout(values, nchw, True, 2)
        change_layout(nchw, back, False, 2)
        np.testing.assert_array_equal(nchw.view(np.uint32), bits.transpose(0, 3, 1, 2))
        np.testing.assert_array_equal(back.view(np.uint32), bits)


def test_layout_changes_refuse_what_does_not_fit():
    from cropgrad._kernels.layout import change_layout

    src = np.zeros((2, 3, 4, 5), np.float32)
    for dst in (
        np.zeros((2, 5, 3, 3), np.float32),  # another shape
        np.zeros((2, 5, 3, 4), np.int16),  # another itemsize
        np.zeros((4, 3, 5, 2), np.float32).T,  # not C-contiguous
    ):
        with pytest.raises(ValueError, match="cannot copy"):
            change_layout(src, dst, True, 2)
    with pytest.raises(ValueError, match="cannot copy"):
        change_layout(src.astype(np.int8), np.zeros((2, 5, 3, 4), np.int8), True, 2)


@pytest.mark.parametrize("mode", ref.MODES)
def test_nhwc_on_a_team_is_nchw_transposed(mode):
    # Images of several layout tasks, on two threads: the layout changes
    # on the team give the bits of NumPy's.
    problem = _problem(np.float32, 3, c=5, h=70, w=80, ho=60, wo=70)
    with starting_teams():
        _assert_nhwc_is_nchw_transposed(*problem, mode=mode, num_threads=2)


@pytest.mark.parametrize("channels, h, w", [(8, 64, 64), (13, 46, 57), (32, 32, 32)])
@pytest.mark.parametrize("num_threads", [1, 3])
def test_nchw_batches_staged_through_nhwc_give_the_same_bits(
    channels, h, w, num_threads
):
    # Many small batches of many channels: the SIMD clone changes each
    # batch to NHWC in a thread's scratch and back (or copies an NHWC
    # batch's image there); the bits are those of the NCHW loops and of
    # NHWC arrays, staged or not.  Images of 2**15 values a batch or
    # more and 33 x 32 points, at least a quarter of the pixels: every op
    # is staged; 13 channels and 46 x 57 pixels leave remainders to the
    # 8 x 8 layout changes.
    rng = np.random.default_rng(channels)
    n, ho, wo = 4 * num_threads, 33, 32
    image = rng.standard_normal((n, channels, h, w)).astype(np.float32)
    grid = rng.uniform(-1.2, 1.2, (n, ho, wo, 2)).astype(np.float32)
    grads = rng.standard_normal((n, channels, ho, wo)).astype(np.float32)
    nhwc = np.ascontiguousarray(image.transpose(0, 2, 3, 1))
    grads_nhwc = np.ascontiguousarray(grads.transpose(0, 2, 3, 1))
    simd = _kernels.use_simd(True)
    _kernels.use_simd(simd)
    for mode, padding_mode, align_corners in COMBOS:
        kw = dict(
            mode=mode,
            padding_mode=padding_mode,
            align_corners=align_corners,
            num_threads=num_threads,
        )
        results, nhwc_results = {}, {}
        for staging in (True, False):
            before = _kernels.use_staging(staging)
            runs = _kernels.staged_runs()
            try:
                with starting_teams():
                    results[staging] = (
                        cropgrad.grid_sample(image, grid, **kw),
                        cropgrad.grid_sample_grad_image(grads, grid, image.shape, **kw),
                        cropgrad.grid_sample_grad_grid(grads, image, grid, **kw),
                    )
                    nhwc_runs = _kernels.staged_runs()
                    nhwc_results[staging] = (
                        cropgrad.grid_sample(
                            nhwc, grid, data_format="NHWC", **kw
                        ).transpose(0, 3, 1, 2),
                        cropgrad.grid_sample_grad_image(
                            grads_nhwc, grid, nhwc.shape, data_format="NHWC", **kw
                        ).transpose(0, 3, 1, 2),
                        cropgrad.grid_sample_grad_grid(
                            grads_nhwc, nhwc, grid, data_format="NHWC", **kw
                        ),
                    )
            finally:
                _kernels.use_staging(before)
            # NCHW: the forward op always; the image gradient but in
            # nearest mode; the grid gradient with 32 channels or more and
            # not in nearest mode (whose grid gradient is zero).  NHWC
            # arrays (of 8 channels or more, read in place): the forward op
            # and that grid gradient, each batch's image copied whole.
            grid_staged = mode != "nearest" and channels >= 32
            staged = 1 + (mode != "nearest") + grid_staged
            nhwc_staged = 1 + grid_staged
            assert nhwc_runs - runs == (staged if staging and simd else 0)
            assert _kernels.staged_runs() - nhwc_runs == (
                nhwc_staged if staging and simd else 0
            )
        for name, staged, plain, other, other_plain in zip(
            ("forward", "grad_image", "grad_grid"),
            results[True],
            results[False],
            nhwc_results[True],
            nhwc_results[False],
        ):
            assert_same_bits(staged, plain, f"{name} {kw}")
            assert_same_bits(staged, other, f"{name} {kw} NHWC")
            assert_same_bits(staged, other_plain, f"{name} {kw} NHWC unstaged")


def test_other_image_dtypes_are_read_in_float32():
    image, grid, grads, _ = _problem(np.float32, 5)
    half = image.astype(np.float16)
    out = cropgrad.grid_sample(half, grid)
    assert out.dtype == np.float16
    expected = cropgrad.grid_sample(half.astype(np.float32), grid)
    assert_same_bits(out, expected.astype(np.float16), "float16")
    ints = (image * 50).astype(np.int16)
    out = cropgrad.grid_sample(ints, grid)
    assert_same_bits(out, cropgrad.grid_sample(ints.astype(np.float32), grid), "int16")
    wide = cropgrad.grid_sample(image.astype(np.float64), grid, dtype=np.float32)
    exact = cropgrad.grid_sample(image.astype(np.float64), grid)
    assert_same_bits(wide, exact.astype(np.float32), "float64 to float32")
    with pytest.raises(TypeError, match="rounded twice"):
        cropgrad.grid_sample(image.astype(np.float64), grid, dtype=np.float16)


def test_bfloat16_images_give_bfloat16_samples():
    image, grid, _, _ = _problem(np.float32, 6)
    bf16 = image.astype(ml_dtypes.bfloat16)
    out = cropgrad.grid_sample(bf16, grid, mode="bicubic")
    assert out.dtype == bf16.dtype
    exact = cropgrad.grid_sample(bf16.astype(np.float32), grid, mode="bicubic")
    assert_same_bits(out, exact.astype(bf16.dtype), "bfloat16")


@pytest.mark.parametrize("dtype", DTYPES)
def test_flush_denormals(dtype):
    # A denormal pixel read at its centre: itself, or 0 when flushed.
    tiny = np.finfo(dtype).smallest_subnormal
    image = np.full((1, 1, 2, 2), tiny, dtype)
    grid = np.array([[[[-1.0, -1.0]]]], dtype)
    kw = dict(align_corners=True)
    assert cropgrad.grid_sample(image, grid, **kw)[0, 0, 0, 0] == tiny
    flushed = cropgrad.grid_sample(image, grid, flush_denormals=True, **kw)
    assert flushed[0, 0, 0, 0] == 0


def test_out_is_written_and_returned():
    image, grid, grads, tangent = _problem(np.float64, 9)
    for data_format, img, g in (("NCHW", image, grads), ("NHWC", _nhwc(image), None)):
        expected = cropgrad.grid_sample(img, grid, data_format=data_format)
        out = np.full(expected.shape, np.nan)
        got = cropgrad.grid_sample(img, grid, out=out, data_format=data_format)
        assert got is out
        assert_same_bits(out, expected, data_format)
    # The image gradient starts from +0 whatever `out` held.
    expected = cropgrad.grid_sample_grad_image(grads, grid, image.shape)
    out = np.full(image.shape, 7.0)
    assert cropgrad.grid_sample_grad_image(grads, grid, image.shape, out=out) is out
    assert_same_bits(out, expected, "grad_image")
    out = np.empty(grid.shape)
    assert cropgrad.grid_sample_grad_grid(grads, image, grid, out=out) is out
    out = np.empty(grads.shape)
    assert cropgrad.grid_sample_jvp_grid(image, grid, tangent, out=out) is out
    with pytest.raises(ValueError, match="share memory"):
        # An image whose samples have its own shape, written into itself.
        cropgrad.grid_sample(image, np.zeros((2, 5, 6, 2)), out=image)
    with pytest.raises(TypeError, match="out must have dtype"):
        cropgrad.grid_sample(image, grid, out=np.empty(grads.shape, np.float32))


def test_empty_problems():
    image = np.ones((2, 3, 4, 5), np.float32)
    grid = np.zeros((2, 0, 3, 2), np.float32)
    assert cropgrad.grid_sample(image, grid).shape == (2, 3, 0, 3)
    grads = np.zeros((2, 3, 0, 3), np.float32)
    out = cropgrad.grid_sample_grad_image(grads, grid, image.shape)
    assert_same_bits(out, np.zeros(image.shape, np.float32), "no points")
    assert cropgrad.grid_sample_grad_grid(grads, image, grid).shape == grid.shape
    no_channels = np.ones((2, 0, 4, 5), np.float32)
    grid = np.zeros((2, 1, 1, 2), np.float32)
    gg = cropgrad.grid_sample_grad_grid(np.ones((2, 0, 1, 1)), no_channels, grid)
    assert_same_bits(gg, np.zeros(grid.shape, np.float32), "no channels")


# --------------------------------------------------------------------------
# Threads


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("mode", ref.MODES)
def test_every_thread_count_gives_the_same_bits(mode, dtype):
    kw = dict(mode=mode, padding_mode="border", align_corners=True)
    # 8 rows of points (forward, grid gradient, JVP), 8 spans of 256 in
    # the SIMD clone; 3 channels a batch, their planes cut into bands of
    # rows when there are more threads (image gradient): every call has a
    # task for each thread.
    image, grid, grads, tangent = _problem(dtype, 11, ho=4, wo=256)
    # One plane of 9 rows: the image gradient's tasks are bands of rows.
    image1, grid1, grads1, _ = _problem(dtype, 12, n=1, c=1, h=9, w=4, ho=6, wo=9)
    calls = {
        "forward": lambda t: cropgrad.grid_sample(image, grid, num_threads=t, **kw),
        "grad_image": lambda t: cropgrad.grid_sample_grad_image(
            grads, grid, image.shape, num_threads=t, **kw
        ),
        "grad_image_bands": lambda t: cropgrad.grid_sample_grad_image(
            grads1, grid1, image1.shape, num_threads=t, **kw
        ),
        "grad_grid": lambda t: cropgrad.grid_sample_grad_grid(
            grads, image, grid, num_threads=t, **kw
        ),
        "jvp_grid": lambda t: cropgrad.grid_sample_jvp_grid(
            image, grid, tangent, num_threads=t, **kw
        ),
    }
    expected = {
        "forward": ref.grid_sample(image, grid, *_ref_args(kw)),
        "grad_image": ref.grid_sample_grad_image(
            grads, grid, image.shape, *_ref_args(kw)
        ),
        "grad_image_bands": ref.grid_sample_grad_image(
            grads1, grid1, image1.shape, *_ref_args(kw)
        ),
        "grad_grid": ref.grid_sample_grad_grid(grads, image, grid, *_ref_args(kw)),
    }
    with starting_teams():
        for name, call in calls.items():
            first = None
            for threads in range(1, 8):
                out, team = team_of(lambda: call(threads))
                assert team == threads, (name, threads, team)
                if first is None:
                    first = out
                assert_same_bits(out, expected.get(name, first), f"{name} {threads}")


@pytest.mark.parametrize("mode", ref.MODES)
def test_the_image_gradient_of_many_points_is_the_references(mode):
    # More points than the kernel's table of taps holds at once (2**15):
    # the chunks follow one another in the serial order.  Crowded into a
    # few pixels, in float32, so that any other order would show.
    rng = np.random.default_rng(51)
    grid = rng.uniform(-0.3, 0.3, (1, 2, 40000, 2)).astype(np.float32)
    grads = rng.standard_normal((1, 2, 2, 40000)).astype(np.float32)
    kw = dict(mode=mode, padding_mode="zeros", align_corners=False)
    expected = ref.grid_sample_grad_image(grads, grid, (1, 2, 3, 4), *_ref_args(kw))
    with starting_teams():
        for threads in (1, 3):
            out = cropgrad.grid_sample_grad_image(
                grads, grid, (1, 2, 3, 4), num_threads=threads, **kw
            )
            assert_same_bits(out, expected, f"{threads} threads")


def test_python_threads_at_once_get_the_same_bits():
    # Each call's plan is its own: calls from several Python threads (the
    # GIL released during the work) do not disturb one another.
    image, grid, grads, tangent = _problem(np.float32, 61, h=17, w=19, ho=9, wo=11)
    calls = [
        lambda: cropgrad.grid_sample(image, grid, mode="bicubic", num_threads=2),
        lambda: cropgrad.grid_sample_grad_image(grads, grid, image.shape),
        lambda: cropgrad.grid_sample_grad_grid(grads, image, grid),
        lambda: cropgrad.grid_sample_jvp_grid(image, grid, tangent),
    ]
    expected = [call() for call in calls]
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        futures = [(i, pool.submit(calls[i % 4])) for i in range(64)]
        for i, future in futures:
            assert_same_bits(future.result(), expected[i % 4], str(i))


# --------------------------------------------------------------------------
# Calculus (float64)


def _dot(a, b):
    return float(np.sum(a.astype(np.float64) * b.astype(np.float64)))


@pytest.mark.parametrize("mode, padding_mode, align_corners", COMBOS)
def test_the_gradients_are_the_transposes(mode, padding_mode, align_corners):
    kw = dict(mode=mode, padding_mode=padding_mode, align_corners=align_corners)
    image, grid, grads, tangent = _problem(np.float64, 21)
    fwd = cropgrad.grid_sample(image, grid, **kw)
    back = cropgrad.grid_sample_grad_image(grads, grid, image.shape, **kw)
    lhs, rhs = _dot(fwd, grads), _dot(image, back)
    scale = _dot(np.abs(fwd), np.abs(grads)) + 1.0
    assert abs(lhs - rhs) <= 1e-13 * scale, (lhs, rhs)
    gg = cropgrad.grid_sample_grad_grid(grads, image, grid, **kw)
    jvp = cropgrad.grid_sample_jvp_grid(image, grid, tangent, **kw)
    lhs, rhs = _dot(gg, tangent), _dot(grads, jvp)
    scale = _dot(np.abs(gg), np.abs(tangent)) + 1.0
    assert abs(lhs - rhs) <= 1e-13 * scale, (lhs, rhs)
    if mode == "nearest":
        assert not gg.any() and not jvp.any()


def _smooth_grid(padding_mode, align_corners, size, rng, count):
    """Grid values (one axis of `size` pixels) whose padded pixel
    coordinate lies inside the image, its taps too, away from pixel
    boundaries, folds and clips: where the sampling is smooth."""
    axis = ref.points.Axis(size, padding_mode, align_corners, np.float64)
    values = []
    while len(values) < count:
        g = (
            rng.uniform(-2.5, 2.5)
            if padding_mode == "reflection"
            else rng.uniform(-1, 1)
        )
        v = float(axis.locate(np.array([g]))[0])
        raw = float(axis.unnormalize(np.float64(g)))
        frac = v - np.floor(v)
        if (
            1.1 < v < size - 2.1
            and 0.1 < frac < 0.9
            and (padding_mode == "reflection" or abs(raw - v) < 1e-9)
        ):
            values.append(g)
    return np.array(values)


@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
@pytest.mark.parametrize("padding_mode", ref.PADDING_MODES)
@pytest.mark.parametrize("align_corners", [False, True])
def test_grid_gradient_is_the_derivative(mode, padding_mode, align_corners):
    if mode == "bicubic" and padding_mode == "reflection":
        # PyTorch leaves the padding out of bicubic's derivative: only the
        # unreflected points are smooth, which the other padding modes test.
        padding_mode = "border"
    rng = np.random.default_rng(31)
    kw = dict(mode=mode, padding_mode=padding_mode, align_corners=align_corners)
    image = rng.standard_normal((1, 2, 7, 8))
    grid = np.stack(
        [
            _smooth_grid(padding_mode, align_corners, 8, rng, 6),
            _smooth_grid(padding_mode, align_corners, 7, rng, 6),
        ],
        -1,
    ).reshape(1, 2, 3, 2)
    grads = rng.standard_normal((1, 2, 2, 3))
    gg = cropgrad.grid_sample_grad_grid(grads, image, grid, **kw)
    step = 1e-6
    for axis in (0, 1):
        shift = np.zeros_like(grid)
        shift[..., axis] = step
        up = cropgrad.grid_sample(image, grid + shift, **kw)
        down = cropgrad.grid_sample(image, grid - shift, **kw)
        numeric = np.sum((up - down) / (2 * step) * grads, axis=1)
        np.testing.assert_allclose(gg[..., axis], numeric, rtol=1e-6, atol=1e-7)


# --------------------------------------------------------------------------
# Huge finite coordinates


def _huge_grid(dtype, overflowing=True):
    """Points at huge finite coordinates, paired with ordinary ones and with
    themselves; `overflowing`: with values that overflow to infinity when
    unnormalised (scales of 2 or more)."""
    big = float(np.finfo(dtype).max)
    values = [1e30, -1e30, 2.0**31, -(2.0**31), 2.0**63, -(2.0**63)]
    if dtype == np.float64:
        values += [1e300, -1e300]
    if overflowing:
        values += [big, -big, big * 0.75]
    points = [(v, 0.1) for v in values] + [(0.2, v) for v in values]
    points += [(v, v) for v in values]
    return np.array(points, dtype).reshape(1, 1, -1, 2)


def _same_nan_pattern(a, b, what):
    """The same bits, but a NaN's sign and payload (NumPy's arithmetic and
    the kernel's need not agree on them)."""
    assert np.array_equal(np.isnan(a), np.isnan(b)), what
    assert_same_bits(np.where(np.isnan(a), 0, a), np.where(np.isnan(b), 0, b), what)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("mode, padding_mode, align_corners", COMBOS)
def test_huge_coordinates_are_the_references(mode, padding_mode, align_corners, dtype):
    kw = dict(mode=mode, padding_mode=padding_mode, align_corners=align_corners)
    rng = np.random.default_rng(41)
    # The reference's backward reflection is not specified for overflowing
    # coordinates (see the next test).
    overflowing = not (mode == "bilinear" and padding_mode == "reflection")
    grid = _huge_grid(dtype, overflowing)
    image = rng.standard_normal((1, 2, 5, 6)).astype(dtype)
    grads = rng.standard_normal((1, 2, 1, grid.shape[2])).astype(dtype)
    args = _ref_args(kw)
    with np.errstate(all="ignore"):
        assert_same_bits(
            cropgrad.grid_sample(image, grid, **kw),
            ref.grid_sample(image, grid, *args),
            "forward",
        )
        gi = cropgrad.grid_sample_grad_image(grads, grid, image.shape, **kw)
        _same_nan_pattern(
            gi, ref.grid_sample_grad_image(grads, grid, image.shape, *args), "gi"
        )
        gg = cropgrad.grid_sample_grad_grid(grads, image, grid, **kw)
        _same_nan_pattern(
            gg, ref.grid_sample_grad_grid(grads, image, grid, *args), "gg"
        )
        jvp = cropgrad.grid_sample_jvp_grid(image, grid, np.ones_like(grid), **kw)
        assert jvp.shape == image.shape[:2] + grid.shape[1:3]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("align_corners", [False, True])
def test_overflowing_coordinates_reflect_to_nothing_in_the_backward(
    align_corners, dtype
):
    # Unnormalised, these overflow to infinity, which the backward's
    # reflection folds to NaN: no pixel is read or written for them
    # (PyTorch's kernel would go out of bounds) and their grid gradient is
    # NaN; the forward's reflection makes NaN pixel 0, as PyTorch's does.
    big = float(np.finfo(dtype).max)
    values = [big, -big, big * 0.75]
    points = [(v, 0.1) for v in values] + [(0.2, v) for v in values]
    grid = np.array(points, dtype).reshape(1, 1, -1, 2)
    kw = dict(padding_mode="reflection", align_corners=align_corners)
    rng = np.random.default_rng(43)
    image = rng.standard_normal((1, 2, 5, 6)).astype(dtype)
    grads = rng.standard_normal((1, 2, 1, grid.shape[2])).astype(dtype)
    with np.errstate(all="ignore"):
        assert_same_bits(
            cropgrad.grid_sample(image, grid, **kw),
            ref.grid_sample(image, grid, "bilinear", "reflection", align_corners),
            "forward",
        )
    gi = cropgrad.grid_sample_grad_image(grads, grid, image.shape, **kw)
    assert_same_bits(gi, np.zeros_like(gi), "no image gradient")
    gg = cropgrad.grid_sample_grad_grid(grads, image, grid, **kw)
    # The weights along the other axis are NaN: its gradient is NaN.
    assert np.isnan(gg[0, 0, :3, 1]).all() and np.isnan(gg[0, 0, 3:, 0]).all()
    jvp = cropgrad.grid_sample_jvp_grid(image, grid, np.ones_like(grid), **kw)
    assert np.isnan(jvp).all()


# --------------------------------------------------------------------------
# Argument checks


def _calls():
    image = np.zeros((2, 3, 4, 5), np.float32)
    grid = np.zeros((2, 3, 3, 2), np.float32)
    grads = np.zeros((2, 3, 3, 3), np.float32)
    return image, grid, grads


@pytest.mark.parametrize(
    "change, error, match",
    [
        (dict(mode="linear"), ValueError, "mode must be one of 'bilinear'"),
        (dict(padding_mode="edge"), ValueError, "padding_mode must be one of"),
        (dict(align_corners="yes"), TypeError, "align_corners must be True"),
        (dict(data_format="HWC"), ValueError, "data_format"),
        (dict(num_threads=0), ValueError, "num_threads"),
        (dict(flush_denormals=2), TypeError, "flush_denormals"),
        (dict(dtype="int8"), TypeError, "dtype"),
    ],
)
def test_options_are_checked(change, error, match, no_work):
    image, grid, grads = _calls()
    with pytest.raises(error, match=match):
        cropgrad.grid_sample(image, grid, **change)
    if "dtype" not in change:
        with pytest.raises(error, match=match):
            cropgrad.grid_sample_grad_grid(grads, image, grid, **change)


@pytest.fixture
def no_work():
    """The test's calls start no task: every check comes before any work."""
    from cropgrad._runtime import parallel

    runs = parallel.task_runs()
    yield
    assert parallel.task_runs() == runs


def test_arrays_are_checked(no_work):
    image, grid, grads = _calls()
    with pytest.raises(ValueError, match="volumetric"):
        cropgrad.grid_sample(np.zeros((2, 3, 4, 5, 6)), grid)
    with pytest.raises(ValueError, match="image must be 4-D"):
        cropgrad.grid_sample(np.zeros((3, 4, 5)), grid)
    with pytest.raises(ValueError, match=r"grid must be 4-D \(N, H_out, W_out, 2\)"):
        cropgrad.grid_sample(image, np.zeros((2, 3, 3, 3)))
    with pytest.raises(ValueError, match="grid has 1 batch entries and the image 2"):
        cropgrad.grid_sample(image, grid[:1])
    with pytest.raises(TypeError, match="image must hold real numbers"):
        cropgrad.grid_sample(image.astype(complex), grid)
    with pytest.raises(TypeError, match="grid must hold real numbers"):
        cropgrad.grid_sample(image, grid.astype(bool))
    with pytest.raises(ValueError, match="at least 1 pixel"):
        cropgrad.grid_sample(np.zeros((2, 3, 0, 5)), grid)
    with pytest.raises(ValueError, match="grads must have the shape"):
        cropgrad.grid_sample_grad_grid(grads[:, :2], image, grid)
    with pytest.raises(ValueError, match="grads must have the shape"):
        cropgrad.grid_sample_grad_image(grads, grid, (2, 3, 4, 5), data_format="NHWC")
    with pytest.raises(ValueError, match="image_size"):
        cropgrad.grid_sample_grad_image(grads, grid, (2, 3, 4))
    with pytest.raises(ValueError, match="grid has 2 batch entries and the image 1"):
        cropgrad.grid_sample_grad_image(grads, grid, (1, 3, 4, 5))
    with pytest.raises(ValueError, match="grid_tangent must have the grid's shape"):
        cropgrad.grid_sample_jvp_grid(image, grid, grid[:, :1])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("where", [(1, 2, 0, 1), (1, 2, 2, 1)])
@pytest.mark.parametrize("value", [np.nan, np.inf, -np.inf])
def test_non_finite_grids_are_refused_naming_the_value(value, where, dtype, no_work):
    # Inside the grid and its last value (past the check's vectors).
    image, grid, grads = (x.astype(dtype) for x in _calls())
    grid[where] = value
    match = rf"grid must be finite: grid\[{', '.join(map(str, where))}\] = {value!r}"
    for call in (
        lambda: cropgrad.grid_sample(image, grid),
        lambda: cropgrad.grid_sample_grad_image(grads, grid, image.shape),
        lambda: cropgrad.grid_sample_grad_grid(grads, image, grid),
        lambda: cropgrad.grid_sample_jvp_grid(image, grid, grid),
    ):
        with pytest.raises(ValueError, match=match):
            call()


def test_a_grid_beyond_float32_is_refused_for_float32_data():
    image, grid, _ = _calls()
    grid = grid.astype(np.float64)
    grid[0, 0, 1, 0] = 1e39
    with pytest.raises(ValueError, match=r"grid\[0, 0, 1, 0\] = .*beyond float32"):
        cropgrad.grid_sample(image, grid)
    # float64 data: computed in float64, where it is finite.
    assert cropgrad.grid_sample(image.astype(np.float64), grid).shape == (2, 3, 3, 3)


def test_bands_of_rows_get_the_points_whose_lower_corners_reach_them():
    # One image of two channels, its planes banded between the threads
    # (image gradient).  Each block of 128 points (one output row here) lies
    # between two image rows, r - 1 and r, so a block's lower corners are in
    # the next band where a band starts at row r: a band's task must not
    # pass it over.  Into an `out=` of NaN: every band zeroes its pixels.
    rng = np.random.default_rng(7)
    h, w, ho, wo = 8, 16, 8, 128
    px = rng.uniform(-0.5, w - 0.5, (ho, wo))
    py = np.arange(ho)[:, None] - 0.5 + rng.uniform(0.01, 0.99, (ho, wo))
    grid = np.stack([(2 * px + 1) / w - 1, (2 * py + 1) / h - 1], -1)
    grid = grid[None].astype(np.float32)
    grads = rng.standard_normal((1, 2, ho, wo)).astype(np.float32)
    size = (1, 2, h, w)
    kw = dict(mode="bilinear", padding_mode="zeros", align_corners=False)
    expected = ref.grid_sample_grad_image(grads, grid, size, *_ref_args(kw))
    with starting_teams():
        for threads in range(1, 8):
            out = np.full(size, np.nan, np.float32)
            _, team = team_of(
                lambda: cropgrad.grid_sample_grad_image(
                    grads, grid, size, out=out, num_threads=threads, **kw
                )
            )
            assert team == threads, (threads, team)
            assert_same_bits(out, expected, f"{threads} threads")


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_nearest_points_reflected_from_infinity_reach_the_first_pixel(threads):
    # Grid values so large that unnormalising them overflows: reflection
    # folds the infinity to NaN, which the forward's clip makes 0, and
    # nearest's gradient locates its tap as its forward op does.  Every
    # point's gradient goes to pixel (0, 0), however the image's rows are
    # banded between the threads (the SIMD clone's bands pass over blocks
    # of points with no tap in their rows).
    grid = np.full((1, 2, 128, 2), 3e38, np.float32)
    grads = np.ones((1, 1, 2, 128), np.float32)
    size = (1, 1, 8, 8)
    kw = dict(mode="nearest", padding_mode="reflection", align_corners=False)
    expected = ref.grid_sample_grad_image(grads, grid, size, *_ref_args(kw))
    assert expected[0, 0, 0, 0] == 256 and expected.sum() == 256
    with starting_teams():
        out, team = team_of(
            lambda: cropgrad.grid_sample_grad_image(
                grads, grid, size, num_threads=threads, **kw
            )
        )
    assert team == threads
    assert_same_bits(out, expected)


@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize("width", [5, 9, 40])
@pytest.mark.parametrize("stairs", [False, True])
@pytest.mark.parametrize("padding_mode", ref.PADDING_MODES)
@pytest.mark.parametrize("mode", ref.MODES)
def test_smooth_grids_with_jumps_give_the_portable_bits(
    threads, width, stairs, padding_mode, mode
):
    # Mostly one pixel a point (corners side by side, which the SIMD clone
    # adds eight at a time), with jumps back, forward and to other rows, and
    # crowded points: every pixel's additions in the portable order.  Some
    # points fall outside the image, where border and reflection padding
    # move them (the clone takes every mode and padding).
    rng = np.random.default_rng(width)
    n, c, h, w, ho, wo = 2, 3, 7, width, 5, 3 * width + 5
    steps = np.where(rng.random((ho, wo)) < 0.9, 1.0, rng.integers(-9, 9, (ho, wo)))
    px = np.cumsum(steps, axis=1) % (w + 2) - 1.5 + rng.uniform(0, 1, (ho, 1))
    py = np.arange(ho)[:, None] * 1.3 + np.zeros((1, wo))
    py = np.where(rng.random((ho, wo)) < 0.02, rng.uniform(-1, h, (ho, wo)), py)
    if stairs:
        # Each vector one row below the last, where the last one's lower
        # corners end.
        i = np.arange(ho * wo).reshape(ho, wo)
        px = (i % w) + 0.25
        py = (i // 8) % (h - 1) + 0.5
    # Pixel coordinates to the grid (align_corners=False).
    grid = np.stack([(2 * px + 1) / w - 1, (2 * py + 1) / h - 1], -1)
    grid = grid[None].repeat(n, 0).astype(np.float32)
    grads = rng.standard_normal((n, c, ho, wo)).astype(np.float32)
    image = rng.standard_normal((n, c, h, w)).astype(np.float32)
    results = {}
    for path in (True, False):
        before = _kernels.use_simd(path)
        try:
            with starting_teams():
                kw = dict(num_threads=threads, padding_mode=padding_mode, mode=mode)
                results[path] = (
                    cropgrad.grid_sample_grad_image(grads, grid, image.shape, **kw),
                    cropgrad.grid_sample(image, grid, **kw),
                    cropgrad.grid_sample_grad_grid(grads, image, grid, **kw),
                )
        finally:
            _kernels.use_simd(before)
    for simd, portable in zip(results[True], results[False]):
        assert_same_bits(simd, portable)
