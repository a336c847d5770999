# cython: language_level=3
"""cropgrad's C-level API (see capi.pxd and docs/capi.md).

The functions declared in ``capi.pxd`` check every argument, including the
ones that need the data (finite boxes, ``box_ind`` in range, sizes that
overflow), fill the caller's error record and run the kernels, all without
the GIL.  Their metadata checks (``_check_*``, also declared in capi.pxd)
are the one definition of a valid call: the NumPy API reaches them, and the
functions, through its bridge cropgrad/_core.pyx, which turns an error
record into the exception the NumPy API documents.
"""

from cpython.pycapsule cimport PyCapsule_New
from libc.math cimport isfinite
from libc.stdint cimport INT64_MAX, int32_t, int64_t, uintptr_t
from libc.stdio cimport snprintf
from libc.stdlib cimport free, malloc

from cropgrad._kernels.crop_and_resize.forward cimport crop_and_resize
from cropgrad._kernels.crop_and_resize.grad_boxes cimport grad_boxes
from cropgrad._kernels.crop_and_resize.grad_image cimport (
    OUT_BFLOAT16,
    OUT_FLOAT16,
    OUT_FLOAT32,
    OUT_FLOAT64,
    grad_image,
)
from cropgrad._kernels.crop_and_resize.jvp_boxes cimport jvp_boxes
from cropgrad._runtime.parallel cimport resolve_threads
from cropgrad._kernels cimport types as dt
from cropgrad._kernels.types cimport Geometry

# The kernels number dtypes as the codes of capi.pxd do (they cannot
# cimport this module: it imports theirs).
if not (<int>dt.DT_UINT8 == <int>CG_UINT8 and <int>dt.DT_INT8 == <int>CG_INT8
        and <int>dt.DT_UINT16 == <int>CG_UINT16
        and <int>dt.DT_INT16 == <int>CG_INT16
        and <int>dt.DT_INT32 == <int>CG_INT32
        and <int>dt.DT_INT64 == <int>CG_INT64
        and <int>dt.DT_FLOAT16 == <int>CG_FLOAT16
        and <int>dt.DT_FLOAT32 == <int>CG_FLOAT32
        and <int>dt.DT_FLOAT64 == <int>CG_FLOAT64
        and <int>dt.DT_BFLOAT16 == <int>CG_BFLOAT16):
    raise ImportError("cropgrad: the kernels' dtype codes differ from capi's")

cdef enum:
    MAX_THREADS = 1024

# Item sizes and names by dtype code (index 0 unused).
cdef int64_t ITEMSIZE[11]
ITEMSIZE[:] = [0, 1, 1, 2, 2, 4, 8, 2, 4, 8, 2]
cdef const char* CODE_NAME[11]
CODE_NAME[:] = [b"", b"CG_UINT8", b"CG_INT8", b"CG_UINT16", b"CG_INT16", b"CG_INT32",
                b"CG_INT64", b"CG_FLOAT16", b"CG_FLOAT32", b"CG_FLOAT64",
                b"CG_BFLOAT16"]


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


cdef const char* _dtype_code_name(int code) noexcept nogil:
    """"CG_FLOAT32" for 8, and so on; "" for a number that is no dtype code."""
    if CG_UINT8 <= code <= CG_BFLOAT16:
        return CODE_NAME[code]
    return b""


cdef int _bad_dtype(cg_error* err, const char* argument, const char* allowed,
                    int code) noexcept nogil:
    """A dtype code `argument` does not take (only C callers can pass one).

    Worded with the codes' names, where the NumPy API (which passes only
    codes it takes) names a NumPy dtype.
    """
    if _dtype_code_name(code)[0] != 0:
        snprintf(err.message, CG_MESSAGE_SIZE, "%s must be %s, got %s (%d)",
                 argument, allowed, _dtype_code_name(code), code)
    else:
        snprintf(err.message, CG_MESSAGE_SIZE,
                 "%s must be %s, got %d (not a dtype code)", argument, allowed, code)
    return _fail(err, CG_ERR_TYPE, -1)


cdef int _check_common(int method, int layout, int num_threads, bint bilinear_only,
                       cg_error* err) noexcept nogil:
    """Method, layout and thread count; returns a status.

    The NumPy API passes only codes it has checked, so these messages are
    the C-level API's own (docs/capi.md lists them).
    """
    if method != CG_BILINEAR and (bilinear_only or method != CG_NEAREST):
        snprintf(err.message, CG_MESSAGE_SIZE, "method must be %s, got %d",
                 <const char*>(b"CG_BILINEAR (0): the only method this op has"
                               if bilinear_only
                               else b"CG_BILINEAR (0) or CG_NEAREST (1)"), method)
        return _fail(err, CG_ERR_VALUE, -1)
    if layout != CG_NHWC and layout != CG_NCHW:
        snprintf(err.message, CG_MESSAGE_SIZE,
                 "layout must be CG_NHWC (0) or CG_NCHW (1), got %d", layout)
        return _fail(err, CG_ERR_VALUE, -1)
    if num_threads < 0 or num_threads > MAX_THREADS:
        # The NumPy API's "num_threads must be from 1 to 1024, got N", with
        # the C-level API's 0 (the NumPy API's None) added.
        snprintf(err.message, CG_MESSAGE_SIZE,
                 "num_threads must be 0 (the default) or from 1 to %d, got %d",
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
    """Every box_ind value within [0, batch), every box coordinate finite.

    After `_check_arrays` (box_ind_dtype is a code it takes).
    """
    cdef int64_t b, v
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


cdef inline void _geometry(Geometry* geo, int64_t num_boxes, int64_t crop_h,
                           int64_t crop_w, const int64_t* s, bint nearest,
                           int layout) noexcept nogil:
    """The kernels' problem description (`s`: the image's shape as NHWC)."""
    geo.num_boxes = num_boxes
    geo.crop_h = crop_h
    geo.crop_w = crop_w
    geo.batch = s[0]
    geo.height = s[1]
    geo.width = s[2]
    geo.depth = s[3]
    geo.nearest = nearest
    geo.nchw = layout == CG_NCHW


ctypedef struct Array:
    # One array argument of a call: where it is, how many bytes its shape
    # holds (the shapes already checked, so the count fits int64), its name.
    const void* data
    int64_t nbytes
    const char* name


cdef inline int64_t _nbytes(const int64_t* shape, int64_t itemsize) noexcept nogil:
    """Bytes of a checked 4-D shape (its non-zero dimensions fit int64)."""
    return itemsize * shape[0] * shape[1] * shape[2] * shape[3]


cdef inline void _array(Array* a, const void* data, int64_t nbytes,
                        const char* name) noexcept nogil:
    a.data = data
    a.nbytes = nbytes
    a.name = name


cdef int _check_shape_pointer(const int64_t* shape, const char* name,
                              cg_error* err) noexcept nogil:
    if shape == NULL:
        snprintf(err.message, CG_MESSAGE_SIZE, "%s is NULL: 4 values are needed",
                 name)
        return _fail(err, CG_ERR_VALUE, -1)
    return CG_OK


cdef int _check_boxes_args(int box_ind_dtype, int64_t num_boxes,
                           cg_error* err) noexcept nogil:
    """box_ind's dtype code; boxes [num_boxes, 4] indexable (num_boxes >= 0)."""
    if box_ind_dtype != CG_INT32 and box_ind_dtype != CG_INT64:
        return _bad_dtype(err, "box_ind_dtype", "CG_INT32 or CG_INT64",
                          box_ind_dtype)
    if num_boxes > INT64_MAX // 16:
        snprintf(err.message, CG_MESSAGE_SIZE,
                 "boxes of shape [%lld, 4] is too large: more bytes than this "
                 "platform can index", <long long>num_boxes)
        return _fail(err, CG_ERR_VALUE, -1)
    return CG_OK


cdef int _check_arrays(const Array* arrays, int count, cg_error* err) noexcept nogil:
    """No NULL where there are bytes; the output (the last) apart from the rest.

    NULL is fine for an empty array.  The overlap test is the NumPy API's
    (its message too): byte ranges, every array being contiguous.
    """
    cdef const Array* out = &arrays[count - 1]
    cdef uintptr_t lo = <uintptr_t>out.data
    cdef uintptr_t hi = lo + <uintptr_t>out.nbytes
    cdef uintptr_t a
    cdef int i
    for i in range(count):
        if arrays[i].data == NULL and arrays[i].nbytes > 0:
            snprintf(err.message, CG_MESSAGE_SIZE,
                     "%s is NULL but its shape holds %lld bytes (NULL is only "
                     "for an empty array)", arrays[i].name,
                     <long long>arrays[i].nbytes)
            return _fail(err, CG_ERR_VALUE, -1)
    if out.nbytes == 0:
        return CG_OK
    for i in range(count - 1):
        a = <uintptr_t>arrays[i].data
        if arrays[i].nbytes > 0 and a < hi and lo < a + <uintptr_t>arrays[i].nbytes:
            snprintf(err.message, CG_MESSAGE_SIZE,
                     "out must not share memory with an input")
            return _fail(err, CG_ERR_VALUE, -1)
    return CG_OK


cdef int _check_grads(const int64_t* grads_shape, const int64_t* g,
                      cg_error* err) noexcept nogil:
    """grads indexable, its crops not empty (`g`: its shape as NHWC)."""
    if _check_size(grads_shape, 4, "grads", err) != CG_OK:
        return err.status
    if g[1] == 0 or g[2] == 0:
        snprintf(err.message, CG_MESSAGE_SIZE,
                 "grads dimensions must be positive: crop_height and crop_width "
                 "are %lld and %lld", <long long>g[1], <long long>g[2])
        return _fail(err, CG_ERR_VALUE, -1)
    return CG_OK


# --------------------------------------------------------------------------
# Metadata checks of each op (no data read; declared in capi.pxd): the NumPy
# API, cropgrad.jax and cropgrad.torch run them through cropgrad._core before
# they allocate an output.

cdef int _check_grad_image(const int64_t* grads_shape, const int64_t* image_size,
                           int output_dtype, int method, int layout,
                           int num_threads, const char* size_name,
                           cg_error* err) noexcept nogil:
    """Shapes are in `layout`'s order (and so are those the messages show);
    `size_name` is what the caller calls `image_size` (JAX: image_shape)."""
    cdef char dims[128]
    cdef int64_t g[4]
    cdef int64_t s[4]
    if _check_common(method, layout, num_threads, False, err) != CG_OK:
        return err.status
    _nhwc(grads_shape, layout, g)
    _nhwc(image_size, layout, s)
    if output_dtype != CG_FLOAT16 and output_dtype != CG_FLOAT32 \
            and output_dtype != CG_FLOAT64 and output_dtype != CG_BFLOAT16:
        return _bad_dtype(err, "output_dtype",
                          "CG_FLOAT16, CG_FLOAT32, CG_FLOAT64 or CG_BFLOAT16",
                          output_dtype)
    if _check_grads(grads_shape, g, err) != CG_OK:
        return err.status
    if s[1] <= 0 or s[2] <= 0:
        _format_shape(dims, sizeof(dims), image_size)
        snprintf(err.message, CG_MESSAGE_SIZE,
                 "image dimensions must be positive: %s = %s", size_name, dims)
        return _fail(err, CG_ERR_VALUE, -1)
    if s[0] < 0 or s[3] < 0:
        _format_shape(dims, sizeof(dims), image_size)
        snprintf(err.message, CG_MESSAGE_SIZE,
                 "%s: batch and depth must be non-negative, got %s", size_name,
                 dims)
        return _fail(err, CG_ERR_VALUE, -1)
    if g[3] != s[3]:
        snprintf(err.message, CG_MESSAGE_SIZE,
                 "%s and grads are incompatible: %s depth is %lld but grads "
                 "depth is %lld", size_name, size_name, <long long>s[3],
                 <long long>g[3])
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
        return _bad_dtype(err, "image_dtype", "CG_UINT8, CG_INT8, CG_UINT16, "
                          "CG_INT16, CG_INT32, CG_INT64, CG_FLOAT16, CG_FLOAT32, "
                          "CG_FLOAT64 or CG_BFLOAT16", image_dtype)
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
    if _check_grads(grads_shape, g, err) != CG_OK:
        return err.status
    if _check_image(image_shape, image_dtype, layout, err) != CG_OK:
        return err.status
    if g[3] != s[3]:
        snprintf(err.message, CG_MESSAGE_SIZE,
                 "image and grads must have the same depth, got %lld and %lld",
                 <long long>s[3], <long long>g[3])
        return _fail(err, CG_ERR_VALUE, -1)
    return _ok(err)


cdef int _forward_call(
    const void* image, int image_dtype, const int64_t* image_shape,
    const float* boxes, const float* boxes_tangent, const void* box_ind,
    int box_ind_dtype, int64_t num_boxes, int64_t crop_height, int64_t crop_width,
    int method, int layout, const void* output, const char* output_name,
    int num_threads, bint jvp, Geometry* geo, const int64_t** index,
    int64_t** owned, cg_error* err,
) noexcept nogil:
    """The checks of a call of `cg_crop_and_resize`, or (`jvp`) of
    `cg_crop_and_resize_jvp_boxes`, whose arguments and output are the
    forward op's with `boxes_tangent` beside the boxes; then the kernel's
    geometry and int64 box indices (free ``owned[0]`` after the kernel).

    Returns 1 when the kernel has work, 0 when the call is valid and its
    output empty (`err` holds CG_OK), -1 when it is not (`err` says why).
    """
    cdef int64_t s[4]
    cdef Array arrays[5]
    cdef int n = 0
    if _check_shape_pointer(image_shape, "image_shape", err) != CG_OK:
        return -1
    if _check_forward(image_shape, image_dtype, num_boxes, crop_height, crop_width,
                      method, layout, num_threads, jvp, err) != CG_OK:
        return -1
    if _check_boxes_args(box_ind_dtype, num_boxes, err) != CG_OK:
        return -1
    _nhwc(image_shape, layout, s)
    _array(&arrays[n], image, _nbytes(image_shape, ITEMSIZE[image_dtype]), "image")
    _array(&arrays[n + 1], boxes, 16 * num_boxes, "boxes")
    n += 2
    if jvp:
        _array(&arrays[n], boxes_tangent, 16 * num_boxes, "boxes_tangent")
        n += 1
    _array(&arrays[n], box_ind, ITEMSIZE[box_ind_dtype] * num_boxes, "box_ind")
    _array(&arrays[n + 1], output, 4 * num_boxes * crop_height * crop_width * s[3],
           output_name)
    n += 2
    if _check_arrays(arrays, n, err) != CG_OK:
        return -1
    if _check_data(boxes, box_ind, box_ind_dtype, num_boxes, image_shape[0],
                   err) != CG_OK:
        return -1
    if num_boxes == 0 or s[3] == 0:
        _ok(err)
        return 0
    if _index64(box_ind, box_ind_dtype, num_boxes, index, owned, err) != CG_OK:
        return -1
    # (The boxes JVP's checks have refused nearest sampling.)
    _geometry(geo, num_boxes, crop_height, crop_width, s, method == CG_NEAREST, layout)
    return 1


# --------------------------------------------------------------------------
# The C-level API

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
    cdef Geometry geo
    cdef const int64_t* index
    cdef int64_t* owned
    cdef size_t failed = 0
    cdef int status
    if error == NULL:
        error = &local
    if _forward_call(image, image_dtype, image_shape, boxes, NULL, box_ind,
                     box_ind_dtype, num_boxes, crop_height, crop_width, method,
                     layout, crops, "crops", num_threads, False, &geo, &index,
                     &owned, error) <= 0:
        return error.status
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
    cdef cg_error local
    cdef Geometry geo
    cdef const int64_t* index
    cdef int64_t* owned
    cdef size_t failed = 0
    cdef int kind, status
    cdef int64_t g[4]
    cdef int64_t s[4]
    cdef Array arrays[4]
    if error == NULL:
        error = &local
    if (_check_shape_pointer(grads_shape, "grads_shape", error) != CG_OK
            or _check_shape_pointer(image_size, "image_size", error) != CG_OK):
        return error.status
    if _check_grad_image(grads_shape, image_size, output_dtype, method, layout,
                         num_threads, "image_size", error) != CG_OK:
        return error.status
    if _check_boxes_args(box_ind_dtype, grads_shape[0], error) != CG_OK:
        return error.status
    _array(&arrays[0], grads, _nbytes(grads_shape, 4), "grads")
    _array(&arrays[1], boxes, 16 * grads_shape[0], "boxes")
    _array(&arrays[2], box_ind, ITEMSIZE[box_ind_dtype] * grads_shape[0], "box_ind")
    _array(&arrays[3], output, _nbytes(image_size, ITEMSIZE[output_dtype]), "output")
    if _check_arrays(arrays, 4, error) != CG_OK:
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
    _geometry(&geo, g[0], g[1], g[2], s, method == CG_NEAREST, layout)
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
    cdef cg_error local
    cdef Geometry geo
    cdef const int64_t* index
    cdef int64_t* owned
    cdef size_t failed = 0
    cdef int status
    cdef int64_t g[4]
    cdef int64_t s[4]
    cdef Array arrays[5]
    if error == NULL:
        error = &local
    if (_check_shape_pointer(grads_shape, "grads_shape", error) != CG_OK
            or _check_shape_pointer(image_shape, "image_shape", error) != CG_OK):
        return error.status
    if _check_grad_boxes(grads_shape, image_shape, image_dtype, method, layout,
                         num_threads, error) != CG_OK:
        return error.status
    if _check_boxes_args(box_ind_dtype, grads_shape[0], error) != CG_OK:
        return error.status
    _array(&arrays[0], grads, _nbytes(grads_shape, 4), "grads")
    _array(&arrays[1], image, _nbytes(image_shape, ITEMSIZE[image_dtype]), "image")
    _array(&arrays[2], boxes, 16 * grads_shape[0], "boxes")
    _array(&arrays[3], box_ind, ITEMSIZE[box_ind_dtype] * grads_shape[0], "box_ind")
    _array(&arrays[4], output, 16 * grads_shape[0], "output")
    if _check_arrays(arrays, 5, error) != CG_OK:
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
    _geometry(&geo, g[0], g[1], g[2], s, False, layout)
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
    cdef cg_error local
    cdef Geometry geo
    cdef const int64_t* index
    cdef int64_t* owned
    if error == NULL:
        error = &local
    if _forward_call(image, image_dtype, image_shape, boxes, boxes_tangent, box_ind,
                     box_ind_dtype, num_boxes, crop_height, crop_width, method,
                     layout, output, "output", num_threads, True, &geo, &index,
                     &owned, error) <= 0:
        return error.status
    jvp_boxes(&geo, image, image_dtype, boxes, boxes_tangent, index, output,
              resolve_threads(num_threads), flush_denormals != 0)
    free(owned)
    return _ok(error)


# --------------------------------------------------------------------------
# The codes of capi.pxd, for the Python layer (cropgrad._validation) and
# for ctypes, cffi and Numba consumers.
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


# --------------------------------------------------------------------------
# The way in for C, C++, ctypes, cffi and Numba (docs/capi.md)

# The table C and C++ consumers get through cropgrad/include/cropgrad/capi.h:
# this struct is that header's cropgrad_api_t, member for member (a minor
# version only appends members; tests/test_capi.py checks the header's view
# of every member against function_addresses()).
ctypedef int (*api_version_fn)() noexcept nogil
ctypedef int (*default_threads_fn)() noexcept nogil
ctypedef int (*crop_and_resize_fn)(
    const void*, int, const int64_t*, const float*, const void*, int, int64_t,
    int64_t, int64_t, int, float, int, float*, int, int, cg_error*) noexcept nogil
ctypedef int (*grad_image_fn)(
    const float*, const int64_t*, const float*, const void*, int, const int64_t*,
    void*, int, int, int, int, int, cg_error*) noexcept nogil
ctypedef int (*grad_boxes_fn)(
    const float*, const int64_t*, const void*, int, const int64_t*, const float*,
    const void*, int, float*, int, int, int, int, cg_error*) noexcept nogil

ctypedef int (*jvp_boxes_fn)(
    const void*, int, const int64_t*, const float*, const float*, const void*, int,
    int64_t, int64_t, int64_t, int, int, float*, int, int, cg_error*) noexcept nogil

ctypedef struct ApiTable:
    int version_major
    int version_minor
    # 1.0
    api_version_fn api_version
    default_threads_fn default_threads
    crop_and_resize_fn crop_and_resize
    grad_image_fn crop_and_resize_grad_image
    grad_boxes_fn crop_and_resize_grad_boxes
    jvp_boxes_fn crop_and_resize_jvp_boxes

cdef ApiTable TABLE
TABLE.version_major = CG_API_VERSION_MAJOR
TABLE.version_minor = CG_API_VERSION_MINOR
TABLE.api_version = cg_api_version
TABLE.default_threads = cg_default_threads
TABLE.crop_and_resize = cg_crop_and_resize
TABLE.crop_and_resize_grad_image = cg_crop_and_resize_grad_image
TABLE.crop_and_resize_grad_boxes = cg_crop_and_resize_grad_boxes
TABLE.crop_and_resize_jvp_boxes = cg_crop_and_resize_jvp_boxes

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
    cdef ApiTable* t = &TABLE
    return {
        "cg_api_version": <uintptr_t><void*>t.api_version,
        "cg_default_threads": <uintptr_t><void*>t.default_threads,
        "cg_crop_and_resize": <uintptr_t><void*>t.crop_and_resize,
        "cg_crop_and_resize_grad_image": <uintptr_t><void*>t.crop_and_resize_grad_image,
        "cg_crop_and_resize_grad_boxes": <uintptr_t><void*>t.crop_and_resize_grad_boxes,
        "cg_crop_and_resize_jvp_boxes": <uintptr_t><void*>t.crop_and_resize_jvp_boxes,
    }
