# cython: language_level=3
from libc.stdint cimport int64_t

from ..types cimport Geometry

# What the output of `grad_image` holds.
cdef enum:
    OUT_FLOAT32 = 0
    OUT_FLOAT64 = 1
    OUT_FLOAT16 = 2    # IEEE half bits; accumulated in float32, rounded once
    OUT_BFLOAT16 = 3   # bfloat16 bits; the same

cdef int grad_image(const Geometry* geo, const float* grads, const float* boxes,
                    const int64_t* box_ind, void* out, int out_kind,
                    int nthreads, bint flush, size_t* failed) noexcept nogil
