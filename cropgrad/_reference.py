"""A plain NumPy model of the three operations, independent of the kernels.

Private.  Written from the semantics (``docs/semantics.md``): one crop
sample at a time, in the serial order (box, crop row, crop column, corner),
vectorised over channels only.  Slow, but every rounding can be checked by
eye.  It is the one reference of the project: the self-check of
``python -m cropgrad``, the test suite, the fuzz oracle
(``tests/fuzz_target.py``) and the fixture script
(``tests/data/make_fixtures.py``) all use it.  The fixture script loads this
file by its path in an environment that has TensorFlow but no compiled
cropgrad, so it imports nothing but NumPy and the standard library.

Two kinds of arithmetic, chosen with ``exact``:

``exact=False`` (default)
    the accuracy yardstick: the sampling coordinates and lerps in float32
    (they decide which pixels a sample touches), everything after them in
    float64.  Results are float64 arrays.
``exact=True``
    the operation's own arithmetic: float32 operations in the serial order,
    each rounded as the semantics say.  Results are the bits the library
    and TensorFlow (with op determinism) compute.

``flush=True`` models flush-to-zero and denormals-are-zero (TensorFlow's
arithmetic, ``flush_denormals=True`` and the ``raw_ops``): every float32
value an arithmetic operation reads or produces that is subnormal counts as
a zero of the same sign.  Without it the arithmetic is IEEE.

Functions
---------
sample_coords, inside, linear_taps, nearest_tap
    where a crop sample falls in the image, along one axis;
grad_image, crop_and_resize, grad_boxes
    the three operations (NHWC);
jvp_boxes
    the derivative of the forward op along a tangent of the boxes, the
    boxes gradient's transpose (NHWC);
grad_boxes_magnitude
    a scale of the rounding errors of the boxes gradient (and of the JVP).

Examples
--------
>>> import numpy as np
>>> from cropgrad import _reference
>>> grads = np.ones((1, 2, 2, 1), np.float32)
>>> out = _reference.grad_image(grads, [[0, 0, 1, 1]], [0], (1, 3, 3, 1))
>>> out[0, :, :, 0]
array([[1., 0., 1.],
       [0., 0., 0.],
       [1., 0., 1.]])
"""

import math

import numpy as np

# Annotated so that type checkers see variables, not aliases of NumPy's types.
f32: type[np.float32] = np.float32
f64: type[np.float64] = np.float64
# The smallest normal float32: anything smaller in magnitude is subnormal.
TINY32 = f32(np.finfo(np.float32).tiny)


def _fz(x, flush):
    """`x` rounded to float32; with `flush`, subnormal values become signed zeros.

    Works on float32 scalars and arrays alike.
    """
    if type(x) is f32:  # the common case, kept cheap: a float32 scalar
        if flush and 0 < abs(x) < TINY32:
            return f32(np.copysign(f32(0), x))
        return x
    if np.ndim(x) == 0:
        return _fz(f32(x), flush)
    x = np.asarray(x, dtype=f32)
    if not flush:
        return x
    return np.where((x != 0) & (np.abs(x) < TINY32), np.copysign(f32(0), x), x)


# --------------------------------------------------------------------------
# Sampling coordinates


def sample_coords(lo, hi, size, crop, ratio=False, flush=False):
    """Float32 image coordinates sampled by every crop index along one axis.

    Parameters
    ----------
    lo, hi : float
        The box edges on this axis (``y1, y2`` or ``x1, x2``), read as
        float32.
    size, crop : int
        Image and crop extent on this axis.
    ratio : bool, default False
        The boxes gradient's spacing, ``(hi - lo) * ((size - 1) / (crop -
        1))``, instead of ``(hi - lo) * (size - 1) / (crop - 1)``.
    flush : bool, default False
        Flush subnormal values (see the module docstring).

    Returns
    -------
    list of numpy.float32
        ``lo * (size - 1) + i * spacing`` for crop index ``i``, in float32;
        a one-sample crop looks at the box centre, ``0.5 * (lo + hi) *
        (size - 1)`` with a float32 sum and double products, rounded once.

    Examples
    --------
    >>> [float(c) for c in sample_coords(0.0, 1.0, 5, 3)]
    [0.0, 2.0, 4.0]
    """
    with np.errstate(all="ignore"):  # huge boxes overflow, as in the kernel
        lo, hi = _fz(lo, flush), _fz(hi, flush)
        last = f32(size - 1)
        if crop == 1:
            centre = _fz(lo + hi, flush)
            return [_fz(0.5 * float(centre) * float(size - 1), flush)]
        span = _fz(hi - lo, flush)
        if ratio:
            spacing = _fz(span * _fz(last / f32(crop - 1), flush), flush)
        else:
            spacing = _fz(_fz(span * last, flush) / f32(crop - 1), flush)
        start = _fz(lo * last, flush)
        return [_fz(start + _fz(f32(i) * spacing, flush), flush) for i in range(crop)]


def inside(coord, size):
    """Whether a float32 coordinate lies in ``[0, size - 1]`` (NaN does not)."""
    return bool(coord >= 0) and bool(coord <= f32(size - 1))


def linear_taps(coord, size, flush=False):
    """The two pixels of a bilinear sample along one axis, and the weight.

    Parameters
    ----------
    coord : numpy.float32
        A coordinate inside the image (see `inside`).
    size : int
        Image extent on this axis.
    flush : bool, default False
        Flush a subnormal weight.

    Returns
    -------
    (int, int, numpy.float32)
        ``floor(coord)``, ``ceil(coord)`` and ``coord - floor(coord)`` in
        float32.  Past 2**24 pixels ``float32(size - 1)`` may round up
        beyond the last pixel: indices stop at ``size - 1``.

    Examples
    --------
    >>> linear_taps(np.float32(1.25), 4)
    (1, 2, np.float32(0.25))
    """
    low = min(math.floor(float(coord)), size - 1)
    high = min(math.ceil(float(coord)), size - 1)
    return low, high, _fz(coord - f32(low), flush)


def nearest_tap(coord, size):
    """The pixel of a nearest-neighbour sample: C's ``roundf``, halves up.

    ``coord`` is never negative here (or is -0.0), and ``coord + 0.5`` is
    exact in double for any float32, so ``floor`` of it is ``roundf``.
    """
    return min(math.floor(float(coord) + 0.5), size - 1)


def _inside_coords(lo, hi, size, crop, ratio=False, flush=False):
    """[(crop index, coordinate)] of the samples inside the image."""
    coords = sample_coords(lo, hi, size, crop, ratio, flush)
    return [(i, c) for i, c in enumerate(coords) if inside(c, size)]


def _read_image(image, flush):
    """The image as float32, as the kernels read it (C's conversion).

    Under flush-to-zero, a conversion from float64 whose result is
    subnormal gives zero; float32 pixels are read as they are (a nearest
    crop copies them without arithmetic), and no other dtype converts to a
    subnormal float32.
    """
    image = np.asarray(image)
    with np.errstate(all="ignore"):
        pixels = image.astype(f32)
    if flush and image.dtype.kind == "f" and image.dtype.itemsize > 4:
        pixels = _fz(pixels, True)
    return pixels


def _method(method):
    if method not in ("bilinear", "nearest"):
        raise ValueError(f"method must be 'bilinear' or 'nearest', got {method!r}")
    return method == "nearest"


# --------------------------------------------------------------------------
# The image gradient


def grad_image(
    grads,
    boxes,
    box_ind,
    image_size,
    method="bilinear",
    dtype=np.float64,
    exact=False,
    flush=False,
):
    """The image gradient, ``CropAndResizeGradImage``.

    Parameters
    ----------
    grads : array_like of shape (num_boxes, crop_height, crop_width, depth)
        Read as float32.
    boxes : array_like of shape (num_boxes, 4)
        ``[y1, x1, y2, x2]`` per box, read as float32.
    box_ind : array_like of shape (num_boxes,)
        The image of each box.
    image_size : sequence of 4 ints
        ``(batch, height, width, depth)``: the output's shape.
    method : {"bilinear", "nearest"}, default "bilinear"
    dtype : dtype, default numpy.float64
        With ``exact=True``, the accumulator: the float32 products are added
        into float32 or float64 values (TensorFlow's and the library's bits),
        or rounded to float16 and added into float16 values (TensorFlow's
        own float16 arithmetic, not the library's float16 output, which is
        the float32 result rounded once).  Ignored otherwise.
    exact : bool, default False
        See the module docstring.
    flush : bool, default False
        See the module docstring.

    Returns
    -------
    ndarray of shape image_size
        float64, or `dtype` with ``exact=True``.

    Examples
    --------
    >>> grads = np.full((1, 1, 1, 1), 1.0, np.float32)
    >>> out = grad_image(grads, [[0.25, 0.5, 0.25, 0.5]], [0], (1, 3, 3, 1))
    >>> out[0, :, :, 0].tolist()  # the centre of the box, (0.5, 1.0)
    [[0.0, 0.5, 0.0], [0.0, 0.5, 0.0], [0.0, 0.0, 0.0]]
    """
    nearest = _method(method)
    with np.errstate(all="ignore"):
        grads = _fz(np.asarray(grads, dtype=f32), flush)
        boxes = np.asarray(boxes, dtype=f32)
    box_ind = np.asarray(box_ind).astype(np.int64)
    batch, height, width, depth = (int(v) for v in image_size)
    acc = np.dtype(dtype) if exact else np.dtype(f64)
    out = np.zeros((batch, height, width, depth), acc)
    add = _adder(out, exact, flush)
    one = f32(1)
    num_boxes, crop_h, crop_w = grads.shape[:3]
    with np.errstate(all="ignore"):
        for b in range(num_boxes):
            y1, x1, y2, x2 = boxes[b]
            image = int(box_ind[b])
            rows = _inside_coords(y1, y2, height, crop_h, flush=flush)
            cols = _inside_coords(x1, x2, width, crop_w, flush=flush)
            for y, cy in rows:
                for x, cx in cols:
                    g = grads[b, y, x]
                    if nearest:
                        at = (image, nearest_tap(cy, height), nearest_tap(cx, width))
                        add(at, g)
                        continue
                    top, bottom, y_lerp = linear_taps(cy, height, flush)
                    left, right, x_lerp = linear_taps(cx, width, flush)
                    corners = (
                        (image, top, left),
                        (image, top, right),
                        (image, bottom, left),
                        (image, bottom, right),
                    )
                    if exact:
                        d_top = _fz(_fz(one - y_lerp, flush) * g, flush)
                        d_bottom = _fz(y_lerp * g, flush)
                        x_left = _fz(one - x_lerp, flush)
                        terms = (
                            _fz(x_left * d_top, flush),
                            _fz(x_lerp * d_top, flush),
                            _fz(x_left * d_bottom, flush),
                            _fz(x_lerp * d_bottom, flush),
                        )
                    else:
                        wy, wx = float(y_lerp), float(x_lerp)
                        g64 = g.astype(f64)
                        terms = (
                            (1 - wy) * (1 - wx) * g64,
                            (1 - wy) * wx * g64,
                            wy * (1 - wx) * g64,
                            wy * wx * g64,
                        )
                    for at, term in zip(corners, terms):
                        add(at, term)
    return out


def _adder(out, exact, flush):
    """``add(index, term)``: one update of `out` in its arithmetic."""
    if not exact or out.dtype == f64:
        # float64 sums of float32 products (or float64 terms): a sum of
        # float32 values is never a float64 subnormal, nothing to flush.
        def add(at, term):
            out[at] += term.astype(f64)

    elif out.dtype == f32:

        def add(at, term):
            out[at] = _fz(out[at] + term, flush)

    elif out.dtype == np.float16:
        # float16 arithmetic: the product rounded to float16, the sum done
        # in float32 and rounded to float16 (no float16 value is a float32
        # subnormal, so flushing changes nothing here).
        def add(at, term):
            total = out[at].astype(f32) + term.astype(np.float16).astype(f32)
            out[at] = total.astype(np.float16)

    else:
        raise TypeError(f"no {out.dtype} accumulation in the reference")
    return add


# --------------------------------------------------------------------------
# The forward op


def crop_and_resize(
    image,
    boxes,
    box_ind,
    crop_size,
    method="bilinear",
    extrapolation_value=0.0,
    exact=False,
    flush=False,
):
    """The forward op, ``CropAndResize``.

    Parameters
    ----------
    image : array_like of shape (batch, height, width, depth)
        Any real dtype, read as float32 (C's conversion).
    boxes, box_ind
        As for `grad_image`.
    crop_size : sequence of 2 ints
        ``(crop_height, crop_width)``.
    method : {"bilinear", "nearest"}, default "bilinear"
    extrapolation_value : float, default 0.0
        Written, as float32, for samples outside the image.
    exact, flush : bool, default False
        See the module docstring.

    Returns
    -------
    ndarray of shape (num_boxes, crop_height, crop_width, depth)
        float64, or float32 with ``exact=True``.

    Examples
    --------
    >>> image = np.arange(9, dtype=np.float32).reshape(1, 3, 3, 1)
    >>> crop_and_resize(image, [[0, 0, 1, 1]], [0], (2, 2))[0, :, :, 0]
    array([[0., 2.],
           [6., 8.]])
    """
    nearest = _method(method)
    pixels = _read_image(image, flush)
    with np.errstate(all="ignore"):
        boxes = np.asarray(boxes, dtype=f32)
        fill = f32(extrapolation_value)
    box_ind = np.asarray(box_ind).astype(np.int64)
    _, height, width, depth = pixels.shape
    crop_h, crop_w = (int(v) for v in crop_size)
    shape = (len(boxes), crop_h, crop_w, depth)
    out = np.full(shape, fill, f32) if exact else np.full(shape, float(fill))
    if not exact:
        pixels = pixels.astype(f64)
    elif flush:
        # Bilinear arithmetic reads subnormal pixels as zero (a nearest
        # crop copies them; it is handled before this is used).
        flushed = _fz(pixels, True)
    with np.errstate(all="ignore"):
        for b in range(len(boxes)):
            y1, x1, y2, x2 = boxes[b]
            image_b = int(box_ind[b])
            rows = _inside_coords(y1, y2, height, crop_h, flush=flush)
            cols = _inside_coords(x1, x2, width, crop_w, flush=flush)
            for y, cy in rows:
                for x, cx in cols:
                    if nearest:
                        at = (image_b, nearest_tap(cy, height), nearest_tap(cx, width))
                        out[b, y, x] = pixels[at]
                        continue
                    top, bottom, y_lerp = linear_taps(cy, height, flush)
                    left, right, x_lerp = linear_taps(cx, width, flush)
                    img = (flushed if exact and flush else pixels)[image_b]
                    tl, tr = img[top, left], img[top, right]
                    bl, br = img[bottom, left], img[bottom, right]
                    if exact:
                        upper = _lerp(tl, tr, x_lerp, flush)
                        lower = _lerp(bl, br, x_lerp, flush)
                        out[b, y, x] = _lerp(upper, lower, y_lerp, flush)
                    else:
                        wy, wx = float(y_lerp), float(x_lerp)
                        upper = tl + (tr - tl) * wx
                        lower = bl + (br - bl) * wx
                        out[b, y, x] = upper + (lower - upper) * wy
    return out


def _lerp(a, b, t, flush):
    """``a + (b - a) * t`` in float32, rounded after each operation."""
    return _fz(a + _fz(_fz(b - a, flush) * t, flush), flush)


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


def _box_terms(grads, pixels, box, image_b, size, crop, flush, exact):
    """Per sample inside the image: (factors_y, factors_x, slope_y, slope_x).

    slope_y and slope_x are the image's slopes along y and x at the sample,
    times the incoming gradient, per channel: float32 in the kernel's
    order with ``exact``, float64 otherwise.
    """
    y1, x1, y2, x2 = box
    height, width = size
    crop_h, crop_w = crop
    one = f32(1)
    rows = _inside_coords(y1, y2, height, crop_h, ratio=True, flush=flush)
    cols = _inside_coords(x1, x2, width, crop_w, ratio=True, flush=flush)
    img = pixels[image_b]
    for y, cy in rows:
        top, bottom, y_lerp = linear_taps(cy, height, flush)
        for x, cx in cols:
            left, right, x_lerp = linear_taps(cx, width, flush)
            tl, tr = img[top, left], img[top, right]
            bl, br = img[bottom, left], img[bottom, right]
            g = grads[y, x]
            if exact:
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
                slope_y = _fz(slope_y * g, flush)
                slope_x = _fz(slope_x * g, flush)
            else:
                wy, wx = float(y_lerp), float(x_lerp)
                g64 = g.astype(f64)
                slope_y = ((1 - wx) * (bl - tl) + wx * (br - tr)) * g64
                slope_x = ((1 - wy) * (tr - tl) + wy * (br - bl)) * g64
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
        boxes = np.asarray(boxes, dtype=f32)
    pixels = _fz(_read_image(image, flush), flush)
    box_ind = np.asarray(box_ind).astype(np.int64)
    _, height, width, _ = pixels.shape
    num_boxes, crop_h, crop_w, _ = grads.shape
    if not exact:
        pixels = pixels.astype(f64)
    out = np.zeros((num_boxes, 4), f32 if exact else f64)
    with np.errstate(all="ignore"):
        for b in range(num_boxes):
            samples = _box_terms(
                grads[b],
                pixels,
                boxes[b],
                int(box_ind[b]),
                (height, width),
                (crop_h, crop_w),
                flush,
                exact,
            )
            if exact:
                out[b] = _exact_box_sums(samples, (height, width), flush)
            else:
                out[b] = _float64_box_sums(samples, (height, width))
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
    with np.errstate(all="ignore"):
        boxes = np.asarray(boxes, dtype=f32)
        tangent = _fz(np.asarray(boxes_tangent, dtype=f32), flush)
    pixels = _fz(_read_image(image, flush), flush)
    box_ind = np.asarray(box_ind).astype(np.int64)
    _, height, width, depth = pixels.shape
    crop_h, crop_w = (int(v) for v in crop_size)
    if not exact:
        pixels = pixels.astype(f64)
    out = np.zeros((len(boxes), crop_h, crop_w, depth), f32 if exact else f64)
    one = f32(1)
    with np.errstate(all="ignore"):
        for b in range(len(boxes)):
            y1, x1, y2, x2 = boxes[b]
            t_y1, t_x1, t_y2, t_x2 = tangent[b]
            img = pixels[int(box_ind[b])]
            rows = _inside_coords(y1, y2, height, crop_h, ratio=True, flush=flush)
            cols = _inside_coords(x1, x2, width, crop_w, ratio=True, flush=flush)
            for y, cy in rows:
                top, bottom, y_lerp = linear_taps(cy, height, flush)
                rate_y = _coord_tangent(t_y1, t_y2, y, height, crop_h, exact, flush)
                for x, cx in cols:
                    left, right, x_lerp = linear_taps(cx, width, flush)
                    rate_x = _coord_tangent(t_x1, t_x2, x, width, crop_w, exact, flush)
                    tl, tr = img[top, left], img[top, right]
                    bl, br = img[bottom, left], img[bottom, right]
                    if exact:
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
                        out[b, y, x] = _fz(
                            _fz(slope_y * rate_y, flush) + _fz(slope_x * rate_x, flush),
                            flush,
                        )
                    else:
                        wy, wx = float(y_lerp), float(x_lerp)
                        slope_y = (1 - wx) * (bl - tl) + wx * (br - tr)
                        slope_x = (1 - wy) * (tr - tl) + wy * (br - bl)
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
    boxes = np.asarray(boxes, dtype=f32)
    box_ind = np.asarray(box_ind).astype(np.int64)
    _, height, width, _ = pixels.shape
    num_boxes, crop_h, crop_w, _ = grads.shape
    out = np.zeros((num_boxes, 4))
    with np.errstate(all="ignore"):
        for b in range(num_boxes):
            y1, x1, y2, x2 = boxes[b]
            img = pixels[int(box_ind[b])]
            rows = _inside_coords(y1, y2, height, crop_h, ratio=True)
            cols = _inside_coords(x1, x2, width, crop_w, ratio=True)
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
