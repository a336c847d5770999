# cython: language_level=3
from libc.stdint cimport int64_t

from .geometry cimport Geometry


cdef int grad_boxes(const Geometry* geo, const float* grads, const void* image,
                    int image_dtype, const float* boxes, const int64_t* box_ind,
                    float* out, int nthreads, bint flush,
                    size_t* failed) noexcept nogil
