# cython: language_level=3
"""XLA FFI handlers: cropgrad's three ops as XLA custom calls.

`cropgrad.jax` registers these handlers with XLA for the CPU platform and
calls them through ``jax.ffi.ffi_call``.  A handler is a plain C function
that XLA calls with a call frame holding its buffers and attributes.  It
decodes them, checks what the C-level API cannot see (that the buffers'
shapes agree with one another), and calls `cropgrad.capi`: the kernels run
on XLA's buffers, with no copy, no Python and no GIL.  A bad call comes
back to XLA as an error carrying cropgrad's message, which JAX raises from
the call; it never crashes the process.

Nothing here needs JAX to build or import: `_xla_ffi.pxd` declares the few
structs of XLA's FFI C API that the handlers use.

Targets and their operands (shapes in the layout's order, NHWC or NCHW):

``cropgrad_crop_and_resize``
    image (any image dtype, bfloat16 too) [batch, H, W, depth], boxes f32 [n, 4],
    box_ind s32/s64 [n] -> crops f32 [n, crop_h, crop_w, depth];
    attributes ``extrapolation_value`` f32, ``layout``, ``method``,
    ``num_threads`` s32.
``cropgrad_crop_and_resize_grad_image``
    grads f32 [n, crop_h, crop_w, depth], boxes, box_ind -> image gradient
    (f16/bf16/f32/f64) of the output's shape; attributes ``layout``, ``method``,
    ``num_threads``.
``cropgrad_crop_and_resize_grad_boxes``
    grads, image, boxes, box_ind -> f32 [n, 4]; attributes as above.
``cropgrad_crop_and_resize_jvp_boxes``
    image, boxes, box_ind, boxes_tangent f32 [n, 4] -> f32 crops: the
    crops' derivative along the boxes tangent; attributes as above.

Under vmap, every op may also carry ``fold_shape`` (s64 array) and
``fold_images`` (s64): how cropgrad.jax folded the mapped axes into the
op's own, for messages that name the caller's indices.
``cropgrad_ffi_version``
    no operand -> s32 [2]: the FFI API version of the running XLA.

Every kernel runs with flush-to-zero and denormals-are-zero on all its
threads: XLA:CPU runs its own threads in that mode, so its arithmetic and
TensorFlow's are the same, and every thread of the kernel must share it for
the bits not to depend on the thread count.
"""

from cpython.pycapsule cimport PyCapsule_GetPointer, PyCapsule_New
from libc.stdint cimport int32_t, int64_t
from libc.stdio cimport snprintf
from libc.string cimport memcmp, strlen

from cropgrad cimport capi
from cropgrad._xla_ffi cimport (
    CG_FFI_ATTR_ARRAY,
    CG_FFI_ATTR_SCALAR,
    CG_FFI_BF16,
    CG_FFI_BUFFER,
    CG_FFI_BUFFER_SIZE,
    CG_FFI_CALL_FRAME_SIZE,
    CG_FFI_ERROR_ARGS_SIZE,
    CG_FFI_EXTENSION_METADATA,
    CG_FFI_F16,
    CG_FFI_F32,
    CG_FFI_F64,
    CG_FFI_INTERNAL,
    CG_FFI_INVALID_ARGUMENT,
    CG_FFI_METADATA_EXTENSION_SIZE,
    CG_FFI_METADATA_SIZE,
    CG_FFI_OUT_OF_RANGE,
    CG_FFI_RESOURCE_EXHAUSTED,
    CG_FFI_S8,
    CG_FFI_S16,
    CG_FFI_S32,
    CG_FFI_S64,
    CG_FFI_STAGE_EXECUTE,
    CG_FFI_U8,
    CG_FFI_U16,
    CG_FFI_UNIMPLEMENTED,
    CG_FFI_VERSION_SIZE,
    cg_ffi_array,
    cg_ffi_attrs,
    cg_ffi_buffer,
    cg_ffi_call_frame,
    cg_ffi_error,
    cg_ffi_error_args,
    cg_ffi_extension,
    cg_ffi_list,
    cg_ffi_metadata,
    cg_ffi_metadata_extension,
    cg_ffi_scalar,
)

# The FFI API version these handlers declare to XLA: the header they were
# written against (jaxlib 0.10).  They use only structs unchanged since 0.1,
# and XLA refuses to register a handler whose version it does not support.
cdef enum:
    FFI_MAJOR = 0
    FFI_MINOR = 3

# Room for cropgrad's message behind the op's name and the exception's.
cdef enum:
    MESSAGE_SIZE = capi.CG_MESSAGE_SIZE + 128

FFI_API_VERSION = (FFI_MAJOR, FFI_MINOR)

# What a zero-size buffer points at when XLA hands over NULL: the C-level
# API may read the pointer, never an element.
cdef double _EMPTY[1]


# --------------------------------------------------------------------------
# Call frames: the metadata query, checks, decoding, errors

cdef void _answer_metadata(cg_ffi_extension* extension, int major,
                           int minor) noexcept nogil:
    """Fill in XLA's metadata query: the API version declared and no traits.

    The query's frame has no API table, so an error cannot be returned: a
    struct too small to hold the answer is left alone, and XLA then reads
    version 0.0 and refuses the handler.
    """
    cdef cg_ffi_metadata_extension* ext = <cg_ffi_metadata_extension*>extension
    cdef cg_ffi_metadata* meta
    if ext.extension_base.struct_size < CG_FFI_METADATA_EXTENSION_SIZE:
        return
    meta = ext.metadata
    if meta == NULL or meta.struct_size < CG_FFI_METADATA_SIZE:
        return
    meta.api_version.struct_size = CG_FFI_VERSION_SIZE
    meta.api_version.extension_start = NULL
    meta.api_version.major_version = major
    meta.api_version.minor_version = minor
    # No traits: the handlers are not meant for GPU command buffers.
    meta.traits = 0


cdef inline bint _is_metadata_query(const cg_ffi_call_frame* frame) noexcept nogil:
    return (frame.extension_start != NULL
            and frame.extension_start.type == CG_FFI_EXTENSION_METADATA)


cdef int _fail(capi.cg_error* e, int status, const char* text) noexcept nogil:
    """Record a handler's own error (the C-level API records its own)."""
    e.status = status
    e.position = -1
    snprintf(e.message, capi.CG_MESSAGE_SIZE, "%s", text)
    return -1


cdef int _check_frame(const cg_ffi_call_frame* frame, int64_t nargs,
                      int64_t nrets, capi.cg_error* e) noexcept nogil:
    """Check the frame's size, stage and operand counts; 0 or -1."""
    if frame.struct_size < CG_FFI_CALL_FRAME_SIZE:
        snprintf(e.message, capi.CG_MESSAGE_SIZE,
                 "XLA passed a call frame of %zu bytes, expected at least %zu: "
                 "this jaxlib's FFI is incompatible with cropgrad's handlers",
                 frame.struct_size, CG_FFI_CALL_FRAME_SIZE)
        e.status = capi.CG_ERR_UNSUPPORTED
        e.position = -1
        return -1
    if frame.stage != CG_FFI_STAGE_EXECUTE:
        return _fail(e, capi.CG_ERR_UNSUPPORTED,
                     "the handler was called for a stage other than execute")
    if frame.args.size != nargs or frame.rets.size != nrets:
        snprintf(e.message, capi.CG_MESSAGE_SIZE,
                 "expected %lld operands and %lld results, got %lld and %lld",
                 <long long>nargs, <long long>nrets,
                 <long long>frame.args.size, <long long>frame.rets.size)
        e.status = capi.CG_ERR_VALUE
        e.position = -1
        return -1
    e.status = capi.CG_OK
    e.position = -1
    e.message[0] = 0
    return 0


cdef cg_ffi_buffer* _buffer(const cg_ffi_list* items, int64_t i, int64_t rank,
                            const char* name, capi.cg_error* e) noexcept nogil:
    """Operand or result `i` as a buffer of rank `rank`, or NULL (error in e)."""
    cdef cg_ffi_buffer* b
    if items.types[i] != CG_FFI_BUFFER:
        snprintf(e.message, capi.CG_MESSAGE_SIZE, "%s is not a buffer", name)
        e.status = capi.CG_ERR_TYPE
        return NULL
    b = <cg_ffi_buffer*>items.items[i]
    if b.struct_size < CG_FFI_BUFFER_SIZE:
        snprintf(e.message, capi.CG_MESSAGE_SIZE,
                 "%s: XLA passed a buffer struct of %zu bytes, expected at "
                 "least %zu", name, b.struct_size, CG_FFI_BUFFER_SIZE)
        e.status = capi.CG_ERR_UNSUPPORTED
        return NULL
    if b.rank != rank:
        snprintf(e.message, capi.CG_MESSAGE_SIZE, "%s must be %lld-D, got %lld-D",
                 name, <long long>rank, <long long>b.rank)
        e.status = capi.CG_ERR_VALUE
        return NULL
    return b


cdef inline void* _data(const cg_ffi_buffer* b) noexcept nogil:
    return b.data if b.data != NULL else <void*>_EMPTY


# XLA's element types that an image may have, and the C-level API's codes
# for them, in the same order.
cdef int _XLA_TYPES[10]
cdef int _CG_TYPES[10]
_XLA_TYPES[:] = [CG_FFI_U8, CG_FFI_S8, CG_FFI_U16, CG_FFI_S16, CG_FFI_S32,
                 CG_FFI_S64, CG_FFI_F16, CG_FFI_F32, CG_FFI_F64, CG_FFI_BF16]
_CG_TYPES[:] = [capi.CG_UINT8, capi.CG_INT8, capi.CG_UINT16, capi.CG_INT16,
                capi.CG_INT32, capi.CG_INT64, capi.CG_FLOAT16,
                capi.CG_FLOAT32, capi.CG_FLOAT64, capi.CG_BFLOAT16]


cdef int _image_dtype(int xla_dtype) noexcept nogil:
    """The C-level API's code for an XLA element type, or -1."""
    cdef int i
    for i in range(10):
        if _XLA_TYPES[i] == xla_dtype:
            return _CG_TYPES[i]
    return -1


cdef int _dtype_of(const cg_ffi_buffer* b, const char* name, bint image,
                   capi.cg_error* e) noexcept nogil:
    """The C-level API's dtype code of `b`; float32 unless `image`."""
    cdef int code = _image_dtype(b.dtype)
    if code < 0 or (not image and code != capi.CG_FLOAT32):
        snprintf(e.message, capi.CG_MESSAGE_SIZE,
                 "%s has XLA element type %d, which the op does not take",
                 name, b.dtype)
        e.status = capi.CG_ERR_TYPE
        return -1
    return code


cdef int64_t _find(const cg_ffi_attrs* attrs, const char* name) noexcept nogil:
    """The position of attribute `name`, or -1."""
    cdef size_t n = strlen(name)
    cdef int64_t i
    for i in range(attrs.size):
        if attrs.names[i].len == n and memcmp(attrs.names[i].ptr, name, n) == 0:
            return i
    return -1


cdef void* _attr(const cg_ffi_attrs* attrs, const char* name, int dtype,
                 capi.cg_error* e) noexcept nogil:
    """The value of scalar attribute `name` of XLA type `dtype`, or NULL."""
    cdef int64_t i = _find(attrs, name)
    cdef cg_ffi_scalar* scalar
    if i < 0:
        snprintf(e.message, capi.CG_MESSAGE_SIZE, "attribute %s is missing", name)
        e.status = capi.CG_ERR_VALUE
        return NULL
    scalar = <cg_ffi_scalar*>attrs.attrs[i]
    if attrs.types[i] != CG_FFI_ATTR_SCALAR or scalar.dtype != dtype:
        snprintf(e.message, capi.CG_MESSAGE_SIZE,
                 "attribute %s must be a scalar of XLA type %d", name, dtype)
        e.status = capi.CG_ERR_TYPE
        return NULL
    return scalar.value


cdef struct Options:
    int method
    int layout
    int num_threads
    float extrapolation_value
    # Under vmap, cropgrad.jax folds the mapped axes into the op's own:
    # their sizes, outermost first (fold_rank of them, 0 when not folded),
    # and the factor by which the batch grew.  Messages name the caller's
    # indices with them.
    int64_t fold_rank
    const int64_t* fold_shape
    int64_t fold_images


cdef int _options(const cg_ffi_call_frame* frame, bint extrapolation,
                  Options* o, capi.cg_error* e) noexcept nogil:
    """Decode the attributes every handler takes (and the forward's fill)."""
    cdef void* v = _attr(&frame.attrs, "method", CG_FFI_S32, e)
    if v == NULL:
        return -1
    o.method = (<int32_t*>v)[0]
    v = _attr(&frame.attrs, "layout", CG_FFI_S32, e)
    if v == NULL:
        return -1
    o.layout = (<int32_t*>v)[0]
    # Each handler reads the layout's dimensions to check the buffers
    # against one another, so an unknown layout stops here.
    if o.layout != capi.CG_NHWC and o.layout != capi.CG_NCHW:
        snprintf(e.message, capi.CG_MESSAGE_SIZE,
                 "layout code %d is unknown", o.layout)
        e.status = capi.CG_ERR_UNSUPPORTED
        return -1
    v = _attr(&frame.attrs, "num_threads", CG_FFI_S32, e)
    if v == NULL:
        return -1
    o.num_threads = (<int32_t*>v)[0]
    if _fold(&frame.attrs, o, e) < 0:
        return -1
    o.extrapolation_value = 0
    if extrapolation:
        v = _attr(&frame.attrs, "extrapolation_value", CG_FFI_F32, e)
        if v == NULL:
            return -1
        o.extrapolation_value = (<float*>v)[0]
    return 0


cdef int _fold(const cg_ffi_attrs* attrs, Options* o,
               capi.cg_error* e) noexcept nogil:
    """Decode the optional ``fold_shape`` (s64 array), ``fold_images`` (s64)."""
    cdef int64_t i = _find(attrs, "fold_shape")
    cdef cg_ffi_array* shape
    cdef void* v
    o.fold_rank = 0
    o.fold_shape = NULL
    o.fold_images = 1
    if i < 0:
        return 0
    shape = <cg_ffi_array*>attrs.attrs[i]
    if attrs.types[i] != CG_FFI_ATTR_ARRAY or shape.dtype != CG_FFI_S64:
        return _fail(e, capi.CG_ERR_TYPE,
                     "attribute fold_shape must be an array of s64")
    v = _attr(attrs, "fold_images", CG_FFI_S64, e)
    if v == NULL:
        return -1
    o.fold_rank = <int64_t>shape.size
    o.fold_shape = <const int64_t*>shape.data
    o.fold_images = (<int64_t*>v)[0]
    return 0


cdef struct Call:
    # What a handler decoded: its attributes, and what restates an error
    # about a box in the caller's indices once the C-level API returns.
    Options o
    const float* boxes
    const void* box_ind
    int index_dtype
    int64_t num_boxes
    int64_t batch


cdef int _boxes_and_index(const cg_ffi_list* args, int64_t first,
                          int64_t num_boxes, Call* c,
                          capi.cg_error* e) noexcept nogil:
    """Decode operands `first` (boxes) and `first + 1` (box_ind) into `c`."""
    cdef cg_ffi_buffer* b = _buffer(args, first, 2, "boxes", e)
    cdef cg_ffi_buffer* i
    if b == NULL or _dtype_of(b, "boxes", False, e) < 0:
        return -1
    if b.dims[0] != num_boxes or b.dims[1] != 4:
        snprintf(e.message, capi.CG_MESSAGE_SIZE,
                 "boxes must have shape (%lld, 4), got (%lld, %lld)",
                 <long long>num_boxes, <long long>b.dims[0],
                 <long long>b.dims[1])
        e.status = capi.CG_ERR_VALUE
        return -1
    i = _buffer(args, first + 1, 1, "box_ind", e)
    if i == NULL:
        return -1
    if i.dtype == CG_FFI_S32:
        c.index_dtype = capi.CG_INT32
    elif i.dtype == CG_FFI_S64:
        c.index_dtype = capi.CG_INT64
    else:
        return _fail(e, capi.CG_ERR_TYPE, "box_ind must be int32 or int64")
    if i.dims[0] != num_boxes:
        snprintf(e.message, capi.CG_MESSAGE_SIZE,
                 "box_ind must have shape (%lld,), got (%lld,)",
                 <long long>num_boxes, <long long>i.dims[0])
        e.status = capi.CG_ERR_VALUE
        return -1
    c.boxes = <const float*>_data(b)
    c.box_ind = _data(i)
    c.num_boxes = num_boxes
    return 0


cdef void _unfold_message(const Call* c, capi.cg_error* e) noexcept nogil:
    """Restate an error about box `e.position` in the caller's indices.

    Box ``i`` of a folded call is box ``j`` of problem ``k1, ..., kn``
    (``i`` in row-major order over ``fold_shape + (boxes per problem,)``).
    A `box_ind` value past the end was pushed past the folded end by
    ``folded batch - batch``; negative ones were kept.
    """
    cdef const Options* o = &c.o
    cdef const float* box
    cdef char where[256]
    cdef int64_t digits[33]
    cdef int64_t rest = e.position, per_problem = c.num_boxes, v, user_batch
    cdef int64_t level
    cdef int n = 0
    if o.fold_rank <= 0 or o.fold_rank > 32 or e.position < 0:
        return
    if e.status != capi.CG_ERR_INDEX and e.status != capi.CG_ERR_VALUE:
        return
    for level in range(o.fold_rank):
        if o.fold_shape[level] <= 0:
            return
        per_problem //= o.fold_shape[level]
    if per_problem <= 0 or o.fold_images <= 0:
        return
    digits[o.fold_rank] = rest % per_problem
    rest //= per_problem
    for level in range(o.fold_rank - 1, -1, -1):
        digits[level] = rest % o.fold_shape[level]
        rest //= o.fold_shape[level]
    where[0] = 0
    for level in range(o.fold_rank + 1):
        n += snprintf(where + n, sizeof(where) - n, "%s%lld",
                      "" if level == 0 else ", ", <long long>digits[level])
        if n >= <int>sizeof(where):
            return
    if e.status == capi.CG_ERR_INDEX:
        if c.index_dtype == capi.CG_INT32:
            v = (<const int32_t*>c.box_ind)[e.position]
        else:
            v = (<const int64_t*>c.box_ind)[e.position]
        user_batch = c.batch // o.fold_images
        if v >= 0:
            v -= c.batch - user_batch
        snprintf(e.message, capi.CG_MESSAGE_SIZE,
                 "box_ind has values outside [0, batch_size) = [0, %lld): "
                 "box_ind[%s] = %lld", <long long>user_batch, where,
                 <long long>v)
    else:
        box = c.boxes + 4 * e.position
        snprintf(e.message, capi.CG_MESSAGE_SIZE,
                 "boxes must be finite: boxes[%s] = [%.9g, %.9g, %.9g, %.9g] "
                 "has a NaN or infinite coordinate", where, <double>box[0],
                 <double>box[1], <double>box[2], <double>box[3])


cdef inline int64_t _depth(const int64_t* dims, int layout) noexcept nogil:
    return dims[3] if layout == capi.CG_NHWC else dims[1]


cdef cg_ffi_error* _leave(const cg_ffi_call_frame* frame, const char* op,
                          const capi.cg_error* e) noexcept nogil:
    """NULL on success, else an XLA error carrying cropgrad's message.

    The message reads ``cropgrad.jax.<op>: <exception>: <message>``, the
    exception being the one the NumPy API raises for the same problem.
    """
    cdef char text[MESSAGE_SIZE]
    cdef cg_ffi_error_args args
    cdef const char* kind
    if e.status == capi.CG_OK:
        return NULL
    if e.status == capi.CG_ERR_VALUE:
        kind, args.errc = "ValueError", CG_FFI_INVALID_ARGUMENT
    elif e.status == capi.CG_ERR_INDEX:
        kind, args.errc = "IndexError", CG_FFI_OUT_OF_RANGE
    elif e.status == capi.CG_ERR_TYPE:
        kind, args.errc = "TypeError", CG_FFI_INVALID_ARGUMENT
    elif e.status == capi.CG_ERR_MEMORY:
        kind, args.errc = "MemoryError", CG_FFI_RESOURCE_EXHAUSTED
    elif e.status == capi.CG_ERR_UNSUPPORTED:
        kind, args.errc = "NotImplementedError", CG_FFI_UNIMPLEMENTED
    else:
        kind, args.errc = "RuntimeError", CG_FFI_INTERNAL
    snprintf(text, MESSAGE_SIZE, "cropgrad.jax.%s: %s: %s", op, kind, e.message)
    args.struct_size = CG_FFI_ERROR_ARGS_SIZE
    args.extension_start = NULL
    args.message = text
    return frame.api.error_create(&args)


# --------------------------------------------------------------------------
# The handlers

ctypedef void (*run_t)(cg_ffi_call_frame*, Call*,
                       capi.cg_error*) noexcept nogil


cdef struct Op:
    # One FFI target: its name in messages, its operand count (each has one
    # result), the FFI API version it declares, and what it runs on a frame
    # that passed the checks.
    const char* name
    int64_t nargs
    int major
    int minor
    run_t run


cdef cg_ffi_error* _handle(cg_ffi_call_frame* frame, const Op* op) noexcept nogil:
    """The body of every handler: answer XLA's metadata query, or check the
    frame, run the op and return its error, if any, to XLA."""
    cdef capi.cg_error e
    cdef Call c
    if _is_metadata_query(frame):
        _answer_metadata(frame.extension_start, op.major, op.minor)
        return NULL
    # Nothing to restate until the op has decoded its fold.
    c.o.fold_rank = 0
    if _check_frame(frame, op.nargs, 1, &e) == 0:
        op.run(frame, &c, &e)
        _unfold_message(&c, &e)
    return _leave(frame, op.name, &e)


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


cdef void _run_crop_and_resize(cg_ffi_call_frame* frame, Call* c,
                               capi.cg_error* e) noexcept nogil:
    cdef int image_dtype
    cdef int64_t crop_h, crop_w
    cdef cg_ffi_buffer* image = _buffer(&frame.args, 0, 4, "image", e)
    cdef cg_ffi_buffer* crops = _buffer(&frame.rets, 0, 4, "crops", e)
    if image == NULL or crops == NULL or _options(frame, True, &c.o, e) < 0:
        return
    image_dtype = _dtype_of(image, "image", True, e)
    if image_dtype < 0 or _dtype_of(crops, "crops", False, e) < 0:
        return
    if (_boxes_and_index(&frame.args, 1, crops.dims[0], c, e) < 0
            or _crop_size(crops, "crops", image, c.o.layout, &crop_h, &crop_w,
                          e) < 0):
        return
    c.batch = image.dims[0]
    capi.cg_crop_and_resize(
        _data(image), image_dtype, image.dims, c.boxes, c.box_ind,
        c.index_dtype, c.num_boxes, crop_h, crop_w, c.o.method,
        c.o.extrapolation_value, c.o.layout, <float*>_data(crops),
        c.o.num_threads, 1, e)


cdef void _run_grad_image(cg_ffi_call_frame* frame, Call* c,
                          capi.cg_error* e) noexcept nogil:
    cdef int output_dtype
    cdef cg_ffi_buffer* grads = _buffer(&frame.args, 0, 4, "grads", e)
    cdef cg_ffi_buffer* output = _buffer(&frame.rets, 0, 4, "output", e)
    if grads == NULL or output == NULL or _options(frame, False, &c.o, e) < 0:
        return
    if _dtype_of(grads, "grads", False, e) < 0:
        return
    output_dtype = _image_dtype(output.dtype)
    if (output_dtype != capi.CG_FLOAT16 and output_dtype != capi.CG_FLOAT32
            and output_dtype != capi.CG_FLOAT64
            and output_dtype != capi.CG_BFLOAT16):
        _fail(e, capi.CG_ERR_TYPE,
              "output must be float16, bfloat16, float32 or float64")
        return
    if _boxes_and_index(&frame.args, 1, grads.dims[0], c, e) < 0:
        return
    # The output's shape is image_size: the C-level API checks it against
    # the grads.
    c.batch = output.dims[0]
    capi.cg_crop_and_resize_grad_image(
        <const float*>_data(grads), grads.dims, c.boxes, c.box_ind,
        c.index_dtype, output.dims, _data(output), output_dtype, c.o.method,
        c.o.layout, c.o.num_threads, 1, e)


cdef void _run_grad_boxes(cg_ffi_call_frame* frame, Call* c,
                          capi.cg_error* e) noexcept nogil:
    cdef int image_dtype
    cdef cg_ffi_buffer* grads = _buffer(&frame.args, 0, 4, "grads", e)
    cdef cg_ffi_buffer* image = _buffer(&frame.args, 1, 4, "image", e)
    cdef cg_ffi_buffer* output = _buffer(&frame.rets, 0, 2, "output", e)
    if (grads == NULL or image == NULL or output == NULL
            or _options(frame, False, &c.o, e) < 0):
        return
    image_dtype = _dtype_of(image, "image", True, e)
    if (image_dtype < 0 or _dtype_of(grads, "grads", False, e) < 0
            or _dtype_of(output, "output", False, e) < 0):
        return
    if output.dims[0] != grads.dims[0] or output.dims[1] != 4:
        _fail(e, capi.CG_ERR_VALUE, "output must have shape (num_boxes, 4)")
        return
    if _boxes_and_index(&frame.args, 2, grads.dims[0], c, e) < 0:
        return
    c.batch = image.dims[0]
    capi.cg_crop_and_resize_grad_boxes(
        <const float*>_data(grads), grads.dims, _data(image), image_dtype,
        image.dims, c.boxes, c.box_ind, c.index_dtype, <float*>_data(output),
        c.o.method, c.o.layout, c.o.num_threads, 1, e)


cdef void _run_jvp_boxes(cg_ffi_call_frame* frame, Call* c,
                         capi.cg_error* e) noexcept nogil:
    cdef int image_dtype
    cdef int64_t crop_h, crop_w
    cdef cg_ffi_buffer* image = _buffer(&frame.args, 0, 4, "image", e)
    cdef cg_ffi_buffer* tangent = _buffer(&frame.args, 3, 2, "boxes_tangent", e)
    cdef cg_ffi_buffer* output = _buffer(&frame.rets, 0, 4, "output", e)
    if (image == NULL or tangent == NULL or output == NULL
            or _options(frame, False, &c.o, e) < 0):
        return
    image_dtype = _dtype_of(image, "image", True, e)
    if (image_dtype < 0 or _dtype_of(output, "output", False, e) < 0
            or _dtype_of(tangent, "boxes_tangent", False, e) < 0):
        return
    if _boxes_and_index(&frame.args, 1, output.dims[0], c, e) < 0:
        return
    if tangent.dims[0] != output.dims[0] or tangent.dims[1] != 4:
        _fail(e, capi.CG_ERR_VALUE, "boxes_tangent must have shape (num_boxes, 4)")
        return
    if _crop_size(output, "output", image, c.o.layout, &crop_h, &crop_w, e) < 0:
        return
    c.batch = image.dims[0]
    capi.cg_crop_and_resize_jvp_boxes(
        _data(image), image_dtype, image.dims, c.boxes,
        <const float*>_data(tangent), c.box_ind, c.index_dtype, c.num_boxes,
        crop_h, crop_w, c.o.method, c.o.layout, <float*>_data(output),
        c.o.num_threads, 1, e)


# The smallest op: it reports the FFI API version of the running XLA (the
# plumbing's own test, and a fact for error messages).
cdef void _run_ffi_version(cg_ffi_call_frame* frame, Call* c,
                           capi.cg_error* e) noexcept nogil:
    cdef cg_ffi_buffer* out = _buffer(&frame.rets, 0, 1, "output", e)
    if out != NULL and (out.dtype != CG_FFI_S32 or out.dims[0] != 2):
        _fail(e, capi.CG_ERR_TYPE, "output must be int32 of shape (2,)")
    elif out != NULL:
        (<int32_t*>out.data)[0] = frame.api.api_version.major_version
        (<int32_t*>out.data)[1] = frame.api.api_version.minor_version


cdef Op _CROP_AND_RESIZE = Op(name="crop_and_resize", nargs=3, major=FFI_MAJOR,
                              minor=FFI_MINOR, run=_run_crop_and_resize)
cdef Op _GRAD_IMAGE = Op(name="crop_and_resize_grad_image", nargs=3,
                         major=FFI_MAJOR, minor=FFI_MINOR, run=_run_grad_image)
cdef Op _GRAD_BOXES = Op(name="crop_and_resize_grad_boxes", nargs=4,
                         major=FFI_MAJOR, minor=FFI_MINOR, run=_run_grad_boxes)
cdef Op _JVP_BOXES = Op(name="crop_and_resize_jvp_boxes", nargs=4,
                        major=FFI_MAJOR, minor=FFI_MINOR, run=_run_jvp_boxes)
# The version this one declares can be changed (version_probe), to test
# XLA's refusal of an incompatible handler.
cdef Op _FFI_VERSION = Op(name="ffi_version", nargs=0, major=FFI_MAJOR,
                          minor=FFI_MINOR, run=_run_ffi_version)


# XLA calls a handler with the frame alone: one C function a target.
cdef cg_ffi_error* _crop_and_resize(cg_ffi_call_frame* frame) noexcept nogil:
    return _handle(frame, &_CROP_AND_RESIZE)


cdef cg_ffi_error* _grad_image(cg_ffi_call_frame* frame) noexcept nogil:
    return _handle(frame, &_GRAD_IMAGE)


cdef cg_ffi_error* _grad_boxes(cg_ffi_call_frame* frame) noexcept nogil:
    return _handle(frame, &_GRAD_BOXES)


cdef cg_ffi_error* _jvp_boxes(cg_ffi_call_frame* frame) noexcept nogil:
    return _handle(frame, &_JVP_BOXES)


cdef cg_ffi_error* _ffi_version(cg_ffi_call_frame* frame) noexcept nogil:
    return _handle(frame, &_FFI_VERSION)


# --------------------------------------------------------------------------
# Python side: capsules for jax.ffi.register_ffi_target, and test hooks

ctypedef cg_ffi_error* (*handler_t)(cg_ffi_call_frame*) noexcept nogil


cdef object _capsule(handler_t fn):
    return PyCapsule_New(<void*>fn, NULL, NULL)


def handlers():
    """The FFI targets and their handlers.

    Returns
    -------
    dict of str to PyCapsule
        Target name to a capsule holding the handler's function pointer, as
        ``jax.ffi.register_ffi_target`` takes it.
    """
    return {
        "cropgrad_crop_and_resize": _capsule(_crop_and_resize),
        "cropgrad_crop_and_resize_grad_image": _capsule(_grad_image),
        "cropgrad_crop_and_resize_grad_boxes": _capsule(_grad_boxes),
        "cropgrad_crop_and_resize_jvp_boxes": _capsule(_jvp_boxes),
        "cropgrad_ffi_version": _capsule(_ffi_version),
    }


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
