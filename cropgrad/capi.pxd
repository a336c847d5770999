# cython: language_level=3
#
# cropgrad's C-level API: its ops for compiled code (1.0: crop_and_resize
# and its gradients; 1.1: RoIAlign and its gradients; 1.2: grid sampling
# and its derivatives).
#
#     from cropgrad cimport capi
#
#     cdef capi.cg_error err
#     with nogil:
#         status = capi.cg_crop_and_resize(..., &err)
#     if status != capi.CG_OK:
#         ...  # err.message says what was wrong, as the Python API says it
#
# Contract (documented in docs/capi.md; pinned by tests/test_capi.py: a
# release may add names here, never change one):
#
# - Every function is `noexcept nogil`: call it with or without the GIL,
#   from any thread.  It never raises and never touches Python objects.
# - Arrays are raw pointers to C-contiguous data in the layout given by
#   `layout` (CG_NHWC: [n, height, width, depth]; CG_NCHW:
#   [n, depth, height, width]); shapes are 4 int64 values in that same order.
# - `boxes` is float32 [num_boxes, 4] ([y1, x1, y2, x2]); `box_ind` is int32
#   or int64 [num_boxes] (its dtype code says which).
# - The outputs are the caller's: every element is written (zeroed first
#   where the op accumulates).  They must not overlap an input.
# - `num_threads`: 0 means the library's default (OpenMP's default count,
#   so OMP_NUM_THREADS and threadpoolctl apply; 1 in a child forked after
#   threads ran); otherwise 1 to 1024.  The bits never depend on it.
# - `flush_denormals`: non-zero computes with flush-to-zero and
#   denormals-are-zero, TensorFlow's arithmetic.
# - The return value is the status (also written to `error.status`): CG_OK,
#   or a CG_ERR_* code naming the Python exception the NumPy API raises for
#   the same call.  On an error nothing has been written to the output
#   (every check runs before any work), `error.position` is the offending
#   box (or -1) and `error.message` is a NUL-terminated sentence naming the
#   argument.  `error` may be NULL: the status alone is returned.
# - Versioned (CG_API_VERSION_MAJOR/_MINOR, cg_api_version()): the minor
#   version grows when names are added, the major one if one ever changed.
#   C and C++ use cropgrad/include/cropgrad/capi.h (cropgrad.get_include()),
#   which declares the same names: both files are generated from cropgrad's
#   op model by cropgrad/_ops/generate.py, this one from
#   cropgrad/capi.pxd.tp: edit those, not this file.

from libc.stdint cimport int64_t


# The version of this API (see docs/capi.md: a consumer built against
# major.minor runs with any runtime of the same major and minor >= its own).
cdef enum:
    CG_API_VERSION_MAJOR = 1
    CG_API_VERSION_MINOR = 2


# Status codes: the Python exception each one becomes.
cdef enum:
    CG_OK = 0
    CG_ERR_VALUE = 1         # ValueError: bad shape or value, non-finite box
    CG_ERR_INDEX = 2         # IndexError: a box_ind value outside [0, batch)
    CG_ERR_TYPE = 3          # TypeError: a dtype code the op does not take
    CG_ERR_MEMORY = 4        # MemoryError: scratch could not be allocated
    CG_ERR_UNSUPPORTED = 5   # NotImplementedError: reserved (never returned yet)

# Data types.  Images: any of them; CG_FLOAT16 arrives as IEEE half bits,
# CG_BFLOAT16 as bfloat16 bits (uint16 storage).  Image-gradient outputs:
# CG_FLOAT16, CG_BFLOAT16, CG_FLOAT32, CG_FLOAT64.  box_ind: CG_INT32 or
# CG_INT64.
cdef enum:
    CG_UINT8 = 1
    CG_INT8 = 2
    CG_UINT16 = 3
    CG_INT16 = 4
    CG_INT32 = 5
    CG_INT64 = 6
    CG_FLOAT16 = 7
    CG_FLOAT32 = 8
    CG_FLOAT64 = 9
    CG_BFLOAT16 = 10

# Memory layouts of images, image gradients, crops and grads.
cdef enum:
    CG_NHWC = 0   # TensorFlow's: [n, height, width, depth]
    CG_NCHW = 1   # PyTorch's:    [n, depth, height, width]

# Sampling methods (CG_BICUBIC: grid sampling's alone, since 1.2).
cdef enum:
    CG_BILINEAR = 0
    CG_NEAREST = 1
    CG_BICUBIC = 2

# What grid sampling reads outside the image (1.2).
cdef enum:
    CG_ZEROS = 0
    CG_BORDER = 1
    CG_REFLECTION = 2

# Size of cg_error.message, NUL included.
cdef enum:
    CG_MESSAGE_SIZE = 512

ctypedef struct cg_error:
    int status                          # as returned
    int64_t position                    # offending box number, or -1
    char message[CG_MESSAGE_SIZE]       # NUL-terminated; "" on success


cdef int cg_crop_and_resize(
    const void* image,           # IN  [batch, H, W, depth] or NCHW
    int image_dtype,             # CG_UINT8 ... CG_BFLOAT16
    const int64_t* image_shape,  # IN  4 values, in the layout's order
    const float* boxes,          # IN  [num_boxes, 4] y1, x1, y2, x2
    const void* box_ind,         # IN  [num_boxes]
    int box_ind_dtype,           # CG_INT32 or CG_INT64
    int64_t num_boxes,
    int64_t crop_height,
    int64_t crop_width,
    int method,                  # CG_BILINEAR or CG_NEAREST
    float extrapolation_value,
    int layout,                  # CG_NHWC or CG_NCHW
    float* crops,                # OUT [num_boxes, crop_h, crop_w, depth] or NCHW
    int num_threads,             # 0: the default; 1 to 1024
    int flush_denormals,         # non-zero: flush-to-zero arithmetic
    cg_error* error,             # may be NULL: the status alone
) noexcept nogil

cdef int cg_crop_and_resize_grad_image(
    const float* grads,          # IN  [num_boxes, crop_h, crop_w, depth] or NCHW
    const int64_t* grads_shape,  # IN  4 values, in the layout's order
    const float* boxes,          # IN  [num_boxes, 4] y1, x1, y2, x2
    const void* box_ind,         # IN  [num_boxes]
    int box_ind_dtype,           # CG_INT32 or CG_INT64
    const int64_t* image_size,   # IN  4 values: the output's shape, layout order
    void* output,                # OUT image_size, of output_dtype
    int output_dtype,            # CG_FLOAT16, CG_BFLOAT16, CG_FLOAT32, CG_FLOAT64
    int method,                  # CG_BILINEAR or CG_NEAREST
    int layout,                  # CG_NHWC or CG_NCHW
    int num_threads,             # 0: the default; 1 to 1024
    int flush_denormals,         # non-zero: flush-to-zero arithmetic
    cg_error* error,             # may be NULL: the status alone
) noexcept nogil

cdef int cg_crop_and_resize_grad_boxes(
    const float* grads,          # IN  [num_boxes, crop_h, crop_w, depth] or NCHW
    const int64_t* grads_shape,  # IN  4 values, in the layout's order
    const void* image,           # IN  [batch, H, W, depth] or NCHW
    int image_dtype,             # CG_UINT8 ... CG_BFLOAT16
    const int64_t* image_shape,  # IN  4 values, in the layout's order
    const float* boxes,          # IN  [num_boxes, 4] y1, x1, y2, x2
    const void* box_ind,         # IN  [num_boxes]
    int box_ind_dtype,           # CG_INT32 or CG_INT64
    float* output,               # OUT [num_boxes, 4]
    int method,                  # CG_BILINEAR only
    int layout,                  # CG_NHWC or CG_NCHW
    int num_threads,             # 0: the default; 1 to 1024
    int flush_denormals,         # non-zero: flush-to-zero arithmetic
    cg_error* error,             # may be NULL: the status alone
) noexcept nogil

# The derivative of cg_crop_and_resize (bilinear) along a tangent of the
# boxes: per crop element, the image's slopes at the sample times how fast
# its coordinates move (the boxes gradient's factors, so that
# cg_crop_and_resize_grad_boxes is this map's transpose); 0 where the sample
# is outside the image.  Arguments as cg_crop_and_resize's, with
# boxes_tangent after boxes, no extrapolation value and CG_BILINEAR only.
cdef int cg_crop_and_resize_jvp_boxes(
    const void* image,           # IN  [batch, H, W, depth] or NCHW
    int image_dtype,             # CG_UINT8 ... CG_BFLOAT16
    const int64_t* image_shape,  # IN  4 values, in the layout's order
    const float* boxes,          # IN  [num_boxes, 4] y1, x1, y2, x2
    const float* boxes_tangent,  # IN  [num_boxes, 4], any values
    const void* box_ind,         # IN  [num_boxes]
    int box_ind_dtype,           # CG_INT32 or CG_INT64
    int64_t num_boxes,
    int64_t crop_height,
    int64_t crop_width,
    int method,                  # CG_BILINEAR only
    int layout,                  # CG_NHWC or CG_NCHW
    float* output,               # OUT [num_boxes, crop_h, crop_w, depth] or NCHW
    int num_threads,             # 0: the default; 1 to 1024
    int flush_denormals,         # non-zero: flush-to-zero arithmetic
    cg_error* error,             # may be NULL: the status alone
) noexcept nogil

# 1.1: RoIAlign (torchvision's roi_align, average pooling, and ONNX's
# RoiAlign), its image gradient, and its boxes gradient and JVP.  The
# arithmetic type is double for CG_FLOAT64 data (the image; the gradient for
# the image gradient) and float otherwise: boxes, grads, tangents and the
# boxes gradient have it, their dtype codes (CG_FLOAT32 or CG_FLOAT64)
# saying which.  Boxes are [x1, y1, x2, y2] in the input image's
# coordinates, which spatial_scale maps to the feature map; sampling_ratio
# <= 0 is adaptive (ceil of the bin's size), at most 4096; aligned non-zero
# shifts by half a pixel.  Outputs: CG_FLOAT16, CG_BFLOAT16 (from float
# arithmetic only), CG_FLOAT32 or CG_FLOAT64, rounded once.  A box whose
# adaptive grid would put more than 2**24 samples in a bin is refused
# (CG_ERR_VALUE) before any work.

cdef int cg_roi_align(
    const void* image,           # IN  [batch, C, H, W] (CG_NCHW) or NHWC
    int image_dtype,             # CG_UINT8 ... CG_BFLOAT16
    const int64_t* image_shape,  # IN  4 values, in the layout's order
    const void* boxes,           # IN  [num_boxes, 4] x1, y1, x2, y2
    int boxes_dtype,             # the arithmetic type
    const void* box_ind,         # IN  [num_boxes]
    int box_ind_dtype,           # CG_INT32 or CG_INT64
    int64_t num_boxes,
    int64_t output_height,
    int64_t output_width,
    double spatial_scale,
    int sampling_ratio,          # <= 0: adaptive, at most 4096
    int aligned,                 # non-zero: the half-pixel shift
    int layout,                  # CG_NHWC or CG_NCHW
    void* output,                # OUT [num_boxes, C, out_h, out_w] or NHWC
    int output_dtype,            # CG_FLOAT16, CG_BFLOAT16, CG_FLOAT32, CG_FLOAT64
    int num_threads,             # 0: the default; 1 to 1024
    int flush_denormals,         # non-zero: flush-to-zero arithmetic
    cg_error* error,             # may be NULL: the status alone
) noexcept nogil

cdef int cg_roi_align_grad_image(
    const void* grads,           # IN  [num_boxes, C, out_h, out_w] or NHWC
    int grads_dtype,             # CG_FLOAT32 or CG_FLOAT64: the arithmetic type
    const int64_t* grads_shape,  # IN  4 values, in the layout's order
    const void* boxes,           # IN  [num_boxes, 4], grads_dtype
    int boxes_dtype,             # grads_dtype
    const void* box_ind,         # IN  [num_boxes]
    int box_ind_dtype,           # CG_INT32 or CG_INT64
    const int64_t* image_size,   # IN  4 values: the output's shape, layout order
    double spatial_scale,
    int sampling_ratio,          # <= 0: adaptive, at most 4096
    int aligned,                 # non-zero: the half-pixel shift
    int layout,                  # CG_NHWC or CG_NCHW
    void* output,                # OUT image_size, of output_dtype
    int output_dtype,            # CG_FLOAT16, CG_BFLOAT16, CG_FLOAT32, CG_FLOAT64
    int num_threads,             # 0: the default; 1 to 1024
    int flush_denormals,         # non-zero: flush-to-zero arithmetic
    cg_error* error,             # may be NULL: the status alone
) noexcept nogil

cdef int cg_roi_align_grad_boxes(
    const void* grads,           # IN  [num_boxes, C, out_h, out_w] or NHWC
    int grads_dtype,             # the arithmetic type
    const int64_t* grads_shape,  # IN  4 values, in the layout's order
    const void* image,           # IN  [batch, C, H, W] (CG_NCHW) or NHWC
    int image_dtype,             # CG_UINT8 ... CG_BFLOAT16
    const int64_t* image_shape,  # IN  4 values, in the layout's order
    const void* boxes,           # IN  [num_boxes, 4] x1, y1, x2, y2
    int boxes_dtype,             # the arithmetic type
    const void* box_ind,         # IN  [num_boxes]
    int box_ind_dtype,           # CG_INT32 or CG_INT64
    double spatial_scale,
    int sampling_ratio,          # <= 0: adaptive, at most 4096
    int aligned,                 # non-zero: the half-pixel shift
    int layout,                  # CG_NHWC or CG_NCHW
    void* output,                # OUT [num_boxes, 4], boxes_dtype
    int num_threads,             # 0: the default; 1 to 1024
    int flush_denormals,         # non-zero: flush-to-zero arithmetic
    cg_error* error,             # may be NULL: the status alone
) noexcept nogil

# The derivative of cg_roi_align along a tangent of the boxes, whose
# transpose cg_roi_align_grad_boxes is.
cdef int cg_roi_align_jvp_boxes(
    const void* image,           # IN  [batch, C, H, W] (CG_NCHW) or NHWC
    int image_dtype,             # CG_UINT8 ... CG_BFLOAT16
    const int64_t* image_shape,  # IN  4 values, in the layout's order
    const void* boxes,           # IN  [num_boxes, 4] x1, y1, x2, y2
    const void* boxes_tangent,   # IN  [num_boxes, 4], any values
    int boxes_dtype,             # the arithmetic type, of both
    const void* box_ind,         # IN  [num_boxes]
    int box_ind_dtype,           # CG_INT32 or CG_INT64
    int64_t num_boxes,
    int64_t output_height,
    int64_t output_width,
    double spatial_scale,
    int sampling_ratio,          # <= 0: adaptive, at most 4096
    int aligned,                 # non-zero: the half-pixel shift
    int layout,                  # CG_NHWC or CG_NCHW
    void* output,                # OUT as cg_roi_align's
    int output_dtype,            # CG_FLOAT16, CG_BFLOAT16, CG_FLOAT32, CG_FLOAT64
    int num_threads,             # 0: the default; 1 to 1024
    int flush_denormals,         # non-zero: flush-to-zero arithmetic
    cg_error* error,             # may be NULL: the status alone
) noexcept nogil

# 1.2: grid sampling (PyTorch's grid_sample, 2-D), its image gradient, its
# grid gradient and the grid JVP PyTorch does not have, bit for bit as the
# NumPy API computes them.  Every array is C-contiguous NCHW (layout
# CG_NCHW; CG_NHWC is refused with CG_ERR_UNSUPPORTED) and of the arithmetic
# type dtype names, CG_FLOAT32 or CG_FLOAT64.  The grid holds (x, y) per
# output point, -1 and 1 the image's outer edges, or with align_corners non-
# zero its corner pixels' centres; every grid value must be finite
# (CG_ERR_VALUE before any work, position the point's number, batch-major).
# mode: CG_BILINEAR, CG_NEAREST or CG_BICUBIC; padding_mode: CG_ZEROS,
# CG_BORDER or CG_REFLECTION.  The image (or image_size) must be at least 1
# pixel high and wide.

cdef int cg_grid_sample(
    const void* image,           # IN  [batch, C, H, W]
    const int64_t* image_shape,  # IN  4 values: [batch, C, H, W]
    const void* grid,            # IN  [batch, out_h, out_w, 2]: (x, y)
    const int64_t* grid_shape,   # IN  4 values: [batch, out_h, out_w, 2]
    int dtype,                   # CG_FLOAT32 or CG_FLOAT64: every array's
    int mode,                    # CG_BILINEAR, CG_NEAREST or CG_BICUBIC
    int padding_mode,            # CG_ZEROS, CG_BORDER or CG_REFLECTION
    int align_corners,           # non-zero: -1 and 1 are corner pixels' centres
    int layout,                  # CG_NCHW (CG_NHWC: CG_ERR_UNSUPPORTED)
    void* output,                # OUT [batch, C, out_h, out_w]
    int num_threads,             # 0: the default; 1 to 1024
    int flush_denormals,         # non-zero: flush-to-zero arithmetic
    cg_error* error,             # may be NULL: the status alone
) noexcept nogil

cdef int cg_grid_sample_grad_image(
    const void* grads,           # IN  [batch, C, out_h, out_w]
    const int64_t* grads_shape,  # IN  4 values: [batch, C, out_h, out_w]
    const void* grid,            # IN  [batch, out_h, out_w, 2]: (x, y)
    const int64_t* grid_shape,   # IN  4 values: [batch, out_h, out_w, 2]
    int dtype,                   # CG_FLOAT32 or CG_FLOAT64: every array's
    const int64_t* image_size,   # IN  4 values: the output's shape [batch, C, H, W]
    int mode,                    # CG_BILINEAR, CG_NEAREST or CG_BICUBIC
    int padding_mode,            # CG_ZEROS, CG_BORDER or CG_REFLECTION
    int align_corners,           # non-zero: -1 and 1 are corner pixels' centres
    int layout,                  # CG_NCHW (CG_NHWC: CG_ERR_UNSUPPORTED)
    void* output,                # OUT image_size
    int num_threads,             # 0: the default; 1 to 1024
    int flush_denormals,         # non-zero: flush-to-zero arithmetic
    cg_error* error,             # may be NULL: the status alone
) noexcept nogil

cdef int cg_grid_sample_grad_grid(
    const void* grads,           # IN  [batch, C, out_h, out_w]
    const int64_t* grads_shape,  # IN  4 values: [batch, C, out_h, out_w]
    const void* image,           # IN  [batch, C, H, W]
    const int64_t* image_shape,  # IN  4 values: [batch, C, H, W]
    const void* grid,            # IN  [batch, out_h, out_w, 2]: (x, y)
    const int64_t* grid_shape,   # IN  4 values: [batch, out_h, out_w, 2]
    int dtype,                   # CG_FLOAT32 or CG_FLOAT64: every array's
    int mode,                    # CG_BILINEAR, CG_NEAREST or CG_BICUBIC
    int padding_mode,            # CG_ZEROS, CG_BORDER or CG_REFLECTION
    int align_corners,           # non-zero: -1 and 1 are corner pixels' centres
    int layout,                  # CG_NCHW (CG_NHWC: CG_ERR_UNSUPPORTED)
    void* output,                # OUT grid_shape: d/d(x, y) per point
    int num_threads,             # 0: the default; 1 to 1024
    int flush_denormals,         # non-zero: flush-to-zero arithmetic
    cg_error* error,             # may be NULL: the status alone
) noexcept nogil

# The derivative of cg_grid_sample along a tangent of the grid, whose
# transpose cg_grid_sample_grad_grid is.
cdef int cg_grid_sample_jvp_grid(
    const void* image,           # IN  [batch, C, H, W]
    const int64_t* image_shape,  # IN  4 values: [batch, C, H, W]
    const void* grid,            # IN  [batch, out_h, out_w, 2]: (x, y)
    const void* grid_tangent,    # IN  grid_shape, any values
    const int64_t* grid_shape,   # IN  4 values: [batch, out_h, out_w, 2]
    int dtype,                   # CG_FLOAT32 or CG_FLOAT64: every array's
    int mode,                    # CG_BILINEAR, CG_NEAREST or CG_BICUBIC
    int padding_mode,            # CG_ZEROS, CG_BORDER or CG_REFLECTION
    int align_corners,           # non-zero: -1 and 1 are corner pixels' centres
    int layout,                  # CG_NCHW (CG_NHWC: CG_ERR_UNSUPPORTED)
    void* output,                # OUT [batch, C, out_h, out_w]
    int num_threads,             # 0: the default; 1 to 1024
    int flush_denormals,         # non-zero: flush-to-zero arithmetic
    cg_error* error,             # may be NULL: the status alone
) noexcept nogil

# The thread count a call with num_threads == 0 uses now.
cdef int cg_default_threads() noexcept nogil

# The runtime's version: (CG_API_VERSION_MAJOR << 16) | CG_API_VERSION_MINOR.
cdef int cg_api_version() noexcept nogil
