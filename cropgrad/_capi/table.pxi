# Generated from cropgrad's op model by cropgrad/_ops/generate.py, from
# cropgrad/_capi/table.pxi.tp: edit those, not this file.  Included by
# cropgrad/capi.pyx, after the functions it defines.
#
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
    }
