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
# type image_t whose uint16 storage `half` describes (the dtype code); its
# run_tasks callback is then one call of `_image_task`.

from libc.stdint cimport int8_t, int16_t, int32_t, int64_t, uint8_t, uint16_t

from cropgrad.capi cimport (
    CG_BFLOAT16,
    CG_FLOAT16,
    CG_FLOAT32,
    CG_INT8,
    CG_INT16,
    CG_INT32,
    CG_INT64,
    CG_UINT8,
    CG_UINT16,
)


cdef inline void _image_task(const void* ctx, const void* image, int code,
                             Py_ssize_t t, int thread) noexcept nogil:
    """`_typed_task` of the C type that image dtype `code` (a CG_ code)
    is stored as; float16 and bfloat16 as their uint16 bits, with `code`
    as the `half` argument."""
    if code == CG_UINT8:
        _typed_task(ctx, <const uint8_t*>image, code, t, thread)
    elif code == CG_INT8:
        _typed_task(ctx, <const int8_t*>image, code, t, thread)
    elif code == CG_UINT16 or code == CG_FLOAT16 or code == CG_BFLOAT16:
        # The code says what the bits are (see pixels.load).
        _typed_task(ctx, <const uint16_t*>image, code, t, thread)
    elif code == CG_INT16:
        _typed_task(ctx, <const int16_t*>image, code, t, thread)
    elif code == CG_INT32:
        _typed_task(ctx, <const int32_t*>image, code, t, thread)
    elif code == CG_INT64:
        _typed_task(ctx, <const int64_t*>image, code, t, thread)
    elif code == CG_FLOAT32:
        _typed_task(ctx, <const float*>image, code, t, thread)
    else:
        _typed_task(ctx, <const double*>image, code, t, thread)
