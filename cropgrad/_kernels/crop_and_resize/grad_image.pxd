# cython: language_level=3
from libc.stdint cimport int64_t

from .geometry cimport Geometry

# `out_dtype`: CG_FLOAT32, CG_FLOAT64, or CG_FLOAT16 and CG_BFLOAT16 (the
# output's bits; accumulated in float32, rounded once).
cdef int grad_image(const Geometry* geo, const float* grads, const float* boxes,
                    const int64_t* box_ind, void* out, int out_dtype,
                    int nthreads, bint flush, size_t* failed) noexcept nogil
