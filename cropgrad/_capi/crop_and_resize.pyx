# cython: language_level=3
"""The crop_and_resize family's part of the gate, and its ops' calls.

The metadata checks of each op (no data read), then each op's call once
its metadata has passed (the array and data checks, the kernels'
geometry, the kernel).  See gate.pxd for who runs which.
"""

from libc.stdio cimport snprintf
from libc.stdlib cimport free

from cropgrad._capi.gate cimport (
    ITEMSIZE,
    Array,
    array,
    bad_dtype,
    check_arrays,
    check_boxes_args,
    check_data,
    check_image,
    check_options,
    check_size,
    fail,
    format_shape,
    index64,
    layout_hint,
    memory_error,
    nbytes,
    nhwc,
    ok,
)
from cropgrad._kernels.crop_and_resize.forward cimport crop_and_resize
from cropgrad._kernels.crop_and_resize.grad_boxes cimport grad_boxes
from cropgrad._kernels.crop_and_resize.grad_image cimport grad_image
from cropgrad._kernels.crop_and_resize.jvp_boxes cimport jvp_boxes
from cropgrad._kernels.types cimport Geometry
from cropgrad._runtime.parallel cimport resolve_threads
from cropgrad.capi cimport (
    CG_BFLOAT16,
    CG_BILINEAR,
    CG_ERR_VALUE,
    CG_FLOAT16,
    CG_FLOAT32,
    CG_FLOAT64,
    CG_MESSAGE_SIZE,
    CG_NCHW,
    CG_NEAREST,
    CG_OK,
)


# --------------------------------------------------------------------------
# The metadata checks of each op (no data read)

cdef int check_method(int method, bint bilinear_only, cg_error* err) noexcept nogil:
    """The sampling method (the boxes gradient and JVP: bilinear only)."""
    if method != CG_BILINEAR and (bilinear_only or method != CG_NEAREST):
        snprintf(err.message, CG_MESSAGE_SIZE, "method must be %s, got %d",
                 <const char*>(b"CG_BILINEAR (0): the only method this op has"
                               if bilinear_only
                               else b"CG_BILINEAR (0) or CG_NEAREST (1)"), method)
        return fail(err, CG_ERR_VALUE, -1)
    return CG_OK


cdef int check_common(int method, int layout, int num_threads, bint bilinear_only,
                      cg_error* err) noexcept nogil:
    """Method, layout and thread count, in that order."""
    if check_method(method, bilinear_only, err) != CG_OK:
        return err.status
    return check_options(layout, num_threads, err)


cdef int check_grads(const int64_t* grads_shape, const int64_t* g,
                     cg_error* err) noexcept nogil:
    """grads indexable, its crops not empty (`g`: its shape as NHWC)."""
    if check_size(grads_shape, 4, "grads", err) != CG_OK:
        return err.status
    if g[1] == 0 or g[2] == 0:
        snprintf(err.message, CG_MESSAGE_SIZE,
                 "grads dimensions must be positive: crop_height and crop_width "
                 "are %lld and %lld", <long long>g[1], <long long>g[2])
        return fail(err, CG_ERR_VALUE, -1)
    return CG_OK


cdef int check_forward(const int64_t* image_shape, int image_dtype,
                       int64_t num_boxes, int64_t crop_height, int64_t crop_width,
                       int method, int layout, int num_threads, bint bilinear_only,
                       cg_error* err) noexcept nogil:
    """The forward op's checks; also the boxes JVP's (`bilinear_only`), whose
    arguments and output are the forward op's."""
    cdef int64_t crops_shape[4]
    if check_common(method, layout, num_threads, bilinear_only, err) != CG_OK:
        return err.status
    if check_image(image_shape, image_dtype, layout, err) != CG_OK:
        return err.status
    if num_boxes < 0:
        snprintf(err.message, CG_MESSAGE_SIZE,
                 "boxes: num_boxes must be non-negative, got %lld",
                 <long long>num_boxes)
        return fail(err, CG_ERR_VALUE, -1)
    if crop_height <= 0 or crop_width <= 0:
        snprintf(err.message, CG_MESSAGE_SIZE,
                 "crop dimensions must be positive, got crop_size = [%lld, %lld]",
                 <long long>crop_height, <long long>crop_width)
        return fail(err, CG_ERR_VALUE, -1)
    crops_shape[0] = num_boxes
    crops_shape[1] = crop_height
    crops_shape[2] = crop_width
    crops_shape[3] = image_shape[1] if layout == CG_NCHW else image_shape[3]
    if check_size(crops_shape, 4, "the output", err) != CG_OK:
        return err.status
    return ok(err)


cdef int check_grad_image(const int64_t* grads_shape, const int64_t* image_size,
                          int output_dtype, int method, int layout,
                          int num_threads, const char* size_name,
                          cg_error* err) noexcept nogil:
    """Shapes are in `layout`'s order (and so are those the messages show);
    `size_name` is what the caller calls `image_size` (JAX: image_shape)."""
    cdef char dims[128]
    cdef char hint[128]
    cdef int64_t g[4]
    cdef int64_t s[4]
    if check_common(method, layout, num_threads, False, err) != CG_OK:
        return err.status
    nhwc(grads_shape, layout, g)
    nhwc(image_size, layout, s)
    if output_dtype != CG_FLOAT16 and output_dtype != CG_FLOAT32 \
            and output_dtype != CG_FLOAT64 and output_dtype != CG_BFLOAT16:
        return bad_dtype(err, "output_dtype",
                         "CG_FLOAT16, CG_FLOAT32, CG_FLOAT64 or CG_BFLOAT16",
                         output_dtype)
    if check_grads(grads_shape, g, err) != CG_OK:
        return err.status
    if s[1] <= 0 or s[2] <= 0:
        format_shape(dims, sizeof(dims), image_size)
        snprintf(err.message, CG_MESSAGE_SIZE,
                 "image dimensions must be positive: %s = %s", size_name, dims)
        return fail(err, CG_ERR_VALUE, -1)
    if s[0] < 0 or s[3] < 0:
        format_shape(dims, sizeof(dims), image_size)
        snprintf(err.message, CG_MESSAGE_SIZE,
                 "%s: batch and depth must be non-negative, got %s", size_name,
                 dims)
        return fail(err, CG_ERR_VALUE, -1)
    if g[3] != s[3]:
        layout_hint(hint, sizeof(hint), grads_shape, image_size, "grads",
                    size_name, layout)
        snprintf(err.message, CG_MESSAGE_SIZE,
                 "%s and grads are incompatible: %s depth is %lld but grads "
                 "depth is %lld%s", size_name, size_name, <long long>s[3],
                 <long long>g[3], hint)
        return fail(err, CG_ERR_VALUE, -1)
    # float16 and bfloat16 outputs also need a float32 accumulator of the
    # same shape.
    if check_size(image_size, 4 if ITEMSIZE[output_dtype] == 2 else
                  ITEMSIZE[output_dtype], "the output", err) != CG_OK:
        return err.status
    return ok(err)


cdef int check_grad_boxes(const int64_t* grads_shape, const int64_t* image_shape,
                          int image_dtype, int method, int layout, int num_threads,
                          cg_error* err) noexcept nogil:
    cdef int64_t g[4]
    cdef int64_t s[4]
    cdef char hint[128]
    if check_common(method, layout, num_threads, True, err) != CG_OK:
        return err.status
    nhwc(grads_shape, layout, g)
    nhwc(image_shape, layout, s)
    if check_grads(grads_shape, g, err) != CG_OK:
        return err.status
    if check_image(image_shape, image_dtype, layout, err) != CG_OK:
        return err.status
    if g[3] != s[3]:
        layout_hint(hint, sizeof(hint), grads_shape, image_shape, "grads",
                    "image", layout)
        snprintf(err.message, CG_MESSAGE_SIZE,
                 "image and grads must have the same depth, got %lld and %lld%s",
                 <long long>s[3], <long long>g[3], hint)
        return fail(err, CG_ERR_VALUE, -1)
    return ok(err)


# --------------------------------------------------------------------------
# The ops' calls, once the metadata has passed

cdef inline void geometry(Geometry* geo, int64_t num_boxes, int64_t crop_h,
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


cdef int forward_call(
    const void* image, int image_dtype, const int64_t* image_shape,
    const float* boxes, const float* boxes_tangent, const void* box_ind,
    int box_ind_dtype, int64_t num_boxes, int64_t crop_height, int64_t crop_width,
    int method, int layout, const void* output, const char* output_name,
    bint jvp, Geometry* geo, const int64_t** index, int64_t** owned,
    cg_error* err,
) noexcept nogil:
    """The array and data checks of a call of the forward op, or (`jvp`) of
    the boxes JVP, whose arguments and output are the forward op's with
    `boxes_tangent` beside the boxes; then the kernel's geometry and int64
    box indices (free ``owned[0]`` after the kernel).

    Returns 1 when the kernel has work, 0 when the call is valid and its
    output empty (`err` holds CG_OK), -1 when it is not (`err` says why).
    """
    cdef int64_t s[4]
    cdef Array arrays[5]
    cdef int n = 0
    if check_boxes_args(box_ind_dtype, num_boxes, 4, err) != CG_OK:
        return -1
    nhwc(image_shape, layout, s)
    array(&arrays[n], image, nbytes(image_shape, ITEMSIZE[image_dtype]), "image")
    array(&arrays[n + 1], boxes, 16 * num_boxes, "boxes")
    n += 2
    if jvp:
        array(&arrays[n], boxes_tangent, 16 * num_boxes, "boxes_tangent")
        n += 1
    array(&arrays[n], box_ind, ITEMSIZE[box_ind_dtype] * num_boxes, "box_ind")
    array(&arrays[n + 1], output, 4 * num_boxes * crop_height * crop_width * s[3],
          output_name)
    n += 2
    if check_arrays(arrays, n, err) != CG_OK:
        return -1
    if check_data(boxes, box_ind, box_ind_dtype, num_boxes, image_shape[0],
                  err) != CG_OK:
        return -1
    if num_boxes == 0 or s[3] == 0:
        ok(err)
        return 0
    if index64(box_ind, box_ind_dtype, num_boxes, index, owned, err) != CG_OK:
        return -1
    # (The boxes JVP's metadata check has refused nearest sampling.)
    geometry(geo, num_boxes, crop_height, crop_width, s, method == CG_NEAREST, layout)
    return 1


cdef int run_crop_and_resize(
    const void* image, int image_dtype, const int64_t* image_shape,
    const float* boxes, const void* box_ind, int box_ind_dtype, int64_t num_boxes,
    int64_t crop_height, int64_t crop_width, int method, float extrapolation_value,
    int layout, float* crops, int num_threads, int flush_denormals,
    cg_error* err,
) noexcept nogil:
    cdef Geometry geo
    cdef const int64_t* index
    cdef int64_t* owned
    cdef size_t failed = 0
    cdef int status
    if forward_call(image, image_dtype, image_shape, boxes, NULL, box_ind,
                    box_ind_dtype, num_boxes, crop_height, crop_width, method,
                    layout, crops, "crops", False, &geo, &index, &owned, err) <= 0:
        return err.status
    status = crop_and_resize(&geo, image, image_dtype, boxes, index, crops,
                             extrapolation_value, resolve_threads(num_threads),
                             flush_denormals != 0, &failed)
    free(owned)
    if status != 0:
        return memory_error(err, "crop_and_resize", failed, "scratch")
    return ok(err)


cdef int run_grad_image(
    const float* grads, const int64_t* grads_shape, const float* boxes,
    const void* box_ind, int box_ind_dtype, const int64_t* image_size,
    void* output, int output_dtype, int method, int layout, int num_threads,
    int flush_denormals, cg_error* err,
) noexcept nogil:
    cdef Geometry geo
    cdef const int64_t* index
    cdef int64_t* owned
    cdef size_t failed = 0
    cdef int status
    cdef int64_t g[4]
    cdef int64_t s[4]
    cdef Array arrays[4]
    if check_boxes_args(box_ind_dtype, grads_shape[0], 4, err) != CG_OK:
        return err.status
    array(&arrays[0], grads, nbytes(grads_shape, 4), "grads")
    array(&arrays[1], boxes, 16 * grads_shape[0], "boxes")
    array(&arrays[2], box_ind, ITEMSIZE[box_ind_dtype] * grads_shape[0], "box_ind")
    array(&arrays[3], output, nbytes(image_size, ITEMSIZE[output_dtype]), "output")
    if check_arrays(arrays, 4, err) != CG_OK:
        return err.status
    if check_data(boxes, box_ind, box_ind_dtype, grads_shape[0], image_size[0],
                  err) != CG_OK:
        return err.status
    if (image_size[0] == 0 or image_size[1] == 0 or image_size[2] == 0
            or image_size[3] == 0):
        return ok(err)
    nhwc(grads_shape, layout, g)
    nhwc(image_size, layout, s)
    if index64(box_ind, box_ind_dtype, grads_shape[0], &index, &owned,
               err) != CG_OK:
        return err.status
    geometry(&geo, g[0], g[1], g[2], s, method == CG_NEAREST, layout)
    status = grad_image(&geo, grads, boxes, index, output, output_dtype,
                        resolve_threads(num_threads), flush_denormals != 0, &failed)
    free(owned)
    if status != 0:
        return memory_error(err, "crop_and_resize_grad_image", failed,
                            "scratch (sampling tables, or the float32 "
                            "accumulator of a float16 or bfloat16 output)")
    return ok(err)


cdef int run_grad_boxes(
    const float* grads, const int64_t* grads_shape, const void* image,
    int image_dtype, const int64_t* image_shape, const float* boxes,
    const void* box_ind, int box_ind_dtype, float* output, int method, int layout,
    int num_threads, int flush_denormals, cg_error* err,
) noexcept nogil:
    cdef Geometry geo
    cdef const int64_t* index
    cdef int64_t* owned
    cdef size_t failed = 0
    cdef int status
    cdef int64_t g[4]
    cdef int64_t s[4]
    cdef Array arrays[5]
    if check_boxes_args(box_ind_dtype, grads_shape[0], 4, err) != CG_OK:
        return err.status
    array(&arrays[0], grads, nbytes(grads_shape, 4), "grads")
    array(&arrays[1], image, nbytes(image_shape, ITEMSIZE[image_dtype]), "image")
    array(&arrays[2], boxes, 16 * grads_shape[0], "boxes")
    array(&arrays[3], box_ind, ITEMSIZE[box_ind_dtype] * grads_shape[0], "box_ind")
    array(&arrays[4], output, 16 * grads_shape[0], "output")
    if check_arrays(arrays, 5, err) != CG_OK:
        return err.status
    if check_data(boxes, box_ind, box_ind_dtype, grads_shape[0], image_shape[0],
                  err) != CG_OK:
        return err.status
    if grads_shape[0] == 0:
        return ok(err)
    if index64(box_ind, box_ind_dtype, grads_shape[0], &index, &owned,
               err) != CG_OK:
        return err.status
    nhwc(grads_shape, layout, g)
    nhwc(image_shape, layout, s)
    geometry(&geo, g[0], g[1], g[2], s, False, layout)
    status = grad_boxes(&geo, grads, image, image_dtype, boxes, index, output,
                        resolve_threads(num_threads), flush_denormals != 0, &failed)
    free(owned)
    if status != 0:
        return memory_error(err, "crop_and_resize_grad_boxes", failed, "scratch")
    return ok(err)


cdef int run_jvp_boxes(
    const void* image, int image_dtype, const int64_t* image_shape,
    const float* boxes, const float* boxes_tangent, const void* box_ind,
    int box_ind_dtype, int64_t num_boxes, int64_t crop_height, int64_t crop_width,
    int method, int layout, float* output, int num_threads, int flush_denormals,
    cg_error* err,
) noexcept nogil:
    cdef Geometry geo
    cdef const int64_t* index
    cdef int64_t* owned
    if forward_call(image, image_dtype, image_shape, boxes, boxes_tangent, box_ind,
                    box_ind_dtype, num_boxes, crop_height, crop_width, method,
                    layout, output, "output", True, &geo, &index, &owned,
                    err) <= 0:
        return err.status
    jvp_boxes(&geo, image, image_dtype, boxes, boxes_tangent, index, output,
              resolve_threads(num_threads), flush_denormals != 0)
    free(owned)
    return ok(err)
