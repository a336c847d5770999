# cython: language_level=3
"""The RoIAlign family's part of the gate, and its ops' calls.

The metadata checks of each op (no data read), then each op's call once
its metadata has passed: its arguments, its arrays, the problem, its own
data check (at most 2**24 samples in a bin of any box) and its kernel,
which the gate's `run` takes through the checks that need the data (among
them finite boxes, ``box_ind`` in range) to the kernel.  See gate.pxd for
who runs which.
"""

from libc.math cimport isfinite
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
from cropgrad._kernels.roi_align.forward cimport roi_align
from cropgrad._kernels.roi_align.grad_boxes cimport roi_align_grad_boxes
from cropgrad._kernels.roi_align.grad_image cimport roi_align_grad_image
from cropgrad._kernels.roi_align.jvp_boxes cimport roi_align_jvp_boxes
from cropgrad._kernels.roi_align.plan cimport RoiProblem
from cropgrad._kernels.roi_align.sampling cimport (
    MAX_SAMPLES_PER_BIN,
    RoiAxis,
    real_t,
    roi_axis,
)
from cropgrad._runtime import tuning as _tuning

from cropgrad.capi cimport (
    CG_BFLOAT16,
    CG_ERR_VALUE,
    CG_FLOAT16,
    CG_FLOAT32,
    CG_FLOAT64,
    CG_MESSAGE_SIZE,
    CG_NCHW,
    CG_OK,
)


# The budget of a thread's tile in NCHW problems (tiles.pxd): it changes
# how fast NCHW runs, never its bits.
cdef size_t TILE_BYTES = <size_t>_tuning.ROI_TILE_BYTES


def use_tile_bytes(size_t budget):
    """Set the NCHW tile budget in bytes (0: no tiles; the tests try both
    ways); returns the previous one."""
    global TILE_BYTES
    previous = TILE_BYTES
    TILE_BYTES = budget
    return previous


# --------------------------------------------------------------------------
# The metadata checks of each op (no data read)

cdef inline int arithmetic(int data_dtype) noexcept nogil:
    """The code of the arithmetic type for data of `data_dtype`."""
    return CG_FLOAT64 if data_dtype == CG_FLOAT64 else CG_FLOAT32


cdef int check_options_roi(int layout, int num_threads, double spatial_scale,
                           int sampling_ratio, cg_error* err) noexcept nogil:
    """Layout, threads, the scale and the sampling ratio."""
    if check_options(layout, num_threads, err) != CG_OK:
        return err.status
    if not isfinite(spatial_scale):
        snprintf(err.message, CG_MESSAGE_SIZE,
                 "spatial_scale must be finite, got %g", spatial_scale)
        return fail(err, CG_ERR_VALUE, -1)
    if sampling_ratio > MAX_SAMPLING_RATIO:
        snprintf(err.message, CG_MESSAGE_SIZE,
                 "sampling_ratio must be at most %d (%d x %d samples per bin, "
                 "the most a bin may hold), got %d; 0 or less is adaptive",
                 <int>MAX_SAMPLING_RATIO, <int>MAX_SAMPLING_RATIO,
                 <int>MAX_SAMPLING_RATIO, sampling_ratio)
        return fail(err, CG_ERR_VALUE, -1)
    return CG_OK


cdef int check_typed(int dtype, int arith, const char* argument,
                     cg_error* err) noexcept nogil:
    """`argument` (boxes, grads, a tangent) is in the arithmetic type."""
    if dtype != arith:
        return bad_dtype(err, argument,
                         "CG_FLOAT64 for float64 data, CG_FLOAT32 otherwise (the "
                         "arithmetic type)" if arith == CG_FLOAT64 else
                         "CG_FLOAT32 for data other than float64 (the "
                         "arithmetic type)", dtype)
    return CG_OK


cdef int check_output_dtype(int output_dtype, int arith,
                            cg_error* err) noexcept nogil:
    """A float output; float16 and bfloat16 round float arithmetic only."""
    if arith == CG_FLOAT64 and (output_dtype == CG_FLOAT16
                                or output_dtype == CG_BFLOAT16):
        return bad_dtype(err, "output_dtype",
                         "CG_FLOAT32 or CG_FLOAT64 for float64 arithmetic",
                         output_dtype)
    if (output_dtype != CG_FLOAT16 and output_dtype != CG_FLOAT32
            and output_dtype != CG_FLOAT64 and output_dtype != CG_BFLOAT16):
        return bad_dtype(err, "output_dtype",
                         "CG_FLOAT16, CG_FLOAT32, CG_FLOAT64 or CG_BFLOAT16",
                         output_dtype)
    return CG_OK


cdef int check_grads(const int64_t* grads_shape, const int64_t* g, int arith,
                     cg_error* err) noexcept nogil:
    """grads indexable, its bins not empty (`g`: its shape as NHWC)."""
    if check_size(grads_shape, ITEMSIZE[arith], "grads", err) != CG_OK:
        return err.status
    if g[1] <= 0 or g[2] <= 0:
        snprintf(err.message, CG_MESSAGE_SIZE,
                 "grads dimensions must be positive: the output's height and "
                 "width are %lld and %lld", <long long>g[1], <long long>g[2])
        return fail(err, CG_ERR_VALUE, -1)
    return CG_OK


cdef int check_channels(const int64_t* image_shape, const int64_t* grads_shape,
                        int layout, const char* image_name,
                        cg_error* err) noexcept nogil:
    cdef int64_t s[4]
    cdef int64_t g[4]
    cdef char hint[128]
    nhwc(image_shape, layout, s)
    nhwc(grads_shape, layout, g)
    if s[3] != g[3]:
        layout_hint(hint, sizeof(hint), grads_shape, image_shape, "grads",
                    image_name, layout)
        snprintf(err.message, CG_MESSAGE_SIZE,
                 "%s and grads are incompatible: %s has %lld channels but grads "
                 "has %lld%s", image_name, image_name, <long long>s[3],
                 <long long>g[3], hint)
        return fail(err, CG_ERR_VALUE, -1)
    return CG_OK


cdef int check_roi_align(const int64_t* image_shape, int image_dtype,
                         int boxes_dtype, int64_t num_boxes, int64_t output_height,
                         int64_t output_width, double spatial_scale,
                         int sampling_ratio, int layout, int output_dtype,
                         int num_threads, cg_error* err) noexcept nogil:
    """The forward op's checks; also the boxes JVP's."""
    cdef int64_t out_shape[4]
    cdef int arith = arithmetic(image_dtype)
    if check_options_roi(layout, num_threads, spatial_scale, sampling_ratio,
                         err) != CG_OK:
        return err.status
    if check_image(image_shape, image_dtype, layout, err) != CG_OK:
        return err.status
    if check_typed(boxes_dtype, arith, "boxes_dtype", err) != CG_OK:
        return err.status
    if check_output_dtype(output_dtype, arith, err) != CG_OK:
        return err.status
    if num_boxes < 0:
        snprintf(err.message, CG_MESSAGE_SIZE,
                 "boxes: num_boxes must be non-negative, got %lld",
                 <long long>num_boxes)
        return fail(err, CG_ERR_VALUE, -1)
    if output_height <= 0 or output_width <= 0:
        snprintf(err.message, CG_MESSAGE_SIZE,
                 "output_size must be positive, got [%lld, %lld]",
                 <long long>output_height, <long long>output_width)
        return fail(err, CG_ERR_VALUE, -1)
    out_shape[0] = num_boxes
    out_shape[1] = output_height
    out_shape[2] = output_width
    out_shape[3] = image_shape[1] if layout == CG_NCHW else image_shape[3]
    # An output in the arithmetic type's width at least (the sums' scratch).
    if check_size(out_shape, max(ITEMSIZE[output_dtype], ITEMSIZE[arith]),
                  "the output", err) != CG_OK:
        return err.status
    return ok(err)


cdef int check_roi_align_grad_image(const int64_t* grads_shape, int grads_dtype,
                                    int boxes_dtype, const int64_t* image_size,
                                    double spatial_scale, int sampling_ratio,
                                    int layout, int output_dtype, int num_threads,
                                    const char* size_name,
                                    cg_error* err) noexcept nogil:
    cdef char dims[128]
    cdef int64_t g[4]
    cdef int64_t s[4]
    cdef int arith
    if check_options_roi(layout, num_threads, spatial_scale, sampling_ratio,
                         err) != CG_OK:
        return err.status
    if grads_dtype != CG_FLOAT32 and grads_dtype != CG_FLOAT64:
        return bad_dtype(err, "grads_dtype", "CG_FLOAT32 or CG_FLOAT64 (the "
                         "arithmetic type)", grads_dtype)
    arith = grads_dtype
    if check_typed(boxes_dtype, arith, "boxes_dtype", err) != CG_OK:
        return err.status
    if check_output_dtype(output_dtype, arith, err) != CG_OK:
        return err.status
    nhwc(grads_shape, layout, g)
    nhwc(image_size, layout, s)
    if check_grads(grads_shape, g, arith, err) != CG_OK:
        return err.status
    if s[1] <= 0 or s[2] <= 0:
        format_shape(dims, sizeof(dims), image_size)
        snprintf(err.message, CG_MESSAGE_SIZE,
                 "image dimensions must be positive: %s = %s", size_name, dims)
        return fail(err, CG_ERR_VALUE, -1)
    if s[0] < 0 or s[3] < 0:
        format_shape(dims, sizeof(dims), image_size)
        snprintf(err.message, CG_MESSAGE_SIZE,
                 "%s: batch and channels must be non-negative, got %s",
                 size_name, dims)
        return fail(err, CG_ERR_VALUE, -1)
    if check_channels(image_size, grads_shape, layout, size_name, err) != CG_OK:
        return err.status
    # Outputs of another dtype are summed in the arithmetic type first.
    if check_size(image_size, max(ITEMSIZE[output_dtype], ITEMSIZE[arith]),
                  "the output", err) != CG_OK:
        return err.status
    return ok(err)


cdef int check_roi_align_grad_boxes(const int64_t* grads_shape, int grads_dtype,
                                    const int64_t* image_shape, int image_dtype,
                                    int boxes_dtype, double spatial_scale,
                                    int sampling_ratio, int layout,
                                    int num_threads, cg_error* err) noexcept nogil:
    cdef int64_t g[4]
    cdef int64_t s[4]
    cdef int arith = arithmetic(image_dtype)
    if check_options_roi(layout, num_threads, spatial_scale, sampling_ratio,
                         err) != CG_OK:
        return err.status
    if check_image(image_shape, image_dtype, layout, err) != CG_OK:
        return err.status
    if (check_typed(grads_dtype, arith, "grads_dtype", err) != CG_OK
            or check_typed(boxes_dtype, arith, "boxes_dtype", err) != CG_OK):
        return err.status
    nhwc(grads_shape, layout, g)
    nhwc(image_shape, layout, s)
    if check_grads(grads_shape, g, arith, err) != CG_OK:
        return err.status
    if check_channels(image_shape, grads_shape, layout, "image", err) != CG_OK:
        return err.status
    return ok(err)


# --------------------------------------------------------------------------
# The ops' calls, once the metadata has passed

cdef int64_t check_samples(const real_t* boxes, int64_t num_boxes,
                           const RoiProblem* g, char* message) noexcept nogil:
    """Every box's bins hold at most MAX_SAMPLES_PER_BIN samples (with the
    adaptive grid: ``ceil(bin)`` along each axis, in the arithmetic type);
    returns the first box whose bins hold more, its message written, or -1."""
    cdef RoiAxis rows, cols
    cdef int64_t b
    cdef real_t scale = <real_t>g.spatial_scale
    cdef const real_t* box
    if g.sampling_ratio > 0:
        return -1  # the metadata check bounded the ratio
    for b in range(num_boxes):
        box = boxes + 4 * b
        roi_axis(box[1], box[3], scale, g.aligned, g.out_h, g.height,
                 g.sampling_ratio, &rows)
        roi_axis(box[0], box[2], scale, g.aligned, g.out_w, g.width,
                 g.sampling_ratio, &cols)
        if rows.grid > MAX_SAMPLES_PER_BIN or cols.grid > MAX_SAMPLES_PER_BIN or (
                rows.grid * cols.grid > MAX_SAMPLES_PER_BIN):
            snprintf(message, CG_MESSAGE_SIZE,
                     "boxes[%lld] = [%.9g, %.9g, %.9g, %.9g] would take %lld x "
                     "%lld samples in each bin with the adaptive grid, more than "
                     "%d: pass a positive sampling_ratio, or a smaller box",
                     <long long>b, <double>box[0], <double>box[1],
                     <double>box[2], <double>box[3], <long long>rows.grid,
                     <long long>cols.grid, <int>MAX_SAMPLES_PER_BIN)
            return b
    return -1


cdef int64_t check_data(const Call* call, char* message) noexcept nogil:
    """The samples per bin of every box (`check_samples`), in the arithmetic
    type."""
    cdef const RoiProblem* g = <const RoiProblem*>call.problem
    if g.double_arith:
        return check_samples(<const double*>call.boxes, call.num_boxes, g, message)
    return check_samples(<const float*>call.boxes, call.num_boxes, g, message)


cdef void problem(RoiProblem* g, int64_t num_boxes, int64_t out_h, int64_t out_w,
                  const int64_t* s, double spatial_scale, int sampling_ratio,
                  int aligned, int layout, bint double_arith) noexcept nogil:
    """The kernels' problem (`s`: the image's shape as NHWC)."""
    g.num_boxes = num_boxes
    g.out_h = out_h
    g.out_w = out_w
    g.batch = s[0]
    g.height = s[1]
    g.width = s[2]
    g.channels = s[3]
    g.spatial_scale = spatial_scale
    g.sampling_ratio = sampling_ratio
    g.aligned = aligned != 0
    g.nchw = layout == CG_NCHW
    g.double_arith = double_arith
    g.tile_bytes = TILE_BYTES


ctypedef struct Forward:
    # The forward op's arguments, or (`jvp`) the boxes JVP's: the same with
    # `tangent` beside the boxes.  `jvp` is not read from `tangent`: a
    # caller's NULL tangent is an array to check, not the forward op.
    const void* image
    int image_dtype
    const int64_t* image_shape
    const void* tangent
    int64_t out_h
    int64_t out_w
    double spatial_scale
    int sampling_ratio
    int aligned
    int layout
    void* output
    int output_dtype
    bint jvp


ctypedef struct GradImage:
    const void* grads
    int grads_dtype
    const int64_t* grads_shape
    const int64_t* image_size
    double spatial_scale
    int sampling_ratio
    int aligned
    int layout
    void* output
    int output_dtype


ctypedef struct GradBoxes:
    const void* grads
    int grads_dtype
    const int64_t* grads_shape
    const void* image
    int image_dtype
    const int64_t* image_shape
    double spatial_scale
    int sampling_ratio
    int aligned
    int layout
    void* output


cdef int prepare_forward(Call* call, Array* arrays) noexcept nogil:
    cdef const Forward* a = <const Forward*>call.args
    cdef int64_t s[4]
    cdef int n = 2
    nhwc(a.image_shape, a.layout, s)
    array(&arrays[0], a.image, nbytes(a.image_shape, ITEMSIZE[a.image_dtype]),
          "image")
    boxes_array(&arrays[1], call)
    if a.jvp:
        array(&arrays[2], a.tangent, 4 * ITEMSIZE[call.boxes_dtype] * call.num_boxes,
              "boxes_tangent")
        n = 3
    index_array(&arrays[n], call)
    array(&arrays[n + 1], a.output,
          ITEMSIZE[a.output_dtype] * call.num_boxes * a.out_h * a.out_w * s[3],
          "output")
    problem(<RoiProblem*>call.problem, call.num_boxes, a.out_h, a.out_w, s,
            a.spatial_scale, a.sampling_ratio, a.aligned, a.layout,
            call.boxes_dtype == CG_FLOAT64)
    return n + 2


cdef int kernel_forward(const Call* call, const int64_t* index, int threads,
                        size_t* failed) noexcept nogil:
    cdef const Forward* a = <const Forward*>call.args
    return roi_align(<const RoiProblem*>call.problem, a.image, a.image_dtype,
                     call.boxes, index, a.output, a.output_dtype, threads,
                     call.flush, failed)


cdef int kernel_jvp(const Call* call, const int64_t* index, int threads,
                    size_t* failed) noexcept nogil:
    cdef const Forward* a = <const Forward*>call.args
    return roi_align_jvp_boxes(<const RoiProblem*>call.problem, a.image,
                               a.image_dtype, call.boxes, a.tangent, index,
                               a.output, a.output_dtype, threads, call.flush,
                               failed)


cdef int forward_call(Forward* a, const char* op, kernel_fn kernel,
                      const void* boxes, int boxes_dtype, const void* box_ind,
                      int box_ind_dtype, int64_t num_boxes, int num_threads,
                      int flush_denormals, cg_error* err) noexcept nogil:
    """The call of the forward op, or (`a.jvp`) of the boxes JVP: `op`
    names it, `kernel` computes it."""
    cdef RoiProblem g
    cdef Call call = Call(
        op=op, scratch="scratch", boxes=boxes, boxes_dtype=boxes_dtype,
        box_ind=box_ind, box_ind_dtype=box_ind_dtype, num_boxes=num_boxes,
        batch=a.image_shape[0],
        empty=num_boxes == 0 or depth(a.image_shape, a.layout) == 0,
        num_threads=num_threads, flush=flush_denormals != 0, args=a, problem=&g,
        prepare=prepare_forward, check_data=check_data, kernel=kernel)
    return run(&call, err)


cdef int run_forward(
    const char* op, bint check,
    const void* image, int image_dtype, const int64_t* image_shape,
    const void* boxes, int boxes_dtype, const void* box_ind, int box_ind_dtype,
    int64_t num_boxes, int64_t output_height, int64_t output_width,
    double spatial_scale, int sampling_ratio, int aligned, int layout,
    void* output, int output_dtype, int num_threads, int flush_denormals,
    cg_error* err,
) noexcept nogil:
    if check and check_roi_align(image_shape, image_dtype, boxes_dtype, num_boxes,
                                 output_height, output_width, spatial_scale,
                                 sampling_ratio, layout, output_dtype,
                                 num_threads, err) != CG_OK:
        return err.status
    cdef Forward a = Forward(
        image=image, image_dtype=image_dtype, image_shape=image_shape, tangent=NULL,
        out_h=output_height, out_w=output_width, spatial_scale=spatial_scale,
        sampling_ratio=sampling_ratio, aligned=aligned, layout=layout,
        output=output, output_dtype=output_dtype, jvp=False)
    return forward_call(&a, op, kernel_forward, boxes, boxes_dtype, box_ind,
                        box_ind_dtype, num_boxes, num_threads, flush_denormals,
                        err)


cdef int run_jvp_coords(
    const char* op, bint check,
    const void* image, int image_dtype, const int64_t* image_shape,
    const void* boxes, const void* boxes_tangent, int boxes_dtype,
    const void* box_ind, int box_ind_dtype, int64_t num_boxes,
    int64_t output_height, int64_t output_width, double spatial_scale,
    int sampling_ratio, int aligned, int layout, void* output, int output_dtype,
    int num_threads, int flush_denormals, cg_error* err,
) noexcept nogil:
    if check and check_roi_align(image_shape, image_dtype, boxes_dtype, num_boxes,
                                 output_height, output_width, spatial_scale,
                                 sampling_ratio, layout, output_dtype,
                                 num_threads, err) != CG_OK:
        return err.status
    cdef Forward a = Forward(
        image=image, image_dtype=image_dtype, image_shape=image_shape,
        tangent=boxes_tangent, out_h=output_height, out_w=output_width,
        spatial_scale=spatial_scale, sampling_ratio=sampling_ratio,
        aligned=aligned, layout=layout, output=output, output_dtype=output_dtype,
        jvp=True)
    return forward_call(&a, op, kernel_jvp, boxes, boxes_dtype, box_ind,
                        box_ind_dtype, num_boxes, num_threads, flush_denormals,
                        err)


cdef int prepare_grad_image(Call* call, Array* arrays) noexcept nogil:
    cdef const GradImage* a = <const GradImage*>call.args
    cdef int64_t gs[4]
    cdef int64_t s[4]
    nhwc(a.grads_shape, a.layout, gs)
    nhwc(a.image_size, a.layout, s)
    array(&arrays[0], a.grads, nbytes(a.grads_shape, ITEMSIZE[a.grads_dtype]),
          "grads")
    boxes_array(&arrays[1], call)
    index_array(&arrays[2], call)
    array(&arrays[3], a.output, nbytes(a.image_size, ITEMSIZE[a.output_dtype]),
          "output")
    problem(<RoiProblem*>call.problem, gs[0], gs[1], gs[2], s, a.spatial_scale,
            a.sampling_ratio, a.aligned, a.layout, a.grads_dtype == CG_FLOAT64)
    return 4


cdef int kernel_grad_image(const Call* call, const int64_t* index, int threads,
                           size_t* failed) noexcept nogil:
    cdef const GradImage* a = <const GradImage*>call.args
    return roi_align_grad_image(<const RoiProblem*>call.problem, a.grads,
                                call.boxes, index, a.output, a.output_dtype,
                                threads, call.flush, failed)


cdef int run_grad_image(
    const char* op, bint check,
    const void* grads, int grads_dtype, const int64_t* grads_shape,
    const void* boxes, int boxes_dtype, const void* box_ind, int box_ind_dtype,
    const int64_t* image_size, double spatial_scale, int sampling_ratio,
    int aligned, int layout, void* output, int output_dtype, int num_threads,
    int flush_denormals, cg_error* err,
) noexcept nogil:
    if check and check_roi_align_grad_image(
            grads_shape, grads_dtype, boxes_dtype, image_size, spatial_scale,
            sampling_ratio, layout, output_dtype, num_threads, "image_size",
            err) != CG_OK:
        return err.status
    cdef RoiProblem g
    cdef GradImage a = GradImage(
        grads=grads, grads_dtype=grads_dtype, grads_shape=grads_shape,
        image_size=image_size, spatial_scale=spatial_scale,
        sampling_ratio=sampling_ratio, aligned=aligned, layout=layout,
        output=output, output_dtype=output_dtype)
    # (The metadata check has made boxes_dtype grads_dtype.)
    cdef Call call = Call(
        op=op,
        scratch="scratch (the grouping of boxes, or the accumulator of an output "
                "of another dtype)",
        boxes=boxes, boxes_dtype=boxes_dtype, box_ind=box_ind,
        box_ind_dtype=box_ind_dtype, num_boxes=grads_shape[0], batch=image_size[0],
        empty=holds_nothing(image_size),
        num_threads=num_threads, flush=flush_denormals != 0, args=&a, problem=&g,
        prepare=prepare_grad_image, check_data=check_data, kernel=kernel_grad_image)
    return run(&call, err)


cdef int prepare_grad_boxes(Call* call, Array* arrays) noexcept nogil:
    cdef const GradBoxes* a = <const GradBoxes*>call.args
    cdef int64_t gs[4]
    cdef int64_t s[4]
    nhwc(a.grads_shape, a.layout, gs)
    nhwc(a.image_shape, a.layout, s)
    array(&arrays[0], a.grads, nbytes(a.grads_shape, ITEMSIZE[a.grads_dtype]),
          "grads")
    array(&arrays[1], a.image, nbytes(a.image_shape, ITEMSIZE[a.image_dtype]),
          "image")
    boxes_array(&arrays[2], call)
    index_array(&arrays[3], call)
    array(&arrays[4], a.output, 4 * ITEMSIZE[call.boxes_dtype] * call.num_boxes,
          "output")
    problem(<RoiProblem*>call.problem, gs[0], gs[1], gs[2], s, a.spatial_scale,
            a.sampling_ratio, a.aligned, a.layout, call.boxes_dtype == CG_FLOAT64)
    return 5


cdef int kernel_grad_boxes(const Call* call, const int64_t* index, int threads,
                           size_t* failed) noexcept nogil:
    cdef const GradBoxes* a = <const GradBoxes*>call.args
    return roi_align_grad_boxes(<const RoiProblem*>call.problem, a.grads, a.image,
                                a.image_dtype, call.boxes, index, a.output,
                                threads, call.flush, failed)


cdef int run_grad_coords(
    const char* op, bint check,
    const void* grads, int grads_dtype, const int64_t* grads_shape,
    const void* image, int image_dtype, const int64_t* image_shape,
    const void* boxes, int boxes_dtype, const void* box_ind, int box_ind_dtype,
    double spatial_scale, int sampling_ratio, int aligned, int layout,
    void* output, int num_threads, int flush_denormals, cg_error* err,
) noexcept nogil:
    if check and check_roi_align_grad_boxes(
            grads_shape, grads_dtype, image_shape, image_dtype, boxes_dtype,
            spatial_scale, sampling_ratio, layout, num_threads, err) != CG_OK:
        return err.status
    cdef RoiProblem g
    cdef GradBoxes a = GradBoxes(
        grads=grads, grads_dtype=grads_dtype, grads_shape=grads_shape, image=image,
        image_dtype=image_dtype, image_shape=image_shape,
        spatial_scale=spatial_scale, sampling_ratio=sampling_ratio,
        aligned=aligned, layout=layout, output=output)
    cdef Call call = Call(
        op=op, scratch="scratch", boxes=boxes,
        boxes_dtype=boxes_dtype, box_ind=box_ind, box_ind_dtype=box_ind_dtype,
        num_boxes=grads_shape[0], batch=image_shape[0], empty=grads_shape[0] == 0,
        num_threads=num_threads, flush=flush_denormals != 0, args=&a, problem=&g,
        prepare=prepare_grad_boxes, check_data=check_data, kernel=kernel_grad_boxes)
    return run(&call, err)
