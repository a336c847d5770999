# Included by cropgrad/_jax/handlers.pyx (its names and cimports): the
# grid-sampling family's `_run_grid_sample_<kind>`.

# Every buffer in the call's layout (the grid as always) and of one
# arithmetic type (float32 or float64), which the C-level API takes as its
# `dtype`; it checks the operands' shapes against one another, the
# handlers the result's and the types.

cdef int _grid_dtype(const cg_ffi_buffer* b, const char* name, int dtype,
                     capi.cg_error* e) noexcept nogil:
    """Check that `b` is of the arithmetic type `dtype`, or find it
    (`dtype` < 0); the code, or -1."""
    cdef int code = frames.float_dtype_of(b, name, True, e)
    if code < 0 or dtype < 0 or code == dtype:
        return code
    snprintf(e.message, capi.CG_MESSAGE_SIZE,
             "%s must have the dtype of the grid", name)
    e.status = capi.CG_ERR_TYPE
    e.position = -1
    return -1


cdef int _grid_dims(const cg_ffi_buffer* b, const char* name, int64_t d0,
                    int64_t d1, int64_t d2, int64_t d3,
                    capi.cg_error* e) noexcept nogil:
    """Check that `b` has the shape [d0, d1, d2, d3]; 0 or -1."""
    if (b.dims[0] == d0 and b.dims[1] == d1 and b.dims[2] == d2
            and b.dims[3] == d3):
        return 0
    snprintf(e.message, capi.CG_MESSAGE_SIZE,
             "%s has the shape (%lld, %lld, %lld, %lld), expected (%lld, %lld, "
             "%lld, %lld)", name, <long long>b.dims[0], <long long>b.dims[1],
             <long long>b.dims[2], <long long>b.dims[3], <long long>d0,
             <long long>d1, <long long>d2, <long long>d3)
    e.status = capi.CG_ERR_VALUE
    e.position = -1
    return -1


cdef int _sampled_dims(const cg_ffi_buffer* output, const cg_ffi_buffer* image,
                       const cg_ffi_buffer* grid, int layout,
                       capi.cg_error* e) noexcept nogil:
    """Check that `output` has the shape of `image` sampled at `grid`
    (``[N, C, H_out, W_out]``, or NHWC); 0 or -1."""
    cdef int64_t c = _depth(image.dims, layout)
    if layout == capi.CG_NHWC:
        return _grid_dims(output, "output", grid.dims[0], grid.dims[1],
                          grid.dims[2], c, e)
    return _grid_dims(output, "output", grid.dims[0], c, grid.dims[1],
                      grid.dims[2], e)


cdef void _run_grid_sample_forward(
    const char* op, cg_ffi_call_frame* frame, frames.Decoded* d, capi.cg_error* e,
) noexcept nogil:
    cdef int dtype
    cdef cg_ffi_buffer* image = frames.buffer(&frame.args, 0, 4, "image", e)
    cdef cg_ffi_buffer* grid = frames.buffer(&frame.args, 1, 4, "grid", e)
    cdef cg_ffi_buffer* output = frames.buffer(&frame.rets, 0, 4, "output", e)
    if (image == NULL or grid == NULL or output == NULL
            or frames.decode_grid_attributes(frame, grid, d, e) < 0):
        return
    dtype = _grid_dtype(grid, "grid", -1, e)
    if (dtype < 0 or _grid_dtype(image, "image", dtype, e) < 0
            or _grid_dtype(output, "output", dtype, e) < 0
            or _sampled_dims(output, image, grid, d.attrs.layout, e) < 0):
        return
    gs.run_forward(
        op, True,
        frames.data(image), image.dims, frames.data(grid), grid.dims, dtype,
        d.attrs.method, d.attrs.padding_mode, d.attrs.aligned, d.attrs.layout,
        frames.data(output), d.attrs.num_threads, 1, e)


cdef void _run_grid_sample_grad_image(
    const char* op, cg_ffi_call_frame* frame, frames.Decoded* d, capi.cg_error* e,
) noexcept nogil:
    cdef int dtype
    cdef cg_ffi_buffer* grads = frames.buffer(&frame.args, 0, 4, "grads", e)
    cdef cg_ffi_buffer* grid = frames.buffer(&frame.args, 1, 4, "grid", e)
    cdef cg_ffi_buffer* output = frames.buffer(&frame.rets, 0, 4, "output", e)
    if (grads == NULL or grid == NULL or output == NULL
            or frames.decode_grid_attributes(frame, grid, d, e) < 0):
        return
    dtype = _grid_dtype(grid, "grid", -1, e)
    if (dtype < 0 or _grid_dtype(grads, "grads", dtype, e) < 0
            or _grid_dtype(output, "output", dtype, e) < 0):
        return
    # The output's shape is image_size: the C-level API checks it against
    # the grads and the grid.
    gs.run_grad_image(
        op, True,
        frames.data(grads), grads.dims, frames.data(grid), grid.dims, dtype,
        output.dims, d.attrs.method, d.attrs.padding_mode, d.attrs.aligned,
        d.attrs.layout, frames.data(output), d.attrs.num_threads, 1, e)


cdef void _run_grid_sample_grad_coords(
    const char* op, cg_ffi_call_frame* frame, frames.Decoded* d, capi.cg_error* e,
) noexcept nogil:
    cdef int dtype
    cdef cg_ffi_buffer* grads = frames.buffer(&frame.args, 0, 4, "grads", e)
    cdef cg_ffi_buffer* image = frames.buffer(&frame.args, 1, 4, "image", e)
    cdef cg_ffi_buffer* grid = frames.buffer(&frame.args, 2, 4, "grid", e)
    cdef cg_ffi_buffer* output = frames.buffer(&frame.rets, 0, 4, "output", e)
    if (grads == NULL or image == NULL or grid == NULL or output == NULL
            or frames.decode_grid_attributes(frame, grid, d, e) < 0):
        return
    dtype = _grid_dtype(grid, "grid", -1, e)
    if (dtype < 0 or _grid_dtype(grads, "grads", dtype, e) < 0
            or _grid_dtype(image, "image", dtype, e) < 0
            or _grid_dtype(output, "output", dtype, e) < 0
            or _grid_dims(output, "output", grid.dims[0], grid.dims[1],
                          grid.dims[2], grid.dims[3], e) < 0):
        return
    gs.run_grad_coords(
        op, True,
        frames.data(grads), grads.dims, frames.data(image), image.dims,
        frames.data(grid), grid.dims, dtype, d.attrs.method,
        d.attrs.padding_mode, d.attrs.aligned, d.attrs.layout,
        frames.data(output), d.attrs.num_threads, 1, e)


cdef void _run_grid_sample_jvp_coords(
    const char* op, cg_ffi_call_frame* frame, frames.Decoded* d, capi.cg_error* e,
) noexcept nogil:
    cdef int dtype
    cdef cg_ffi_buffer* image = frames.buffer(&frame.args, 0, 4, "image", e)
    cdef cg_ffi_buffer* grid = frames.buffer(&frame.args, 1, 4, "grid", e)
    cdef cg_ffi_buffer* tangent = frames.buffer(&frame.args, 2, 4,
                                                "grid_tangent", e)
    cdef cg_ffi_buffer* output = frames.buffer(&frame.rets, 0, 4, "output", e)
    if (image == NULL or grid == NULL or tangent == NULL or output == NULL
            or frames.decode_grid_attributes(frame, grid, d, e) < 0):
        return
    dtype = _grid_dtype(grid, "grid", -1, e)
    if (dtype < 0 or _grid_dtype(image, "image", dtype, e) < 0
            or _grid_dtype(tangent, "grid_tangent", dtype, e) < 0
            or _grid_dtype(output, "output", dtype, e) < 0
            or _grid_dims(tangent, "grid_tangent", grid.dims[0], grid.dims[1],
                          grid.dims[2], grid.dims[3], e) < 0
            or _sampled_dims(output, image, grid, d.attrs.layout, e) < 0):
        return
    gs.run_jvp_coords(
        op, True,
        frames.data(image), image.dims, frames.data(grid), frames.data(tangent),
        grid.dims, dtype, d.attrs.method, d.attrs.padding_mode,
        d.attrs.aligned, d.attrs.layout, frames.data(output),
        d.attrs.num_threads, 1, e)
