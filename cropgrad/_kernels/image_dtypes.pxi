# cython: language_level=3
#
# From an image's dtype code to the kernel code compiled for its element
# type: the one switch over the image dtypes, included by every kernel that
# reads images of any dtype (``include "../image_dtypes.pxi"``).
#
# The including module defines, fused over `image_t`,
#
#     cdef void _typed_task(const void* ctx, const image_t* image, int half,
#                           Py_ssize_t t, int thread) noexcept nogil
#
# task `t` of its op on thread `thread` (ctx: its plan), for an image of C
# type image_t whose uint16 storage `half` describes (a HALF_ value); its
# run_tasks callback is then one call of `_image_task`.

from libc.stdint cimport int8_t, int16_t, int32_t, int64_t, uint8_t, uint16_t

from cropgrad._kernels.pixels cimport HALF_BFLOAT16, HALF_FLOAT16, HALF_NONE
from cropgrad._kernels.types cimport (
    DT_BFLOAT16,
    DT_FLOAT16,
    DT_FLOAT32,
    DT_INT8,
    DT_INT16,
    DT_INT32,
    DT_INT64,
    DT_UINT8,
    DT_UINT16,
)


cdef inline void _image_task(const void* ctx, const void* image, int code,
                             Py_ssize_t t, int thread) noexcept nogil:
    """`_typed_task` of the C type that image dtype `code` (a DT_ code)
    is stored as; float16 and bfloat16 as their uint16 bits."""
    if code == DT_UINT8:
        _typed_task(ctx, <const uint8_t*>image, HALF_NONE, t, thread)
    elif code == DT_INT8:
        _typed_task(ctx, <const int8_t*>image, HALF_NONE, t, thread)
    elif code == DT_UINT16:
        _typed_task(ctx, <const uint16_t*>image, HALF_NONE, t, thread)
    elif code == DT_FLOAT16:
        _typed_task(ctx, <const uint16_t*>image, HALF_FLOAT16, t, thread)
    elif code == DT_BFLOAT16:
        _typed_task(ctx, <const uint16_t*>image, HALF_BFLOAT16, t, thread)
    elif code == DT_INT16:
        _typed_task(ctx, <const int16_t*>image, HALF_NONE, t, thread)
    elif code == DT_INT32:
        _typed_task(ctx, <const int32_t*>image, HALF_NONE, t, thread)
    elif code == DT_INT64:
        _typed_task(ctx, <const int64_t*>image, HALF_NONE, t, thread)
    elif code == DT_FLOAT32:
        _typed_task(ctx, <const float*>image, HALF_NONE, t, thread)
    else:
        _typed_task(ctx, <const double*>image, HALF_NONE, t, thread)
