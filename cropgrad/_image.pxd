# cython: language_level=3
#
# Reading pixels of any image dtype as float32: shared by the forward op and
# the boxes gradient.

from libc.stdint cimport int8_t, int16_t, int32_t, int64_t, uint8_t, uint16_t

from cropgrad._cdefs cimport cg_half_to_float
from cropgrad._types cimport image_t


cdef inline float load(const image_t* image, Py_ssize_t i, bint half) noexcept nogil:
    """Pixel `i` as float32: C's conversion, float16 bits exactly."""
    if image_t is uint16_t:
        if half:
            return cg_half_to_float(image[i])
    return <float>image[i]
