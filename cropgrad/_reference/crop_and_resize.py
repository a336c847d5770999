"""The crop_and_resize family's forward op and image gradient (NumPy model).

See the package's docstring (`cropgrad._reference`) for the two kinds of
arithmetic (``exact``) and the flush-to-zero model (``flush``).
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


def _read_boxes(boxes, box_ind):
    """The boxes as float32 (huge values overflow) and their images' indices."""
    with np.errstate(all="ignore"):
        boxes = np.asarray(boxes, dtype=f32)
    return boxes, np.asarray(box_ind).astype(np.int64)


def _box_samples(boxes, box_ind, size, crop, ratio=False, flush=False):
    """``(box, image, rows, cols)`` per box: its samples inside the image.

    `rows` and `cols` are `_inside_coords`'s along y and x, for an image of
    `size` ``(height, width)`` and a crop of `crop` ``(height, width)``.
    """
    (height, width), (crop_h, crop_w) = size, crop
    for b, (y1, x1, y2, x2) in enumerate(boxes):
        rows = _inside_coords(y1, y2, height, crop_h, ratio, flush)
        cols = _inside_coords(x1, x2, width, crop_w, ratio, flush)
        yield b, int(box_ind[b]), rows, cols


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
    boxes, box_ind = _read_boxes(boxes, box_ind)
    batch, height, width, depth = (int(v) for v in image_size)
    acc = np.dtype(dtype) if exact else np.dtype(f64)
    out = np.zeros((batch, height, width, depth), acc)
    add = _adder(out, exact, flush)
    one = f32(1)
    crop = grads.shape[1:3]
    with np.errstate(all="ignore"):
        for b, image, rows, cols in _box_samples(
            boxes, box_ind, (height, width), crop, flush=flush
        ):
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
    boxes, box_ind = _read_boxes(boxes, box_ind)
    with np.errstate(all="ignore"):
        fill = f32(extrapolation_value)
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
        for b, image_b, rows, cols in _box_samples(
            boxes, box_ind, (height, width), (crop_h, crop_w), flush=flush
        ):
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
