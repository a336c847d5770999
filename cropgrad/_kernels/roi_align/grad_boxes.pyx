# cython: language_level=3
"""RoIAlign's boxes gradient (private kernel).

Trusts its arguments: the gate (cropgrad/_capi) checks them first.  The
derivative of the sampling with respect to ``x1, y1, x2, y2`` through the
sample coordinates (docs/semantics.md, "The RoIAlign boxes derivatives"):
per inside sample and channel, the image's slope along an axis times the
incoming gradient, times how fast the sample moves with each edge.  A
task owns whole boxes, so each box's four sums are one thread's.

Each channel has its own four sums over the box's samples, in the serial
order (bin row, bin column, sample row, sample column); the channels'
sums are then added in eight lanes (channel ``c`` in lane ``c % 8``, each
lane from channel to channel), combined as ``((l0 + l1) + (l2 + l3)) +
((l4 + l5) + (l6 + l7))`` and divided by the bin's count: one fixed order,
whatever the thread count.  NHWC runs every channel of a sample side by
side; NCHW either gathers a group of an image's planes into a tile and
does the same for the group's channels of the image's boxes, keeping each
channel's sums until the box's lanes are added (tiles.pxd), or, with few
samples, runs a channel plane at a time where the image is.
"""

from libc.stdint cimport int64_t
from libc.stdlib cimport free, malloc

from cropgrad._runtime.parallel cimport SCHEDULE_DYNAMIC, run_tasks
from cropgrad._runtime.simd cimport chosen_target

from ..aligned cimport align64, round64
from ..box_groups cimport group_boxes
from ..cdefs cimport cg_simd_select
from ..types cimport image_t, layout_t, nchw_t, nhwc_t

from .channels cimport pixel, slopes
from .plan cimport (
    LANES,
    TAP_BYTES,
    BoxTaps,
    RoiPlan,
    RoiProblem,
    box_taps,
    col_tap,
    lane_total,
    row_tap,
)
from .sampling cimport RoiTap, real_t
from .tiles cimport fill_tile, part_of, plan_tiles

include "../image_dtypes.pxi"


# This module's channel loops and plane transposes run on the instruction
# set the runtime chose for the process.
cg_simd_select(chosen_target())

# At most this many bytes of the channels' sums of every box (K x 4 x C)
# are kept for tiles; a larger problem reads its planes where they are.
cdef enum:
    SUMS_BYTES = 1 << 26


cdef inline void _slope_terms(const image_t* q, int half, Py_ssize_t c_stride,
                              Py_ssize_t a1, Py_ssize_t b1, Py_ssize_t a2,
                              Py_ssize_t b2, real_t w_rest, real_t w_lerp,
                              const real_t* g, Py_ssize_t g_stride, Py_ssize_t n,
                              real_t f_lo, real_t f_hi, bint held,
                              real_t* s_lo, real_t* s_hi) noexcept nogil:
    """One inside sample's terms along one axis, for `n` channels (stride
    `c_stride` in the image, `g_stride` in grads): the slope ``(w_rest *
    (v[b1] - v[a1])) + (w_lerp * (v[b2] - v[a2]))`` times the gradient,
    times ``f_lo`` added to ``s_lo[c]`` and, unless the size is `held`,
    times ``f_hi`` to ``s_hi[c]`` (channels.slopes's expressions)."""
    cdef Py_ssize_t c
    cdef const image_t* qc
    cdef real_t d
    cdef bint side_by_side = False
    if image_t is float:
        if real_t is float:
            side_by_side = c_stride == 1 and g_stride == 1
    elif image_t is double:
        if real_t is double:
            side_by_side = c_stride == 1 and g_stride == 1
    if side_by_side:
        slopes(s_lo, NULL if held else s_hi, <const real_t*>q + a1,
               <const real_t*>q + b1, <const real_t*>q + a2, <const real_t*>q + b2,
               w_rest, w_lerp, g, f_lo, f_hi, n)
        return
    for c in range(n):
        qc = q + c * c_stride
        d = ((w_rest * (pixel(qc, b1, half, s_lo) - pixel(qc, a1, half, s_lo)))
             + (w_lerp * (pixel(qc, b2, half, s_lo) - pixel(qc, a2, half, s_lo)))
             ) * g[c * g_stride]
        s_lo[c] = s_lo[c] + d * f_lo
        if not held:
            s_hi[c] = s_hi[c] + d * f_hi


cdef inline void _box_sums(const BoxTaps* b, const image_t* img, int half,
                           Py_ssize_t W, Py_ssize_t ps, Py_ssize_t cs,
                           const real_t* gk, Py_ssize_t g_bin, Py_ssize_t g_cs,
                           Py_ssize_t n, Py_ssize_t out_w,
                           real_t** sums) noexcept nogil:
    """The four sums of each of `n` channels of box ``b.box`` over its
    samples, in the serial order, added to ``sums[j][c]`` (x1, y1, x2,
    y2): the image's pixels `ps` apart and channels `cs` apart, the box's
    grads `gk` (bins `g_bin` apart, channels `g_cs` apart).  An axis a
    clamp holds has no slope: its terms are left out, not added as 0."""
    cdef Py_ssize_t ph, pw, iy, ix, o1, o2, o3, o4
    cdef RoiTap ys, xs
    cdef const RoiTap* ty
    cdef const RoiTap* tx
    cdef const real_t* gb
    for ph in range(b.rows.pooled):
        for pw in range(b.cols.pooled):
            gb = gk + (ph * out_w + pw) * g_bin
            for iy in range(b.rows.grid):
                ty = row_tap(b, ph, iy, &ys, sums[0])
                if not ty.inside:
                    continue
                for ix in range(b.cols.grid):
                    tx = col_tap(b, pw, ix, &xs, sums[0])
                    if not tx.inside or (ty.held and tx.held):
                        continue
                    o1 = (ty.low * W + tx.low) * ps
                    o2 = (ty.low * W + tx.high) * ps
                    o3 = (ty.high * W + tx.low) * ps
                    o4 = (ty.high * W + tx.high) * ps
                    if not ty.held:
                        # slope_y = (h_x (v3 - v1)) + (l_x (v4 - v2))
                        _slope_terms(img, half, cs, o1, o3, o2, o4, <real_t>tx.rest,
                                     <real_t>tx.lerp, gb, g_cs, n, <real_t>ty.f_lo,
                                     <real_t>ty.f_hi, b.rows.size_held, sums[1],
                                     sums[3])
                    if not tx.held:
                        # slope_x = (h_y (v2 - v1)) + (l_y (v4 - v3))
                        _slope_terms(img, half, cs, o1, o2, o3, o4, <real_t>ty.rest,
                                     <real_t>ty.lerp, gb, g_cs, n, <real_t>tx.f_lo,
                                     <real_t>tx.f_hi, b.cols.size_held, sums[0],
                                     sums[2])


cdef void _lanes(const RoiPlan* p, Py_ssize_t k, real_t** sums,
                 real_t count) noexcept nogil:
    """Box `k`'s gradient from its channels' sums (``sums[j][c]``): the
    channels in lanes, each lane from channel to channel."""
    cdef Py_ssize_t j, c, L
    cdef real_t lanes[LANES]
    cdef real_t* out = <real_t*>p.out
    for j in range(4):
        for L in range(LANES):
            lanes[L] = 0
        for c in range(p.g.channels):
            lanes[c % LANES] = lanes[c % LANES] + sums[j][c]
        out[4 * k + j] = lane_total(lanes) / count


cdef void _box(const RoiPlan* p, const image_t* image, int half, Py_ssize_t k,
               int thread, real_t* kind, layout_t* layout) noexcept nogil:
    """Box `k`'s gradient, its image read where it is: each channel's
    four sums first (NCHW a plane at a time), then the channels'."""
    cdef const RoiProblem* g = p.g
    cdef Py_ssize_t C = g.channels, H = g.height, W = g.width, bins = g.out_h * g.out_w
    cdef Py_ssize_t c, j
    cdef char* scratch = p.scratch + <size_t>thread * p.scratch_each
    cdef real_t* sums[4]
    cdef real_t* plane[4]
    cdef BoxTaps b
    cdef const image_t* img = image + p.box_ind[k] * H * W * C
    cdef const real_t* grads = <const real_t*>p.grads
    for j in range(4):
        sums[j] = <real_t*>(scratch + TAP_BYTES) + j * C
        for c in range(C):
            sums[j][c] = 0
    box_taps(p, k, <RoiTap*>scratch, &b, kind)
    if layout_t is nchw_t:
        for c in range(C):
            for j in range(4):
                plane[j] = sums[j] + c
            _box_sums(&b, img + c * H * W, half, W, 1, 0,
                      grads + (k * C + c) * bins, 1, 0, 1, g.out_w, plane)
    else:
        _box_sums(&b, img, half, W, C, 1, grads + k * bins * C, C, 1, C, g.out_w,
                  sums)
    _lanes(p, k, sums, <real_t>b.count)


cdef void _tile(const RoiPlan* p, const image_t* image, int half, Py_ssize_t task,
                int thread, real_t* kind) noexcept nogil:
    """Task `task` through a tile (NCHW): the channel sums of part ``task %
    parts`` of the boxes of image ``task // (parts * groups)``, for channel
    group ``task // parts % groups``, into the plan's sums (box k's
    ``order[4 * k + j][c]``, in `p.sums`)."""
    cdef const RoiProblem* g = p.g
    cdef Py_ssize_t parts = p.tiles.parts, groups = p.tiles.groups
    cdef Py_ssize_t part = task % parts, group = task // parts % groups
    cdef Py_ssize_t bi = task // (parts * groups)
    cdef Py_ssize_t C = g.channels, HW = g.height * g.width, bins = g.out_h * g.out_w
    cdef Py_ssize_t c0 = group * p.tiles.channels
    cdef Py_ssize_t n = min(p.tiles.channels, C - c0)
    cdef Py_ssize_t j, j0, j1, k, i, c
    cdef char* scratch = p.scratch + <size_t>thread * p.scratch_each
    cdef real_t* tile = <real_t*>(scratch + TAP_BYTES)
    cdef real_t* gk = <real_t*>(scratch + TAP_BYTES + p.tiles.tile_bytes)
    cdef const real_t* grads = <const real_t*>p.grads
    cdef real_t* sums[4]
    cdef BoxTaps b
    part_of(p.starts, bi, part, parts, &j0, &j1)
    if j0 == j1:
        return
    fill_tile(tile, image + (bi * C + c0) * HW, half, HW, HW, n)
    for j in range(j0, j1):
        k = p.order[j]
        for i in range(4):
            sums[i] = <real_t*>p.sums + (4 * k + i) * C + c0
            for c in range(n):
                sums[i][c] = 0
        box_taps(p, k, <RoiTap*>scratch, &b, kind)
        fill_tile(gk, grads + (k * C + c0) * bins, 0, bins, bins, n)
        _box_sums(&b, <const real_t*>tile, half, g.width, n, 1, gk, n, 1, n,
                  g.out_w, sums)


cdef void _typed_task(const void* ctx, const image_t* image, int half,
                      Py_ssize_t t, int thread) noexcept nogil:
    cdef const RoiPlan* p = <const RoiPlan*>ctx
    if image_t is double:
        if p.tiled:
            _tile(p, image, half, t, thread, <double*>NULL)
        elif p.g.nchw:
            _box(p, image, half, t, thread, <double*>NULL, <nchw_t*>NULL)
        else:
            _box(p, image, half, t, thread, <double*>NULL, <nhwc_t*>NULL)
    else:
        if p.tiled:
            _tile(p, image, half, t, thread, <float*>NULL)
        elif p.g.nchw:
            _box(p, image, half, t, thread, <float*>NULL, <nchw_t*>NULL)
        else:
            _box(p, image, half, t, thread, <float*>NULL, <nhwc_t*>NULL)


cdef void _task(void* ctx, Py_ssize_t t, int thread) noexcept nogil:
    cdef const RoiPlan* p = <const RoiPlan*>ctx
    _image_task(ctx, p.image, p.image_dtype, t, thread)


cdef void _lanes_task(void* ctx, Py_ssize_t k, int thread) noexcept nogil:
    """Box `k`'s gradient from the tiles' sums."""
    cdef const RoiPlan* p = <const RoiPlan*>ctx
    cdef Py_ssize_t C = p.g.channels, j
    cdef BoxTaps b
    cdef float* sums[4]
    cdef double* dsums[4]
    cdef char* scratch = p.scratch + <size_t>thread * p.scratch_each
    if p.g.double_arith:
        for j in range(4):
            dsums[j] = <double*>p.sums + (4 * k + j) * C
        box_taps(p, k, <RoiTap*>scratch, &b, <double*>NULL)
        _lanes(p, k, dsums, <double>b.count)
    else:
        for j in range(4):
            sums[j] = <float*>p.sums + (4 * k + j) * C
        box_taps(p, k, <RoiTap*>scratch, &b, <float*>NULL)
        _lanes(p, k, sums, <float>b.count)


cdef int roi_align_grad_boxes(const RoiProblem* g, const void* grads,
                              const void* image, int image_dtype,
                              const void* boxes, const int64_t* box_ind, void* out,
                              int nthreads, bint flush, size_t* failed) noexcept nogil:
    """The boxes gradient of RoIAlign.

    Parameters
    ----------
    g : the problem; ``num_boxes > 0``.
    grads : [num_boxes, out_h, out_w, channels] in the arithmetic type
        ([num_boxes, channels, out_h, out_w] when ``g.nchw``)
    image : [batch, height, width, channels] of `image_dtype`
        ([batch, channels, height, width] when ``g.nchw``)
    boxes : [num_boxes, 4] ``x1, y1, x2, y2``, finite, in the arithmetic type
    box_ind : int64 [num_boxes], within [0, batch)
    out : [num_boxes, 4] in the arithmetic type; every element written.
    nthreads, flush : as for `roi_align`.

    failed : out: the bytes that could not be allocated, on failure.

    Returns
    -------
    int
        0, or -1 when the scratch could not be allocated (nothing written).
    """
    cdef RoiPlan p
    cdef size_t itemsize = sizeof(double) if g.double_arith else sizeof(float)
    cdef size_t tables = 0, nbytes
    cdef Py_ssize_t images = 0, i, tasks
    cdef char* block
    cdef char* scratch
    p.g = g
    p.grads = grads
    p.image = image
    p.image_dtype = image_dtype
    p.boxes = boxes
    p.box_ind = box_ind
    p.out = out
    p.tiled = False
    # Boxes grouped by image and the channels' sums, for tiles.
    if g.nchw and <size_t>(4 * g.num_boxes * g.channels) * itemsize <= SUMS_BYTES:
        tables = round64(<size_t>(g.num_boxes + g.batch + 1) * sizeof(int64_t))
        tables += round64(<size_t>(4 * g.num_boxes * g.channels) * itemsize)
    block = <char*>malloc(tables + 64)
    if block == NULL:
        failed[0] = tables + 64
        return -1
    if tables > 0:
        p.order = <int64_t*>align64(block)
        p.starts = p.order + g.num_boxes
        p.sums = <char*>p.order + round64(
            <size_t>(g.num_boxes + g.batch + 1) * sizeof(int64_t))
        group_boxes(box_ind, g.num_boxes, g.batch, <int64_t*>p.order,
                    <int64_t*>p.starts)
        for i in range(g.batch):
            images += p.starts[i + 1] > p.starts[i]
        if g.double_arith:
            p.tiled = plan_tiles(&p, images, nthreads, True, &p.tiles, <double*>NULL)
        else:
            p.tiled = plan_tiles(&p, images, nthreads, True, &p.tiles, <float*>NULL)
    if p.tiled:
        # Each thread's table of a box's samples, its tile, a box's grads.
        p.scratch_each = TAP_BYTES + p.tiles.tile_bytes + round64(
            <size_t>(g.out_h * g.out_w * p.tiles.channels) * itemsize)
        tasks = g.batch * p.tiles.groups * p.tiles.parts
    else:
        # Each thread's table of a box's samples and its channels' sums.
        p.scratch_each = TAP_BYTES + round64(<size_t>(4 * g.channels) * itemsize)
        tasks = g.num_boxes
    nbytes = p.scratch_each * <size_t>nthreads + 64
    p.scratch = <char*>malloc(nbytes)
    if p.scratch == NULL:
        free(block)
        failed[0] = nbytes
        return -1
    scratch = p.scratch
    p.scratch = align64(p.scratch)
    run_tasks(_task, &p, tasks, nthreads,
              g.num_boxes * g.out_h * g.out_w * g.channels * 32, flush,
              SCHEDULE_DYNAMIC)
    if p.tiled:
        run_tasks(_lanes_task, &p, g.num_boxes, nthreads, g.num_boxes * g.channels * 4,
                  flush, SCHEDULE_DYNAMIC)
    free(scratch)
    free(block)
    return 0
