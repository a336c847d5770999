# cython: language_level=3
#
# The plan of a boxes-gradient call and its one-row or one-column boxes,
# shared by its NHWC tasks (grad_boxes.pyx) and its NCHW tasks
# (grad_boxes_nchw.pyx): both layouts add the same terms the same way.

from libc.stdint cimport int64_t

from ..cdefs cimport CG_SUM_GROUP
from ..pixels cimport load
from ..types cimport image_t, layout_t, nchw_t
from .geometry cimport Geometry

from .sampling cimport crop_ratio, linear_taps, sample_coord

# Boxes per task (bilinear crops of more than one row and column): their
# sums advance together (cg_sum_terms).
cdef enum:
    GROUP = CG_SUM_GROUP


ctypedef struct BoxesGradPlan:
    const Geometry* g
    const float* grads
    const void* image
    int image_dtype
    const float* boxes
    const int64_t* box_ind
    float* out
    # Per thread, GROUP * 4 * crop_w * depth floats of terms (see _group)
    float* terms


cdef inline void one_box(const BoxesGradPlan* p, const image_t* image, Py_ssize_t b,
                         int half, layout_t* layout) noexcept nogil:
    """The four box-coordinate gradients of box `b`, summed in serial order.

    For crops of one row or one column, whose sums are partly in double;
    read in place, in either layout (`layout`: a NULL of its tag type).
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
    # Pixel and channel strides of the image, channel stride of grads.
    cdef Py_ssize_t px = D, cs = 1, gc = 1
    if layout_t is nchw_t:
        px, cs, gc = 1, H * W, ch * cw
    for y in range(ch):
        if not linear_taps(sample_coord(y1, y2, h_scale, H, ch, y), H,
                           &top, &bottom, &y_lerp):
            continue
        for x in range(cw):
            if not linear_taps(sample_coord(x1, x2, w_scale, W, cw, x), W,
                               &left, &right, &x_lerp):
                continue
            if layout_t is nchw_t:
                gp = p.grads + b * D * ch * cw + y * cw + x
            else:
                gp = p.grads + ((b * ch + y) * cw + x) * D
            for d in range(D):
                tl = load(img, (top * W + left) * px + d * cs, half)
                tr = load(img, (top * W + right) * px + d * cs, half)
                bl = load(img, (bottom * W + left) * px + d * cs, half)
                br = load(img, (bottom * W + right) * px + d * cs, half)
                grad_y = (<float>1 - x_lerp) * (bl - tl) + x_lerp * (br - tr)
                grad_x = (<float>1 - y_lerp) * (tr - tl) + y_lerp * (br - bl)
                g = gp[d * gc]
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
