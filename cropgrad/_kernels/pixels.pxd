# cython: language_level=3
#
# Reading pixels of any image dtype as float32: shared by the forward op,
# the boxes gradient and the boxes JVP.

from libc.stdint cimport int8_t, int16_t, int32_t, int64_t, uint8_t, uint16_t

from cropgrad.capi cimport CG_BFLOAT16, CG_FLOAT16

from .cdefs cimport cg_bfloat16_to_float, cg_half_to_float
from .types cimport image_t


cdef inline float load(const image_t* image, Py_ssize_t i, int half) noexcept nogil:
    """Pixel `i` as float32: C's conversion; float16 and bfloat16 bits
    exactly.  `half`: the image's dtype code, which says what uint16
    storage holds (CG_FLOAT16 and CG_BFLOAT16 bits, or CG_UINT16 integers);
    the kernels' functions pass it on under that name."""
    if image_t is uint16_t:
        if half == CG_FLOAT16:
            return cg_half_to_float(image[i])
        if half == CG_BFLOAT16:
            return cg_bfloat16_to_float(image[i])
    return <float>image[i]
