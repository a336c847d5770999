# cython: language_level=3
#
# Where a crop sample falls in the image: the one implementation of the
# sampling coordinates, shared by the image gradient, the forward op and the
# boxes gradient.
#
# Every operation below is float32 arithmetic in TensorFlow's order unless a
# comment says otherwise: these roundings are the contract.  Integer sizes are
# converted to float32 exactly where C converts TensorFlow's `int` operands.
# The extension is built without floating-point contraction, so no product
# here is fused into an add.

from libc.math cimport roundf


cdef inline float crop_scale(float lo, float hi, Py_ssize_t size,
                             Py_ssize_t crop) noexcept nogil:
    """Image pixels between neighbouring crop samples along one axis.

    Parameters
    ----------
    lo, hi : float
        Normalized box edges on this axis (``y1, y2`` or ``x1, x2``).
    size : Py_ssize_t
        Image height or width.
    crop : Py_ssize_t
        Crop height or width.

    Returns
    -------
    float
        ``(hi - lo) * (size - 1) / (crop - 1)``, rounded to float32 after
        each operation; 0 when ``crop == 1``.
    """
    if crop > 1:
        return (hi - lo) * <float>(size - 1) / <float>(crop - 1)
    return 0.0


cdef inline float crop_ratio(Py_ssize_t size, Py_ssize_t crop) noexcept nogil:
    """``(size - 1) / (crop - 1)`` in float32; 0 when ``crop == 1``.

    The boxes gradient scales ``hi - lo`` by this ratio instead of using
    `crop_scale`: a different rounding that TensorFlow's kernel has, so its
    sampling coordinates are built from ``(hi - lo) * crop_ratio(...)``.
    """
    if crop > 1:
        return <float>(size - 1) / <float>(crop - 1)
    return 0.0


cdef inline float sample_coord(float lo, float hi, float scale,
                               Py_ssize_t size, Py_ssize_t crop,
                               Py_ssize_t i) noexcept nogil:
    """Image coordinate sampled by crop index `i` along one axis.

    Parameters
    ----------
    lo, hi : float
        Normalized box edges on this axis.
    scale : float
        The spacing from `crop_scale` (or ``(hi - lo) * crop_ratio``).
    size, crop : Py_ssize_t
        Image and crop extent on this axis.
    i : Py_ssize_t
        Crop row or column index.

    Returns
    -------
    float
        ``lo * (size - 1) + i * scale`` in float32.  A one-sample crop looks
        at the centre of the box instead: ``0.5 * (lo + hi) * (size - 1)``
        with a float32 sum and double products, rounded to float32 once.
    """
    if crop > 1:
        return lo * <float>(size - 1) + <float>i * scale
    # 0.5 is a double literal in the reference kernel: keep the products in
    # double on purpose, then round once.
    return <float>(0.5 * <double>(lo + hi) * <double>(size - 1))


cdef inline float coord_tangent(float t_lo, float t_hi, float ratio,
                                Py_ssize_t size, Py_ssize_t crop,
                                Py_ssize_t i) noexcept nogil:
    """How fast crop index `i`'s coordinate moves as the box edges move.

    The derivative of the boxes gradient's `sample_coord` (spacing
    ``(hi - lo) * ratio``) with respect to ``lo`` and ``hi``, applied to the
    edges' tangents `t_lo` and `t_hi`: the factors the boxes gradient
    multiplies its terms by, so that it is this derivative's transpose.

    Returns
    -------
    float
        ``t_lo * ((size - 1) - i * ratio) + t_hi * (i * ratio)`` in float32,
        rounded after each operation.  A one-sample crop (``crop == 1``,
        the box centre) has the factor ``0.5 * (size - 1)`` for both edges,
        applied in double as the boxes gradient applies it:
        ``t_lo * 0.5 * (size - 1) + t_hi * 0.5 * (size - 1)`` in double,
        rounded to float32 once.
    """
    cdef float high
    if crop > 1:
        high = <float>i * ratio
        return t_lo * (<float>(size - 1) - high) + t_hi * high
    return <float>(<double>t_lo * 0.5 * <double>(size - 1)
                   + <double>t_hi * 0.5 * <double>(size - 1))


cdef inline bint inside(float coord, Py_ssize_t size) noexcept nogil:
    """True when ``0 <= coord <= size - 1``; NaN is never inside.

    The test is written positively so that NaN (from huge boxes whose
    arithmetic overflowed) fails it instead of slipping through.
    """
    return coord >= 0 and coord <= <float>(size - 1)


cdef inline bint linear_taps(float coord, Py_ssize_t size, Py_ssize_t* lo,
                             Py_ssize_t* hi, float* lerp) noexcept nogil:
    """Neighbouring pixels and weight of a bilinear sample along one axis.

    Parameters
    ----------
    coord : float
        Image coordinate from `sample_coord`.
    size : Py_ssize_t
        Image extent on this axis.
    lo, hi : Py_ssize_t*
        Out: ``floor(coord)`` and ``ceil(coord)``.
    lerp : float*
        Out: ``coord - floor(coord)`` in float32.

    Returns
    -------
    bint
        False (outputs untouched) when the sample lies outside the image.
    """
    cdef Py_ssize_t i
    if not inside(coord, size):
        return False
    # coord >= 0, so truncation is floor.  Truncation also maps a negative
    # subnormal that passed the test (read as zero under denormals-are-zero)
    # to 0, where a library floor() might return -1.
    i = <Py_ssize_t>coord
    # Beyond 2**24 rows, size - 1 may round up in float32: never index past
    # the last pixel.
    if i > size - 1:
        i = size - 1
    lo[0] = i
    hi[0] = i + 1 if (coord > <float>i and i < size - 1) else i
    lerp[0] = coord - <float>i
    return True


cdef inline bint nearest_tap(float coord, Py_ssize_t size,
                             Py_ssize_t* idx) noexcept nogil:
    """Nearest pixel along one axis, halves rounded away from zero.

    Returns False (`idx` untouched) when the sample lies outside the image.
    """
    cdef Py_ssize_t i
    if not inside(coord, size):
        return False
    i = <Py_ssize_t>roundf(coord)
    if i > size - 1:
        i = size - 1
    idx[0] = i
    return True
