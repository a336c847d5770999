# cython: language_level=3
"""RoIAlign's boxes gradient (private kernel).

Trusts its arguments: the gate (cropgrad/_capi) checks them first.  The
derivative of the sampling with respect to ``x1, y1, x2, y2`` through the
sample coordinates (docs/semantics.md, "The RoIAlign boxes derivatives"):
per inside sample and channel, the image's slope along an axis times the
incoming gradient, times how fast the sample moves with each edge.  A
task owns whole boxes, so each box's four sums are one thread's.

Each channel has its own four sums over the box's samples, in the serial
order (bin row, bin column, sample row, sample column); the channels'
sums are then added in eight lanes (channel ``c`` in lane ``c % 8``, each
lane from channel to channel), combined as ``((l0 + l1) + (l2 + l3)) +
((l4 + l5) + (l6 + l7))`` and divided by the bin's count: one fixed order,
whatever the thread count, in which NCHW runs a channel plane at a time
and NHWC every channel of a sample side by side.
"""

from libc.stdint cimport int64_t
from libc.stdlib cimport free, malloc

from cropgrad._runtime.parallel cimport SCHEDULE_DYNAMIC, run_tasks

from ..aligned cimport align64, round64
from ..pixels cimport load
from ..types cimport image_t, layout_t, nchw_t, nhwc_t

from .plan cimport (
    LANES,
    TAP_BYTES,
    BoxTaps,
    RoiPlan,
    RoiProblem,
    box_taps,
    col_tap,
    lane_total,
    row_tap,
)
from .sampling cimport RoiTap, real_t

include "../image_dtypes.pxi"


cdef inline real_t pixel(const image_t* img, Py_ssize_t i, int half,
                         real_t* kind) noexcept nogil:
    """Pixel `i` in the arithmetic type (as the forward op reads it)."""
    if image_t is double:
        return <real_t>img[i]
    else:
        return <real_t>load(img, i, half)


cdef inline void _slope_terms(const image_t* q, int half, Py_ssize_t c_stride,
                              Py_ssize_t a1, Py_ssize_t b1, Py_ssize_t a2,
                              Py_ssize_t b2, real_t w_rest, real_t w_lerp,
                              const real_t* g, Py_ssize_t g_stride, Py_ssize_t n,
                              real_t f_lo, real_t f_hi, bint held,
                              real_t* s_lo, real_t* s_hi,
                              real_t* kind) noexcept nogil:
    """One inside sample's terms along one axis, for `n` channels (stride
    `c_stride` in the image, `g_stride` in grads): the slope ``(w_rest *
    (v[b1] - v[a1])) + (w_lerp * (v[b2] - v[a2]))`` times the gradient,
    times ``f_lo`` added to ``s_lo[c]`` and, unless the size is `held`,
    times ``f_hi`` to ``s_hi[c]``."""
    cdef Py_ssize_t c
    cdef const image_t* qc
    cdef real_t d
    for c in range(n):
        qc = q + c * c_stride
        d = ((w_rest * (pixel(qc, b1, half, kind) - pixel(qc, a1, half, kind)))
             + (w_lerp * (pixel(qc, b2, half, kind) - pixel(qc, a2, half, kind)))
             ) * g[c * g_stride]
        s_lo[c] = s_lo[c] + d * f_lo
        if not held:
            s_hi[c] = s_hi[c] + d * f_hi


cdef inline void _sample(const image_t* q, int half, Py_ssize_t c_stride,
                         Py_ssize_t ps, const RoiTap* ty, const RoiTap* tx,
                         Py_ssize_t W, const real_t* g, Py_ssize_t g_stride,
                         Py_ssize_t n, bint rows_held, bint cols_held,
                         real_t** sums, real_t* kind) noexcept nogil:
    """One inside sample's terms for `n` channels, added to their sums of
    ``x1, y1, x2, y2`` (``sums[j][c]``).  An axis a clamp holds has no
    slope: its terms are left out, not added as zeros."""
    cdef Py_ssize_t o1 = (ty.low * W + tx.low) * ps
    cdef Py_ssize_t o2 = (ty.low * W + tx.high) * ps
    cdef Py_ssize_t o3 = (ty.high * W + tx.low) * ps
    cdef Py_ssize_t o4 = (ty.high * W + tx.high) * ps
    if not ty.held:
        # slope_y = (h_x (v3 - v1)) + (l_x (v4 - v2))
        _slope_terms(q, half, c_stride, o1, o3, o2, o4, <real_t>tx.rest,
                     <real_t>tx.lerp, g, g_stride, n, <real_t>ty.f_lo,
                     <real_t>ty.f_hi, rows_held, sums[1], sums[3], kind)
    if not tx.held:
        # slope_x = (h_y (v2 - v1)) + (l_y (v4 - v3))
        _slope_terms(q, half, c_stride, o1, o2, o3, o4, <real_t>ty.rest,
                     <real_t>ty.lerp, g, g_stride, n, <real_t>tx.f_lo,
                     <real_t>tx.f_hi, cols_held, sums[0], sums[2], kind)


cdef void _box(const RoiPlan* p, const image_t* image, int half, Py_ssize_t k,
               int thread, real_t* kind, layout_t* layout) noexcept nogil:
    """The four sums of box `k` (its gradient, ``[x1, y1, x2, y2]``): each
    channel's first, then the channels' in lanes."""
    cdef const RoiProblem* g = p.g
    cdef Py_ssize_t C = g.channels, H = g.height, W = g.width
    cdef Py_ssize_t ph, pw, iy, ix, c, j, L
    cdef char* scratch = p.scratch + <size_t>thread * p.scratch_each
    # Each channel's four sums: sums[j][c] for x1, y1, x2, y2.
    cdef real_t* sums[4]
    cdef real_t lanes[LANES]
    cdef BoxTaps b
    cdef RoiTap ys, xs
    cdef const RoiTap* ty
    cdef const RoiTap* tx
    cdef real_t count
    cdef const image_t* img = image + p.box_ind[k] * H * W * C
    cdef const real_t* grads = <const real_t*>p.grads
    cdef real_t* out = <real_t*>p.out
    cdef real_t* plane[4]
    for j in range(4):
        sums[j] = <real_t*>(scratch + TAP_BYTES) + j * C
        for c in range(C):
            sums[j][c] = 0
    box_taps(p, k, <RoiTap*>scratch, &b, kind)
    count = <real_t>b.count
    if layout_t is nchw_t:
        # A channel plane at a time: its sums over the samples, in order.
        for c in range(C):
            for j in range(4):
                plane[j] = sums[j] + c
            for ph in range(g.out_h):
                for pw in range(g.out_w):
                    for iy in range(b.rows.grid):
                        ty = row_tap(&b, ph, iy, &ys, kind)
                        if not ty.inside:
                            continue
                        for ix in range(b.cols.grid):
                            tx = col_tap(&b, pw, ix, &xs, kind)
                            if tx.inside and not (ty.held and tx.held):
                                _sample(img + c * H * W, half, 0, 1, ty, tx, W,
                                        grads + ((k * C + c) * g.out_h + ph)
                                        * g.out_w + pw, 0, 1, b.rows.size_held,
                                        b.cols.size_held, plane, kind)
    else:
        # A sample at a time, for every channel side by side.
        for ph in range(g.out_h):
            for pw in range(g.out_w):
                for iy in range(b.rows.grid):
                    ty = row_tap(&b, ph, iy, &ys, kind)
                    if not ty.inside:
                        continue
                    for ix in range(b.cols.grid):
                        tx = col_tap(&b, pw, ix, &xs, kind)
                        if tx.inside and not (ty.held and tx.held):
                            _sample(img, half, 1, C, ty, tx, W,
                                    grads + ((k * g.out_h + ph) * g.out_w + pw) * C,
                                    1, C, b.rows.size_held, b.cols.size_held,
                                    sums, kind)
    # The channels' sums in lanes, each lane from channel to channel.
    for j in range(4):
        for L in range(LANES):
            lanes[L] = 0
        for c in range(C):
            lanes[c % LANES] = lanes[c % LANES] + sums[j][c]
        out[4 * k + j] = lane_total(lanes) / count


cdef void _typed_task(const void* ctx, const image_t* image, int half,
                      Py_ssize_t t, int thread) noexcept nogil:
    cdef const RoiPlan* p = <const RoiPlan*>ctx
    if image_t is double:
        if p.g.nchw:
            _box(p, image, half, t, thread, <double*>NULL, <nchw_t*>NULL)
        else:
            _box(p, image, half, t, thread, <double*>NULL, <nhwc_t*>NULL)
    else:
        if p.g.nchw:
            _box(p, image, half, t, thread, <float*>NULL, <nchw_t*>NULL)
        else:
            _box(p, image, half, t, thread, <float*>NULL, <nhwc_t*>NULL)


cdef void _task(void* ctx, Py_ssize_t t, int thread) noexcept nogil:
    cdef const RoiPlan* p = <const RoiPlan*>ctx
    _image_task(ctx, p.image, p.image_dtype, t, thread)


cdef int roi_align_grad_boxes(const RoiProblem* g, const void* grads,
                              const void* image, int image_dtype,
                              const void* boxes, const int64_t* box_ind, void* out,
                              int nthreads, bint flush, size_t* failed) noexcept nogil:
    """The boxes gradient of RoIAlign.

    Parameters
    ----------
    g : the problem; ``num_boxes > 0``.
    grads : [num_boxes, out_h, out_w, channels] in the arithmetic type
        ([num_boxes, channels, out_h, out_w] when ``g.nchw``)
    image : [batch, height, width, channels] of `image_dtype`
        ([batch, channels, height, width] when ``g.nchw``)
    boxes : [num_boxes, 4] ``x1, y1, x2, y2``, finite, in the arithmetic type
    box_ind : int64 [num_boxes], within [0, batch)
    out : [num_boxes, 4] in the arithmetic type; every element written.
    nthreads, flush : as for `roi_align`.

    failed : out: the bytes that could not be allocated, on failure.

    Returns
    -------
    int
        0, or -1 when the scratch could not be allocated (nothing written).
    """
    cdef RoiPlan p
    cdef size_t itemsize = sizeof(double) if g.double_arith else sizeof(float)
    cdef char* block
    p.g = g
    p.grads = grads
    p.image = image
    p.image_dtype = image_dtype
    p.boxes = boxes
    p.box_ind = box_ind
    p.out = out
    # Each thread's table of a box's samples and its channels' sums.
    p.scratch_each = TAP_BYTES + round64(<size_t>(4 * g.channels) * itemsize)
    block = <char*>malloc(p.scratch_each * <size_t>nthreads + 64)
    if block == NULL:
        failed[0] = p.scratch_each * <size_t>nthreads + 64
        return -1
    p.scratch = align64(block)
    run_tasks(_task, &p, g.num_boxes, nthreads,
              g.num_boxes * g.out_h * g.out_w * g.channels * 32, flush,
              SCHEDULE_DYNAMIC)
    free(block)
    return 0
