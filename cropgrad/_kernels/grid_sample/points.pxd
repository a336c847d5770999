# cython: language_level=3
"""Where a grid point samples (private to the grid-sampling kernels): the
arithmetic type, the options' codes, an axis's unnormalisation and padding,
and a point's taps (offsets into a plane, -1 for none) and weights, each
step rounded as docs/semantics.md ("Grid sampling") says: every fused
multiply-add an explicit ``fma``, the build contracting none."""

from libc.math cimport fabs, floor, fma, fmaf, isnan, nearbyint, trunc
from libc.stdint cimport INT32_MIN, INT64_MIN, int32_t, int64_t

ctypedef fused real:
    float
    double

# The options' codes (the NumPy layer passes them).
cdef enum:
    BILINEAR = 0
    NEAREST = 1
    BICUBIC = 2
    ZEROS = 0
    BORDER = 1
    REFLECTION = 2


cdef struct Plan:
    const void* image      # [N, C, H, W] or [N, H, W, C] (`nhwc`)
    const void* grid       # [N, Ho, Wo, 2]
    const void* grads      # [N, C, Ho, Wo] or [N, Ho, Wo, C]
    const void* tangent    # [N, Ho, Wo, 2]
    void* out
    int64_t n, c, h, w, ho, wo
    int mode, padding
    bint aligned
    bint wide              # float64 arithmetic
    bint nhwc              # the image, grads and samples NHWC
    # Strides, in elements, of a batch's image (and image gradient): from a
    # pixel to the next, from a channel to the next; and of its samples (and
    # their grads): from a point to the next, from a channel to the next.
    int64_t pix, chan, point, sample_chan
    # The image gradient's: row bands per plane, the batch being scattered,
    # the chunk of its points [q_start, q_end), their tap offsets [points,
    # taps] (-1: none) and weights ([points, 4] bilinear, [points, 8]
    # bicubic: cx then cy).
    int64_t bands, batch, q_start, q_end
    int taps
    int64_t* offs
    void* wts
    # An NCHW problem run a batch a task through the NHWC clone: each
    # thread's scratch of `staged` floats (NULL: not staged).
    float* stage
    int64_t staged


# An axis of `size` pixels, its constants rounded in the arithmetic type and
# kept here in double (exactly: a float widens without rounding).
cdef struct Axis:
    double scale, top, low, twice
    int64_t size
    bint aligned, empty
    int padding


cdef inline Axis make_axis(real kind, int64_t size, int padding,
                           bint aligned) noexcept nogil:
    cdef Axis a
    a.size = size
    a.padding = padding
    a.aligned = aligned
    a.top = <real>(size - 1)
    if aligned:
        a.scale = <real>(<real>(size - 1) / <real>2)
        a.low = 0
        a.twice = <real>(<real>(size - 1) * <real>2)
        a.empty = size <= 1
    else:
        a.scale = <real>(<real>size / <real>2)
        a.low = -0.5
        a.twice = <real>(<real>size * <real>2)
        a.empty = size <= 0
    return a


cdef inline real mul_add(real a, real b, real c) noexcept nogil:
    """One rounding of ``a * b + c`` in the arithmetic type."""
    if real is float:
        return fmaf(a, b, c)
    else:
        return fma(a, b, c)


cdef inline int64_t to_index(real v) noexcept nogil:
    """C's truncation of `v` to the integer of its type's size, defined
    everywhere as the AVX2 conversion PyTorch's kernel uses defines it: NaN
    and values out of range give the most negative integer (which no image
    holds).  A plain cast of those would be undefined behaviour."""
    if real is float:
        if v >= -2147483648.0 and v < 2147483648.0:
            return <int32_t>v
        return INT32_MIN
    else:
        if v >= -9223372036854775808.0 and v < 9223372036854775808.0:
            return <int64_t>v
        return INT64_MIN


cdef inline real unnormalize(const Axis* a, real g) noexcept nogil:
    if a.aligned:
        return (g + <real>1) * <real>a.scale
    return mul_add(g + <real>1, <real>a.scale, <real>-0.5)


cdef inline real clip(const Axis* a, real v) noexcept nogil:
    """The forward's clip to [0, size - 1]: NaN becomes 0."""
    v = v if v > 0 else <real>0
    return v if v < <real>a.top else <real>a.top


cdef inline real clip_grad(const Axis* a, real v, bint* inside) noexcept nogil:
    """The backward's clip: NaN stays NaN; `inside` is False where the
    result is exactly 0 or size - 1 (the bounds count as outside)."""
    cdef real lo = v if (isnan(v) or v > 0) else <real>0
    cdef real res = lo if (isnan(lo) or lo < <real>a.top) else <real>a.top
    inside[0] = lo != 0 and res != <real>a.top
    return res


cdef inline real fold(const Axis* a, real v, real* other,
                      bint* negative) noexcept nogil:
    """The distance from ``low`` folded into [0, twice]: returns ``extra``,
    sets ``twice - extra`` and whether ``v - low < 0``."""
    cdef real shifted = v if a.aligned else v - <real>a.low
    cdef real u = fabs(shifted)
    cdef real twice = <real>a.twice
    cdef real flips = trunc(u / twice)
    cdef real extra = mul_add(-flips, twice, u)
    other[0] = twice - extra
    negative[0] = shifted < 0
    return extra


cdef inline real reflect(const Axis* a, real v) noexcept nogil:
    """The forward's reflection: min(extra, twice - extra) + low, NaN when
    either is."""
    cdef real other, res
    cdef bint negative
    if a.empty:
        return 0
    cdef real extra = fold(a, v, &other, &negative)
    if isnan(extra) or isnan(other):
        res = extra + other
    else:
        res = extra if extra <= other else other
    return res if a.aligned else res + <real>a.low


cdef inline real reflect_grad(const Axis* a, real v, real* slope) noexcept nogil:
    cdef real other, res
    cdef bint negative, flip
    if a.empty:
        slope[0] = 0
        return 0
    cdef real extra = fold(a, v, &other, &negative)
    flip = extra > other
    res = other if flip else extra
    if not a.aligned:
        res = res + <real>a.low
    slope[0] = -1 if flip != negative else 1
    return res


cdef inline real locate(const Axis* a, real g) noexcept nogil:
    """The padded pixel coordinate of grid value `g` (the forward's)."""
    cdef real v = unnormalize(a, g)
    if a.padding == BORDER:
        return clip(a, v)
    if a.padding == REFLECTION:
        return clip(a, reflect(a, v))
    return v


cdef inline real locate_grad(const Axis* a, real g, real* mult) noexcept nogil:
    """The backward's padded coordinate and its derivative in `g`."""
    cdef real v = unnormalize(a, g)
    cdef real res, slope, m
    cdef bint inside
    if a.padding == BORDER:
        res = clip_grad(a, v, &inside)
        mult[0] = <real>a.scale if inside else <real>0
        return res
    if a.padding == REFLECTION:
        res = reflect_grad(a, v, &slope)
        m = slope * <real>a.scale
        res = clip_grad(a, res, &inside)
        mult[0] = m if inside else <real>0
        return res
    mult[0] = <real>a.scale
    return v


cdef inline real pad_tap(const Axis* a, real v) noexcept nogil:
    """A bicubic tap's coordinate, padded (the forward's clip)."""
    if a.padding == BORDER:
        return clip(a, v)
    if a.padding == REFLECTION:
        return clip(a, reflect(a, v))
    return v


cdef inline bint inside(int64_t iy, int64_t ix, int64_t h, int64_t w) noexcept nogil:
    return ix > -1 and ix < w and iy > -1 and iy < h


# --------------------------------------------------------------------------
# The taps of one point: up to 16 (bicubic), each an offset into a plane
# (-1: not read, not written) and, for the image gradient, its weight.

cdef struct Taps:
    int count
    int64_t off[16]


cdef inline void bilinear_taps(const Plan* p, real x, real y, bint backward,
                               Taps* t, real* wt, real* frac) noexcept nogil:
    """Bilinear corners nw, ne, sw, se of pixel coordinate (x, y): their
    offsets, their weights `wt` and ``frac = (n, s, w, e)``."""
    cdef real x_w = floor(x), y_n = floor(y)
    cdef real fw = x - x_w, fe = <real>1 - fw
    cdef real fn = y - y_n, fs = <real>1 - fn
    cdef int64_t ix_w = to_index(x_w), iy_n = to_index(y_n)
    cdef int64_t ix_e = ix_w + 1, iy_s = iy_n + 1
    cdef int64_t h = p.h, w = p.w
    cdef bint ok[4]
    wt[0] = fs * fe
    wt[1] = fs * fw
    wt[2] = fn * fe
    wt[3] = fn * fw
    frac[0] = fn
    frac[1] = fs
    frac[2] = fw
    frac[3] = fe
    t.count = 4
    if p.padding != ZEROS:
        if backward and (isnan(x) or isnan(y)):
            # The backward's clip keeps NaN, which a coordinate so large
            # that unnormalising it overflows reflects to: no pixel is read
            # or written for it (PyTorch's kernel would go out of bounds).
            ok[0] = ok[1] = ok[2] = ok[3] = False
        else:
            # Clipped coordinates: only the east column and south row can
            # fall outside.
            ok[0] = True
            ok[1] = ix_e < w
            ok[2] = iy_s < h
            ok[3] = ok[1] and ok[2]
    else:
        ok[0] = inside(iy_n, ix_w, h, w)
        ok[1] = inside(iy_n, ix_e, h, w)
        ok[2] = inside(iy_s, ix_w, h, w)
        ok[3] = inside(iy_s, ix_e, h, w)
    t.off[0] = iy_n * w + ix_w if ok[0] else -1
    t.off[1] = iy_n * w + ix_e if ok[1] else -1
    t.off[2] = iy_s * w + ix_w if ok[2] else -1
    t.off[3] = iy_s * w + ix_e if ok[3] else -1


cdef inline void nearest_tap(const Plan* p, const Axis* ax, const Axis* ay,
                             real gx, real gy, Taps* t) noexcept nogil:
    cdef real x = locate(ax, gx), y = locate(ay, gy)
    cdef int64_t ix = to_index(<real>nearbyint(x)), iy = to_index(<real>nearbyint(y))
    t.count = 1
    if p.padding != ZEROS or inside(iy, ix, p.h, p.w):
        t.off[0] = iy * p.w + ix
    else:
        t.off[0] = -1


cdef inline void cubic_coefficients(real t, real* c) noexcept nogil:
    """Cubic convolution's weights (A = -0.75) of the taps at -1, 0, 1, 2
    from fraction `t`: every step rounded, the constant products exact."""
    cdef real A = -0.75, five = -3.75, eight = -6.0, four = -3.0
    cdef real a2 = 1.25, a3 = 2.25
    cdef real u
    u = t + <real>1
    c[0] = ((A * u - five) * u + eight) * u - four
    c[1] = mul_add(mul_add(a2, t, -a3) * t, t, <real>1)
    u = <real>1 - t
    c[2] = mul_add(mul_add(a2, u, -a3) * u, u, <real>1)
    u = <real>2 - t
    c[3] = ((A * u - five) * u + eight) * u - four


cdef inline void cubic_slopes(real t, real* d) noexcept nogil:
    """The derivatives of `cubic_coefficients` in the tap's distance, each
    step rounded."""
    cdef real A3 = -2.25, A10 = -7.5, A8 = -6.0, B3 = 3.75, B2 = 4.5
    cdef real x0 = <real>-1 - t, x1 = <real>0 - t
    cdef real x2 = <real>1 - t, x3 = <real>2 - t
    d[0] = ((-A3) * x0 - A10) * x0 - A8
    d[1] = ((-B3) * x1 - B2) * x1
    d[2] = (B3 * x2 - B2) * x2
    d[3] = (A3 * x3 - A10) * x3 + A8


cdef inline void cubic_taps(const Plan* p, const Axis* ax, const Axis* ay,
                            real x0, real y0, Taps* t) noexcept nogil:
    """The 16 taps, tap (i, j) (column x0 - 1 + i, row y0 - 1 + j) at
    ``4 * i + j``, padded and masked."""
    cdef int i, j
    cdef int64_t ix[4]
    cdef int64_t iy[4]
    for i in range(4):
        ix[i] = to_index(pad_tap(ax, x0 + <real>(i - 1)))
        iy[i] = to_index(pad_tap(ay, y0 + <real>(i - 1)))
    t.count = 16
    for i in range(4):
        for j in range(4):
            if p.padding != ZEROS or inside(iy[j], ix[i], p.h, p.w):
                t.off[4 * i + j] = iy[j] * p.w + ix[i]
            else:
                t.off[4 * i + j] = -1


cdef inline void cubic_point(const Plan* p, const Axis* ax, const Axis* ay,
                             real gx, real gy, real* cx, real* cy, real* dx,
                             real* dy, Taps* t) noexcept nogil:
    """Bicubic's 16 taps of grid point (gx, gy) and their weights along x
    (`cx`) and y (`cy`); their slopes too unless `dx` is NULL."""
    cdef real x = unnormalize(ax, gx), y = unnormalize(ay, gy)
    cdef real x0 = floor(x), y0 = floor(y)
    cubic_coefficients(x - x0, cx)
    cubic_coefficients(y - y0, cy)
    if dx != NULL:
        cubic_slopes(x - x0, dx)
        cubic_slopes(y - y0, dy)
    cubic_taps(p, ax, ay, x0, y0, t)


cdef inline real read(const real* plane, int64_t off, int64_t pix) noexcept nogil:
    """The pixel at offset `off` (-1: none, +0) of a channel whose pixels
    are `pix` apart."""
    return plane[off * pix] if off >= 0 else <real>0
