# cython: language_level=3
"""The gate's checks every op family shares, and the sequence of an op's
call (`run`; see gate.pxd).

The NumPy API passes only codes and values its Python layer has checked,
so the messages about dtype codes, methods and layouts here are the
C-level API's own (docs/capi.md lists them); the ones about shapes and
data are what every entry point says.
"""

from libc.stdint cimport INT64_MAX, int32_t, uintptr_t
from libc.stdio cimport snprintf
from libc.stdlib cimport free, malloc

from cropgrad._runtime.parallel cimport resolve_threads
from cropgrad.capi cimport (
    CG_BFLOAT16,
    CG_ERR_INDEX,
    CG_ERR_MEMORY,
    CG_ERR_TYPE,
    CG_ERR_VALUE,
    CG_FLOAT64,
    CG_INT32,
    CG_INT64,
    CG_MESSAGE_SIZE,
    CG_NCHW,
    CG_NHWC,
    CG_UINT8,
)

ITEMSIZE[:] = [0, 1, 1, 2, 2, 4, 8, 2, 4, 8, 2]
# The codes' names, for messages (index 0 unused).
cdef const char* CODE_NAME[11]
CODE_NAME[:] = [b"", b"CG_UINT8", b"CG_INT8", b"CG_UINT16", b"CG_INT16", b"CG_INT32",
                b"CG_INT64", b"CG_FLOAT16", b"CG_FLOAT32", b"CG_FLOAT64",
                b"CG_BFLOAT16"]


cdef int memory_error(cg_error* err, const char* op, size_t nbytes,
                      const char* what) noexcept nogil:
    snprintf(err.message, CG_MESSAGE_SIZE, "%s: could not allocate %llu bytes of %s",
             op, <unsigned long long>nbytes, what)
    return fail(err, CG_ERR_MEMORY, -1)


cdef void format_shape(char* buf, size_t size, const int64_t* shape) noexcept nogil:
    snprintf(buf, size, "[%lld, %lld, %lld, %lld]", <long long>shape[0],
             <long long>shape[1], <long long>shape[2], <long long>shape[3])


# --------------------------------------------------------------------------
# Checks shared by the ops

cdef bint valid_image_dtype(int code) noexcept nogil:
    return CG_UINT8 <= code <= CG_BFLOAT16


cdef const char* dtype_code_name(int code) noexcept nogil:
    """"CG_FLOAT32" for 8, and so on; "" for a number that is no dtype code."""
    if CG_UINT8 <= code <= CG_BFLOAT16:
        return CODE_NAME[code]
    return b""


cdef int bad_dtype(cg_error* err, const char* argument, const char* allowed,
                   int code) noexcept nogil:
    """A dtype code `argument` does not take (only C callers can pass one).

    Worded with the codes' names, where the NumPy API (which passes only
    codes it takes) names a NumPy dtype.
    """
    if dtype_code_name(code)[0] != 0:
        snprintf(err.message, CG_MESSAGE_SIZE, "%s must be %s, got %s (%d)",
                 argument, allowed, dtype_code_name(code), code)
    else:
        snprintf(err.message, CG_MESSAGE_SIZE,
                 "%s must be %s, got %d (not a dtype code)", argument, allowed, code)
    return fail(err, CG_ERR_TYPE, -1)


cdef int check_options(int layout, int num_threads, cg_error* err) noexcept nogil:
    """Layout and thread count; returns a status.

    The NumPy API passes only codes it has checked, so these messages are
    the C-level API's own (docs/capi.md lists them).
    """
    if layout != CG_NHWC and layout != CG_NCHW:
        snprintf(err.message, CG_MESSAGE_SIZE,
                 "layout must be CG_NHWC (0) or CG_NCHW (1), got %d", layout)
        return fail(err, CG_ERR_VALUE, -1)
    if num_threads < 0 or num_threads > MAX_THREADS:
        # The NumPy API's "num_threads must be from 1 to 1024, got N", with
        # the C-level API's 0 (the NumPy API's None) added.
        snprintf(err.message, CG_MESSAGE_SIZE,
                 "num_threads must be 0 (the default) or from 1 to %d, got %d",
                 <int>MAX_THREADS, num_threads)
        return fail(err, CG_ERR_VALUE, -1)
    return CG_OK


cdef int check_size(const int64_t* shape, int64_t itemsize, const char* name,
                    cg_error* err) noexcept nogil:
    """The array of `shape` must be indexable: elements and bytes fit int64."""
    cdef int64_t span = itemsize
    cdef int i
    cdef char dims[128]
    for i in range(4):
        if shape[i] < 0:
            format_shape(dims, sizeof(dims), shape)
            snprintf(err.message, CG_MESSAGE_SIZE,
                     "%s has a negative dimension: shape %s", name, dims)
            return fail(err, CG_ERR_VALUE, -1)
    for i in range(4):
        if shape[i] == 0:
            continue
        if span > INT64_MAX // shape[i]:
            format_shape(dims, sizeof(dims), shape)
            snprintf(err.message, CG_MESSAGE_SIZE,
                     "%s of shape %s is too large: more bytes than this "
                     "platform can index", name, dims)
            return fail(err, CG_ERR_VALUE, -1)
        span *= shape[i]
    return CG_OK


cdef int check_image(const int64_t* image_shape, int image_dtype, int layout,
                     cg_error* err) noexcept nogil:
    cdef char dims[128]
    cdef int64_t s[4]
    nhwc(image_shape, layout, s)
    if not valid_image_dtype(image_dtype):
        return bad_dtype(err, "image_dtype", "CG_UINT8, CG_INT8, CG_UINT16, "
                         "CG_INT16, CG_INT32, CG_INT64, CG_FLOAT16, CG_FLOAT32, "
                         "CG_FLOAT64 or CG_BFLOAT16", image_dtype)
    if check_size(image_shape, ITEMSIZE[image_dtype], "image", err) != CG_OK:
        return err.status
    if s[1] == 0 or s[2] == 0:
        format_shape(dims, sizeof(dims), image_shape)
        snprintf(err.message, CG_MESSAGE_SIZE,
                 "image dimensions must be positive, got shape %s", dims)
        return fail(err, CG_ERR_VALUE, -1)
    return CG_OK


cdef int check_shape_pointer(const int64_t* shape, const char* name,
                             cg_error* err) noexcept nogil:
    if shape == NULL:
        snprintf(err.message, CG_MESSAGE_SIZE, "%s is NULL: 4 values are needed",
                 name)
        return fail(err, CG_ERR_VALUE, -1)
    return CG_OK


cdef int check_boxes_args(int box_ind_dtype, int64_t num_boxes, int64_t itemsize,
                          cg_error* err) noexcept nogil:
    """box_ind's dtype code; boxes [num_boxes, 4] of `itemsize` bytes each
    indexable (num_boxes >= 0)."""
    if box_ind_dtype != CG_INT32 and box_ind_dtype != CG_INT64:
        return bad_dtype(err, "box_ind_dtype", "CG_INT32 or CG_INT64",
                         box_ind_dtype)
    if num_boxes > INT64_MAX // (4 * itemsize):
        snprintf(err.message, CG_MESSAGE_SIZE,
                 "boxes of shape [%lld, 4] is too large: more bytes than this "
                 "platform can index", <long long>num_boxes)
        return fail(err, CG_ERR_VALUE, -1)
    return CG_OK


cdef int check_arrays(const Array* arrays, int count, cg_error* err) noexcept nogil:
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
            return fail(err, CG_ERR_VALUE, -1)
    if out.nbytes == 0:
        return CG_OK
    for i in range(count - 1):
        a = <uintptr_t>arrays[i].data
        if arrays[i].nbytes > 0 and a < hi and lo < a + <uintptr_t>arrays[i].nbytes:
            snprintf(err.message, CG_MESSAGE_SIZE,
                     "out must not share memory with an input")
            return fail(err, CG_ERR_VALUE, -1)
    return CG_OK


cdef int check_index(const void* box_ind, int box_ind_dtype, int64_t num_boxes,
                     int64_t batch, cg_error* err) noexcept nogil:
    """Every box_ind value within [0, batch) (after `check_arrays`:
    box_ind_dtype is a code it takes)."""
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
            return fail(err, CG_ERR_INDEX, b)
    return CG_OK


cdef int run(Call* call, cg_error* err) noexcept nogil:
    """One op's call once its metadata has passed; returns the status.

    1. `check_boxes_args`: box_ind's dtype code, and boxes few enough to
       index (first: no size may be multiplied out before this bound);
    2. the op's `prepare`: its arrays and its kernel's problem;
    3. `check_arrays`: no NULL where there are bytes, the output apart;
    4. the data: box_ind within [0, batch) (`check_index`), finite boxes
       (`check_finite`), then the op's own `check_data`, if any;
    5. an empty output: the call is valid, CG_OK with nothing computed;
    6. box_ind as int64 (`index64`), the op's `kernel`, the copy freed;
    7. a kernel that could not allocate its scratch: CG_ERR_MEMORY
       (`memory_error`, naming the op and its scratch).
    """
    cdef Array arrays[MAX_ARRAYS]
    cdef const int64_t* index
    cdef int64_t* owned
    cdef int64_t bad
    cdef size_t failed = 0
    cdef int count, status
    if check_boxes_args(call.box_ind_dtype, call.num_boxes,
                        ITEMSIZE[call.boxes_dtype], err) != CG_OK:
        return err.status
    count = call.prepare(call, arrays)
    if check_arrays(arrays, count, err) != CG_OK:
        return err.status
    if check_index(call.box_ind, call.box_ind_dtype, call.num_boxes, call.batch,
                   err) != CG_OK:
        return err.status
    if call.boxes_dtype == CG_FLOAT64:
        status = check_finite(<const double*>call.boxes, call.num_boxes, err)
    else:
        status = check_finite(<const float*>call.boxes, call.num_boxes, err)
    if status != CG_OK:
        return status
    if call.check_data != NULL:
        bad = call.check_data(call, err.message)
        if bad >= 0:
            return fail(err, CG_ERR_VALUE, bad)
    if call.empty:
        return ok(err)
    if index64(call.box_ind, call.box_ind_dtype, call.num_boxes, &index, &owned,
               err) != CG_OK:
        return err.status
    status = call.kernel(call, index, resolve_threads(call.num_threads), &failed)
    free(owned)
    if status != 0:
        return memory_error(err, call.op, failed, call.scratch)
    return ok(err)


cdef int index64(const void* box_ind, int box_ind_dtype, int64_t num_boxes,
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
        return fail(err, CG_ERR_MEMORY, -1)
    for b in range(num_boxes):
        owned[0][b] = (<const int32_t*>box_ind)[b]
    index[0] = owned[0]
    return CG_OK


cdef void layout_hint(char* buf, size_t size, const int64_t* a, const int64_t* b,
                      const char* a_name, const char* b_name,
                      int layout) noexcept nogil:
    """`buf`: a sentence for a depth mismatch between shapes `a` and `b`
    (given in `layout`'s order, named `a_name` and `b_name`), or "" when
    no reading explains it.  Two common mistakes: both arrays in the other
    layout (NHWC arrays passed as NCHW, or the reverse), and one array in
    each, when one read in the other layout fits the other as given."""
    cdef int other = CG_NHWC if layout == CG_NCHW else CG_NCHW
    cdef const char* given = b"NCHW" if layout == CG_NCHW else b"NHWC"
    cdef const char* wanted = b"NCHW" if other == CG_NCHW else b"NHWC"
    cdef int64_t a_given[4]
    cdef int64_t b_given[4]
    cdef int64_t a_other[4]
    cdef int64_t b_other[4]
    cdef bint a_fits_other
    buf[0] = 0
    nhwc(a, layout, a_given)
    nhwc(b, layout, b_given)
    nhwc(a, other, a_other)
    nhwc(b, other, b_other)
    if a_other[3] == b_other[3]:
        snprintf(buf, size, " (read as data_format '%s'; both fit '%s': pass "
                 "data_format='%s', layout CG_%s in C)", given, wanted, wanted,
                 wanted)
    elif a_other[3] == b_given[3] or a_given[3] == b_other[3]:
        a_fits_other = a_other[3] == b_given[3]
        snprintf(buf, size, " (read as data_format '%s'; %s would fit '%s' and "
                 "%s '%s': give both in one layout)", given,
                 a_name if a_fits_other else b_name, wanted,
                 b_name if a_fits_other else a_name, given)
