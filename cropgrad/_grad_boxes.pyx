# cython: language_level=3
"""The boxes gradient, CropAndResizeGradBoxes (private kernel).

Trusts its arguments: `cropgrad.capi` checks shapes, box indices and
finiteness first.  Each box's four sums belong to one task and are added
in the serial order (crop row, crop column, channel), so the result does
not depend on the number of threads.
"""

from libc.stdint cimport int8_t, int16_t, int32_t, int64_t, uint8_t, uint16_t
from libc.stdlib cimport free, malloc
from libc.string cimport memset

from cropgrad._image cimport load
from cropgrad._parallel cimport SCHEDULE_DYNAMIC, SERIAL_WORK, run_tasks, team_size
from cropgrad._sampling cimport crop_ratio, linear_taps, sample_coord
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


ctypedef struct Plan:
    const Geometry* g
    const float* grads
    const void* image
    int image_dtype
    const float* boxes
    const int64_t* box_ind
    float* out
    # Per thread, 8 * crop_w * depth floats of terms (see _pair)
    float* terms


cdef void _one(const Plan* p, const image_t* image, Py_ssize_t b,
               bint half) noexcept nogil:
    """The four box-coordinate gradients of box `b`, summed in serial order.

    For crops of one row or one column, whose sums are partly in double.
    """
    cdef Py_ssize_t H = p.g.height, W = p.g.width, D = p.g.depth
    cdef Py_ssize_t ch = p.g.crop_h, cw = p.g.crop_w
    cdef float y1 = p.boxes[4 * b], x1 = p.boxes[4 * b + 1]
    cdef float y2 = p.boxes[4 * b + 2], x2 = p.boxes[4 * b + 3]
    cdef float h_ratio = crop_ratio(H, ch), w_ratio = crop_ratio(W, cw)
    cdef float h_scale = (y2 - y1) * h_ratio if ch > 1 else 0
    cdef float w_scale = (x2 - x1) * w_ratio if cw > 1 else 0
    cdef float dy1 = 0, dx1 = 0, dy2 = 0, dx2 = 0
    cdef float y_lerp, x_lerp, tl, tr, bl, br, grad_y, grad_x, g
    cdef Py_ssize_t y, x, d, top, bottom, left, right
    cdef const image_t* img = image + p.box_ind[b] * H * W * D
    cdef const float* gp
    for y in range(ch):
        if not linear_taps(sample_coord(y1, y2, h_scale, H, ch, y), H,
                           &top, &bottom, &y_lerp):
            continue
        for x in range(cw):
            if not linear_taps(sample_coord(x1, x2, w_scale, W, cw, x), W,
                               &left, &right, &x_lerp):
                continue
            gp = p.grads + ((b * ch + y) * cw + x) * D
            for d in range(D):
                tl = load(img, (top * W + left) * D + d, half)
                tr = load(img, (top * W + right) * D + d, half)
                bl = load(img, (bottom * W + left) * D + d, half)
                br = load(img, (bottom * W + right) * D + d, half)
                grad_y = (<float>1 - x_lerp) * (bl - tl) + x_lerp * (br - tr)
                grad_x = (<float>1 - y_lerp) * (tr - tl) + y_lerp * (br - bl)
                g = gp[d]
                grad_y = grad_y * g
                grad_x = grad_x * g
                if ch > 1:
                    dy1 += grad_y * (<float>(H - 1) - <float>y * h_ratio)
                    dy2 += grad_y * (<float>y * h_ratio)
                else:
                    # A double product added to the float32 sum in double,
                    # then rounded: the reference kernel's `float += double`.
                    dy1 = <float>(<double>dy1 + <double>grad_y * 0.5 * <double>(H - 1))
                    dy2 = <float>(<double>dy2 + <double>grad_y * 0.5 * <double>(H - 1))
                if cw > 1:
                    dx1 += grad_x * (<float>(W - 1) - <float>x * w_ratio)
                    dx2 += grad_x * (<float>x * w_ratio)
                else:
                    dx1 = <float>(<double>dx1 + <double>grad_x * 0.5 * <double>(W - 1))
                    dx2 = <float>(<double>dx2 + <double>grad_x * 0.5 * <double>(W - 1))
    p.out[4 * b + 0] = dy1
    p.out[4 * b + 1] = dx1
    p.out[4 * b + 2] = dy2
    p.out[4 * b + 3] = dx2


cdef Py_ssize_t _row_terms(const Plan* p, const image_t* image, Py_ssize_t b,
                           Py_ssize_t y, bint half, float* terms) noexcept nogil:
    """The terms crop row `y` of box `b` adds to its four box gradients.

    Writes ``terms[4 * i + k]`` for term i, in the serial (column, channel)
    order, and accumulator k (dy1, dx1, dy2, dx2), and returns the number of
    terms.  One interleaved array keeps the overlap checks of the vectorized
    loop few enough for the compiler to emit them.  Needs ``crop_h > 1``
    and ``crop_w > 1``.  Only the sums are serial; the terms themselves are
    independent, so this loop vectorizes over channels.
    """
    cdef Py_ssize_t H = p.g.height, W = p.g.width, D = p.g.depth
    cdef Py_ssize_t ch = p.g.crop_h, cw = p.g.crop_w
    cdef float y1 = p.boxes[4 * b], x1 = p.boxes[4 * b + 1]
    cdef float y2 = p.boxes[4 * b + 2], x2 = p.boxes[4 * b + 3]
    cdef float h_ratio = crop_ratio(H, ch), w_ratio = crop_ratio(W, cw)
    cdef float h_scale = (y2 - y1) * h_ratio, w_scale = (x2 - x1) * w_ratio
    cdef float y_lerp, x_lerp, tl, tr, bl, br, grad_y, grad_x, g
    cdef float f_y1 = <float>(H - 1) - <float>y * h_ratio, f_y2 = <float>y * h_ratio
    cdef float f_x1, f_x2
    cdef Py_ssize_t x, d, top, bottom, left, right, n = 0
    cdef const image_t* img = image + p.box_ind[b] * H * W * D
    cdef const image_t* p_tl
    cdef const image_t* p_tr
    cdef const image_t* p_bl
    cdef const image_t* p_br
    cdef const float* gp
    cdef float* t
    if not linear_taps(sample_coord(y1, y2, h_scale, H, ch, y), H,
                       &top, &bottom, &y_lerp):
        return 0
    for x in range(cw):
        if not linear_taps(sample_coord(x1, x2, w_scale, W, cw, x), W,
                           &left, &right, &x_lerp):
            continue
        f_x1 = <float>(W - 1) - <float>x * w_ratio
        f_x2 = <float>x * w_ratio
        p_tl = img + (top * W + left) * D
        p_tr = img + (top * W + right) * D
        p_bl = img + (bottom * W + left) * D
        p_br = img + (bottom * W + right) * D
        gp = p.grads + ((b * ch + y) * cw + x) * D
        t = terms + 4 * n
        for d in range(D):
            tl = load(p_tl, d, half)
            tr = load(p_tr, d, half)
            bl = load(p_bl, d, half)
            br = load(p_br, d, half)
            grad_y = (<float>1 - x_lerp) * (bl - tl) + x_lerp * (br - tr)
            grad_x = (<float>1 - y_lerp) * (tr - tl) + y_lerp * (br - bl)
            g = gp[d]
            grad_y = grad_y * g
            grad_x = grad_x * g
            t[4 * d] = grad_y * f_y1
            t[4 * d + 1] = grad_x * f_x1
            t[4 * d + 2] = grad_y * f_y2
            t[4 * d + 3] = grad_x * f_x2
        n += D
    return n


cdef void _pair(const Plan* p, const image_t* image, Py_ssize_t b0,
                Py_ssize_t b1, bint half, float* terms) noexcept nogil:
    """Box gradients of boxes `b0` and `b1` (or `b0` alone when ``b1 < 0``).

    Each box's four sums are serial chains of float32 additions, slow to
    wait on one at a time; summing two boxes in one loop keeps eight chains
    in flight.  Each chain still adds its own terms in the serial order.
    `terms` holds ``8 * crop_w * depth`` floats.
    """
    cdef float a0 = 0, a1 = 0, a2 = 0, a3 = 0
    cdef float c0 = 0, c1 = 0, c2 = 0, c3 = 0
    cdef Py_ssize_t y, i, na, nb, common
    cdef float* ta = terms
    cdef float* tb = terms + 4 * p.g.crop_w * p.g.depth
    for y in range(p.g.crop_h):
        na = _row_terms(p, image, b0, y, half, ta)
        nb = 0
        if b1 >= 0:
            nb = _row_terms(p, image, b1, y, half, tb)
        common = min(na, nb)
        for i in range(common):
            a0 += ta[4 * i]
            a1 += ta[4 * i + 1]
            a2 += ta[4 * i + 2]
            a3 += ta[4 * i + 3]
            c0 += tb[4 * i]
            c1 += tb[4 * i + 1]
            c2 += tb[4 * i + 2]
            c3 += tb[4 * i + 3]
        for i in range(common, na):
            a0 += ta[4 * i]
            a1 += ta[4 * i + 1]
            a2 += ta[4 * i + 2]
            a3 += ta[4 * i + 3]
        for i in range(common, nb):
            c0 += tb[4 * i]
            c1 += tb[4 * i + 1]
            c2 += tb[4 * i + 2]
            c3 += tb[4 * i + 3]
    p.out[4 * b0 + 0] = a0
    p.out[4 * b0 + 1] = a1
    p.out[4 * b0 + 2] = a2
    p.out[4 * b0 + 3] = a3
    if b1 >= 0:
        p.out[4 * b1 + 0] = c0
        p.out[4 * b1 + 1] = c1
        p.out[4 * b1 + 2] = c2
        p.out[4 * b1 + 3] = c3


cdef void _typed_task(const Plan* p, const image_t* image, Py_ssize_t t,
                      bint half, float* terms) noexcept nogil:
    """Box `t` for one-row or one-column crops, boxes 2t and 2t + 1 otherwise."""
    cdef Py_ssize_t N = p.g.num_boxes
    if p.g.crop_h == 1 or p.g.crop_w == 1:
        _one(p, image, t, half)
    else:
        _pair(p, image, 2 * t, 2 * t + 1 if 2 * t + 1 < N else -1, half, terms)


cdef void _task(void* ctx, Py_ssize_t t, int thread) noexcept nogil:
    """Task `t`, of the image's dtype, with thread `thread`'s scratch."""
    cdef const Plan* p = <const Plan*>ctx
    cdef float* terms = p.terms + <Py_ssize_t>thread * 8 * p.g.crop_w * p.g.depth
    cdef int code = p.image_dtype
    if code == DT_UINT8:
        _typed_task(p, <const uint8_t*>p.image, t, False, terms)
    elif code == DT_INT8:
        _typed_task(p, <const int8_t*>p.image, t, False, terms)
    elif code == DT_UINT16:
        _typed_task(p, <const uint16_t*>p.image, t, False, terms)
    elif code == DT_FLOAT16:
        _typed_task(p, <const uint16_t*>p.image, t, True, terms)
    elif code == DT_INT16:
        _typed_task(p, <const int16_t*>p.image, t, False, terms)
    elif code == DT_INT32:
        _typed_task(p, <const int32_t*>p.image, t, False, terms)
    elif code == DT_INT64:
        _typed_task(p, <const int64_t*>p.image, t, False, terms)
    elif code == DT_FLOAT32:
        _typed_task(p, <const float*>p.image, t, False, terms)
    else:
        _typed_task(p, <const double*>p.image, t, False, terms)


cdef int grad_boxes(const Geometry* geo, const float* grads, const void* image,
                    int image_dtype, const float* boxes, const int64_t* box_ind,
                    float* out, int nthreads, bint flush,
                    size_t* failed) noexcept nogil:
    """Gradient of crop-and-resize with respect to the boxes (NHWC, bilinear).

    Parameters
    ----------
    geo : the problem; ``num_boxes > 0``.
    grads : float32 [num_boxes, crop_h, crop_w, depth]
    image : [batch, height, width, depth] of `image_dtype` (a DT_ code).
    boxes : float32 [num_boxes, 4], finite
    box_ind : int64 [num_boxes], within [0, batch)
    out : float32 [num_boxes, 4]; every element written.
    failed : out: the bytes that could not be allocated, on failure.

    Returns
    -------
    int
        0, or -1 when scratch could not be allocated (nothing written).
    """
    cdef Plan p
    cdef Py_ssize_t N = geo.num_boxes, num_tasks, work
    cdef int team
    cdef size_t nbytes
    if geo.depth == 0 or geo.batch == 0:
        memset(out, 0, 4 * N * sizeof(float))
        return 0
    # One-row or one-column crops accumulate partly in double: one box per
    # task; otherwise two (see _pair).
    if geo.crop_h == 1 or geo.crop_w == 1:
        num_tasks = N
    else:
        num_tasks = (N + 1) // 2
    work = N * geo.crop_h * geo.crop_w * geo.depth * 8
    team = team_size(nthreads, num_tasks) if work >= SERIAL_WORK else 1
    nbytes = <size_t>team * 8 * geo.crop_w * geo.depth * sizeof(float)
    p.terms = <float*>malloc(nbytes)
    if p.terms == NULL:
        failed[0] = nbytes
        return -1
    memset(out, 0, 4 * N * sizeof(float))
    p.g = geo
    p.grads = grads
    p.image = image
    p.image_dtype = image_dtype
    p.boxes = boxes
    p.box_ind = box_ind
    p.out = out
    run_tasks(_task, &p, num_tasks, team, work, flush, SCHEDULE_DYNAMIC)
    free(p.terms)
    return 0
