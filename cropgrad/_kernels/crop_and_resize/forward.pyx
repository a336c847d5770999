# cython: language_level=3
"""The forward op, CropAndResize (private kernel).

Trusts its arguments: the gate (cropgrad/_capi) checks shapes, box indices
and finiteness first.  Every crop row is written by exactly one task, so the
result does not depend on the number of threads.  NCHW problems go to
`forward_nchw`, which computes each element by the same float32
expression: the NCHW crops are the NHWC crops transposed, bit for bit.
"""

from libc.stdint cimport int64_t

from cropgrad._runtime.parallel cimport SCHEDULE_STATIC, run_tasks
from cropgrad._runtime.simd cimport chosen_target

from ..cdefs cimport cg_lerp_row, cg_simd_select
from ..pixels cimport load
from ..types cimport image_t
from .geometry cimport Geometry

from .forward_nchw cimport crop_and_resize_nchw
from .sampling cimport crop_scale, linear_taps, nearest_tap, sample_coord

include "../image_dtypes.pxi"


# Crop columns whose taps are found at a time (on the stack).
cdef enum:
    COLUMN_CHUNK = 64


# This module's samples (cg_lerp.h) run on the instruction set the runtime chose for the
# process (each module holds its own pointers to the clones of cg_simd.h).
cg_simd_select(chosen_target())


ctypedef struct ForwardPlan:
    const Geometry* g
    const void* image
    int image_dtype
    const float* boxes
    const int64_t* box_ind
    float* crops
    float extrapolation


cdef void _row(const ForwardPlan* p, const image_t* image, Py_ssize_t task,
               int half) noexcept nogil:
    """Crop row ``task % crop_h`` of box ``task // crop_h``."""
    cdef Py_ssize_t H = p.g.height, W = p.g.width, D = p.g.depth
    cdef Py_ssize_t ch = p.g.crop_h, cw = p.g.crop_w
    cdef Py_ssize_t b = task // ch, y = task % ch, x, d, n
    cdef Py_ssize_t top, bottom, left, right
    cdef float y1 = p.boxes[4 * b], x1 = p.boxes[4 * b + 1]
    cdef float y2 = p.boxes[4 * b + 2], x2 = p.boxes[4 * b + 3]
    cdef float coord, y_lerp, x_lerp, tl, tr, bl, br, upper, lower
    cdef float extrapolation = p.extrapolation
    cdef float wscale = crop_scale(x1, x2, W, cw)
    cdef float* dst = p.crops + (b * ch + y) * cw * D
    cdef const image_t* img = image + p.box_ind[b] * H * W * D
    cdef const image_t* p_tl
    cdef const image_t* p_tr
    cdef const image_t* p_bl
    cdef const image_t* p_br
    coord = sample_coord(y1, y2, crop_scale(y1, y2, H, ch), H, ch, y)
    if p.g.nearest:
        if not nearest_tap(coord, H, &top):
            for n in range(cw * D):
                dst[n] = extrapolation
            return
        for x in range(cw):
            if not nearest_tap(sample_coord(x1, x2, wscale, W, cw, x), W, &left):
                for d in range(D):
                    dst[x * D + d] = extrapolation
                continue
            p_tl = img + (top * W + left) * D
            for d in range(D):
                dst[x * D + d] = load(p_tl, d, half)
        return
    if not linear_taps(coord, H, &top, &bottom, &y_lerp):
        for n in range(cw * D):
            dst[n] = extrapolation
        return
    if image_t is float:
        # The SIMD clone of the loop below (cg_lerp.h).
        _float_row(p, img, dst, top, bottom, y_lerp, x1, x2, wscale)
    else:
        for x in range(cw):
            if not linear_taps(sample_coord(x1, x2, wscale, W, cw, x), W,
                               &left, &right, &x_lerp):
                for d in range(D):
                    dst[x * D + d] = extrapolation
                continue
            p_tl = img + (top * W + left) * D
            p_tr = img + (top * W + right) * D
            p_bl = img + (bottom * W + left) * D
            p_br = img + (bottom * W + right) * D
            for d in range(D):
                # TensorFlow's interpolation, in float32, in this order.
                tl = load(p_tl, d, half)
                tr = load(p_tr, d, half)
                bl = load(p_bl, d, half)
                br = load(p_br, d, half)
                upper = tl + (tr - tl) * x_lerp
                lower = bl + (br - bl) * x_lerp
                dst[x * D + d] = upper + (lower - upper) * y_lerp


cdef void _float_row(const ForwardPlan* p, const float* img, float* dst,
                     Py_ssize_t top, Py_ssize_t bottom, float y_lerp, float x1,
                     float x2, float wscale) noexcept nogil:
    """A crop row of a float32 image: its column taps a chunk at a time,
    then the chunk's samples by the SIMD clone (cg_lerp.h), which computes
    every channel as `_row` does."""
    cdef Py_ssize_t W = p.g.width, D = p.g.depth, cw = p.g.crop_w, x0 = 0, m, i
    cdef Py_ssize_t left[COLUMN_CHUNK]
    cdef Py_ssize_t right[COLUMN_CHUNK]
    cdef float lerp[COLUMN_CHUNK]
    while x0 < cw:
        m = min(<Py_ssize_t>COLUMN_CHUNK, cw - x0)
        for i in range(m):
            if not linear_taps(sample_coord(x1, x2, wscale, W, cw, x0 + i), W,
                               &left[i], &right[i], &lerp[i]):
                left[i] = -1
        cg_lerp_row(dst + x0 * D, D, img + top * W * D, img + bottom * W * D, D,
                    left, right, lerp, m, y_lerp, p.extrapolation, D)
        x0 += m


cdef void _typed_task(const void* ctx, const image_t* image, int half,
                      Py_ssize_t t, int thread) noexcept nogil:
    _row(<const ForwardPlan*>ctx, image, t, half)


cdef void _task(void* ctx, Py_ssize_t t, int thread) noexcept nogil:
    """Task `t`: one crop row, of the image's dtype."""
    cdef const ForwardPlan* p = <const ForwardPlan*>ctx
    _image_task(ctx, p.image, p.image_dtype, t, thread)


cdef int crop_and_resize(const Geometry* geo, const void* image, int image_dtype,
                         const float* boxes, const int64_t* box_ind,
                         float* crops, float extrapolation, int nthreads,
                         bint flush, size_t* failed) noexcept nogil:
    """Crop boxes out of the image and resize them.

    Parameters
    ----------
    geo : the problem; ``num_boxes * crop_h * crop_w * depth > 0``.
    image : [batch, height, width, depth] of `image_dtype` (a CG_ code).
        ([batch, depth, height, width] when ``geo.nchw``)
    boxes : float32 [num_boxes, 4], finite
    box_ind : int64 [num_boxes], within [0, batch)
    crops : float32 [num_boxes, crop_h, crop_w, depth]; every element written.
        ([num_boxes, depth, crop_h, crop_w] when ``geo.nchw``)
    failed : out: the bytes that could not be allocated, on failure.

    Returns
    -------
    int
        0, or -1 when scratch could not be allocated (NCHW only; nothing
        written then).
    """
    cdef ForwardPlan p
    if geo.nchw:
        return crop_and_resize_nchw(geo, image, image_dtype, boxes, box_ind, crops,
                                    extrapolation, nthreads, flush, failed)
    p.g = geo
    p.image = image
    p.image_dtype = image_dtype
    p.boxes = boxes
    p.box_ind = box_ind
    p.crops = crops
    p.extrapolation = extrapolation
    run_tasks(_task, &p, geo.num_boxes * geo.crop_h, nthreads,
              geo.num_boxes * geo.crop_h * geo.crop_w * geo.depth * 4, flush,
              SCHEDULE_STATIC)
    return 0
