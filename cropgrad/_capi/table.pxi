# Generated from cropgrad's op model by cropgrad/_ops/generate.py, from
# cropgrad/_capi/table.pxi.tp: edit those, not this file.  Included by
# cropgrad/capi.pyx, after cg_api_version and cg_default_threads.
#
# Each op's function of the C-level API (declared in capi.pxd): the error
# record made optional, each shape pointer checked, then its family's call
# of the op's kind (cropgrad/_capi/<family>.pxd, run_<kind>), told the op's
# name for messages and to run the op's metadata check first.
from cropgrad._capi cimport crop_and_resize as _crop_and_resize
from cropgrad._capi cimport roi_align as _roi_align
from cropgrad._capi cimport grid_sample as _grid_sample


cdef int cg_crop_and_resize(
    const void* image,
    int image_dtype,
    const int64_t* image_shape,
    const float* boxes,
    const void* box_ind,
    int box_ind_dtype,
    int64_t num_boxes,
    int64_t crop_height,
    int64_t crop_width,
    int method,
    float extrapolation_value,
    int layout,
    float* crops,
    int num_threads,
    int flush_denormals,
    cg_error* error,
) noexcept nogil:
    cdef cg_error local
    if error == NULL:
        error = &local
    if gate.check_shape_pointer(image_shape, "image_shape", error) != CG_OK:
        return error.status
    return _crop_and_resize.run_forward(
        "crop_and_resize", True,
        image, image_dtype, image_shape, boxes, box_ind, box_ind_dtype, num_boxes,
        crop_height, crop_width, method, extrapolation_value, layout, crops,
        num_threads, flush_denormals, error)


cdef int cg_crop_and_resize_grad_image(
    const float* grads,
    const int64_t* grads_shape,
    const float* boxes,
    const void* box_ind,
    int box_ind_dtype,
    const int64_t* image_size,
    void* output,
    int output_dtype,
    int method,
    int layout,
    int num_threads,
    int flush_denormals,
    cg_error* error,
) noexcept nogil:
    cdef cg_error local
    if error == NULL:
        error = &local
    if gate.check_shape_pointer(grads_shape, "grads_shape", error) != CG_OK:
        return error.status
    if gate.check_shape_pointer(image_size, "image_size", error) != CG_OK:
        return error.status
    return _crop_and_resize.run_grad_image(
        "crop_and_resize_grad_image", True,
        grads, grads_shape, boxes, box_ind, box_ind_dtype, image_size, output,
        output_dtype, method, layout, num_threads, flush_denormals, error)


cdef int cg_crop_and_resize_grad_boxes(
    const float* grads,
    const int64_t* grads_shape,
    const void* image,
    int image_dtype,
    const int64_t* image_shape,
    const float* boxes,
    const void* box_ind,
    int box_ind_dtype,
    float* output,
    int method,
    int layout,
    int num_threads,
    int flush_denormals,
    cg_error* error,
) noexcept nogil:
    cdef cg_error local
    if error == NULL:
        error = &local
    if gate.check_shape_pointer(grads_shape, "grads_shape", error) != CG_OK:
        return error.status
    if gate.check_shape_pointer(image_shape, "image_shape", error) != CG_OK:
        return error.status
    return _crop_and_resize.run_grad_coords(
        "crop_and_resize_grad_boxes", True,
        grads, grads_shape, image, image_dtype, image_shape, boxes, box_ind,
        box_ind_dtype, output, method, layout, num_threads, flush_denormals, error)


cdef int cg_crop_and_resize_jvp_boxes(
    const void* image,
    int image_dtype,
    const int64_t* image_shape,
    const float* boxes,
    const float* boxes_tangent,
    const void* box_ind,
    int box_ind_dtype,
    int64_t num_boxes,
    int64_t crop_height,
    int64_t crop_width,
    int method,
    int layout,
    float* output,
    int num_threads,
    int flush_denormals,
    cg_error* error,
) noexcept nogil:
    cdef cg_error local
    if error == NULL:
        error = &local
    if gate.check_shape_pointer(image_shape, "image_shape", error) != CG_OK:
        return error.status
    return _crop_and_resize.run_jvp_coords(
        "crop_and_resize_jvp_boxes", True,
        image, image_dtype, image_shape, boxes, boxes_tangent, box_ind,
        box_ind_dtype, num_boxes, crop_height, crop_width, method, layout, output,
        num_threads, flush_denormals, error)


cdef int cg_roi_align(
    const void* image,
    int image_dtype,
    const int64_t* image_shape,
    const void* boxes,
    int boxes_dtype,
    const void* box_ind,
    int box_ind_dtype,
    int64_t num_boxes,
    int64_t output_height,
    int64_t output_width,
    double spatial_scale,
    int sampling_ratio,
    int aligned,
    int layout,
    void* output,
    int output_dtype,
    int num_threads,
    int flush_denormals,
    cg_error* error,
) noexcept nogil:
    cdef cg_error local
    if error == NULL:
        error = &local
    if gate.check_shape_pointer(image_shape, "image_shape", error) != CG_OK:
        return error.status
    return _roi_align.run_forward(
        "roi_align", True,
        image, image_dtype, image_shape, boxes, boxes_dtype, box_ind, box_ind_dtype,
        num_boxes, output_height, output_width, spatial_scale, sampling_ratio,
        aligned, layout, output, output_dtype, num_threads, flush_denormals, error)


cdef int cg_roi_align_grad_image(
    const void* grads,
    int grads_dtype,
    const int64_t* grads_shape,
    const void* boxes,
    int boxes_dtype,
    const void* box_ind,
    int box_ind_dtype,
    const int64_t* image_size,
    double spatial_scale,
    int sampling_ratio,
    int aligned,
    int layout,
    void* output,
    int output_dtype,
    int num_threads,
    int flush_denormals,
    cg_error* error,
) noexcept nogil:
    cdef cg_error local
    if error == NULL:
        error = &local
    if gate.check_shape_pointer(grads_shape, "grads_shape", error) != CG_OK:
        return error.status
    if gate.check_shape_pointer(image_size, "image_size", error) != CG_OK:
        return error.status
    return _roi_align.run_grad_image(
        "roi_align_grad_image", True,
        grads, grads_dtype, grads_shape, boxes, boxes_dtype, box_ind, box_ind_dtype,
        image_size, spatial_scale, sampling_ratio, aligned, layout, output,
        output_dtype, num_threads, flush_denormals, error)


cdef int cg_roi_align_grad_boxes(
    const void* grads,
    int grads_dtype,
    const int64_t* grads_shape,
    const void* image,
    int image_dtype,
    const int64_t* image_shape,
    const void* boxes,
    int boxes_dtype,
    const void* box_ind,
    int box_ind_dtype,
    double spatial_scale,
    int sampling_ratio,
    int aligned,
    int layout,
    void* output,
    int num_threads,
    int flush_denormals,
    cg_error* error,
) noexcept nogil:
    cdef cg_error local
    if error == NULL:
        error = &local
    if gate.check_shape_pointer(grads_shape, "grads_shape", error) != CG_OK:
        return error.status
    if gate.check_shape_pointer(image_shape, "image_shape", error) != CG_OK:
        return error.status
    return _roi_align.run_grad_coords(
        "roi_align_grad_boxes", True,
        grads, grads_dtype, grads_shape, image, image_dtype, image_shape, boxes,
        boxes_dtype, box_ind, box_ind_dtype, spatial_scale, sampling_ratio, aligned,
        layout, output, num_threads, flush_denormals, error)


cdef int cg_roi_align_jvp_boxes(
    const void* image,
    int image_dtype,
    const int64_t* image_shape,
    const void* boxes,
    const void* boxes_tangent,
    int boxes_dtype,
    const void* box_ind,
    int box_ind_dtype,
    int64_t num_boxes,
    int64_t output_height,
    int64_t output_width,
    double spatial_scale,
    int sampling_ratio,
    int aligned,
    int layout,
    void* output,
    int output_dtype,
    int num_threads,
    int flush_denormals,
    cg_error* error,
) noexcept nogil:
    cdef cg_error local
    if error == NULL:
        error = &local
    if gate.check_shape_pointer(image_shape, "image_shape", error) != CG_OK:
        return error.status
    return _roi_align.run_jvp_coords(
        "roi_align_jvp_boxes", True,
        image, image_dtype, image_shape, boxes, boxes_tangent, boxes_dtype, box_ind,
        box_ind_dtype, num_boxes, output_height, output_width, spatial_scale,
        sampling_ratio, aligned, layout, output, output_dtype, num_threads,
        flush_denormals, error)


cdef int cg_grid_sample(
    const void* image,
    const int64_t* image_shape,
    const void* grid,
    const int64_t* grid_shape,
    int dtype,
    int mode,
    int padding_mode,
    int align_corners,
    int layout,
    void* output,
    int num_threads,
    int flush_denormals,
    cg_error* error,
) noexcept nogil:
    cdef cg_error local
    if error == NULL:
        error = &local
    if gate.check_shape_pointer(image_shape, "image_shape", error) != CG_OK:
        return error.status
    if gate.check_shape_pointer(grid_shape, "grid_shape", error) != CG_OK:
        return error.status
    return _grid_sample.run_forward(
        "grid_sample", True,
        image, image_shape, grid, grid_shape, dtype, mode, padding_mode,
        align_corners, layout, output, num_threads, flush_denormals, error)


cdef int cg_grid_sample_grad_image(
    const void* grads,
    const int64_t* grads_shape,
    const void* grid,
    const int64_t* grid_shape,
    int dtype,
    const int64_t* image_size,
    int mode,
    int padding_mode,
    int align_corners,
    int layout,
    void* output,
    int num_threads,
    int flush_denormals,
    cg_error* error,
) noexcept nogil:
    cdef cg_error local
    if error == NULL:
        error = &local
    if gate.check_shape_pointer(grads_shape, "grads_shape", error) != CG_OK:
        return error.status
    if gate.check_shape_pointer(grid_shape, "grid_shape", error) != CG_OK:
        return error.status
    if gate.check_shape_pointer(image_size, "image_size", error) != CG_OK:
        return error.status
    return _grid_sample.run_grad_image(
        "grid_sample_grad_image", True,
        grads, grads_shape, grid, grid_shape, dtype, image_size, mode, padding_mode,
        align_corners, layout, output, num_threads, flush_denormals, error)


cdef int cg_grid_sample_grad_grid(
    const void* grads,
    const int64_t* grads_shape,
    const void* image,
    const int64_t* image_shape,
    const void* grid,
    const int64_t* grid_shape,
    int dtype,
    int mode,
    int padding_mode,
    int align_corners,
    int layout,
    void* output,
    int num_threads,
    int flush_denormals,
    cg_error* error,
) noexcept nogil:
    cdef cg_error local
    if error == NULL:
        error = &local
    if gate.check_shape_pointer(grads_shape, "grads_shape", error) != CG_OK:
        return error.status
    if gate.check_shape_pointer(image_shape, "image_shape", error) != CG_OK:
        return error.status
    if gate.check_shape_pointer(grid_shape, "grid_shape", error) != CG_OK:
        return error.status
    return _grid_sample.run_grad_coords(
        "grid_sample_grad_grid", True,
        grads, grads_shape, image, image_shape, grid, grid_shape, dtype, mode,
        padding_mode, align_corners, layout, output, num_threads, flush_denormals,
        error)


cdef int cg_grid_sample_jvp_grid(
    const void* image,
    const int64_t* image_shape,
    const void* grid,
    const void* grid_tangent,
    const int64_t* grid_shape,
    int dtype,
    int mode,
    int padding_mode,
    int align_corners,
    int layout,
    void* output,
    int num_threads,
    int flush_denormals,
    cg_error* error,
) noexcept nogil:
    cdef cg_error local
    if error == NULL:
        error = &local
    if gate.check_shape_pointer(image_shape, "image_shape", error) != CG_OK:
        return error.status
    if gate.check_shape_pointer(grid_shape, "grid_shape", error) != CG_OK:
        return error.status
    return _grid_sample.run_jvp_coords(
        "grid_sample_jvp_grid", True,
        image, image_shape, grid, grid_tangent, grid_shape, dtype, mode,
        padding_mode, align_corners, layout, output, num_threads, flush_denormals,
        error)


# The table C and C++ consumers get through cropgrad/include/cropgrad/capi.h:
# this struct is that header's cropgrad_api_t, member for member (a minor
# version only appends members; tests/test_capi.py checks the
# header's view of every member against function_addresses()).

ctypedef int (*api_version_fn)() noexcept nogil
ctypedef int (*default_threads_fn)() noexcept nogil
ctypedef int (*crop_and_resize_fn)(
    const void*, int, const int64_t*, const float*, const void*, int, int64_t,
    int64_t, int64_t, int, float, int, float*, int, int, cg_error*) noexcept nogil
ctypedef int (*crop_and_resize_grad_image_fn)(
    const float*, const int64_t*, const float*, const void*, int, const int64_t*,
    void*, int, int, int, int, int, cg_error*) noexcept nogil
ctypedef int (*crop_and_resize_grad_boxes_fn)(
    const float*, const int64_t*, const void*, int, const int64_t*, const float*,
    const void*, int, float*, int, int, int, int, cg_error*) noexcept nogil
ctypedef int (*crop_and_resize_jvp_boxes_fn)(
    const void*, int, const int64_t*, const float*, const float*, const void*, int,
    int64_t, int64_t, int64_t, int, int, float*, int, int, cg_error*) noexcept nogil
ctypedef int (*roi_align_fn)(
    const void*, int, const int64_t*, const void*, int, const void*, int, int64_t,
    int64_t, int64_t, double, int, int, int, void*, int, int, int,
    cg_error*) noexcept nogil
ctypedef int (*roi_align_grad_image_fn)(
    const void*, int, const int64_t*, const void*, int, const void*, int,
    const int64_t*, double, int, int, int, void*, int, int, int,
    cg_error*) noexcept nogil
ctypedef int (*roi_align_grad_boxes_fn)(
    const void*, int, const int64_t*, const void*, int, const int64_t*, const void*,
    int, const void*, int, double, int, int, int, void*, int, int,
    cg_error*) noexcept nogil
ctypedef int (*roi_align_jvp_boxes_fn)(
    const void*, int, const int64_t*, const void*, const void*, int, const void*,
    int, int64_t, int64_t, int64_t, double, int, int, int, void*, int, int, int,
    cg_error*) noexcept nogil
ctypedef int (*grid_sample_fn)(
    const void*, const int64_t*, const void*, const int64_t*, int, int, int, int,
    int, void*, int, int, cg_error*) noexcept nogil
ctypedef int (*grid_sample_grad_image_fn)(
    const void*, const int64_t*, const void*, const int64_t*, int, const int64_t*,
    int, int, int, int, void*, int, int, cg_error*) noexcept nogil
ctypedef int (*grid_sample_grad_grid_fn)(
    const void*, const int64_t*, const void*, const int64_t*, const void*,
    const int64_t*, int, int, int, int, int, void*, int, int,
    cg_error*) noexcept nogil
ctypedef int (*grid_sample_jvp_grid_fn)(
    const void*, const int64_t*, const void*, const void*, const int64_t*, int, int,
    int, int, int, void*, int, int, cg_error*) noexcept nogil

ctypedef struct ApiTable:
    int version_major
    int version_minor
    # 1.0
    api_version_fn api_version
    default_threads_fn default_threads
    crop_and_resize_fn crop_and_resize
    crop_and_resize_grad_image_fn crop_and_resize_grad_image
    crop_and_resize_grad_boxes_fn crop_and_resize_grad_boxes
    crop_and_resize_jvp_boxes_fn crop_and_resize_jvp_boxes
    # 1.1
    roi_align_fn roi_align
    roi_align_grad_image_fn roi_align_grad_image
    roi_align_grad_boxes_fn roi_align_grad_boxes
    roi_align_jvp_boxes_fn roi_align_jvp_boxes
    # 1.2
    grid_sample_fn grid_sample
    grid_sample_grad_image_fn grid_sample_grad_image
    grid_sample_grad_grid_fn grid_sample_grad_grid
    grid_sample_jvp_grid_fn grid_sample_jvp_grid

cdef ApiTable TABLE
TABLE.version_major = CG_API_VERSION_MAJOR
TABLE.version_minor = CG_API_VERSION_MINOR
TABLE.api_version = cg_api_version
TABLE.default_threads = cg_default_threads
TABLE.crop_and_resize = cg_crop_and_resize
TABLE.crop_and_resize_grad_image = cg_crop_and_resize_grad_image
TABLE.crop_and_resize_grad_boxes = cg_crop_and_resize_grad_boxes
TABLE.crop_and_resize_jvp_boxes = cg_crop_and_resize_jvp_boxes
TABLE.roi_align = cg_roi_align
TABLE.roi_align_grad_image = cg_roi_align_grad_image
TABLE.roi_align_grad_boxes = cg_roi_align_grad_boxes
TABLE.roi_align_jvp_boxes = cg_roi_align_jvp_boxes
TABLE.grid_sample = cg_grid_sample
TABLE.grid_sample_grad_image = cg_grid_sample_grad_image
TABLE.grid_sample_grad_grid = cg_grid_sample_grad_grid
TABLE.grid_sample_jvp_grid = cg_grid_sample_jvp_grid


cdef dict _function_addresses():
    """The table's functions by name, as integer addresses."""
    cdef ApiTable* t = &TABLE
    return {
        "cg_api_version": <uintptr_t><void*>t.api_version,
        "cg_default_threads": <uintptr_t><void*>t.default_threads,
        "cg_crop_and_resize": <uintptr_t><void*>t.crop_and_resize,
        "cg_crop_and_resize_grad_image": <uintptr_t><void*>t.crop_and_resize_grad_image,
        "cg_crop_and_resize_grad_boxes": <uintptr_t><void*>t.crop_and_resize_grad_boxes,
        "cg_crop_and_resize_jvp_boxes": <uintptr_t><void*>t.crop_and_resize_jvp_boxes,
        "cg_roi_align": <uintptr_t><void*>t.roi_align,
        "cg_roi_align_grad_image": <uintptr_t><void*>t.roi_align_grad_image,
        "cg_roi_align_grad_boxes": <uintptr_t><void*>t.roi_align_grad_boxes,
        "cg_roi_align_jvp_boxes": <uintptr_t><void*>t.roi_align_jvp_boxes,
        "cg_grid_sample": <uintptr_t><void*>t.grid_sample,
        "cg_grid_sample_grad_image": <uintptr_t><void*>t.grid_sample_grad_image,
        "cg_grid_sample_grad_grid": <uintptr_t><void*>t.grid_sample_grad_grid,
        "cg_grid_sample_jvp_grid": <uintptr_t><void*>t.grid_sample_jvp_grid,
    }
