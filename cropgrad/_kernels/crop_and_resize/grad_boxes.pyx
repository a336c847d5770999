# cython: language_level=3
"""The boxes gradient, CropAndResizeGradBoxes (private kernel).

Trusts its arguments: the gate (cropgrad/_capi) checks shapes, box indices
and finiteness first.  Each box's four sums belong to one task and are added
in the serial order (crop row, crop column, channel), so the result does
not depend on the number of threads.

NCHW problems go to `grad_boxes_nchw`, which adds the same terms in the
same order: its result is the NHWC result on the transposed arrays, bit
for bit.
"""

from libc.stdint cimport int64_t
from libc.stdlib cimport free, malloc
from libc.string cimport memset

from cropgrad._runtime.parallel cimport (
    SCHEDULE_DYNAMIC,
    run_tasks,
    serial_work,
    team_size,
)
from cropgrad._runtime.simd cimport chosen_target

from ..cdefs cimport cg_prefetch, cg_simd_select, cg_sum_terms, cg_terms
from ..pixels cimport load
from ..types cimport image_t, nhwc_t
from .geometry cimport Geometry

from .grad_boxes_nchw cimport grad_boxes_nchw
from .grad_boxes_plan cimport GROUP, BoxesGradPlan, one_box
from .sampling cimport crop_ratio, linear_taps, sample_coord

include "../image_dtypes.pxi"


# How far ahead of a sample's grads to ask for them: 2 KiB, as the image
# gradient's deep scatter does.
cdef enum:
    PREFETCH_FLOATS = 2048 // 4


# This module's terms run on the instruction set the runtime chose for the
# process (each module holds its own pointers to the clones of cg_simd.h).
cg_simd_select(chosen_target())


cdef Py_ssize_t _row_terms(const BoxesGradPlan* p, const image_t* image, Py_ssize_t b,
                           Py_ssize_t y, int half, float* terms) noexcept nogil:
    """The terms crop row `y` of box `b` adds to its four box gradients.

    Writes ``terms[4 * i + k]`` for term i, in the serial (column, channel)
    order, and accumulator k (dy1, dx1, dy2, dx2), and returns the number of
    terms.  One interleaved array keeps the overlap checks of the vectorized
    loop few enough for the compiler to emit them.  Needs ``crop_h > 1``
    and ``crop_w > 1``.  Only the sums are serial; the terms themselves are
    independent, so this loop vectorizes over channels: for float32 pixels
    in `cg_terms` (cg_terms.h), whose SIMD clone is chosen at run time.
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
    cdef const float* ahead
    cdef const float* end
    cdef const float* grads_end = p.grads + p.g.num_boxes * ch * cw * D
    if not linear_taps(sample_coord(y1, y2, h_scale, H, ch, y), H,
                       &top, &bottom, &y_lerp):
        return 0
    for x in range(cw):
        if not linear_taps(sample_coord(x1, x2, w_scale, W, cw, x), W,
                           &left, &right, &x_lerp):
            continue
        f_x1 = <float>(W - 1) - <float>x * w_ratio
        f_x2 = <float>x * w_ratio
        t = terms + 4 * n
        n += D
        p_tl = img + (top * W + left) * D
        p_tr = img + (top * W + right) * D
        p_bl = img + (bottom * W + left) * D
        p_br = img + (bottom * W + right) * D
        gp = p.grads + ((b * ch + y) * cw + x) * D
        if image_t is float:
            # grads is read once, in order: ask for it PREFETCH_BYTES ahead
            # (the terms otherwise wait on it).
            ahead = gp + PREFETCH_FLOATS
            end = min(ahead + D, grads_end)
            while ahead < end:
                cg_prefetch(ahead)
                ahead += 16
            cg_terms(p_tl, p_tr, p_bl, p_br, gp, x_lerp, <float>1 - x_lerp, y_lerp,
                     <float>1 - y_lerp, f_y1, f_x1, f_y2, f_x2, D, t)
        else:
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
    return n


cdef void _group(const BoxesGradPlan* p, const image_t* image, Py_ssize_t b0,
                 int count, int half, float* terms) noexcept nogil:
    """Box gradients of boxes ``b0`` to ``b0 + count - 1`` (at most GROUP).

    Each box's four sums are serial chains of float32 additions, slow to
    wait on one at a time: crop row by crop row, the boxes' terms are
    computed, then added to their sums together (cg_sum_terms).  Each chain
    still adds its own terms in the serial order.  `terms` holds
    ``GROUP * 4 * crop_w * depth`` floats.
    The sums start from the zeroed output.
    """
    cdef Py_ssize_t row_terms = 4 * p.g.crop_w * p.g.depth, y
    cdef float* box_terms[GROUP]
    cdef Py_ssize_t n[GROUP]
    cdef int j
    for j in range(count):
        box_terms[j] = terms + j * row_terms
    for y in range(p.g.crop_h):
        for j in range(count):
            n[j] = _row_terms(p, image, b0 + j, y, half, box_terms[j])
        cg_sum_terms(p.out + 4 * b0, box_terms, n, count)


cdef void _typed_task(const void* ctx, const image_t* image, int half,
                      Py_ssize_t t, int thread) noexcept nogil:
    """Box `t` for one-row or one-column crops, boxes ``GROUP * t`` to
    ``GROUP * t + GROUP - 1`` otherwise, with thread `thread`'s terms."""
    cdef const BoxesGradPlan* p = <const BoxesGradPlan*>ctx
    cdef Py_ssize_t N = p.g.num_boxes
    cdef float* terms
    if p.g.crop_h == 1 or p.g.crop_w == 1:
        one_box(p, image, t, half, <nhwc_t*>NULL)
        return
    terms = p.terms + <Py_ssize_t>thread * GROUP * 4 * p.g.crop_w * p.g.depth
    _group(p, image, GROUP * t, <int>min(GROUP, N - GROUP * t), half, terms)


cdef void _task(void* ctx, Py_ssize_t t, int thread) noexcept nogil:
    """Task `t`, of the image's dtype."""
    cdef const BoxesGradPlan* p = <const BoxesGradPlan*>ctx
    _image_task(ctx, p.image, p.image_dtype, t, thread)


cdef int grad_boxes(const Geometry* geo, const float* grads, const void* image,
                    int image_dtype, const float* boxes, const int64_t* box_ind,
                    float* out, int nthreads, bint flush,
                    size_t* failed) noexcept nogil:
    """Gradient of crop-and-resize with respect to the boxes (bilinear).

    Parameters
    ----------
    geo : the problem; ``num_boxes > 0``.
    grads : float32 [num_boxes, crop_h, crop_w, depth]
        ([num_boxes, depth, crop_h, crop_w] when ``geo.nchw``)
    image : [batch, height, width, depth] of `image_dtype` (a CG_ code).
        ([batch, depth, height, width] when ``geo.nchw``)
    boxes : float32 [num_boxes, 4], finite
    box_ind : int64 [num_boxes], within [0, batch)
    out : float32 [num_boxes, 4]; every element written.
    failed : out: the bytes that could not be allocated, on failure.

    Returns
    -------
    int
        0, or -1 when scratch could not be allocated (nothing written).
    """
    cdef BoxesGradPlan p
    cdef Py_ssize_t N = geo.num_boxes, num_tasks, work
    cdef int team
    cdef size_t nbytes
    if geo.depth == 0 or geo.batch == 0:
        memset(out, 0, 4 * N * sizeof(float))
        return 0
    if geo.nchw:
        return grad_boxes_nchw(geo, grads, image, image_dtype, boxes, box_ind, out,
                               nthreads, flush, failed)
    # One-row or one-column crops accumulate partly in double: one box per
    # task; otherwise GROUP (see _group).
    if geo.crop_h == 1 or geo.crop_w == 1:
        num_tasks = N
    else:
        num_tasks = (N + GROUP - 1) // GROUP
    work = N * geo.crop_h * geo.crop_w * geo.depth * 8
    team = team_size(nthreads, num_tasks) if work >= serial_work() else 1
    nbytes = <size_t>team * GROUP * 4 * geo.crop_w * geo.depth * sizeof(float)
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
