"""The C-level API's grid sampling (version 1.2) through ctypes
(tests/capi_ctypes.py): NCHW or NHWC arrays of the arithmetic type, the
codes of capi.h; bits equal to the NumPy API's on every thread count, and
its errors as records with the NumPy API's words."""

import numpy as np
import pytest
from _helpers import assert_same_bits, starting_teams

import cropgrad
import cropgrad.capi

CODES = cropgrad.capi._CODES
# arrays of the arithmetic type, the codes of capi.h.

GRID_OPS = ["grid_sample", "grid_sample_grad_image", "grid_sample_grad_grid",
            "grid_sample_jvp_grid"]  # fmt: skip
GRID_MODES = ("bilinear", "nearest", "bicubic")
GRID_PADDINGS = ("zeros", "border", "reflection")


@pytest.fixture(scope="module")
def ctypes_consumer():
    import capi_ctypes

    return capi_ctypes.CtypesConsumer()


def _grid_problem(arith, seed=0):
    """A grid reaching beyond [-1, 1] (every padding is read), its image,
    grads and tangent, NCHW; three images, so that every op has a task for
    each of three threads (the SIMD clone's tasks are spans of points, or
    whole images)."""
    rng = np.random.default_rng(seed)
    return dict(
        image=rng.standard_normal((3, 3, 7, 6)).astype(arith),
        grid=rng.uniform(-1.3, 1.3, (3, 5, 4, 2)).astype(arith),
        grads=rng.standard_normal((3, 3, 5, 4)).astype(arith),
        tangent=rng.standard_normal((3, 5, 4, 2)).astype(arith),
    )


def _numpy_grid(op, q, **kw):
    if op == "grid_sample":
        return cropgrad.grid_sample(q["image"], q["grid"], **kw)
    if op == "grid_sample_grad_image":
        return cropgrad.grid_sample_grad_image(
            q["grads"], q["grid"], q["image"].shape, **kw
        )
    if op == "grid_sample_grad_grid":
        return cropgrad.grid_sample_grad_grid(q["grads"], q["image"], q["grid"], **kw)
    return cropgrad.grid_sample_jvp_grid(q["image"], q["grid"], q["tangent"], **kw)


class _Null:
    """NULL data with a shape, as a C caller may pass."""

    def __init__(self, shape):
        self.shape = shape


def _c_grid(consumer, op, q, out, mode=0, padding=0, aligned=0, num_threads=0,
            layout=None, dtype=None, null=None):  # fmt: skip
    """The C function of `op` on problem `q` (codes as capi.h's), into `out`;
    `null`: the array passed as NULL, its shape kept."""
    image, grid, grads = q["image"], q["grid"], q["grads"]
    if null == "grid":
        grid = _Null(grid.shape)
    if dtype is None:
        dtype = CODES["CG_FLOAT64" if image.dtype == np.float64 else "CG_FLOAT32"]
    tail = dict(
        dtype=dtype,
        mode=mode,
        padding_mode=padding,
        align_corners=aligned,
        layout=CODES["CG_NCHW"] if layout is None else layout,
        output=out,
        num_threads=num_threads,
        flush_denormals=0,
    )
    if op == "grid_sample":
        return consumer.grid_sample(image, image.shape, grid, grid.shape, **tail)
    if op == "grid_sample_grad_image":
        return consumer.grid_sample_grad_image(
            grads, grads.shape, grid, grid.shape, image_size=image.shape, **tail
        )
    if op == "grid_sample_grad_grid":
        return consumer.grid_sample_grad_grid(
            grads, grads.shape, image, image.shape, grid, grid.shape, **tail
        )
    return consumer.grid_sample_jvp_grid(
        image, image.shape, grid, q["tangent"], grid.shape, **tail
    )


@pytest.mark.parametrize("arith", [np.float32, np.float64], ids=["float32", "float64"])
@pytest.mark.parametrize("op", GRID_OPS)
def test_c_grid_sample_matches_numpy_api(ctypes_consumer, op, arith):
    default = cropgrad.show_config("dicts")["default_threads"]
    for seed, (mode, padding) in enumerate((m, p) for m in range(3) for p in range(3)):
        q = _grid_problem(arith, seed)
        options = dict(
            mode=GRID_MODES[mode],
            padding_mode=GRID_PADDINGS[padding],
            align_corners=bool(seed % 2),
        )
        expected = _numpy_grid(op, q, num_threads=1, **options)
        with starting_teams() as parallel:
            for threads in (0, 1, 3):
                out = np.full_like(expected, np.nan)
                result = _c_grid(
                    ctypes_consumer, op, q, out, mode, padding, seed % 2, threads
                )
                assert result == (0, -1, ""), (seed, threads)
                if out.size and parallel.last_team() is not None:
                    assert parallel.last_team() == (threads or default)
                assert_same_bits(out, expected, (op, seed, threads))


def _nhwc(a):
    return np.ascontiguousarray(a.transpose(0, 2, 3, 1))


@pytest.mark.parametrize("arith", [np.float32, np.float64], ids=["float32", "float64"])
@pytest.mark.parametrize("op", GRID_OPS)
def test_c_grid_sample_takes_nhwc_arrays(ctypes_consumer, op, arith):
    # CG_NHWC: the image, grads and samples [N, H, W, C] (the grid as
    # always), the NumPy API's NHWC bits; grads of the wrong shape get the
    # NumPy API's NHWC words.
    nhwc = CODES["CG_NHWC"]
    for mode in range(3):
        q = _grid_problem(arith, mode)
        q = dict(q, image=_nhwc(q["image"]), grads=_nhwc(q["grads"]))
        options = dict(mode=GRID_MODES[mode], padding_mode="border")
        expected = _numpy_grid(op, q, data_format="NHWC", **options)
        for threads in (1, 3):
            out = np.full_like(expected, np.nan)
            result = _c_grid(
                ctypes_consumer, op, q, out, mode, 1, 0, threads, layout=nhwc
            )
            assert result == (0, -1, ""), (mode, threads)
            assert_same_bits(out, expected, (op, mode, threads))
    if op in ("grid_sample_grad_image", "grid_sample_grad_grid"):
        bad = dict(q, grads=q["grads"][:, :, :, :2].copy())
        code, _, words = _c_grid(ctypes_consumer, op, bad, out, layout=nhwc)
        with pytest.raises(ValueError) as info:
            _numpy_grid(op, bad, data_format="NHWC")
        assert (code, words) == (CODES["CG_ERR_VALUE"], str(info.value))
        assert "(N, H_out, W_out, C) = (3, 5, 4, 3), got (3, 5, 4, 2)" in words


@pytest.mark.parametrize("op", GRID_OPS)
def test_c_grid_sample_error_records(ctypes_consumer, op):
    value = CODES["CG_ERR_VALUE"]
    q = _grid_problem(np.float32)
    out = np.full_like(_numpy_grid(op, q), 7)
    # A grid value not finite: the NumPy API's words, the point's number.
    q["grid"][1, 2, 0, 1] = np.nan
    with pytest.raises(ValueError) as info:
        _numpy_grid(op, q)
    point = (1 * 5 + 2) * 4 + 0
    assert _c_grid(ctypes_consumer, op, q, out) == (value, point, str(info.value))
    assert str(info.value) == "grid must be finite: grid[1, 2, 0, 1] = nan"
    assert np.all(out == 7), "an error record, yet the output was written"
    q = _grid_problem(np.float32)
    cases = {
        # what is wrong: (keyword, value, status, words)
        "mode": ("mode", 3, value, "mode must be CG_BILINEAR (0)"),
        "padding": ("padding", -1, value, "padding_mode must be CG_ZEROS (0)"),
        "threads": ("num_threads", 1025, value, "num_threads must be 0"),
        "layout": ("layout", 7, value, "layout must be CG_NHWC (0) or CG_NCHW (1)"),
        "dtype": ("dtype", CODES["CG_FLOAT16"], CODES["CG_ERR_TYPE"],
                  "dtype must be CG_FLOAT32 or CG_FLOAT64"),
    }  # fmt: skip
    for what, (name, bad, status, words) in cases.items():
        result = _c_grid(ctypes_consumer, op, q, out, **{name: bad})
        assert result[:2] == (status, -1), what
        assert words in result[2], what
    assert np.all(out == 7)
    # Shapes: the NumPy API's words.
    q["grid"] = q["grid"][:1]
    q["tangent"] = q["tangent"][:1]
    with pytest.raises(ValueError) as info:
        _numpy_grid(op, q)
    assert _c_grid(ctypes_consumer, op, q, out) == (value, -1, str(info.value))


@pytest.mark.parametrize("op", GRID_OPS)
def test_c_grid_sample_null_and_shared_arrays(ctypes_consumer, op):
    q = _grid_problem(np.float64)
    expected = _numpy_grid(op, q)
    out = np.full_like(expected, 7)
    # NULL for an array whose shape holds bytes.
    result = _c_grid(ctypes_consumer, op, q, out, null="grid")
    assert result == (
        CODES["CG_ERR_VALUE"], -1,
        "grid is NULL but its shape holds 960 bytes (NULL is only for an empty "
        "array)")  # fmt: skip
    assert np.all(out == 7)
    # An output sharing the grid's memory: the NumPy API's words.
    buf = np.zeros(q["grid"].size + expected.size, np.float64)
    buf[: q["grid"].size] = q["grid"].reshape(-1)
    q["grid"] = buf[: q["grid"].size].reshape(q["grid"].shape)
    out = buf[2 : 2 + expected.size].reshape(expected.shape)
    message = "out must not share memory with an input"
    assert _c_grid(ctypes_consumer, op, q, out) == (CODES["CG_ERR_VALUE"], -1, message)


def test_c_grid_sample_empty_problems(ctypes_consumer):
    """No output points: nothing computed, the image gradient zeros."""
    q = _grid_problem(np.float32)
    q["grid"] = q["grid"][:, :0]
    q["tangent"] = q["tangent"][:, :0]
    q["grads"] = q["grads"][:, :, :0]
    for op in GRID_OPS:
        expected = _numpy_grid(op, q)
        out = np.full_like(expected, 7)
        assert _c_grid(ctypes_consumer, op, q, out) == (0, -1, ""), op
        assert_same_bits(out, expected, op)
