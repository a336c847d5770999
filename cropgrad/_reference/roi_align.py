"""A plain NumPy model of RoIAlign (average pooling), independent of the kernels.

Private.  RoIAlign as torchvision's CPU kernel computes it
(``torchvision.ops.roi_align``, NCHW, boxes ``[x1, y1, x2, y2]`` in the
coordinates of the input image, scaled by ``spatial_scale``): one sample
at a time, in the serial order (box, bin row, bin column, sample row,
sample column, corner), vectorised over channels only.  Slow, but every
rounding can be checked by eye.  The fixture script
(``tests/data/make_roi_align_fixtures.py``) loads this file by its path in
an environment that has torchvision but no compiled cropgrad, so it
imports nothing but NumPy and the standard library.

The arithmetic type
-------------------
torchvision computes in the input's type ``T``.  Here ``T`` is float64 for
float64 images (float64 ``grads`` for the image gradient) and float32 for
every other dtype: float32 images, and float16, bfloat16 and integer
images, whose pixels are converted to float32 when read (torchvision's
float16 kernel computes in float16 instead, rounding every operation to
float16; cropgrad does not).  Boxes and ``spatial_scale`` are rounded to
``T`` first, as torchvision's kernel receives them.

Two kinds of arithmetic, chosen with ``exact``:

``exact=True``
    the operation's own arithmetic: every operation in ``T``, rounded in
    torchvision's order.  Results are ``T`` arrays with torchvision's bits
    (float32 and float64, wherever torchvision is defined; see below).
``exact=False``
    the accuracy yardstick: the geometry of every sample (scaled corners,
    bin size, grid, sample coordinate, the clamps, the pixel indices and
    the lerp ``l``) in ``T``, since those decide which pixels a sample
    reads; everything after them (``1 - l``, the weights, products, sums
    and the division by the count) in float64.  Results are float64.  With
    a float64 image everything is float64, so the result is a smooth
    function of the boxes between pixel boundaries: the boxes derivatives
    below are its derivatives.

The default is ``exact=True`` for `roi_align` and `roi_align_grad_image`
(their reason to exist is torchvision's bits) and ``exact=False`` for the
boxes derivatives, which torchvision lacks: their definition is the float64
one, the float32 arithmetic of ``exact=True`` is the order the kernels
will follow (see "Arithmetic of the boxes derivative").

Where a sample falls
--------------------
Along one axis (rows: ``y1, y2, H, out_h``; columns: ``x1, x2, W,
out_w``), with ``s = T(spatial_scale)``, ``off = 0.5`` if ``aligned`` else
``0`` and the pooled size ``P``, in ``T``, one rounding per operation::

    start = lo * s - off
    end   = hi * s - off
    size  = end - start
    if not aligned: size = max(size, 1)        # NaN stays NaN
    bin   = size / P
    grid  = sampling_ratio if sampling_ratio > 0 else ceil(bin)
    c     = (start + p * bin) + ((i + 0.5) * bin) / grid

for bin ``p`` in ``[0, P)`` and sample ``i`` in ``[0, grid)``.  The
bin's count is ``T(max(grid_h * grid_w, 1))``.  A sample is *inside* when
``-1 <= c_y <= H`` and ``-1 <= c_x <= W`` (a NaN coordinate never is);
then, per axis::

    if c <= 0: c = 0                       # the lower clamp
    low = int(c)
    if low >= H - 1: low = high = H - 1; c = H - 1   # the upper clamp
    else: high = low + 1
    l = c - low;  h = 1 - l

and the weights are ``w1 = h_y * h_x, w2 = h_y * l_x, w3 = l_y * h_x,
w4 = l_y * l_x`` for the pixels ``(low_y, low_x), (low_y, high_x),
(high_y, low_x), (high_y, high_x)``.  (torchvision writes ``1. - l`` in
double and rounds it to ``T``: for float32 that is the float32 subtraction,
since double has more than twice float32's precision.)

Forward: per output element, ``acc = 0``; per inside sample ``acc += ((w1
* v1 + w2 * v2) + w3 * v3) + w4 * v4``; the output is ``acc / count``.
Image gradient: per output element in the order (box, channel, bin row,
bin column) and per inside sample, ``(g * w) / count`` is added to each of
the four pixels in the order above (the same pixel twice or four times
when the clamps make ``low == high``).

Where cropgrad defines what torchvision leaves undefined
--------------------------------------------------------
- A sample outside the image contributes nothing and reads no pixel.
  torchvision's forward adds ``0 * pixel[0]`` for it, which is NaN when
  the channel's first pixel is NaN or infinite; here it stays 0.  (For
  finite pixels the two agree bit for bit: adding a zero never changes a
  sum that starts at +0.)  Inside samples read all four corners, as
  torchvision does, so a zero weight times an infinite pixel is NaN in
  both.
- The adaptive grid is ``ceil(bin)`` in ``T``; a negative value (a flipped
  box with ``aligned=True``) means no samples, and so does a NaN or
  infinite bin.  torchvision turns a negative grid into an impossible
  vector size when exactly one axis is flipped (``ValueError: cannot
  create std::vector larger than max_size()``), and into no samples
  otherwise: the output is 0 in every case where it returns.
- NaN and infinite box coordinates: the library will reject them
  (``ValueError`` naming the box, as ``crop_and_resize`` does and as ONNX
  Runtime does); the arithmetic here does not check and treats them as
  the kernels would: their NaN or infinite sample coordinates are outside,
  and so are those of finite boxes whose scaled size overflows (``x2 -
  x1`` beyond float32's range gives ``0 * inf`` in the first bin).  Such a
  box's output and gradients are 0.  torchvision reads pixels at ``(int)
  NaN`` and crashes the process with a fixed sampling ratio (for most such
  boxes), and returns zeros with the adaptive grid.
- A bin may hold at most `MAX_SAMPLES_PER_BIN` samples (``grid_h *
  grid_w``, after negative grids count as 0): beyond it the count would
  not be exact in float32, and torchvision's ``int`` arithmetic overflows
  at 2**31.  The functions here raise ``ValueError`` past it.

Arithmetic of the boxes derivative
----------------------------------
torchvision has no derivative with respect to the boxes.  Here it is the
derivative of the piecewise-bilinear sampling through the sample
coordinates; the adaptive grid (a ``ceil``) is held constant.  Per axis,
with ``frac = (p + (i + 0.5) / grid) / P`` (in ``(0, 1)``), a sample
coordinate moves with the box edges as::

    dc/dlo = s * (1 - frac),  dc/dhi = s * frac      (size not clamped)
    dc/dlo = s,               dc/dhi = 0             (aligned=False and
                                                      the raw size < 1)

(the second line: ``max(size, 1)`` holds the size at 1, so only the start
moves; the clamp holds exactly when the raw size is below 1, as
``std::max`` keeps the size when it equals 1).  The image's slopes at an
inside sample, per channel::

    slope_y = h_x * (v3 - v1) + l_x * (v4 - v2)
    slope_x = h_y * (v2 - v1) + l_y * (v4 - v3)

``slope_y`` is 0 where a row clamp holds (``c_y <= 0`` before clamping, or
``low_y >= H - 1``): the branch the forward takes decides, so a sample
exactly on row 0 has no row slope, while one exactly on an inner integer
row has the slope of the cell below it (``low = int(c)``, ``high = low +
1``: the derivative from the right).  The same for ``slope_x``.  Outside
samples contribute 0.  With ``rate_y = t_y1 * dc/dy1 + t_y2 * dc/dy2``
and ``rate_x`` likewise, the JVP is::

    jvp[k, c, ph, pw] = (sum over inside samples of
                         slope_y * rate_y + slope_x * rate_x) / count

and the boxes gradient its transpose: ``d/dy1 = (sum over channels, bins
and inside samples of g * slope_y * dc/dy1) / count``, and so on for
``x1, x2, y2``.  ``exact=False`` computes these in float64 (the geometry
in ``T``, as above).

``exact=True`` (the order proposed for the kernels) computes in ``T``,
one rounding per operation, in the order written:

- per box and axis, per bin ``p`` and sample ``i``: ``q = T(i + 0.5) /
  T(grid)``, ``r = T(p) + q``, ``frac = r / T(P)``, ``f_hi = s * frac``,
  ``f_lo = s * (1 - frac)``; when the size clamp holds, ``f_lo = s`` and
  there is no ``f_hi`` term;
- per inside sample and channel, for an axis whose clamp does not hold:
  ``slope_y = (h_x * (v3 - v1)) + (l_x * (v4 - v2))`` and ``slope_x =
  (h_y * (v2 - v1)) + (l_y * (v4 - v3))`` (each difference, product and
  the sum rounded);
- JVP: ``rate_y = (t_y1 * f_lo_y) + (t_y2 * f_hi_y)`` once per (bin row,
  sample row) (only ``t_y1 * f_lo_y`` when the size clamp holds), likewise
  ``rate_x``; per output element ``acc = 0``, and per inside sample in the
  order (sample row, sample column) ``acc += (slope_y * rate_y) + (slope_x
  * rate_x)`` (a term whose axis is clamped is left out, not added as 0);
  the result is ``acc / count``;
- gradient: four sums per box, ``S_x1, S_y1, S_x2, S_y2``, starting at 0;
  per bin row, bin column, sample row, sample column and channel, in that
  order, ``gy = slope_y * g`` then ``S_y1 += gy * f_lo_y`` and ``S_y2 +=
  gy * f_hi_y``, and ``gx = slope_x * g`` then ``S_x1 += gx * f_lo_x``,
  ``S_x2 += gx * f_hi_x`` (terms of a clamped axis, and the ``f_hi`` terms
  of a clamped size, left out); the result is ``[S_x1, S_y1, S_x2, S_y2] /
  count``.

Functions
---------
axis_samples
    where the samples of one box fall along one axis;
roi_align, roi_align_grad_image
    the forward op and its image gradient (torchvision's bits);
roi_align_jvp_boxes, roi_align_grad_boxes
    the derivative with respect to the boxes, forward and reverse mode;
infer_scale, fpn_levels, multi_scale_roi_align
    torchvision's ``MultiScaleRoIAlign`` built on `roi_align`.

Examples
--------
>>> import numpy as np
>>> image = np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4)
>>> roi_align(image, [[0, 0, 2, 2]], [0], (1, 1))[0, 0].tolist()
[[5.0]]
"""

import math
from typing import NamedTuple

import numpy as np

# Annotated so that type checkers see variables, not aliases of NumPy's types.
f32: type[np.float32] = np.float32
f64: type[np.float64] = np.float64

# At most this many samples in one bin (grid_h * grid_w): the count is then
# exact in float32.
MAX_SAMPLES_PER_BIN = 2**24


def arithmetic_type(dtype):
    """The type RoIAlign computes in for data of `dtype`.

    float64 for float64, float32 for everything else (float32, float16,
    bfloat16, integers).

    Examples
    --------
    >>> arithmetic_type(np.float16).__name__
    'float32'
    """
    return f64 if np.dtype(dtype) == f64 else f32


class Tap(NamedTuple):
    """One sample along one axis.

    Attributes
    ----------
    coord : T
        The sample coordinate before any clamp.
    inside : bool
        ``-1 <= coord <= size``; False for NaN.
    low, high : int
        The two pixels the sample reads along this axis (inside samples).
    lerp, rest : T
        ``l = coord - low`` after the clamps and ``h = 1 - l``.
    held : bool
        A clamp holds the coordinate (``coord <= 0``, or ``low >= size -
        1``): the sampled value does not move with it.
    """

    coord: np.floating
    inside: bool
    low: int = 0
    high: int = 0
    lerp: np.floating = 0.0
    rest: np.floating = 1.0
    held: bool = True


class Axis(NamedTuple):
    """The samples of one box along one axis (see `axis_samples`).

    Attributes
    ----------
    start, size, bin : T
        The scaled start, the size (after ``max(size, 1)`` when not
        aligned) and the bin size.
    grid : int
        Samples per bin along this axis (0: none).
    size_held : bool
        ``max(size, 1)`` replaced the size (``aligned=False`` only).
    taps : list of list of Tap
        ``taps[p][i]``: sample ``i`` of bin ``p``.
    """

    start: np.floating
    size: np.floating
    bin: np.floating
    grid: int
    size_held: bool
    taps: list


def _grid(bin_size, sampling_ratio):
    """Samples per bin along one axis: the ratio, or ``ceil(bin)`` (>= 0)."""
    if sampling_ratio > 0:
        return int(sampling_ratio)
    if not np.isfinite(bin_size):
        return 0  # no samples: the box has a non-finite coordinate or size
    return max(math.ceil(float(bin_size)), 0)


def _tap(coord, size, T):
    """Where a coordinate falls along an axis of `size` pixels."""
    if not (coord >= -1 and coord <= size):
        return Tap(coord, False)
    c = T(0) if coord <= 0 else coord
    low = int(c)
    if low >= size - 1:
        low = high = size - 1
        c = T(low)
    else:
        high = low + 1
    held = bool(coord <= 0) or low == size - 1
    lerp = T(c - T(low))
    return Tap(coord, True, low, high, lerp, T(T(1) - lerp), held)


def axis_samples(lo, hi, size, pooled, spatial_scale, sampling_ratio, aligned, T=f32):
    """Where the samples of one box fall along one axis.

    Parameters
    ----------
    lo, hi : float
        The box's edges along this axis (``x1, x2`` or ``y1, y2``), in the
        input image's coordinates; rounded to `T`.
    size : int
        The feature map's extent along this axis (``W`` or ``H``).
    pooled : int
        The output's extent along this axis.
    spatial_scale : float
        Rounded to `T`.
    sampling_ratio : int
        Samples per bin along the axis if positive; adaptive otherwise.
    aligned : bool
        Shift the scaled coordinates by -0.5 (and do not clamp the size).
    T : type, default numpy.float32
        The arithmetic type.

    Returns
    -------
    Axis

    Examples
    --------
    >>> axis = axis_samples(0, 4, 5, 2, 1.0, -1, False)
    >>> axis.grid, [[float(t.coord) for t in row] for row in axis.taps]
    (2, [[0.5, 1.5], [2.5, 3.5]])
    """
    with np.errstate(all="ignore"):  # huge boxes overflow, as in the kernel
        s = T(spatial_scale)
        off = T(0.5) if aligned else T(0)
        start = T(T(lo) * s) - off
        end = T(T(hi) * s) - off
        length = T(end - start)
        size_held = (not aligned) and bool(length < 1)
        if size_held:
            length = T(1)
        bin_size = T(length / T(pooled))
        grid = _grid(bin_size, sampling_ratio)
        taps = []
        for p in range(pooled):
            base = T(start + T(T(p) * bin_size))
            row = []
            for i in range(grid):
                step = T(T(T(i + 0.5) * bin_size) / T(grid))
                row.append(_tap(T(base + step), size, T))
            taps.append(row)
    return Axis(start, length, bin_size, grid, size_held, taps)


def _geometry(
    box, feature_size, output_size, spatial_scale, sampling_ratio, aligned, T
):
    """(rows, cols, count) of one box: the two axes and the bin's count."""
    x1, y1, x2, y2 = box
    height, width = feature_size
    out_h, out_w = output_size
    rows = axis_samples(
        y1, y2, height, out_h, spatial_scale, sampling_ratio, aligned, T
    )
    cols = axis_samples(x1, x2, width, out_w, spatial_scale, sampling_ratio, aligned, T)
    samples = rows.grid * cols.grid
    if samples > MAX_SAMPLES_PER_BIN:
        raise ValueError(
            f"box {list(map(float, box))} has {rows.grid} x {cols.grid} samples "
            f"per bin, more than {MAX_SAMPLES_PER_BIN}"
        )
    return rows, cols, T(max(samples, 1))


def _boxes_and_indices(boxes, box_ind, batch, T):
    with np.errstate(all="ignore"):
        boxes = np.asarray(boxes, dtype=np.float64).reshape(-1, 4).astype(T)
    box_ind = np.asarray(box_ind).astype(np.int64).reshape(-1)
    if len(box_ind) != len(boxes):
        raise ValueError(f"{len(boxes)} boxes but {len(box_ind)} box indices")
    bad = np.flatnonzero((box_ind < 0) | (box_ind >= batch))
    if bad.size:
        raise IndexError(
            f"box_ind[{bad[0]}] = {box_ind[bad[0]]} is not in [0, {batch})"
        )
    return boxes, box_ind


def _read_image(image, T):
    """The image as the arithmetic type reads it (C's conversion)."""
    image = np.asarray(image)
    if image.ndim != 4:
        raise ValueError(f"image must be [N, C, H, W], got shape {image.shape}")
    with np.errstate(all="ignore"):
        return image.astype(T)


def _pair(output_size):
    if np.ndim(output_size) == 0:
        return int(output_size), int(output_size)
    out_h, out_w = (int(v) for v in output_size)
    return out_h, out_w


# --------------------------------------------------------------------------
# The forward op


def roi_align(
    image,
    boxes,
    box_ind,
    output_size,
    spatial_scale=1.0,
    sampling_ratio=-1,
    aligned=False,
    exact=True,
):
    """RoIAlign with average pooling, ``torchvision.ops.roi_align``.

    Parameters
    ----------
    image : array_like of shape (N, C, H, W)
        Any real dtype; read in the arithmetic type (module docstring).
    boxes : array_like of shape (K, 4)
        ``[x1, y1, x2, y2]`` per box, in the coordinates that
        `spatial_scale` maps to the feature map.
    box_ind : array_like of shape (K,)
        The image of each box.
    output_size : int or (int, int)
        ``(out_h, out_w)``.
    spatial_scale : float, default 1.0
    sampling_ratio : int, default -1
        Samples per bin along each axis; 0 or negative: ``ceil(bin)``.
    aligned : bool, default False
    exact : bool, default True
        See the module docstring.

    Returns
    -------
    ndarray of shape (K, C, out_h, out_w)
        The arithmetic type with ``exact=True``, float64 otherwise.

    Examples
    --------
    Two samples per bin along each axis, at a quarter and three quarters of
    the bin; those at 3.5 are clamped to the last pixel, 3:

    >>> image = np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4)
    >>> out = roi_align(image, [[0, 0, 4, 4]], [0], (2, 2), sampling_ratio=2)
    >>> out[0, 0].tolist()
    [[5.0, 6.75], [12.0, 13.75]]
    """
    T = arithmetic_type(np.asarray(image).dtype)
    return _roi_align(
        image,
        boxes,
        box_ind,
        output_size,
        spatial_scale,
        sampling_ratio,
        aligned,
        exact,
        T,
    )


def _roi_align(
    image,
    boxes,
    box_ind,
    output_size,
    spatial_scale,
    sampling_ratio,
    aligned,
    exact,
    T,
):
    """`roi_align` in the arithmetic type `T` (float16 models torchvision's)."""
    pixels = _read_image(image, T)
    batch, channels, height, width = pixels.shape
    boxes, box_ind = _boxes_and_indices(boxes, box_ind, batch, T)
    out_h, out_w = _pair(output_size)
    acc_type = T if exact else f64
    if not exact:
        pixels = pixels.astype(f64)
    out = np.zeros((len(boxes), channels, out_h, out_w), acc_type)
    with np.errstate(all="ignore"):
        for k in range(len(boxes)):
            rows, cols, count = _geometry(
                boxes[k],
                (height, width),
                (out_h, out_w),
                spatial_scale,
                sampling_ratio,
                aligned,
                T,
            )
            img = pixels[box_ind[k]]
            for ph in range(out_h):
                for pw in range(out_w):
                    acc = np.zeros(channels, acc_type)
                    for ty in rows.taps[ph]:
                        for tx in cols.taps[pw]:
                            if not (ty.inside and tx.inside):
                                continue  # reads no pixel
                            w = _weights(ty, tx, exact)
                            v = _corners(img, ty, tx)
                            acc = acc + (
                                ((w[0] * v[0] + w[1] * v[1]) + w[2] * v[2])
                                + w[3] * v[3]
                            )
                    out[k, :, ph, pw] = acc / (count if exact else f64(count))
    return out


def _weights(ty, tx, exact):
    """``w1, w2, w3, w4`` of a sample: in T, or float64 from the lerps."""
    if exact:
        return (
            ty.rest * tx.rest,
            ty.rest * tx.lerp,
            ty.lerp * tx.rest,
            ty.lerp * tx.lerp,
        )
    ly, lx = f64(ty.lerp), f64(tx.lerp)
    hy, hx = 1 - ly, 1 - lx
    return (hy * hx, hy * lx, ly * hx, ly * lx)


def _corners(img, ty, tx):
    """The four corner pixels of an inside sample, per channel."""
    return (
        img[:, ty.low, tx.low],
        img[:, ty.low, tx.high],
        img[:, ty.high, tx.low],
        img[:, ty.high, tx.high],
    )


# --------------------------------------------------------------------------
# The image gradient


def roi_align_grad_image(
    grads,
    boxes,
    box_ind,
    image_size,
    spatial_scale=1.0,
    sampling_ratio=-1,
    aligned=False,
    exact=True,
    dtype=None,
):
    """The image gradient of `roi_align`, torchvision's backward.

    Parameters
    ----------
    grads : array_like of shape (K, C, out_h, out_w)
    boxes, box_ind
        As for `roi_align`.
    image_size : sequence of 4 ints
        ``(N, C, H, W)``: the output's shape.
    spatial_scale, sampling_ratio, aligned
        As for `roi_align`.
    exact : bool, default True
        See the module docstring.
    dtype : dtype, optional
        The arithmetic type's source (the image's dtype); by default that
        of `grads`.  `grads` is read in the arithmetic type.

    Returns
    -------
    ndarray of shape image_size
        The arithmetic type with ``exact=True``, float64 otherwise.

    Examples
    --------
    One sample at pixel (1.5, 1.5) spreads its gradient over four pixels:

    >>> grads = np.ones((1, 1, 1, 1), np.float32)
    >>> out = roi_align_grad_image(grads, [[1, 1, 2, 2]], [0], (1, 1, 3, 3))
    >>> out[0, 0].tolist()
    [[0.0, 0.0, 0.0], [0.0, 0.25, 0.25], [0.0, 0.25, 0.25]]
    """
    grads = np.asarray(grads)
    T = arithmetic_type(grads.dtype if dtype is None else dtype)
    return _roi_align_grad_image(
        grads,
        boxes,
        box_ind,
        image_size,
        spatial_scale,
        sampling_ratio,
        aligned,
        exact,
        T,
    )


def _roi_align_grad_image(
    grads,
    boxes,
    box_ind,
    image_size,
    spatial_scale,
    sampling_ratio,
    aligned,
    exact,
    T,
):
    batch, channels, height, width = (int(v) for v in image_size)
    with np.errstate(all="ignore"):
        grads = np.asarray(grads).astype(T)
    boxes, box_ind = _boxes_and_indices(boxes, box_ind, batch, T)
    _, _, out_h, out_w = grads.shape
    if not exact:
        grads = grads.astype(f64)
    out = np.zeros((batch, channels, height, width), T if exact else f64)
    with np.errstate(all="ignore"):
        for k in range(len(boxes)):
            rows, cols, count = _geometry(
                boxes[k],
                (height, width),
                (out_h, out_w),
                spatial_scale,
                sampling_ratio,
                aligned,
                T,
            )
            plane = out[box_ind[k]]
            for ph in range(out_h):
                for pw in range(out_w):
                    g = grads[k, :, ph, pw]
                    for ty in rows.taps[ph]:
                        for tx in cols.taps[pw]:
                            if not (ty.inside and tx.inside):
                                continue
                            w = _weights(ty, tx, exact)
                            n = count if exact else f64(count)
                            plane[:, ty.low, tx.low] += (g * w[0]) / n
                            plane[:, ty.low, tx.high] += (g * w[1]) / n
                            plane[:, ty.high, tx.low] += (g * w[2]) / n
                            plane[:, ty.high, tx.high] += (g * w[3]) / n
    return out


# --------------------------------------------------------------------------
# The boxes derivatives


def _coord_factors(axis, p, i, pooled, spatial_scale, exact, T):
    """``(dc/dlo, dc/dhi)`` of sample `i` of bin `p`; dc/dhi None if held."""
    if exact:
        s = T(spatial_scale)
        if axis.size_held:
            return s, None
        q = T(T(i + 0.5) / T(axis.grid))
        frac = T(T(T(p) + q) / T(pooled))
        return T(s * T(T(1) - frac)), T(s * frac)
    s = float(T(spatial_scale))
    if axis.size_held:
        return s, None
    frac = (p + (i + 0.5) / axis.grid) / pooled
    return s * (1 - frac), s * frac


def _slopes(img, ty, tx, exact):
    """Per channel ``(slope_y, slope_x)``, each None where a clamp holds."""
    v1, v2, v3, v4 = _corners(img, ty, tx)
    if exact:
        hy, ly, hx, lx = ty.rest, ty.lerp, tx.rest, tx.lerp
    else:
        ly, lx = f64(ty.lerp), f64(tx.lerp)
        hy, hx = 1 - ly, 1 - lx
    slope_y = None if ty.held else hx * (v3 - v1) + lx * (v4 - v2)
    slope_x = None if tx.held else hy * (v2 - v1) + ly * (v4 - v3)
    return slope_y, slope_x


def _rates(axis, t_lo, t_hi, pooled, spatial_scale, exact, T):
    """``rates[p][i]``: how fast sample `i` of bin `p` moves along the tangent."""
    rates = []
    for p in range(pooled):
        row = []
        for i in range(axis.grid):
            f_lo, f_hi = _coord_factors(axis, p, i, pooled, spatial_scale, exact, T)
            if f_hi is None:
                row.append(t_lo * f_lo)
            else:
                row.append(t_lo * f_lo + t_hi * f_hi)
        rates.append(row)
    return rates


def roi_align_jvp_boxes(
    image,
    boxes,
    box_ind,
    boxes_tangent,
    output_size,
    spatial_scale=1.0,
    sampling_ratio=-1,
    aligned=False,
    exact=False,
):
    """The derivative of `roi_align` along a tangent of the boxes.

    Parameters
    ----------
    image, boxes, box_ind, output_size, spatial_scale, sampling_ratio, aligned
        As for `roi_align`.
    boxes_tangent : array_like of shape (K, 4)
        ``[t_x1, t_y1, t_x2, t_y2]`` per box, read in the arithmetic type.
    exact : bool, default False
        float64 (the definition) or the arithmetic type in the proposed
        order: "Arithmetic of the boxes derivative" in the module
        docstring.

    Returns
    -------
    ndarray of shape (K, C, out_h, out_w)
        float64, or the arithmetic type with ``exact=True``.

    Examples
    --------
    A ramp rising by 1 per column; moving the box right by 1 moves every
    sample right by 1:

    >>> image = np.tile(np.arange(5.0), (1, 1, 5, 1))
    >>> jvp = roi_align_jvp_boxes(image, [[1, 1, 3, 3]], [0], [[1, 0, 1, 0]], 2)
    >>> jvp[0, 0].tolist()
    [[1.0, 1.0], [1.0, 1.0]]
    """
    T = arithmetic_type(np.asarray(image).dtype)
    pixels = _read_image(image, T)
    batch, channels, height, width = pixels.shape
    boxes, box_ind = _boxes_and_indices(boxes, box_ind, batch, T)
    with np.errstate(all="ignore"):
        tangent = np.asarray(boxes_tangent, dtype=np.float64).reshape(-1, 4)
        tangent = tangent.astype(T) if exact else tangent.astype(T).astype(f64)
    out_h, out_w = _pair(output_size)
    acc_type = T if exact else f64
    if not exact:
        pixels = pixels.astype(f64)
    out = np.zeros((len(boxes), channels, out_h, out_w), acc_type)
    with np.errstate(all="ignore"):
        for k in range(len(boxes)):
            rows, cols, count = _geometry(
                boxes[k],
                (height, width),
                (out_h, out_w),
                spatial_scale,
                sampling_ratio,
                aligned,
                T,
            )
            t_x1, t_y1, t_x2, t_y2 = tangent[k]
            img = pixels[box_ind[k]]
            rate_y = _rates(rows, t_y1, t_y2, out_h, spatial_scale, exact, T)
            rate_x = _rates(cols, t_x1, t_x2, out_w, spatial_scale, exact, T)
            for ph in range(out_h):
                for pw in range(out_w):
                    acc = np.zeros(channels, acc_type)
                    for iy, ty in enumerate(rows.taps[ph]):
                        for ix, tx in enumerate(cols.taps[pw]):
                            if not (ty.inside and tx.inside):
                                continue
                            slope_y, slope_x = _slopes(img, ty, tx, exact)
                            if slope_y is None and slope_x is None:
                                continue
                            if slope_x is None:
                                term = slope_y * rate_y[ph][iy]
                            elif slope_y is None:
                                term = slope_x * rate_x[pw][ix]
                            else:
                                term = (
                                    slope_y * rate_y[ph][iy] + slope_x * rate_x[pw][ix]
                                )
                            acc = acc + term
                    out[k, :, ph, pw] = acc / (count if exact else f64(count))
    return out


def roi_align_grad_boxes(
    grads,
    image,
    boxes,
    box_ind,
    spatial_scale=1.0,
    sampling_ratio=-1,
    aligned=False,
    exact=False,
):
    """The gradient of `roi_align` with respect to the boxes.

    The transpose of `roi_align_jvp_boxes`: for any ``t`` and ``g``,
    ``sum(jvp(t) * g) == sum(t * grad(g))`` up to rounding.

    Parameters
    ----------
    grads : array_like of shape (K, C, out_h, out_w)
        Read in the arithmetic type of `image`.
    image, boxes, box_ind, spatial_scale, sampling_ratio, aligned
        As for `roi_align`.
    exact : bool, default False
        As for `roi_align_jvp_boxes`.

    Returns
    -------
    ndarray of shape (K, 4)
        ``d/d[x1, y1, x2, y2]``: float64, or the arithmetic type with
        ``exact=True``.

    Examples
    --------
    A ramp rising by 1 per column: moving ``x1`` (or ``x2``) by one moves
    the samples by a half on average, in each of the four bins:

    >>> image = np.tile(np.arange(5.0), (1, 1, 5, 1))
    >>> grads = np.ones((1, 1, 2, 2))
    >>> roi_align_grad_boxes(grads, image, [[1, 1, 3, 3]], [0]).tolist()
    [[2.0, 0.0, 2.0, 0.0]]
    """
    T = arithmetic_type(np.asarray(image).dtype)
    pixels = _read_image(image, T)
    batch, channels, height, width = pixels.shape
    boxes, box_ind = _boxes_and_indices(boxes, box_ind, batch, T)
    with np.errstate(all="ignore"):
        grads = np.asarray(grads).astype(T)
    _, _, out_h, out_w = grads.shape
    if not exact:
        pixels = pixels.astype(f64)
        grads = grads.astype(f64)
    out = np.zeros((len(boxes), 4), T if exact else f64)
    with np.errstate(all="ignore"):
        for k in range(len(boxes)):
            rows, cols, count = _geometry(
                boxes[k],
                (height, width),
                (out_h, out_w),
                spatial_scale,
                sampling_ratio,
                aligned,
                T,
            )
            img = pixels[box_ind[k]]
            # Terms of S_x1, S_y1, S_x2, S_y2, in the serial order.
            terms = ([], [], [], [])
            for ph in range(out_h):
                for pw in range(out_w):
                    g = grads[k, :, ph, pw]
                    for iy, ty in enumerate(rows.taps[ph]):
                        fy = _coord_factors(
                            rows, ph, iy, out_h, spatial_scale, exact, T
                        )
                        for ix, tx in enumerate(cols.taps[pw]):
                            if not (ty.inside and tx.inside):
                                continue
                            fx = _coord_factors(
                                cols, pw, ix, out_w, spatial_scale, exact, T
                            )
                            slope_y, slope_x = _slopes(img, ty, tx, exact)
                            for slope, (f_lo, f_hi), lo, hi in (
                                (slope_y, fy, 1, 3),
                                (slope_x, fx, 0, 2),
                            ):
                                if slope is None:
                                    continue
                                gs = slope * g
                                terms[lo].append(gs * f_lo)
                                if f_hi is not None:
                                    terms[hi].append(gs * f_hi)
            if exact:
                sums = [_serial_sum(t, T) for t in terms]
                out[k] = [T(s / count) for s in sums]
            else:
                sums = [float(np.sum(t)) if t else 0.0 for t in terms]
                out[k] = [s / float(count) for s in sums]
    return out


def _serial_sum(chunks, T):
    """``((0 + v0) + v1) + ...`` in T over the concatenated chunks.

    ``np.cumsum`` adds strictly from left to right in the given dtype; the
    leading 0 makes an all-negative-zero sum +0, as a loop starting at 0.
    """
    values = np.concatenate([np.zeros(1, T)] + [np.asarray(c, T) for c in chunks])
    return np.cumsum(values, dtype=T)[-1]


# --------------------------------------------------------------------------
# MultiScaleRoIAlign


def infer_scale(feature_size, image_size):
    """The spatial scale of a feature map, as torchvision infers it.

    ``2 ** round(log2(float32(feature_h / image_h)))``, rounding halves to
    even: only the heights count.

    Examples
    --------
    >>> infer_scale((32, 40), (128, 160))
    0.25
    """
    approx = f32(float(feature_size[0]) / float(image_size[0]))
    return 2.0 ** float(np.round(np.log2(approx)))


def fpn_levels(boxes, k_min, k_max, canonical_scale=224, canonical_level=4, eps=1e-6):
    """The pyramid level of each box, torchvision's ``LevelMapper``.

    In float32: ``floor(canonical_level + log2(sqrt(area) / canonical_scale)
    + eps)`` clamped to ``[k_min, k_max]``, minus ``k_min``.

    Parameters
    ----------
    boxes : array_like of shape (K, 4)
        ``[x1, y1, x2, y2]``, read as float32.
    k_min, k_max : int
        The finest and coarsest levels (``-log2`` of their scales).

    Returns
    -------
    ndarray of shape (K,), dtype=int64
        Indices into the list of feature maps.

    Examples
    --------
    >>> fpn_levels([[0, 0, 16, 16], [0, 0, 112, 112]], 2, 4).tolist()
    [0, 1]
    """
    boxes = np.asarray(boxes, dtype=f32).reshape(-1, 4)
    with np.errstate(all="ignore"):
        area = (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])
        level = f32(canonical_level) + np.log2(np.sqrt(area) / f32(canonical_scale))
        level = np.floor(level + f32(eps))
    level = np.clip(level, k_min, k_max)
    return level.astype(np.int64) - k_min


def multi_scale_roi_align(
    features,
    boxes,
    image_sizes,
    output_size,
    sampling_ratio,
    canonical_scale=224,
    canonical_level=4,
    exact=True,
):
    """torchvision's ``MultiScaleRoIAlign`` on its feature maps, finest first.

    Parameters
    ----------
    features : sequence of array_like of shape (N, C, H_l, W_l)
        The pyramid's levels, the finest first.
    boxes : sequence of array_like of shape (K_n, 4)
        The boxes of each image, ``[x1, y1, x2, y2]`` in image coordinates.
    image_sizes : sequence of (int, int)
        ``(height, width)`` of each image; their maxima give the scales.
    output_size : int or (int, int)
    sampling_ratio : int
    canonical_scale, canonical_level : int
        Of the level mapping (`fpn_levels`).
    exact : bool, default True
        As for `roi_align`.

    Returns
    -------
    out : ndarray of shape (sum K_n, C, out_h, out_w)
    levels : ndarray of shape (sum K_n,)
        The level of each box.
    scales : list of float
        The spatial scale of each level.
    """
    original = (
        max(int(s[0]) for s in image_sizes),
        max(int(s[1]) for s in image_sizes),
    )
    scales = [infer_scale(np.shape(f)[-2:], original) for f in features]
    k_min = int(-np.log2(f32(scales[0])))
    k_max = int(-np.log2(f32(scales[-1])))
    all_boxes = np.concatenate([np.asarray(b).reshape(-1, 4) for b in boxes])
    box_ind = np.concatenate(
        [np.full(len(np.asarray(b).reshape(-1, 4)), n) for n, b in enumerate(boxes)]
    ).astype(np.int64)
    levels = fpn_levels(all_boxes, k_min, k_max, canonical_scale, canonical_level)
    out_h, out_w = _pair(output_size)
    first = np.asarray(features[0])
    dtype = arithmetic_type(first.dtype) if exact else f64
    out = np.zeros((len(all_boxes), first.shape[1], out_h, out_w), dtype)
    for level, (feature, scale) in enumerate(zip(features, scales)):
        at = np.flatnonzero(levels == level)
        out[at] = roi_align(
            feature,
            all_boxes[at],
            box_ind[at],
            (out_h, out_w),
            scale,
            sampling_ratio,
            False,
            exact,
        )
    return out, levels, scales
