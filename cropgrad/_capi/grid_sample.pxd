# cython: language_level=3
#
# The grid-sampling family's part of the gate (see gate.pxd): each op's
# metadata checks, then its call once the metadata has passed (the arrays,
# the finite grid, the kernel).  Arguments as the C-level API's
# (cropgrad/capi.pxd): every array NCHW and of the arithmetic type `dtype`
# names; each returns the status and fills `err`, which must not be NULL.

from libc.stdint cimport int64_t

from cropgrad.capi cimport cg_error


# Metadata checks.  Shapes are NCHW, the grid's [batch, out_h, out_w, 2];
# the forward op's check is also the grid JVP's (whose tangent has the
# grid's shape).  `size_name`: what the caller calls `image_size`.

cdef int check_grid_sample(const int64_t* image_shape, const int64_t* grid_shape,
                           int dtype, int mode, int padding_mode, int layout,
                           int num_threads, cg_error* err) noexcept nogil
cdef int check_grid_sample_grad_image(const int64_t* grads_shape,
                                      const int64_t* grid_shape, int dtype,
                                      const int64_t* image_size, int mode,
                                      int padding_mode, int layout,
                                      int num_threads, const char* size_name,
                                      cg_error* err) noexcept nogil
cdef int check_grid_sample_grad_grid(const int64_t* grads_shape,
                                     const int64_t* image_shape,
                                     const int64_t* grid_shape, int dtype,
                                     int mode, int padding_mode, int layout,
                                     int num_threads, cg_error* err) noexcept nogil


# Calls, one per op kind (cropgrad._ops.KINDS), as roi_align.pxd's: the
# C-level API's arguments after the op's name and `check`, whether to run
# the metadata check first.

cdef int run_forward(
    const char* op, bint check,
    const void* image, const int64_t* image_shape, const void* grid,
    const int64_t* grid_shape, int dtype, int mode, int padding_mode,
    int align_corners, int layout, void* output, int num_threads,
    int flush_denormals, cg_error* err,
) noexcept nogil

cdef int run_grad_image(
    const char* op, bint check,
    const void* grads, const int64_t* grads_shape, const void* grid,
    const int64_t* grid_shape, int dtype, const int64_t* image_size, int mode,
    int padding_mode, int align_corners, int layout, void* output,
    int num_threads, int flush_denormals, cg_error* err,
) noexcept nogil

cdef int run_grad_coords(
    const char* op, bint check,
    const void* grads, const int64_t* grads_shape, const void* image,
    const int64_t* image_shape, const void* grid, const int64_t* grid_shape,
    int dtype, int mode, int padding_mode, int align_corners, int layout,
    void* output, int num_threads, int flush_denormals, cg_error* err,
) noexcept nogil

cdef int run_jvp_coords(
    const char* op, bint check,
    const void* image, const int64_t* image_shape, const void* grid,
    const void* grid_tangent, const int64_t* grid_shape, int dtype, int mode,
    int padding_mode, int align_corners, int layout, void* output,
    int num_threads, int flush_denormals, cg_error* err,
) noexcept nogil
