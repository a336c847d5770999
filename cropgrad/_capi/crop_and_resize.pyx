# cython: language_level=3
"""The crop_and_resize family's part of the gate, and its ops' calls.

The metadata checks of each op (no data read), then each op's call once
its metadata has passed: its arguments, its arrays, the kernels' geometry
and its kernel, which the gate's `run` takes through the checks that need
the data to the kernel.  See gate.pxd for who runs which.
"""

from libc.stdio cimport snprintf

from cropgrad._capi.gate cimport (
    ITEMSIZE,
    Array,
    Call,
    array,
    bad_dtype,
    boxes_array,
    check_image,
    check_options,
    check_size,
    depth,
    fail,
    format_shape,
    holds_nothing,
    index_array,
    kernel_fn,
    layout_hint,
    nbytes,
    nhwc,
    ok,
    run,
)
from cropgrad._kernels.crop_and_resize.forward cimport crop_and_resize
from cropgrad._kernels.crop_and_resize.grad_boxes cimport grad_boxes
from cropgrad._kernels.crop_and_resize.grad_image cimport grad_image
from cropgrad._kernels.crop_and_resize.jvp_boxes cimport jvp_boxes
from cropgrad._kernels.crop_and_resize.geometry cimport Geometry
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
# The ops' calls, once the metadata has passed: each fills a Call with its
# arguments and its parts, and `run` (gate.pyx) makes the checks that need
# the data and calls the kernel.

ctypedef struct Forward:
    # The forward op's arguments, or (`jvp`) the boxes JVP's: the same with
    # `tangent` beside the boxes, and no extrapolation value.
    const void* image
    int image_dtype
    const int64_t* image_shape
    const float* tangent
    int64_t crop_height
    int64_t crop_width
    int method
    float extrapolation_value
    int layout
    float* output
    bint jvp


ctypedef struct GradImage:
    const float* grads
    const int64_t* grads_shape
    const int64_t* image_size
    void* output
    int output_dtype
    int method
    int layout


ctypedef struct GradBoxes:
    const float* grads
    const int64_t* grads_shape
    const void* image
    int image_dtype
    const int64_t* image_shape
    float* output
    int layout


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


cdef int prepare_forward(Call* call, Array* arrays) noexcept nogil:
    cdef const Forward* a = <const Forward*>call.args
    cdef int64_t s[4]
    cdef int n = 2
    nhwc(a.image_shape, a.layout, s)
    array(&arrays[0], a.image, nbytes(a.image_shape, ITEMSIZE[a.image_dtype]),
          "image")
    boxes_array(&arrays[1], call)
    if a.jvp:
        array(&arrays[2], a.tangent, 16 * call.num_boxes, "boxes_tangent")
        n = 3
    index_array(&arrays[n], call)
    array(&arrays[n + 1], a.output,
          4 * call.num_boxes * a.crop_height * a.crop_width * s[3],
          "output" if a.jvp else "crops")
    # (The boxes JVP's metadata check has refused nearest sampling.)
    geometry(<Geometry*>call.problem, call.num_boxes, a.crop_height, a.crop_width,
             s, a.method == CG_NEAREST, a.layout)
    return n + 2


cdef int kernel_forward(const Call* call, const int64_t* index, int threads,
                        size_t* failed) noexcept nogil:
    cdef const Forward* a = <const Forward*>call.args
    return crop_and_resize(<const Geometry*>call.problem, a.image, a.image_dtype,
                           <const float*>call.boxes, index, a.output,
                           a.extrapolation_value, threads, call.flush, failed)


cdef int kernel_jvp(const Call* call, const int64_t* index, int threads,
                    size_t* failed) noexcept nogil:
    cdef const Forward* a = <const Forward*>call.args
    jvp_boxes(<const Geometry*>call.problem, a.image, a.image_dtype,
              <const float*>call.boxes, a.tangent, index, a.output, threads,
              call.flush)
    return 0  # it allocates nothing


cdef int forward_call(Forward* a, const char* op, kernel_fn kernel,
                      const float* boxes, const void* box_ind, int box_ind_dtype,
                      int64_t num_boxes, int num_threads, int flush_denormals,
                      cg_error* err) noexcept nogil:
    """The call of the forward op, or (`a.jvp`) of the boxes JVP: `op`
    names it, `kernel` computes it."""
    cdef Geometry geo
    cdef Call call = Call(
        op=op, scratch="scratch", boxes=boxes, boxes_dtype=CG_FLOAT32,
        box_ind=box_ind, box_ind_dtype=box_ind_dtype, num_boxes=num_boxes,
        batch=a.image_shape[0],
        empty=num_boxes == 0 or depth(a.image_shape, a.layout) == 0,
        num_threads=num_threads, flush=flush_denormals != 0, args=a, problem=&geo,
        prepare=prepare_forward, check_data=NULL, kernel=kernel)
    return run(&call, err)


cdef int run_forward(
    const char* op, bint check,
    const void* image, int image_dtype, const int64_t* image_shape,
    const float* boxes, const void* box_ind, int box_ind_dtype, int64_t num_boxes,
    int64_t crop_height, int64_t crop_width, int method, float extrapolation_value,
    int layout, float* crops, int num_threads, int flush_denormals,
    cg_error* err,
) noexcept nogil:
    if check and check_forward(image_shape, image_dtype, num_boxes, crop_height,
                               crop_width, method, layout, num_threads, False,
                               err) != CG_OK:
        return err.status
    cdef Forward a = Forward(
        image=image, image_dtype=image_dtype, image_shape=image_shape, tangent=NULL,
        crop_height=crop_height, crop_width=crop_width, method=method,
        extrapolation_value=extrapolation_value, layout=layout, output=crops,
        jvp=False)
    return forward_call(&a, op, kernel_forward, boxes, box_ind, box_ind_dtype,
                        num_boxes, num_threads, flush_denormals, err)


cdef int run_jvp_coords(
    const char* op, bint check,
    const void* image, int image_dtype, const int64_t* image_shape,
    const float* boxes, const float* boxes_tangent, const void* box_ind,
    int box_ind_dtype, int64_t num_boxes, int64_t crop_height, int64_t crop_width,
    int method, int layout, float* output, int num_threads, int flush_denormals,
    cg_error* err,
) noexcept nogil:
    if check and check_forward(image_shape, image_dtype, num_boxes, crop_height,
                               crop_width, method, layout, num_threads, True,
                               err) != CG_OK:
        return err.status
    cdef Forward a = Forward(
        image=image, image_dtype=image_dtype, image_shape=image_shape,
        tangent=boxes_tangent, crop_height=crop_height, crop_width=crop_width,
        method=method, extrapolation_value=0, layout=layout, output=output,
        jvp=True)
    return forward_call(&a, op, kernel_jvp, boxes, box_ind, box_ind_dtype,
                        num_boxes, num_threads, flush_denormals, err)


cdef int prepare_grad_image(Call* call, Array* arrays) noexcept nogil:
    cdef const GradImage* a = <const GradImage*>call.args
    cdef int64_t g[4]
    cdef int64_t s[4]
    array(&arrays[0], a.grads, nbytes(a.grads_shape, 4), "grads")
    boxes_array(&arrays[1], call)
    index_array(&arrays[2], call)
    array(&arrays[3], a.output, nbytes(a.image_size, ITEMSIZE[a.output_dtype]),
          "output")
    nhwc(a.grads_shape, a.layout, g)
    nhwc(a.image_size, a.layout, s)
    geometry(<Geometry*>call.problem, g[0], g[1], g[2], s, a.method == CG_NEAREST,
             a.layout)
    return 4


cdef int kernel_grad_image(const Call* call, const int64_t* index, int threads,
                           size_t* failed) noexcept nogil:
    cdef const GradImage* a = <const GradImage*>call.args
    return grad_image(<const Geometry*>call.problem, a.grads,
                      <const float*>call.boxes, index, a.output, a.output_dtype,
                      threads, call.flush, failed)


cdef int run_grad_image(
    const char* op, bint check,
    const float* grads, const int64_t* grads_shape, const float* boxes,
    const void* box_ind, int box_ind_dtype, const int64_t* image_size,
    void* output, int output_dtype, int method, int layout, int num_threads,
    int flush_denormals, cg_error* err,
) noexcept nogil:
    if check and check_grad_image(grads_shape, image_size, output_dtype, method,
                                  layout, num_threads, "image_size",
                                  err) != CG_OK:
        return err.status
    cdef Geometry geo
    cdef GradImage a = GradImage(
        grads=grads, grads_shape=grads_shape, image_size=image_size, output=output,
        output_dtype=output_dtype, method=method, layout=layout)
    cdef Call call = Call(
        op=op,
        scratch="scratch (sampling tables, or the float32 accumulator of a "
                "float16 or bfloat16 output)",
        boxes=boxes, boxes_dtype=CG_FLOAT32, box_ind=box_ind,
        box_ind_dtype=box_ind_dtype, num_boxes=grads_shape[0], batch=image_size[0],
        empty=holds_nothing(image_size),
        num_threads=num_threads, flush=flush_denormals != 0, args=&a, problem=&geo,
        prepare=prepare_grad_image, check_data=NULL, kernel=kernel_grad_image)
    return run(&call, err)


cdef int prepare_grad_boxes(Call* call, Array* arrays) noexcept nogil:
    cdef const GradBoxes* a = <const GradBoxes*>call.args
    cdef int64_t g[4]
    cdef int64_t s[4]
    array(&arrays[0], a.grads, nbytes(a.grads_shape, 4), "grads")
    array(&arrays[1], a.image, nbytes(a.image_shape, ITEMSIZE[a.image_dtype]),
          "image")
    boxes_array(&arrays[2], call)
    index_array(&arrays[3], call)
    array(&arrays[4], a.output, 16 * call.num_boxes, "output")
    nhwc(a.grads_shape, a.layout, g)
    nhwc(a.image_shape, a.layout, s)
    geometry(<Geometry*>call.problem, g[0], g[1], g[2], s, False, a.layout)
    return 5


cdef int kernel_grad_boxes(const Call* call, const int64_t* index, int threads,
                           size_t* failed) noexcept nogil:
    cdef const GradBoxes* a = <const GradBoxes*>call.args
    return grad_boxes(<const Geometry*>call.problem, a.grads, a.image,
                      a.image_dtype, <const float*>call.boxes, index, a.output,
                      threads, call.flush, failed)


cdef int run_grad_coords(
    const char* op, bint check,
    const float* grads, const int64_t* grads_shape, const void* image,
    int image_dtype, const int64_t* image_shape, const float* boxes,
    const void* box_ind, int box_ind_dtype, float* output, int method, int layout,
    int num_threads, int flush_denormals, cg_error* err,
) noexcept nogil:
    if check and check_grad_boxes(grads_shape, image_shape, image_dtype, method,
                                  layout, num_threads, err) != CG_OK:
        return err.status
    cdef Geometry geo
    cdef GradBoxes a = GradBoxes(
        grads=grads, grads_shape=grads_shape, image=image, image_dtype=image_dtype,
        image_shape=image_shape, output=output, layout=layout)
    cdef Call call = Call(
        op=op, scratch="scratch", boxes=boxes,
        boxes_dtype=CG_FLOAT32, box_ind=box_ind, box_ind_dtype=box_ind_dtype,
        num_boxes=grads_shape[0], batch=image_shape[0],
        empty=grads_shape[0] == 0, num_threads=num_threads,
        flush=flush_denormals != 0, args=&a, problem=&geo,
        prepare=prepare_grad_boxes, check_data=NULL, kernel=kernel_grad_boxes)
    return run(&call, err)
