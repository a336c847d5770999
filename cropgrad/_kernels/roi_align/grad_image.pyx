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
from cropgrad._runtime.simd cimport chosen_target
from cropgrad.capi cimport CG_FLOAT32, CG_FLOAT64

from ..aligned cimport align64, round64
from ..box_groups cimport group_boxes
from ..cdefs cimport cg_simd_select
from ..types cimport layout_t, nchw_t, nhwc_t

from .channels cimport spread
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
from .tiles cimport fill_tile, plan_tiles, store_planes


# This module's channel loops and plane transposes run on the instruction
# set the runtime chose for the process.
cg_simd_select(chosen_target())


cdef inline void _add(real_t* dst, const real_t* g, Py_ssize_t n, Py_ssize_t dst_cs,
                      Py_ssize_t g_cs, real_t w, real_t divisor,
                      bint by_inverse) noexcept nogil:
    """``dst[c] += (g[c] * w) / divisor`` (``* divisor`` when `by_inverse`)
    for `n` channels, their strides `dst_cs` and `g_cs`."""
    cdef Py_ssize_t c
    if dst_cs == 1 and g_cs == 1:
        spread(dst, g, w, divisor, by_inverse, n)
    elif by_inverse:
        for c in range(n):
            dst[c * dst_cs] += (g[c * g_cs] * w) * divisor
    else:
        for c in range(n):
            dst[c * dst_cs] += (g[c * g_cs] * w) / divisor


cdef void _scatter_box(const RoiPlan* p, Py_ssize_t k, real_t* acc, Py_ssize_t ps,
                       Py_ssize_t cs, const real_t* gk, Py_ssize_t g_bin,
                       Py_ssize_t g_cs, Py_ssize_t n, RoiTap* space) noexcept nogil:
    """Box `k`'s samples into `acc` (the task's channels of its image:
    pixel stride `ps`, channel stride `cs`), from its grads `gk` (bin
    stride `g_bin`, channel stride `g_cs`)."""
    cdef const RoiProblem* g = p.g
    cdef Py_ssize_t W = g.width
    cdef Py_ssize_t ph, pw, iy, ix
    cdef BoxTaps b
    cdef RoiTap ys, xs
    cdef const RoiTap* ty
    cdef const RoiTap* tx
    cdef real_t divisor, w1, w2, w3, w4
    cdef bint by_inverse
    cdef const real_t* gb
    box_taps(p, k, space, &b, acc)
    # A power-of-two count divides by multiplying by its exact inverse:
    # the same correctly rounded quotient.
    by_inverse = roi_power_of_two(<int64_t>b.count)
    divisor = <real_t>1 / <real_t>b.count if by_inverse else <real_t>b.count
    for ph in range(g.out_h):
        for pw in range(g.out_w):
            gb = gk + (ph * g.out_w + pw) * g_bin
            for iy in range(b.rows.grid):
                ty = row_tap(&b, ph, iy, &ys, acc)
                if not ty.inside:
                    continue
                for ix in range(b.cols.grid):
                    tx = col_tap(&b, pw, ix, &xs, acc)
                    if not tx.inside:
                        continue
                    w1 = <real_t>ty.rest * <real_t>tx.rest
                    w2 = <real_t>ty.rest * <real_t>tx.lerp
                    w3 = <real_t>ty.lerp * <real_t>tx.rest
                    w4 = <real_t>ty.lerp * <real_t>tx.lerp
                    # The four corners in torchvision's order; a clamped
                    # sample adds to one pixel twice (or four times).
                    _add(acc + (ty.low * W + tx.low) * ps, gb, n, cs, g_cs, w1,
                         divisor, by_inverse)
                    _add(acc + (ty.low * W + tx.high) * ps, gb, n, cs, g_cs, w2,
                         divisor, by_inverse)
                    _add(acc + (ty.high * W + tx.low) * ps, gb, n, cs, g_cs, w3,
                         divisor, by_inverse)
                    _add(acc + (ty.high * W + tx.high) * ps, gb, n, cs, g_cs, w4,
                         divisor, by_inverse)


cdef void _image(const RoiPlan* p, Py_ssize_t task, int thread, real_t* kind,
                 layout_t* layout) noexcept nogil:
    """Task `task`: image ``task // ranges``, channel range ``task % ranges``,
    accumulated where the output is (or in the thread's scratch)."""
    cdef const RoiProblem* g = p.g
    cdef Py_ssize_t image = task // p.ranges
    cdef Py_ssize_t c0 = (task % p.ranges) * p.range_size
    cdef Py_ssize_t n = min(p.range_size, g.channels - c0)
    cdef Py_ssize_t C = g.channels, HW = g.height * g.width, bins = g.out_h * g.out_w
    cdef Py_ssize_t i, c, j, k, ps, cs
    cdef bint direct = (p.out_dtype == CG_FLOAT64) == g.double_arith and (
        p.out_dtype == CG_FLOAT64 or p.out_dtype == CG_FLOAT32)
    cdef real_t* acc
    cdef real_t* out = <real_t*>p.out
    cdef const real_t* grads = <const real_t*>p.grads
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
        k = p.order[j]
        if layout_t is nchw_t:
            _scatter_box(p, k, acc, ps, cs, grads + (k * C + c0) * bins, 1, bins,
                         n, space)
        else:
            _scatter_box(p, k, acc, ps, cs, grads + k * bins * C + c0, C, 1, n,
                         space)
    if not direct:
        for i in range(HW):
            for c in range(n):
                if layout_t is nchw_t:
                    store(p.out, (image * C + c0 + c) * HW + i, p.out_dtype,
                          acc[c * HW + i])
                else:
                    store(p.out, (image * HW + i) * C + c0 + c, p.out_dtype,
                          acc[i * n + c])


cdef void _image_tile(const RoiPlan* p, Py_ssize_t task, int thread,
                      real_t* kind) noexcept nogil:
    """Task `task` through a tile (NCHW): image ``task // groups``, channel
    group ``task % groups``, accumulated with its channels side by side,
    then written to its planes."""
    cdef const RoiProblem* g = p.g
    cdef Py_ssize_t image = task // p.tiles.groups
    cdef Py_ssize_t c0 = (task % p.tiles.groups) * p.tiles.channels
    cdef Py_ssize_t n = min(p.tiles.channels, g.channels - c0)
    cdef Py_ssize_t C = g.channels, HW = g.height * g.width, bins = g.out_h * g.out_w
    cdef Py_ssize_t j, k
    cdef const real_t* grads = <const real_t*>p.grads
    cdef char* scratch = p.scratch + <size_t>thread * p.scratch_each
    cdef real_t* acc = <real_t*>(scratch + TAP_BYTES)
    # A box's grads, its bins' channels side by side.
    cdef real_t* gk = <real_t*>(scratch + TAP_BYTES + p.tiles.tile_bytes)
    memset(acc, 0, <size_t>(n * HW) * sizeof(real_t))
    for j in range(p.starts[image], p.starts[image + 1]):
        k = p.order[j]
        fill_tile(gk, grads + (k * C + c0) * bins, 0, bins, bins, n)
        _scatter_box(p, k, acc, n, 1, gk, n, 1, n, <RoiTap*>scratch)
    store_planes(p.out, p.out_dtype, (image * C + c0) * HW, HW, acc, HW, n)


cdef void _task(void* ctx, Py_ssize_t t, int thread) noexcept nogil:
    cdef const RoiPlan* p = <const RoiPlan*>ctx
    if p.g.double_arith:
        if p.tiled:
            _image_tile(p, t, thread, <double*>NULL)
        elif p.g.nchw:
            _image(p, t, thread, <double*>NULL, <nchw_t*>NULL)
        else:
            _image(p, t, thread, <double*>NULL, <nhwc_t*>NULL)
    else:
        if p.tiled:
            _image_tile(p, t, thread, <float*>NULL)
        elif p.g.nchw:
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
    cdef Py_ssize_t tasks
    p.g = g
    p.grads = grads
    p.boxes = boxes
    p.box_ind = box_ind
    p.out = out
    p.out_dtype = out_dtype
    p.tiled = False
    if g.nchw:
        if g.double_arith:
            p.tiled = plan_tiles(&p, g.batch, nthreads, False, &p.tiles, <double*>NULL)
        else:
            p.tiled = plan_tiles(&p, g.batch, nthreads, False, &p.tiles, <float*>NULL)
    if p.tiled:
        # Each thread's table of a box's samples, its tile, a box's grads.
        p.scratch_each = TAP_BYTES + p.tiles.tile_bytes + round64(
            <size_t>(g.out_h * g.out_w * p.tiles.channels) * itemsize)
        tasks = g.batch * p.tiles.groups
    else:
        # One task a thread at least, not several: every task of an image
        # walks all of its boxes and finds their samples again, so a
        # channel range costs a pass over the boxes (with four ranges an
        # image, two threads took longer than one on the detector pooler).
        channel_ranges(&p, g.batch, nthreads, 0, 1)
        # Each thread's table of a box's samples, and for an output of
        # another dtype its accumulator of a task's channels of one image,
        # in the arithmetic type.
        p.scratch_each = TAP_BYTES + (0 if direct else round64(
            <size_t>(p.range_size * g.height * g.width) * itemsize))
        tasks = g.batch * p.ranges
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
    run_tasks(_task, &p, tasks, nthreads,
              g.num_boxes * g.out_h * g.out_w * g.channels * 16
              + g.batch * g.channels * g.height * g.width, flush,
              SCHEDULE_DYNAMIC)
    free(block)
    return 0
