# Included by kernels.pyx: problems of many small batches run a batch a task
# through the NHWC clone, each batch's image in a thread's scratch
# (`_staged_task`), where that was measured to be faster than the NCHW
# loops or the NHWC clone on the arrays themselves (`stage`).

cdef bint _staging = True
cdef Py_ssize_t _staged_runs = 0


def use_staging(bint on):
    """Run problems of many small batches a batch at a time through the
    NHWC clone in scratch (`stage`) or not; returns the previous setting."""
    global _staging
    cdef bint before = _staging
    _staging = on
    return before


def staged_runs():
    """How many runs have been staged in this process (for the tests)."""
    return _staged_runs


cdef enum:
    # NCHW batches staged (`stage`): at least STAGE_CHANNELS channels
    # (STAGE_GRID_CHANNELS for the grid gradient, whose NHWC clone reads
    # each channel's grads apart), at most STAGE_FLOATS image and sample
    # values a batch (a thread's scratch, within its second-level cache),
    # STAGE_BATCHES batches a thread or more (a task is a batch), and at
    # most STAGE_PIXELS pixels a point (STAGE_SCATTER_PIXELS for the image
    # gradient, which zeroes and changes the layout of every pixel).  The
    # forward op and the grid gradient also want STAGE_IMAGE_FLOATS image
    # values a batch or more: a smaller image stays in the cache for the
    # unstaged loops.  Measured with 1 thread on random points, float32,
    # against the unstaged loops:
    # - 64 x 64 pixels, 32 channels, 1200 points: the forward op 2.3 times
    #   faster, the image gradient 1.9 to 2.3, the grid gradient 1.9;
    # - the same with 300 points: the forward op and the grid gradient 2
    #   times faster; the image gradient 1.1 times slower;
    # - 64 x 64 pixels, 8 channels, as many points: the image gradient 2.2
    #   times faster, the forward op alike; the NHWC grid gradient slower
    #   than the NCHW loops with 8 channels, as fast with 16;
    # - 32 x 32 pixels, 16 channels, 256 points: the image gradient 1.6
    #   times faster, the forward op 1.15 times slower;
    # - the image gradient in nearest mode: 1.25 times slower.
    # NHWC problems are staged on the same conditions, the forward op and
    # the grid gradient only (the image gradient scatters into its output
    # faster than into scratch and a copy): 64 x 64 pixels, 32 channels,
    # 1200 points, one thread, the forward op 1.6 times faster, the grid
    # gradient 1.3.
    STAGE_CHANNELS = 8
    STAGE_GRID_CHANNELS = 32
    STAGE_FLOATS = 1 << 18
    STAGE_IMAGE_FLOATS = 1 << 15
    STAGE_BATCHES = 4
    STAGE_PIXELS = 32
    STAGE_SCATTER_PIXELS = 4


cdef inline void _transposed(const float* src, float* dst, int64_t rows,
                             int64_t cols) noexcept nogil:
    """dst = src (`rows` x `cols`) transposed; staged runs have AVX2."""
    cg_transpose32(src, cols, dst, rows, rows, cols, 1)


cdef void _staged_task(void* ctx, Py_ssize_t b, int thread) noexcept nogil:
    """Batch ``b`` of an NCHW problem through the NHWC clone, in the
    thread's scratch: its planes (and grads) changed to pixels by channels,
    the op run there, its samples (or image gradient) changed back into
    the output.  Where a batch's planes are small and its points scattered
    (deformable attention's), NCHW reads a line of each plane per point
    and channel, and NHWC one line per point for eight channels; the NHWC
    clone's operations are the NCHW clone's, lane for lane, so the bits
    are the same.  An NHWC batch's image is copied as it is: read in order,
    it comes into the cache faster than the points' scattered taps bring
    it (the forward op 1.6 times faster, the grid gradient 1.3)."""
    cdef const Plan* p = <const Plan*>ctx
    cdef gs_axes axes = simd_axes(p)
    cdef int64_t plane = p.h * p.w, per = p.ho * p.wo, c = p.c
    cdef float* pixels = p.stage + thread * p.staged     # [plane, c]
    cdef float* samples = pixels + plane * c             # [per, c]
    cdef const float* grid = <const float*>p.grid + 2 * b * per
    cdef const float* grads = <const float*>p.grads
    if p.image == NULL:
        # The image gradient (NCHW alone; its plan has no image): every
        # pixel of the batch is the task's.
        _transposed(grads + b * c * per, samples, c, per)
        memset(pixels, 0, <size_t>(plane * c) * sizeof(float))
        gs_scatter_nhwc8(samples, grid, pixels, c, <int32_t>p.h,
                         <int32_t>p.w, per, 0, 0, plane, &axes)
        _transposed(pixels, <float*>p.out + b * c * plane, plane, c)
        return
    # The batch's image: an NHWC one copied as it is, the samples and
    # grads then used where they are.
    if p.nhwc:
        memcpy(pixels, <const float*>p.image + b * plane * c,
               <size_t>(plane * c) * sizeof(float))
    else:
        _transposed(<const float*>p.image + b * c * plane, pixels, c, plane)
    if p.grads == NULL:
        gs_forward_nhwc8(pixels, grid,
                         <float*>p.out + b * per * c if p.nhwc else samples,
                         c, <int32_t>p.h, <int32_t>p.w, per, 0, 0, per, &axes)
        if not p.nhwc:
            _transposed(samples, <float*>p.out + b * c * per, per, c)
        return
    grads += b * c * per
    if not p.nhwc:
        _transposed(grads, samples, c, per)
        grads = samples
    gs_grad_grid_nhwc8(pixels, grid, grads, <float*>p.out + 2 * b * per, c,
                       <int32_t>p.h, <int32_t>p.w, per, 0, 0, per, &axes)


cdef int stage(Plan* p, int threads, int64_t channels, int64_t pixels,
               int64_t image_floats) noexcept nogil:
    """The team of a staged run of `p` (`_staged_task`) with its scratch
    in ``p.stage``, or 0: not staged (the problem is not of that kind:
    fewer than `channels` channels, more than `pixels` pixels a point,
    fewer than `image_floats` image values a batch; or the scratch could
    not be had: the unstaged run needs none)."""
    cdef int64_t plane = p.h * p.w
    # NHWC: the image alone, and not for the image gradient (whose output
    # is written in place faster than through scratch).
    cdef int64_t floats = plane * p.c if p.nhwc else (plane + p.ho * p.wo) * p.c
    cdef int team = team_size(threads, p.n)
    if not (_staging and simd_takes(p) and p.c >= channels
            and (not p.nhwc or p.image != NULL)
            and plane <= pixels * p.ho * p.wo and plane * p.c >= image_floats
            and floats <= STAGE_FLOATS and p.n >= STAGE_BATCHES * team):
        return 0
    p.staged = floats
    p.stage = <float*>malloc(<size_t>(team * floats) * sizeof(float))
    return team if p.stage != NULL else 0


cdef void staged_run(Plan* p, int team, Py_ssize_t work, bint flush) noexcept nogil:
    global _staged_runs
    _staged_runs += 1
    run_tasks(_staged_task, p, p.n, team, work, flush, SCHEDULE_DYNAMIC)
    free(p.stage)
    p.stage = NULL
