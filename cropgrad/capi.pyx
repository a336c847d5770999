# cython: language_level=3
"""cropgrad's C-level API (see capi.pxd and docs/capi.md).

The functions declared in ``capi.pxd`` check every argument, including the
ones that need the data (finite boxes, ``box_ind`` in range, sizes that
overflow), fill the caller's error record and run the kernels, all without
the GIL.  The NumPy API calls them through the private Python functions at
the end of this module, which turn an error record into the exception the
NumPy API documents.
"""

from cpython.buffer cimport (
    PyBUF_C_CONTIGUOUS,
    PyBUF_WRITABLE,
    PyBuffer_Release,
    PyObject_GetBuffer,
)
from libc.math cimport isfinite
from libc.stdint cimport INT64_MAX, int32_t, int64_t
from libc.stdio cimport snprintf
from libc.stdlib cimport free, malloc

from cropgrad._cdefs cimport CG_CFLAGS, CG_COMPILER, CG_FPENV_SUPPORTED
from cropgrad._forward cimport crop_and_resize
from cropgrad._grad_boxes cimport grad_boxes
from cropgrad._grad_image cimport (
    OUT_BFLOAT16,
    OUT_FLOAT16,
    OUT_FLOAT32,
    OUT_FLOAT64,
    grad_image,
)
from cropgrad._jvp_boxes cimport jvp_boxes
from cropgrad._openmp cimport CROPGRAD_HAVE_OPENMP
from cropgrad._parallel cimport resolve_threads
from cropgrad._types cimport DT_BFLOAT16, DT_FLOAT16, DT_FLOAT64, DT_UINT8, Geometry

# The kernels number dtypes as the codes of capi.pxd do (they cannot
# cimport this module: it imports theirs).
if not (<int>DT_UINT8 == <int>CG_UINT8 and <int>DT_FLOAT16 == <int>CG_FLOAT16
        and <int>DT_FLOAT64 == <int>CG_FLOAT64
        and <int>DT_BFLOAT16 == <int>CG_BFLOAT16):
    raise ImportError("cropgrad: the kernels' dtype codes differ from capi's")

cdef enum:
    MAX_THREADS = 1024

# Item sizes and names by dtype code (index 0 unused).
cdef int64_t ITEMSIZE[11]
ITEMSIZE[:] = [0, 1, 1, 2, 2, 4, 8, 2, 4, 8, 2]
cdef const char* DTYPE_NAME[11]
DTYPE_NAME[:] = [b"?", b"uint8", b"int8", b"uint16", b"int16", b"int32",
                 b"int64", b"float16", b"float32", b"float64", b"bfloat16"]


# --------------------------------------------------------------------------
# The error record

cdef int _fail(cg_error* err, int status, int64_t position) noexcept nogil:
    """Record `status` (the message is already in ``err.message``)."""
    err.status = status
    err.position = position
    return status


cdef int _ok(cg_error* err) noexcept nogil:
    err.status = CG_OK
    err.position = -1
    err.message[0] = 0
    return CG_OK


cdef inline void _nhwc(const int64_t* shape, int layout, int64_t* dims) noexcept nogil:
    """`shape`, given in `layout`'s order, as [n, height, width, depth]."""
    dims[0] = shape[0]
    if layout == CG_NCHW:
        dims[1] = shape[2]
        dims[2] = shape[3]
        dims[3] = shape[1]
    else:
        dims[1] = shape[1]
        dims[2] = shape[2]
        dims[3] = shape[3]


cdef void _format_shape(char* buf, size_t size, const int64_t* shape) noexcept nogil:
    snprintf(buf, size, "[%lld, %lld, %lld, %lld]", <long long>shape[0],
             <long long>shape[1], <long long>shape[2], <long long>shape[3])


# --------------------------------------------------------------------------
# Checks shared by the three ops

cdef bint _valid_image_dtype(int code) noexcept nogil:
    return CG_UINT8 <= code <= CG_BFLOAT16


cdef int _check_common(int method, int layout, int num_threads, bint bilinear_only,
                       cg_error* err) noexcept nogil:
    """Method, layout and thread count; returns a status."""
    if method != CG_BILINEAR and (bilinear_only or method != CG_NEAREST):
        snprintf(err.message, CG_MESSAGE_SIZE,
                 "method must be one of %s, got code %d",
                 <const char*>(b"'bilinear'" if bilinear_only
                               else b"'bilinear', 'nearest'"), method)
        return _fail(err, CG_ERR_VALUE, -1)
    if layout != CG_NHWC and layout != CG_NCHW:
        snprintf(err.message, CG_MESSAGE_SIZE,
                 "data_format must be 'NHWC' or 'NCHW', got layout code %d", layout)
        return _fail(err, CG_ERR_VALUE, -1)
    if num_threads < 0 or num_threads > MAX_THREADS:
        snprintf(err.message, CG_MESSAGE_SIZE,
                 "num_threads must be from 1 to %d (0: the default), got %d",
                 <int>MAX_THREADS, num_threads)
        return _fail(err, CG_ERR_VALUE, -1)
    return CG_OK


cdef int _check_size(const int64_t* shape, int64_t itemsize, const char* name,
                     cg_error* err) noexcept nogil:
    """The array of `shape` must be indexable: elements and bytes fit int64."""
    cdef int64_t span = itemsize
    cdef int i
    cdef char dims[128]
    for i in range(4):
        if shape[i] < 0:
            _format_shape(dims, sizeof(dims), shape)
            snprintf(err.message, CG_MESSAGE_SIZE,
                     "%s has a negative dimension: shape %s", name, dims)
            return _fail(err, CG_ERR_VALUE, -1)
    for i in range(4):
        if shape[i] == 0:
            continue
        if span > INT64_MAX // shape[i]:
            _format_shape(dims, sizeof(dims), shape)
            snprintf(err.message, CG_MESSAGE_SIZE,
                     "%s of shape %s is too large: more bytes than this "
                     "platform can index", name, dims)
            return _fail(err, CG_ERR_VALUE, -1)
        span *= shape[i]
    return CG_OK


cdef int _check_data(const float* boxes, const void* box_ind, int box_ind_dtype,
                     int64_t num_boxes, int64_t batch, cg_error* err) noexcept nogil:
    """Every box_ind value within [0, batch), every box coordinate finite."""
    cdef int64_t b, v
    if box_ind_dtype != CG_INT32 and box_ind_dtype != CG_INT64:
        snprintf(err.message, CG_MESSAGE_SIZE,
                 "box_ind must be int32 or int64, got dtype code %d", box_ind_dtype)
        return _fail(err, CG_ERR_TYPE, -1)
    for b in range(num_boxes):
        if box_ind_dtype == CG_INT32:
            v = (<const int32_t*>box_ind)[b]
        else:
            v = (<const int64_t*>box_ind)[b]
        if v < 0 or v >= batch:
            snprintf(err.message, CG_MESSAGE_SIZE,
                     "box_ind has values outside [0, batch_size) = [0, %lld): "
                     "box_ind[%lld] = %lld", <long long>batch, <long long>b,
                     <long long>v)
            return _fail(err, CG_ERR_INDEX, b)
    for b in range(num_boxes):
        if not (isfinite(boxes[4 * b]) and isfinite(boxes[4 * b + 1])
                and isfinite(boxes[4 * b + 2]) and isfinite(boxes[4 * b + 3])):
            snprintf(err.message, CG_MESSAGE_SIZE,
                     "boxes must be finite: boxes[%lld] = [%.9g, %.9g, %.9g, %.9g] "
                     "has a NaN or infinite coordinate", <long long>b,
                     <double>boxes[4 * b], <double>boxes[4 * b + 1],
                     <double>boxes[4 * b + 2], <double>boxes[4 * b + 3])
            return _fail(err, CG_ERR_VALUE, b)
    return CG_OK


cdef int _index64(const void* box_ind, int box_ind_dtype, int64_t num_boxes,
                  const int64_t** index, int64_t** owned,
                  cg_error* err) noexcept nogil:
    """`box_ind` as int64: itself, or a copy (freed by the caller) of int32."""
    cdef int64_t b
    owned[0] = NULL
    if box_ind_dtype == CG_INT64 or num_boxes == 0:
        index[0] = <const int64_t*>box_ind
        return CG_OK
    owned[0] = <int64_t*>malloc(<size_t>num_boxes * sizeof(int64_t))
    if owned[0] == NULL:
        snprintf(err.message, CG_MESSAGE_SIZE,
                 "could not allocate %lld bytes for box_ind as int64",
                 <long long>(num_boxes * 8))
        return _fail(err, CG_ERR_MEMORY, -1)
    for b in range(num_boxes):
        owned[0][b] = (<const int32_t*>box_ind)[b]
    index[0] = owned[0]
    return CG_OK


cdef int _memory_error(cg_error* err, const char* op, size_t nbytes,
                       const char* what) noexcept nogil:
    snprintf(err.message, CG_MESSAGE_SIZE, "%s: could not allocate %llu bytes of %s",
             op, <unsigned long long>nbytes, what)
    return _fail(err, CG_ERR_MEMORY, -1)


# --------------------------------------------------------------------------
# Metadata checks of each op (no data read): also called by the NumPy API
# before it allocates the output.

cdef int _check_grad_image(const int64_t* grads_shape, const int64_t* image_size,
                           int output_dtype, int method, int layout,
                           int num_threads, cg_error* err) noexcept nogil:
    """Shapes are in `layout`'s order (and so are those the messages show)."""
    cdef char dims[128]
    cdef int64_t g[4]
    cdef int64_t s[4]
    if _check_common(method, layout, num_threads, False, err) != CG_OK:
        return err.status
    _nhwc(grads_shape, layout, g)
    _nhwc(image_size, layout, s)
    if output_dtype != CG_FLOAT16 and output_dtype != CG_FLOAT32 \
            and output_dtype != CG_FLOAT64 and output_dtype != CG_BFLOAT16:
        snprintf(err.message, CG_MESSAGE_SIZE,
                 "dtype must be float16, float32 or float64 (or bfloat16), got "
                 "dtype code %d", output_dtype)
        return _fail(err, CG_ERR_TYPE, -1)
    if _check_size(grads_shape, 4, "grads", err) != CG_OK:
        return err.status
    if g[1] == 0 or g[2] == 0:
        snprintf(err.message, CG_MESSAGE_SIZE,
                 "grads dimensions must be positive: crop_height and crop_width "
                 "are %lld and %lld", <long long>g[1], <long long>g[2])
        return _fail(err, CG_ERR_VALUE, -1)
    if s[1] <= 0 or s[2] <= 0:
        _format_shape(dims, sizeof(dims), image_size)
        snprintf(err.message, CG_MESSAGE_SIZE,
                 "image dimensions must be positive: image_size = %s", dims)
        return _fail(err, CG_ERR_VALUE, -1)
    if s[0] < 0 or s[3] < 0:
        _format_shape(dims, sizeof(dims), image_size)
        snprintf(err.message, CG_MESSAGE_SIZE,
                 "image_size: batch and depth must be non-negative, got %s", dims)
        return _fail(err, CG_ERR_VALUE, -1)
    if g[3] != s[3]:
        snprintf(err.message, CG_MESSAGE_SIZE,
                 "image_size and grads are incompatible: image_size depth is %lld "
                 "but grads depth is %lld", <long long>s[3], <long long>g[3])
        return _fail(err, CG_ERR_VALUE, -1)
    # float16 and bfloat16 outputs also need a float32 accumulator of the
    # same shape.
    if _check_size(image_size, 4 if ITEMSIZE[output_dtype] == 2 else
                   ITEMSIZE[output_dtype], "the output", err) != CG_OK:
        return err.status
    return _ok(err)


cdef int _check_forward(const int64_t* image_shape, int image_dtype,
                        int64_t num_boxes, int64_t crop_height, int64_t crop_width,
                        int method, int layout, int num_threads, bint bilinear_only,
                        cg_error* err) noexcept nogil:
    """The forward op's checks; also the boxes JVP's (`bilinear_only`), whose
    arguments and output are the forward op's."""
    cdef int64_t crops_shape[4]
    if _check_common(method, layout, num_threads, bilinear_only, err) != CG_OK:
        return err.status
    if _check_image(image_shape, image_dtype, layout, err) != CG_OK:
        return err.status
    if num_boxes < 0:
        snprintf(err.message, CG_MESSAGE_SIZE,
                 "boxes: num_boxes must be non-negative, got %lld",
                 <long long>num_boxes)
        return _fail(err, CG_ERR_VALUE, -1)
    if crop_height <= 0 or crop_width <= 0:
        snprintf(err.message, CG_MESSAGE_SIZE,
                 "crop dimensions must be positive, got crop_size = [%lld, %lld]",
                 <long long>crop_height, <long long>crop_width)
        return _fail(err, CG_ERR_VALUE, -1)
    crops_shape[0] = num_boxes
    crops_shape[1] = crop_height
    crops_shape[2] = crop_width
    crops_shape[3] = image_shape[1] if layout == CG_NCHW else image_shape[3]
    if _check_size(crops_shape, 4, "the output", err) != CG_OK:
        return err.status
    return _ok(err)


cdef int _check_image(const int64_t* image_shape, int image_dtype, int layout,
                      cg_error* err) noexcept nogil:
    cdef char dims[128]
    cdef int64_t s[4]
    _nhwc(image_shape, layout, s)
    if not _valid_image_dtype(image_dtype):
        snprintf(err.message, CG_MESSAGE_SIZE,
                 "image must be uint8, uint16, int8, int16, int32, int64, float16, "
                 "float32, float64 or bfloat16, got dtype code %d", image_dtype)
        return _fail(err, CG_ERR_TYPE, -1)
    if _check_size(image_shape, ITEMSIZE[image_dtype], "image", err) != CG_OK:
        return err.status
    if s[1] == 0 or s[2] == 0:
        _format_shape(dims, sizeof(dims), image_shape)
        snprintf(err.message, CG_MESSAGE_SIZE,
                 "image dimensions must be positive, got shape %s", dims)
        return _fail(err, CG_ERR_VALUE, -1)
    return CG_OK


cdef int _check_grad_boxes(const int64_t* grads_shape, const int64_t* image_shape,
                           int image_dtype, int method, int layout, int num_threads,
                           cg_error* err) noexcept nogil:
    cdef int64_t g[4]
    cdef int64_t s[4]
    if _check_common(method, layout, num_threads, True, err) != CG_OK:
        return err.status
    _nhwc(grads_shape, layout, g)
    _nhwc(image_shape, layout, s)
    if _check_size(grads_shape, 4, "grads", err) != CG_OK:
        return err.status
    if g[1] == 0 or g[2] == 0:
        snprintf(err.message, CG_MESSAGE_SIZE,
                 "grads dimensions must be positive: crop_height and crop_width "
                 "are %lld and %lld", <long long>g[1], <long long>g[2])
        return _fail(err, CG_ERR_VALUE, -1)
    if _check_image(image_shape, image_dtype, layout, err) != CG_OK:
        return err.status
    if g[3] != s[3]:
        snprintf(err.message, CG_MESSAGE_SIZE,
                 "image and grads must have the same depth, got %lld and %lld",
                 <long long>s[3], <long long>g[3])
        return _fail(err, CG_ERR_VALUE, -1)
    return _ok(err)


# --------------------------------------------------------------------------
# The C-level API

cdef int cg_default_threads() noexcept nogil:
    return resolve_threads(0)


cdef int cg_crop_and_resize(
    const void* image, int image_dtype, const int64_t* image_shape,
    const float* boxes, const void* box_ind, int box_ind_dtype, int64_t num_boxes,
    int64_t crop_height, int64_t crop_width, int method, float extrapolation_value,
    int layout, float* crops, int num_threads, int flush_denormals,
    cg_error* error,
) noexcept nogil:
    cdef Geometry geo
    cdef const int64_t* index
    cdef int64_t* owned
    cdef int64_t s[4]
    cdef size_t failed = 0
    cdef int status
    if _check_forward(image_shape, image_dtype, num_boxes, crop_height, crop_width,
                      method, layout, num_threads, False, error) != CG_OK:
        return error.status
    if _check_data(boxes, box_ind, box_ind_dtype, num_boxes, image_shape[0],
                   error) != CG_OK:
        return error.status
    _nhwc(image_shape, layout, s)
    if num_boxes == 0 or s[3] == 0:
        return _ok(error)
    if _index64(box_ind, box_ind_dtype, num_boxes, &index, &owned, error) != CG_OK:
        return error.status
    geo.num_boxes = num_boxes
    geo.crop_h = crop_height
    geo.crop_w = crop_width
    geo.batch = s[0]
    geo.height = s[1]
    geo.width = s[2]
    geo.depth = s[3]
    geo.nearest = method == CG_NEAREST
    geo.nchw = layout == CG_NCHW
    status = crop_and_resize(&geo, image, image_dtype, boxes, index, crops,
                             extrapolation_value, resolve_threads(num_threads),
                             flush_denormals != 0, &failed)
    free(owned)
    if status != 0:
        return _memory_error(error, "crop_and_resize", failed, "scratch")
    return _ok(error)


cdef int cg_crop_and_resize_grad_image(
    const float* grads, const int64_t* grads_shape, const float* boxes,
    const void* box_ind, int box_ind_dtype, const int64_t* image_size,
    void* output, int output_dtype, int method, int layout, int num_threads,
    int flush_denormals, cg_error* error,
) noexcept nogil:
    cdef Geometry geo
    cdef const int64_t* index
    cdef int64_t* owned
    cdef size_t failed = 0
    cdef int kind, status
    cdef int64_t g[4]
    cdef int64_t s[4]
    if _check_grad_image(grads_shape, image_size, output_dtype, method, layout,
                         num_threads, error) != CG_OK:
        return error.status
    if _check_data(boxes, box_ind, box_ind_dtype, grads_shape[0], image_size[0],
                   error) != CG_OK:
        return error.status
    if (image_size[0] == 0 or image_size[1] == 0 or image_size[2] == 0
            or image_size[3] == 0):
        return _ok(error)
    _nhwc(grads_shape, layout, g)
    _nhwc(image_size, layout, s)
    if _index64(box_ind, box_ind_dtype, grads_shape[0], &index, &owned,
                error) != CG_OK:
        return error.status
    geo.num_boxes = g[0]
    geo.crop_h = g[1]
    geo.crop_w = g[2]
    geo.batch = s[0]
    geo.height = s[1]
    geo.width = s[2]
    geo.depth = s[3]
    geo.nearest = method == CG_NEAREST
    geo.nchw = layout == CG_NCHW
    kind = (OUT_FLOAT32 if output_dtype == CG_FLOAT32 else
            OUT_FLOAT64 if output_dtype == CG_FLOAT64 else
            OUT_BFLOAT16 if output_dtype == CG_BFLOAT16 else OUT_FLOAT16)
    status = grad_image(&geo, grads, boxes, index, output, kind,
                        resolve_threads(num_threads), flush_denormals != 0, &failed)
    free(owned)
    if status != 0:
        return _memory_error(error, "crop_and_resize_grad_image", failed,
                             "scratch (sampling tables, or the float32 "
                             "accumulator of a float16 or bfloat16 output)")
    return _ok(error)


cdef int cg_crop_and_resize_grad_boxes(
    const float* grads, const int64_t* grads_shape, const void* image,
    int image_dtype, const int64_t* image_shape, const float* boxes,
    const void* box_ind, int box_ind_dtype, float* output, int method, int layout,
    int num_threads, int flush_denormals, cg_error* error,
) noexcept nogil:
    cdef Geometry geo
    cdef const int64_t* index
    cdef int64_t* owned
    cdef size_t failed = 0
    cdef int status
    cdef int64_t g[4]
    cdef int64_t s[4]
    if _check_grad_boxes(grads_shape, image_shape, image_dtype, method, layout,
                         num_threads, error) != CG_OK:
        return error.status
    if _check_data(boxes, box_ind, box_ind_dtype, grads_shape[0], image_shape[0],
                   error) != CG_OK:
        return error.status
    if grads_shape[0] == 0:
        return _ok(error)
    if _index64(box_ind, box_ind_dtype, grads_shape[0], &index, &owned,
                error) != CG_OK:
        return error.status
    _nhwc(grads_shape, layout, g)
    _nhwc(image_shape, layout, s)
    geo.num_boxes = g[0]
    geo.crop_h = g[1]
    geo.crop_w = g[2]
    geo.batch = s[0]
    geo.height = s[1]
    geo.width = s[2]
    geo.depth = s[3]
    geo.nearest = False
    geo.nchw = layout == CG_NCHW
    status = grad_boxes(&geo, grads, image, image_dtype, boxes, index, output,
                        resolve_threads(num_threads), flush_denormals != 0, &failed)
    free(owned)
    if status != 0:
        return _memory_error(error, "crop_and_resize_grad_boxes", failed,
                             "scratch")
    return _ok(error)


cdef int cg_crop_and_resize_jvp_boxes(
    const void* image, int image_dtype, const int64_t* image_shape,
    const float* boxes, const float* boxes_tangent, const void* box_ind,
    int box_ind_dtype, int64_t num_boxes, int64_t crop_height, int64_t crop_width,
    int method, int layout, float* output, int num_threads, int flush_denormals,
    cg_error* error,
) noexcept nogil:
    cdef Geometry geo
    cdef const int64_t* index
    cdef int64_t* owned
    cdef int64_t s[4]
    if _check_forward(image_shape, image_dtype, num_boxes, crop_height, crop_width,
                      method, layout, num_threads, True, error) != CG_OK:
        return error.status
    if _check_data(boxes, box_ind, box_ind_dtype, num_boxes, image_shape[0],
                   error) != CG_OK:
        return error.status
    _nhwc(image_shape, layout, s)
    if num_boxes == 0 or s[3] == 0:
        return _ok(error)
    if _index64(box_ind, box_ind_dtype, num_boxes, &index, &owned, error) != CG_OK:
        return error.status
    geo.num_boxes = num_boxes
    geo.crop_h = crop_height
    geo.crop_w = crop_width
    geo.batch = s[0]
    geo.height = s[1]
    geo.width = s[2]
    geo.depth = s[3]
    geo.nearest = False
    geo.nchw = layout == CG_NCHW
    jvp_boxes(&geo, image, image_dtype, boxes, boxes_tangent, index, output,
              resolve_threads(num_threads), flush_denormals != 0)
    free(owned)
    return _ok(error)


# --------------------------------------------------------------------------
# The NumPy API's way in (private).  Arrays arrive checked for type, dtype,
# number of dimensions and C-contiguity by cropgrad/_api.py.

# The codes of capi.pxd, for the Python layer.
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

_EXCEPTIONS = {
    CG_ERR_VALUE: ValueError,
    CG_ERR_INDEX: IndexError,
    CG_ERR_TYPE: TypeError,
    CG_ERR_MEMORY: MemoryError,
    CG_ERR_UNSUPPORTED: NotImplementedError,
}


cdef int _raise(cg_error* err) except -1:
    raise _EXCEPTIONS[err.status](err.message.decode("utf-8", "replace"))


cdef inline void _shape4(int64_t* dst, shape):
    dst[0] = shape[0]
    dst[1] = shape[1]
    dst[2] = shape[2]
    dst[3] = shape[3]


def _check_grad_image_call(tuple grads_shape, image_size, int output_dtype,
                           int method, int layout, int num_threads):
    """Raise what `cg_crop_and_resize_grad_image` would for these shapes."""
    cdef cg_error err
    cdef int64_t g[4]
    cdef int64_t s[4]
    _shape4(g, grads_shape)
    _shape4(s, image_size)
    if _check_grad_image(g, s, output_dtype, method, layout, num_threads,
                         &err) != CG_OK:
        _raise(&err)


def _check_forward_call(tuple image_shape, int image_dtype, int64_t num_boxes,
                        int64_t crop_height, int64_t crop_width, int method,
                        int layout, int num_threads):
    """Raise what `cg_crop_and_resize` would for these shapes."""
    cdef cg_error err
    cdef int64_t s[4]
    _shape4(s, image_shape)
    if _check_forward(s, image_dtype, num_boxes, crop_height, crop_width, method,
                      layout, num_threads, False, &err) != CG_OK:
        _raise(&err)


def _check_jvp_boxes_call(tuple image_shape, int image_dtype, int64_t num_boxes,
                          int64_t crop_height, int64_t crop_width, int method,
                          int layout, int num_threads):
    """Raise what `cg_crop_and_resize_jvp_boxes` would for these shapes."""
    cdef cg_error err
    cdef int64_t s[4]
    _shape4(s, image_shape)
    if _check_forward(s, image_dtype, num_boxes, crop_height, crop_width, method,
                      layout, num_threads, True, &err) != CG_OK:
        _raise(&err)


ctypedef struct Buffers:
    # Views of the arrays of one call, released together.
    Py_buffer views[5]
    int count


cdef void* _view(Buffers* bufs, obj, bint writable) except? NULL:
    """Pointer to the data of `obj` (a C-contiguous array), held in `bufs`."""
    cdef int flags = PyBUF_C_CONTIGUOUS | (PyBUF_WRITABLE if writable else 0)
    PyObject_GetBuffer(obj, &bufs.views[bufs.count], flags)
    bufs.count += 1
    return bufs.views[bufs.count - 1].buf


cdef int _check_out_apart(Buffers* bufs) except -1:
    """The output (the last view) must not overlap an input's bytes.

    A check of the byte ranges, as ``numpy.may_share_memory`` makes it
    (every array here is contiguous), at a fraction of its cost.
    """
    cdef Py_buffer* out = &bufs.views[bufs.count - 1]
    cdef char* lo = <char*>out.buf
    cdef char* hi = lo + out.len
    cdef char* a
    cdef int i
    if out.len == 0:
        return 0
    for i in range(bufs.count - 1):
        a = <char*>bufs.views[i].buf
        if bufs.views[i].len > 0 and a < hi and lo < a + bufs.views[i].len:
            raise ValueError("out must not share memory with an input")
    return 0


cdef void _release(Buffers* bufs) noexcept:
    while bufs.count > 0:
        bufs.count -= 1
        PyBuffer_Release(&bufs.views[bufs.count])


def _grad_image(grads, boxes, box_ind, int box_ind_dtype, image_size, out,
                int output_dtype, int method, int layout, int num_threads,
                bint flush):
    """`cg_crop_and_resize_grad_image` on NumPy arrays; raises on error."""
    cdef cg_error err
    cdef int64_t g[4]
    cdef int64_t s[4]
    cdef Buffers bufs
    cdef const float* p_grads
    cdef const float* p_boxes
    cdef const void* p_index
    cdef void* p_out
    cdef int status
    _shape4(g, grads.shape)
    _shape4(s, image_size)
    bufs.count = 0
    try:
        p_grads = <const float*>_view(&bufs, grads, False)
        p_boxes = <const float*>_view(&bufs, boxes, False)
        p_index = _view(&bufs, box_ind, False)
        p_out = _view(&bufs, out, True)
        _check_out_apart(&bufs)
        with nogil:
            status = cg_crop_and_resize_grad_image(
                p_grads, g, p_boxes, p_index, box_ind_dtype, s, p_out,
                output_dtype, method, layout, num_threads, flush, &err)
    finally:
        _release(&bufs)
    if status != CG_OK:
        _raise(&err)


def _crop_and_resize(image, int image_dtype, boxes, box_ind, int box_ind_dtype,
                     int64_t crop_height, int64_t crop_width, int method,
                     float extrapolation_value, int layout, out, int num_threads,
                     bint flush):
    """`cg_crop_and_resize` on NumPy arrays; raises on error."""
    cdef cg_error err
    cdef int64_t s[4]
    cdef Buffers bufs
    cdef const void* p_image
    cdef const float* p_boxes
    cdef const void* p_index
    cdef float* p_out
    cdef int64_t num_boxes = boxes.shape[0]
    cdef int status
    _shape4(s, image.shape)
    bufs.count = 0
    try:
        p_image = _view(&bufs, image, False)
        p_boxes = <const float*>_view(&bufs, boxes, False)
        p_index = _view(&bufs, box_ind, False)
        p_out = <float*>_view(&bufs, out, True)
        _check_out_apart(&bufs)
        with nogil:
            status = cg_crop_and_resize(
                p_image, image_dtype, s, p_boxes, p_index, box_ind_dtype, num_boxes,
                crop_height, crop_width, method, extrapolation_value, layout, p_out,
                num_threads, flush, &err)
    finally:
        _release(&bufs)
    if status != CG_OK:
        _raise(&err)


def _grad_boxes(grads, image, int image_dtype, boxes, box_ind, int box_ind_dtype,
                out, int method, int layout, int num_threads, bint flush):
    """`cg_crop_and_resize_grad_boxes` on NumPy arrays; raises on error."""
    cdef cg_error err
    cdef int64_t g[4]
    cdef int64_t s[4]
    cdef Buffers bufs
    cdef const float* p_grads
    cdef const void* p_image
    cdef const float* p_boxes
    cdef const void* p_index
    cdef float* p_out
    cdef int status
    _shape4(g, grads.shape)
    _shape4(s, image.shape)
    bufs.count = 0
    try:
        p_grads = <const float*>_view(&bufs, grads, False)
        p_image = _view(&bufs, image, False)
        p_boxes = <const float*>_view(&bufs, boxes, False)
        p_index = _view(&bufs, box_ind, False)
        p_out = <float*>_view(&bufs, out, True)
        _check_out_apart(&bufs)
        with nogil:
            status = cg_crop_and_resize_grad_boxes(
                p_grads, g, p_image, image_dtype, s, p_boxes, p_index,
                box_ind_dtype, p_out, method, layout, num_threads, flush, &err)
    finally:
        _release(&bufs)
    if status != CG_OK:
        _raise(&err)


def _jvp_boxes(image, int image_dtype, boxes, boxes_tangent, box_ind,
               int box_ind_dtype, int64_t crop_height, int64_t crop_width,
               int method, int layout, out, int num_threads, bint flush):
    """`cg_crop_and_resize_jvp_boxes` on NumPy arrays; raises on error."""
    cdef cg_error err
    cdef int64_t s[4]
    cdef Buffers bufs
    cdef const void* p_image
    cdef const float* p_boxes
    cdef const float* p_tangent
    cdef const void* p_index
    cdef float* p_out
    cdef int64_t num_boxes = boxes.shape[0]
    cdef int status
    _shape4(s, image.shape)
    bufs.count = 0
    try:
        p_image = _view(&bufs, image, False)
        p_boxes = <const float*>_view(&bufs, boxes, False)
        p_tangent = <const float*>_view(&bufs, boxes_tangent, False)
        p_index = _view(&bufs, box_ind, False)
        p_out = <float*>_view(&bufs, out, True)
        _check_out_apart(&bufs)
        with nogil:
            status = cg_crop_and_resize_jvp_boxes(
                p_image, image_dtype, s, p_boxes, p_tangent, p_index, box_ind_dtype,
                num_boxes, crop_height, crop_width, method, layout, p_out,
                num_threads, flush, &err)
    finally:
        _release(&bufs)
    if status != CG_OK:
        _raise(&err)


def _build_info():
    """Facts fixed when the extension was compiled (see show_config)."""
    return {
        "openmp": bool(CROPGRAD_HAVE_OPENMP),
        "compiler": CG_COMPILER.decode("utf-8", "replace"),
        "cflags": CG_CFLAGS.decode("utf-8", "replace"),
        "flush_denormals_supported": bool(CG_FPENV_SUPPORTED),
    }
