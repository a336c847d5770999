# cython: language_level=3
"""RoIAlign's forward op, average pooling (private kernel).

Trusts its arguments: the gate (cropgrad/_capi) checks shapes, box indices,
finite boxes and the samples per bin first.  A task pools the bins of one
box for a range of channels; every output element is one task's sum over
its bin's samples in torchvision's order (sample row, sample column),
divided by the count, so the result does not depend on the number of
threads.  A box's samples are found once per axis (plan.pxd: a table of
bounded size, or as they are needed for a huge adaptive grid).  A task pools
a sample at a time for its channels; NCHW tasks take fewer
channels, so that the planes a sample reads stay in cache.  Both run the
same expressions on each element, their strides picked by the layout tags
of types.pxd: the NCHW result is the NHWC result transposed, bit for bit.
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
from .sampling cimport RoiTap, real_t

include "../image_dtypes.pxi"


cdef inline real_t pixel(const image_t* img, Py_ssize_t i, int half,
                         real_t* kind) noexcept nogil:
    """Pixel `i` in the arithmetic type: a float64 image's own value, every
    other dtype's float32 conversion (pixels.load)."""
    if image_t is double:
        return <real_t>img[i]
    else:
        return <real_t>load(img, i, half)


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
    # Strides of a pixel and a channel in the image and of a channel in the
    # output.
    cdef Py_ssize_t ps = C, cs = 1, out_cs = 1
    cdef char* scratch = p.scratch + <size_t>thread * p.scratch_each
    cdef real_t* acc = <real_t*>(scratch + TAP_BYTES)
    cdef BoxTaps b
    cdef RoiTap ys, xs
    cdef const RoiTap* ty
    cdef const RoiTap* tx
    cdef real_t w1, w2, w3, w4, count
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
                    continue  # reads no pixel (torchvision adds 0 * pixel 0)
                for ix in range(b.cols.grid):
                    tx = col_tap(&b, pw, ix, &xs, kind)
                    if not tx.inside:
                        continue
                    w1 = <real_t>ty.rest * <real_t>tx.rest
                    w2 = <real_t>ty.rest * <real_t>tx.lerp
                    w3 = <real_t>ty.lerp * <real_t>tx.rest
                    w4 = <real_t>ty.lerp * <real_t>tx.lerp
                    o1 = (ty.low * W + tx.low) * ps
                    o2 = (ty.low * W + tx.high) * ps
                    o3 = (ty.high * W + tx.low) * ps
                    o4 = (ty.high * W + tx.high) * ps
                    for c in range(n):
                        q = img + c * cs
                        # torchvision's order: ((w1 v1 + w2 v2) + w3 v3) + w4 v4.
                        acc[c] = acc[c] + (((w1 * pixel(q, o1, half, kind)
                                             + w2 * pixel(q, o2, half, kind))
                                            + w3 * pixel(q, o3, half, kind))
                                           + w4 * pixel(q, o4, half, kind))
            if layout_t is nchw_t:
                at = ((k * C + c0) * g.out_h + ph) * g.out_w + pw
            else:
                at = ((k * g.out_h + ph) * g.out_w + pw) * C + c0
            for c in range(n):
                store(p.out, at + c * out_cs, p.out_dtype, acc[c] / count)


cdef void _typed_task(const void* ctx, const image_t* image, int half,
                      Py_ssize_t t, int thread) noexcept nogil:
    """Task `t` for an image of C type image_t: float64 images in double,
    every other dtype in float."""
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


cdef int roi_align(const RoiProblem* g, const void* image, int image_dtype,
                   const void* boxes, const int64_t* box_ind, void* out,
                   int out_dtype, int nthreads, bint flush,
                   size_t* failed) noexcept nogil:
    """RoIAlign of every box, average pooling.

    Parameters
    ----------
    g : the problem; ``num_boxes * channels * out_h * out_w > 0``.
    image : [batch, height, width, channels] of `image_dtype` (a CG_ code)
        ([batch, channels, height, width] when ``g.nchw``)
    boxes : [num_boxes, 4] ``x1, y1, x2, y2``, finite, in the arithmetic
        type (double for float64 images, float otherwise)
    box_ind : int64 [num_boxes], within [0, batch)
    out : [num_boxes, out_h, out_w, channels] of `out_dtype` (CG_FLOAT32,
        CG_FLOAT64, or from float arithmetic CG_FLOAT16, CG_BFLOAT16)
        ([num_boxes, channels, out_h, out_w] when ``g.nchw``); every
        element written.
    nthreads : upper bound on the team (resolved).
    flush : flush-to-zero and denormals-are-zero.
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
    p.image = image
    p.image_dtype = image_dtype
    p.boxes = boxes
    p.box_ind = box_ind
    p.out = out
    p.out_dtype = out_dtype
    channel_ranges(&p, g.num_boxes, nthreads, NCHW_CHANNELS if g.nchw else 0)
    # Each thread's table of a box's samples, then (NHWC) its sums of one
    # bin, a channel range of them.
    p.scratch_each = TAP_BYTES + round64(<size_t>p.range_size * itemsize)
    block = <char*>malloc(p.scratch_each * <size_t>nthreads + 64)
    if block == NULL:
        failed[0] = p.scratch_each * <size_t>nthreads + 64
        return -1
    p.scratch = align64(block)
    run_tasks(_task, &p, g.num_boxes * p.ranges, nthreads,
              g.num_boxes * g.out_h * g.out_w * g.channels * 16, flush,
              SCHEDULE_DYNAMIC)
    free(block)
    return 0
