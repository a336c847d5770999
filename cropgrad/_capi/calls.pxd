# cython: language_level=3
#
# The ops' calls once their metadata has passed the gate (private): the
# checks that need the arrays (NULL and overlapping pointers, box indices
# in range, finite boxes), the kernels' geometry, and the kernel.  The
# C-level API's functions are the gate's metadata check followed by one of
# these; cropgrad._core runs the metadata check before the Python layer
# allocates the output, then one of these, so that every call passes the
# gate once.  Arguments as the C-level API's (cropgrad/capi.pxd); each
# returns the status and fills `err`, which must not be NULL.

from libc.stdint cimport int64_t

from cropgrad.capi cimport cg_error


cdef int run_crop_and_resize(
    const void* image, int image_dtype, const int64_t* image_shape,
    const float* boxes, const void* box_ind, int box_ind_dtype, int64_t num_boxes,
    int64_t crop_height, int64_t crop_width, int method, float extrapolation_value,
    int layout, float* crops, int num_threads, int flush_denormals,
    cg_error* err,
) noexcept nogil

cdef int run_grad_image(
    const float* grads, const int64_t* grads_shape, const float* boxes,
    const void* box_ind, int box_ind_dtype, const int64_t* image_size,
    void* output, int output_dtype, int method, int layout, int num_threads,
    int flush_denormals, cg_error* err,
) noexcept nogil

cdef int run_grad_boxes(
    const float* grads, const int64_t* grads_shape, const void* image,
    int image_dtype, const int64_t* image_shape, const float* boxes,
    const void* box_ind, int box_ind_dtype, float* output, int method, int layout,
    int num_threads, int flush_denormals, cg_error* err,
) noexcept nogil

cdef int run_jvp_boxes(
    const void* image, int image_dtype, const int64_t* image_shape,
    const float* boxes, const float* boxes_tangent, const void* box_ind,
    int box_ind_dtype, int64_t num_boxes, int64_t crop_height, int64_t crop_width,
    int method, int layout, float* output, int num_threads, int flush_denormals,
    cg_error* err,
) noexcept nogil
