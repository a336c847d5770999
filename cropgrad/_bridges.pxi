# Generated from cropgrad's op model by cropgrad/_ops/generate.py, from
# cropgrad/_bridges.pxi.tp: edit those, not this file.  Included by
# cropgrad/_core.pyx, after _hold and _release.
#
# Each op's bridge: the op's call of its family and kind
# (cropgrad/_capi/<family>.pxd, run_<kind>) on the buffers of NumPy arrays
# whose metadata the gate has passed (so without the metadata check), the
# GIL released; its error record raised as the NumPy API's exception.  Its
# parameters are the C-level API's (`Op.c_params`), with arrays for
# pointers (``out`` the output), no shape that an array has, ``image_size``
# a sequence and ``flush`` for ``flush_denormals``.
from cropgrad._capi cimport crop_and_resize as _crop_and_resize
from cropgrad._capi cimport roi_align as _roi_align
from cropgrad._capi cimport grid_sample as _grid_sample


def crop_and_resize(
        image, int image_dtype, boxes, box_ind, int box_ind_dtype,
        int64_t crop_height, int64_t crop_width, int method,
        float extrapolation_value, int layout, out, int num_threads, bint flush):
    """`cg_crop_and_resize` on NumPy arrays; raises on error."""
    cdef Py_buffer views[4]
    cdef int64_t _image_shape[4]
    cdef int64_t num_boxes = boxes.shape[0]
    cdef cg_error err
    cdef int status
    _shape4(_image_shape, image.shape)
    _hold((image, boxes, box_ind, out), views)
    with nogil:
        status = _crop_and_resize.run_forward(
            "crop_and_resize", False,
            <const void*>views[0].buf, image_dtype, _image_shape,
            <const float*>views[1].buf, <const void*>views[2].buf, box_ind_dtype,
            num_boxes, crop_height, crop_width, method, extrapolation_value, layout,
            <float*>views[3].buf, num_threads, flush, &err)
    _release(views, 4)
    if status != CG_OK:
        _raise(&err)


def crop_and_resize_grad_image(
        grads, boxes, box_ind, int box_ind_dtype, image_size, out, int output_dtype,
        int method, int layout, int num_threads, bint flush):
    """`cg_crop_and_resize_grad_image` on NumPy arrays; raises on error."""
    cdef Py_buffer views[4]
    cdef int64_t _grads_shape[4]
    cdef int64_t _image_size[4]
    cdef cg_error err
    cdef int status
    _shape4(_grads_shape, grads.shape)
    _shape4(_image_size, image_size)
    _hold((grads, boxes, box_ind, out), views)
    with nogil:
        status = _crop_and_resize.run_grad_image(
            "crop_and_resize_grad_image", False,
            <const float*>views[0].buf, _grads_shape, <const float*>views[1].buf,
            <const void*>views[2].buf, box_ind_dtype, _image_size,
            <void*>views[3].buf, output_dtype, method, layout, num_threads, flush,
            &err)
    _release(views, 4)
    if status != CG_OK:
        _raise(&err)


def crop_and_resize_grad_boxes(
        grads, image, int image_dtype, boxes, box_ind, int box_ind_dtype, out,
        int method, int layout, int num_threads, bint flush):
    """`cg_crop_and_resize_grad_boxes` on NumPy arrays; raises on error."""
    cdef Py_buffer views[5]
    cdef int64_t _grads_shape[4]
    cdef int64_t _image_shape[4]
    cdef cg_error err
    cdef int status
    _shape4(_grads_shape, grads.shape)
    _shape4(_image_shape, image.shape)
    _hold((grads, image, boxes, box_ind, out), views)
    with nogil:
        status = _crop_and_resize.run_grad_coords(
            "crop_and_resize_grad_boxes", False,
            <const float*>views[0].buf, _grads_shape, <const void*>views[1].buf,
            image_dtype, _image_shape, <const float*>views[2].buf,
            <const void*>views[3].buf, box_ind_dtype, <float*>views[4].buf, method,
            layout, num_threads, flush, &err)
    _release(views, 5)
    if status != CG_OK:
        _raise(&err)


def crop_and_resize_jvp_boxes(
        image, int image_dtype, boxes, boxes_tangent, box_ind, int box_ind_dtype,
        int64_t crop_height, int64_t crop_width, int method, int layout, out,
        int num_threads, bint flush):
    """`cg_crop_and_resize_jvp_boxes` on NumPy arrays; raises on error."""
    cdef Py_buffer views[5]
    cdef int64_t _image_shape[4]
    cdef int64_t num_boxes = boxes.shape[0]
    cdef cg_error err
    cdef int status
    _shape4(_image_shape, image.shape)
    _hold((image, boxes, boxes_tangent, box_ind, out), views)
    with nogil:
        status = _crop_and_resize.run_jvp_coords(
            "crop_and_resize_jvp_boxes", False,
            <const void*>views[0].buf, image_dtype, _image_shape,
            <const float*>views[1].buf, <const float*>views[2].buf,
            <const void*>views[3].buf, box_ind_dtype, num_boxes, crop_height,
            crop_width, method, layout, <float*>views[4].buf, num_threads, flush,
            &err)
    _release(views, 5)
    if status != CG_OK:
        _raise(&err)


def roi_align(
        image, int image_dtype, boxes, int boxes_dtype, box_ind, int box_ind_dtype,
        int64_t output_height, int64_t output_width, double spatial_scale,
        int sampling_ratio, int aligned, int layout, out, int output_dtype,
        int num_threads, bint flush):
    """`cg_roi_align` on NumPy arrays; raises on error."""
    cdef Py_buffer views[4]
    cdef int64_t _image_shape[4]
    cdef int64_t num_boxes = boxes.shape[0]
    cdef cg_error err
    cdef int status
    _shape4(_image_shape, image.shape)
    _hold((image, boxes, box_ind, out), views)
    with nogil:
        status = _roi_align.run_forward(
            "roi_align", False,
            <const void*>views[0].buf, image_dtype, _image_shape,
            <const void*>views[1].buf, boxes_dtype, <const void*>views[2].buf,
            box_ind_dtype, num_boxes, output_height, output_width, spatial_scale,
            sampling_ratio, aligned, layout, <void*>views[3].buf, output_dtype,
            num_threads, flush, &err)
    _release(views, 4)
    if status != CG_OK:
        _raise(&err)


def roi_align_grad_image(
        grads, int grads_dtype, boxes, int boxes_dtype, box_ind, int box_ind_dtype,
        image_size, double spatial_scale, int sampling_ratio, int aligned,
        int layout, out, int output_dtype, int num_threads, bint flush):
    """`cg_roi_align_grad_image` on NumPy arrays; raises on error."""
    cdef Py_buffer views[4]
    cdef int64_t _grads_shape[4]
    cdef int64_t _image_size[4]
    cdef cg_error err
    cdef int status
    _shape4(_grads_shape, grads.shape)
    _shape4(_image_size, image_size)
    _hold((grads, boxes, box_ind, out), views)
    with nogil:
        status = _roi_align.run_grad_image(
            "roi_align_grad_image", False,
            <const void*>views[0].buf, grads_dtype, _grads_shape,
            <const void*>views[1].buf, boxes_dtype, <const void*>views[2].buf,
            box_ind_dtype, _image_size, spatial_scale, sampling_ratio, aligned,
            layout, <void*>views[3].buf, output_dtype, num_threads, flush, &err)
    _release(views, 4)
    if status != CG_OK:
        _raise(&err)


def roi_align_grad_boxes(
        grads, int grads_dtype, image, int image_dtype, boxes, int boxes_dtype,
        box_ind, int box_ind_dtype, double spatial_scale, int sampling_ratio,
        int aligned, int layout, out, int num_threads, bint flush):
    """`cg_roi_align_grad_boxes` on NumPy arrays; raises on error."""
    cdef Py_buffer views[5]
    cdef int64_t _grads_shape[4]
    cdef int64_t _image_shape[4]
    cdef cg_error err
    cdef int status
    _shape4(_grads_shape, grads.shape)
    _shape4(_image_shape, image.shape)
    _hold((grads, image, boxes, box_ind, out), views)
    with nogil:
        status = _roi_align.run_grad_coords(
            "roi_align_grad_boxes", False,
            <const void*>views[0].buf, grads_dtype, _grads_shape,
            <const void*>views[1].buf, image_dtype, _image_shape,
            <const void*>views[2].buf, boxes_dtype, <const void*>views[3].buf,
            box_ind_dtype, spatial_scale, sampling_ratio, aligned, layout,
            <void*>views[4].buf, num_threads, flush, &err)
    _release(views, 5)
    if status != CG_OK:
        _raise(&err)


def roi_align_jvp_boxes(
        image, int image_dtype, boxes, boxes_tangent, int boxes_dtype, box_ind,
        int box_ind_dtype, int64_t output_height, int64_t output_width,
        double spatial_scale, int sampling_ratio, int aligned, int layout, out,
        int output_dtype, int num_threads, bint flush):
    """`cg_roi_align_jvp_boxes` on NumPy arrays; raises on error."""
    cdef Py_buffer views[5]
    cdef int64_t _image_shape[4]
    cdef int64_t num_boxes = boxes.shape[0]
    cdef cg_error err
    cdef int status
    _shape4(_image_shape, image.shape)
    _hold((image, boxes, boxes_tangent, box_ind, out), views)
    with nogil:
        status = _roi_align.run_jvp_coords(
            "roi_align_jvp_boxes", False,
            <const void*>views[0].buf, image_dtype, _image_shape,
            <const void*>views[1].buf, <const void*>views[2].buf, boxes_dtype,
            <const void*>views[3].buf, box_ind_dtype, num_boxes, output_height,
            output_width, spatial_scale, sampling_ratio, aligned, layout,
            <void*>views[4].buf, output_dtype, num_threads, flush, &err)
    _release(views, 5)
    if status != CG_OK:
        _raise(&err)


def grid_sample(
        image, grid, int dtype, int mode, int padding_mode, int align_corners,
        int layout, out, int num_threads, bint flush):
    """`cg_grid_sample` on NumPy arrays; raises on error."""
    cdef Py_buffer views[3]
    cdef int64_t _image_shape[4]
    cdef int64_t _grid_shape[4]
    cdef cg_error err
    cdef int status
    _shape4(_image_shape, image.shape)
    _shape4(_grid_shape, grid.shape)
    _hold((image, grid, out), views)
    with nogil:
        status = _grid_sample.run_forward(
            "grid_sample", False,
            <const void*>views[0].buf, _image_shape, <const void*>views[1].buf,
            _grid_shape, dtype, mode, padding_mode, align_corners, layout,
            <void*>views[2].buf, num_threads, flush, &err)
    _release(views, 3)
    if status != CG_OK:
        _raise(&err)


def grid_sample_grad_image(
        grads, grid, int dtype, image_size, int mode, int padding_mode,
        int align_corners, int layout, out, int num_threads, bint flush):
    """`cg_grid_sample_grad_image` on NumPy arrays; raises on error."""
    cdef Py_buffer views[3]
    cdef int64_t _grads_shape[4]
    cdef int64_t _grid_shape[4]
    cdef int64_t _image_size[4]
    cdef cg_error err
    cdef int status
    _shape4(_grads_shape, grads.shape)
    _shape4(_grid_shape, grid.shape)
    _shape4(_image_size, image_size)
    _hold((grads, grid, out), views)
    with nogil:
        status = _grid_sample.run_grad_image(
            "grid_sample_grad_image", False,
            <const void*>views[0].buf, _grads_shape, <const void*>views[1].buf,
            _grid_shape, dtype, _image_size, mode, padding_mode, align_corners,
            layout, <void*>views[2].buf, num_threads, flush, &err)
    _release(views, 3)
    if status != CG_OK:
        _raise(&err)


def grid_sample_grad_grid(
        grads, image, grid, int dtype, int mode, int padding_mode,
        int align_corners, int layout, out, int num_threads, bint flush):
    """`cg_grid_sample_grad_grid` on NumPy arrays; raises on error."""
    cdef Py_buffer views[4]
    cdef int64_t _grads_shape[4]
    cdef int64_t _image_shape[4]
    cdef int64_t _grid_shape[4]
    cdef cg_error err
    cdef int status
    _shape4(_grads_shape, grads.shape)
    _shape4(_image_shape, image.shape)
    _shape4(_grid_shape, grid.shape)
    _hold((grads, image, grid, out), views)
    with nogil:
        status = _grid_sample.run_grad_coords(
            "grid_sample_grad_grid", False,
            <const void*>views[0].buf, _grads_shape, <const void*>views[1].buf,
            _image_shape, <const void*>views[2].buf, _grid_shape, dtype, mode,
            padding_mode, align_corners, layout, <void*>views[3].buf, num_threads,
            flush, &err)
    _release(views, 4)
    if status != CG_OK:
        _raise(&err)


def grid_sample_jvp_grid(
        image, grid, grid_tangent, int dtype, int mode, int padding_mode,
        int align_corners, int layout, out, int num_threads, bint flush):
    """`cg_grid_sample_jvp_grid` on NumPy arrays; raises on error."""
    cdef Py_buffer views[4]
    cdef int64_t _image_shape[4]
    cdef int64_t _grid_shape[4]
    cdef cg_error err
    cdef int status
    _shape4(_image_shape, image.shape)
    _shape4(_grid_shape, grid.shape)
    _hold((image, grid, grid_tangent, out), views)
    with nogil:
        status = _grid_sample.run_jvp_coords(
            "grid_sample_jvp_grid", False,
            <const void*>views[0].buf, _image_shape, <const void*>views[1].buf,
            <const void*>views[2].buf, _grid_shape, dtype, mode, padding_mode,
            align_corners, layout, <void*>views[3].buf, num_threads, flush, &err)
    _release(views, 4)
    if status != CG_OK:
        _raise(&err)
