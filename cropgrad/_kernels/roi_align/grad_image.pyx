# cython: language_level=3
"""RoIAlign's image gradient, torchvision's backward (private kernel).

Trusts its arguments: the gate (cropgrad/_capi) checks them first.  Every
inside sample of every bin adds ``(g * w) / count`` to its four pixels.
The work is divided by output: a task owns one image of the batch and a
range of its channels, zeroes them, and walks that image's boxes in the
serial order (box, bin row, bin column, sample row, sample column,
corner), so every element is summed by one thread in torchvision's order
and the result does not depend on the number of threads.  The arithmetic
type is the gradient's (double for float64 grads, float otherwise); an
output of another dtype is accumulated in the arithmetic type in the
thread's scratch and rounded once.
"""

from libc.stdint cimport int64_t
from libc.stdlib cimport free, malloc
from libc.string cimport memset

from cropgrad._runtime.parallel cimport SCHEDULE_DYNAMIC, run_tasks
from cropgrad.capi cimport CG_FLOAT32, CG_FLOAT64

from ..aligned cimport align64, round64
from ..box_groups cimport group_boxes
from ..types cimport layout_t, nchw_t, nhwc_t

from .plan cimport (
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
from .sampling cimport RoiTap, real_t, roi_power_of_two


cdef inline void _add(real_t* dst, const real_t* g, Py_ssize_t n, Py_ssize_t dst_cs,
                      Py_ssize_t g_cs, real_t w, real_t count, real_t inverse,
                      bint exact_inverse) noexcept nogil:
    """``dst[c] += (g[c] * w) / count`` for `n` channels, their strides
    `dst_cs` and `g_cs`.  A power-of-two count divides by multiplying by
    its exact inverse: the same correctly rounded quotient."""
    cdef Py_ssize_t c
    if exact_inverse:
        for c in range(n):
            dst[c * dst_cs] += (g[c * g_cs] * w) * inverse
    else:
        for c in range(n):
            dst[c * dst_cs] += (g[c * g_cs] * w) / count


cdef void _scatter_box(const RoiPlan* p, Py_ssize_t k, real_t* acc, Py_ssize_t c0,
                       Py_ssize_t n, Py_ssize_t ps, Py_ssize_t cs, RoiTap* space,
                       layout_t* layout) noexcept nogil:
    """Box `k`'s samples into `acc` (the task's channels of its image:
    pixel stride `ps`, channel stride `cs`)."""
    cdef const RoiProblem* g = p.g
    cdef Py_ssize_t C = g.channels, W = g.width
    cdef Py_ssize_t ph, pw, iy, ix, g_cs = 1
    cdef BoxTaps b
    cdef RoiTap ys, xs
    cdef const RoiTap* ty
    cdef const RoiTap* tx
    cdef real_t count, inverse, w1, w2, w3, w4
    cdef bint exact_inverse
    cdef const real_t* grads = <const real_t*>p.grads
    cdef const real_t* gb
    if layout_t is nchw_t:
        g_cs = g.out_h * g.out_w
    box_taps(p, k, space, &b, grads)
    count = <real_t>b.count
    exact_inverse = roi_power_of_two(<int64_t>b.count)
    inverse = <real_t>1 / count
    for ph in range(g.out_h):
        for pw in range(g.out_w):
            if layout_t is nchw_t:
                gb = grads + ((k * C + c0) * g.out_h + ph) * g.out_w + pw
            else:
                gb = grads + ((k * g.out_h + ph) * g.out_w + pw) * C + c0
            for iy in range(b.rows.grid):
                ty = row_tap(&b, ph, iy, &ys, grads)
                if not ty.inside:
                    continue
                for ix in range(b.cols.grid):
                    tx = col_tap(&b, pw, ix, &xs, grads)
                    if not tx.inside:
                        continue
                    w1 = <real_t>ty.rest * <real_t>tx.rest
                    w2 = <real_t>ty.rest * <real_t>tx.lerp
                    w3 = <real_t>ty.lerp * <real_t>tx.rest
                    w4 = <real_t>ty.lerp * <real_t>tx.lerp
                    # The four corners in torchvision's order; a clamped
                    # sample adds to one pixel twice (or four times).
                    _add(acc + (ty.low * W + tx.low) * ps, gb, n, cs, g_cs, w1,
                         count, inverse, exact_inverse)
                    _add(acc + (ty.low * W + tx.high) * ps, gb, n, cs, g_cs, w2,
                         count, inverse, exact_inverse)
                    _add(acc + (ty.high * W + tx.low) * ps, gb, n, cs, g_cs, w3,
                         count, inverse, exact_inverse)
                    _add(acc + (ty.high * W + tx.high) * ps, gb, n, cs, g_cs, w4,
                         count, inverse, exact_inverse)


cdef void _image(const RoiPlan* p, Py_ssize_t task, int thread, real_t* kind,
                 layout_t* layout) noexcept nogil:
    """Task `task`: image ``task // ranges``, channel range ``task % ranges``."""
    cdef const RoiProblem* g = p.g
    cdef Py_ssize_t image = task // p.ranges
    cdef Py_ssize_t c0 = (task % p.ranges) * p.range_size
    cdef Py_ssize_t n = min(p.range_size, g.channels - c0)
    cdef Py_ssize_t C = g.channels, HW = g.height * g.width, i, c, j
    cdef Py_ssize_t ps, cs
    cdef bint direct = (p.out_dtype == CG_FLOAT64) == g.double_arith and (
        p.out_dtype == CG_FLOAT64 or p.out_dtype == CG_FLOAT32)
    cdef real_t* acc
    cdef real_t* out = <real_t*>p.out
    cdef char* scratch = p.scratch + <size_t>thread * p.scratch_each
    cdef RoiTap* space = <RoiTap*>scratch
    # Where the task's elements are: the output itself when it has the
    # arithmetic type, else the thread's scratch (its channels only).
    if direct:
        if layout_t is nchw_t:
            acc = out + (image * C + c0) * HW
            ps, cs = 1, HW
            memset(acc, 0, <size_t>(n * HW) * sizeof(real_t))
        else:
            acc = out + image * HW * C + c0
            ps, cs = C, 1
            for i in range(HW):
                memset(acc + i * C, 0, <size_t>n * sizeof(real_t))
    else:
        acc = <real_t*>(scratch + TAP_BYTES)
        if layout_t is nchw_t:
            ps, cs = 1, HW
        else:
            ps, cs = n, 1
        memset(acc, 0, <size_t>(n * HW) * sizeof(real_t))
    for j in range(p.starts[image], p.starts[image + 1]):
        _scatter_box(p, p.order[j], acc, c0, n, ps, cs, space, layout)
    if not direct:
        for i in range(HW):
            for c in range(n):
                if layout_t is nchw_t:
                    store(p.out, (image * C + c0 + c) * HW + i, p.out_dtype,
                          acc[c * HW + i])
                else:
                    store(p.out, (image * HW + i) * C + c0 + c, p.out_dtype,
                          acc[i * n + c])


cdef void _task(void* ctx, Py_ssize_t t, int thread) noexcept nogil:
    cdef const RoiPlan* p = <const RoiPlan*>ctx
    if p.g.double_arith:
        if p.g.nchw:
            _image(p, t, thread, <double*>NULL, <nchw_t*>NULL)
        else:
            _image(p, t, thread, <double*>NULL, <nhwc_t*>NULL)
    else:
        if p.g.nchw:
            _image(p, t, thread, <float*>NULL, <nchw_t*>NULL)
        else:
            _image(p, t, thread, <float*>NULL, <nhwc_t*>NULL)


cdef int roi_align_grad_image(const RoiProblem* g, const void* grads,
                              const void* boxes, const int64_t* box_ind,
                              void* out, int out_dtype, int nthreads, bint flush,
                              size_t* failed) noexcept nogil:
    """The image gradient of RoIAlign.

    Parameters
    ----------
    g : the problem; ``batch * channels * height * width > 0``.
    grads : [num_boxes, out_h, out_w, channels] in the arithmetic type
        ([num_boxes, channels, out_h, out_w] when ``g.nchw``)
    boxes : [num_boxes, 4] ``x1, y1, x2, y2``, finite, in the arithmetic type
    box_ind : int64 [num_boxes], within [0, batch)
    out : [batch, height, width, channels] of `out_dtype` (CG_FLOAT32,
        CG_FLOAT64, or from float arithmetic CG_FLOAT16, CG_BFLOAT16)
        ([batch, channels, height, width] when ``g.nchw``); overwritten.
    nthreads, flush, failed : as for `roi_align`.

    Returns
    -------
    int
        0, or -1 when the scratch could not be allocated (nothing written).
    """
    cdef RoiPlan p
    cdef size_t itemsize = sizeof(double) if g.double_arith else sizeof(float)
    cdef size_t tables = round64(<size_t>(g.num_boxes + g.batch + 1) * sizeof(int64_t))
    cdef bint direct = (out_dtype == CG_FLOAT64) == g.double_arith and (
        out_dtype == CG_FLOAT64 or out_dtype == CG_FLOAT32)
    cdef char* block
    cdef size_t nbytes
    p.g = g
    p.grads = grads
    p.boxes = boxes
    p.box_ind = box_ind
    p.out = out
    p.out_dtype = out_dtype
    channel_ranges(&p, g.batch, nthreads, 0)
    # Each thread's table of a box's samples, and for an output of another
    # dtype its accumulator of a task's channels of one image, in the
    # arithmetic type.
    p.scratch_each = TAP_BYTES + (0 if direct else round64(
        <size_t>(p.range_size * g.height * g.width) * itemsize))
    nbytes = tables + p.scratch_each * <size_t>nthreads + 64
    block = <char*>malloc(nbytes)
    if block == NULL:
        failed[0] = nbytes
        return -1
    p.order = <int64_t*>align64(block)
    p.starts = p.order + g.num_boxes
    p.scratch = <char*>p.order + tables
    group_boxes(box_ind, g.num_boxes, g.batch, <int64_t*>p.order,
                <int64_t*>p.starts)
    run_tasks(_task, &p, g.batch * p.ranges, nthreads,
              g.num_boxes * g.out_h * g.out_w * g.channels * 16
              + g.batch * g.channels * g.height * g.width, flush,
              SCHEDULE_DYNAMIC)
    free(block)
    return 0
