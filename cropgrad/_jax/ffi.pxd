# cython: language_level=3
#
# The few structs of XLA's FFI C API that cropgrad's handlers touch
# (frames.pyx decodes a call frame with them, handlers.pyx answers XLA).
#
# XLA defines them in `xla/ffi/api/c_api.h` (shipped with jaxlib, under
# `jax.ffi.include_dir()`).  They are declared again here, under names of
# our own, so that building cropgrad needs no JAX: the layout is the
# contract, not the header.  The facts relied on, true of every 0.x version
# of the API (0.1 to 0.3 checked):
#
# - Every struct passed across the API starts with `struct_size`, the
#   offset of its last field plus that field's size (CG_FFI_SIZE below);
#   a later minor version only appends fields, so a struct at least as large
#   as ours has our fields where we expect them.
# - Enumerations are C enums (the size of an int); traits are uint32.
# - A handler is `error* handler(call_frame*)`; NULL means success.  Before
#   registering it, XLA calls it once with a call frame whose
#   `extension_start` is a metadata extension (and whose `api` is NULL): the
#   handler must fill in the API version it was written against and its
#   traits, and do nothing else.
# - An error is made by the runtime's `Error_Create`, the first function in
#   its API table, which copies the message.
#
# Only the leading fields of the API table are declared: the handlers read
# its version and call Error_Create, nothing else.

from libc.stdint cimport int64_t, uint32_t

cdef extern from *:
    """
    #include <stddef.h>
    #include <stdint.h>

    #define CG_FFI_SIZE(type, last) \
        (offsetof(type, last) + sizeof(((type*)0)->last))

    typedef struct cg_ffi_extension {     /* XLA_FFI_Extension_Base */
        size_t struct_size;
        int type;
        struct cg_ffi_extension* next;
    } cg_ffi_extension;

    typedef struct {                      /* XLA_FFI_Api_Version */
        size_t struct_size;
        cg_ffi_extension* extension_start;
        int major_version;
        int minor_version;
    } cg_ffi_version;

    typedef struct cg_ffi_error cg_ffi_error;   /* opaque XLA_FFI_Error */

    typedef struct {                      /* XLA_FFI_Error_Create_Args */
        size_t struct_size;
        cg_ffi_extension* extension_start;
        const char* message;
        int errc;
    } cg_ffi_error_args;

    typedef cg_ffi_error* (*cg_ffi_error_create)(cg_ffi_error_args*);

    typedef struct {                      /* XLA_FFI_Api, leading fields */
        size_t struct_size;
        cg_ffi_extension* extension_start;
        cg_ffi_version api_version;
        const void* internal_api;
        cg_ffi_error_create error_create;
    } cg_ffi_api;

    typedef struct {                      /* XLA_FFI_Buffer */
        size_t struct_size;
        cg_ffi_extension* extension_start;
        int dtype;
        void* data;
        int64_t rank;
        int64_t* dims;
    } cg_ffi_buffer;

    typedef struct {                      /* XLA_FFI_ByteSpan */
        const char* ptr;
        size_t len;
    } cg_ffi_bytes;

    typedef struct {                      /* XLA_FFI_Scalar */
        int dtype;
        void* value;
    } cg_ffi_scalar;

    typedef struct {                      /* XLA_FFI_Array */
        int dtype;
        size_t size;
        void* data;
    } cg_ffi_array;

    typedef struct {                      /* XLA_FFI_Args and XLA_FFI_Rets */
        size_t struct_size;
        cg_ffi_extension* extension_start;
        int64_t size;
        int* types;
        void** items;
    } cg_ffi_list;

    typedef struct {                      /* XLA_FFI_Attrs */
        size_t struct_size;
        cg_ffi_extension* extension_start;
        int64_t size;
        int* types;
        cg_ffi_bytes** names;
        void** attrs;
    } cg_ffi_attrs;

    typedef struct {                      /* XLA_FFI_CallFrame */
        size_t struct_size;
        cg_ffi_extension* extension_start;
        const cg_ffi_api* api;
        void* ctx;
        int stage;
        cg_ffi_list args;
        cg_ffi_list rets;
        cg_ffi_attrs attrs;
    } cg_ffi_call_frame;

    typedef struct {                      /* XLA_FFI_Metadata */
        size_t struct_size;
        cg_ffi_version api_version;
        uint32_t traits;
    } cg_ffi_metadata;

    typedef struct {                      /* XLA_FFI_Metadata_Extension */
        cg_ffi_extension extension_base;
        cg_ffi_metadata* metadata;
    } cg_ffi_metadata_extension;

    /* Macros, not constants: a module that includes this and leaves one
       unused draws no warning. */
    #define CG_FFI_VERSION_SIZE CG_FFI_SIZE(cg_ffi_version, minor_version)
    #define CG_FFI_ERROR_ARGS_SIZE CG_FFI_SIZE(cg_ffi_error_args, errc)
    #define CG_FFI_BUFFER_SIZE CG_FFI_SIZE(cg_ffi_buffer, dims)
    #define CG_FFI_CALL_FRAME_SIZE CG_FFI_SIZE(cg_ffi_call_frame, attrs)
    #define CG_FFI_METADATA_SIZE CG_FFI_SIZE(cg_ffi_metadata, traits)
    #define CG_FFI_METADATA_EXTENSION_SIZE \
        CG_FFI_SIZE(cg_ffi_metadata_extension, metadata)
    """
    ctypedef struct cg_ffi_extension:
        size_t struct_size
        int type
        cg_ffi_extension* next

    ctypedef struct cg_ffi_version:
        size_t struct_size
        cg_ffi_extension* extension_start
        int major_version
        int minor_version

    ctypedef struct cg_ffi_error:
        pass

    ctypedef struct cg_ffi_error_args:
        size_t struct_size
        cg_ffi_extension* extension_start
        const char* message
        int errc

    ctypedef cg_ffi_error* (*cg_ffi_error_create)(
        cg_ffi_error_args*) noexcept nogil

    ctypedef struct cg_ffi_api:
        size_t struct_size
        cg_ffi_extension* extension_start
        cg_ffi_version api_version
        const void* internal_api
        cg_ffi_error_create error_create

    ctypedef struct cg_ffi_buffer:
        size_t struct_size
        cg_ffi_extension* extension_start
        int dtype
        void* data
        int64_t rank
        int64_t* dims

    ctypedef struct cg_ffi_bytes:
        const char* ptr
        size_t len

    ctypedef struct cg_ffi_scalar:
        int dtype
        void* value

    ctypedef struct cg_ffi_array:
        int dtype
        size_t size
        void* data

    ctypedef struct cg_ffi_list:
        size_t struct_size
        cg_ffi_extension* extension_start
        int64_t size
        int* types
        void** items

    ctypedef struct cg_ffi_attrs:
        size_t struct_size
        cg_ffi_extension* extension_start
        int64_t size
        int* types
        cg_ffi_bytes** names
        void** attrs

    ctypedef struct cg_ffi_call_frame:
        size_t struct_size
        cg_ffi_extension* extension_start
        const cg_ffi_api* api
        void* ctx
        int stage
        cg_ffi_list args
        cg_ffi_list rets
        cg_ffi_attrs attrs

    ctypedef struct cg_ffi_metadata:
        size_t struct_size
        cg_ffi_version api_version
        uint32_t traits

    ctypedef struct cg_ffi_metadata_extension:
        cg_ffi_extension extension_base
        cg_ffi_metadata* metadata

    const size_t CG_FFI_VERSION_SIZE
    const size_t CG_FFI_ERROR_ARGS_SIZE
    const size_t CG_FFI_BUFFER_SIZE
    const size_t CG_FFI_CALL_FRAME_SIZE
    const size_t CG_FFI_METADATA_SIZE
    const size_t CG_FFI_METADATA_EXTENSION_SIZE


# Codes of the API (values fixed by XLA).
cdef enum:
    CG_FFI_EXTENSION_METADATA = 1   # XLA_FFI_Extension_Metadata
    CG_FFI_STAGE_EXECUTE = 3        # XLA_FFI_ExecutionStage_EXECUTE
    CG_FFI_BUFFER = 1               # XLA_FFI_ArgType_BUFFER, XLA_FFI_RetType_BUFFER
    CG_FFI_ATTR_ARRAY = 1           # XLA_FFI_AttrType_ARRAY
    CG_FFI_ATTR_SCALAR = 3          # XLA_FFI_AttrType_SCALAR

# XLA_FFI_DataType: xla::PrimitiveType's numbers.
cdef enum:
    CG_FFI_S8 = 2
    CG_FFI_S16 = 3
    CG_FFI_S32 = 4
    CG_FFI_S64 = 5
    CG_FFI_U8 = 6
    CG_FFI_U16 = 7
    CG_FFI_F16 = 10
    CG_FFI_F32 = 11
    CG_FFI_F64 = 12
    CG_FFI_BF16 = 16

# XLA_FFI_Error_Code: absl's status codes.
cdef enum:
    CG_FFI_INVALID_ARGUMENT = 3
    CG_FFI_RESOURCE_EXHAUSTED = 8
    CG_FFI_FAILED_PRECONDITION = 9
    CG_FFI_OUT_OF_RANGE = 11
    CG_FFI_UNIMPLEMENTED = 12
    CG_FFI_INTERNAL = 13
