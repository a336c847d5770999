# cython: language_level=3
from libc.stdint cimport int64_t

from .geometry cimport Geometry


cdef int jvp_boxes(const Geometry* geo, const void* image, int image_dtype,
                   const float* boxes, const float* tangent, const int64_t* box_ind,
                   float* out, int nthreads, bint flush) noexcept nogil
