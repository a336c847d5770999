# cython: language_level=3
"""grid_sample's kernels (private): the forward op, the image gradient, the
grid gradient and the grid JVP, in float32 or float64 arithmetic.

Trusts its arguments: the C-level API's gate
(cropgrad/_capi/grid_sample.pyx) has checked shapes, options and finite
grids, and passes C-contiguous arrays of the arithmetic type, the image,
grads and samples NCHW or NHWC (the plan's strides); kernels.pxd declares
the runs it calls.  The arithmetic is
docs/semantics.md's ("Grid sampling"), the same as the NumPy reference's
(cropgrad/_reference/grid_sample/), every fused multiply-add an explicit
``fma`` (the build does not contract).

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

Float32 sampling (every mode and padding, both layouts) has an AVX2 + FMA
clone (simd.pxd), eight points a vector with the portable loops'
operations lane for lane: the forward op and the grid gradient (bilinear,
bicubic) in spans of points; the image gradient in one run of tasks that
zero their own pixels and work out their own points' taps (a batch each,
or a band of its rows when batches are fewer than threads).  NHWC's goes
along each point's channels, eight at a time, where the channels are
contiguous (src/cg_grid_nhwc.h).  An NCHW problem of many small batches
of eight channels or more runs a batch a task through the NHWC clone, in a
thread's scratch (`stage`), where that is faster.
"""

from libc.stdint cimport int32_t, int64_t
from libc.stdlib cimport free, malloc
from libc.string cimport memcpy, memset, strcmp

from cropgrad._kernels.grid_sample.points cimport (
    BICUBIC,
    BILINEAR,
    NEAREST,
    Axis,
    Plan,
    Taps,
    bilinear_taps,
    cubic_point,
    locate,
    locate_grad,
    make_axis,
    mul_add,
    nearest_tap,
    read,
    real,
)
from cropgrad._kernels.cdefs cimport cg_transpose32
from cropgrad._kernels.grid_sample.simd cimport (
    gs_axes,
    gs_forward_bz8,
    gs_forward_cubic_bz8,
    gs_forward_nhwc8,
    gs_grad_grid_bz8,
    gs_grad_grid_cubic_bz8,
    gs_grad_grid_nhwc8,
    gs_scatter_bz8,
    gs_scatter_cubic_bz8,
    gs_scatter_nhwc8,
    gs_simd_supported,
    points_fn,
    slopes_fn,
)
from cropgrad._runtime.parallel cimport (
    SCHEDULE_DYNAMIC,
    run_tasks,
    team_size,
)
from cropgrad._runtime.simd cimport chosen_target

# The SIMD clone runs where the CPU has AVX2 and FMA and the process's SIMD
# target (CROPGRAD_SIMD) is AVX2 or wider; `use_simd` switches it off for the
# tests, which compare both paths.
cdef bint _simd_ok = gs_simd_supported() and (
    strcmp(chosen_target(), b"avx2") == 0 or strcmp(chosen_target(), b"avx512") == 0)
cdef bint _simd = _simd_ok


def nhwc_in_place(int64_t channels, bint wide, int mode):
    """Whether an NHWC call of `channels` channels (`wide`: float64) in
    `mode` (its code) runs fastest on the NHWC arrays themselves.  The SIMD
    clone reads fewer than eight channels faster from NCHW planes in
    bilinear and bicubic mode, a smooth grid's neighbouring pixels eight at
    a time (a spatial transformer's 3 channels: 1.15 to 1.55 times faster,
    the layout changes included; nearest's one tap is faster in place):
    such a call changes layout around the NCHW kernels (the bits are the
    same)."""
    return not (_simd and not wide and channels < 8 and mode != NEAREST)


def use_simd(bint on):
    """Run the SIMD clone (when `on` and this CPU has it) or the portable
    loops; returns the previous setting."""
    global _simd
    cdef bint before = _simd
    _simd = on and _simd_ok
    return before


cdef inline bint simd_takes(const Plan* p) noexcept nogil:
    """Whether the float32 clone takes this problem: an image of fewer than
    2**31 - 1 pixels (its offsets are 32-bit).  It has the forward op in
    every mode, the image gradient in every mode and the grid gradient of
    bilinear and bicubic sampling."""
    return _simd and not p.wide and p.h * p.w < 2147483647


cdef inline gs_axes simd_axes(const Plan* p) noexcept nogil:
    """The clone's axes: the portable loops' constants (make_axis)."""
    cdef Axis ax = make_axis(<float>0, p.w, p.padding, p.aligned)
    cdef Axis ay = make_axis(<float>0, p.h, p.padding, p.aligned)
    cdef gs_axes a
    a.nearest = p.mode == NEAREST
    a.cubic = p.mode == BICUBIC
    a.scale[0] = <float>ax.scale
    a.scale[1] = <float>ay.scale
    a.top[0] = <float>ax.top
    a.top[1] = <float>ay.top
    a.twice[0] = <float>ax.twice
    a.twice[1] = <float>ay.twice
    a.empty[0] = ax.empty
    a.empty[1] = ay.empty
    a.low = <float>ax.low
    a.aligned = p.aligned
    a.padding = p.padding
    return a

cdef enum:
    # The image gradient works out the taps of CHUNK points at a time (a
    # multiple of every vector's lanes, so that no vector is split), in
    # tasks of TAPS_BLOCK points.
    CHUNK = 1 << 15
    TAPS_BLOCK = 256
    # The SIMD forward op's and grid gradient's tasks: spans of SPAN points.
    SPAN = 256


# --------------------------------------------------------------------------
# Forward op, grid gradient, JVP: one task per row of output points.

cdef void forward_row(const Plan* p, const real* image, const real* grid,
                      real* out, Py_ssize_t task) noexcept nogil:
    cdef Axis ax = make_axis(<real>0, p.w, p.padding, p.aligned)
    cdef Axis ay = make_axis(<real>0, p.h, p.padding, p.aligned)
    cdef int64_t b = task // p.ho, q, c, plane = p.h * p.w, per = p.ho * p.wo
    cdef int64_t first = (task % p.ho) * p.wo, pix = p.pix
    cdef const real* g
    cdef const real* img
    cdef real* dst = out + b * p.c * per
    cdef real x, y, acc
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
            cubic_point(p, &ax, &ay, g[0], g[1], cx, cy, NULL, NULL, &t)
        for c in range(p.c):
            img = image + b * p.c * plane + c * p.chan
            if p.mode == NEAREST:
                acc = read(img, t.off[0], pix)
            elif p.mode == BILINEAR:
                acc = mul_add(read(img, t.off[3], pix), wt[3], mul_add(
                    read(img, t.off[2], pix), wt[2], mul_add(
                        read(img, t.off[1], pix), wt[1],
                        read(img, t.off[0], pix) * wt[0])))
            else:
                for j in range(4):
                    # Only the first addition fused, as PyTorch's build does.
                    rows[j] = (
                        (mul_add(cx[0], read(img, t.off[j], pix),
                                 cx[1] * read(img, t.off[4 + j], pix))
                         + cx[2] * read(img, t.off[8 + j], pix))
                        + cx[3] * read(img, t.off[12 + j], pix)
                    )
                acc = mul_add(cy[3], rows[3], mul_add(cy[2], rows[2], mul_add(
                    cy[1], rows[1], cy[0] * rows[0])))
            dst[c * p.sample_chan + q * p.point] = acc


cdef void slopes_row(const Plan* p, const real* image, const real* grid,
                     const real* grads, const real* tangent, real* out,
                     Py_ssize_t task) noexcept nogil:
    """The grid gradient (`grads` given: out [N, Ho, Wo, 2]) or the JVP
    (`tangent` given: out [N, C, Ho, Wo]) of a row of points, from the same
    per-channel slopes of the sample in x and in y (nearest's: zeros)."""
    cdef Axis ax = make_axis(<real>0, p.w, p.padding, p.aligned)
    cdef Axis ay = make_axis(<real>0, p.h, p.padding, p.aligned)
    cdef int64_t b = task // p.ho, q, c, plane = p.h * p.w, per = p.ho * p.wo
    cdef int64_t first = (task % p.ho) * p.wo, at, pix = p.pix, sample
    cdef const real* g
    cdef const real* img
    cdef real x, y, gx, gy, sx, sy, vg, v, gc = 0, ux = 0, uy = 0
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
    if p.mode == NEAREST:
        # Piecewise constant: every slope is +0.
        if grads != NULL:
            memset(out + 2 * (b * per + first), 0, 2 * p.wo * sizeof(real))
        elif p.nhwc:
            memset(out + (b * per + first) * p.c, 0, p.wo * p.c * sizeof(real))
        else:
            for c in range(p.c):
                memset(out + (b * p.c + c) * per + first, 0, p.wo * sizeof(real))
        return
    for q in range(first, first + p.wo):
        at = b * per + q
        g = grid + 2 * at
        if p.mode == BILINEAR:
            x = locate_grad(&ax, g[0], &xm)
            y = locate_grad(&ay, g[1], &ym)
            bilinear_taps(p, x, y, True, &t, wt, frac)
        else:
            cubic_point(p, &ax, &ay, g[0], g[1], cx, cy, dx, dy, &t)
            # PyTorch leaves the padding out of bicubic's derivative.
            xm = <real>ax.scale
            ym = <real>ay.scale
        if tangent != NULL:
            ux = xm * tangent[2 * at]
            uy = ym * tangent[2 * at + 1]
        gx = 0
        gy = 0
        for c in range(p.c):
            img = image + b * p.c * plane + c * p.chan
            sample = b * p.c * per + c * p.sample_chan + q * p.point
            if grads != NULL:
                gc = grads[sample]
            if p.mode == BILINEAR:
                nw = read(img, t.off[0], pix)
                ne = read(img, t.off[1], pix)
                sw = read(img, t.off[2], pix)
                se = read(img, t.off[3], pix)
                # frac: n, s, w, e
                sx = mul_add(se - sw, frac[0], (ne - nw) * frac[1])
                sy = mul_add(se - ne, frac[2], (sw - nw) * frac[3])
                if grads != NULL:
                    gx = mul_add(sx, gc, gx)
                    gy = mul_add(sy, gc, gy)
                else:
                    out[sample] = mul_add(sy, uy, sx * ux)
            elif grads != NULL:
                for i in range(4):
                    for j in range(4):
                        vg = read(img, t.off[4 * i + j], pix) * gc
                        gx = mul_add(-(vg * dx[i]), cy[j], gx)
                        gy = mul_add(-(vg * dy[j]), cx[i], gy)
            else:
                sx = 0
                sy = 0
                for i in range(4):
                    for j in range(4):
                        v = read(img, t.off[4 * i + j], pix)
                        sx = mul_add(-(v * dx[i]), cy[j], sx)
                        sy = mul_add(-(v * dy[j]), cx[i], sy)
                out[sample] = mul_add(sy, uy, sx * ux)
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
    cdef real x, y, xm, ym
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
            # cx then cy: tap (i, j) adds (g * cx_i) * cy_j.
            cubic_point(p, &ax, &ay, g[0], g[1], wts + 8 * r, wts + 8 * r + 4,
                        NULL, NULL, &t)
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
    cdef int64_t plane = p.h * p.w, per = p.ho * p.wo
    cdef int64_t lo = (p.h * band) // p.bands * p.w
    cdef int64_t hi = (p.h * (band + 1)) // p.bands * p.w
    cdef int64_t lanes = 4 if real is double else 8
    cdef int64_t start = 0, end, q, off, count = p.q_end - p.q_start
    cdef int k, taps = p.taps
    cdef int64_t pix = p.pix, point = p.point
    cdef const real* gr = (grads + p.batch * p.c * per + c * p.sample_chan
                           + p.q_start * point)
    cdef real* dst = out + p.batch * p.c * plane + c * p.chan
    cdef real gc
    cdef int mode = p.mode
    if mode == BILINEAR:
        # The common case on its own: the mode is not read again for every
        # addition (a store through `dst` may alias the plan, so the
        # compiler reloads what is read through a pointer).
        while start < count:
            end = min(start + lanes, count)
            for k in range(4):
                for q in range(start, end):
                    off = offs[4 * q + k]
                    if off < lo or off >= hi:
                        continue
                    dst[off * pix] += wts[4 * q + k] * gr[q * point]
            start = end
        return
    while start < count:
        end = min(start + lanes, count)
        for k in range(taps):
            for q in range(start, end):
                off = offs[taps * q + k]
                if off < lo or off >= hi:
                    continue
                gc = gr[q * point]
                if mode == NEAREST:
                    dst[off * pix] += gc
                else:
                    dst[off * pix] += ((gc * wts[8 * q + k // 4])
                                       * wts[8 * q + 4 + k % 4])
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


cdef void _points8_task(void* ctx, Py_ssize_t task, int thread) noexcept nogil:
    """The SIMD forward op or grid gradient (`grads` given) of span
    ``task`` of SPAN points of a batch (spans may cross rows: rows of a few
    points would leave most of each vector empty)."""
    cdef const Plan* p = <const Plan*>ctx
    cdef gs_axes axes = simd_axes(p)
    cdef int64_t per = p.ho * p.wo, spans = (per + SPAN - 1) // SPAN
    cdef int64_t b = task // spans, first = (task % spans) * SPAN
    cdef int64_t count = min(SPAN, per - first)
    # The clone's functions for the layout and mode.
    cdef points_fn forward = gs_forward_bz8
    cdef slopes_fn grad_grid = gs_grad_grid_bz8
    if p.nhwc:
        forward, grad_grid = gs_forward_nhwc8, gs_grad_grid_nhwc8
    elif p.mode == BICUBIC:
        forward, grad_grid = gs_forward_cubic_bz8, gs_grad_grid_cubic_bz8
    if p.grads == NULL:
        forward(<const float*>p.image, <const float*>p.grid, <float*>p.out, p.c,
                <int32_t>p.h, <int32_t>p.w, per, b, first, count, &axes)
    else:
        grad_grid(<const float*>p.image, <const float*>p.grid,
                  <const float*>p.grads, <float*>p.out, p.c, <int32_t>p.h,
                  <int32_t>p.w, per, b, first, count, &axes)


cdef void _scatter8_task(void* ctx, Py_ssize_t task, int thread) noexcept nogil:
    """The SIMD image gradient's task: batch, group of channels (``taps``
    channels each) and band of rows ``task`` (bands innermost)."""
    cdef const Plan* p = <const Plan*>ctx
    cdef gs_axes axes = simd_axes(p)
    cdef int64_t groups = (p.c + p.taps - 1) // p.taps
    cdef int64_t band = task % p.bands, group = (task // p.bands) % groups
    cdef int64_t b = task // (p.bands * groups)
    cdef int64_t c0 = group * p.taps, c1 = min(c0 + p.taps, p.c)
    cdef int64_t lo = (p.h * band) // p.bands * p.w
    cdef int64_t hi = (p.h * (band + 1)) // p.bands * p.w
    cdef int64_t ch, plane = p.h * p.w
    # The task's pixels are its own: it zeroes them (on its thread, in
    # parallel) before it adds to them.
    if p.nhwc:
        # Every channel of its rows (a task has them all, `taps` = `c`).
        memset(<float*>p.out + (b * plane + lo) * p.c, 0,
               <size_t>((hi - lo) * p.c) * sizeof(float))
        gs_scatter_nhwc8(<const float*>p.grads, <const float*>p.grid,
                         <float*>p.out, p.c, <int32_t>p.h, <int32_t>p.w,
                         p.ho * p.wo, b, lo, hi, &axes)
        return
    for ch in range(c0, c1):
        memset(<float*>p.out + (b * p.c + ch) * plane + lo, 0,
               <size_t>(hi - lo) * sizeof(float))
    if p.mode == BICUBIC:
        gs_scatter_cubic_bz8(<const float*>p.grads, <const float*>p.grid,
                             <float*>p.out, p.c, c0, c1, <int32_t>p.h,
                             <int32_t>p.w, p.ho * p.wo, b, lo, hi, &axes)
    else:
        gs_scatter_bz8(<const float*>p.grads, <const float*>p.grid,
                       <float*>p.out, p.c, c0, c1, <int32_t>p.h, <int32_t>p.w,
                       p.ho * p.wo, b, lo, hi, &axes)


# NCHW problems of many small batches, a batch a task through the NHWC clone.
include "staged.pxi"


# --------------------------------------------------------------------------
# The runs (kernels.pxd), without the GIL, on a problem the C-level API's
# gate has checked: the SIMD clone's tasks where it takes the problem, the
# portable ones otherwise; the image gradient's scratch from malloc.

cdef void plan(Plan* p, int64_t n, int64_t c, int64_t h, int64_t w, int64_t ho,
               int64_t wo, int mode, int padding, bint aligned, bint wide,
               bint nhwc) noexcept nogil:
    p.n = n
    p.c = c
    p.h = h
    p.w = w
    p.ho = ho
    p.wo = wo
    p.mode = mode
    p.padding = padding
    p.aligned = aligned
    p.wide = wide
    p.nhwc = nhwc
    p.pix = c if nhwc else 1
    p.chan = 1 if nhwc else h * w
    p.point = c if nhwc else 1
    p.sample_chan = 1 if nhwc else ho * wo
    p.bands = 1
    p.batch = 0
    p.q_start = p.q_end = 0
    p.taps = 1 if mode == NEAREST else (4 if mode == BILINEAR else 16)
    p.offs = NULL
    p.wts = NULL


cdef inline Py_ssize_t spans(const Plan* p) noexcept nogil:
    """The SIMD forward op's and grid gradient's tasks: SPAN points each."""
    return p.n * ((p.ho * p.wo + SPAN - 1) // SPAN)


cdef void forward_run(Plan* p, int threads, bint flush) noexcept nogil:
    cdef Py_ssize_t tasks = p.n * p.ho
    cdef Py_ssize_t work = tasks * p.wo * max(p.c, 1) * p.taps
    cdef int team
    if p.n * p.c * p.ho * p.wo == 0:
        return
    team = stage(p, threads, STAGE_CHANNELS, STAGE_PIXELS,
                 STAGE_IMAGE_FLOATS)
    if team:
        staged_run(p, team, work, flush)
    elif simd_takes(p):
        run_tasks(_points8_task, p, spans(p), threads, work, flush,
                  SCHEDULE_DYNAMIC)
    else:
        run_tasks(_forward_task, p, tasks, threads, work, flush,
                  SCHEDULE_DYNAMIC)


cdef void slopes_run(Plan* p, int threads, bint flush) noexcept nogil:
    cdef Py_ssize_t tasks = p.n * p.ho
    cdef Py_ssize_t work = tasks * p.wo * max(p.c, 1) * p.taps
    cdef int team = 0
    if p.n * p.ho * p.wo == 0 or (p.tangent != NULL and p.c == 0):
        return
    # The clone has the grid gradient (grads given), not the JVP; nearest's
    # zeros are the portable rows'.
    if p.grads != NULL and p.mode != NEAREST:
        team = stage(p, threads, STAGE_GRID_CHANNELS, STAGE_PIXELS,
                     STAGE_IMAGE_FLOATS)
    if team:
        staged_run(p, team, work, flush)
    elif p.grads != NULL and p.mode != NEAREST and simd_takes(p):
        run_tasks(_points8_task, p, spans(p), threads, work, flush,
                  SCHEDULE_DYNAMIC)
    else:
        run_tasks(_slopes_task, p, tasks, threads, work, flush,
                  SCHEDULE_DYNAMIC)


cdef int grad_image_run(Plan* p, int threads, bint flush,
                        size_t* failed) noexcept nogil:
    cdef Py_ssize_t per = p.ho * p.wo, b, start, size
    cdef size_t itemsize = 8 if p.wide else 4
    cdef size_t offs_bytes, wts_bytes
    cdef int team = 0
    if p.n * p.c * p.h * p.w * per > 0 and p.mode != NEAREST:
        team = stage(p, threads, STAGE_CHANNELS, STAGE_SCATTER_PIXELS, 0)
    if team:
        staged_run(p, team, p.n * p.c * per * 4, flush)
        return 0
    if p.n * p.c * p.h * p.w * per > 0 and simd_takes(p):
        # One run: a task per batch and band of rows, every channel of it
        # (the field `taps` holds the channels of a task), bands only where
        # the batches are fewer than the threads: each task zeroes its
        # pixels, then works out its batch's corners itself, once for all
        # the channels.
        p.taps = p.c
        if p.n < threads:
            p.bands = min((threads + p.n - 1) // p.n, p.h)
        run_tasks(_scatter8_task, p, p.n * p.bands, threads,
                  p.n * p.c * per * 4, flush, SCHEDULE_DYNAMIC)
        return 0
    if p.n * p.c * p.h * p.w > 0:
        memset(p.out, 0, <size_t>(p.n * p.c * p.h * p.w) * itemsize)
    if p.n * p.c * p.h * p.w * per == 0:
        return 0
    # Fewer channels than threads: cut each plane into bands of rows, as
    # many as make a task per thread (a band of at least one row).
    if p.c < threads:
        p.bands = min((threads + p.c - 1) // p.c, p.h)
    # The taps of one chunk of points at a time: a bounded table (4 MiB of
    # offsets for bicubic), the chunks in order.
    size = min(per, CHUNK)
    offs_bytes = <size_t>(size * p.taps) * sizeof(int64_t)
    wts_bytes = <size_t>(size * 8) * itemsize
    p.offs = <int64_t*>malloc(offs_bytes)
    p.wts = malloc(wts_bytes)
    if p.offs == NULL or p.wts == NULL:
        free(p.offs)
        free(p.wts)
        p.offs = NULL
        p.wts = NULL
        failed[0] = offs_bytes + wts_bytes
        return 1
    for b in range(p.n):
        p.batch = b
        start = 0
        while start < per:
            p.q_start = start
            p.q_end = min(start + CHUNK, per)
            size = p.q_end - p.q_start
            run_tasks(_taps_task, p, (size + TAPS_BLOCK - 1) // TAPS_BLOCK,
                      threads, size * 16, flush, SCHEDULE_DYNAMIC)
            run_tasks(_scatter_task, p, p.c * p.bands, threads,
                      p.c * size * p.taps, flush, SCHEDULE_DYNAMIC)
            start += CHUNK
    free(p.offs)
    free(p.wts)
    p.offs = NULL
    p.wts = NULL
    return 0
