# Included by cropgrad/_jax/handlers.pyx (its names and cimports): the
# grid-sampling family's decoding and its calls, `_call_grid_sample_<kind>`.

# Every buffer in the call's layout (the grid as always) and of one
# arithmetic type (float32 or float64), which the C-level API takes as its
# `dtype`; it checks the operands' shapes against one another, the
# calls the result's (and the tangent's) and the decoding the types: the
# grid's first, then the others', which must be the grid's.
cdef int _GRID_ORDER[5]
_GRID_ORDER[:] = [COORDS, GRADS, IMAGE, TANGENT, RESULT]


cdef int _decode_grid(
    const cg_ffi_call_frame* frame, const Row* row, Buffer* b, frames.Decoded* d,
    capi.cg_error* e,
) noexcept nogil:
    # A message about a point names the grid's batch index, which a folded
    # call restates in the caller's (frames.unfold_message).
    d.grid = True
    d.batch = b[COORDS].dims[0]
    return _dtypes(row, b, _GRID_ORDER, 5, e)


cdef int _shape(const Buffer* x, const int64_t* dims,
                capi.cg_error* e) noexcept nogil:
    """Check that `x` has the shape `dims` (4 values); 0 or -1."""
    if (x.dims[0] == dims[0] and x.dims[1] == dims[1]
            and x.dims[2] == dims[2] and x.dims[3] == dims[3]):
        return 0
    snprintf(e.message, capi.CG_MESSAGE_SIZE,
             "%s has the shape (%lld, %lld, %lld, %lld), expected (%lld, %lld, "
             "%lld, %lld)", x.slot.name, <long long>x.dims[0],
             <long long>x.dims[1], <long long>x.dims[2], <long long>x.dims[3],
             <long long>dims[0], <long long>dims[1], <long long>dims[2],
             <long long>dims[3])
    e.status = capi.CG_ERR_VALUE
    e.position = -1
    return -1


cdef int _sampled_shape(const Buffer* b, int layout,
                        capi.cg_error* e) noexcept nogil:
    """Check that the result has the shape of the image sampled at the grid
    (``[N, C, H_out, W_out]``, or NHWC); 0 or -1."""
    cdef const int64_t* grid = b[COORDS].dims
    cdef int64_t dims[4]
    dims[0] = grid[0]
    if layout == capi.CG_NHWC:
        dims[1], dims[2] = grid[1], grid[2]
        dims[3] = _depth(b[IMAGE].dims, layout)
    else:
        dims[1] = _depth(b[IMAGE].dims, layout)
        dims[2], dims[3] = grid[1], grid[2]
    return _shape(&b[RESULT], dims, e)


cdef void _call_grid_sample_forward(
    const char* op, const cg_ffi_call_frame* frame, const Row* row,
    const Buffer* b, frames.Decoded* d, capi.cg_error* e,
) noexcept nogil:
    cdef const Buffer* grid = &b[COORDS]
    if _sampled_shape(b, d.attrs.layout, e) < 0:
        return
    gs.run_forward(
        op, True,
        b[IMAGE].data, b[IMAGE].dims, grid.data, grid.dims, grid.dtype,
        d.attrs.method, d.attrs.padding_mode, d.attrs.aligned, d.attrs.layout,
        b[RESULT].data, d.attrs.num_threads, 1, e)


cdef void _call_grid_sample_grad_image(
    const char* op, const cg_ffi_call_frame* frame, const Row* row,
    const Buffer* b, frames.Decoded* d, capi.cg_error* e,
) noexcept nogil:
    cdef const Buffer* grid = &b[COORDS]
    # The output's shape is image_size: the C-level API checks it against
    # the grads and the grid.
    gs.run_grad_image(
        op, True,
        b[GRADS].data, b[GRADS].dims, grid.data, grid.dims, grid.dtype,
        b[RESULT].dims, d.attrs.method, d.attrs.padding_mode, d.attrs.aligned,
        d.attrs.layout, b[RESULT].data, d.attrs.num_threads, 1, e)


cdef void _call_grid_sample_grad_coords(
    const char* op, const cg_ffi_call_frame* frame, const Row* row,
    const Buffer* b, frames.Decoded* d, capi.cg_error* e,
) noexcept nogil:
    cdef const Buffer* grid = &b[COORDS]
    if _shape(&b[RESULT], grid.dims, e) < 0:
        return
    gs.run_grad_coords(
        op, True,
        b[GRADS].data, b[GRADS].dims, b[IMAGE].data, b[IMAGE].dims,
        grid.data, grid.dims, grid.dtype, d.attrs.method,
        d.attrs.padding_mode, d.attrs.aligned, d.attrs.layout,
        b[RESULT].data, d.attrs.num_threads, 1, e)


cdef void _call_grid_sample_jvp_coords(
    const char* op, const cg_ffi_call_frame* frame, const Row* row,
    const Buffer* b, frames.Decoded* d, capi.cg_error* e,
) noexcept nogil:
    cdef const Buffer* grid = &b[COORDS]
    if (_shape(&b[TANGENT], grid.dims, e) < 0
            or _sampled_shape(b, d.attrs.layout, e) < 0):
        return
    gs.run_jvp_coords(
        op, True,
        b[IMAGE].data, b[IMAGE].dims, grid.data, b[TANGENT].data, grid.dims,
        grid.dtype, d.attrs.method, d.attrs.padding_mode, d.attrs.aligned,
        d.attrs.layout, b[RESULT].data, d.attrs.num_threads, 1, e)
