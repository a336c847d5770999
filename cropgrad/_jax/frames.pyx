# cython: language_level=3
"""Decoding XLA's call frames: what every handler of handlers.pyx shares.

A handler is a plain C function that XLA calls with a call frame holding its
buffers and attributes.  This module answers XLA's metadata query, checks a
frame's size, stage and operand counts, decodes buffers (their rank and
element type), a family's attributes by its table (rendered from the op
model) and the boxes and box indices, restates an error about a box in the
caller's indices under vmap, and turns an error record into the error XLA
returns to JAX.
It knows no op: handlers.pyx does, and calls the C-level API.

Errors are recorded in the C-level API's record (`capi.cg_error`), whose
status names the exception the NumPy API would raise for the same problem.
"""

from libc.stdint cimport int32_t, int64_t
from libc.stdio cimport snprintf
from libc.string cimport memcmp, memset, strlen, strstr

from cropgrad cimport capi
from cropgrad._capi.gate cimport ITEMSIZE
from cropgrad._kernels.cdefs cimport CG_HUGE_PAGES_FROM, cg_advise_huge_pages
from cropgrad._jax.ffi cimport (
    CG_FFI_ATTR_ARRAY,
    CG_FFI_ATTR_SCALAR,
    CG_FFI_BF16,
    CG_FFI_BUFFER,
    CG_FFI_BUFFER_SIZE,
    CG_FFI_CALL_FRAME_SIZE,
    CG_FFI_ERROR_ARGS_SIZE,
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
    cg_ffi_error_args,
    cg_ffi_metadata,
    cg_ffi_metadata_extension,
    cg_ffi_scalar,
)

# Room for cropgrad's message behind the op's name and the exception's.
cdef enum:
    MESSAGE_SIZE = capi.CG_MESSAGE_SIZE + 128

# What a zero-size buffer points at when XLA hands over NULL: the C-level
# API may read the pointer, never an element.
cdef double _EMPTY[1]


# --------------------------------------------------------------------------
# The metadata query and the frame

cdef void answer_metadata(cg_ffi_extension* extension, int major,
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


cdef int refuse(capi.cg_error* e, int status, const char* text) noexcept nogil:
    """Record a handler's own error (the C-level API records its own)."""
    e.status = status
    e.position = -1
    snprintf(e.message, capi.CG_MESSAGE_SIZE, "%s", text)
    return -1


cdef int check_frame(const cg_ffi_call_frame* frame, int64_t nargs,
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
        return refuse(e, capi.CG_ERR_UNSUPPORTED,
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


# --------------------------------------------------------------------------
# Buffers and attributes

cdef cg_ffi_buffer* buffer(const cg_ffi_list* items, int64_t i, int64_t rank,
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


cdef void* data(const cg_ffi_buffer* b) noexcept nogil:
    """Where `b`'s elements are: never NULL, even for a zero-size buffer."""
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


cdef void advise_result(const cg_ffi_call_frame* frame) noexcept nogil:
    """Ask for huge pages under the frame's first result when it is large
    (cg_pages.h; a hint, which changes no byte).  XLA's CPU client gives
    every call's result a block of its own, which a large result gets from
    the system in 4 KiB pages, each faulted in as the op first writes it:
    100 MB cost some 25,000 faults, more than the op.  NumPy advises its
    large arrays, and cropgrad.torch its large tensors, the same way."""
    cdef const cg_ffi_buffer* b
    cdef size_t nbytes
    cdef int64_t i
    cdef int code
    if frame.rets.size < 1 or frame.rets.types[0] != CG_FFI_BUFFER:
        return
    b = <const cg_ffi_buffer*>frame.rets.items[0]
    if b.struct_size < CG_FFI_BUFFER_SIZE or b.data == NULL:
        return
    code = image_dtype(b.dtype)
    if code < 0:
        return
    nbytes = <size_t>ITEMSIZE[code]
    for i in range(b.rank):
        nbytes *= <size_t>b.dims[i] if b.dims[i] > 0 else 0
    if nbytes >= CG_HUGE_PAGES_FROM:
        cg_advise_huge_pages(b.data, nbytes)


cdef int image_dtype(int xla_dtype) noexcept nogil:
    """The C-level API's code for an XLA element type, or -1."""
    cdef int i
    for i in range(10):
        if _XLA_TYPES[i] == xla_dtype:
            return _CG_TYPES[i]
    return -1


cdef int dtype_of(const cg_ffi_buffer* b, const char* name, bint image,
                  capi.cg_error* e) noexcept nogil:
    """The C-level API's dtype code of `b`; float32 unless `image`."""
    cdef int code = image_dtype(b.dtype)
    if code < 0 or (not image and code != capi.CG_FLOAT32):
        snprintf(e.message, capi.CG_MESSAGE_SIZE,
                 "%s has XLA element type %d, which the op does not take",
                 name, b.dtype)
        e.status = capi.CG_ERR_TYPE
        return -1
    return code


cdef int float_dtype_of(const cg_ffi_buffer* b, const char* name,
                        bint arithmetic, capi.cg_error* e) noexcept nogil:
    """The C-level API's code of `b`, a float buffer: float32 or float64 if
    `arithmetic` (an arithmetic type), else float16, bfloat16 too."""
    cdef int code = image_dtype(b.dtype)
    if code == capi.CG_FLOAT32 or code == capi.CG_FLOAT64:
        return code
    if not arithmetic and (code == capi.CG_FLOAT16 or code == capi.CG_BFLOAT16):
        return code
    snprintf(e.message, capi.CG_MESSAGE_SIZE, "%s must be %s", name,
             "float32 or float64" if arithmetic
             else "float16, bfloat16, float32 or float64")
    e.status = capi.CG_ERR_TYPE
    return -1


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


cdef int decode_attributes(const cg_ffi_call_frame* frame, const Attr* table,
                           int n, int kind, Attributes* a,
                           capi.cg_error* e) noexcept nogil:
    """Decode into `a` the attributes of `table` (`n` rows, a family's) that
    calls of op kind `kind` have, in the table's order: the first missing
    or wrong one is the error; 0 or -1."""
    cdef const Attr* t
    cdef void* v
    cdef int i
    memset(a, 0, sizeof(Attributes))
    for i in range(n):
        t = &table[i]
        if not (t.kinds >> kind) & 1:
            continue
        if t.field == FOLD:
            if _fold(&frame.attrs, a, e) < 0:
                return -1
            continue
        v = _attr(&frame.attrs, t.name, t.dtype, e)
        if v == NULL or _keep(a, t.field, v, e) < 0:
            return -1
    return 0


cdef int _keep(Attributes* a, Field field, const void* v,
               capi.cg_error* e) noexcept nogil:
    """Keep the value `v` of an attribute in `field`, as the type its row
    checked: f32 for the fill, f64 for the spatial scale, s32 for every
    other; 0, or -1 for a layout code no handler knows."""
    if field == EXTRAPOLATION_VALUE:
        a.extrapolation_value = (<const float*>v)[0]
    elif field == SPATIAL_SCALE:
        a.spatial_scale = (<const double*>v)[0]
    elif field == METHOD:
        a.method = (<const int32_t*>v)[0]
    elif field == PADDING_MODE:
        a.padding_mode = (<const int32_t*>v)[0]
    elif field == SAMPLING_RATIO:
        a.sampling_ratio = (<const int32_t*>v)[0]
    elif field == ALIGNED:
        a.aligned = (<const int32_t*>v)[0] != 0
    elif field == NUM_THREADS:
        a.num_threads = (<const int32_t*>v)[0]
    elif field == LAYOUT:
        a.layout = (<const int32_t*>v)[0]
        # Each handler reads the layout's dimensions to check the buffers
        # against one another, so an unknown layout stops here.
        if a.layout != capi.CG_NHWC and a.layout != capi.CG_NCHW:
            snprintf(e.message, capi.CG_MESSAGE_SIZE,
                     "layout code %d is unknown", a.layout)
            e.status = capi.CG_ERR_UNSUPPORTED
            return -1
    return 0


cdef int _fold(const cg_ffi_attrs* attrs, Attributes* a,
               capi.cg_error* e) noexcept nogil:
    """Decode the optional ``fold_shape`` (s64 array), ``fold_images`` (s64)."""
    cdef int64_t i = _find(attrs, "fold_shape")
    cdef cg_ffi_array* shape
    cdef void* v
    a.fold_rank = 0
    a.fold_shape = NULL
    a.fold_images = 1
    if i < 0:
        return 0
    shape = <cg_ffi_array*>attrs.attrs[i]
    if attrs.types[i] != CG_FFI_ATTR_ARRAY or shape.dtype != CG_FFI_S64:
        return refuse(e, capi.CG_ERR_TYPE,
                      "attribute fold_shape must be an array of s64")
    v = _attr(attrs, "fold_images", CG_FFI_S64, e)
    if v == NULL:
        return -1
    a.fold_rank = <int64_t>shape.size
    a.fold_shape = <const int64_t*>shape.data
    a.fold_images = (<int64_t*>v)[0]
    return 0


cdef int box_rows(const cg_ffi_buffer* b, int64_t num_boxes, const char* name,
                  capi.cg_error* e) noexcept nogil:
    """Check that `b` (2-D) has a row of 4 values a box; 0 or -1."""
    if b.dims[0] == num_boxes and b.dims[1] == 4:
        return 0
    snprintf(e.message, capi.CG_MESSAGE_SIZE,
             "%s must have shape (num_boxes, 4)", name)
    e.status = capi.CG_ERR_VALUE
    e.position = -1
    return -1


cdef int boxes_and_index(const cg_ffi_list* args, int64_t first,
                         int64_t num_boxes, int64_t batch, bint wide,
                         Decoded* d, capi.cg_error* e) noexcept nogil:
    """Decode operands `first` (boxes) and `first + 1` (box_ind) into `d`,
    with `batch`, the number of images box_ind indexes.  The boxes are
    float32, or float64 too if `wide` (RoIAlign's arithmetic types)."""
    cdef cg_ffi_buffer* b = buffer(args, first, 2, "boxes", e)
    cdef cg_ffi_buffer* i
    if b == NULL:
        return -1
    if wide:
        d.boxes_dtype = float_dtype_of(b, "boxes", True, e)
    else:
        d.boxes_dtype = dtype_of(b, "boxes", False, e)
    if d.boxes_dtype < 0:
        return -1
    if b.dims[0] != num_boxes or b.dims[1] != 4:
        snprintf(e.message, capi.CG_MESSAGE_SIZE,
                 "boxes must have shape (%lld, 4), got (%lld, %lld)",
                 <long long>num_boxes, <long long>b.dims[0],
                 <long long>b.dims[1])
        e.status = capi.CG_ERR_VALUE
        return -1
    i = buffer(args, first + 1, 1, "box_ind", e)
    if i == NULL:
        return -1
    if i.dtype == CG_FFI_S32:
        d.index_dtype = capi.CG_INT32
    elif i.dtype == CG_FFI_S64:
        d.index_dtype = capi.CG_INT64
    else:
        return refuse(e, capi.CG_ERR_TYPE, "box_ind must be int32 or int64")
    if i.dims[0] != num_boxes:
        snprintf(e.message, capi.CG_MESSAGE_SIZE,
                 "box_ind must have shape (%lld,), got (%lld,)",
                 <long long>num_boxes, <long long>i.dims[0])
        e.status = capi.CG_ERR_VALUE
        return -1
    d.boxes = data(b)
    d.box_ind = data(i)
    d.num_boxes = num_boxes
    d.batch = batch
    return 0


# --------------------------------------------------------------------------
# The way back: messages in the caller's indices, errors for XLA

cdef void unfold_message(const Decoded* d, capi.cg_error* e) noexcept nogil:
    """Restate an error about box `e.position`, or about a grid's point
    (`_restate_point`), in the caller's indices.

    Box ``i`` of a folded call is box ``j`` of problem ``k1, ..., kn``
    (``i`` in row-major order over ``fold_shape + (boxes per problem,)``).
    A `box_ind` value past the end was pushed past the folded end by
    ``folded batch - batch``; negative ones were kept.
    """
    cdef const Attributes* a = &d.attrs
    cdef char where[256]
    cdef int64_t digits[33]
    cdef int64_t rest = e.position, per_problem = d.num_boxes, v, user_batch
    cdef int64_t level
    if a.fold_rank <= 0 or a.fold_rank > 32 or e.position < 0:
        return
    if e.status != capi.CG_ERR_INDEX and e.status != capi.CG_ERR_VALUE:
        return
    if d.grid:
        _restate_point(d, e)
        return
    for level in range(a.fold_rank):
        if a.fold_shape[level] <= 0:
            return
        per_problem //= a.fold_shape[level]
    if per_problem <= 0 or a.fold_images <= 0:
        return
    digits[a.fold_rank] = rest % per_problem
    rest //= per_problem
    for level in range(a.fold_rank - 1, -1, -1):
        digits[level] = rest % a.fold_shape[level]
        rest //= a.fold_shape[level]
    if _join(digits, a.fold_rank + 1, where, sizeof(where)) < 0:
        return
    if e.status == capi.CG_ERR_INDEX:
        if d.index_dtype == capi.CG_INT32:
            v = (<const int32_t*>d.box_ind)[e.position]
        else:
            v = (<const int64_t*>d.box_ind)[e.position]
        user_batch = d.batch // a.fold_images
        if v >= 0:
            v -= d.batch - user_batch
        snprintf(e.message, capi.CG_MESSAGE_SIZE,
                 "box_ind has values outside [0, batch_size) = [0, %lld): "
                 "box_ind[%s] = %lld", <long long>user_batch, where,
                 <long long>v)
    else:
        _restate_box(e, where)


cdef int _join(const int64_t* digits, int64_t count, char* where,
               size_t size) noexcept nogil:
    """Write ``d0, d1, ...`` to `where`; -1 if it does not fit."""
    cdef int n = 0
    cdef int64_t i
    where[0] = 0
    for i in range(count):
        n += snprintf(where + n, size - n, "%s%lld", "" if i == 0 else ", ",
                      <long long>digits[i])
        if n >= <int>size:
            return -1
    return 0


cdef void _restate_point(const Decoded* d, capi.cg_error* e) noexcept nogil:
    """Restate a message about a point of a folded grid (``grid[i, ...``,
    ``i`` the folded batch index) in the caller's indices: batch
    ``i % batch`` of problem ``k1, ..., kn`` (``i // batch`` in row-major
    order over ``fold_shape``), ``batch`` the caller's."""
    cdef const Attributes* a = &d.attrs
    cdef char text[capi.CG_MESSAGE_SIZE]
    cdef char where[256]
    cdef int64_t digits[33]
    cdef int64_t user_batch, folded = 0, level
    cdef const char* start = strstr(e.message, "grid[")
    cdef const char* end
    if start == NULL or a.fold_images <= 0:
        return
    user_batch = d.batch // a.fold_images
    if user_batch <= 0:
        return
    start += 5
    end = start
    # The index is below the folded batch, an int64_t: at most 18 digits.
    while end[0] >= c'0' and end[0] <= c'9' and end - start < 18:
        folded = 10 * folded + (end[0] - c'0')
        end += 1
    if end == start or end[0] != c',' or folded >= d.batch:
        return
    digits[a.fold_rank] = folded % user_batch
    folded //= user_batch
    for level in range(a.fold_rank - 1, -1, -1):
        if a.fold_shape[level] <= 0:
            return
        digits[level] = folded % a.fold_shape[level]
        folded //= a.fold_shape[level]
    if _join(digits, a.fold_rank + 1, where, sizeof(where)) < 0:
        return
    snprintf(text, capi.CG_MESSAGE_SIZE, "%.*s%s%s",
             <int>(start - e.message), e.message, where, end)
    snprintf(e.message, capi.CG_MESSAGE_SIZE, "%s", text)


cdef void _restate_box(capi.cg_error* e, const char* where) noexcept nogil:
    """Put `where` in place of the box's index in a message about a box
    (``boxes[<index>] = ...``), keeping every other word and value."""
    cdef char text[capi.CG_MESSAGE_SIZE]
    cdef const char* start = strstr(e.message, "boxes[")
    cdef const char* end
    if start == NULL:
        return
    start += 6
    end = start
    while end[0] >= c'0' and end[0] <= c'9':
        end += 1
    if end == start or end[0] != c']':
        return
    snprintf(text, capi.CG_MESSAGE_SIZE, "%.*s%s%s",
             <int>(start - e.message), e.message, where, end)
    snprintf(e.message, capi.CG_MESSAGE_SIZE, "%s", text)


cdef cg_ffi_error* xla_error(const cg_ffi_call_frame* frame, const char* op,
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
