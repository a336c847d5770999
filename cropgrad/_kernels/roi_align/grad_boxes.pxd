# cython: language_level=3
from libc.stdint cimport int64_t

from .plan cimport RoiProblem


cdef int roi_align_grad_boxes(const RoiProblem* g, const void* grads,
                              const void* image, int image_dtype,
                              const void* boxes, const int64_t* box_ind, void* out,
                              int nthreads, bint flush, size_t* failed) noexcept nogil
