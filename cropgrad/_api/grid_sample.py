"""The grid-sampling family's NumPy functions (re-exported by ``cropgrad``).

PyTorch's ``torch.nn.functional.grid_sample`` (2-D) and its derivatives:
an image ``[N, C, H, W]`` (NCHW, the default) or ``[N, H, W, C]`` (NHWC)
sampled at a grid ``[N, H_out, W_out, 2]`` of ``(x, y)`` normalised to
``[-1, 1]``.  Each function checks its arguments' types, dtypes and shapes
before any work (the words of the C-level API's gate, which PyTorch's ops
share on shapes alone), converts the arrays to C-contiguous ones in the
caller's layout and the arithmetic type (float64 for float64 data, float32
otherwise), allocates the output and makes one call of the C-level API
through cropgrad._core's bridge, which checks the data (a finite grid) and
runs the kernel of that layout, the GIL released.  docs/semantics.md
("Grid sampling") has every rounding.
"""

from typing import NamedTuple

import numpy as np

from cropgrad import _core
from cropgrad._api import docstrings as _docs
from cropgrad._api import validation as _v
from cropgrad._kernels.grid_sample import kernels as _kernels
from cropgrad._kernels.layout import change_layout
from cropgrad._ops.grid_sample import MODES, PADDING_MODES

__all__ = [
    "grid_sample",
    "grid_sample_grad_grid",
    "grid_sample_grad_image",
    "grid_sample_jvp_grid",
]

_FLOAT32 = np.dtype(np.float32)
_FLOAT64 = np.dtype(np.float64)
_NARROW = (np.dtype(np.float16),)
_NCHW = _v.LAYOUT_CODES["NCHW"]
_NHWC = _v.LAYOUT_CODES["NHWC"]
# The C-level API's codes of the options, in the order of the model's
# choices (CG_BILINEAR, CG_NEAREST, CG_BICUBIC; CG_ZEROS, CG_BORDER,
# CG_REFLECTION).
MODE_CODES = {m: _v.CODES[f"CG_{m.upper()}"] for m in MODES}
PADDING_CODES = {p: _v.CODES[f"CG_{p.upper()}"] for p in PADDING_MODES}


def choice(value, name, choices):
    if isinstance(value, str) and value in choices:
        return value
    listed = ", ".join(repr(c) for c in choices)
    raise ValueError(f"{name} must be one of {listed}, got {value!r}")


class _Options(NamedTuple):
    """The options every op takes, as the C-level API's codes (`nchw`: the
    caller's layout is NCHW)."""

    mode: int
    padding: int
    aligned: bool
    nchw: bool
    threads: int
    flush: bool


def _options(mode, padding_mode, align_corners, data_format, num_threads, flush):
    """The options every op takes, checked in this order, as the C-level
    API's codes: (mode, padding, aligned, nchw, threads, flush)."""
    mode = MODE_CODES[choice(mode, "mode", MODES)]
    padding = PADDING_CODES[choice(padding_mode, "padding_mode", PADDING_MODES)]
    aligned = _v.flag(align_corners, "align_corners")
    nchw = _v.data_format(data_format) == _NCHW
    return _Options(
        mode,
        padding,
        aligned,
        nchw,
        _v.threads(num_threads),
        _v.flag(flush, "flush_denormals"),
    )


def _run(bridge, arrays, arith, o, kernel_nchw, written, *image_shape):
    """Call op `bridge` of the C-level API on its input `arrays` (in the
    kernel's layout, `kernel_nchw`, of the arithmetic type `arith`, in the
    bridge's order) with the options `o`, writing `written` (in that
    layout).

    Every op's bridge takes its arrays, the arithmetic type's code, the
    options and the output in this order; the image gradient's also takes
    the image's shape (`image_shape`, in the kernel's layout) after the
    code."""
    bridge(
        *arrays,
        _v.dtype_code(arith),
        *image_shape,
        o.mode,
        o.padding,
        o.aligned,
        _NCHW if kernel_nchw else _NHWC,
        written,
        o.threads,
        o.flush,
    )


def _kernel_nchw(o, channels, arith, image=None):
    """Whether the kernels run in NCHW: for an NCHW caller, and for an NHWC
    one whose arrays they read faster so (few channels); but not for an
    NCHW view of NHWC memory (`image`, such as PyTorch's channels_last
    tensors) that the NHWC kernels read faster where it is than the NCHW
    ones read a copy (the samples' layout is changed instead)."""
    in_place = _kernels.nhwc_in_place(channels, arith == _FLOAT64, o.mode)
    if o.nchw:
        return not (in_place and image is not None and _nhwc_memory(image))
    return not in_place


def _nhwc_memory(image):
    """Whether NCHW `image` is a view of C-contiguous NHWC memory, and not
    also C-contiguous as it is (one channel, or one pixel)."""
    return image.transpose(_TO_NHWC).flags.c_contiguous and not image.flags.c_contiguous


def _layout_axes(nchw):
    return "(N, C, H, W)" if nchw else "(N, H, W, C)"


def _nchw_shape(shape, nchw):
    """An image's (or the samples') `shape` in the caller's layout as NCHW."""
    return tuple(shape) if nchw else (shape[0], shape[3], shape[1], shape[2])


def _in_layout(shape_nchw, nchw):
    """An NCHW shape in a layout."""
    n, c, h, w = shape_nchw
    return tuple(shape_nchw) if nchw else (n, h, w, c)


def _image(image, nchw):
    """The image checked (4-D in the caller's layout), and its arithmetic
    type."""
    raw = _v.real_array(image, "image", bfloat16=True)
    if raw.ndim == 5:
        raise ValueError(
            f"image must be 4-D {_layout_axes(nchw)}, got shape {raw.shape}: "
            "volumetric (5-D) grid sampling is not provided"
        )
    fmt = "NCHW" if nchw else "NHWC"
    # Used as it is: _layout_array makes it contiguous, in either layout.
    raw, _ = _v.image_array(raw, fmt, contiguous=False)
    wide = raw.dtype.newbyteorder("=") == _FLOAT64
    return raw, _FLOAT64 if wide else _FLOAT32


_TO_NCHW = (0, 3, 1, 2)
_TO_NHWC = (0, 2, 3, 1)


def _layout_array(raw, arith, nchw, kernel_nchw, threads):
    """`raw` (4-D, in the caller's layout, `nchw`) as C-contiguous `arith` in
    the kernel's (`kernel_nchw`).

    Memory of the other layout and of the arithmetic type (an NCHW view of
    NHWC memory, such as PyTorch's channels_last tensors, an NHWC array for
    the NCHW kernels, or the other way round) has its layout changed on the
    call's threads."""
    view = raw
    if nchw != kernel_nchw:
        view = raw.transpose(_TO_NCHW if kernel_nchw else _TO_NHWC)
    if view.dtype == arith and not view.flags.c_contiguous:
        # The array as the other layout sees its memory.
        other = view.transpose(_TO_NHWC if kernel_nchw else _TO_NCHW)
        if other.flags.c_contiguous:
            converted = np.empty(view.shape, arith)
            change_layout(other, converted, kernel_nchw, threads)
            return converted
    # Every image dtype widens to float32 exactly but int32 and int64,
    # rounded to nearest as RoIAlign's integer images are.
    with np.errstate(over="ignore"):
        return np.ascontiguousarray(view, dtype=arith)


def _grid(grid, arith, batch):
    """The grid as C-contiguous `arith`, ``[batch, H_out, W_out, 2]``.

    The gate refuses a grid value that is not finite; a conversion that can
    overflow (float64 values to float32) is checked here, where the value
    before it is known, so that the message can say it was finite."""
    raw = _v.real_array(grid, "grid")
    converted = _v.float32_array(raw, "grid", arith)
    grid_shape(converted.shape, batch)
    if not np.can_cast(raw.dtype, arith, "safe"):
        _finite(converted, raw, "grid")
    return converted


# The shape checks of the grid, grads and tangent, by shape alone: PyTorch's
# ops (cropgrad/_torch/checks.py) make them on tensors without data too.


def grid_shape(shape, batch):
    """Check that a grid of `shape` fits an image of `batch` entries."""
    if len(shape) != 4 or shape[3] != 2:
        raise ValueError(
            f"grid must be 4-D (N, H_out, W_out, 2) holding (x, y), got shape {shape}"
        )
    if shape[0] != batch:
        raise ValueError(
            f"grid has {shape[0]} batch entries and the image {batch}: they must match"
        )


def grads_shape(shape, expected_nchw, nchw):
    """Check that grads of `shape` are the sampled output's, NCHW
    `expected_nchw` in the caller's layout."""
    n, c, h, w = expected_nchw
    expected = expected_nchw if nchw else (n, h, w, c)
    if shape != expected:
        axes = "(N, C, H_out, W_out)" if nchw else "(N, H_out, W_out, C)"
        raise ValueError(
            f"grads must have the shape of the sampled output {axes} = "
            f"{expected}, got {shape}"
        )


def tangent_shape(shape, grid_shape):
    if shape != grid_shape:
        raise ValueError(
            f"grid_tangent must have the grid's shape {grid_shape}, got {shape}"
        )


def _finite(converted, raw, name):
    finite = np.isfinite(converted)
    if not finite.all():
        at = tuple(int(i) for i in np.argwhere(~finite)[0])
        where = ", ".join(str(i) for i in at)
        value = float(raw[at])
        raise ValueError(
            f"{name} must be finite: {name}[{where}] = {value!r}"
            + (f" (beyond {converted.dtype.name})" if np.isfinite(value) else "")
        )


def _grads(grads, arith, shape, o, kernel_nchw):
    """`grads` as C-contiguous `arith` of NCHW `shape` in the kernel's
    layout, for a call of options `o`."""
    raw = _v.real_array(grads, "grads", bfloat16=True)
    grads_shape(raw.shape, shape, o.nchw)
    return _layout_array(raw, arith, o.nchw, kernel_nchw, o.threads)


def _grads_arithmetic(raw):
    native = raw.dtype.newbyteorder("=")
    if native.kind == "f" and native not in (*_NARROW, _FLOAT32, _FLOAT64):
        raise TypeError(
            "grads must be float16, float32, float64, bfloat16 or integers, "
            f"got {raw.dtype}: convert them first, e.g. grads.astype(numpy.float64)"
        )
    return _FLOAT64 if native == _FLOAT64 else _FLOAT32


def _result_dtype(dtype, data_dtype, arith):
    """The output dtype: `dtype`, or the data's float dtype (float32 for
    integers); float16 and bfloat16 only from float32 arithmetic, so that
    the result is rounded once."""
    if dtype is not None:
        result = _v.output_dtype(dtype, "dtype")
    elif data_dtype.kind == "f" or _v.is_bfloat16(data_dtype):
        result = data_dtype.newbyteorder("=")
    else:
        result = _FLOAT32
    if arith == _FLOAT64 and result.itemsize < 4:
        raise TypeError(
            f"dtype {result} is not computed from float64 data: its result "
            "would be rounded twice; ask for float32 or float64"
        )
    return result


def spatial(height, width, what):
    if height < 1 or width < 1:
        raise ValueError(
            f"{what} must be at least 1 pixel high and wide, got {height} x {width}"
        )


def _output(out, shape_nchw, dtype, nchw, inputs):
    """The caller's `out` (checked, sharing no memory with an input) or a new
    array, in the caller's layout."""
    n, c, h, w = shape_nchw
    shape = shape_nchw if nchw else (n, h, w, c)
    return _unshared(_v.output(out, shape, dtype), out, inputs)


def _unshared(result, out, inputs):
    """`result`, refused when it is the caller's `out` and shares memory
    with one of the `inputs` (the kernel would read what it writes)."""
    if out is not None:
        for a in inputs:
            if np.may_share_memory(result, a):
                raise ValueError("out must not share memory with an input")
    return result


def _deliver(result, computed, o, kernel_nchw):
    """Write `computed` (the arithmetic type, in the kernel's layout,
    `kernel_nchw`) into `result` (the caller's dtype and layout, options
    `o`) unless the kernel wrote there itself."""
    if computed is result:
        return result
    if kernel_nchw != o.nchw:
        # The kernels' samples in the other layout than the caller's.
        if result.dtype == computed.dtype:
            change_layout(computed, result, o.nchw, o.threads)
            return result
        computed = computed.transpose(_TO_NCHW if o.nchw else _TO_NHWC)
    # Values beyond float16 round to infinity, as documented: not a warning.
    with np.errstate(over="ignore"):
        result[...] = computed
    return result


def _scratch(result, arith, o, kernel_nchw):
    """Where the C function writes: `result` itself when it is of the
    arithmetic type and the kernel's layout, else a new array."""
    if result.dtype == arith and o.nchw == kernel_nchw:
        return result
    shape = _in_layout(_nchw_shape(result.shape, o.nchw), kernel_nchw)
    return np.empty(shape, arith)


def _image_and_grid(image, grid, o):
    """The image checked (as `_image`), its arithmetic type, its NCHW shape
    and the grid converted for it: how the ops that read an image begin."""
    raw, arith = _image(image, o.nchw)
    n, c, h, w = _nchw_shape(raw.shape, o.nchw)
    grid = _grid(grid, arith, n)
    spatial(h, w, "image")
    return raw, arith, (n, c, h, w), grid


def _sample(bridge, raw, arith, image_shape, grid, dtype, out, o, *tangent):
    """Run `bridge`, the forward op or the grid JVP, on the image `raw` (of
    NCHW `image_shape`, as `_image_and_grid` returns it) and the grid, and
    return the sampled output in the caller's dtype and layout.

    The two take the same arguments but for the JVP's tangent, which
    follows the grid: `tangent` is empty for the forward op and
    ``(tangent,)`` for the JVP."""
    n, c, _, _ = image_shape
    result_dtype = _result_dtype(dtype, raw.dtype, arith)
    k = _kernel_nchw(o, c, arith, raw)
    image = _layout_array(raw, arith, o.nchw, k, o.threads)
    arrays = (image, grid, *tangent)
    shape = (n, c, grid.shape[1], grid.shape[2])
    result = _output(out, shape, result_dtype, o.nchw, (raw, *arrays))
    computed = _scratch(result, arith, o, k)
    _run(bridge, arrays, arith, o, k, computed)
    return _deliver(result, computed, o, k)


@_docs.shared
def grid_sample(
    image,
    grid,
    *,
    mode="bilinear",
    padding_mode="zeros",
    align_corners=False,
    dtype=None,
    out=None,
    data_format="NCHW",
    num_threads=None,
    flush_denormals=False,
):
    """Sample an image at the points of a grid.

    PyTorch's ``torch.nn.functional.grid_sample`` (2-D), bit for bit as its
    AVX2 CPU kernel computes it in float32 and float64, on every thread
    count.

    Parameters
    ----------
    image : array_like of shape (N, C, H, W)
        ``(N, H, W, C)`` with ``data_format="NHWC"``: uint8, uint16, int8,
        int16, int32, int64, float16, float32, float64 or bfloat16.
        float64 images are computed in float64, every other dtype in
        float32 (read exactly but int32 and int64, rounded to nearest).
        A 5-D (volumetric) image is refused.
    grid : array_like of shape (N, H_out, W_out, 2)
        ``(x, y)`` per output pixel, ``-1`` and ``1`` the image's outer
        edges (``align_corners=False``) or its corner pixels' centres
        (``True``); converted to the arithmetic type and refused unless
        every value is finite.
    mode : {"bilinear", "nearest", "bicubic"}, default "bilinear"
    padding_mode : {"zeros", "border", "reflection"}, default "zeros"
        What points outside the image read: zeros, the nearest edge pixel,
        or the image reflected about its edges.
    align_corners : bool, default False
    {dtype}
    {options}

    Returns
    -------
    ndarray of shape (N, C, H_out, W_out)
        ``(N, H_out, W_out, C)`` with NHWC.

    Raises
    ------
    ValueError
        Bad shapes or options, a non-finite grid value, a bad `out`.
    TypeError
        Non-numeric inputs, an unsupported dtype.

    Examples
    --------
    >>> import numpy as np
    >>> import cropgrad
    >>> image = np.arange(6, dtype=np.float32).reshape(1, 1, 2, 3)
    >>> grid = np.array([[[[-1.0, -1.0], [1.0, 1.0], [0.5, 0.0]]]])
    >>> cropgrad.grid_sample(image, grid, align_corners=True)[0, 0]
    array([[0., 5., 3.]], dtype=float32)
    """
    o = _options(
        mode, padding_mode, align_corners, data_format, num_threads, flush_denormals
    )
    raw, arith, shape, grid = _image_and_grid(image, grid, o)
    return _sample(_core.grid_sample, raw, arith, shape, grid, dtype, out, o)


@_docs.shared
def grid_sample_grad_image(
    grads,
    grid,
    image_size,
    *,
    mode="bilinear",
    padding_mode="zeros",
    align_corners=False,
    dtype=None,
    out=None,
    data_format="NCHW",
    num_threads=None,
    flush_denormals=False,
):
    """Gradient of `grid_sample` with respect to the image.

    PyTorch's input gradient, bit for bit (AVX2, float32 and float64), on
    every thread count: each point's taps add their weight times the
    gradient to their pixels, every pixel summed in PyTorch's order (per
    batch, points in vectors of 8 float32 or 4 float64; per vector, per
    channel, per tap, lane after lane), from +0.

    Parameters
    ----------
    grads : array_like of shape (N, C, H_out, W_out)
        The gradient of the sampled output (``(N, H_out, W_out, C)`` with
        NHWC).  float64 is computed in float64, every other dtype in
        float32.
    grid : array_like of shape (N, H_out, W_out, 2)
        As for `grid_sample`.
    {image_size}
    mode, padding_mode, align_corners
        As for `grid_sample`.
    {grads_dtype}
    out, data_format, num_threads, flush_denormals
        As for `grid_sample`.

    Returns
    -------
    ndarray of shape `image_size`

    Examples
    --------
    >>> import numpy as np
    >>> import cropgrad
    >>> grads = np.ones((1, 1, 1, 1), dtype=np.float32)
    >>> grid = np.zeros((1, 1, 1, 2))                  # the image's centre
    >>> cropgrad.grid_sample_grad_image(grads, grid, (1, 1, 2, 2))[0, 0]
    array([[0.25, 0.25],
           [0.25, 0.25]], dtype=float32)
    """
    o = _options(
        mode, padding_mode, align_corners, data_format, num_threads, flush_denormals
    )
    raw = _v.real_array(grads, "grads", bfloat16=True)
    arith = _grads_arithmetic(raw)
    fmt = "NCHW" if o.nchw else "NHWC"
    size = _v.image_size(image_size, fmt)
    if min(size) < 0:
        raise ValueError(f"image_size must not be negative, got {size}")
    n, c, h, w = _nchw_shape(size, o.nchw)
    grid = _grid(grid, arith, n)
    spatial(h, w, "image_size")
    k = _kernel_nchw(o, c, arith)
    grads = _grads(raw, arith, (n, c, grid.shape[1], grid.shape[2]), o, k)
    result_dtype = _result_dtype(dtype, raw.dtype, arith)
    shape = (n, c, h, w)
    result = _output(out, shape, result_dtype, o.nchw, (raw, grid))
    computed = _scratch(result, arith, o, k)
    size = _in_layout(shape, k)
    _run(_core.grid_sample_grad_image, (grads, grid), arith, o, k, computed, size)
    return _deliver(result, computed, o, k)


def grid_sample_grad_grid(
    grads,
    image,
    grid,
    *,
    mode="bilinear",
    padding_mode="zeros",
    align_corners=False,
    out=None,
    data_format="NCHW",
    num_threads=None,
    flush_denormals=False,
):
    """Gradient of `grid_sample` with respect to the grid.

    PyTorch's grid gradient, bit for bit (AVX2, float32 and float64), on
    every thread count: per point, the image's slopes at the sample in x
    and y, summed over the channels (from channel 0) times the gradient,
    times the padding's derivative.  Zero for ``mode="nearest"``; bicubic
    leaves the padding out of the derivative, as PyTorch does.  The exact
    transpose of `grid_sample_jvp_grid`.

    Parameters
    ----------
    grads : array_like of shape (N, C, H_out, W_out)
        The gradient of the sampled output (NHWC: ``(N, H_out, W_out,
        C)``), converted to the image's arithmetic type.
    image, grid, mode, padding_mode, align_corners
        As for `grid_sample`.
    out, data_format, num_threads, flush_denormals
        As for `grid_sample`.

    Returns
    -------
    ndarray of shape (N, H_out, W_out, 2)
        ``d/d(x, y)`` per point, in the arithmetic type (float64 for
        float64 images, float32 otherwise).

    Examples
    --------
    >>> import numpy as np
    >>> import cropgrad
    >>> image = np.array([[[[0.0, 1.0], [2.0, 3.0]]]], dtype=np.float32)
    >>> grads = np.ones((1, 1, 1, 1), dtype=np.float32)
    >>> grid = np.zeros((1, 1, 1, 2))
    >>> cropgrad.grid_sample_grad_grid(grads, image, grid, align_corners=True)
    array([[[[0.5, 1. ]]]], dtype=float32)
    """
    o = _options(
        mode, padding_mode, align_corners, data_format, num_threads, flush_denormals
    )
    raw, arith, (n, c, _, _), grid = _image_and_grid(image, grid, o)
    k = _kernel_nchw(o, c, arith, raw)
    grads_raw = grads
    grads = _grads(grads, arith, (n, c, grid.shape[1], grid.shape[2]), o, k)
    image = _layout_array(raw, arith, o.nchw, k, o.threads)
    inputs = (raw, image, grid, grads_raw, grads)
    result = _unshared(_v.output(out, grid.shape, arith), out, inputs)
    _run(_core.grid_sample_grad_grid, (grads, image, grid), arith, o, k, result)
    return result


def grid_sample_jvp_grid(
    image,
    grid,
    grid_tangent,
    *,
    mode="bilinear",
    padding_mode="zeros",
    align_corners=False,
    dtype=None,
    out=None,
    data_format="NCHW",
    num_threads=None,
    flush_denormals=False,
):
    """Derivative of `grid_sample` along a tangent of the grid (forward mode).

    How the sampled output changes as the grid moves along `grid_tangent`:
    per output element, the image's slopes at the sample in x and y (the
    terms of `grid_sample_grad_grid`, which is this map's transpose:
    ``sum(jvp(t) * g) == sum(t * grad_grid(g))`` up to rounding) times the
    padding's derivative times the tangent, ``fma(s_y, u_y, s_x * u_x)``
    with ``u = derivative * tangent``.  Zero for ``mode="nearest"``
    (piecewise constant).  PyTorch has no such op.

    Parameters
    ----------
    image, grid
        As for `grid_sample`.
    grid_tangent : array_like of shape (N, H_out, W_out, 2)
        ``(t_x, t_y)`` per point, converted to the arithmetic type; NaN and
        infinities are allowed and propagate (but with nearest sampling).
    mode, padding_mode, align_corners, dtype, out, data_format, \
num_threads, flush_denormals
        As for `grid_sample`.

    Returns
    -------
    ndarray of the shape and dtype `grid_sample` returns

    Examples
    --------
    A ramp rising by 1 per column; moving the points right by 1 pixel (2/3
    of the normalised width of 3 pixels, not aligned) moves each sample by
    1:

    >>> import numpy as np
    >>> import cropgrad
    >>> image = np.tile(np.arange(3.0, dtype=np.float32), (1, 1, 3, 1))
    >>> grid = np.zeros((1, 1, 2, 2))
    >>> tangent = np.tile([2 / 3, 0.0], (1, 1, 2, 1))
    >>> cropgrad.grid_sample_jvp_grid(image, grid, tangent)
    array([[[[1., 1.]]]], dtype=float32)
    """
    o = _options(
        mode, padding_mode, align_corners, data_format, num_threads, flush_denormals
    )
    raw, arith, shape, grid = _image_and_grid(image, grid, o)
    tangent = _v.float32_array(grid_tangent, "grid_tangent", arith)
    tangent_shape(tangent.shape, grid.shape)
    return _sample(
        _core.grid_sample_jvp_grid, raw, arith, shape, grid, dtype, out, o, tangent
    )
