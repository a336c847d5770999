"""The crop_and_resize family's boxes gradient and boxes JVP (NumPy model).

See the package's docstring (`cropgrad._reference`).
"""

import numpy as np

from .crop_and_resize import (
    TINY32,
    _box_samples,
    _fz,
    _read_boxes,
    _read_image,
    f32,
    f64,
    linear_taps,
)

# --------------------------------------------------------------------------
# The boxes gradient


def _box_factors(index, size, crop):
    """Float32 d(coordinate)/d(lo) and d(coordinate)/d(hi) of crop sample `index`.

    ``(size - 1) - index * ratio`` and ``index * ratio`` with the float32
    ``ratio = (size - 1) / (crop - 1)``; None for a one-sample crop (its
    factor, ``0.5 * (size - 1)``, is applied in double: see `grad_boxes`).
    """
    if crop == 1:
        return None
    ratio = f32(f32(size - 1) / f32(crop - 1))
    high = f32(f32(index) * ratio)
    return f32(f32(size - 1) - high), high


def _slopes(img, y_taps, x_taps, exact, flush):
    """The image's slopes along y and x at a bilinear sample, per channel.

    `y_taps` and `x_taps` are `linear_taps`'s.  float32 in the kernel's
    order with ``exact``, float64 otherwise.
    """
    (top, bottom, y_lerp), (left, right, x_lerp) = y_taps, x_taps
    tl, tr = img[top, left], img[top, right]
    bl, br = img[bottom, left], img[bottom, right]
    if not exact:
        wy, wx = float(y_lerp), float(x_lerp)
        slope_y = (1 - wx) * (bl - tl) + wx * (br - tr)
        slope_x = (1 - wy) * (tr - tl) + wy * (br - bl)
        return slope_y, slope_x
    one = f32(1)
    x_left = _fz(one - x_lerp, flush)
    y_top = _fz(one - y_lerp, flush)
    slope_y = _fz(
        _fz(x_left * _fz(bl - tl, flush), flush)
        + _fz(x_lerp * _fz(br - tr, flush), flush),
        flush,
    )
    slope_x = _fz(
        _fz(y_top * _fz(tr - tl, flush), flush)
        + _fz(y_lerp * _fz(br - bl, flush), flush),
        flush,
    )
    return slope_y, slope_x


def _box_terms(grads, img, rows, cols, size, crop, flush, exact):
    """Per sample inside the image: (factors_y, factors_x, slope_y, slope_x).

    slope_y and slope_x are the image's slopes along y and x at the sample
    (`_slopes`), times the incoming gradient, per channel: float32 in the
    kernel's order with ``exact``, float64 otherwise.
    """
    height, width = size
    crop_h, crop_w = crop
    for y, cy in rows:
        y_taps = linear_taps(cy, height, flush)
        for x, cx in cols:
            x_taps = linear_taps(cx, width, flush)
            slope_y, slope_x = _slopes(img, y_taps, x_taps, exact, flush)
            g = grads[y, x]
            if exact:
                slope_y = _fz(slope_y * g, flush)
                slope_x = _fz(slope_x * g, flush)
            else:
                g64 = g.astype(f64)
                slope_y = slope_y * g64
                slope_x = slope_x * g64
            yield (
                _box_factors(y, height, crop_h),
                _box_factors(x, width, crop_w),
                slope_y,
                slope_x,
            )


def grad_boxes(
    grads, image, boxes, box_ind, method="bilinear", exact=False, flush=False
):
    """The boxes gradient, ``CropAndResizeGradBoxes`` (bilinear only).

    For each sample inside the image and each channel, the image's slope
    along y (x) at the sample, times the incoming gradient, times the
    derivative of the sample's coordinate with respect to ``y1`` and ``y2``
    (``x1`` and ``x2``).  With ``exact``, four float32 sums per box in the
    serial order (crop row, crop column, channel), one per box coordinate;
    for a one-sample crop the term ``slope * 0.5 * (size - 1)`` is a double
    product added to the float32 sum in double, then rounded to float32.

    Parameters
    ----------
    grads : array_like of shape (num_boxes, crop_height, crop_width, depth)
        Read as float32.
    image : array_like of shape (batch, height, width, depth)
        Any real dtype, read as float32.
    boxes, box_ind
        As for `grad_image`.
    method : {"bilinear"}
    exact, flush : bool, default False
        See the module docstring.

    Returns
    -------
    ndarray of shape (num_boxes, 4)
        ``d/d[y1, x1, y2, x2]``: float64, or float32 with ``exact=True``.

    Examples
    --------
    Samples between the pixels of a ramp rising by 3 per row and 1 per
    column; moving ``y1`` (or ``y2``) by one moves two samples by 2 rows:

    >>> image = np.arange(9, dtype=np.float32).reshape(1, 3, 3, 1)
    >>> grads = np.ones((1, 2, 2, 1), np.float32)
    >>> grad_boxes(grads, image, [[0.25, 0.25, 0.75, 0.75]], [0]).tolist()
    [[12.0, 4.0, 12.0, 4.0]]
    """
    if method != "bilinear":
        raise ValueError(f"the boxes gradient is bilinear only, got {method!r}")
    with np.errstate(all="ignore"):
        grads = _fz(np.asarray(grads, dtype=f32), flush)
    boxes, box_ind = _read_boxes(boxes, box_ind)
    pixels = _fz(_read_image(image, flush), flush)
    size = pixels.shape[1:3]
    crop = grads.shape[1:3]
    if not exact:
        pixels = pixels.astype(f64)
    out = np.zeros((len(grads), 4), f32 if exact else f64)
    with np.errstate(all="ignore"):
        for b, image_b, rows, cols in _box_samples(
            boxes, box_ind, size, crop, ratio=True, flush=flush
        ):
            samples = _box_terms(
                grads[b], pixels[image_b], rows, cols, size, crop, flush, exact
            )
            if exact:
                out[b] = _exact_box_sums(samples, size, flush)
            else:
                out[b] = _float64_box_sums(samples, size)
    return out


def _float64_box_sums(samples, size):
    sums = np.zeros(4)
    for factors_y, factors_x, slope_y, slope_x in samples:
        for k, (slope, factors, extent) in enumerate(
            ((slope_y, factors_y, size[0]), (slope_x, factors_x, size[1]))
        ):
            low, high = (
                (float(factors[0]), float(factors[1]))
                if factors is not None
                else (0.5 * (extent - 1), 0.5 * (extent - 1))
            )
            total = float(np.sum(slope))
            sums[k] += total * low
            sums[k + 2] += total * high
    return sums


def _exact_box_sums(samples, size, flush):
    """The four float32 sums of one box, in the serial order."""
    terms = [[], [], [], []]  # y1, x1, y2, x2
    halves = [False, False]  # whether the y / x sums take double terms
    for factors_y, factors_x, slope_y, slope_x in samples:
        for k, (slope, factors) in enumerate(
            ((slope_y, factors_y), (slope_x, factors_x))
        ):
            if factors is None:
                halves[k] = True
                terms[k].append(slope)
                terms[k + 2].append(slope)
            else:
                terms[k].append(_fz(slope * factors[0], flush))
                terms[k + 2].append(_fz(slope * factors[1], flush))
    sums = []
    for k in range(4):
        values = np.concatenate(terms[k]) if terms[k] else np.zeros(0, f32)
        if halves[k % 2]:
            sums.append(_double_term_sum(values, size[k % 2], flush))
        else:
            sums.append(_serial_sum(values, flush))
    return sums


def _serial_sum(values, flush):
    """``((0 + v0) + v1) + ...`` in float32; with `flush`, each partial sum flushed.

    ``np.cumsum`` adds strictly from left to right in the given dtype.  A
    subnormal partial sum restarts the running sum from a zero of its sign.
    """
    total, start = f32(0), 0
    while True:
        partial = np.cumsum(np.concatenate(([total], values[start:])), dtype=f32)
        if not flush:
            return partial[-1]
        tiny = np.flatnonzero((partial != 0) & (np.abs(partial) < TINY32))
        if tiny.size == 0:
            return partial[-1]
        k = int(tiny[0])
        total = f32(np.copysign(f32(0), partial[k]))
        start += k


def _double_term_sum(slopes, size, flush):
    """``s = float32(double(s) + double(slope) * 0.5 * double(size - 1))`` per term."""
    total = f32(0)
    for slope in slopes:
        total = _fz(float(total) + float(slope) * 0.5 * float(size - 1), flush)
    return total


def _coord_tangent(t_lo, t_hi, index, size, crop, exact, flush):
    """How fast crop index `index`'s coordinate moves along ``(t_lo, t_hi)``.

    The boxes gradient's factors (`_box_factors`): ``t_lo * low + t_hi *
    high`` in float32 (``exact``) or float64; for a one-sample crop both
    factors are ``0.5 * (size - 1)``, applied in double and, with ``exact``,
    rounded to float32 once.
    """
    factors = _box_factors(index, size, crop)
    if factors is None:
        half = 0.5 * float(size - 1)
        if exact:
            return _fz(
                float(t_lo) * 0.5 * float(size - 1)
                + float(t_hi) * 0.5 * float(size - 1),
                flush,
            )
        return float(t_lo) * half + float(t_hi) * half
    low, high = factors
    if exact:
        return _fz(_fz(t_lo * low, flush) + _fz(t_hi * high, flush), flush)
    return float(t_lo) * float(low) + float(t_hi) * float(high)


def jvp_boxes(
    image,
    boxes,
    box_ind,
    boxes_tangent,
    crop_size,
    method="bilinear",
    exact=False,
    flush=False,
):
    """The boxes JVP: the forward op's derivative along `boxes_tangent`.

    For each sample inside the image and each channel, the image's slopes
    along y and x at the sample (`grad_boxes`'s, without the incoming
    gradient) times how fast the sample's row and column coordinates move:
    ``slope_y * rate_y + slope_x * rate_x`` with ``rate_y = t_y1 *
    low_y + t_y2 * high_y`` and the boxes gradient's factors ``low_y``,
    ``high_y`` (`_coord_tangent`).  Samples outside the image give 0.  With
    ``exact``, float32 in that order (each product and sum rounded), the
    slopes rounded as in `grad_boxes`.

    Parameters
    ----------
    image : array_like of shape (batch, height, width, depth)
        Any real dtype, read as float32.
    boxes, box_ind
        As for `grad_image`.
    boxes_tangent : array_like of shape (num_boxes, 4)
        ``[t_y1, t_x1, t_y2, t_x2]`` per box, read as float32.
    crop_size : sequence of 2 ints
    method : {"bilinear"}
    exact, flush : bool, default False
        See the module docstring.

    Returns
    -------
    ndarray of shape (num_boxes, crop_height, crop_width, depth)
        float64, or float32 with ``exact=True``.

    Examples
    --------
    A ramp rising by 3 per row; moving the box down by 1 moves the samples
    by 2 rows:

    >>> image = np.arange(9, dtype=np.float32).reshape(1, 3, 3, 1)
    >>> jvp = jvp_boxes(image, [[0.25, 0.25, 0.75, 0.75]], [0], [[1, 0, 1, 0]], (2, 2))
    >>> jvp[0, :, :, 0].tolist()
    [[6.0, 6.0], [6.0, 6.0]]
    """
    if method != "bilinear":
        raise ValueError(f"the boxes JVP is bilinear only, got {method!r}")
    boxes, box_ind = _read_boxes(boxes, box_ind)
    with np.errstate(all="ignore"):
        tangent = _fz(np.asarray(boxes_tangent, dtype=f32), flush)
    pixels = _fz(_read_image(image, flush), flush)
    _, height, width, depth = pixels.shape
    crop_h, crop_w = (int(v) for v in crop_size)
    if not exact:
        pixels = pixels.astype(f64)
    out = np.zeros((len(boxes), crop_h, crop_w, depth), f32 if exact else f64)
    with np.errstate(all="ignore"):
        for b, image_b, rows, cols in _box_samples(
            boxes, box_ind, (height, width), (crop_h, crop_w), ratio=True, flush=flush
        ):
            t_y1, t_x1, t_y2, t_x2 = tangent[b]
            img = pixels[image_b]
            for y, cy in rows:
                y_taps = linear_taps(cy, height, flush)
                rate_y = _coord_tangent(t_y1, t_y2, y, height, crop_h, exact, flush)
                for x, cx in cols:
                    x_taps = linear_taps(cx, width, flush)
                    rate_x = _coord_tangent(t_x1, t_x2, x, width, crop_w, exact, flush)
                    slope_y, slope_x = _slopes(img, y_taps, x_taps, exact, flush)
                    if exact:
                        out[b, y, x] = _fz(
                            _fz(slope_y * rate_y, flush) + _fz(slope_x * rate_x, flush),
                            flush,
                        )
                    else:
                        out[b, y, x] = slope_y * rate_y + slope_x * rate_x
    return out


def grad_boxes_magnitude(grads, image, boxes, box_ind):
    """A scale of the rounding errors of `grad_boxes`, per box coordinate.

    The float64 boxes gradient with every difference of pixels replaced by
    the sum of their magnitudes and every factor by its magnitude: the
    float32 roundings of the operation are a few float32 ulps of this.

    Returns
    -------
    ndarray of shape (num_boxes, 4), dtype=float64

    Examples
    --------
    >>> image = np.arange(9, dtype=np.float32).reshape(1, 3, 3, 1)
    >>> grads = -np.ones((1, 2, 2, 1), np.float32)
    >>> grad_boxes_magnitude(grads, image, [[0.25, 0.25, 0.75, 0.75]], [0]).tolist()
    [[20.0, 28.0, 44.0, 36.0]]
    """
    grads = np.abs(np.asarray(grads, dtype=f32))
    pixels = np.abs(_read_image(image, False)).astype(f64)
    boxes, box_ind = _read_boxes(boxes, box_ind)
    _, height, width, _ = pixels.shape
    num_boxes, crop_h, crop_w, _ = grads.shape
    out = np.zeros((num_boxes, 4))
    with np.errstate(all="ignore"):
        for b, image_b, rows, cols in _box_samples(
            boxes, box_ind, (height, width), (crop_h, crop_w), ratio=True
        ):
            img = pixels[image_b]
            for y, cy in rows:
                top, bottom, y_lerp = linear_taps(cy, height)
                for x, cx in cols:
                    left, right, x_lerp = linear_taps(cx, width)
                    tl, tr = img[top, left], img[top, right]
                    bl, br = img[bottom, left], img[bottom, right]
                    wy, wx = float(y_lerp), float(x_lerp)
                    g = grads[b, y, x].astype(f64)
                    size_y = float(np.sum(((1 - wx) * (bl + tl) + wx * (br + tr)) * g))
                    size_x = float(np.sum(((1 - wy) * (tr + tl) + wy * (br + bl)) * g))
                    for k, (total, index, extent, crop) in enumerate(
                        ((size_y, y, height, crop_h), (size_x, x, width, crop_w))
                    ):
                        factors = _box_factors(index, extent, crop)
                        low, high = (
                            (abs(float(factors[0])), abs(float(factors[1])))
                            if factors is not None
                            else (0.5 * (extent - 1), 0.5 * (extent - 1))
                        )
                        out[b, k] += total * low
                        out[b, k + 2] += total * high
    return out
