# cython: language_level=3
#
# The RoIAlign family's part of the gate (see gate.pxd): each op's metadata
# checks, then its call once the metadata has passed (the checks that need
# the arrays, among them the samples per bin of every box, the problem,
# the kernel).  Arguments as the C-level API's (cropgrad/capi.pxd); each
# returns the status and fills `err`, which must not be NULL.
#
# The arithmetic type is double for float64 data (the image; the gradient
# for the image gradient), float otherwise; boxes, grads and tangents are
# passed in it, their dtype code saying which.

from libc.stdint cimport int64_t

from cropgrad.capi cimport cg_error


# At most this many samples per bin along an axis with a fixed
# sampling_ratio (4096 x 4096 = 2**24: the count stays exact in float32).
cdef enum:
    MAX_SAMPLING_RATIO = 4096


# Metadata checks.  Shapes are in `layout`'s order; the forward op's check
# is also the boxes JVP's (whose tangent has the boxes' dtype).
# `size_name`: what the caller calls `image_size`.

cdef int check_roi_align(const int64_t* image_shape, int image_dtype,
                         int boxes_dtype, int64_t num_boxes, int64_t output_height,
                         int64_t output_width, double spatial_scale,
                         int sampling_ratio, int layout, int output_dtype,
                         int num_threads, cg_error* err) noexcept nogil
cdef int check_roi_align_grad_image(const int64_t* grads_shape, int grads_dtype,
                                    int boxes_dtype, const int64_t* image_size,
                                    double spatial_scale, int sampling_ratio,
                                    int layout, int output_dtype, int num_threads,
                                    const char* size_name,
                                    cg_error* err) noexcept nogil
cdef int check_roi_align_grad_boxes(const int64_t* grads_shape, int grads_dtype,
                                    const int64_t* image_shape, int image_dtype,
                                    int boxes_dtype, double spatial_scale,
                                    int sampling_ratio, int layout,
                                    int num_threads, cg_error* err) noexcept nogil


# Calls, one per op kind (cropgrad._ops.KINDS): the C-level API's
# arguments after `op`, the op's name for messages, and `check`, whether
# to run the op's metadata check first (the C-level API's functions, which
# capi.pyx generates from the op model, do; cropgrad._core has run it
# before it allocated the output, and does not).

cdef int run_forward(
    const char* op, bint check,
    const void* image, int image_dtype, const int64_t* image_shape,
    const void* boxes, int boxes_dtype, const void* box_ind, int box_ind_dtype,
    int64_t num_boxes, int64_t output_height, int64_t output_width,
    double spatial_scale, int sampling_ratio, int aligned, int layout,
    void* output, int output_dtype, int num_threads, int flush_denormals,
    cg_error* err,
) noexcept nogil

cdef int run_grad_image(
    const char* op, bint check,
    const void* grads, int grads_dtype, const int64_t* grads_shape,
    const void* boxes, int boxes_dtype, const void* box_ind, int box_ind_dtype,
    const int64_t* image_size, double spatial_scale, int sampling_ratio,
    int aligned, int layout, void* output, int output_dtype, int num_threads,
    int flush_denormals, cg_error* err,
) noexcept nogil

cdef int run_grad_coords(
    const char* op, bint check,
    const void* grads, int grads_dtype, const int64_t* grads_shape,
    const void* image, int image_dtype, const int64_t* image_shape,
    const void* boxes, int boxes_dtype, const void* box_ind, int box_ind_dtype,
    double spatial_scale, int sampling_ratio, int aligned, int layout,
    void* output, int num_threads, int flush_denormals, cg_error* err,
) noexcept nogil

cdef int run_jvp_coords(
    const char* op, bint check,
    const void* image, int image_dtype, const int64_t* image_shape,
    const void* boxes, const void* boxes_tangent, int boxes_dtype,
    const void* box_ind, int box_ind_dtype, int64_t num_boxes,
    int64_t output_height, int64_t output_width, double spatial_scale,
    int sampling_ratio, int aligned, int layout, void* output, int output_dtype,
    int num_threads, int flush_denormals, cg_error* err,
) noexcept nogil
