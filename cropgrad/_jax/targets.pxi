# Generated from cropgrad's op model by cropgrad/_ops/generate.py, from
# cropgrad/_jax/targets.pxi.tp: edit those, not this file.  Included by
# cropgrad/_jax/handlers.pyx, after each op's _run_<family>_<kind>.
#
# Each op's FFI target: its row (name in messages, operand count: its array
# operands, each call having one result; the FFI API version declared; the
# function run on a checked frame), the C entry point XLA calls with the
# frame alone, and its capsule under the target's name, which exported
# artefacts refer to, so it never changes.  Only the ops JAX has.

cdef Target _CROP_AND_RESIZE = Target(
    "crop_and_resize", 3, FFI_MAJOR, FFI_MINOR,
    _run_crop_and_resize_forward)


cdef cg_ffi_error* _crop_and_resize(cg_ffi_call_frame* frame) noexcept nogil:
    return _handle(frame, &_CROP_AND_RESIZE)

cdef Target _CROP_AND_RESIZE_GRAD_IMAGE = Target(
    "crop_and_resize_grad_image", 3, FFI_MAJOR, FFI_MINOR,
    _run_crop_and_resize_grad_image)


cdef cg_ffi_error* _crop_and_resize_grad_image(cg_ffi_call_frame* frame) noexcept nogil:
    return _handle(frame, &_CROP_AND_RESIZE_GRAD_IMAGE)

cdef Target _CROP_AND_RESIZE_GRAD_BOXES = Target(
    "crop_and_resize_grad_boxes", 4, FFI_MAJOR, FFI_MINOR,
    _run_crop_and_resize_grad_coords)


cdef cg_ffi_error* _crop_and_resize_grad_boxes(cg_ffi_call_frame* frame) noexcept nogil:
    return _handle(frame, &_CROP_AND_RESIZE_GRAD_BOXES)

cdef Target _CROP_AND_RESIZE_JVP_BOXES = Target(
    "crop_and_resize_jvp_boxes", 4, FFI_MAJOR, FFI_MINOR,
    _run_crop_and_resize_jvp_coords)


cdef cg_ffi_error* _crop_and_resize_jvp_boxes(cg_ffi_call_frame* frame) noexcept nogil:
    return _handle(frame, &_CROP_AND_RESIZE_JVP_BOXES)

cdef Target _ROI_ALIGN = Target(
    "roi_align", 3, FFI_MAJOR, FFI_MINOR,
    _run_roi_align_forward)


cdef cg_ffi_error* _roi_align(cg_ffi_call_frame* frame) noexcept nogil:
    return _handle(frame, &_ROI_ALIGN)

cdef Target _ROI_ALIGN_GRAD_IMAGE = Target(
    "roi_align_grad_image", 3, FFI_MAJOR, FFI_MINOR,
    _run_roi_align_grad_image)


cdef cg_ffi_error* _roi_align_grad_image(cg_ffi_call_frame* frame) noexcept nogil:
    return _handle(frame, &_ROI_ALIGN_GRAD_IMAGE)

cdef Target _ROI_ALIGN_GRAD_BOXES = Target(
    "roi_align_grad_boxes", 4, FFI_MAJOR, FFI_MINOR,
    _run_roi_align_grad_coords)


cdef cg_ffi_error* _roi_align_grad_boxes(cg_ffi_call_frame* frame) noexcept nogil:
    return _handle(frame, &_ROI_ALIGN_GRAD_BOXES)

cdef Target _ROI_ALIGN_JVP_BOXES = Target(
    "roi_align_jvp_boxes", 4, FFI_MAJOR, FFI_MINOR,
    _run_roi_align_jvp_coords)


cdef cg_ffi_error* _roi_align_jvp_boxes(cg_ffi_call_frame* frame) noexcept nogil:
    return _handle(frame, &_ROI_ALIGN_JVP_BOXES)

cdef Target _GRID_SAMPLE = Target(
    "grid_sample", 2, FFI_MAJOR, FFI_MINOR,
    _run_grid_sample_forward)


cdef cg_ffi_error* _grid_sample(cg_ffi_call_frame* frame) noexcept nogil:
    return _handle(frame, &_GRID_SAMPLE)

cdef Target _GRID_SAMPLE_GRAD_IMAGE = Target(
    "grid_sample_grad_image", 2, FFI_MAJOR, FFI_MINOR,
    _run_grid_sample_grad_image)


cdef cg_ffi_error* _grid_sample_grad_image(cg_ffi_call_frame* frame) noexcept nogil:
    return _handle(frame, &_GRID_SAMPLE_GRAD_IMAGE)

cdef Target _GRID_SAMPLE_GRAD_GRID = Target(
    "grid_sample_grad_grid", 3, FFI_MAJOR, FFI_MINOR,
    _run_grid_sample_grad_coords)


cdef cg_ffi_error* _grid_sample_grad_grid(cg_ffi_call_frame* frame) noexcept nogil:
    return _handle(frame, &_GRID_SAMPLE_GRAD_GRID)

cdef Target _GRID_SAMPLE_JVP_GRID = Target(
    "grid_sample_jvp_grid", 3, FFI_MAJOR, FFI_MINOR,
    _run_grid_sample_jvp_coords)


cdef cg_ffi_error* _grid_sample_jvp_grid(cg_ffi_call_frame* frame) noexcept nogil:
    return _handle(frame, &_GRID_SAMPLE_JVP_GRID)


cdef dict _op_handlers():
    """Each op's target name and its handler's capsule."""
    return {
        "cropgrad_crop_and_resize": _capsule(_crop_and_resize),
        "cropgrad_crop_and_resize_grad_image": _capsule(_crop_and_resize_grad_image),
        "cropgrad_crop_and_resize_grad_boxes": _capsule(_crop_and_resize_grad_boxes),
        "cropgrad_crop_and_resize_jvp_boxes": _capsule(_crop_and_resize_jvp_boxes),
        "cropgrad_roi_align": _capsule(_roi_align),
        "cropgrad_roi_align_grad_image": _capsule(_roi_align_grad_image),
        "cropgrad_roi_align_grad_boxes": _capsule(_roi_align_grad_boxes),
        "cropgrad_roi_align_jvp_boxes": _capsule(_roi_align_jvp_boxes),
        "cropgrad_grid_sample": _capsule(_grid_sample),
        "cropgrad_grid_sample_grad_image": _capsule(_grid_sample_grad_image),
        "cropgrad_grid_sample_grad_grid": _capsule(_grid_sample_grad_grid),
        "cropgrad_grid_sample_jvp_grid": _capsule(_grid_sample_jvp_grid),
    }
