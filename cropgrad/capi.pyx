# cython: language_level=3
"""cropgrad's C-level API (see capi.pxd and docs/capi.md).

Each function declared in ``capi.pxd`` runs the gate's metadata checks
(cropgrad/_capi, the one definition of a valid call: its family's module
and gate.pyx), then the op's call (the checks that need the data, such as
finite boxes and ``box_ind`` in range, then the kernel), filling the
caller's error record, all without the GIL.  The NumPy API reaches the same
gate and calls through its bridge, cropgrad/_core.pyx, which turns an error
record into the exception the NumPy API documents.
"""

from cpython.pycapsule cimport PyCapsule_New
from libc.stdint cimport int64_t, uintptr_t

from cropgrad._capi cimport crop_and_resize as cr
from cropgrad._capi cimport gate
from cropgrad._capi cimport roi_align as ra
from cropgrad._runtime.parallel cimport resolve_threads


# --------------------------------------------------------------------------
# The C-level API: each function is the gate's metadata check, then the op's
# call.

cdef int cg_default_threads() noexcept nogil:
    return resolve_threads(0)


cdef int cg_api_version() noexcept nogil:
    return (CG_API_VERSION_MAJOR << 16) | CG_API_VERSION_MINOR


cdef int cg_crop_and_resize(
    const void* image, int image_dtype, const int64_t* image_shape,
    const float* boxes, const void* box_ind, int box_ind_dtype, int64_t num_boxes,
    int64_t crop_height, int64_t crop_width, int method, float extrapolation_value,
    int layout, float* crops, int num_threads, int flush_denormals,
    cg_error* error,
) noexcept nogil:
    cdef cg_error local
    if error == NULL:
        error = &local
    if (gate.check_shape_pointer(image_shape, "image_shape", error) != CG_OK
            or cr.check_forward(image_shape, image_dtype, num_boxes, crop_height,
                                crop_width, method, layout, num_threads, False,
                                error) != CG_OK):
        return error.status
    return cr.run_crop_and_resize(
        image, image_dtype, image_shape, boxes, box_ind, box_ind_dtype, num_boxes,
        crop_height, crop_width, method, extrapolation_value, layout, crops,
        num_threads, flush_denormals, error)


cdef int cg_crop_and_resize_grad_image(
    const float* grads, const int64_t* grads_shape, const float* boxes,
    const void* box_ind, int box_ind_dtype, const int64_t* image_size,
    void* output, int output_dtype, int method, int layout, int num_threads,
    int flush_denormals, cg_error* error,
) noexcept nogil:
    cdef cg_error local
    if error == NULL:
        error = &local
    if (gate.check_shape_pointer(grads_shape, "grads_shape", error) != CG_OK
            or gate.check_shape_pointer(image_size, "image_size", error) != CG_OK
            or cr.check_grad_image(grads_shape, image_size, output_dtype, method,
                                   layout, num_threads, "image_size",
                                   error) != CG_OK):
        return error.status
    return cr.run_grad_image(
        grads, grads_shape, boxes, box_ind, box_ind_dtype, image_size, output,
        output_dtype, method, layout, num_threads, flush_denormals, error)


cdef int cg_crop_and_resize_grad_boxes(
    const float* grads, const int64_t* grads_shape, const void* image,
    int image_dtype, const int64_t* image_shape, const float* boxes,
    const void* box_ind, int box_ind_dtype, float* output, int method, int layout,
    int num_threads, int flush_denormals, cg_error* error,
) noexcept nogil:
    cdef cg_error local
    if error == NULL:
        error = &local
    if (gate.check_shape_pointer(grads_shape, "grads_shape", error) != CG_OK
            or gate.check_shape_pointer(image_shape, "image_shape", error) != CG_OK
            or cr.check_grad_boxes(grads_shape, image_shape, image_dtype, method,
                                   layout, num_threads, error) != CG_OK):
        return error.status
    return cr.run_grad_boxes(
        grads, grads_shape, image, image_dtype, image_shape, boxes, box_ind,
        box_ind_dtype, output, method, layout, num_threads, flush_denormals, error)


cdef int cg_crop_and_resize_jvp_boxes(
    const void* image, int image_dtype, const int64_t* image_shape,
    const float* boxes, const float* boxes_tangent, const void* box_ind,
    int box_ind_dtype, int64_t num_boxes, int64_t crop_height, int64_t crop_width,
    int method, int layout, float* output, int num_threads, int flush_denormals,
    cg_error* error,
) noexcept nogil:
    cdef cg_error local
    if error == NULL:
        error = &local
    if (gate.check_shape_pointer(image_shape, "image_shape", error) != CG_OK
            or cr.check_forward(image_shape, image_dtype, num_boxes, crop_height,
                                crop_width, method, layout, num_threads, True,
                                error) != CG_OK):
        return error.status
    return cr.run_jvp_boxes(
        image, image_dtype, image_shape, boxes, boxes_tangent, box_ind,
        box_ind_dtype, num_boxes, crop_height, crop_width, method, layout, output,
        num_threads, flush_denormals, error)


cdef int cg_roi_align(
    const void* image, int image_dtype, const int64_t* image_shape,
    const void* boxes, int boxes_dtype, const void* box_ind, int box_ind_dtype,
    int64_t num_boxes, int64_t output_height, int64_t output_width,
    double spatial_scale, int sampling_ratio, int aligned, int layout,
    void* output, int output_dtype, int num_threads, int flush_denormals,
    cg_error* error,
) noexcept nogil:
    cdef cg_error local
    if error == NULL:
        error = &local
    if (gate.check_shape_pointer(image_shape, "image_shape", error) != CG_OK
            or ra.check_roi_align(image_shape, image_dtype, boxes_dtype, num_boxes,
                                  output_height, output_width, spatial_scale,
                                  sampling_ratio, layout, output_dtype,
                                  num_threads, error) != CG_OK):
        return error.status
    return ra.run_roi_align(
        image, image_dtype, image_shape, boxes, boxes_dtype, box_ind,
        box_ind_dtype, num_boxes, output_height, output_width, spatial_scale,
        sampling_ratio, aligned, layout, output, output_dtype, num_threads,
        flush_denormals, error)


cdef int cg_roi_align_grad_image(
    const void* grads, int grads_dtype, const int64_t* grads_shape,
    const void* boxes, int boxes_dtype, const void* box_ind, int box_ind_dtype,
    const int64_t* image_size, double spatial_scale, int sampling_ratio,
    int aligned, int layout, void* output, int output_dtype, int num_threads,
    int flush_denormals, cg_error* error,
) noexcept nogil:
    cdef cg_error local
    if error == NULL:
        error = &local
    if (gate.check_shape_pointer(grads_shape, "grads_shape", error) != CG_OK
            or gate.check_shape_pointer(image_size, "image_size", error) != CG_OK
            or ra.check_roi_align_grad_image(
                grads_shape, grads_dtype, boxes_dtype, image_size, spatial_scale,
                sampling_ratio, layout, output_dtype, num_threads, "image_size",
                error) != CG_OK):
        return error.status
    return ra.run_roi_align_grad_image(
        grads, grads_dtype, grads_shape, boxes, boxes_dtype, box_ind,
        box_ind_dtype, image_size, spatial_scale, sampling_ratio, aligned, layout,
        output, output_dtype, num_threads, flush_denormals, error)


cdef int cg_roi_align_grad_boxes(
    const void* grads, int grads_dtype, const int64_t* grads_shape,
    const void* image, int image_dtype, const int64_t* image_shape,
    const void* boxes, int boxes_dtype, const void* box_ind, int box_ind_dtype,
    double spatial_scale, int sampling_ratio, int aligned, int layout,
    void* output, int num_threads, int flush_denormals, cg_error* error,
) noexcept nogil:
    cdef cg_error local
    if error == NULL:
        error = &local
    if (gate.check_shape_pointer(grads_shape, "grads_shape", error) != CG_OK
            or gate.check_shape_pointer(image_shape, "image_shape", error) != CG_OK
            or ra.check_roi_align_grad_boxes(
                grads_shape, grads_dtype, image_shape, image_dtype, boxes_dtype,
                spatial_scale, sampling_ratio, layout, num_threads,
                error) != CG_OK):
        return error.status
    return ra.run_roi_align_grad_boxes(
        grads, grads_dtype, grads_shape, image, image_dtype, image_shape, boxes,
        boxes_dtype, box_ind, box_ind_dtype, spatial_scale, sampling_ratio,
        aligned, layout, output, num_threads, flush_denormals, error)


cdef int cg_roi_align_jvp_boxes(
    const void* image, int image_dtype, const int64_t* image_shape,
    const void* boxes, const void* boxes_tangent, int boxes_dtype,
    const void* box_ind, int box_ind_dtype, int64_t num_boxes,
    int64_t output_height, int64_t output_width, double spatial_scale,
    int sampling_ratio, int aligned, int layout, void* output, int output_dtype,
    int num_threads, int flush_denormals, cg_error* error,
) noexcept nogil:
    cdef cg_error local
    if error == NULL:
        error = &local
    if (gate.check_shape_pointer(image_shape, "image_shape", error) != CG_OK
            or ra.check_roi_align(image_shape, image_dtype, boxes_dtype, num_boxes,
                                  output_height, output_width, spatial_scale,
                                  sampling_ratio, layout, output_dtype,
                                  num_threads, error) != CG_OK):
        return error.status
    return ra.run_roi_align_jvp_boxes(
        image, image_dtype, image_shape, boxes, boxes_tangent, boxes_dtype,
        box_ind, box_ind_dtype, num_boxes, output_height, output_width,
        spatial_scale, sampling_ratio, aligned, layout, output, output_dtype,
        num_threads, flush_denormals, error)


# --------------------------------------------------------------------------
# The codes of capi.pxd, for the Python layer (cropgrad._api.validation) and
# for ctypes, cffi and Numba consumers: by name in this dict, and each as a
# module attribute of its own (cropgrad.capi.CG_FLOAT32, set below; Cython
# cannot assign a Python name that its enums already hold).
_CODES = {
    "CG_OK": CG_OK, "CG_ERR_VALUE": CG_ERR_VALUE, "CG_ERR_INDEX": CG_ERR_INDEX,
    "CG_ERR_TYPE": CG_ERR_TYPE, "CG_ERR_MEMORY": CG_ERR_MEMORY,
    "CG_ERR_UNSUPPORTED": CG_ERR_UNSUPPORTED,
    "CG_UINT8": CG_UINT8, "CG_INT8": CG_INT8, "CG_UINT16": CG_UINT16,
    "CG_INT16": CG_INT16, "CG_INT32": CG_INT32, "CG_INT64": CG_INT64,
    "CG_FLOAT16": CG_FLOAT16, "CG_FLOAT32": CG_FLOAT32, "CG_FLOAT64": CG_FLOAT64,
    "CG_BFLOAT16": CG_BFLOAT16,
    "CG_NHWC": CG_NHWC, "CG_NCHW": CG_NCHW,
    "CG_BILINEAR": CG_BILINEAR, "CG_NEAREST": CG_NEAREST,
    "CG_MESSAGE_SIZE": CG_MESSAGE_SIZE,
}
globals().update(_CODES)


# --------------------------------------------------------------------------
# The way in for C, C++, ctypes, cffi and Numba (docs/capi.md)

# The capsule's table (ApiTable, filled in TABLE) and _function_addresses(),
# generated from the op model.
include "_capi/table.pxi"

# The capsule's name is part of the API: capi.h's CROPGRAD_CAPSULE_NAME.
_C_API = PyCapsule_New(&TABLE, b"cropgrad.capi._C_API", NULL)


def api_version():
    """The C-level API's version of this build, as ``(major, minor)``.

    A consumer built against ``major.minor`` runs with a cropgrad whose
    version has the same major and a minor at least as high.

    Examples
    --------
    >>> import cropgrad.capi
    >>> major, minor = cropgrad.capi.api_version()
    >>> major >= 1
    True
    """
    return (CG_API_VERSION_MAJOR, CG_API_VERSION_MINOR)


def function_addresses():
    """The C-level API's functions by name, as integer addresses.

    For ctypes, cffi and Numba, which need a function's address and its C
    signature (``cropgrad/include/cropgrad/capi.h``, docs/capi.md): e.g.
    ``ctypes.CFUNCTYPE(ctypes.c_int)(function_addresses()["cg_api_version"])``.
    The addresses stay valid while the process runs (the module is never
    unloaded).

    Examples
    --------
    >>> import ctypes
    >>> import cropgrad.capi
    >>> addresses = cropgrad.capi.function_addresses()
    >>> version = ctypes.CFUNCTYPE(ctypes.c_int)(addresses["cg_api_version"])
    >>> divmod(version(), 1 << 16) == cropgrad.capi.api_version()
    True
    """
    return _function_addresses()
