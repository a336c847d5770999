# cython: language_level=3
"""RoIAlign's derivative along a tangent of the boxes (private kernel).

Trusts its arguments: the gate (cropgrad/_capi) checks them first.  Each
output element is the sum over its bin's inside samples, in the serial
order (sample row, sample column), of the image's slopes times how fast
the sample moves along the tangent, divided by the count: the boxes
gradient's terms, so that the boxes gradient is this map's transpose.
Tasks as the forward op's (a box, a range of its channels); no element is
a sum over tasks, so the result does not depend on the number of threads.
"""

from libc.stdint cimport int64_t
from libc.stdlib cimport free, malloc

from cropgrad._runtime.parallel cimport SCHEDULE_DYNAMIC, run_tasks

from ..aligned cimport align64, round64
from ..pixels cimport load
from ..types cimport image_t, layout_t, nchw_t, nhwc_t

from .plan cimport (
    NCHW_CHANNELS,
    TAP_BYTES,
    BoxTaps,
    RoiPlan,
    RoiProblem,
    box_taps,
    channel_ranges,
    col_tap,
    row_tap,
    store,
)
from .sampling cimport RoiAxis, RoiTap, real_t

include "../image_dtypes.pxi"


cdef inline real_t pixel(const image_t* img, Py_ssize_t i, int half,
                         real_t* kind) noexcept nogil:
    """Pixel `i` in the arithmetic type (as the forward op reads it)."""
    if image_t is double:
        return <real_t>img[i]
    else:
        return <real_t>load(img, i, half)


cdef inline real_t rate(const RoiAxis* a, const RoiTap* t, real_t t_lo,
                        real_t t_hi) noexcept nogil:
    """How fast sample `t` moves along the tangent: ``t_lo * dc/dlo + t_hi *
    dc/dhi`` (the first term alone when the size is held)."""
    if a.size_held:
        return t_lo * <real_t>t.f_lo
    return (t_lo * <real_t>t.f_lo) + (t_hi * <real_t>t.f_hi)


cdef void _box(const RoiPlan* p, const image_t* image, int half, Py_ssize_t task,
               int thread, real_t* kind, layout_t* layout) noexcept nogil:
    """Task `task`: the bins of box ``task // ranges``, channel range
    ``task % ranges``."""
    cdef const RoiProblem* g = p.g
    cdef Py_ssize_t k = task // p.ranges
    cdef Py_ssize_t c0 = (task % p.ranges) * p.range_size
    cdef Py_ssize_t n = min(p.range_size, g.channels - c0)
    cdef Py_ssize_t C = g.channels, H = g.height, W = g.width
    cdef Py_ssize_t ph, pw, iy, ix, c, o1, o2, o3, o4, at
    cdef Py_ssize_t ps = C, cs = 1, out_cs = 1
    cdef char* scratch = p.scratch + <size_t>thread * p.scratch_each
    cdef real_t* acc = <real_t*>(scratch + TAP_BYTES)
    cdef BoxTaps b
    cdef RoiTap ys, xs
    cdef const RoiTap* ty
    cdef const RoiTap* tx
    cdef real_t hy, ly, hx, lx, rate_y, rate_x, v1, v2, v3, v4, count
    cdef const real_t* tangent = <const real_t*>p.tangent + 4 * k
    cdef const image_t* img
    cdef const image_t* q
    if layout_t is nchw_t:
        ps, cs, out_cs = 1, H * W, g.out_h * g.out_w
    img = image + p.box_ind[k] * H * W * C + c0 * cs
    box_taps(p, k, <RoiTap*>scratch, &b, kind)
    count = <real_t>b.count
    for ph in range(g.out_h):
        for pw in range(g.out_w):
            for c in range(n):
                acc[c] = 0
            for iy in range(b.rows.grid):
                ty = row_tap(&b, ph, iy, &ys, kind)
                if not ty.inside:
                    continue
                # tangent: [t_x1, t_y1, t_x2, t_y2]
                rate_y = rate(&b.rows, ty, tangent[1], tangent[3])
                hy, ly = <real_t>ty.rest, <real_t>ty.lerp
                for ix in range(b.cols.grid):
                    tx = col_tap(&b, pw, ix, &xs, kind)
                    if not tx.inside or (ty.held and tx.held):
                        continue
                    rate_x = rate(&b.cols, tx, tangent[0], tangent[2])
                    hx, lx = <real_t>tx.rest, <real_t>tx.lerp
                    o1 = (ty.low * W + tx.low) * ps
                    o2 = (ty.low * W + tx.high) * ps
                    o3 = (ty.high * W + tx.low) * ps
                    o4 = (ty.high * W + tx.high) * ps
                    for c in range(n):
                        q = img + c * cs
                        v1 = pixel(q, o1, half, kind)
                        v2 = pixel(q, o2, half, kind)
                        v3 = pixel(q, o3, half, kind)
                        v4 = pixel(q, o4, half, kind)
                        # A held axis's term is left out, not added as 0
                        # (an infinite rate would make it NaN).
                        if tx.held:
                            acc[c] = acc[c] + (
                                ((hx * (v3 - v1)) + (lx * (v4 - v2))) * rate_y)
                        elif ty.held:
                            acc[c] = acc[c] + (
                                ((hy * (v2 - v1)) + (ly * (v4 - v3))) * rate_x)
                        else:
                            acc[c] = acc[c] + (
                                (((hx * (v3 - v1)) + (lx * (v4 - v2))) * rate_y)
                                + (((hy * (v2 - v1)) + (ly * (v4 - v3))) * rate_x))
            if layout_t is nchw_t:
                at = ((k * C + c0) * g.out_h + ph) * g.out_w + pw
            else:
                at = ((k * g.out_h + ph) * g.out_w + pw) * C + c0
            for c in range(n):
                store(p.out, at + c * out_cs, p.out_dtype, acc[c] / count)


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


cdef int roi_align_jvp_boxes(const RoiProblem* g, const void* image,
                             int image_dtype, const void* boxes,
                             const void* tangent, const int64_t* box_ind,
                             void* out, int out_dtype, int nthreads, bint flush,
                             size_t* failed) noexcept nogil:
    """The derivative of RoIAlign along `tangent`, a tangent of the boxes.

    Parameters
    ----------
    g, image, boxes, box_ind, out, out_dtype, nthreads, flush, failed
        As for `forward.roi_align`.
    tangent : [num_boxes, 4] ``t_x1, t_y1, t_x2, t_y2`` in the arithmetic
        type, any values.

    Returns
    -------
    int
        0, or -1 when the scratch could not be allocated (nothing written).
    """
    cdef RoiPlan p
    cdef size_t itemsize = sizeof(double) if g.double_arith else sizeof(float)
    cdef char* block
    p.g = g
    p.image = image
    p.image_dtype = image_dtype
    p.boxes = boxes
    p.tangent = tangent
    p.box_ind = box_ind
    p.out = out
    p.out_dtype = out_dtype
    channel_ranges(&p, g.num_boxes, nthreads, NCHW_CHANNELS if g.nchw else 0)
    # Each thread's table of a box's samples and its sums of one bin.
    p.scratch_each = TAP_BYTES + round64(<size_t>p.range_size * itemsize)
    block = <char*>malloc(p.scratch_each * <size_t>nthreads + 64)
    if block == NULL:
        failed[0] = p.scratch_each * <size_t>nthreads + 64
        return -1
    p.scratch = align64(block)
    run_tasks(_task, &p, g.num_boxes * p.ranges, nthreads,
              g.num_boxes * g.out_h * g.out_w * g.channels * 24, flush,
              SCHEDULE_DYNAMIC)
    free(block)
    return 0
