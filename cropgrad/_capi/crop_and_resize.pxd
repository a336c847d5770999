# cython: language_level=3
#
# The crop_and_resize family's part of the gate (see gate.pxd): each op's
# metadata checks, then its call once the metadata has passed (the checks
# that need the arrays, the kernels' geometry, the kernel).  The C-level
# API's functions are a metadata check followed by a call; cropgrad._core
# runs the metadata check before the Python layer allocates the output,
# then the call, so that every call passes the gate once.  Arguments as the
# C-level API's (cropgrad/capi.pxd); each returns the status and fills
# `err`, which must not be NULL.

from libc.stdint cimport int64_t

from cropgrad.capi cimport cg_error


# Metadata checks.  Shapes are in `layout`'s order; the forward op's check
# is also the boxes JVP's (`bilinear_only`), whose arguments and output are
# the forward op's.  `size_name`: what the caller calls `image_size`.

cdef int check_forward(const int64_t* image_shape, int image_dtype,
                       int64_t num_boxes, int64_t crop_height, int64_t crop_width,
                       int method, int layout, int num_threads, bint bilinear_only,
                       cg_error* err) noexcept nogil
cdef int check_grad_image(const int64_t* grads_shape, const int64_t* image_size,
                          int output_dtype, int method, int layout,
                          int num_threads, const char* size_name,
                          cg_error* err) noexcept nogil
cdef int check_grad_boxes(const int64_t* grads_shape, const int64_t* image_shape,
                          int image_dtype, int method, int layout, int num_threads,
                          cg_error* err) noexcept nogil


# Calls, one per op kind (cropgrad._ops.KINDS): the C-level API's
# arguments after `op`, the op's name for messages, and `check`, whether
# to run the op's metadata check first (the C-level API's functions, which
# capi.pyx generates from the op model, do; cropgrad._core has run it
# before it allocated the output, and does not).

cdef int run_forward(
    const char* op, bint check,
    const void* image, int image_dtype, const int64_t* image_shape,
    const float* boxes, const void* box_ind, int box_ind_dtype, int64_t num_boxes,
    int64_t crop_height, int64_t crop_width, int method, float extrapolation_value,
    int layout, float* crops, int num_threads, int flush_denormals,
    cg_error* err,
) noexcept nogil

cdef int run_grad_image(
    const char* op, bint check,
    const float* grads, const int64_t* grads_shape, const float* boxes,
    const void* box_ind, int box_ind_dtype, const int64_t* image_size,
    void* output, int output_dtype, int method, int layout, int num_threads,
    int flush_denormals, cg_error* err,
) noexcept nogil

cdef int run_grad_coords(
    const char* op, bint check,
    const float* grads, const int64_t* grads_shape, const void* image,
    int image_dtype, const int64_t* image_shape, const float* boxes,
    const void* box_ind, int box_ind_dtype, float* output, int method, int layout,
    int num_threads, int flush_denormals, cg_error* err,
) noexcept nogil

cdef int run_jvp_coords(
    const char* op, bint check,
    const void* image, int image_dtype, const int64_t* image_shape,
    const float* boxes, const float* boxes_tangent, const void* box_ind,
    int box_ind_dtype, int64_t num_boxes, int64_t crop_height, int64_t crop_width,
    int method, int layout, float* output, int num_threads, int flush_denormals,
    cg_error* err,
) noexcept nogil
