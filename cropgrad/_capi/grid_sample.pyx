# cython: language_level=3
"""The grid-sampling family's part of the gate, and its ops' calls.

The metadata checks of each op (no data read; the words the NumPy API's
Python layer uses for the same mistakes), then each op's call once its
metadata has passed: its arguments, its arrays, the finite grid (the op's
data check) and its kernel, through the gate's `run`.  The family has no
boxes: its calls pass none (no box indices to check or convert), and the
grid's check is the op's own.  See gate.pxd for who runs which.
"""

from libc.math cimport isfinite, isnan
from libc.stdint cimport int64_t, uint32_t, uint64_t
from libc.stdio cimport snprintf

from cropgrad._capi.gate cimport (
    ITEMSIZE,
    Array,
    Call,
    array,
    bad_dtype,
    check_options,
    check_size,
    fail,
    kernel_fn,
    nbytes,
    ok,
    prepare_fn,
    run,
)
from cropgrad._kernels.grid_sample.kernels cimport (
    forward_run,
    grad_image_run,
    plan,
    slopes_run,
)
from cropgrad._kernels.grid_sample.points cimport Plan

from cropgrad.capi cimport (
    CG_BICUBIC,
    CG_ERR_VALUE,
    CG_FLOAT32,
    CG_FLOAT64,
    CG_INT64,
    CG_MESSAGE_SIZE,
    CG_NHWC,
    CG_OK,
    CG_REFLECTION,
)


# --------------------------------------------------------------------------
# The metadata checks of each op (no data read)

cdef void format_tuple(char* buf, size_t size, const int64_t* shape) noexcept nogil:
    """A shape as Python prints a tuple, for the NumPy API's words."""
    snprintf(buf, size, "(%lld, %lld, %lld, %lld)", <long long>shape[0],
             <long long>shape[1], <long long>shape[2], <long long>shape[3])


cdef int check_options_grid(int dtype, int mode, int padding_mode, int layout,
                            int num_threads, cg_error* err) noexcept nogil:
    """The options, in the NumPy API's order, then the arithmetic type."""
    if mode < 0 or mode > CG_BICUBIC:
        snprintf(err.message, CG_MESSAGE_SIZE,
                 "mode must be CG_BILINEAR (0), CG_NEAREST (1) or CG_BICUBIC (2), "
                 "got %d", mode)
        return fail(err, CG_ERR_VALUE, -1)
    if padding_mode < 0 or padding_mode > CG_REFLECTION:
        snprintf(err.message, CG_MESSAGE_SIZE,
                 "padding_mode must be CG_ZEROS (0), CG_BORDER (1) or "
                 "CG_REFLECTION (2), got %d", padding_mode)
        return fail(err, CG_ERR_VALUE, -1)
    if check_options(layout, num_threads, err) != CG_OK:
        return err.status
    if dtype != CG_FLOAT32 and dtype != CG_FLOAT64:
        return bad_dtype(err, "dtype", "CG_FLOAT32 or CG_FLOAT64 (the arithmetic "
                         "type of every array)", dtype)
    return CG_OK


cdef int check_grid(const int64_t* grid_shape, int64_t batch, int dtype,
                    cg_error* err) noexcept nogil:
    """The grid [batch, out_h, out_w, 2], indexable."""
    cdef char dims[128]
    if check_size(grid_shape, ITEMSIZE[dtype], "grid", err) != CG_OK:
        return err.status
    if grid_shape[3] != 2:
        format_tuple(dims, sizeof(dims), grid_shape)
        snprintf(err.message, CG_MESSAGE_SIZE,
                 "grid must be 4-D (N, H_out, W_out, 2) holding (x, y), got "
                 "shape %s", dims)
        return fail(err, CG_ERR_VALUE, -1)
    if grid_shape[0] != batch:
        snprintf(err.message, CG_MESSAGE_SIZE,
                 "grid has %lld batch entries and the image %lld: they must match",
                 <long long>grid_shape[0], <long long>batch)
        return fail(err, CG_ERR_VALUE, -1)
    return CG_OK


cdef inline void to_nchw(const int64_t* shape, int layout,
                         int64_t* nchw) noexcept nogil:
    """An image's (or the samples') `shape` in `layout` as NCHW."""
    cdef int i
    if layout == CG_NHWC:
        nchw[0] = shape[0]
        nchw[1] = shape[3]
        nchw[2] = shape[1]
        nchw[3] = shape[2]
    else:
        for i in range(4):
            nchw[i] = shape[i]


cdef int check_spatial(const int64_t* shape, const char* what,
                       cg_error* err) noexcept nogil:
    """An image (NCHW `shape`) at least 1 pixel high and wide."""
    if shape[2] < 1 or shape[3] < 1:
        snprintf(err.message, CG_MESSAGE_SIZE,
                 "%s must be at least 1 pixel high and wide, got %lld x %lld",
                 what, <long long>shape[2], <long long>shape[3])
        return fail(err, CG_ERR_VALUE, -1)
    return CG_OK


cdef int check_grads(const int64_t* grads_shape, const int64_t* image_shape,
                     const int64_t* grid_shape, int dtype, int layout,
                     cg_error* err) noexcept nogil:
    """grads of the sampled output's shape [batch, C, out_h, out_w] (NCHW
    `image_shape`; grads and the message in `layout`)."""
    cdef char want[128]
    cdef char got[128]
    cdef int64_t expected[4]
    cdef bint nhwc = layout == CG_NHWC
    expected[0] = image_shape[0]
    expected[3 if nhwc else 1] = image_shape[1]
    expected[1 if nhwc else 2] = grid_shape[1]
    expected[2 if nhwc else 3] = grid_shape[2]
    if check_size(grads_shape, ITEMSIZE[dtype], "grads", err) != CG_OK:
        return err.status
    if (grads_shape[0] != expected[0] or grads_shape[1] != expected[1]
            or grads_shape[2] != expected[2] or grads_shape[3] != expected[3]):
        format_tuple(want, sizeof(want), expected)
        format_tuple(got, sizeof(got), grads_shape)
        snprintf(err.message, CG_MESSAGE_SIZE,
                 "grads must have the shape of the sampled output %s = %s, got %s",
                 "(N, H_out, W_out, C)" if nhwc else "(N, C, H_out, W_out)",
                 want, got)
        return fail(err, CG_ERR_VALUE, -1)
    return CG_OK


cdef int check_image_and_grid(const int64_t* image_shape,
                              const int64_t* grid_shape, int dtype,
                              cg_error* err) noexcept nogil:
    if check_size(image_shape, ITEMSIZE[dtype], "image", err) != CG_OK:
        return err.status
    if check_grid(grid_shape, image_shape[0], dtype, err) != CG_OK:
        return err.status
    return check_spatial(image_shape, "image", err)


cdef int check_grid_sample(const int64_t* image_shape, const int64_t* grid_shape,
                           int dtype, int mode, int padding_mode, int layout,
                           int num_threads, cg_error* err) noexcept nogil:
    cdef int64_t out[4]
    cdef int64_t image[4]
    if check_options_grid(dtype, mode, padding_mode, layout, num_threads,
                          err) != CG_OK:
        return err.status
    to_nchw(image_shape, layout, image)
    if check_image_and_grid(image, grid_shape, dtype, err) != CG_OK:
        return err.status
    out[0] = image[0]
    out[1] = image[1]
    out[2] = grid_shape[1]
    out[3] = grid_shape[2]
    if check_size(out, ITEMSIZE[dtype], "output", err) != CG_OK:
        return err.status
    return ok(err)


cdef int check_grid_sample_grad_image(const int64_t* grads_shape,
                                      const int64_t* grid_shape, int dtype,
                                      const int64_t* image_size, int mode,
                                      int padding_mode, int layout,
                                      int num_threads, const char* size_name,
                                      cg_error* err) noexcept nogil:
    cdef char dims[128]
    cdef int64_t image[4]
    if check_options_grid(dtype, mode, padding_mode, layout, num_threads,
                          err) != CG_OK:
        return err.status
    if (image_size[0] < 0 or image_size[1] < 0 or image_size[2] < 0
            or image_size[3] < 0):
        format_tuple(dims, sizeof(dims), image_size)
        snprintf(err.message, CG_MESSAGE_SIZE, "%s must not be negative, got %s",
                 size_name, dims)
        return fail(err, CG_ERR_VALUE, -1)
    if check_size(image_size, ITEMSIZE[dtype], size_name, err) != CG_OK:
        return err.status
    to_nchw(image_size, layout, image)
    if check_grid(grid_shape, image[0], dtype, err) != CG_OK:
        return err.status
    if check_spatial(image, size_name, err) != CG_OK:
        return err.status
    if check_grads(grads_shape, image, grid_shape, dtype, layout, err) != CG_OK:
        return err.status
    return ok(err)


cdef int check_grid_sample_grad_grid(const int64_t* grads_shape,
                                     const int64_t* image_shape,
                                     const int64_t* grid_shape, int dtype,
                                     int mode, int padding_mode, int layout,
                                     int num_threads, cg_error* err) noexcept nogil:
    cdef int64_t image[4]
    if check_options_grid(dtype, mode, padding_mode, layout, num_threads,
                          err) != CG_OK:
        return err.status
    to_nchw(image_shape, layout, image)
    if check_image_and_grid(image, grid_shape, dtype, err) != CG_OK:
        return err.status
    if check_grads(grads_shape, image, grid_shape, dtype, layout, err) != CG_OK:
        return err.status
    return ok(err)


# --------------------------------------------------------------------------
# The ops' calls, once the metadata has passed

ctypedef struct Args:
    # Any op's arguments (those it does not take NULL); `size` the image's
    # or image gradient's shape as NCHW, the grid's [batch, out_h, out_w, 2],
    # grads' in `layout`, every image and sample array's layout.
    const void* image
    const void* grads
    const void* grid
    const void* tangent
    const int64_t* size
    const int64_t* grads_shape
    const int64_t* grid_shape
    int dtype
    int mode
    int padding_mode
    int align_corners
    int layout
    void* output


cdef inline const char* nan_or_inf(double v) noexcept nogil:
    # Python's spelling of the value, whatever the NaN's sign and payload.
    if isnan(v):
        return "nan"
    return "inf" if v > 0 else "-inf"


cdef bint all_finite(const void* values, int64_t count,
                     bint wide) noexcept nogil:
    """Whether no value has an exponent of all ones (inf or NaN): a scan
    without a branch, which the compiler vectorises (a grid of a dense
    warp has millions of values, checked before any work on one thread)."""
    cdef const uint32_t* f = <const uint32_t*>values
    cdef const uint64_t* d = <const uint64_t*>values
    cdef uint32_t bad32 = 0
    cdef uint64_t bad64 = 0
    cdef int64_t i
    if wide:
        for i in range(count):
            bad64 |= (d[i] & 0x7ff0000000000000ULL) == 0x7ff0000000000000ULL
        return bad64 == 0
    for i in range(count):
        bad32 |= (f[i] & 0x7f800000U) == 0x7f800000U
    return bad32 == 0


cdef int64_t check_grid_values(const Call* call, char* message) noexcept nogil:
    """Every grid value finite: the first point with one that is not, its
    message written (the NumPy API's words), or -1."""
    cdef const Args* a = <const Args*>call.args
    cdef const int64_t* s = a.grid_shape
    cdef int64_t count = s[0] * s[1] * s[2] * 2, i, point
    cdef const float* f = <const float*>a.grid
    cdef const double* d = <const double*>a.grid
    cdef double v
    if all_finite(a.grid, count, a.dtype == CG_FLOAT64):
        return -1
    for i in range(count):
        v = d[i] if a.dtype == CG_FLOAT64 else <double>f[i]
        if not isfinite(v):
            point = i // 2
            snprintf(message, CG_MESSAGE_SIZE,
                     "grid must be finite: grid[%lld, %lld, %lld, %lld] = %s",
                     <long long>(point // (s[1] * s[2])),
                     <long long>(point // s[2] % s[1]), <long long>(point % s[2]),
                     <long long>(i % 2), nan_or_inf(v))
            return point
    return -1


cdef void set_plan(Call* call) noexcept nogil:
    """The kernels' plan (`Plan`, points.pxd) of the call's arguments."""
    cdef const Args* a = <const Args*>call.args
    cdef Plan* p = <Plan*>call.problem
    plan(p, a.size[0], a.size[1], a.size[2], a.size[3], a.grid_shape[1],
         a.grid_shape[2], a.mode, a.padding_mode, a.align_corners != 0,
         a.dtype == CG_FLOAT64, a.layout == CG_NHWC)
    p.image = a.image
    p.grid = a.grid
    p.grads = a.grads
    p.tangent = a.tangent
    p.out = a.output


cdef inline int64_t sampled_bytes(const Args* a) noexcept nogil:
    """Bytes of the sampled output [batch, C, out_h, out_w]."""
    return (ITEMSIZE[a.dtype] * a.size[0] * a.size[1] * a.grid_shape[1]
            * a.grid_shape[2])


# Each op's arrays in its parameters' order, the output last (`prepare`).

cdef int prepare_forward(Call* call, Array* arrays) noexcept nogil:
    cdef const Args* a = <const Args*>call.args
    cdef int64_t item = ITEMSIZE[a.dtype]
    cdef int n = 2
    array(&arrays[0], a.image, nbytes(a.size, item), "image")
    array(&arrays[1], a.grid, nbytes(a.grid_shape, item), "grid")
    if call.kernel == kernel_jvp:
        array(&arrays[2], a.tangent, nbytes(a.grid_shape, item), "grid_tangent")
        n = 3
    array(&arrays[n], a.output, sampled_bytes(a), "output")
    set_plan(call)
    return n + 1


cdef int prepare_grad_image(Call* call, Array* arrays) noexcept nogil:
    cdef const Args* a = <const Args*>call.args
    cdef int64_t item = ITEMSIZE[a.dtype]
    array(&arrays[0], a.grads, nbytes(a.grads_shape, item), "grads")
    array(&arrays[1], a.grid, nbytes(a.grid_shape, item), "grid")
    array(&arrays[2], a.output, nbytes(a.size, item), "output")
    set_plan(call)
    return 3


cdef int prepare_grad_grid(Call* call, Array* arrays) noexcept nogil:
    cdef const Args* a = <const Args*>call.args
    cdef int64_t item = ITEMSIZE[a.dtype]
    array(&arrays[0], a.grads, nbytes(a.grads_shape, item), "grads")
    array(&arrays[1], a.image, nbytes(a.size, item), "image")
    array(&arrays[2], a.grid, nbytes(a.grid_shape, item), "grid")
    array(&arrays[3], a.output, nbytes(a.grid_shape, item), "output")
    set_plan(call)
    return 4


# The kernels (the box indices, which this family has none of, unread).

cdef int kernel_forward(const Call* call, const int64_t* index, int threads,
                        size_t* failed) noexcept nogil:
    forward_run(<Plan*>call.problem, threads, call.flush)
    return 0


# What the grid gradient's kernel is given for grads with no channel, which
# a caller may pass as NULL: the kernel tells the gradient from the JVP by
# a non-NULL grads, and reads none of it without channels.
cdef double NO_GRADS = 0


cdef int kernel_slopes(const Call* call, const int64_t* index, int threads,
                       size_t* failed) noexcept nogil:
    cdef Plan* p = <Plan*>call.problem
    if p.grads == NULL:
        p.grads = &NO_GRADS
    slopes_run(p, threads, call.flush)
    return 0


cdef int kernel_jvp(const Call* call, const int64_t* index, int threads,
                    size_t* failed) noexcept nogil:
    # kernel_slopes' twin: `prepare_forward` tells the JVP by its kernel.
    slopes_run(<Plan*>call.problem, threads, call.flush)
    return 0


cdef int kernel_grad_image(const Call* call, const int64_t* index, int threads,
                           size_t* failed) noexcept nogil:
    return grad_image_run(<Plan*>call.problem, threads, call.flush, failed)


cdef int call_op(const char* op, const char* scratch, Args* a,
                 prepare_fn prepare, kernel_fn kernel, bint empty,
                 int num_threads, int flush_denormals,
                 cg_error* err) noexcept nogil:
    """The op's call through the gate's `run`: no boxes (num_boxes 0, so
    no index is read or converted), the grid checked by `check_grid_values`."""
    cdef Plan p
    cdef Call call = Call(
        op=op, scratch=scratch, boxes=NULL, boxes_dtype=a.dtype, box_ind=NULL,
        box_ind_dtype=CG_INT64, num_boxes=0, batch=a.size[0], empty=empty,
        num_threads=num_threads, flush=flush_denormals != 0, args=a, problem=&p,
        prepare=prepare, check_data=check_grid_values, kernel=kernel)
    return run(&call, err)


cdef int run_forward(
    const char* op, bint check,
    const void* image, const int64_t* image_shape, const void* grid,
    const int64_t* grid_shape, int dtype, int mode, int padding_mode,
    int align_corners, int layout, void* output, int num_threads,
    int flush_denormals, cg_error* err,
) noexcept nogil:
    if check and check_grid_sample(image_shape, grid_shape, dtype, mode,
                                   padding_mode, layout, num_threads,
                                   err) != CG_OK:
        return err.status
    cdef int64_t size[4]
    to_nchw(image_shape, layout, size)
    cdef Args a = Args(
        image=image, grads=NULL, grid=grid, tangent=NULL, size=&size[0],
        grads_shape=NULL, grid_shape=grid_shape, dtype=dtype, mode=mode,
        padding_mode=padding_mode, align_corners=align_corners, layout=layout,
        output=output)
    return call_op(op, "scratch", &a, prepare_forward, kernel_forward,
                   sampled_bytes(&a) == 0, num_threads, flush_denormals, err)


cdef int run_jvp_coords(
    const char* op, bint check,
    const void* image, const int64_t* image_shape, const void* grid,
    const void* grid_tangent, const int64_t* grid_shape, int dtype, int mode,
    int padding_mode, int align_corners, int layout, void* output,
    int num_threads, int flush_denormals, cg_error* err,
) noexcept nogil:
    if check and check_grid_sample(image_shape, grid_shape, dtype, mode,
                                   padding_mode, layout, num_threads,
                                   err) != CG_OK:
        return err.status
    cdef int64_t size[4]
    to_nchw(image_shape, layout, size)
    cdef Args a = Args(
        image=image, grads=NULL, grid=grid, tangent=grid_tangent,
        size=&size[0], grads_shape=NULL, grid_shape=grid_shape, dtype=dtype,
        mode=mode, padding_mode=padding_mode, align_corners=align_corners,
        layout=layout, output=output)
    return call_op(op, "scratch", &a, prepare_forward, kernel_jvp,
                   sampled_bytes(&a) == 0, num_threads, flush_denormals, err)


cdef int run_grad_image(
    const char* op, bint check,
    const void* grads, const int64_t* grads_shape, const void* grid,
    const int64_t* grid_shape, int dtype, const int64_t* image_size, int mode,
    int padding_mode, int align_corners, int layout, void* output,
    int num_threads, int flush_denormals, cg_error* err,
) noexcept nogil:
    if check and check_grid_sample_grad_image(
            grads_shape, grid_shape, dtype, image_size, mode, padding_mode,
            layout, num_threads, "image_size", err) != CG_OK:
        return err.status
    cdef int64_t size[4]
    to_nchw(image_size, layout, size)
    cdef Args a = Args(
        image=NULL, grads=grads, grid=grid, tangent=NULL, size=&size[0],
        grads_shape=grads_shape, grid_shape=grid_shape, dtype=dtype, mode=mode,
        padding_mode=padding_mode, align_corners=align_corners, layout=layout,
        output=output)
    return call_op(op, "scratch (the taps of a chunk of grid points)", &a,
                   prepare_grad_image, kernel_grad_image,
                   nbytes(image_size, ITEMSIZE[dtype]) == 0, num_threads,
                   flush_denormals, err)


cdef int run_grad_coords(
    const char* op, bint check,
    const void* grads, const int64_t* grads_shape, const void* image,
    const int64_t* image_shape, const void* grid, const int64_t* grid_shape,
    int dtype, int mode, int padding_mode, int align_corners, int layout,
    void* output, int num_threads, int flush_denormals, cg_error* err,
) noexcept nogil:
    if check and check_grid_sample_grad_grid(
            grads_shape, image_shape, grid_shape, dtype, mode, padding_mode,
            layout, num_threads, err) != CG_OK:
        return err.status
    cdef int64_t size[4]
    to_nchw(image_shape, layout, size)
    cdef Args a = Args(
        image=image, grads=grads, grid=grid, tangent=NULL, size=&size[0],
        grads_shape=grads_shape, grid_shape=grid_shape, dtype=dtype, mode=mode,
        padding_mode=padding_mode, align_corners=align_corners, layout=layout,
        output=output)
    # With no channel the gradient is still written: zeros.
    return call_op(op, "scratch", &a, prepare_grad_grid, kernel_slopes,
                   nbytes(grid_shape, ITEMSIZE[dtype]) == 0, num_threads,
                   flush_denormals, err)
