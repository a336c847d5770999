# cython: language_level=3
#
# Reading pixels of any image dtype as float32: shared by the forward op,
# the boxes gradient and the boxes JVP.

from libc.stdint cimport int8_t, int16_t, int32_t, int64_t, uint8_t, uint16_t

from .cdefs cimport cg_bfloat16_to_float, cg_half_to_float
from .types cimport image_t


# What uint16 storage holds: the `half` argument of `load` (and of the
# kernels' functions that pass it on).
cdef enum:
    HALF_NONE = 0        # uint16 integers
    HALF_FLOAT16 = 1     # IEEE binary16 bits
    HALF_BFLOAT16 = 2    # bfloat16 bits (the upper half of a binary32)


cdef inline float load(const image_t* image, Py_ssize_t i, int half) noexcept nogil:
    """Pixel `i` as float32: C's conversion; float16 and bfloat16 bits
    exactly."""
    if image_t is uint16_t:
        if half == HALF_FLOAT16:
            return cg_half_to_float(image[i])
        if half == HALF_BFLOAT16:
            return cg_bfloat16_to_float(image[i])
    return <float>image[i]
