# cython: language_level=3
"""The forward op, CropAndResize (private kernel).

Trusts its arguments: `cropgrad.capi` checks shapes, box indices and
finiteness first.  Every crop row is written by exactly one task, so the
result does not depend on the number of threads.  Each output element is
computed from its four pixels by the same float32 expression in both
layouts, so the NCHW crops are the NHWC crops transposed, bit for bit.
"""

from libc.stdint cimport int8_t, int16_t, int32_t, int64_t, uint8_t, uint16_t

from cropgrad._image cimport load
from cropgrad._parallel cimport SCHEDULE_STATIC, run_tasks
from cropgrad._sampling cimport crop_scale, linear_taps, nearest_tap, sample_coord
from cropgrad._types cimport (
    DT_FLOAT16,
    DT_FLOAT32,
    DT_INT8,
    DT_INT16,
    DT_INT32,
    DT_INT64,
    DT_UINT8,
    DT_UINT16,
    Geometry,
    image_t,
)


# Crop columns whose taps an NCHW row keeps at a time (on the stack).
cdef enum:
    COLUMN_CHUNK = 64


ctypedef struct Plan:
    const Geometry* g
    const void* image
    int image_dtype
    const float* boxes
    const int64_t* box_ind
    float* crops
    float extrapolation


cdef void _row(const Plan* p, const image_t* image, Py_ssize_t task,
               bint half) noexcept nogil:
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


cdef void _row_nchw(const Plan* p, const image_t* image, Py_ssize_t task,
                    bint half) noexcept nogil:
    """Crop row ``task % crop_h`` of box ``task // crop_h``, NCHW.

    Channel by channel: a channel's crop row is contiguous, and its pixels
    come from two rows of one plane.  The columns' taps are worked out once
    per chunk of columns and used for every channel.
    """
    cdef Py_ssize_t H = p.g.height, W = p.g.width, D = p.g.depth, HW = H * W
    cdef Py_ssize_t ch = p.g.crop_h, cw = p.g.crop_w
    cdef Py_ssize_t b = task // ch, y = task % ch, x0, n, i, d
    cdef Py_ssize_t top, bottom = 0, l, r
    cdef Py_ssize_t left[COLUMN_CHUNK]
    cdef Py_ssize_t right[COLUMN_CHUNK]
    cdef float lerp[COLUMN_CHUNK]
    cdef float y1 = p.boxes[4 * b], x1 = p.boxes[4 * b + 1]
    cdef float y2 = p.boxes[4 * b + 2], x2 = p.boxes[4 * b + 3]
    cdef float coord, y_lerp = 0, x_lerp, tl, tr, bl, br, upper, lower
    cdef float extrapolation = p.extrapolation
    cdef float wscale = crop_scale(x1, x2, W, cw)
    cdef float* dst = p.crops + (b * D * ch + y) * cw   # channel d: + d * ch * cw
    cdef float* out
    cdef const image_t* img = image + p.box_ind[b] * D * HW
    cdef const image_t* row_t
    cdef const image_t* row_b
    cdef bint inside_y
    coord = sample_coord(y1, y2, crop_scale(y1, y2, H, ch), H, ch, y)
    if p.g.nearest:
        inside_y = nearest_tap(coord, H, &top)
    else:
        inside_y = linear_taps(coord, H, &top, &bottom, &y_lerp)
    if not inside_y:
        for d in range(D):
            out = dst + d * ch * cw
            for i in range(cw):
                out[i] = extrapolation
        return
    x0 = 0
    while x0 < cw:
        n = min(<Py_ssize_t>COLUMN_CHUNK, cw - x0)
        for i in range(n):
            coord = sample_coord(x1, x2, wscale, W, cw, x0 + i)
            left[i] = -1
            if p.g.nearest:
                if nearest_tap(coord, W, &l):
                    left[i] = l
            elif linear_taps(coord, W, &l, &r, &x_lerp):
                left[i] = l
                right[i] = r
                lerp[i] = x_lerp
        for d in range(D):
            out = dst + d * ch * cw + x0
            row_t = img + d * HW + top * W
            row_b = img + d * HW + bottom * W
            for i in range(n):
                if left[i] < 0:
                    out[i] = extrapolation
                elif p.g.nearest:
                    out[i] = load(row_t, left[i], half)
                else:
                    # TensorFlow's interpolation, in float32, in this order.
                    tl = load(row_t, left[i], half)
                    tr = load(row_t, right[i], half)
                    bl = load(row_b, left[i], half)
                    br = load(row_b, right[i], half)
                    upper = tl + (tr - tl) * lerp[i]
                    lower = bl + (br - bl) * lerp[i]
                    out[i] = upper + (lower - upper) * y_lerp
        x0 += n


cdef inline void _any_row(const Plan* p, const image_t* image, Py_ssize_t t,
                          bint half) noexcept nogil:
    if p.g.nchw:
        _row_nchw(p, image, t, half)
    else:
        _row(p, image, t, half)


cdef void _task(void* ctx, Py_ssize_t t, int thread) noexcept nogil:
    """Task `t`: one crop row, of the image's dtype."""
    cdef const Plan* p = <const Plan*>ctx
    cdef int code = p.image_dtype
    if code == DT_UINT8:
        _any_row(p, <const uint8_t*>p.image, t, False)
    elif code == DT_INT8:
        _any_row(p, <const int8_t*>p.image, t, False)
    elif code == DT_UINT16:
        _any_row(p, <const uint16_t*>p.image, t, False)
    elif code == DT_FLOAT16:
        _any_row(p, <const uint16_t*>p.image, t, True)
    elif code == DT_INT16:
        _any_row(p, <const int16_t*>p.image, t, False)
    elif code == DT_INT32:
        _any_row(p, <const int32_t*>p.image, t, False)
    elif code == DT_INT64:
        _any_row(p, <const int64_t*>p.image, t, False)
    elif code == DT_FLOAT32:
        _any_row(p, <const float*>p.image, t, False)
    else:
        _any_row(p, <const double*>p.image, t, False)


cdef void crop_and_resize(const Geometry* geo, const void* image, int image_dtype,
                          const float* boxes, const int64_t* box_ind,
                          float* crops, float extrapolation, int nthreads,
                          bint flush) noexcept nogil:
    """Crop boxes out of the image and resize them.

    Parameters
    ----------
    geo : the problem; ``num_boxes * crop_h * crop_w * depth > 0``.
    image : [batch, height, width, depth] of `image_dtype` (a DT_ code).
        ([batch, depth, height, width] when ``geo.nchw``)
    boxes : float32 [num_boxes, 4], finite
    box_ind : int64 [num_boxes], within [0, batch)
    crops : float32 [num_boxes, crop_h, crop_w, depth]; every element written.
        ([num_boxes, depth, crop_h, crop_w] when ``geo.nchw``)
    """
    cdef Plan p
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
