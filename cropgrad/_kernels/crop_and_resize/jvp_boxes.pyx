# cython: language_level=3
"""The boxes JVP: crop_and_resize's derivative along a tangent of the boxes
(private kernel).

Trusts its arguments: the gate (cropgrad/_capi) checks shapes, box indices
and finiteness first.  Each crop element is the image's slope at the sample
along y and x times how fast the sample's coordinates move
(`coord_tangent`), with the sampling coordinates, slopes and factors of
the boxes gradient (`grad_boxes`), which is therefore this map's
transpose.  Every crop row is written by one task and no element is a sum
over tasks, so the result does not depend on the number of threads.  NCHW
computes every element by the same expression, with NCHW strides: its
result is the NHWC result transposed, bit for bit.
"""

from libc.stdint cimport int64_t

from cropgrad._runtime.parallel cimport SCHEDULE_STATIC, run_tasks

from ..pixels cimport load
from ..types cimport image_t, layout_t, nchw_t, nhwc_t
from .geometry cimport Geometry

from .sampling cimport coord_tangent, crop_ratio, linear_taps, sample_coord

include "../image_dtypes.pxi"


ctypedef struct JvpBoxesPlan:
    const Geometry* g
    const void* image
    int image_dtype
    const float* boxes
    const float* tangent
    const int64_t* box_ind
    float* out


cdef void _row(const JvpBoxesPlan* p, const image_t* image, Py_ssize_t task, int half,
               layout_t* layout) noexcept nogil:
    """Crop row ``task % crop_h`` of box ``task // crop_h``: every element."""
    cdef Py_ssize_t H = p.g.height, W = p.g.width, D = p.g.depth
    cdef Py_ssize_t ch = p.g.crop_h, cw = p.g.crop_w
    cdef Py_ssize_t b = task // ch, y = task % ch, x, d
    cdef Py_ssize_t top, bottom, left, right
    cdef const float* box = p.boxes + 4 * b
    cdef const float* tan = p.tangent + 4 * b
    cdef float h_ratio = crop_ratio(H, ch), w_ratio = crop_ratio(W, cw)
    # The boxes gradient's spacing (not the forward op's crop_scale).
    cdef float h_scale = (box[2] - box[0]) * h_ratio if ch > 1 else 0
    cdef float w_scale = (box[3] - box[1]) * w_ratio if cw > 1 else 0
    cdef float y_lerp, x_lerp, tl, tr, bl, br, slope_y, slope_x, rate_y, rate_x
    cdef const image_t* img = image + p.box_ind[b] * H * W * D
    cdef const image_t* at
    # Pixel and channel strides of the image; crop column and channel
    # strides of the output, from this crop row's first element.
    cdef Py_ssize_t px = D, cs = 1, ox = D, od = 1
    cdef float* dst = p.out + (b * ch + y) * cw * D
    if layout_t is nchw_t:
        px, cs, ox, od = 1, H * W, 1, ch * cw
        dst = p.out + b * D * ch * cw + y * cw
    if not linear_taps(sample_coord(box[0], box[2], h_scale, H, ch, y), H,
                       &top, &bottom, &y_lerp):
        for x in range(cw):
            for d in range(D):
                dst[x * ox + d * od] = 0
        return
    rate_y = coord_tangent(tan[0], tan[2], h_ratio, H, ch, y)
    for x in range(cw):
        if not linear_taps(sample_coord(box[1], box[3], w_scale, W, cw, x), W,
                           &left, &right, &x_lerp):
            for d in range(D):
                dst[x * ox + d * od] = 0
            continue
        rate_x = coord_tangent(tan[1], tan[3], w_ratio, W, cw, x)
        for d in range(D):
            at = img + d * cs
            tl = load(at, (top * W + left) * px, half)
            tr = load(at, (top * W + right) * px, half)
            bl = load(at, (bottom * W + left) * px, half)
            br = load(at, (bottom * W + right) * px, half)
            # The boxes gradient's slopes, in its order (without its grads).
            slope_y = (<float>1 - x_lerp) * (bl - tl) + x_lerp * (br - tr)
            slope_x = (<float>1 - y_lerp) * (tr - tl) + y_lerp * (br - bl)
            dst[x * ox + d * od] = slope_y * rate_y + slope_x * rate_x


cdef void _typed_task(const void* ctx, const image_t* image, int half,
                      Py_ssize_t t, int thread) noexcept nogil:
    cdef const JvpBoxesPlan* p = <const JvpBoxesPlan*>ctx
    if p.g.nchw:
        _row(p, image, t, half, <nchw_t*>NULL)
    else:
        _row(p, image, t, half, <nhwc_t*>NULL)


cdef void _task(void* ctx, Py_ssize_t t, int thread) noexcept nogil:
    """Task `t`: one crop row, of the image's dtype."""
    cdef const JvpBoxesPlan* p = <const JvpBoxesPlan*>ctx
    _image_task(ctx, p.image, p.image_dtype, t, thread)


cdef int jvp_boxes(const Geometry* geo, const void* image, int image_dtype,
                   const float* boxes, const float* tangent, const int64_t* box_ind,
                   float* out, int nthreads, bint flush) noexcept nogil:
    """Derivative of crop-and-resize along `tangent`, a tangent of the boxes.

    Parameters
    ----------
    geo : the problem (bilinear); ``num_boxes * crop_h * crop_w * depth > 0``.
    image : [batch, height, width, depth] of `image_dtype` (a CG_ code).
        ([batch, depth, height, width] when ``geo.nchw``)
    boxes : float32 [num_boxes, 4], finite
    tangent : float32 [num_boxes, 4], any values
    box_ind : int64 [num_boxes], within [0, batch)
    out : float32 [num_boxes, crop_h, crop_w, depth]; every element written.
        ([num_boxes, depth, crop_h, crop_w] when ``geo.nchw``)

    Returns
    -------
    int
        0 (the kernel needs no scratch).
    """
    cdef JvpBoxesPlan p
    p.g = geo
    p.image = image
    p.image_dtype = image_dtype
    p.boxes = boxes
    p.tangent = tangent
    p.box_ind = box_ind
    p.out = out
    run_tasks(_task, &p, geo.num_boxes * geo.crop_h, nthreads,
              geo.num_boxes * geo.crop_h * geo.crop_w * geo.depth * 8, flush,
              SCHEDULE_STATIC)
    return 0
