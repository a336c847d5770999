"""Where grid_sample's points fall and what they touch, for its reference:
the constants of an axis (unnormalisation, clipping, reflection), the points
of a call vectorised over the grid, the taps of each mode and the serial
scatter of the input gradient."""

import numpy as np

from .fma import f32, f64, fma

MODES = ("bilinear", "nearest", "bicubic")
PADDING_MODES = ("zeros", "border", "reflection")

# The lanes of one vector in the AVX2 build (256 bits); AVX512 has twice as
# many.  Only the order of the input gradient's scatter depends on it.
VECTOR_BITS = 256

# The cubic convolution's constant (PyTorch's, as in its bicubic upsampling).
CUBIC_A = -0.75


def arithmetic_type(dtype):
    """float64 for float64 data, float32 for everything else."""
    return f64 if np.dtype(dtype) == f64 else f32


def lanes(T, vector_bits=VECTOR_BITS):
    """Sampling points per vector: 8 float32 or 4 float64 lanes in AVX2."""
    return vector_bits // (8 * np.dtype(T).itemsize)


# --------------------------------------------------------------------------
# Where a grid coordinate falls along one axis


class Axis:
    """The constants of one axis of `size` pixels, in ``T``.

    ``scale`` unnormalises (``(size - 1) / 2`` aligned, ``size / 2`` not),
    ``top = size - 1`` is the clip's upper bound, reflection folds about
    ``low`` and ``low + span`` (``0`` and ``size - 1`` aligned, ``-0.5``
    and ``size - 0.5`` not) with ``twice = 2 * span``; an aligned axis of
    one pixel has no span (``empty``) and reflects everything to 0.
    """

    def __init__(self, size, padding_mode, align_corners, T):
        self.size = int(size)
        self.padding = padding_mode
        self.aligned = bool(align_corners)
        self.T = T
        self.top = T(self.size - 1)
        if self.aligned:
            self.scale = T(T(self.size - 1) / T(2))
            self.low = T(0)
            self.twice = T(T(self.size - 1) * T(2))
            self.empty = self.size <= 1
        else:
            self.scale = T(T(self.size) / T(2))
            self.low = T(-0.5)
            self.twice = T(T(self.size) * T(2))
            self.empty = self.size <= 0

    def unnormalize(self, g):
        """``(g + 1) * scale``, aligned; ``fma(g + 1, scale, -0.5)`` not."""
        T = self.T
        if self.aligned:
            return (g + T(1)) * self.scale
        return fma(g + T(1), self.scale, T(-0.5))

    def clip(self, v):
        """``min(max(v, 0), size - 1)``, a NaN becoming 0 (the forward's)."""
        T = self.T
        v = np.where(v > 0, v, T(0))
        return np.where(v < self.top, v, self.top)

    def clip_with_grad(self, v):
        """The backward's clip: a NaN stays NaN; the mask is False where the
        result is exactly 0 or ``size - 1`` (the bounds count as outside)."""
        T = self.T
        lo = np.where(np.isnan(v) | (v > 0), v, T(0))
        res = np.where(np.isnan(lo) | (lo < self.top), lo, self.top)
        inside = (_bits(lo) != _bits(T(0))) & (_bits(res) != _bits(self.top))
        return res, inside

    def _fold(self, v):
        """``(extra, twice - extra, v - low < 0)``: the distance from ``low``
        folded into ``[0, twice]``."""
        shifted = v if self.aligned else v - self.low
        a = np.abs(shifted)
        flips = np.trunc(a / self.twice)
        extra = fma(-flips, self.twice, a)
        return extra, self.twice - extra, shifted < 0

    def reflect(self, v):
        """The forward's reflection: ``min(extra, twice - extra) + low``
        (NaN if either is NaN)."""
        if self.empty:
            return np.zeros_like(v)
        extra, other, _ = self._fold(v)
        res = np.minimum(extra, other)
        return res if self.aligned else res + self.low

    def reflect_with_grad(self, v):
        """The backward's reflection and its slope, +1 or -1."""
        T = self.T
        if self.empty:
            return np.zeros_like(v), np.zeros_like(v)
        extra, other, negative = self._fold(v)
        flip = extra > other
        res = np.where(flip, other, extra)
        if not self.aligned:
            res = res + self.low
        return res, np.where(flip ^ negative, T(-1), T(1))

    def locate(self, g):
        """``apply``: the pixel coordinate of grid values `g`, padded."""
        v = self.unnormalize(g)
        if self.padding == "border":
            return self.clip(v)
        if self.padding == "reflection":
            return self.clip(self.reflect(v))
        return v

    def locate_with_grad(self, g):
        """``apply_get_grad``: the coordinate and ``d coordinate / d g``."""
        T = self.T
        v = self.unnormalize(g)
        if self.padding == "border":
            res, inside = self.clip_with_grad(v)
            return res, np.where(inside, self.scale, T(0))
        if self.padding == "reflection":
            res, slope = self.reflect_with_grad(v)
            mult = slope * self.scale
            res, inside = self.clip_with_grad(res)
            return res, np.where(inside, mult, T(0))
        return v, np.full_like(v, self.scale)

    def pad_tap(self, v):
        """``compute_coordinates``: a bicubic tap's coordinate, padded."""
        if self.padding == "border":
            return self.clip(v)
        if self.padding == "reflection":
            return self.clip(self.reflect(v))
        return v


def _bits(v):
    v = np.asarray(v)
    return v.view(np.int32 if v.dtype == f32 else np.int64)


def _to_int(v):
    """C's truncating conversion to the integer of the same size as the
    type, as ``cvttps2dq`` does it: NaN and out-of-range values give the
    most negative integer.  Returned as int64."""
    bits = 32 if v.dtype == f32 else 64
    lo = -(2.0 ** (bits - 1))
    with np.errstate(invalid="ignore"):
        ok = (v >= lo) & (v < -lo)
        return np.where(ok, np.trunc(np.where(ok, v, 0)), lo).astype(np.int64)


def _inside(iy, ix, height, width):
    """Reads of pixel ``(iy, ix)`` that land in the image."""
    return (ix > -1) & (ix < width) & (iy > -1) & (iy < height)


class _Points:
    """The sampling points of a grid, flattened to ``P = N * H_out * W_out``
    in the kernel's order (batch, output row, output column)."""

    def __init__(self, grid, image_shape, padding_mode, align_corners, T):
        grid = np.asarray(grid)
        if grid.ndim != 4 or grid.shape[3] != 2:
            raise ValueError(f"grid must be [N, H_out, W_out, 2], got {grid.shape}")
        batch, channels, height, width = (int(v) for v in image_shape)
        if grid.shape[0] != batch:
            raise ValueError(f"grid has {grid.shape[0]} batches, the image {batch}")
        if padding_mode not in PADDING_MODES:
            raise ValueError(f"padding_mode must be one of {PADDING_MODES}")
        with np.errstate(all="ignore"):
            grid = grid.astype(T)
        self.T = T
        self.shape = (batch, channels, height, width)
        self.out_hw = grid.shape[1:3]
        self.per_batch = grid.shape[1] * grid.shape[2]
        self.gx = grid[..., 0].reshape(-1)
        self.gy = grid[..., 1].reshape(-1)
        self.batch_of = np.repeat(np.arange(batch), self.per_batch)
        self.cols = Axis(width, padding_mode, align_corners, T)
        self.rows = Axis(height, padding_mode, align_corners, T)
        self.must_in_bound = padding_mode != "zeros"

    def read(self, image, iy, ix, mask):
        """``image`` [N, C, H * W] at pixels ``(iy, ix)``: [C, P], 0 where
        `mask` is False (a masked read does not happen)."""
        width = self.shape[3]
        off = np.where(mask, iy * width + ix, 0)
        vals = image[self.batch_of, :, off].T
        return np.where(mask, vals, vals.dtype.type(0))

    def per_channel(self, values):
        """[C, P] -> [N, C, H_out, W_out]."""
        channels = values.shape[0]
        out = values.reshape(channels, self.shape[0], *self.out_hw)
        return np.ascontiguousarray(out.transpose(1, 0, 2, 3))

    def per_point(self, values):
        """[N, C, H_out, W_out] -> [C, P]."""
        values = np.asarray(values)
        return values.transpose(1, 0, 2, 3).reshape(values.shape[1], -1)


class _Scatter:
    """The input gradient's additions, collected in the kernel's order and
    then made one at a time.

    The kernel runs over the points of each batch in vectors of `lanes`
    points; per vector, per channel, per tap (corner) in a fixed order, it
    adds the tap's contribution of each lane, lane after lane, to its pixel
    (when the tap's mask lets it).  ``add(offsets, mask, values)`` records
    one tap (offsets and mask [P], values [C, P]); ``result`` performs the
    additions in that order (``numpy.add.at`` adds in the order given).
    """

    def __init__(self, points, lanes_):
        self.points = points
        self.lanes = lanes_
        self.taps = []

    def add(self, iy, ix, mask, values):
        width = self.points.shape[3]
        self.taps.append((np.where(mask, iy * width + ix, 0), mask, values))

    def _order(self, a, fill):
        """[..., P] -> [..., N, vectors, lanes], padded with `fill`."""
        pts = self.points
        n, q, L = pts.shape[0], pts.per_batch, self.lanes
        vectors = -(-q // L)
        a = a.reshape(*a.shape[:-1], n, q)
        pad = [(0, 0)] * (a.ndim - 1) + [(0, vectors * L - q)]
        a = np.pad(a, pad, constant_values=fill)
        return a.reshape(*a.shape[:-1], vectors, L)

    def result(self):
        pts = self.points
        batch, channels, height, width = pts.shape
        T = pts.T
        out = np.zeros(pts.shape, T)
        if not self.taps or pts.per_batch == 0:
            return out
        plane = height * width
        offsets = self._order(np.stack([t[0] for t in self.taps]), 0)  # K,N,V,L
        masks = self._order(np.stack([t[1] for t in self.taps]), False)
        values = self._order(np.stack([t[2] for t in self.taps], 1), 0)  # C,K,N,V,L
        nn = np.arange(batch).reshape(1, batch, 1, 1)
        cc = np.arange(channels).reshape(channels, 1, 1, 1, 1)
        flat = (nn * channels + cc) * plane + offsets  # C,K,N,V,L
        masks = np.broadcast_to(masks, flat.shape)
        order = (2, 3, 0, 1, 4)  # N, V, C, K, L
        flat = flat.transpose(order)[masks.transpose(order)]
        values = values.transpose(order)[masks.transpose(order)]
        np.add.at(out.reshape(-1), flat, values)
        return out


# --------------------------------------------------------------------------
# Bilinear


def _bilinear_params(points, x, y):
    """Corner weights, pixel indices and masks of bilinear sampling at pixel
    coordinates ``(x, y)``."""
    T = points.T
    _, _, height, width = points.shape
    x_w = np.floor(x)
    y_n = np.floor(y)
    w = x - x_w
    e = T(1) - w
    n = y - y_n
    s = T(1) - n
    weights = (s * e, s * w, n * e, n * w)  # nw, ne, sw, se
    ix_w, iy_n = _to_int(x_w), _to_int(y_n)
    ix_e, iy_s = ix_w + 1, iy_n + 1
    if points.must_in_bound:
        # The coordinates are clipped: only the east and south neighbours of
        # the last column and row fall outside.
        east, south = ix_e < width, iy_s < height
        masks = (np.ones(x.shape, bool), east, south, east & south)
    else:
        masks = (
            _inside(iy_n, ix_w, height, width),
            _inside(iy_n, ix_e, height, width),
            _inside(iy_s, ix_w, height, width),
            _inside(iy_s, ix_e, height, width),
        )
    corners = ((iy_n, ix_w), (iy_n, ix_e), (iy_s, ix_w), (iy_s, ix_e))
    return (n, s, w, e), weights, corners, masks


# --------------------------------------------------------------------------
# Bicubic


def cubic_coefficients(t):
    """The four weights of cubic convolution (``A = -0.75``) at the
    fraction `t` in [0, 1), for the taps at -1, 0, 1 and 2.

    ``((A x - 5A) x + 8A) x - 4A`` (at ``x = t + 1`` and ``2 - t``) is
    rounded at every step: the compiler fuses the constant products
    ``5A, 8A, 4A`` (exact) into the additions, not ``A x`` or ``(..) x``.
    ``((A + 2) x - (A + 3)) x x + 1`` (at ``x = t`` and ``1 - t``) is
    ``fma(fma(A + 2, x, -(A + 3)) * x, x, 1)``.
    """
    T = t.dtype.type
    A = T(CUBIC_A)
    five, eight, four = T(5 * CUBIC_A), T(8 * CUBIC_A), T(4 * CUBIC_A)
    a2, a3 = T(CUBIC_A + 2), T(CUBIC_A + 3)

    def outer(x):  # 1 < x < 2
        return ((A * x - five) * x + eight) * x - four

    def inner(x):  # x <= 1
        return fma(fma(a2, x, -a3) * x, x, T(1))

    return (outer(t + T(1)), inner(t), inner(T(1) - t), outer(T(2) - t))


def cubic_slopes(t):
    """The derivatives of `cubic_coefficients` with respect to the tap's
    distance, as PyTorch writes them (at ``x = -1 - t, -t, 1 - t, 2 - t``);
    every operation rounded (the fused products are the exact constant
    ones)."""
    T = t.dtype.type
    A3, A10, A8 = T(3 * CUBIC_A), T(10 * CUBIC_A), T(8 * CUBIC_A)
    B3, B2 = T(3 * (CUBIC_A + 2)), T(2 * (CUBIC_A + 3))
    x0 = T(-1) - t
    x1 = T(0) - t
    x2 = T(1) - t
    x3 = T(2) - t
    return (
        (-A3 * x0 - A10) * x0 - A8,  # (-3A x - 10A) x - 8A
        (-B3 * x1 - B2) * x1,  # (-3(A + 2) x - 2(A + 3)) x
        (B3 * x2 - B2) * x2,  # (3(A + 2) x - 2(A + 3)) x
        (A3 * x3 - A10) * x3 + A8,  # (3A x - 10A) x + 8A
    )


def _cubic_tap(points, x_floor, y_floor, i, j):
    """Pixel indices and mask of tap ``(i, j)`` (column ``floor(x) - 1 + i``,
    row ``floor(y) - 1 + j``), padded as the padding mode says."""
    T = points.T
    _, _, height, width = points.shape
    xx = points.cols.pad_tap(x_floor + T(-1 + i))
    yy = points.rows.pad_tap(y_floor + T(-1 + j))
    ix, iy = _to_int(xx), _to_int(yy)
    if points.must_in_bound:
        mask = np.ones(ix.shape, bool)
    else:
        mask = _inside(iy, ix, height, width)
    return iy, ix, mask


def _nearest_tap(points):
    _, _, height, width = points.shape
    x = points.cols.locate(points.gx)
    y = points.rows.locate(points.gy)
    ix, iy = _to_int(np.rint(x)), _to_int(np.rint(y))  # half to even
    if points.must_in_bound:
        mask = np.ones(ix.shape, bool)
    else:
        mask = _inside(iy, ix, height, width)
    return iy, ix, mask
