# cython: language_level=3
from libc.stdint cimport int64_t

from .plan cimport RoiProblem


cdef int roi_align_jvp_boxes(const RoiProblem* g, const void* image,
                             int image_dtype, const void* boxes,
                             const void* tangent, const int64_t* box_ind,
                             void* out, int out_dtype, int nthreads, bint flush,
                             size_t* failed) noexcept nogil
