# cython: language_level=3
#
# The gate: the one definition of a valid call of the C-level API (private;
# cropgrad.capi, cropgrad._core and the XLA handlers cimport it).  Each op
# family's module here (crop_and_resize, roi_align, grid_sample) holds its
# ops' metadata checks and calls; this one the record, the checks they
# share and the sequence every op's call goes through (`run`).  Two kinds
# of check, every one filling the caller's error record:
#
# - the metadata checks of each op (shapes, dtype codes and options, no
#   data read).  The C-level API runs them first; cropgrad._core runs them
#   alone, on Python ints, before the Python layer allocates an output, so
#   that the NumPy API, the JAX and PyTorch adapters and C callers refuse
#   the same calls with the same words.
# - the checks that need the arrays (`check_arrays`: NULL and overlapping
#   pointers; `check_index`, `check_finite`: box indices in range, finite
#   boxes), which `run` makes, in the same order for every op, once the
#   op's metadata has passed, before its kernel starts.
#
# Shapes are 4 int64 values in the caller's layout.  Each check returns the
# status (CG_OK or a CG_ERR_* code) and, on an error, has written the
# message; the record's `position` is the offending box or -1.

from libc.math cimport isfinite
from libc.stdint cimport int64_t
from libc.stdio cimport snprintf

from cropgrad.capi cimport (
    CG_ERR_VALUE,
    CG_MESSAGE_SIZE,
    CG_NCHW,
    CG_OK,
    cg_error,
)

# The largest thread count a call may ask for.
cdef enum:
    MAX_THREADS = 1024

# Bytes per element of each dtype code (index 0 unused).
cdef int64_t ITEMSIZE[11]


# The error record.

cdef inline int fail(cg_error* err, int status, int64_t position) noexcept nogil:
    """Record `status` (the message is already in ``err.message``)."""
    err.status = status
    err.position = position
    return status


cdef inline int ok(cg_error* err) noexcept nogil:
    err.status = CG_OK
    err.position = -1
    err.message[0] = 0
    return CG_OK


cdef inline int64_t depth(const int64_t* shape, int layout) noexcept nogil:
    """The depth (channels) of `shape`, given in `layout`'s order."""
    return shape[1] if layout == CG_NCHW else shape[3]


cdef inline bint holds_nothing(const int64_t* shape) noexcept nogil:
    """Whether a 4-D array of `shape` has no element (an image gradient's
    output of that image size: a valid call with nothing to compute)."""
    return shape[0] == 0 or shape[1] == 0 or shape[2] == 0 or shape[3] == 0


cdef inline void nhwc(const int64_t* shape, int layout, int64_t* dims) noexcept nogil:
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


cdef void format_shape(char* buf, size_t size, const int64_t* shape) noexcept nogil
cdef void layout_hint(char* buf, size_t size, const int64_t* a, const int64_t* b,
                      const char* a_name, const char* b_name,
                      int layout) noexcept nogil
cdef int memory_error(cg_error* err, const char* op, size_t nbytes,
                      const char* what) noexcept nogil


# One array argument of a call, for `check_arrays`.

ctypedef struct Array:
    # One array argument of a call: where it is, how many bytes its shape
    # holds (the shapes already checked, so the count fits int64), its name.
    const void* data
    int64_t nbytes
    const char* name


cdef inline int64_t nbytes(const int64_t* shape, int64_t itemsize) noexcept nogil:
    """Bytes of a checked 4-D shape (its non-zero dimensions fit int64)."""
    return itemsize * shape[0] * shape[1] * shape[2] * shape[3]


cdef inline void array(Array* a, const void* data, int64_t nbytes,
                       const char* name) noexcept nogil:
    a.data = data
    a.nbytes = nbytes
    a.name = name


# Checks every family shares.

cdef int bad_dtype(cg_error* err, const char* argument, const char* allowed,
                   int code) noexcept nogil
cdef int check_options(int layout, int num_threads, cg_error* err) noexcept nogil
cdef int check_size(const int64_t* shape, int64_t itemsize, const char* name,
                    cg_error* err) noexcept nogil
cdef int check_image(const int64_t* image_shape, int image_dtype, int layout,
                     cg_error* err) noexcept nogil
cdef int check_shape_pointer(const int64_t* shape, const char* name,
                             cg_error* err) noexcept nogil
cdef int check_boxes_args(int box_ind_dtype, int64_t num_boxes, int64_t itemsize,
                          cg_error* err) noexcept nogil
cdef int check_arrays(const Array* arrays, int count, cg_error* err) noexcept nogil
cdef int check_index(const void* box_ind, int box_ind_dtype, int64_t num_boxes,
                     int64_t batch, cg_error* err) noexcept nogil
cdef int index64(const void* box_ind, int box_ind_dtype, int64_t num_boxes,
                 const int64_t** index, int64_t** owned,
                 cg_error* err) noexcept nogil


ctypedef fused box_t:
    float
    double


cdef inline int check_finite(const box_t* boxes, int64_t num_boxes,
                             cg_error* err) noexcept nogil:
    """Every box coordinate finite."""
    cdef int64_t b
    for b in range(num_boxes):
        if not (isfinite(boxes[4 * b]) and isfinite(boxes[4 * b + 1])
                and isfinite(boxes[4 * b + 2]) and isfinite(boxes[4 * b + 3])):
            if box_t is float:
                snprintf(err.message, CG_MESSAGE_SIZE,
                         "boxes must be finite: boxes[%lld] = [%.9g, %.9g, %.9g, "
                         "%.9g] has a NaN or infinite coordinate", <long long>b,
                         <double>boxes[4 * b], <double>boxes[4 * b + 1],
                         <double>boxes[4 * b + 2], <double>boxes[4 * b + 3])
            else:
                snprintf(err.message, CG_MESSAGE_SIZE,
                         "boxes must be finite: boxes[%lld] = [%.17g, %.17g, "
                         "%.17g, %.17g] has a NaN or infinite coordinate",
                         <long long>b, boxes[4 * b], boxes[4 * b + 1],
                         boxes[4 * b + 2], boxes[4 * b + 3])
            return fail(err, CG_ERR_VALUE, b)
    return CG_OK


# One op's call, once its metadata has passed: `run` goes through the
# sequence every op shares (its docstring lists the steps).  The op fills a
# Call with what every op shares and its own parts: its arguments (a struct
# of its family's module), its kernel's problem (Geometry, RoiProblem) and
# the hooks below, which read both.

cdef enum:
    # The most arrays an op takes, its output included.
    MAX_ARRAYS = 5

cdef struct Call

# The op's arrays for `check_arrays` (the output last) and its kernel's
# problem (at ``call.problem``); returns how many arrays.  It runs after
# `check_boxes_args`, which bounds the sizes it multiplies.
ctypedef int (*prepare_fn)(Call* call, Array* arrays) noexcept nogil
# The op's own checks of the data, after the ones every op makes: the first
# box that fails them, its message written in `message` (CG_MESSAGE_SIZE
# bytes; the status is CG_ERR_VALUE), or -1.  No type declared here may
# name cg_error: cropgrad.capi cimports this module, so that its C
# declares these types before cg_error.
ctypedef int64_t (*check_fn)(const Call* call, char* message) noexcept nogil
# The kernel, on the box indices as int64 and `threads` threads; returns 0,
# or not 0 with the bytes of scratch it could not allocate in `failed`.
ctypedef int (*kernel_fn)(const Call* call, const int64_t* index, int threads,
                          size_t* failed) noexcept nogil

cdef struct Call:
    # For messages: the op's name and what its kernel allocates.
    const char* op
    const char* scratch
    # The boxes [num_boxes, 4] (CG_FLOAT32 or CG_FLOAT64) and their indices
    # into an image batch of `batch`.
    const void* boxes
    int boxes_dtype
    const void* box_ind
    int box_ind_dtype
    int64_t num_boxes
    int64_t batch
    # The output is empty: the call, once checked, has nothing to compute.
    bint empty
    # The caller's thread count (0: the default) and flush-to-zero request.
    int num_threads
    bint flush
    # The op's own parts.
    void* args
    void* problem
    prepare_fn prepare
    check_fn check_data  # NULL when the op has none
    kernel_fn kernel


cdef int run(Call* call, cg_error* err) noexcept nogil


# The arrays every op has, for `prepare` (each op places them in its order).

cdef inline void boxes_array(Array* a, const Call* call) noexcept nogil:
    array(a, call.boxes, 4 * ITEMSIZE[call.boxes_dtype] * call.num_boxes, "boxes")


cdef inline void index_array(Array* a, const Call* call) noexcept nogil:
    array(a, call.box_ind, ITEMSIZE[call.box_ind_dtype] * call.num_boxes,
          "box_ind")
