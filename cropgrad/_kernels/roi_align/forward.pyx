# cython: language_level=3
"""RoIAlign's forward op, average pooling (private kernel).

Trusts its arguments: the gate (cropgrad/_capi) checks shapes, box indices,
finite boxes and the samples per bin first.  Every output element is one
task's sum over its bin's samples in torchvision's order (sample row,
sample column), divided by the count, so the result does not depend on the
number of threads; the tasks, shared with the JVP, are in bins.pxd.
"""

from libc.stdint cimport int64_t

from cropgrad._runtime.simd cimport chosen_target

from ..cdefs cimport cg_simd_select
from ..types cimport image_t

from .bins cimport pool_t, run_bins, typed_task
from .plan cimport RoiPlan, RoiProblem

include "../image_dtypes.pxi"


# This module's channel loops and plane transposes run on the instruction
# set the runtime chose for the process.
cg_simd_select(chosen_target())


cdef void _typed_task(const void* ctx, const image_t* image, int half,
                      Py_ssize_t t, int thread) noexcept nogil:
    typed_task(<const RoiPlan*>ctx, image, half, t, thread, <pool_t*>NULL)


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
    p.g = g
    p.image = image
    p.image_dtype = image_dtype
    p.boxes = boxes
    p.tangent = NULL
    p.box_ind = box_ind
    p.out = out
    p.out_dtype = out_dtype
    return run_bins(&p, nthreads, flush, _task, 16, failed)
