# cython: language_level=3
#
# The ops that give each bin of each box one value per channel: the
# forward op (the bin's mean) and its JVP along a tangent of the boxes
# (the mean's derivative).  Written once for both, their op picked by a tag
# type as the layout is (types.pxd); forward.pyx and jvp_boxes.pyx run them.
#
# A bin's value is its inside samples' sum in the serial order (sample
# row, sample column) divided by the count, computed by one task, so the
# result does not depend on the number of threads.  Tasks either own a box
# and a range of its channels, reading the image where it is (NHWC, and
# NCHW problems with few samples), or own a group of an image's planes
# gathered into a tile and a part of the image's boxes (NCHW, tiles.pxd).

from libc.stdint cimport int64_t
from libc.stdlib cimport free, malloc

from cropgrad._runtime.parallel cimport SCHEDULE_DYNAMIC, run_tasks, task_fn

from ..aligned cimport align64, round64
from ..box_groups cimport group_boxes
from ..cdefs cimport CG_ROI_BOTH, CG_ROI_COLS_ONLY, CG_ROI_ROWS_ONLY
from ..types cimport image_t, layout_t, nchw_t, nhwc_t

from .channels cimport mean, pixel, pool, tangent
from .plan cimport (
    NCHW_CHANNELS,
    TAP_BYTES,
    TASKS_PER_THREAD,
    BoxTaps,
    RoiPlan,
    RoiProblem,
    box_taps,
    channel_ranges,
    col_tap,
    row_tap,
    store,
)
from .sampling cimport RoiAxis, RoiTap, real_t
from .tiles cimport fill_tile, part_of, plan_tiles, store_planes


# The op tags.
ctypedef struct pool_t:
    char unused
ctypedef struct tangent_t:
    char unused
ctypedef fused op_t:
    pool_t
    tangent_t


cdef inline real_t rate(const RoiAxis* a, const RoiTap* t, real_t t_lo,
                        real_t t_hi) noexcept nogil:
    """How fast sample `t` moves along the tangent: ``t_lo * dc/dlo + t_hi *
    dc/dhi`` (the first term alone when the size is held)."""
    if a.size_held:
        return t_lo * <real_t>t.f_lo
    return (t_lo * <real_t>t.f_lo) + (t_hi * <real_t>t.f_hi)


cdef inline void _tangent_terms(real_t* acc, const image_t* img, int half,
                                Py_ssize_t cs, Py_ssize_t o1, Py_ssize_t o2,
                                Py_ssize_t o3, Py_ssize_t o4, real_t hy, real_t ly,
                                real_t hx, real_t lx, real_t rate_y, real_t rate_x,
                                int axes, Py_ssize_t n) noexcept nogil:
    """The JVP's terms of one sample, channels `cs` apart, one at a time
    (channels.tangent's expressions)."""
    cdef Py_ssize_t c
    cdef const image_t* q
    cdef real_t v1, v2, v3, v4
    for c in range(n):
        q = img + c * cs
        v1 = pixel(q, o1, half, acc)
        v2 = pixel(q, o2, half, acc)
        v3 = pixel(q, o3, half, acc)
        v4 = pixel(q, o4, half, acc)
        if axes == CG_ROI_ROWS_ONLY:
            acc[c] = acc[c] + (((hx * (v3 - v1)) + (lx * (v4 - v2))) * rate_y)
        elif axes == CG_ROI_COLS_ONLY:
            acc[c] = acc[c] + (((hy * (v2 - v1)) + (ly * (v4 - v3))) * rate_x)
        else:
            acc[c] = acc[c] + ((((hx * (v3 - v1)) + (lx * (v4 - v2))) * rate_y)
                               + (((hy * (v2 - v1)) + (ly * (v4 - v3))) * rate_x))


cdef inline void bin_value(const RoiPlan* p, const BoxTaps* b, Py_ssize_t ph,
                           Py_ssize_t pw, const image_t* img, int half,
                           Py_ssize_t ps, Py_ssize_t cs, Py_ssize_t n, real_t* acc,
                           op_t* op) noexcept nogil:
    """``acc[c]``, ``c < n``: bin (ph, pw) of box ``b.box``, its mean (pool_t)
    or its derivative along the box's tangent (tangent_t), from `img`
    (pixels `ps` apart, channels `cs` apart)."""
    cdef Py_ssize_t W = p.g.width, iy, ix, c, o1, o2, o3, o4
    cdef RoiTap ys, xs
    cdef const RoiTap* ty
    cdef const RoiTap* tx
    cdef real_t w1, w2, w3, w4, v, hy = 0, ly = 0, rate_y = 0
    cdef real_t count = <real_t>b.count
    cdef const real_t* t = NULL
    cdef const real_t* q
    cdef int axes
    # Channels side by side in the arithmetic type: the SIMD loops.
    cdef bint side_by_side = False
    if image_t is float:
        if real_t is float:
            side_by_side = cs == 1
    elif image_t is double:
        if real_t is double:
            side_by_side = cs == 1
    if op_t is tangent_t:
        t = <const real_t*>p.tangent + 4 * b.box
    for c in range(n):
        acc[c] = 0
    for iy in range(b.rows.grid):
        ty = row_tap(b, ph, iy, &ys, acc)
        if not ty.inside:
            continue  # reads no pixel (torchvision adds 0 * pixel 0)
        if op_t is tangent_t:
            # tangent: [t_x1, t_y1, t_x2, t_y2]
            rate_y = rate(&b.rows, ty, t[1], t[3])
            hy, ly = <real_t>ty.rest, <real_t>ty.lerp
        for ix in range(b.cols.grid):
            tx = col_tap(b, pw, ix, &xs, acc)
            if not tx.inside:
                continue
            o1 = (ty.low * W + tx.low) * ps
            o2 = (ty.low * W + tx.high) * ps
            o3 = (ty.high * W + tx.low) * ps
            o4 = (ty.high * W + tx.high) * ps
            if op_t is pool_t:
                w1 = <real_t>ty.rest * <real_t>tx.rest
                w2 = <real_t>ty.rest * <real_t>tx.lerp
                w3 = <real_t>ty.lerp * <real_t>tx.rest
                w4 = <real_t>ty.lerp * <real_t>tx.lerp
                if side_by_side:
                    q = <const real_t*>img
                    pool(acc, q + o1, q + o2, q + o3, q + o4, w1, w2, w3, w4, n)
                    continue
                for c in range(n):
                    # torchvision's order: ((w1 v1 + w2 v2) + w3 v3) + w4 v4.
                    v = (((w1 * pixel(img + c * cs, o1, half, acc)
                           + w2 * pixel(img + c * cs, o2, half, acc))
                          + w3 * pixel(img + c * cs, o3, half, acc))
                         + w4 * pixel(img + c * cs, o4, half, acc))
                    acc[c] = acc[c] + v
            else:
                # An axis a clamp holds has no slope: its term is left out,
                # not added as 0 (an infinite rate would make it NaN).
                if ty.held and tx.held:
                    continue
                axes = (CG_ROI_ROWS_ONLY if tx.held else
                        CG_ROI_COLS_ONLY if ty.held else CG_ROI_BOTH)
                if side_by_side:
                    q = <const real_t*>img
                    tangent(acc, q + o1, q + o2, q + o3, q + o4, hy, ly,
                            <real_t>tx.rest, <real_t>tx.lerp, rate_y,
                            rate(&b.cols, tx, t[0], t[2]), axes, n)
                else:
                    _tangent_terms(acc, img, half, cs, o1, o2, o3, o4, hy, ly,
                                   <real_t>tx.rest, <real_t>tx.lerp, rate_y,
                                   rate(&b.cols, tx, t[0], t[2]), axes, n)
    mean(acc, count, n)


cdef inline void box_task(const RoiPlan* p, const image_t* image, int half,
                          Py_ssize_t task, int thread, real_t* kind,
                          layout_t* layout, op_t* op) noexcept nogil:
    """Task `task` read where the image is: the bins of box ``task //
    ranges``, channel range ``task % ranges``."""
    cdef const RoiProblem* g = p.g
    cdef Py_ssize_t k = task // p.ranges
    cdef Py_ssize_t c0 = (task % p.ranges) * p.range_size
    cdef Py_ssize_t n = min(p.range_size, g.channels - c0)
    cdef Py_ssize_t C = g.channels, H = g.height, W = g.width
    cdef Py_ssize_t ph, pw, c, at
    # Strides of a pixel and a channel in the image, of a channel in the
    # output.
    cdef Py_ssize_t ps = C, cs = 1, out_cs = 1
    cdef char* scratch = p.scratch + <size_t>thread * p.scratch_each
    cdef real_t* acc = <real_t*>(scratch + TAP_BYTES)
    cdef BoxTaps b
    if layout_t is nchw_t:
        ps, cs, out_cs = 1, H * W, g.out_h * g.out_w
    box_taps(p, k, <RoiTap*>scratch, &b, kind)
    for ph in range(g.out_h):
        for pw in range(g.out_w):
            bin_value(p, &b, ph, pw, image + p.box_ind[k] * H * W * C + c0 * cs,
                      half, ps, cs, n, acc, op)
            if layout_t is nchw_t:
                at = ((k * C + c0) * g.out_h + ph) * g.out_w + pw
            else:
                at = ((k * g.out_h + ph) * g.out_w + pw) * C + c0
            for c in range(n):
                store(p.out, at + c * out_cs, p.out_dtype, acc[c])


cdef inline void tile_task(const RoiPlan* p, const image_t* image, int half,
                           Py_ssize_t task, int thread, real_t* kind,
                           op_t* op) noexcept nogil:
    """Task `task` through a tile: part ``task % parts`` of the boxes of
    image ``task // (parts * groups)``, on channel group ``task // parts %
    groups``, a block of bin rows at a time, each block written to its
    planes."""
    cdef const RoiProblem* g = p.g
    cdef Py_ssize_t parts = p.tiles.parts, groups = p.tiles.groups
    cdef Py_ssize_t part = task % parts, group = task // parts % groups
    cdef Py_ssize_t bi = task // (parts * groups)
    cdef Py_ssize_t C = g.channels, HW = g.height * g.width
    cdef Py_ssize_t c0 = group * p.tiles.channels
    cdef Py_ssize_t n = min(p.tiles.channels, C - c0)
    cdef Py_ssize_t oh = g.out_h, ow = g.out_w, rows = p.tiles.block_rows
    cdef Py_ssize_t j, j0, j1, k, ph0, ph, pw, m
    cdef char* scratch = p.scratch + <size_t>thread * p.scratch_each
    cdef real_t* tile = <real_t*>(scratch + TAP_BYTES)
    cdef real_t* computed = <real_t*>(scratch + TAP_BYTES + p.tiles.tile_bytes)
    cdef BoxTaps b
    part_of(p.starts, bi, part, parts, &j0, &j1)
    if j0 == j1:
        return
    fill_tile(tile, image + (bi * C + c0) * HW, half, HW, HW, n)
    for j in range(j0, j1):
        k = p.order[j]
        box_taps(p, k, <RoiTap*>scratch, &b, kind)
        ph0 = 0
        while ph0 < oh:
            m = min(rows, oh - ph0)
            for ph in range(ph0, ph0 + m):
                for pw in range(ow):
                    bin_value(p, &b, ph, pw, <const real_t*>tile, half, n, 1, n,
                              computed + ((ph - ph0) * ow + pw) * n, op)
            store_planes(p.out, p.out_dtype, ((k * C + c0) * oh + ph0) * ow,
                         oh * ow, computed, m * ow, n)
            ph0 += m


cdef inline void typed_task(const RoiPlan* p, const image_t* image, int half,
                            Py_ssize_t t, int thread, op_t* op) noexcept nogil:
    """Task `t` of op `op` for an image of C type image_t: float64 images
    in double, every other dtype in float."""
    if image_t is double:
        if p.tiled:
            tile_task(p, image, half, t, thread, <double*>NULL, op)
        elif p.g.nchw:
            box_task(p, image, half, t, thread, <double*>NULL, <nchw_t*>NULL, op)
        else:
            box_task(p, image, half, t, thread, <double*>NULL, <nhwc_t*>NULL, op)
    else:
        if p.tiled:
            tile_task(p, image, half, t, thread, <float*>NULL, op)
        elif p.g.nchw:
            box_task(p, image, half, t, thread, <float*>NULL, <nchw_t*>NULL, op)
        else:
            box_task(p, image, half, t, thread, <float*>NULL, <nhwc_t*>NULL, op)


cdef inline int run_bins(RoiPlan* p, int nthreads, bint flush, task_fn task,
                         Py_ssize_t cost, size_t* failed) noexcept nogil:
    """Plan and run the tasks of `p` (its problem, arrays and output set;
    `task`: the op's run_tasks callback; `cost`: its work per output
    element, in element updates); 0, or -1 when the scratch could not be
    allocated (`failed`: its bytes; nothing written)."""
    cdef const RoiProblem* g = p.g
    cdef size_t itemsize = sizeof(double) if g.double_arith else sizeof(float)
    cdef size_t tables = 0, each, nbytes
    cdef Py_ssize_t images = 0, i, tasks
    cdef char* block = NULL
    cdef int64_t* order = NULL
    p.tiled = False
    if g.nchw:
        # Boxes grouped by image, for tiles.
        tables = round64(<size_t>(g.num_boxes + g.batch + 1) * sizeof(int64_t))
        order = <int64_t*>malloc(tables)
        if order == NULL:
            failed[0] = tables
            return -1
        group_boxes(p.box_ind, g.num_boxes, g.batch, order, order + g.num_boxes)
        p.order = order
        p.starts = order + g.num_boxes
        for i in range(g.batch):
            images += p.starts[i + 1] > p.starts[i]
        if g.double_arith:
            p.tiled = plan_tiles(p, images, nthreads, True, &p.tiles, <double*>NULL)
        else:
            p.tiled = plan_tiles(p, images, nthreads, True, &p.tiles, <float*>NULL)
    if p.tiled:
        # Each thread's table of a box's samples, its tile, its bins.
        each = TAP_BYTES + p.tiles.tile_bytes + round64(
            <size_t>(p.tiles.block_rows * g.out_w * p.tiles.channels) * itemsize)
        tasks = g.batch * p.tiles.groups * p.tiles.parts
    else:
        # Each thread's table of a box's samples and its sums of one bin.
        channel_ranges(p, g.num_boxes, nthreads, NCHW_CHANNELS if g.nchw else 0,
                       TASKS_PER_THREAD)
        each = TAP_BYTES + round64(<size_t>p.range_size * itemsize)
        tasks = g.num_boxes * p.ranges
    p.scratch_each = each
    nbytes = each * <size_t>nthreads + 64
    block = <char*>malloc(nbytes)
    if block == NULL:
        free(order)
        failed[0] = nbytes
        return -1
    p.scratch = align64(block)
    run_tasks(task, p, tasks, nthreads,
              g.num_boxes * g.out_h * g.out_w * g.channels * cost, flush,
              SCHEDULE_DYNAMIC)
    free(block)
    free(order)
    return 0
