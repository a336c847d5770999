"""A plain NumPy model of ``torch.nn.functional.grid_sample`` (2-D), private.

PyTorch's CPU kernel as its vectorised AVX2 build computes it (the
``ATEN_CPU_CAPABILITY`` ``avx2`` dispatch, compiled with fused
multiply-adds), bit for bit, for the forward op, the input (image)
gradient and the grid gradient; NCHW images ``[N, C, H, W]``, grids
``[N, H_out, W_out, 2]`` holding ``(x, y)`` normalised to ``[-1, 1]``.
The arithmetic is written down in ``docs/semantics.md`` ("Grid sampling");
this module follows it line by line, vectorised over the sampling points
(whose arithmetic is independent) and serial where the order of additions
matters.  It imports nothing but NumPy and the standard library, so the
fixture script (``tests/data/make_grid_sample_fixtures.py``) loads it from
its folder in an environment without compiled cropgrad.

The arithmetic type ``T`` is float64 for float64 data and float32 for
everything else; every operation is one rounding in ``T``, and a fused
multiply-add ``fma(a, b, c)`` is one rounding of the exact ``a * b + c``
(`fma`, emulated exactly with error-free transformations: ``fma.py``);
where the points fall and what they touch is ``points.py``.

Functions
---------
fma
    the fused multiply-add in float32 or float64;
grid_sample, grid_sample_grad_image, grid_sample_grad_grid
    the forward op and its two gradients.

Examples
--------
>>> import numpy as np
>>> image = np.arange(4, dtype=np.float32).reshape(1, 1, 2, 2)
>>> grid = np.zeros((1, 1, 1, 2), np.float32)      # the image's centre
>>> grid_sample(image, grid, align_corners=True)[0, 0].tolist()
[[1.5]]
"""

import numpy as np

from .fma import fma
from .points import (
    MODES,
    PADDING_MODES,
    _bilinear_params,
    _cubic_tap,
    _nearest_tap,
    _Points,
    _Scatter,
    arithmetic_type,
    cubic_coefficients,
    cubic_slopes,
    lanes,
)

__all__ = [
    "MODES",
    "PADDING_MODES",
    "arithmetic_type",
    "fma",
    "grid_sample",
    "grid_sample_grad_grid",
    "grid_sample_grad_image",
    "lanes",
]


# --------------------------------------------------------------------------
# The ops


def _prepare(image_shape, grid, mode, padding_mode, align_corners, T):
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    if len(image_shape) != 4:
        raise ValueError(f"image must be [N, C, H, W], got shape {image_shape}")
    return _Points(grid, image_shape, padding_mode, align_corners, T)


def _planes(image, T):
    image = np.asarray(image)
    with np.errstate(all="ignore"):
        image = image.astype(T)
    n, c, h, w = image.shape
    return image.reshape(n, c, h * w)


def grid_sample(
    image, grid, mode="bilinear", padding_mode="zeros", align_corners=False
):
    """``torch.nn.functional.grid_sample`` (2-D), PyTorch's CPU bits.

    Parameters
    ----------
    image : array_like of shape (N, C, H, W)
        Read in the arithmetic type (float64 for float64, else float32).
    grid : array_like of shape (N, H_out, W_out, 2)
        ``(x, y)`` per output pixel, -1 and 1 the image's outer edges
        (``align_corners=False``) or the centres of its corner pixels
        (``True``); rounded to the arithmetic type.
    mode : {"bilinear", "nearest", "bicubic"}
    padding_mode : {"zeros", "border", "reflection"}
    align_corners : bool

    Returns
    -------
    ndarray of shape (N, C, H_out, W_out), the arithmetic type

    Examples
    --------
    >>> image = np.arange(6, dtype=np.float32).reshape(1, 1, 2, 3)
    >>> grid = np.array([[[[-1.0, -1.0], [1.0, 1.0], [0.5, 0.0]]]], np.float32)
    >>> grid_sample(image, grid, align_corners=True)[0, 0].tolist()
    [[0.0, 5.0, 3.0]]
    """
    T = arithmetic_type(np.asarray(image).dtype)
    planes = _planes(image, T)
    pts = _prepare(
        planes.shape[:2] + np.shape(image)[2:],
        grid,
        mode,
        padding_mode,
        align_corners,
        T,
    )
    with np.errstate(all="ignore"):
        if mode == "nearest":
            iy, ix, mask = _nearest_tap(pts)
            return pts.per_channel(pts.read(planes, iy, ix, mask))
        if mode == "bilinear":
            x = pts.cols.locate(pts.gx)
            y = pts.rows.locate(pts.gy)
            _, weights, corners, masks = _bilinear_params(pts, x, y)
            v = [pts.read(planes, iy, ix, m) for (iy, ix), m in zip(corners, masks)]
            nw, ne, sw, se = weights
            out = fma(v[3], se, fma(v[2], sw, fma(v[1], ne, v[0] * nw)))
            return pts.per_channel(out)
        x = pts.cols.unnormalize(pts.gx)
        y = pts.rows.unnormalize(pts.gy)
        x0, y0 = np.floor(x), np.floor(y)
        cx, cy = cubic_coefficients(x - x0), cubic_coefficients(y - y0)
        rows = []
        for j in range(4):
            v = [pts.read(planes, *_cubic_tap(pts, x0, y0, i, j)) for i in range(4)]
            # Only the first addition is fused (the compiler's choice).
            rows.append((fma(cx[0], v[0], cx[1] * v[1]) + cx[2] * v[2]) + cx[3] * v[3])
        out = fma(
            cy[3], rows[3], fma(cy[2], rows[2], fma(cy[1], rows[1], cy[0] * rows[0]))
        )
        return pts.per_channel(out)


def _backward(
    grads,
    image,
    grid,
    image_shape,
    mode,
    padding_mode,
    align_corners,
    T,
    want_image,
    want_grid,
    lanes_,
):
    """The kernel's backward: (input gradient or None, grid gradient or None)."""
    pts = _prepare(tuple(image_shape), grid, mode, padding_mode, align_corners, T)
    with np.errstate(all="ignore"):
        g = pts.per_point(np.asarray(grads).astype(T))
    if g.shape != (pts.shape[1], pts.gx.size):
        raise ValueError(f"grads must be [N, C, H_out, W_out], got {np.shape(grads)}")
    planes = None if image is None else _planes(image, T)
    scatter = _Scatter(pts, lanes(T) if lanes_ is None else int(lanes_))
    grad_grid = None
    channels = pts.shape[1]
    with np.errstate(all="ignore"):
        if mode == "nearest":
            if want_image:
                iy, ix, mask = _nearest_tap(pts)
                scatter.add(iy, ix, mask, g)
            if want_grid:
                grad_grid = np.zeros((pts.gx.size, 2), T)
        elif mode == "bilinear":
            x, x_mult = pts.cols.locate_with_grad(pts.gx)
            y, y_mult = pts.rows.locate_with_grad(pts.gy)
            (n, s, w, e), weights, corners, masks = _bilinear_params(pts, x, y)
            if want_image:
                for (iy, ix), m, wt in zip(corners, masks, weights):
                    scatter.add(iy, ix, m, wt * g)
            if want_grid:
                v = [pts.read(planes, iy, ix, m) for (iy, ix), m in zip(corners, masks)]
                gx = np.zeros(pts.gx.size, T)
                gy = np.zeros(pts.gx.size, T)
                for c in range(channels):
                    nw, ne, sw, se = (vc[c] for vc in v)
                    gx = fma(fma(se - sw, n, (ne - nw) * s), g[c], gx)
                    gy = fma(fma(se - ne, w, (sw - nw) * e), g[c], gy)
                grad_grid = np.stack([gx * x_mult, gy * y_mult], 1)
        else:
            x = pts.cols.unnormalize(pts.gx)
            y = pts.rows.unnormalize(pts.gy)
            x0, y0 = np.floor(x), np.floor(y)
            cx, cy = cubic_coefficients(x - x0), cubic_coefficients(y - y0)
            dx, dy = cubic_slopes(x - x0), cubic_slopes(y - y0)
            taps = [[_cubic_tap(pts, x0, y0, i, j) for j in range(4)] for i in range(4)]
            if want_image:
                # The kernel's loop is (channel, i, j): one tap per (i, j).
                for i in range(4):
                    for j in range(4):
                        scatter.add(*taps[i][j], (g * cx[i]) * cy[j])
            if want_grid:
                gx = np.zeros(pts.gx.size, T)
                gy = np.zeros(pts.gx.size, T)
                reads = [
                    [pts.read(planes, *taps[i][j]) for j in range(4)] for i in range(4)
                ]
                for c in range(channels):
                    for i in range(4):
                        for j in range(4):
                            vg = reads[i][j][c] * g[c]
                            gx = fma(-(vg * dx[i]), cy[j], gx)
                            gy = fma(-(vg * dy[j]), cx[i], gy)
                grad_grid = np.stack([gx * pts.cols.scale, gy * pts.rows.scale], 1)
    grad_image = scatter.result() if want_image else None
    if grad_grid is not None:
        grad_grid = grad_grid.reshape(pts.shape[0], *pts.out_hw, 2)
    return grad_image, grad_grid


def grid_sample_grad_image(
    grads,
    grid,
    image_size,
    mode="bilinear",
    padding_mode="zeros",
    align_corners=False,
    dtype=None,
    lanes=None,
):
    """The input (image) gradient of `grid_sample`, PyTorch's CPU bits.

    Parameters
    ----------
    grads : array_like of shape (N, C, H_out, W_out)
        The gradient of the output.
    grid : array_like of shape (N, H_out, W_out, 2)
    image_size : sequence of 4 ints
        ``(N, C, H, W)``: the gradient's shape.
    mode, padding_mode, align_corners
        As for `grid_sample`.
    dtype : dtype, optional
        The arithmetic type's source (the image's dtype); by default that
        of `grads`.
    lanes : int, optional
        Points per vector, which orders the additions into one pixel (see
        ``docs/semantics.md``); by default AVX2's, 8 for float32 and 4 for
        float64.

    Returns
    -------
    ndarray of shape image_size, the arithmetic type

    Examples
    --------
    >>> grads = np.ones((1, 1, 1, 1), np.float32)
    >>> grid = np.zeros((1, 1, 1, 2), np.float32)
    >>> out = grid_sample_grad_image(grads, grid, (1, 1, 2, 2))
    >>> out[0, 0].tolist()
    [[0.25, 0.25], [0.25, 0.25]]
    """
    T = arithmetic_type(np.asarray(grads).dtype if dtype is None else dtype)
    out, _ = _backward(
        grads,
        None,
        grid,
        image_size,
        mode,
        padding_mode,
        align_corners,
        T,
        True,
        False,
        lanes,
    )
    return out


def grid_sample_grad_grid(
    grads, image, grid, mode="bilinear", padding_mode="zeros", align_corners=False
):
    """The grid gradient of `grid_sample`, PyTorch's CPU bits.

    Zero for ``mode="nearest"``.  For ``"bicubic"`` PyTorch leaves the
    padding out of the derivative: the slope is taken through the unpadded
    coordinate, times the unnormalising scale, whatever the padding mode.

    Parameters
    ----------
    grads : array_like of shape (N, C, H_out, W_out)
    image : array_like of shape (N, C, H, W)
        Its dtype gives the arithmetic type.
    grid, mode, padding_mode, align_corners
        As for `grid_sample`.

    Returns
    -------
    ndarray of shape (N, H_out, W_out, 2), the arithmetic type

    Examples
    --------
    >>> image = np.array([[[[0.0, 1.0], [2.0, 3.0]]]], np.float32)
    >>> grads = np.ones((1, 1, 1, 1), np.float32)
    >>> grid = np.zeros((1, 1, 1, 2), np.float32)
    >>> grid_sample_grad_grid(grads, image, grid, align_corners=True).tolist()
    [[[[0.5, 1.0]]]]
    """
    T = arithmetic_type(np.asarray(image).dtype)
    _, out = _backward(
        grads,
        image,
        grid,
        np.shape(image),
        mode,
        padding_mode,
        align_corners,
        T,
        False,
        True,
        None,
    )
    return out
