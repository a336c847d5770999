"""RoIAlign's forward op and image gradient (NumPy model; see the package's
docstring, `cropgrad._reference.roi_align`)."""

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
    lerp: np.floating | float = 0.0
    rest: np.floating | float = 1.0
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
                step = T(T(T(f32(i) + f32(0.5)) * bin_size) / T(grid))
                row.append(_tap(T(base + step), size, T))
            taps.append(row)
    return Axis(start, length, bin_size, grid, size_held, taps)


def _geometries(boxes, feature_size, output_size, params, T):
    """``(rows, cols, count)`` of each box: the two axes and the bin's count.

    `params` is ``(spatial_scale, sampling_ratio, aligned)``; huge boxes
    overflow, as in the kernels.
    """
    height, width = feature_size
    out_h, out_w = _pair(output_size)
    geometries = []
    with np.errstate(all="ignore"):
        for x1, y1, x2, y2 in boxes:
            rows = axis_samples(y1, y2, height, out_h, *params, T)
            cols = axis_samples(x1, x2, width, out_w, *params, T)
            samples = rows.grid * cols.grid
            if samples > MAX_SAMPLES_PER_BIN:
                raise ValueError(
                    f"box {[float(v) for v in (x1, y1, x2, y2)]} has {rows.grid} "
                    f"x {cols.grid} samples per bin, more than {MAX_SAMPLES_PER_BIN}"
                )
            geometries.append((rows, cols, T(max(samples, 1))))
    return geometries


def _inside_samples(rows, cols, ph, pw):
    """``(iy, ty, ix, tx)`` of each inside sample of bin ``(ph, pw)``, in the
    serial order; the others read no pixel and add nothing."""
    for iy, ty in enumerate(rows.taps[ph]):
        for ix, tx in enumerate(cols.taps[pw]):
            if ty.inside and tx.inside:
                yield iy, ty, ix, tx


def _read_boxes(boxes, box_ind, image_shape, output_size, params, T):
    """The boxes' image indices, checked against the batch of `image_shape`
    ``(N, C, H, W)``, and their geometries (`_geometries`)."""
    batch = image_shape[0]
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
    return box_ind, _geometries(boxes, image_shape[2:], output_size, params, T)


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


def _pooled_problem(image, boxes, box_ind, output_size, params, exact):
    """The forward op's and the boxes JVP's inputs as they are read: the
    arithmetic type, the pixels (in float64 unless `exact`), the boxes'
    image indices and geometries, and their zero output in the
    accumulation type."""
    T = arithmetic_type(np.asarray(image).dtype)
    pixels = _read_image(image, T)
    box_ind, geometries = _read_boxes(
        boxes, box_ind, pixels.shape, output_size, params, T
    )
    if not exact:
        pixels = pixels.astype(f64)
    shape = (len(box_ind), pixels.shape[1], *_pair(output_size))
    return T, pixels, box_ind, geometries, np.zeros(shape, T if exact else f64)


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
    params = (spatial_scale, sampling_ratio, aligned)
    _, pixels, box_ind, geometries, out = _pooled_problem(
        image, boxes, box_ind, output_size, params, exact
    )
    channels, out_h, out_w = out.shape[1:]
    with np.errstate(all="ignore"):
        for k, (rows, cols, count) in enumerate(geometries):
            img = pixels[box_ind[k]]
            for ph in range(out_h):
                for pw in range(out_w):
                    acc = np.zeros(channels, out.dtype)
                    for _, ty, _, tx in _inside_samples(rows, cols, ph, pw):
                        w = _weights(ty, tx, exact)
                        v = _corners(img, ty, tx)
                        acc = acc + (
                            ((w[0] * v[0] + w[1] * v[1]) + w[2] * v[2]) + w[3] * v[3]
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
    batch, channels, height, width = (int(v) for v in image_size)
    with np.errstate(all="ignore"):
        grads = np.asarray(grads).astype(T)
    _, _, out_h, out_w = grads.shape
    shape = (batch, channels, height, width)
    params = (spatial_scale, sampling_ratio, aligned)
    box_ind, geometries = _read_boxes(boxes, box_ind, shape, (out_h, out_w), params, T)
    if not exact:
        grads = grads.astype(f64)
    out = np.zeros(shape, T if exact else f64)
    with np.errstate(all="ignore"):
        for k, (rows, cols, count) in enumerate(geometries):
            plane = out[box_ind[k]]
            n = count if exact else f64(count)
            for ph in range(out_h):
                for pw in range(out_w):
                    g = grads[k, :, ph, pw]
                    for _, ty, _, tx in _inside_samples(rows, cols, ph, pw):
                        w = _weights(ty, tx, exact)
                        plane[:, ty.low, tx.low] += (g * w[0]) / n
                        plane[:, ty.low, tx.high] += (g * w[1]) / n
                        plane[:, ty.high, tx.low] += (g * w[2]) / n
                        plane[:, ty.high, tx.high] += (g * w[3]) / n
    return out
