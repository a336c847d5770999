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

Every op's handler decodes its frame the same way, by the op's `Row`:
its buffers first (`_buffers`: each operand's and its result's place, rank
and name, as the op model has them), then its attributes (those of its
family's table that its kind has, frames.decode_attributes), then the
buffers' dtypes, those the model says the op takes, in the order of the
family's coordinates (`_decode_boxes`, `_decode_grid`), then the op's
call (`_call_<family>_<kind>`, written by hand here and in
handlers_roi.pxi and handlers_grid.pxi: the checks of the shapes against
one another that only its family makes, then the family's ``run_<kind>``,
named the target's name for messages, through the gate).  The family's
table of attributes, the row, the function that runs it, the op's
`Target` row (its name in messages, operand count, the FFI API version
declared, that function), the C entry point that hands XLA's frame and the
target row to `_handle`, and its entry in `handlers()`, whose names are
the FFI target names (exported artefacts refer to them, so they never
change), are generated from the op model (targets.pxi,
cropgrad/_ops/generate.py).

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
# The attributes' XLA types, which only the generated targets.pxi names (a
# lint of the sources alone, before the build renders it, sees no use).
from cropgrad._jax.ffi cimport CG_FFI_F32, CG_FFI_F64, CG_FFI_S64  # no-cython-lint

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


# --------------------------------------------------------------------------
# An op's buffers, by its row

# What a buffer is to its op: its operand's role (cropgrad._ops.ROLES), or
# its result.  box_ind is decoded with the boxes, by the family.
cdef enum:
    IMAGE
    GRADS
    COORDS
    INDICES
    TANGENT
    RESULT
    ROLES

# The dtypes an op takes for a buffer (cropgrad._ops.DTYPES).
cdef enum:
    TAKES_IMAGE
    TAKES_FLOAT32
    TAKES_FLOAT
    TAKES_ARITHMETIC
    TAKES_COORDS
    TAKES_INDEX

# The op kinds with a kernel (cropgrad._ops.KINDS), and the `kinds` of an
# attribute that every op has (frames.Attr: a bit a kind).
cdef enum:
    FORWARD
    GRAD_IMAGE
    GRAD_COORDS
    JVP_COORDS

cdef enum:
    EVERY_KIND = (1 << FORWARD | 1 << GRAD_IMAGE | 1 << GRAD_COORDS
                  | 1 << JVP_COORDS)


cdef struct Slot:
    # A buffer an op's handler takes from the frame: its role, its place
    # (among the operands, or the results for the result), its rank, its
    # name in messages and the dtypes the op takes for it (TAKES_*).
    int role
    int64_t index
    int64_t rank
    const char* name
    int dtypes


cdef struct Buffer:
    # A buffer as its slot decoded it: XLA's (NULL: the op has none of that
    # role, or decodes it itself), where its elements are (never NULL), its
    # dims, and its dtype code once checked.
    const Slot* slot
    cg_ffi_buffer* ffi
    void* data
    const int64_t* dims
    int dtype


cdef struct Row

# A family's decoding of an op's dtypes, once its buffers and attributes are
# taken (0 or -1), and an op's call (its shape checks, then its family's
# run_<kind>), given the buffers by role.
ctypedef int (*decode_t)(const cg_ffi_call_frame*, const Row*, Buffer*,
                         frames.Decoded*, capi.cg_error*) noexcept nogil
ctypedef void (*call_t)(const char*, const cg_ffi_call_frame*, const Row*,
                        const Buffer*, frames.Decoded*,
                        capi.cg_error*) noexcept nogil


cdef struct Row:
    # How an op's handler decodes its frame, from the op model (targets.pxi):
    # its buffers in the order it takes them (its operands, then its
    # result), its family's attributes (those of its kind are its own), its
    # kind, its boxes' place among the operands (box_ind the next one; -1:
    # none), whether they may be float64, what messages call its
    # coordinates; its family's decoding of the dtypes and its call.
    const Slot* slots
    int nslots
    const frames.Attr* attrs
    int nattrs
    int kind
    int64_t boxes
    bint wide
    const char* coords
    decode_t decode
    call_t call


cdef void _run(const char* op, cg_ffi_call_frame* frame, const Row* row,
               frames.Decoded* d, capi.cg_error* e) noexcept nogil:
    """Run an op on a checked frame by its row: its buffers, its attributes,
    its family's decoding of the dtypes, its call (named `op`)."""
    cdef Buffer b[ROLES]
    if (_buffers(frame, row, b, e) == 0
            and frames.decode_attributes(frame, row.attrs, row.nattrs,
                                         row.kind, &d.attrs, e) == 0
            and row.decode(frame, row, b, d, e) == 0):
        row.call(op, frame, row, b, d, e)


cdef int _buffers(const cg_ffi_call_frame* frame, const Row* row, Buffer* b,
                  capi.cg_error* e) noexcept nogil:
    """Take the row's buffers from the frame into `b`, by role; 0, or -1 if
    one is not a buffer of its rank.  Each is taken whatever became of the
    ones before it: the error is the last wrong one's."""
    cdef const Slot* s
    cdef Buffer* x
    cdef int i, status = 0
    for i in range(ROLES):
        b[i].ffi = NULL
    for i in range(row.nslots):
        s = &row.slots[i]
        x = &b[s.role]
        x.slot = s
        x.ffi = frames.buffer(&frame.rets if s.role == RESULT else &frame.args,
                              s.index, s.rank, s.name, e)
        if x.ffi == NULL:
            status = -1
        else:
            x.data = frames.data(x.ffi)
            x.dims = x.ffi.dims
    return status


cdef int _dtypes(const Row* row, Buffer* b, const int* order, int n,
                 capi.cg_error* e) noexcept nogil:
    """Check the buffers' dtypes, by role in `order` (the family's: a call
    with more than one wrong gets the first's message), and keep their
    codes; 0 or -1.  A buffer of the coordinates' dtype is checked here
    when the op takes them with its buffers (the grid), else by the op's
    call, once it has decoded them (the boxes)."""
    cdef Buffer* x
    cdef int i
    for i in range(n):
        x = &b[order[i]]
        if x.ffi == NULL:
            continue
        if x.slot.dtypes == TAKES_IMAGE:
            x.dtype = frames.dtype_of(x.ffi, x.slot.name, True, e)
        elif x.slot.dtypes == TAKES_FLOAT32:
            x.dtype = frames.dtype_of(x.ffi, x.slot.name, False, e)
        elif x.slot.dtypes == TAKES_FLOAT:
            x.dtype = frames.float_dtype_of(x.ffi, x.slot.name, False, e)
        elif x.slot.dtypes == TAKES_ARITHMETIC:
            x.dtype = frames.float_dtype_of(x.ffi, x.slot.name, True, e)
        elif x.slot.dtypes == TAKES_COORDS and b[COORDS].ffi != NULL:
            x.dtype = _coords_dtype(x, b[COORDS].dtype, row.coords, e)
        else:
            continue
        if x.dtype < 0:
            return -1
    return 0


cdef int _coords_dtype(const Buffer* x, int dtype, const char* coords,
                       capi.cg_error* e) noexcept nogil:
    """Check that `x` has the coordinates' arithmetic type `dtype` (`coords`:
    what messages call them); its code, or -1."""
    cdef int code = frames.float_dtype_of(x.ffi, x.slot.name, True, e)
    if code < 0 or code == dtype:
        return code
    snprintf(e.message, capi.CG_MESSAGE_SIZE, "%s must have the dtype of %s",
             x.slot.name, coords)
    e.status = capi.CG_ERR_TYPE
    e.position = -1
    return -1


# --------------------------------------------------------------------------
# The families' decoding and the ops' calls

cdef inline int64_t _depth(const int64_t* dims, int layout) noexcept nogil:
    return dims[3] if layout == capi.CG_NHWC else dims[1]


cdef int _crop_size(const Buffer* b, int layout, int64_t* crop_h,
                    int64_t* crop_w, capi.cg_error* e) noexcept nogil:
    """The crop size of the result, whose depth must be the image's."""
    cdef const Buffer* out = &b[RESULT]
    if _depth(out.dims, layout) != _depth(b[IMAGE].dims, layout):
        snprintf(e.message, capi.CG_MESSAGE_SIZE,
                 "%s and image differ in depth", out.slot.name)
        e.status = capi.CG_ERR_VALUE
        e.position = -1
        return -1
    if layout == capi.CG_NHWC:
        crop_h[0], crop_w[0] = out.dims[1], out.dims[2]
    else:
        crop_h[0], crop_w[0] = out.dims[2], out.dims[3]
    return 0


cdef int _boxes(const cg_ffi_call_frame* frame, const Row* row,
                const Buffer* b, frames.Decoded* d,
                capi.cg_error* e) noexcept nogil:
    """Decode the boxes and box_ind into `d`: a box for each crop (of the
    grads, or of the result), indexing the images (the image's, or the
    image gradient's)."""
    cdef const Buffer* crops = &b[GRADS] if b[GRADS].ffi != NULL else &b[RESULT]
    cdef const Buffer* images = &b[IMAGE] if b[IMAGE].ffi != NULL else &b[RESULT]
    return frames.boxes_and_index(&frame.args, row.boxes, crops.dims[0],
                                  images.dims[0], row.wide, d, e)


# The boxes' families check the image's dtype first, then the grads', the
# result's and the tangent's (a call with more than one wrong gets the
# first's message).
cdef int _BOXES_ORDER[4]
_BOXES_ORDER[:] = [IMAGE, GRADS, RESULT, TANGENT]


cdef int _decode_boxes(
    const cg_ffi_call_frame* frame, const Row* row, Buffer* b, frames.Decoded* d,
    capi.cg_error* e,
) noexcept nogil:
    return _dtypes(row, b, _BOXES_ORDER, 4, e)


cdef void _call_crop_and_resize_forward(
    const char* op, const cg_ffi_call_frame* frame, const Row* row,
    const Buffer* b, frames.Decoded* d, capi.cg_error* e,
) noexcept nogil:
    cdef const Buffer* image = &b[IMAGE]
    cdef int64_t crop_h, crop_w
    if (_boxes(frame, row, b, d, e) < 0
            or _crop_size(b, d.attrs.layout, &crop_h, &crop_w, e) < 0):
        return
    cr.run_forward(
        op, True,
        image.data, image.dtype, image.dims, <const float*>d.boxes,
        d.box_ind, d.index_dtype, d.num_boxes, crop_h, crop_w, d.attrs.method,
        d.attrs.extrapolation_value, d.attrs.layout,
        <float*>b[RESULT].data, d.attrs.num_threads, 1, e)


cdef void _call_crop_and_resize_grad_image(
    const char* op, const cg_ffi_call_frame* frame, const Row* row,
    const Buffer* b, frames.Decoded* d, capi.cg_error* e,
) noexcept nogil:
    cdef const Buffer* output = &b[RESULT]
    # The output's shape is image_size: the C-level API checks it against
    # the grads.
    if _boxes(frame, row, b, d, e) < 0:
        return
    cr.run_grad_image(
        op, True,
        <const float*>b[GRADS].data, b[GRADS].dims, <const float*>d.boxes,
        d.box_ind, d.index_dtype, output.dims, output.data, output.dtype,
        d.attrs.method, d.attrs.layout, d.attrs.num_threads, 1, e)


cdef void _call_crop_and_resize_grad_coords(
    const char* op, const cg_ffi_call_frame* frame, const Row* row,
    const Buffer* b, frames.Decoded* d, capi.cg_error* e,
) noexcept nogil:
    cdef const Buffer* grads = &b[GRADS]
    cdef const Buffer* image = &b[IMAGE]
    if (frames.box_rows(b[RESULT].ffi, grads.dims[0], "output", e) < 0
            or _boxes(frame, row, b, d, e) < 0):
        return
    cr.run_grad_coords(
        op, True,
        <const float*>grads.data, grads.dims, image.data, image.dtype,
        image.dims, <const float*>d.boxes, d.box_ind, d.index_dtype,
        <float*>b[RESULT].data, d.attrs.method, d.attrs.layout,
        d.attrs.num_threads, 1, e)


cdef void _call_crop_and_resize_jvp_coords(
    const char* op, const cg_ffi_call_frame* frame, const Row* row,
    const Buffer* b, frames.Decoded* d, capi.cg_error* e,
) noexcept nogil:
    cdef const Buffer* image = &b[IMAGE]
    cdef const Buffer* tangent = &b[TANGENT]
    cdef int64_t crop_h, crop_w
    if (_boxes(frame, row, b, d, e) < 0
            or frames.box_rows(tangent.ffi, b[RESULT].dims[0], "boxes_tangent",
                               e) < 0
            or _crop_size(b, d.attrs.layout, &crop_h, &crop_w, e) < 0):
        return
    cr.run_jvp_coords(
        op, True,
        image.data, image.dtype, image.dims, <const float*>d.boxes,
        <const float*>tangent.data, d.box_ind, d.index_dtype,
        d.num_boxes, crop_h, crop_w, d.attrs.method, d.attrs.layout,
        <float*>b[RESULT].data, d.attrs.num_threads, 1, e)


# The RoIAlign family's decoding and calls.
include "handlers_roi.pxi"

# The grid-sampling family's decoding and calls.
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


# Every family's attributes, every op's decoding row, target row and entry
# point, from the op model.
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
