/* cropgrad's C-level API for C and C++: its ops on raw pointers.
 *
 * The whole contract is in docs/capi.md; this header declares it.  An
 * extension module needs nothing else (no Cython, no OpenMP flags):
 *
 *     #include <Python.h>
 *     #include <cropgrad/capi.h>   // -I "$(python -c 'import cropgrad; print(cropgrad.get_include())')"
 *
 *     PyMODINIT_FUNC PyInit_mymodule(void) {
 *         if (cropgrad_import() < 0) return NULL;   // sets ImportError
 *         ...
 *     }
 *
 *     cg_error err;
 *     int status = cg_crop_and_resize(..., &err);   // with or without the GIL
 *
 * cropgrad_import() takes the table of function pointers from the capsule
 * cropgrad.capi._C_API (named CROPGRAD_CAPSULE_NAME) and checks its version.
 * Like NumPy's import_array(), it fills a table private to each translation
 * unit: call it once in every .c/.cpp file that calls the functions (it is
 * cheap after the first), with the GIL held.
 *
 * Define CROPGRAD_NO_PYTHON before including this header for the codes, the
 * error record and the function pointer types alone (no Python.h, no
 * cropgrad_import: e.g. for code handed the pointers by other means).
 *
 * Version policy: CG_API_VERSION_MINOR grows when names are added (functions
 * appended to the table, new codes); CG_API_VERSION_MAJOR would grow only if
 * one changed.  cropgrad_import refuses a runtime whose major differs from
 * this header's or whose minor is lower.
 */
/* Generated from cropgrad's op model by cropgrad/_ops/generate.py, from
 * cropgrad/include/cropgrad/capi.h.tp: edit those, not this file. */
#ifndef CROPGRAD_CAPI_H
#define CROPGRAD_CAPI_H

#if !defined(CROPGRAD_NO_PYTHON)
#include <Python.h>
#endif
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- version */

#define CG_API_VERSION_MAJOR 1
#define CG_API_VERSION_MINOR 2
/* What cg_api_version() returns: (major << 16) | minor. */
#define CG_API_VERSION ((CG_API_VERSION_MAJOR << 16) | CG_API_VERSION_MINOR)

/* The capsule holding the table: the attribute _C_API of cropgrad.capi. */
#define CROPGRAD_CAPSULE_NAME "cropgrad.capi._C_API"

/* ------------------------------------------------------------------ codes */

/* Status codes: the Python exception the NumPy API raises for the same call. */
enum {
    CG_OK = 0,
    CG_ERR_VALUE = 1,        /* ValueError */
    CG_ERR_INDEX = 2,        /* IndexError: a box_ind value outside [0, batch) */
    CG_ERR_TYPE = 3,         /* TypeError: a dtype code the argument does not take */
    CG_ERR_MEMORY = 4,       /* MemoryError: scratch could not be allocated */
    CG_ERR_UNSUPPORTED = 5   /* NotImplementedError: reserved, never returned by 1.x so far */
};

/* Data types.  Images: any (CG_FLOAT16 as IEEE half bits, CG_BFLOAT16 as
 * bfloat16 bits, both in uint16 storage).  Image-gradient outputs:
 * CG_FLOAT16, CG_BFLOAT16, CG_FLOAT32, CG_FLOAT64.  box_ind: CG_INT32 or
 * CG_INT64. */
enum {
    CG_UINT8 = 1,
    CG_INT8 = 2,
    CG_UINT16 = 3,
    CG_INT16 = 4,
    CG_INT32 = 5,
    CG_INT64 = 6,
    CG_FLOAT16 = 7,
    CG_FLOAT32 = 8,
    CG_FLOAT64 = 9,
    CG_BFLOAT16 = 10
};

/* Layouts of images, image gradients, crops and grads. */
enum {
    CG_NHWC = 0,   /* TensorFlow's: [n, height, width, depth] */
    CG_NCHW = 1    /* PyTorch's:    [n, depth, height, width] */
};

/* Sampling methods (CG_BICUBIC: grid sampling's alone, since 1.2). */
enum {
    CG_BILINEAR = 0,
    CG_NEAREST = 1,
    CG_BICUBIC = 2
};

/* What grid sampling reads outside the image (1.2): zeros, the nearest edge
 * pixel, or the image reflected about its edges. */
enum {
    CG_ZEROS = 0,
    CG_BORDER = 1,
    CG_REFLECTION = 2
};

/* Size of cg_error.message, NUL included. */
enum { CG_MESSAGE_SIZE = 512 };

/* ----------------------------------------------------------- error record */

typedef struct cg_error {
    int status;                       /* as returned */
    int64_t position;                 /* offending box number, or -1 */
    char message[CG_MESSAGE_SIZE];    /* NUL-terminated; "" on success */
} cg_error;

#if defined(__cplusplus)
#define CG__STATIC_ASSERT(cond, msg) static_assert(cond, msg)
#else
#define CG__STATIC_ASSERT(cond, msg) _Static_assert(cond, msg)
#endif

/* The layout ctypes, cffi and Numba users declare by hand (docs/capi.md),
 * on the 64-bit platforms cropgrad ships for. */
#if UINTPTR_MAX == 0xFFFFFFFFFFFFFFFFu
CG__STATIC_ASSERT(sizeof(cg_error) == 528, "cg_error is 528 bytes");
CG__STATIC_ASSERT(offsetof(cg_error, status) == 0, "cg_error.status at 0");
CG__STATIC_ASSERT(offsetof(cg_error, position) == 8, "cg_error.position at 8");
CG__STATIC_ASSERT(offsetof(cg_error, message) == 16, "cg_error.message at 16");
#endif

/* ------------------------------------------------------ function pointers */

typedef int (*cg_api_version_fn)(void);
typedef int (*cg_default_threads_fn)(void);

typedef int (*cg_crop_and_resize_fn)(
    const void *image,            /* IN  [batch, H, W, depth] or NCHW */
    int image_dtype,              /* CG_UINT8 ... CG_BFLOAT16 */
    const int64_t *image_shape,   /* IN  4 values, in the layout's order */
    const float *boxes,           /* IN  [num_boxes, 4] y1, x1, y2, x2 */
    const void *box_ind,          /* IN  [num_boxes] */
    int box_ind_dtype,            /* CG_INT32 or CG_INT64 */
    int64_t num_boxes,
    int64_t crop_height,
    int64_t crop_width,
    int method,                   /* CG_BILINEAR or CG_NEAREST */
    float extrapolation_value,
    int layout,                   /* CG_NHWC or CG_NCHW */
    float *crops,                 /* OUT [num_boxes, crop_h, crop_w, depth] or NCHW */
    int num_threads,              /* 0: the default; 1 to 1024 */
    int flush_denormals,          /* non-zero: flush-to-zero arithmetic */
    cg_error *error);             /* may be NULL: the status alone */

typedef int (*cg_crop_and_resize_grad_image_fn)(
    const float *grads,           /* IN  [num_boxes, crop_h, crop_w, depth] or NCHW */
    const int64_t *grads_shape,   /* IN  4 values, in the layout's order */
    const float *boxes,           /* IN  [num_boxes, 4] y1, x1, y2, x2 */
    const void *box_ind,          /* IN  [num_boxes] */
    int box_ind_dtype,            /* CG_INT32 or CG_INT64 */
    const int64_t *image_size,    /* IN  4 values: the output's shape, layout order */
    void *output,                 /* OUT image_size, of output_dtype */
    int output_dtype,             /* CG_FLOAT16, CG_BFLOAT16, CG_FLOAT32, CG_FLOAT64 */
    int method,                   /* CG_BILINEAR or CG_NEAREST */
    int layout,                   /* CG_NHWC or CG_NCHW */
    int num_threads,              /* 0: the default; 1 to 1024 */
    int flush_denormals,          /* non-zero: flush-to-zero arithmetic */
    cg_error *error);             /* may be NULL: the status alone */

typedef int (*cg_crop_and_resize_grad_boxes_fn)(
    const float *grads,           /* IN  [num_boxes, crop_h, crop_w, depth] or NCHW */
    const int64_t *grads_shape,   /* IN  4 values, in the layout's order */
    const void *image,            /* IN  [batch, H, W, depth] or NCHW */
    int image_dtype,              /* CG_UINT8 ... CG_BFLOAT16 */
    const int64_t *image_shape,   /* IN  4 values, in the layout's order */
    const float *boxes,           /* IN  [num_boxes, 4] y1, x1, y2, x2 */
    const void *box_ind,          /* IN  [num_boxes] */
    int box_ind_dtype,            /* CG_INT32 or CG_INT64 */
    float *output,                /* OUT [num_boxes, 4] */
    int method,                   /* CG_BILINEAR only */
    int layout,                   /* CG_NHWC or CG_NCHW */
    int num_threads,              /* 0: the default; 1 to 1024 */
    int flush_denormals,          /* non-zero: flush-to-zero arithmetic */
    cg_error *error);             /* may be NULL: the status alone */

/* The derivative of cg_crop_and_resize (bilinear) along a tangent of the
 * boxes: per crop element, the image's slopes at the sample times how fast
 * its coordinates move (the boxes gradient's factors, so that
 * cg_crop_and_resize_grad_boxes is this map's transpose); 0 where the
 * sample is outside the image.  Arguments as cg_crop_and_resize's, with
 * boxes_tangent after boxes, no extrapolation value and CG_BILINEAR only. */
typedef int (*cg_crop_and_resize_jvp_boxes_fn)(
    const void *image,            /* IN  [batch, H, W, depth] or NCHW */
    int image_dtype,              /* CG_UINT8 ... CG_BFLOAT16 */
    const int64_t *image_shape,   /* IN  4 values, in the layout's order */
    const float *boxes,           /* IN  [num_boxes, 4] y1, x1, y2, x2 */
    const float *boxes_tangent,   /* IN  [num_boxes, 4], any values */
    const void *box_ind,          /* IN  [num_boxes] */
    int box_ind_dtype,            /* CG_INT32 or CG_INT64 */
    int64_t num_boxes,
    int64_t crop_height,
    int64_t crop_width,
    int method,                   /* CG_BILINEAR only */
    int layout,                   /* CG_NHWC or CG_NCHW */
    float *output,                /* OUT [num_boxes, crop_h, crop_w, depth] or NCHW */
    int num_threads,              /* 0: the default; 1 to 1024 */
    int flush_denormals,          /* non-zero: flush-to-zero arithmetic */
    cg_error *error);             /* may be NULL: the status alone */

/* 1.1: RoIAlign (torchvision's roi_align, average pooling, and ONNX's
 * RoiAlign), its image gradient, and its boxes gradient and JVP.  The
 * arithmetic type is double for CG_FLOAT64 data (the image; the gradient
 * for the image gradient) and float otherwise: boxes, grads, tangents and
 * the boxes gradient have it, their dtype codes (CG_FLOAT32 or CG_FLOAT64)
 * saying which.  Boxes are [x1, y1, x2, y2] in the input image's
 * coordinates, which spatial_scale maps to the feature map; sampling_ratio
 * <= 0 is adaptive (ceil of the bin's size), at most 4096; aligned non-zero
 * shifts by half a pixel.  Outputs: CG_FLOAT16, CG_BFLOAT16 (from float
 * arithmetic only), CG_FLOAT32 or CG_FLOAT64, rounded once.  A box whose
 * adaptive grid would put more than 2**24 samples in a bin is refused
 * (CG_ERR_VALUE) before any work. */

typedef int (*cg_roi_align_fn)(
    const void *image,            /* IN  [batch, C, H, W] (CG_NCHW) or NHWC */
    int image_dtype,              /* CG_UINT8 ... CG_BFLOAT16 */
    const int64_t *image_shape,   /* IN  4 values, in the layout's order */
    const void *boxes,            /* IN  [num_boxes, 4] x1, y1, x2, y2 */
    int boxes_dtype,              /* the arithmetic type */
    const void *box_ind,          /* IN  [num_boxes] */
    int box_ind_dtype,            /* CG_INT32 or CG_INT64 */
    int64_t num_boxes,
    int64_t output_height,
    int64_t output_width,
    double spatial_scale,
    int sampling_ratio,           /* <= 0: adaptive, at most 4096 */
    int aligned,                  /* non-zero: the half-pixel shift */
    int layout,                   /* CG_NHWC or CG_NCHW */
    void *output,                 /* OUT [num_boxes, C, out_h, out_w] or NHWC */
    int output_dtype,             /* CG_FLOAT16, CG_BFLOAT16, CG_FLOAT32, CG_FLOAT64 */
    int num_threads,              /* 0: the default; 1 to 1024 */
    int flush_denormals,          /* non-zero: flush-to-zero arithmetic */
    cg_error *error);             /* may be NULL: the status alone */

typedef int (*cg_roi_align_grad_image_fn)(
    const void *grads,            /* IN  [num_boxes, C, out_h, out_w] or NHWC */
    int grads_dtype,              /* CG_FLOAT32 or CG_FLOAT64: the arithmetic type */
    const int64_t *grads_shape,   /* IN  4 values, in the layout's order */
    const void *boxes,            /* IN  [num_boxes, 4], grads_dtype */
    int boxes_dtype,              /* grads_dtype */
    const void *box_ind,          /* IN  [num_boxes] */
    int box_ind_dtype,            /* CG_INT32 or CG_INT64 */
    const int64_t *image_size,    /* IN  4 values: the output's shape, layout order */
    double spatial_scale,
    int sampling_ratio,           /* <= 0: adaptive, at most 4096 */
    int aligned,                  /* non-zero: the half-pixel shift */
    int layout,                   /* CG_NHWC or CG_NCHW */
    void *output,                 /* OUT image_size, of output_dtype */
    int output_dtype,             /* CG_FLOAT16, CG_BFLOAT16, CG_FLOAT32, CG_FLOAT64 */
    int num_threads,              /* 0: the default; 1 to 1024 */
    int flush_denormals,          /* non-zero: flush-to-zero arithmetic */
    cg_error *error);             /* may be NULL: the status alone */

typedef int (*cg_roi_align_grad_boxes_fn)(
    const void *grads,            /* IN  [num_boxes, C, out_h, out_w] or NHWC */
    int grads_dtype,              /* the arithmetic type */
    const int64_t *grads_shape,   /* IN  4 values, in the layout's order */
    const void *image,            /* IN  [batch, C, H, W] (CG_NCHW) or NHWC */
    int image_dtype,              /* CG_UINT8 ... CG_BFLOAT16 */
    const int64_t *image_shape,   /* IN  4 values, in the layout's order */
    const void *boxes,            /* IN  [num_boxes, 4] x1, y1, x2, y2 */
    int boxes_dtype,              /* the arithmetic type */
    const void *box_ind,          /* IN  [num_boxes] */
    int box_ind_dtype,            /* CG_INT32 or CG_INT64 */
    double spatial_scale,
    int sampling_ratio,           /* <= 0: adaptive, at most 4096 */
    int aligned,                  /* non-zero: the half-pixel shift */
    int layout,                   /* CG_NHWC or CG_NCHW */
    void *output,                 /* OUT [num_boxes, 4], boxes_dtype */
    int num_threads,              /* 0: the default; 1 to 1024 */
    int flush_denormals,          /* non-zero: flush-to-zero arithmetic */
    cg_error *error);             /* may be NULL: the status alone */

/* The derivative of cg_roi_align along a tangent of the boxes, whose
 * transpose cg_roi_align_grad_boxes is. */
typedef int (*cg_roi_align_jvp_boxes_fn)(
    const void *image,            /* IN  [batch, C, H, W] (CG_NCHW) or NHWC */
    int image_dtype,              /* CG_UINT8 ... CG_BFLOAT16 */
    const int64_t *image_shape,   /* IN  4 values, in the layout's order */
    const void *boxes,            /* IN  [num_boxes, 4] x1, y1, x2, y2 */
    const void *boxes_tangent,    /* IN  [num_boxes, 4], any values */
    int boxes_dtype,              /* the arithmetic type, of both */
    const void *box_ind,          /* IN  [num_boxes] */
    int box_ind_dtype,            /* CG_INT32 or CG_INT64 */
    int64_t num_boxes,
    int64_t output_height,
    int64_t output_width,
    double spatial_scale,
    int sampling_ratio,           /* <= 0: adaptive, at most 4096 */
    int aligned,                  /* non-zero: the half-pixel shift */
    int layout,                   /* CG_NHWC or CG_NCHW */
    void *output,                 /* OUT as cg_roi_align's */
    int output_dtype,             /* CG_FLOAT16, CG_BFLOAT16, CG_FLOAT32, CG_FLOAT64 */
    int num_threads,              /* 0: the default; 1 to 1024 */
    int flush_denormals,          /* non-zero: flush-to-zero arithmetic */
    cg_error *error);             /* may be NULL: the status alone */

/* 1.2: grid sampling (PyTorch's grid_sample, 2-D), its image gradient, its
 * grid gradient and the grid JVP PyTorch does not have, bit for bit as the
 * NumPy API computes them.  Every array is C-contiguous NCHW (layout
 * CG_NCHW; CG_NHWC is refused with CG_ERR_UNSUPPORTED) and of the
 * arithmetic type dtype names, CG_FLOAT32 or CG_FLOAT64.  The grid holds
 * (x, y) per output point, -1 and 1 the image's outer edges, or with
 * align_corners non-zero its corner pixels' centres; every grid value must
 * be finite (CG_ERR_VALUE before any work, position the point's number,
 * batch-major).  mode: CG_BILINEAR, CG_NEAREST or CG_BICUBIC; padding_mode:
 * CG_ZEROS, CG_BORDER or CG_REFLECTION.  The image (or image_size) must be
 * at least 1 pixel high and wide. */

typedef int (*cg_grid_sample_fn)(
    const void *image,            /* IN  [batch, C, H, W] */
    const int64_t *image_shape,   /* IN  4 values: [batch, C, H, W] */
    const void *grid,             /* IN  [batch, out_h, out_w, 2]: (x, y) */
    const int64_t *grid_shape,    /* IN  4 values: [batch, out_h, out_w, 2] */
    int dtype,                    /* CG_FLOAT32 or CG_FLOAT64: every array's */
    int mode,                     /* CG_BILINEAR, CG_NEAREST or CG_BICUBIC */
    int padding_mode,             /* CG_ZEROS, CG_BORDER or CG_REFLECTION */
    int align_corners,            /* non-zero: -1 and 1 are corner pixels' centres */
    int layout,                   /* CG_NCHW (CG_NHWC: CG_ERR_UNSUPPORTED) */
    void *output,                 /* OUT [batch, C, out_h, out_w] */
    int num_threads,              /* 0: the default; 1 to 1024 */
    int flush_denormals,          /* non-zero: flush-to-zero arithmetic */
    cg_error *error);             /* may be NULL: the status alone */

typedef int (*cg_grid_sample_grad_image_fn)(
    const void *grads,            /* IN  [batch, C, out_h, out_w] */
    const int64_t *grads_shape,   /* IN  4 values: [batch, C, out_h, out_w] */
    const void *grid,             /* IN  [batch, out_h, out_w, 2]: (x, y) */
    const int64_t *grid_shape,    /* IN  4 values: [batch, out_h, out_w, 2] */
    int dtype,                    /* CG_FLOAT32 or CG_FLOAT64: every array's */
    const int64_t *image_size,    /* IN  4 values: the output's shape [batch, C, H, W] */
    int mode,                     /* CG_BILINEAR, CG_NEAREST or CG_BICUBIC */
    int padding_mode,             /* CG_ZEROS, CG_BORDER or CG_REFLECTION */
    int align_corners,            /* non-zero: -1 and 1 are corner pixels' centres */
    int layout,                   /* CG_NCHW (CG_NHWC: CG_ERR_UNSUPPORTED) */
    void *output,                 /* OUT image_size */
    int num_threads,              /* 0: the default; 1 to 1024 */
    int flush_denormals,          /* non-zero: flush-to-zero arithmetic */
    cg_error *error);             /* may be NULL: the status alone */

typedef int (*cg_grid_sample_grad_grid_fn)(
    const void *grads,            /* IN  [batch, C, out_h, out_w] */
    const int64_t *grads_shape,   /* IN  4 values: [batch, C, out_h, out_w] */
    const void *image,            /* IN  [batch, C, H, W] */
    const int64_t *image_shape,   /* IN  4 values: [batch, C, H, W] */
    const void *grid,             /* IN  [batch, out_h, out_w, 2]: (x, y) */
    const int64_t *grid_shape,    /* IN  4 values: [batch, out_h, out_w, 2] */
    int dtype,                    /* CG_FLOAT32 or CG_FLOAT64: every array's */
    int mode,                     /* CG_BILINEAR, CG_NEAREST or CG_BICUBIC */
    int padding_mode,             /* CG_ZEROS, CG_BORDER or CG_REFLECTION */
    int align_corners,            /* non-zero: -1 and 1 are corner pixels' centres */
    int layout,                   /* CG_NCHW (CG_NHWC: CG_ERR_UNSUPPORTED) */
    void *output,                 /* OUT grid_shape: d/d(x, y) per point */
    int num_threads,              /* 0: the default; 1 to 1024 */
    int flush_denormals,          /* non-zero: flush-to-zero arithmetic */
    cg_error *error);             /* may be NULL: the status alone */

/* The derivative of cg_grid_sample along a tangent of the grid, whose
 * transpose cg_grid_sample_grad_grid is. */
typedef int (*cg_grid_sample_jvp_grid_fn)(
    const void *image,            /* IN  [batch, C, H, W] */
    const int64_t *image_shape,   /* IN  4 values: [batch, C, H, W] */
    const void *grid,             /* IN  [batch, out_h, out_w, 2]: (x, y) */
    const void *grid_tangent,     /* IN  grid_shape, any values */
    const int64_t *grid_shape,    /* IN  4 values: [batch, out_h, out_w, 2] */
    int dtype,                    /* CG_FLOAT32 or CG_FLOAT64: every array's */
    int mode,                     /* CG_BILINEAR, CG_NEAREST or CG_BICUBIC */
    int padding_mode,             /* CG_ZEROS, CG_BORDER or CG_REFLECTION */
    int align_corners,            /* non-zero: -1 and 1 are corner pixels' centres */
    int layout,                   /* CG_NCHW (CG_NHWC: CG_ERR_UNSUPPORTED) */
    void *output,                 /* OUT [batch, C, out_h, out_w] */
    int num_threads,              /* 0: the default; 1 to 1024 */
    int flush_denormals,          /* non-zero: flush-to-zero arithmetic */
    cg_error *error);             /* may be NULL: the status alone */

/* ------------------------------------------------------------------ table */

/* What the capsule points to.  version_major and version_minor stay the
 * first two members in every version; a minor version only appends members,
 * so a runtime of minor m has every member up to the comment of m. */
typedef struct cropgrad_api_t {
    int version_major;
    int version_minor;
    /* 1.0 */
    cg_api_version_fn api_version;
    cg_default_threads_fn default_threads;
    cg_crop_and_resize_fn crop_and_resize;
    cg_crop_and_resize_grad_image_fn crop_and_resize_grad_image;
    cg_crop_and_resize_grad_boxes_fn crop_and_resize_grad_boxes;
    cg_crop_and_resize_jvp_boxes_fn crop_and_resize_jvp_boxes;
    /* 1.1 */
    cg_roi_align_fn roi_align;
    cg_roi_align_grad_image_fn roi_align_grad_image;
    cg_roi_align_grad_boxes_fn roi_align_grad_boxes;
    cg_roi_align_jvp_boxes_fn roi_align_jvp_boxes;
    /* 1.2 */
    cg_grid_sample_fn grid_sample;
    cg_grid_sample_grad_image_fn grid_sample_grad_image;
    cg_grid_sample_grad_grid_fn grid_sample_grad_grid;
    cg_grid_sample_jvp_grid_fn grid_sample_jvp_grid;
    /* A later minor version appends its functions here, under its number. */
} cropgrad_api_t;

#if !defined(CROPGRAD_NO_PYTHON)

#if defined(__GNUC__) || defined(__clang__)
#define CG__UNUSED __attribute__((unused))
#else
#define CG__UNUSED
#endif

/* This translation unit's table: NULL until cropgrad_import() succeeds. */
static const cropgrad_api_t *cropgrad_api CG__UNUSED = NULL;

/* Import cropgrad.capi and fill `cropgrad_api`.  Returns 0, or -1 with a
 * Python exception set (ImportError for a missing cropgrad or a runtime of
 * another version).  Call with the GIL held. */
static CG__UNUSED int cropgrad_import(void) {
    const cropgrad_api_t *api;
    if (cropgrad_api != NULL) {
        return 0;
    }
    api = (const cropgrad_api_t *)PyCapsule_Import(CROPGRAD_CAPSULE_NAME, 0);
    if (api == NULL) {
        return -1;
    }
    if (api->version_major != CG_API_VERSION_MAJOR
            || api->version_minor < CG_API_VERSION_MINOR) {
        PyErr_Format(PyExc_ImportError,
                     "cropgrad's C-level API is version %d.%d, but this module "
                     "was built against version %d.%d: it needs a cropgrad "
                     "whose C-level API is %d.%d or a later %d.x",
                     api->version_major, api->version_minor,
                     CG_API_VERSION_MAJOR, CG_API_VERSION_MINOR,
                     CG_API_VERSION_MAJOR, CG_API_VERSION_MINOR,
                     CG_API_VERSION_MAJOR);
        return -1;
    }
    cropgrad_api = api;
    return 0;
}

/* The functions under the names capi.pxd gives them (after cropgrad_import). */
#define cg_api_version (cropgrad_api->api_version)
#define cg_default_threads (cropgrad_api->default_threads)
#define cg_crop_and_resize (cropgrad_api->crop_and_resize)
#define cg_crop_and_resize_grad_image (cropgrad_api->crop_and_resize_grad_image)
#define cg_crop_and_resize_grad_boxes (cropgrad_api->crop_and_resize_grad_boxes)
#define cg_crop_and_resize_jvp_boxes (cropgrad_api->crop_and_resize_jvp_boxes)
#define cg_roi_align (cropgrad_api->roi_align)
#define cg_roi_align_grad_image (cropgrad_api->roi_align_grad_image)
#define cg_roi_align_grad_boxes (cropgrad_api->roi_align_grad_boxes)
#define cg_roi_align_jvp_boxes (cropgrad_api->roi_align_jvp_boxes)
#define cg_grid_sample (cropgrad_api->grid_sample)
#define cg_grid_sample_grad_image (cropgrad_api->grid_sample_grad_image)
#define cg_grid_sample_grad_grid (cropgrad_api->grid_sample_grad_grid)
#define cg_grid_sample_jvp_grid (cropgrad_api->grid_sample_jvp_grid)

#endif /* !CROPGRAD_NO_PYTHON */

#ifdef __cplusplus
}
#endif

#endif /* CROPGRAD_CAPI_H */
