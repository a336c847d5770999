# Included by cropgrad/_jax/handlers.pyx (its names and cimports): the
# RoIAlign family's calls, `_call_roi_align_<kind>`.

# The RoIAlign family: boxes [x1, y1, x2, y2] in the arithmetic type
# (float64 for float64 data, float32 otherwise), as are grads and tangents;
# the C-level API checks that they agree, the calls that the boxes gradient
# and the tangent have the boxes' dtype, once the boxes are decoded.

cdef void _call_roi_align_forward(
    const char* op, const cg_ffi_call_frame* frame, const Row* row,
    const Buffer* b, frames.Decoded* d, capi.cg_error* e,
) noexcept nogil:
    cdef const Buffer* image = &b[IMAGE]
    cdef const Buffer* output = &b[RESULT]
    cdef int64_t out_h, out_w
    if (_boxes(frame, row, b, d, e) < 0
            or _crop_size(b, d.attrs.layout, &out_h, &out_w, e) < 0):
        return
    ra.run_forward(
        op, True,
        image.data, image.dtype, image.dims, d.boxes, d.boxes_dtype,
        d.box_ind, d.index_dtype, d.num_boxes, out_h, out_w,
        d.attrs.spatial_scale, d.attrs.sampling_ratio, d.attrs.aligned,
        d.attrs.layout, output.data, output.dtype, d.attrs.num_threads, 1, e)


cdef void _call_roi_align_grad_image(
    const char* op, const cg_ffi_call_frame* frame, const Row* row,
    const Buffer* b, frames.Decoded* d, capi.cg_error* e,
) noexcept nogil:
    cdef const Buffer* grads = &b[GRADS]
    cdef const Buffer* output = &b[RESULT]
    # The output's shape is image_size: the C-level API checks it against
    # the grads.
    if _boxes(frame, row, b, d, e) < 0:
        return
    ra.run_grad_image(
        op, True,
        grads.data, grads.dtype, grads.dims, d.boxes, d.boxes_dtype,
        d.box_ind, d.index_dtype, output.dims, d.attrs.spatial_scale,
        d.attrs.sampling_ratio, d.attrs.aligned, d.attrs.layout,
        output.data, output.dtype, d.attrs.num_threads, 1, e)


cdef void _call_roi_align_grad_coords(
    const char* op, const cg_ffi_call_frame* frame, const Row* row,
    const Buffer* b, frames.Decoded* d, capi.cg_error* e,
) noexcept nogil:
    cdef const Buffer* grads = &b[GRADS]
    cdef const Buffer* image = &b[IMAGE]
    cdef const Buffer* output = &b[RESULT]
    if (_boxes(frame, row, b, d, e) < 0
            or frames.box_rows(output.ffi, grads.dims[0], "output", e) < 0
            or _coords_dtype(output, d.boxes_dtype, row.coords, e) < 0):
        return
    ra.run_grad_coords(
        op, True,
        grads.data, grads.dtype, grads.dims, image.data, image.dtype,
        image.dims, d.boxes, d.boxes_dtype, d.box_ind, d.index_dtype,
        d.attrs.spatial_scale, d.attrs.sampling_ratio, d.attrs.aligned,
        d.attrs.layout, output.data, d.attrs.num_threads, 1, e)


cdef void _call_roi_align_jvp_coords(
    const char* op, const cg_ffi_call_frame* frame, const Row* row,
    const Buffer* b, frames.Decoded* d, capi.cg_error* e,
) noexcept nogil:
    cdef const Buffer* image = &b[IMAGE]
    cdef const Buffer* tangent = &b[TANGENT]
    cdef const Buffer* output = &b[RESULT]
    cdef int64_t out_h, out_w
    if (_boxes(frame, row, b, d, e) < 0
            or frames.box_rows(tangent.ffi, output.dims[0], "boxes_tangent",
                               e) < 0
            or _coords_dtype(tangent, d.boxes_dtype, row.coords, e) < 0
            or _crop_size(b, d.attrs.layout, &out_h, &out_w, e) < 0):
        return
    ra.run_jvp_coords(
        op, True,
        image.data, image.dtype, image.dims, d.boxes, tangent.data,
        d.boxes_dtype, d.box_ind, d.index_dtype, d.num_boxes, out_h, out_w,
        d.attrs.spatial_scale, d.attrs.sampling_ratio, d.attrs.aligned,
        d.attrs.layout, output.data, output.dtype, d.attrs.num_threads, 1, e)
