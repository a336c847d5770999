# cython: language_level=3
"""XLA FFI handlers: cropgrad's ops as XLA custom calls.

`cropgrad.jax` registers these handlers with XLA for the CPU platform and
calls them through ``jax.ffi.ffi_call``.  A handler is a plain C function
that XLA calls with a call frame holding its buffers and attributes.  It
decodes them (with frames.pyx), checks what the C-level API cannot see
(that the buffers' shapes agree with one another), and calls the op's
call in cropgrad/_capi with its metadata check, the gate the C-level API
runs, on every call: the kernels run
on XLA's buffers, with no copy, no Python and no GIL.  A bad call comes
back to XLA as an error carrying cropgrad's message, which JAX raises from
the call; it never crashes the process.

Nothing here needs JAX to build or import: ffi.pxd declares the few
structs of XLA's FFI C API that the handlers use.

An op is its family's and kind's `_run_<family>_<kind>` here (decode the
frame's buffers and attributes, call the family's ``run_<kind>``, named
the target's name for messages, through the gate); its `Target` row (its
name in messages, operand count, the FFI API version declared, that
function), the C entry point
that hands XLA's frame and the row to `_handle`, and its entry in
`handlers()`, whose names are the FFI target names (exported artefacts
refer to them, so they never change), are generated from the op model
(targets.pxi, cropgrad/_ops/generate.py).

Targets and their operands (shapes in the layout's order, NHWC or NCHW).
An op's target is ``cropgrad_`` and the op's name; each family's below is
its forward op's, then its other ops' by what their names add to the
forward op's:

``cropgrad_crop_and_resize``
    image (any image dtype, bfloat16 too) [batch, H, W, depth], boxes f32 [n, 4],
    box_ind s32/s64 [n] -> crops f32 [n, crop_h, crop_w, depth];
    attributes ``extrapolation_value`` f32, ``layout``, ``method``,
    ``num_threads`` s32.
``_grad_image``
    grads f32 [n, crop_h, crop_w, depth], boxes, box_ind -> image gradient
    (f16/bf16/f32/f64) of the output's shape; attributes ``layout``, ``method``,
    ``num_threads``.
``_grad_boxes``
    grads, image, boxes, box_ind -> f32 [n, 4]; attributes as above.
``_jvp_boxes``
    image, boxes, box_ind, boxes_tangent f32 [n, 4] -> f32 crops: the
    crops' derivative along the boxes tangent; attributes as above.

``cropgrad_roi_align``
    image (any image dtype) [batch, C, H, W] (NCHW) or [batch, H, W, C],
    boxes f32/f64 [n, 4] (``[x1, y1, x2, y2]``, in the arithmetic type:
    float64 for a float64 image, float32 otherwise), box_ind s32/s64 [n]
    -> pooled output (f16/bf16/f32/f64) [n, C, out_h, out_w] or NHWC;
    attributes ``spatial_scale`` f64, ``sampling_ratio``, ``aligned``,
    ``layout``, ``num_threads`` s32.
``_grad_image``
    grads (the arithmetic type) of the pooled output's shape, boxes, box_ind
    -> image gradient (f16/bf16/f32/f64) of the output's shape; attributes
    as above.
``_grad_boxes``
    grads, image, boxes, box_ind -> [n, 4] in the boxes' dtype.
``_jvp_boxes``
    image, boxes, box_ind, boxes_tangent [n, 4] in the boxes' dtype -> the
    pooled output's derivative along the tangent.

``cropgrad_grid_sample``
    image [N, C, H, W], grid [N, H_out, W_out, 2] -> [N, C, H_out, W_out],
    every array f32 or f64, all of one type (the arithmetic type: cropgrad.jax
    converts them and casts the result); attributes ``mode``,
    ``padding_mode``, ``align_corners``, ``layout`` (NCHW), ``num_threads``
    s32.
``_grad_image``
    grads [N, C, H_out, W_out], grid -> the image gradient, of the output's
    shape; attributes as above.
``_grad_grid``
    grads, image, grid -> the grid's shape.
``_jvp_grid``
    image, grid, grid_tangent (the grid's shape) -> the sampled output's
    derivative along the tangent.

``cropgrad_ffi_version``
    no operand -> s32 [2]: the FFI API version of the running XLA.

Under vmap, every op may also carry ``fold_shape`` (s64 array) and
``fold_images`` (s64): how cropgrad.jax folded the mapped axes into the
op's own, for messages that name the caller's indices.

Every kernel runs with flush-to-zero and denormals-are-zero on all its
threads: XLA:CPU runs its own threads in that mode, so its arithmetic and
TensorFlow's are the same, and every thread of the kernel must share it for
the bits not to depend on the thread count.
"""

from cpython.pycapsule cimport PyCapsule_GetPointer, PyCapsule_New
from libc.stdint cimport int32_t, int64_t
from libc.stdio cimport snprintf

from cropgrad cimport capi
from cropgrad._capi cimport crop_and_resize as cr
from cropgrad._capi cimport grid_sample as gs
from cropgrad._capi cimport roi_align as ra
from cropgrad._jax cimport frames
from cropgrad._jax.ffi cimport (
    CG_FFI_CALL_FRAME_SIZE,
    CG_FFI_EXTENSION_METADATA,
    CG_FFI_METADATA_EXTENSION_SIZE,
    CG_FFI_METADATA_SIZE,
    CG_FFI_S32,
    CG_FFI_STAGE_EXECUTE,
    CG_FFI_VERSION_SIZE,
    cg_ffi_buffer,
    cg_ffi_call_frame,
    cg_ffi_error,
    cg_ffi_metadata,
    cg_ffi_metadata_extension,
)

# The FFI API version these handlers declare to XLA: the header they were
# written against (jaxlib 0.10).  They use only structs unchanged since 0.1,
# and XLA refuses to register a handler whose version it does not support.
cdef enum:
    FFI_MAJOR = 0
    FFI_MINOR = 3

FFI_API_VERSION = (FFI_MAJOR, FFI_MINOR)


# --------------------------------------------------------------------------
# The handlers

ctypedef void (*run_t)(const char*, cg_ffi_call_frame*, frames.Decoded*,
                       capi.cg_error*) noexcept nogil


cdef struct Target:
    # One FFI target: its name in messages, its operand count (each has one
    # result), the FFI API version it declares, and what it runs on a frame
    # that passed the checks.
    const char* name
    int64_t nargs
    int major
    int minor
    run_t run


cdef cg_ffi_error* _handle(cg_ffi_call_frame* frame,
                           const Target* target) noexcept nogil:
    """The body of every handler: answer XLA's metadata query, or check the
    frame, run the op and return its error, if any, to XLA."""
    cdef capi.cg_error e
    cdef frames.Decoded d
    if frames.is_metadata_query(frame):
        frames.answer_metadata(frame.extension_start, target.major,
                               target.minor)
        return NULL
    # Nothing to restate until the op has decoded its fold.
    d.attrs.fold_rank = 0
    d.grid = False
    if frames.check_frame(frame, target.nargs, 1, &e) == 0:
        frames.advise_result(frame)
        target.run(target.name, frame, &d, &e)
        frames.unfold_message(&d, &e)
    return frames.xla_error(frame, target.name, &e)


cdef inline int64_t _depth(const int64_t* dims, int layout) noexcept nogil:
    return dims[3] if layout == capi.CG_NHWC else dims[1]


cdef int _crop_size(const cg_ffi_buffer* out, const char* name,
                    const cg_ffi_buffer* image, int layout, int64_t* crop_h,
                    int64_t* crop_w, capi.cg_error* e) noexcept nogil:
    """The crop size of crops `out`, whose depth must be the image's."""
    if _depth(out.dims, layout) != _depth(image.dims, layout):
        snprintf(e.message, capi.CG_MESSAGE_SIZE,
                 "%s and image differ in depth", name)
        e.status = capi.CG_ERR_VALUE
        e.position = -1
        return -1
    if layout == capi.CG_NHWC:
        crop_h[0], crop_w[0] = out.dims[1], out.dims[2]
    else:
        crop_h[0], crop_w[0] = out.dims[2], out.dims[3]
    return 0


# Each op's run, by family and kind: decode its buffers (operands, then its
# result), check them against one another, and call the family's call of
# the kind with the metadata check (the C-level API's gate), named `op`,
# the target's name.

cdef void _run_crop_and_resize_forward(
    const char* op, cg_ffi_call_frame* frame, frames.Decoded* d, capi.cg_error* e,
) noexcept nogil:
    cdef int image_dtype
    cdef int64_t crop_h, crop_w
    cdef cg_ffi_buffer* image = frames.buffer(&frame.args, 0, 4, "image", e)
    cdef cg_ffi_buffer* crops = frames.buffer(&frame.rets, 0, 4, "crops", e)
    if (image == NULL or crops == NULL
            or frames.decode_attributes(frame, True, &d.attrs, e) < 0):
        return
    image_dtype = frames.dtype_of(image, "image", True, e)
    if image_dtype < 0 or frames.dtype_of(crops, "crops", False, e) < 0:
        return
    if (frames.boxes_and_index(&frame.args, 1, crops.dims[0], image.dims[0],
                               False, d, e) < 0
            or _crop_size(crops, "crops", image, d.attrs.layout, &crop_h,
                          &crop_w, e) < 0):
        return
    cr.run_forward(
        op, True,
        frames.data(image), image_dtype, image.dims, <const float*>d.boxes,
        d.box_ind, d.index_dtype, d.num_boxes, crop_h, crop_w, d.attrs.method,
        d.attrs.extrapolation_value, d.attrs.layout,
        <float*>frames.data(crops), d.attrs.num_threads, 1, e)


cdef void _run_crop_and_resize_grad_image(
    const char* op, cg_ffi_call_frame* frame, frames.Decoded* d, capi.cg_error* e,
) noexcept nogil:
    cdef int output_dtype
    cdef cg_ffi_buffer* grads = frames.buffer(&frame.args, 0, 4, "grads", e)
    cdef cg_ffi_buffer* output = frames.buffer(&frame.rets, 0, 4, "output", e)
    if (grads == NULL or output == NULL
            or frames.decode_attributes(frame, False, &d.attrs, e) < 0):
        return
    if frames.dtype_of(grads, "grads", False, e) < 0:
        return
    output_dtype = frames.float_dtype_of(output, "output", False, e)
    if output_dtype < 0:
        return
    # The output's shape is image_size: the C-level API checks it against
    # the grads.
    if frames.boxes_and_index(&frame.args, 1, grads.dims[0], output.dims[0],
                              False, d, e) < 0:
        return
    cr.run_grad_image(
        op, True,
        <const float*>frames.data(grads), grads.dims, <const float*>d.boxes,
        d.box_ind, d.index_dtype, output.dims, frames.data(output), output_dtype,
        d.attrs.method, d.attrs.layout, d.attrs.num_threads, 1, e)


cdef void _run_crop_and_resize_grad_coords(
    const char* op, cg_ffi_call_frame* frame, frames.Decoded* d, capi.cg_error* e,
) noexcept nogil:
    cdef int image_dtype
    cdef cg_ffi_buffer* grads = frames.buffer(&frame.args, 0, 4, "grads", e)
    cdef cg_ffi_buffer* image = frames.buffer(&frame.args, 1, 4, "image", e)
    cdef cg_ffi_buffer* output = frames.buffer(&frame.rets, 0, 2, "output", e)
    if (grads == NULL or image == NULL or output == NULL
            or frames.decode_attributes(frame, False, &d.attrs, e) < 0):
        return
    image_dtype = frames.dtype_of(image, "image", True, e)
    if (image_dtype < 0 or frames.dtype_of(grads, "grads", False, e) < 0
            or frames.dtype_of(output, "output", False, e) < 0):
        return
    if (frames.box_rows(output, grads.dims[0], "output", e) < 0
            or frames.boxes_and_index(&frame.args, 2, grads.dims[0],
                                      image.dims[0], False, d, e) < 0):
        return
    cr.run_grad_coords(
        op, True,
        <const float*>frames.data(grads), grads.dims, frames.data(image),
        image_dtype, image.dims, <const float*>d.boxes, d.box_ind,
        d.index_dtype, <float*>frames.data(output), d.attrs.method, d.attrs.layout,
        d.attrs.num_threads, 1, e)


cdef void _run_crop_and_resize_jvp_coords(
    const char* op, cg_ffi_call_frame* frame, frames.Decoded* d, capi.cg_error* e,
) noexcept nogil:
    cdef int image_dtype
    cdef int64_t crop_h, crop_w
    cdef cg_ffi_buffer* image = frames.buffer(&frame.args, 0, 4, "image", e)
    cdef cg_ffi_buffer* tangent = frames.buffer(&frame.args, 3, 2,
                                                "boxes_tangent", e)
    cdef cg_ffi_buffer* output = frames.buffer(&frame.rets, 0, 4, "output", e)
    if (image == NULL or tangent == NULL or output == NULL
            or frames.decode_attributes(frame, False, &d.attrs, e) < 0):
        return
    image_dtype = frames.dtype_of(image, "image", True, e)
    if (image_dtype < 0 or frames.dtype_of(output, "output", False, e) < 0
            or frames.dtype_of(tangent, "boxes_tangent", False, e) < 0):
        return
    if (frames.boxes_and_index(&frame.args, 1, output.dims[0], image.dims[0],
                               False, d, e) < 0
            or frames.box_rows(tangent, output.dims[0], "boxes_tangent", e) < 0
            or _crop_size(output, "output", image, d.attrs.layout, &crop_h,
                          &crop_w, e) < 0):
        return
    cr.run_jvp_coords(
        op, True,
        frames.data(image), image_dtype, image.dims, <const float*>d.boxes,
        <const float*>frames.data(tangent), d.box_ind, d.index_dtype,
        d.num_boxes, crop_h, crop_w, d.attrs.method, d.attrs.layout,
        <float*>frames.data(output), d.attrs.num_threads, 1, e)


# The RoIAlign family: boxes [x1, y1, x2, y2] in the arithmetic type
# (float64 for float64 data, float32 otherwise), as are grads and tangents;
# the C-level API checks that they agree.

cdef int _boxes_dtype(const cg_ffi_buffer* b, const char* name,
                      const frames.Decoded* d, capi.cg_error* e) noexcept nogil:
    """Check that `b` has the boxes' dtype; 0 or -1."""
    if frames.float_dtype_of(b, name, True, e) < 0:
        return -1
    if frames.image_dtype(b.dtype) != d.boxes_dtype:
        snprintf(e.message, capi.CG_MESSAGE_SIZE,
                 "%s must have the dtype of boxes", name)
        e.status = capi.CG_ERR_TYPE
        e.position = -1
        return -1
    return 0


cdef void _run_roi_align_forward(
    const char* op, cg_ffi_call_frame* frame, frames.Decoded* d, capi.cg_error* e,
) noexcept nogil:
    cdef int image_dtype, output_dtype
    cdef int64_t out_h, out_w
    cdef cg_ffi_buffer* image = frames.buffer(&frame.args, 0, 4, "image", e)
    cdef cg_ffi_buffer* output = frames.buffer(&frame.rets, 0, 4, "output", e)
    if (image == NULL or output == NULL
            or frames.decode_roi_attributes(frame, &d.attrs, e) < 0):
        return
    image_dtype = frames.dtype_of(image, "image", True, e)
    if image_dtype < 0:
        return
    output_dtype = frames.float_dtype_of(output, "output", False, e)
    if output_dtype < 0:
        return
    if (frames.boxes_and_index(&frame.args, 1, output.dims[0], image.dims[0],
                               True, d, e) < 0
            or _crop_size(output, "output", image, d.attrs.layout, &out_h,
                          &out_w, e) < 0):
        return
    ra.run_forward(
        op, True,
        frames.data(image), image_dtype, image.dims, d.boxes, d.boxes_dtype,
        d.box_ind, d.index_dtype, d.num_boxes, out_h, out_w,
        d.attrs.spatial_scale, d.attrs.sampling_ratio, d.attrs.aligned,
        d.attrs.layout, frames.data(output), output_dtype, d.attrs.num_threads,
        1, e)


cdef void _run_roi_align_grad_image(
    const char* op, cg_ffi_call_frame* frame, frames.Decoded* d, capi.cg_error* e,
) noexcept nogil:
    cdef int grads_dtype, output_dtype
    cdef cg_ffi_buffer* grads = frames.buffer(&frame.args, 0, 4, "grads", e)
    cdef cg_ffi_buffer* output = frames.buffer(&frame.rets, 0, 4, "output", e)
    if (grads == NULL or output == NULL
            or frames.decode_roi_attributes(frame, &d.attrs, e) < 0):
        return
    grads_dtype = frames.float_dtype_of(grads, "grads", True, e)
    if grads_dtype < 0:
        return
    output_dtype = frames.float_dtype_of(output, "output", False, e)
    if output_dtype < 0:
        return
    # The output's shape is image_size: the C-level API checks it against
    # the grads.
    if frames.boxes_and_index(&frame.args, 1, grads.dims[0], output.dims[0],
                              True, d, e) < 0:
        return
    ra.run_grad_image(
        op, True,
        frames.data(grads), grads_dtype, grads.dims, d.boxes, d.boxes_dtype,
        d.box_ind, d.index_dtype, output.dims, d.attrs.spatial_scale,
        d.attrs.sampling_ratio, d.attrs.aligned, d.attrs.layout,
        frames.data(output), output_dtype, d.attrs.num_threads, 1, e)


cdef void _run_roi_align_grad_coords(
    const char* op, cg_ffi_call_frame* frame, frames.Decoded* d, capi.cg_error* e,
) noexcept nogil:
    cdef int grads_dtype, image_dtype
    cdef cg_ffi_buffer* grads = frames.buffer(&frame.args, 0, 4, "grads", e)
    cdef cg_ffi_buffer* image = frames.buffer(&frame.args, 1, 4, "image", e)
    cdef cg_ffi_buffer* output = frames.buffer(&frame.rets, 0, 2, "output", e)
    if (grads == NULL or image == NULL or output == NULL
            or frames.decode_roi_attributes(frame, &d.attrs, e) < 0):
        return
    image_dtype = frames.dtype_of(image, "image", True, e)
    if image_dtype < 0:
        return
    grads_dtype = frames.float_dtype_of(grads, "grads", True, e)
    if grads_dtype < 0:
        return
    if (frames.boxes_and_index(&frame.args, 2, grads.dims[0], image.dims[0],
                               True, d, e) < 0
            or frames.box_rows(output, grads.dims[0], "output", e) < 0
            or _boxes_dtype(output, "output", d, e) < 0):
        return
    ra.run_grad_coords(
        op, True,
        frames.data(grads), grads_dtype, grads.dims, frames.data(image),
        image_dtype, image.dims, d.boxes, d.boxes_dtype, d.box_ind,
        d.index_dtype, d.attrs.spatial_scale, d.attrs.sampling_ratio,
        d.attrs.aligned, d.attrs.layout, frames.data(output),
        d.attrs.num_threads, 1, e)


cdef void _run_roi_align_jvp_coords(
    const char* op, cg_ffi_call_frame* frame, frames.Decoded* d, capi.cg_error* e,
) noexcept nogil:
    cdef int image_dtype, output_dtype
    cdef int64_t out_h, out_w
    cdef cg_ffi_buffer* image = frames.buffer(&frame.args, 0, 4, "image", e)
    cdef cg_ffi_buffer* tangent = frames.buffer(&frame.args, 3, 2,
                                                "boxes_tangent", e)
    cdef cg_ffi_buffer* output = frames.buffer(&frame.rets, 0, 4, "output", e)
    if (image == NULL or tangent == NULL or output == NULL
            or frames.decode_roi_attributes(frame, &d.attrs, e) < 0):
        return
    image_dtype = frames.dtype_of(image, "image", True, e)
    if image_dtype < 0:
        return
    output_dtype = frames.float_dtype_of(output, "output", False, e)
    if output_dtype < 0:
        return
    if (frames.boxes_and_index(&frame.args, 1, output.dims[0], image.dims[0],
                               True, d, e) < 0
            or frames.box_rows(tangent, output.dims[0], "boxes_tangent", e) < 0
            or _boxes_dtype(tangent, "boxes_tangent", d, e) < 0
            or _crop_size(output, "output", image, d.attrs.layout, &out_h,
                          &out_w, e) < 0):
        return
    ra.run_jvp_coords(
        op, True,
        frames.data(image), image_dtype, image.dims, d.boxes,
        frames.data(tangent), d.boxes_dtype, d.box_ind, d.index_dtype,
        d.num_boxes, out_h, out_w, d.attrs.spatial_scale,
        d.attrs.sampling_ratio, d.attrs.aligned, d.attrs.layout,
        frames.data(output), output_dtype, d.attrs.num_threads, 1, e)


# The grid-sampling family's runs.
include "handlers_grid.pxi"

# The smallest op: it reports the FFI API version of the running XLA (the
# plumbing's own test, and a fact for error messages).
cdef void _run_ffi_version(
    const char* op, cg_ffi_call_frame* frame, frames.Decoded* d, capi.cg_error* e,
) noexcept nogil:
    cdef cg_ffi_buffer* out = frames.buffer(&frame.rets, 0, 1, "output", e)
    if out != NULL and (out.dtype != CG_FFI_S32 or out.dims[0] != 2):
        frames.refuse(e, capi.CG_ERR_TYPE, "output must be int32 of shape (2,)")
    elif out != NULL:
        (<int32_t*>out.data)[0] = frame.api.api_version.major_version
        (<int32_t*>out.data)[1] = frame.api.api_version.minor_version


# The version this one declares can be changed (version_probe), to test
# XLA's refusal of an incompatible handler.
cdef Target _FFI_VERSION = Target(
    "ffi_version", 0, FFI_MAJOR, FFI_MINOR, _run_ffi_version)


# XLA calls a handler with the frame alone: one C function a target.
cdef cg_ffi_error* _ffi_version(cg_ffi_call_frame* frame) noexcept nogil:
    return _handle(frame, &_FFI_VERSION)


ctypedef cg_ffi_error* (*handler_t)(cg_ffi_call_frame*) noexcept nogil


cdef object _capsule(handler_t fn):
    return PyCapsule_New(<void*>fn, NULL, NULL)


# Every op's target, row and entry point, from the op model.
include "targets.pxi"


# --------------------------------------------------------------------------
# Python side: capsules for jax.ffi.register_ffi_target, and test hooks

def handlers():
    """The FFI targets and their handlers.

    Returns
    -------
    dict of str to PyCapsule
        Target name to a capsule holding the handler's function pointer, as
        ``jax.ffi.register_ffi_target`` takes it.
    """
    return {**_op_handlers(), "cropgrad_ffi_version": _capsule(_ffi_version)}


def version_probe(int major=FFI_MAJOR, int minor=FFI_MINOR):
    """The ``cropgrad_ffi_version`` handler, declaring `major`.`minor`.

    For tests of XLA's version check: registering it under a new name makes
    XLA ask for the declared version.
    """
    _FFI_VERSION.major = major
    _FFI_VERSION.minor = minor
    return _capsule(_ffi_version)


def metadata(capsule):
    """Ask a handler its metadata as XLA does before registering it.

    Parameters
    ----------
    capsule : PyCapsule
        A handler from `handlers`.

    Returns
    -------
    tuple of int
        ``(major, minor, traits)`` as the handler answered.
    """
    cdef handler_t fn = <handler_t>PyCapsule_GetPointer(capsule, NULL)
    cdef cg_ffi_metadata meta
    cdef cg_ffi_metadata_extension ext
    cdef cg_ffi_call_frame frame
    meta.struct_size = CG_FFI_METADATA_SIZE
    meta.api_version.struct_size = CG_FFI_VERSION_SIZE
    meta.api_version.extension_start = NULL
    meta.api_version.major_version = -1
    meta.api_version.minor_version = -1
    meta.traits = 0xFFFFFFFF
    ext.extension_base.struct_size = CG_FFI_METADATA_EXTENSION_SIZE
    ext.extension_base.type = CG_FFI_EXTENSION_METADATA
    ext.extension_base.next = NULL
    ext.metadata = &meta
    frame.struct_size = CG_FFI_CALL_FRAME_SIZE
    frame.extension_start = &ext.extension_base
    frame.api = NULL
    frame.ctx = NULL
    frame.stage = CG_FFI_STAGE_EXECUTE
    frame.args.size = frame.rets.size = frame.attrs.size = 0
    if fn(&frame) != NULL:
        raise RuntimeError("the metadata query returned an error")
    return (meta.api_version.major_version, meta.api_version.minor_version,
            meta.traits)


def layout_status(int layout):
    """Whether this build's C-level API computes in `layout`.

    Runs the forward op on a one-pixel problem in that layout.

    Returns
    -------
    tuple of (int, str)
        The status (``CG_ERR_UNSUPPORTED`` when the layout is not built
        in) and the message.
    """
    cdef float pixel[1]
    cdef float box[4]
    cdef float crop[1]
    cdef int32_t index[1]
    cdef int64_t shape[4]
    cdef capi.cg_error e
    pixel[0] = 1
    box[0] = box[1] = 0
    box[2] = box[3] = 1
    index[0] = 0
    shape[0] = shape[1] = shape[2] = shape[3] = 1
    with nogil:
        capi.cg_crop_and_resize(pixel, capi.CG_FLOAT32, shape, box, index,
                                capi.CG_INT32, 1, 1, 1, capi.CG_BILINEAR, 0,
                                layout, crop, 1, 0, &e)
    return e.status, e.message.decode("utf-8", "replace")


def default_threads():
    """The thread count a call with ``num_threads == 0`` uses now."""
    return capi.cg_default_threads()
