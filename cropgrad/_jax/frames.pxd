# cython: language_level=3
#
# Decoding XLA's call frames for the handlers (private; handlers.pyx
# cimports it): the metadata query, the frame's checks, buffers, attributes,
# and the way back to XLA, an error carrying cropgrad's message.  Nothing
# here knows an op; each function that can fail records why in the C-level
# API's error record (`capi.cg_error`) and returns -1 or NULL.

from libc.stdint cimport int64_t

from cropgrad cimport capi
from cropgrad._jax.ffi cimport (
    CG_FFI_EXTENSION_METADATA,
    cg_ffi_buffer,
    cg_ffi_call_frame,
    cg_ffi_error,
    cg_ffi_extension,
    cg_ffi_list,
)


cdef struct Attributes:
    # The attributes every handler takes: the layout and the threads; the
    # crop_and_resize family's method (and its forward op's fill); the
    # RoIAlign family's sampling; the grid-sampling family's mode (in
    # `method`), padding and align_corners (in `aligned`).  A field that no
    # attribute of the call fills is 0.
    int method
    int padding_mode
    int layout
    int num_threads
    float extrapolation_value
    double spatial_scale
    int sampling_ratio
    int aligned
    # Under vmap, cropgrad.jax folds the mapped axes into the op's own:
    # their sizes, outermost first (fold_rank of them, 0 when not folded),
    # and the factor by which the batch grew.  Messages name the caller's
    # indices with them.
    int64_t fold_rank
    const int64_t* fold_shape
    int64_t fold_images


# The fields of `Attributes` an attribute fills (cropgrad._ops.FIELDS, in
# capitals): FOLD is the fold, the optional ``fold_shape`` and, with it,
# ``fold_images``.
cdef enum Field:
    METHOD
    PADDING_MODE
    LAYOUT
    NUM_THREADS
    EXTRAPOLATION_VALUE
    SPATIAL_SCALE
    SAMPLING_RATIO
    ALIGNED
    FOLD


cdef struct Attr:
    # An attribute of a family's calls, from the op model (targets.pxi): its
    # XLA name, its XLA type (the array's elements' for the fold), the
    # field it fills, and the op kinds whose calls have it (bit `kind`).
    const char* name
    int dtype
    Field field
    int kinds


cdef struct Decoded:
    # What a handler decoded from its frame: its attributes, and what
    # restates an error about a box, or a grid's point (`grid`: `batch` is
    # then the grid's), in the caller's indices once the C-level API
    # returns.
    Attributes attrs
    bint grid
    const void* boxes
    int boxes_dtype
    const void* box_ind
    int index_dtype
    int64_t num_boxes
    int64_t batch


cdef inline bint is_metadata_query(const cg_ffi_call_frame* frame) noexcept nogil:
    return (frame.extension_start != NULL
            and frame.extension_start.type == CG_FFI_EXTENSION_METADATA)


cdef void answer_metadata(cg_ffi_extension* extension, int major,
                          int minor) noexcept nogil
cdef int refuse(capi.cg_error* e, int status, const char* text) noexcept nogil
cdef int check_frame(const cg_ffi_call_frame* frame, int64_t nargs,
                     int64_t nrets, capi.cg_error* e) noexcept nogil
cdef cg_ffi_buffer* buffer(const cg_ffi_list* items, int64_t i, int64_t rank,
                           const char* name, capi.cg_error* e) noexcept nogil
cdef void* data(const cg_ffi_buffer* b) noexcept nogil
cdef void advise_result(const cg_ffi_call_frame* frame) noexcept nogil
cdef int image_dtype(int xla_dtype) noexcept nogil
cdef int dtype_of(const cg_ffi_buffer* b, const char* name, bint image,
                  capi.cg_error* e) noexcept nogil
cdef int float_dtype_of(const cg_ffi_buffer* b, const char* name,
                        bint arithmetic, capi.cg_error* e) noexcept nogil
cdef int decode_attributes(const cg_ffi_call_frame* frame, const Attr* table,
                           int n, int kind, Attributes* a,
                           capi.cg_error* e) noexcept nogil
cdef int box_rows(const cg_ffi_buffer* b, int64_t num_boxes, const char* name,
                  capi.cg_error* e) noexcept nogil
cdef int boxes_and_index(const cg_ffi_list* args, int64_t first,
                         int64_t num_boxes, int64_t batch, bint wide,
                         Decoded* d, capi.cg_error* e) noexcept nogil
cdef void unfold_message(const Decoded* d, capi.cg_error* e) noexcept nogil
cdef cg_ffi_error* xla_error(const cg_ffi_call_frame* frame, const char* op,
                             const capi.cg_error* e) noexcept nogil
