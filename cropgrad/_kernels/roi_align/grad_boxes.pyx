# cython: language_level=3
"""RoIAlign's boxes gradient (private kernel).

Trusts its arguments: the gate (cropgrad/_capi) checks them first.  The
derivative of the sampling with respect to ``x1, y1, x2, y2`` through the
sample coordinates (docs/semantics.md, "The RoIAlign boxes derivatives"):
per inside sample and channel, the image's slope along an axis times the
incoming gradient, times how fast the sample moves with each edge.  A
task owns whole boxes, so each box's four sums are one thread's.

Each sum is kept as eight partial sums, channel ``c`` going to lane
``c % 8``, each lane added in the serial order (bin row, bin column, sample
row, sample column, channel), then combined as ``((l0 + l1) + (l2 + l3)) +
((l4 + l5) + (l6 + l7))`` and divided by the bin's count: a fixed order,
whatever the thread count or the layout, that the compiler can run eight
channels wide.
"""

from libc.stdint cimport int64_t

from cropgrad._runtime.parallel cimport SCHEDULE_DYNAMIC, run_tasks

from ..pixels cimport load
from ..types cimport image_t, layout_t, nchw_t, nhwc_t

from .plan cimport LANES, RoiPlan, RoiProblem, box_axes, lane_total
from .sampling cimport (
    RoiAxis,
    RoiTap,
    real_t,
    roi_coord,
    roi_count,
    roi_factors,
    roi_tap,
)

include "../image_dtypes.pxi"


cdef inline real_t pixel(const image_t* img, Py_ssize_t i, int half,
                         real_t* kind) noexcept nogil:
    """Pixel `i` in the arithmetic type (as the forward op reads it)."""
    if image_t is double:
        return <real_t>img[i]
    else:
        return <real_t>load(img, i, half)


cdef void _box(const RoiPlan* p, const image_t* image, int half, Py_ssize_t k,
               real_t* kind, layout_t* layout) noexcept nogil:
    """The four sums of box `k` (its gradient, ``[x1, y1, x2, y2]``)."""
    cdef const RoiProblem* g = p.g
    cdef Py_ssize_t C = g.channels, H = g.height, W = g.width
    cdef Py_ssize_t ph, pw, iy, ix, c, L, o1, o2, o3, o4
    cdef Py_ssize_t ps = C, cs = 1, g_cs = 1
    cdef RoiAxis rows, cols
    cdef RoiTap ty, tx
    cdef real_t lo_y, hi_y, lo_x, hi_x, hy, ly, hx, lx, v1, v2, v3, v4, gc, d
    cdef real_t count
    # Lanes of the sums of x1, y1, x2, y2.
    cdef real_t sums[4][LANES]
    cdef const image_t* img
    cdef const image_t* q
    cdef const real_t* grads = <const real_t*>p.grads
    cdef const real_t* gb
    cdef real_t* out = <real_t*>p.out
    if layout_t is nchw_t:
        ps, cs, g_cs = 1, H * W, g.out_h * g.out_w
    img = image + p.box_ind[k] * H * W * C
    box_axes(p, k, <real_t*>p.boxes, &rows, &cols)
    count = <real_t>roi_count(&rows, &cols)
    for c in range(4):
        for L in range(LANES):
            sums[c][L] = 0
    for ph in range(g.out_h):
        for pw in range(g.out_w):
            if layout_t is nchw_t:
                gb = grads + (k * C * g.out_h + ph) * g.out_w + pw
            else:
                gb = grads + ((k * g.out_h + ph) * g.out_w + pw) * C
            for iy in range(rows.grid):
                roi_tap(roi_coord(<real_t>rows.start, <real_t>rows.bin, rows.grid,
                                  ph, iy), H, &ty)
                if not ty.inside:
                    continue
                roi_factors(&rows, ph, iy, &lo_y, &hi_y)
                hy, ly = <real_t>ty.rest, <real_t>ty.lerp
                for ix in range(cols.grid):
                    roi_tap(roi_coord(<real_t>cols.start, <real_t>cols.bin,
                                      cols.grid, pw, ix), W, &tx)
                    if not tx.inside or (ty.held and tx.held):
                        continue
                    roi_factors(&cols, pw, ix, &lo_x, &hi_x)
                    hx, lx = <real_t>tx.rest, <real_t>tx.lerp
                    o1 = (ty.low * W + tx.low) * ps
                    o2 = (ty.low * W + tx.high) * ps
                    o3 = (ty.high * W + tx.low) * ps
                    o4 = (ty.high * W + tx.high) * ps
                    for c in range(C):
                        q = img + c * cs
                        v1 = pixel(q, o1, half, kind)
                        v2 = pixel(q, o2, half, kind)
                        v3 = pixel(q, o3, half, kind)
                        v4 = pixel(q, o4, half, kind)
                        gc = gb[c * g_cs]
                        L = c % LANES
                        # An axis a clamp holds has no slope: its terms are
                        # left out, not added as zeros.
                        if not ty.held:
                            d = ((hx * (v3 - v1)) + (lx * (v4 - v2))) * gc
                            sums[1][L] = sums[1][L] + d * lo_y
                            if not rows.size_held:
                                sums[3][L] = sums[3][L] + d * hi_y
                        if not tx.held:
                            d = ((hy * (v2 - v1)) + (ly * (v4 - v3))) * gc
                            sums[0][L] = sums[0][L] + d * lo_x
                            if not cols.size_held:
                                sums[2][L] = sums[2][L] + d * hi_x
    for c in range(4):
        out[4 * k + c] = lane_total(sums[c]) / count


cdef void _typed_task(const void* ctx, const image_t* image, int half,
                      Py_ssize_t t, int thread) noexcept nogil:
    cdef const RoiPlan* p = <const RoiPlan*>ctx
    if image_t is double:
        if p.g.nchw:
            _box(p, image, half, t, <double*>NULL, <nchw_t*>NULL)
        else:
            _box(p, image, half, t, <double*>NULL, <nhwc_t*>NULL)
    else:
        if p.g.nchw:
            _box(p, image, half, t, <float*>NULL, <nchw_t*>NULL)
        else:
            _box(p, image, half, t, <float*>NULL, <nhwc_t*>NULL)


cdef void _task(void* ctx, Py_ssize_t t, int thread) noexcept nogil:
    cdef const RoiPlan* p = <const RoiPlan*>ctx
    _image_task(ctx, p.image, p.image_dtype, t, thread)


cdef int roi_align_grad_boxes(const RoiProblem* g, const void* grads,
                              const void* image, int image_dtype,
                              const void* boxes, const int64_t* box_ind, void* out,
                              int nthreads, bint flush) noexcept nogil:
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

    Returns
    -------
    int
        0 (no scratch).
    """
    cdef RoiPlan p
    p.g = g
    p.grads = grads
    p.image = image
    p.image_dtype = image_dtype
    p.boxes = boxes
    p.box_ind = box_ind
    p.out = out
    run_tasks(_task, &p, g.num_boxes, nthreads,
              g.num_boxes * g.out_h * g.out_w * g.channels * 32, flush,
              SCHEDULE_DYNAMIC)
    return 0
