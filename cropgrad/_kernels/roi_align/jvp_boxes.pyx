# cython: language_level=3
"""RoIAlign's derivative along a tangent of the boxes (private kernel).

Trusts its arguments: the gate (cropgrad/_capi) checks them first.  Each
output element is the sum over its bin's inside samples, in the serial
order (sample row, sample column), of the image's slopes times how fast
the sample moves along the tangent, divided by the count: the boxes
gradient's terms, so that the boxes gradient is this map's transpose.
The forward op's tasks (bins.pxd): no element is a sum over tasks, so the
result does not depend on the number of threads.
"""

from libc.stdint cimport int64_t

from cropgrad._runtime.simd cimport chosen_target

from ..cdefs cimport cg_simd_select
from ..types cimport image_t

from .bins cimport run_bins, tangent_t, typed_task
from .plan cimport RoiPlan, RoiProblem

include "../image_dtypes.pxi"


# This module's channel loops and plane transposes run on the instruction
# set the runtime chose for the process.
cg_simd_select(chosen_target())


cdef void _typed_task(const void* ctx, const image_t* image, int half,
                      Py_ssize_t t, int thread) noexcept nogil:
    typed_task(<const RoiPlan*>ctx, image, half, t, thread, <tangent_t*>NULL)


cdef void _task(void* ctx, Py_ssize_t t, int thread) noexcept nogil:
    cdef const RoiPlan* p = <const RoiPlan*>ctx
    _image_task(ctx, p.image, p.image_dtype, t, thread)


cdef int roi_align_jvp_boxes(const RoiProblem* g, const void* image,
                             int image_dtype, const void* boxes,
                             const void* tangent, const int64_t* box_ind,
                             void* out, int out_dtype, int nthreads, bint flush,
                             size_t* failed) noexcept nogil:
    """The derivative of RoIAlign along `tangent`, a tangent of the boxes.

    Parameters
    ----------
    g, image, boxes, box_ind, out, out_dtype, nthreads, flush, failed
        As for `forward.roi_align`.
    tangent : [num_boxes, 4] ``t_x1, t_y1, t_x2, t_y2`` in the arithmetic
        type, any values.

    Returns
    -------
    int
        0, or -1 when the scratch could not be allocated (nothing written).
    """
    cdef RoiPlan p
    p.g = g
    p.image = image
    p.image_dtype = image_dtype
    p.boxes = boxes
    p.tangent = tangent
    p.box_ind = box_ind
    p.out = out
    p.out_dtype = out_dtype
    return run_bins(&p, nthreads, flush, _task, 24, failed)
