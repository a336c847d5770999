# cython: language_level=3
from libc.stdint cimport int64_t

from .geometry cimport Geometry


cdef int crop_and_resize(const Geometry* geo, const void* image, int image_dtype,
                         const float* boxes, const int64_t* box_ind,
                         float* crops, float extrapolation, int nthreads,
                         bint flush, size_t* failed) noexcept nogil
