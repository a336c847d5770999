# cython: language_level=3
"""grid_sample's kernels (private): the forward op, the image gradient, the
grid gradient and the grid JVP, in float32 or float64 arithmetic.

Trusts its arguments: cropgrad/_api/grid_sample.py checks shapes, options
and finite grids first, and passes C-contiguous NCHW arrays of the
arithmetic type.  The arithmetic is docs/semantics.md's ("Grid sampling"),
the same as the NumPy reference's (cropgrad/_reference/grid_sample/),
every fused multiply-add an explicit ``fma`` (the build does not contract).

Threads never change the bits.  The forward op, the grid gradient and the
JVP write each output element from one task (a row of output points).  The
image gradient is a scatter, run one batch, and one chunk of its points,
at a time: tasks over blocks of points first work out every point's taps
(offsets and the weights that do not depend on the channel); then a task
owns one channel's plane, or a band of its rows when there are fewer
channels than threads, and replays the chunk's points in PyTorch's order
(vectors of 8 float32 or 4 float64 points; per vector, per tap, lane after
lane), adding only to the pixels it owns: each pixel gets its additions in
the serial order.
"""

from libc.math cimport fabs, floor, fma, fmaf, isnan, nearbyint, trunc
from libc.stdint cimport INT32_MIN, INT64_MIN, int32_t, int64_t, uintptr_t

import numpy as np

from cropgrad._runtime.parallel cimport (
    SCHEDULE_DYNAMIC,
    resolve_threads,
    run_tasks,
)

ctypedef fused real:
    float
    double

# The options' codes (the NumPy layer passes them).
cdef enum:
    # The image gradient works out the taps of CHUNK points at a time (a
    # multiple of every vector's lanes, so that no vector is split), in
    # tasks of TAPS_BLOCK points.
    CHUNK = 1 << 15
    TAPS_BLOCK = 256

cdef enum:
    BILINEAR = 0
    NEAREST = 1
    BICUBIC = 2
    ZEROS = 0
    BORDER = 1
    REFLECTION = 2

MODE_CODES = {"bilinear": BILINEAR, "nearest": NEAREST, "bicubic": BICUBIC}
PADDING_CODES = {"zeros": ZEROS, "border": BORDER, "reflection": REFLECTION}


cdef struct Plan:
    const void* image      # [N, C, H, W]
    const void* grid       # [N, Ho, Wo, 2]
    const void* grads      # [N, C, Ho, Wo]
    const void* tangent    # [N, Ho, Wo, 2]
    void* out
    int64_t n, c, h, w, ho, wo
    int mode, padding
    bint aligned
    bint wide              # float64 arithmetic
    # The image gradient's: row bands per plane, the batch being scattered,
    # the chunk of its points [q_start, q_end), their tap offsets [points,
    # taps] (-1: none) and weights ([points, 4] bilinear, [points, 8]
    # bicubic: cx then cy).
    int64_t bands, batch, q_start, q_end
    int taps
    int64_t* offs
    void* wts


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


cdef inline real read(const real* plane, int64_t off) noexcept nogil:
    return plane[off] if off >= 0 else <real>0


# --------------------------------------------------------------------------
# Forward op, grid gradient, JVP: one task per row of output points.

cdef void forward_row(const Plan* p, const real* image, const real* grid,
                      real* out, Py_ssize_t task) noexcept nogil:
    cdef Axis ax = make_axis(<real>0, p.w, p.padding, p.aligned)
    cdef Axis ay = make_axis(<real>0, p.h, p.padding, p.aligned)
    cdef int64_t b = task // p.ho, q, c, plane = p.h * p.w, per = p.ho * p.wo
    cdef int64_t first = (task % p.ho) * p.wo
    cdef const real* g
    cdef const real* img
    cdef real x, y, x0, y0, acc
    cdef real wt[4]
    cdef real frac[4]
    cdef real cx[4]
    cdef real cy[4]
    cdef real rows[4]
    cdef Taps t
    cdef int j
    for q in range(first, first + p.wo):
        g = grid + 2 * (b * per + q)
        if p.mode == NEAREST:
            nearest_tap(p, &ax, &ay, g[0], g[1], &t)
        elif p.mode == BILINEAR:
            x = locate(&ax, g[0])
            y = locate(&ay, g[1])
            bilinear_taps(p, x, y, False, &t, wt, frac)
        else:
            x = unnormalize(&ax, g[0])
            y = unnormalize(&ay, g[1])
            x0 = floor(x)
            y0 = floor(y)
            cubic_coefficients(x - x0, cx)
            cubic_coefficients(y - y0, cy)
            cubic_taps(p, &ax, &ay, x0, y0, &t)
        for c in range(p.c):
            img = image + (b * p.c + c) * plane
            if p.mode == NEAREST:
                acc = read(img, t.off[0])
            elif p.mode == BILINEAR:
                acc = mul_add(read(img, t.off[3]), wt[3], mul_add(
                    read(img, t.off[2]), wt[2], mul_add(
                        read(img, t.off[1]), wt[1], read(img, t.off[0]) * wt[0])))
            else:
                for j in range(4):
                    # Only the first addition fused, as PyTorch's build does.
                    rows[j] = (
                        (mul_add(cx[0], read(img, t.off[j]),
                                 cx[1] * read(img, t.off[4 + j]))
                         + cx[2] * read(img, t.off[8 + j]))
                        + cx[3] * read(img, t.off[12 + j])
                    )
                acc = mul_add(cy[3], rows[3], mul_add(cy[2], rows[2], mul_add(
                    cy[1], rows[1], cy[0] * rows[0])))
            out[(b * p.c + c) * per + q] = acc


cdef void slopes_row(const Plan* p, const real* image, const real* grid,
                     const real* grads, const real* tangent, real* out,
                     Py_ssize_t task) noexcept nogil:
    """The grid gradient (`grads` given: out [N, Ho, Wo, 2]) or the JVP
    (`tangent` given: out [N, C, Ho, Wo]) of a row of points, from the same
    per-channel slopes of the sample in x and in y."""
    cdef Axis ax = make_axis(<real>0, p.w, p.padding, p.aligned)
    cdef Axis ay = make_axis(<real>0, p.h, p.padding, p.aligned)
    cdef int64_t b = task // p.ho, q, c, plane = p.h * p.w, per = p.ho * p.wo
    cdef int64_t first = (task % p.ho) * p.wo, at
    cdef const real* g
    cdef const real* img
    cdef real x, y, x0, y0, gx, gy, sx, sy, vg, v, gc = 0, ux = 0, uy = 0
    cdef real xm, ym
    cdef real wt[4]
    cdef real frac[4]
    cdef real cx[4]
    cdef real cy[4]
    cdef real dx[4]
    cdef real dy[4]
    cdef real nw, ne, sw, se
    cdef Taps t
    cdef int i, j
    for q in range(first, first + p.wo):
        at = b * per + q
        g = grid + 2 * at
        if p.mode == NEAREST:
            # Piecewise constant: no slope.
            if grads != NULL:
                out[2 * at] = 0
                out[2 * at + 1] = 0
            else:
                for c in range(p.c):
                    out[(b * p.c + c) * per + q] = 0
            continue
        if p.mode == BILINEAR:
            x = locate_grad(&ax, g[0], &xm)
            y = locate_grad(&ay, g[1], &ym)
            bilinear_taps(p, x, y, True, &t, wt, frac)
        else:
            x = unnormalize(&ax, g[0])
            y = unnormalize(&ay, g[1])
            x0 = floor(x)
            y0 = floor(y)
            cubic_coefficients(x - x0, cx)
            cubic_coefficients(y - y0, cy)
            cubic_slopes(x - x0, dx)
            cubic_slopes(y - y0, dy)
            cubic_taps(p, &ax, &ay, x0, y0, &t)
            # PyTorch leaves the padding out of bicubic's derivative.
            xm = <real>ax.scale
            ym = <real>ay.scale
        if tangent != NULL:
            ux = xm * tangent[2 * at]
            uy = ym * tangent[2 * at + 1]
        gx = 0
        gy = 0
        for c in range(p.c):
            img = image + (b * p.c + c) * plane
            if grads != NULL:
                gc = grads[(b * p.c + c) * per + q]
            if p.mode == BILINEAR:
                nw = read(img, t.off[0])
                ne = read(img, t.off[1])
                sw = read(img, t.off[2])
                se = read(img, t.off[3])
                # frac: n, s, w, e
                sx = mul_add(se - sw, frac[0], (ne - nw) * frac[1])
                sy = mul_add(se - ne, frac[2], (sw - nw) * frac[3])
                if grads != NULL:
                    gx = mul_add(sx, gc, gx)
                    gy = mul_add(sy, gc, gy)
                else:
                    out[(b * p.c + c) * per + q] = mul_add(sy, uy, sx * ux)
            elif grads != NULL:
                for i in range(4):
                    for j in range(4):
                        vg = read(img, t.off[4 * i + j]) * gc
                        gx = mul_add(-(vg * dx[i]), cy[j], gx)
                        gy = mul_add(-(vg * dy[j]), cx[i], gy)
            else:
                sx = 0
                sy = 0
                for i in range(4):
                    for j in range(4):
                        v = read(img, t.off[4 * i + j])
                        sx = mul_add(-(v * dx[i]), cy[j], sx)
                        sy = mul_add(-(v * dy[j]), cx[i], sy)
                out[(b * p.c + c) * per + q] = mul_add(sy, uy, sx * ux)
        if grads != NULL:
            out[2 * at] = gx * xm
            out[2 * at + 1] = gy * ym


# --------------------------------------------------------------------------
# Image gradient, one batch at a time: first each point's taps (offsets and
# the weights that do not depend on the channel), a task per row of points;
# then the scatter, a task per (channel, band of rows).

cdef void taps_block(const Plan* p, const real* grid, int64_t* offs, real* wts,
                     Py_ssize_t task) noexcept nogil:
    """The taps of block `task` of the chunk's points, stored at each
    point's place in the chunk."""
    cdef Axis ax = make_axis(<real>0, p.w, p.padding, p.aligned)
    cdef Axis ay = make_axis(<real>0, p.h, p.padding, p.aligned)
    cdef int64_t per = p.ho * p.wo, q, r
    cdef int64_t first = p.q_start + task * TAPS_BLOCK
    cdef int64_t last = min(first + TAPS_BLOCK, p.q_end)
    cdef const real* g
    cdef real x, y, x0, y0, xm, ym
    cdef real frac[4]
    cdef Taps t
    cdef int k
    for q in range(first, last):
        r = q - p.q_start
        g = grid + 2 * (p.batch * per + q)
        if p.mode == NEAREST:
            nearest_tap(p, &ax, &ay, g[0], g[1], &t)
        elif p.mode == BILINEAR:
            x = locate_grad(&ax, g[0], &xm)
            y = locate_grad(&ay, g[1], &ym)
            bilinear_taps(p, x, y, True, &t, wts + 4 * r, frac)
        else:
            x = unnormalize(&ax, g[0])
            y = unnormalize(&ay, g[1])
            x0 = floor(x)
            y0 = floor(y)
            # cx then cy: tap (i, j) adds (g * cx_i) * cy_j.
            cubic_coefficients(x - x0, wts + 8 * r)
            cubic_coefficients(y - y0, wts + 8 * r + 4)
            cubic_taps(p, &ax, &ay, x0, y0, &t)
        for k in range(p.taps):
            offs[p.taps * r + k] = t.off[k]


cdef void scatter_band(const Plan* p, const real* grads, real* out,
                       const int64_t* offs, const real* wts,
                       Py_ssize_t task) noexcept nogil:
    """Channel ``task // bands`` of batch ``p.batch``, the rows of band
    ``task % bands``: the additions of the chunk's points to them in
    PyTorch's order (vectors of points; per vector, per tap, lane after
    lane; a chunk starts at a vector's start)."""
    cdef int64_t band = task % p.bands, c = task // p.bands
    cdef int64_t bc = p.batch * p.c + c
    cdef int64_t plane = p.h * p.w, per = p.ho * p.wo
    cdef int64_t lo = (p.h * band) // p.bands * p.w
    cdef int64_t hi = (p.h * (band + 1)) // p.bands * p.w
    cdef int64_t lanes = 4 if real is double else 8
    cdef int64_t start = 0, end, q, off, count = p.q_end - p.q_start
    cdef int k, taps = p.taps
    cdef const real* gr = grads + bc * per + p.q_start
    cdef real* dst = out + bc * plane
    cdef real gc
    while start < count:
        end = min(start + lanes, count)
        for k in range(taps):
            for q in range(start, end):
                off = offs[taps * q + k]
                if off < lo or off >= hi:
                    continue
                gc = gr[q]
                if p.mode == NEAREST:
                    dst[off] += gc
                elif p.mode == BILINEAR:
                    dst[off] += wts[4 * q + k] * gc
                else:
                    dst[off] += (gc * wts[8 * q + k // 4]) * wts[8 * q + 4 + k % 4]
        start = end


# --------------------------------------------------------------------------
# Tasks and entry points

cdef void _forward_task(void* ctx, Py_ssize_t task, int thread) noexcept nogil:
    cdef const Plan* p = <const Plan*>ctx
    if p.wide:
        forward_row(p, <const double*>p.image, <const double*>p.grid,
                    <double*>p.out, task)
    else:
        forward_row(p, <const float*>p.image, <const float*>p.grid,
                    <float*>p.out, task)


cdef void _slopes_task(void* ctx, Py_ssize_t task, int thread) noexcept nogil:
    cdef const Plan* p = <const Plan*>ctx
    if p.wide:
        slopes_row(p, <const double*>p.image, <const double*>p.grid,
                   <const double*>p.grads, <const double*>p.tangent,
                   <double*>p.out, task)
    else:
        slopes_row(p, <const float*>p.image, <const float*>p.grid,
                   <const float*>p.grads, <const float*>p.tangent,
                   <float*>p.out, task)


cdef void _taps_task(void* ctx, Py_ssize_t task, int thread) noexcept nogil:
    cdef const Plan* p = <const Plan*>ctx
    if p.wide:
        taps_block(p, <const double*>p.grid, p.offs, <double*>p.wts, task)
    else:
        taps_block(p, <const float*>p.grid, p.offs, <float*>p.wts, task)


cdef void _scatter_task(void* ctx, Py_ssize_t task, int thread) noexcept nogil:
    cdef const Plan* p = <const Plan*>ctx
    if p.wide:
        scatter_band(p, <const double*>p.grads, <double*>p.out, p.offs,
                     <const double*>p.wts, task)
    else:
        scatter_band(p, <const float*>p.grads, <float*>p.out, p.offs,
                     <const float*>p.wts, task)


cdef inline const void* _data(a):
    return <const void*><uintptr_t>a.ctypes.data if a is not None else NULL


cdef Plan _plan(image_shape, grid, int mode, int padding, bint aligned, out):
    cdef Plan p
    p.n, p.c, p.h, p.w = [int(v) for v in image_shape]
    p.ho = grid.shape[1]
    p.wo = grid.shape[2]
    p.mode = mode
    p.padding = padding
    p.aligned = aligned
    p.bands = 1
    p.batch = 0
    p.q_start = p.q_end = 0
    p.taps = _taps(mode)
    p.offs = NULL
    p.wts = NULL
    p.wide = grid.dtype.itemsize == 8
    p.grid = _data(grid)
    p.out = <void*>_data(out)
    p.image = p.grads = p.tangent = NULL
    return p


cdef int _taps(int mode):
    return 1 if mode == NEAREST else (4 if mode == BILINEAR else 16)


def forward(image, grid, out, int mode, int padding, bint aligned,
            int num_threads, bint flush):
    """Sample `image` [N, C, H, W] at `grid` [N, Ho, Wo, 2] into `out`
    [N, C, Ho, Wo], all C-contiguous of one arithmetic type."""
    cdef Plan p = _plan(image.shape, grid, mode, padding, aligned, out)
    cdef int nthreads = resolve_threads(num_threads)
    cdef Py_ssize_t tasks = p.n * p.ho
    cdef Py_ssize_t work = tasks * p.wo * max(p.c, 1) * _taps(mode)
    p.image = _data(image)
    if p.n * p.c * p.ho * p.wo == 0:
        return
    with nogil:
        run_tasks(_forward_task, &p, tasks, nthreads, work, flush,
                  SCHEDULE_DYNAMIC)


def slopes(image, grid, grads, tangent, out, int mode, int padding,
           bint aligned, int num_threads, bint flush):
    """The grid gradient (`grads` [N, C, Ho, Wo], `tangent` None; out
    [N, Ho, Wo, 2]) or the grid JVP (`tangent` [N, Ho, Wo, 2], `grads`
    None; out [N, C, Ho, Wo])."""
    cdef Plan p = _plan(image.shape, grid, mode, padding, aligned, out)
    cdef int nthreads = resolve_threads(num_threads)
    cdef Py_ssize_t tasks = p.n * p.ho
    cdef Py_ssize_t work = tasks * p.wo * max(p.c, 1) * _taps(mode)
    p.image = _data(image)
    p.grads = _data(grads)
    p.tangent = _data(tangent)
    if p.n * p.ho * p.wo == 0 or (tangent is not None and p.c == 0):
        return
    with nogil:
        run_tasks(_slopes_task, &p, tasks, nthreads, work, flush,
                  SCHEDULE_DYNAMIC)


def grad_image(grads, grid, out, int mode, int padding, bint aligned,
               int num_threads, bint flush):
    """Add the image gradient of `grads` [N, C, Ho, Wo] into `out` [N, C,
    H, W] (zeroed by the caller)."""
    cdef Plan p = _plan(out.shape, grid, mode, padding, aligned, out)
    cdef int nthreads = resolve_threads(num_threads)
    cdef Py_ssize_t per = p.ho * p.wo, b, start, size
    p.grads = _data(grads)
    if p.n * p.c * p.h * p.w * per == 0:
        return
    # Fewer channels than threads: cut each plane into bands of rows, as
    # many as make a task per thread (a band of at least one row).
    if p.c < nthreads:
        p.bands = min((nthreads + p.c - 1) // p.c, p.h)
    # The taps of one chunk of points at a time: a bounded table (4 MiB of
    # offsets for bicubic), the chunks in order.
    size = min(per, CHUNK)
    offs = np.empty(size * p.taps, np.int64)
    wts = np.empty(size * 8, grid.dtype)
    p.offs = <int64_t*><uintptr_t>offs.ctypes.data
    p.wts = <void*><uintptr_t>wts.ctypes.data
    for b in range(p.n):
        p.batch = b
        for start in range(0, per, CHUNK):
            p.q_start = start
            p.q_end = min(start + CHUNK, per)
            size = p.q_end - p.q_start
            with nogil:
                run_tasks(_taps_task, &p, (size + TAPS_BLOCK - 1) // TAPS_BLOCK,
                          nthreads, size * 16, flush, SCHEDULE_DYNAMIC)
                run_tasks(_scatter_task, &p, p.c * p.bands, nthreads,
                          p.c * size * p.taps, flush, SCHEDULE_DYNAMIC)
