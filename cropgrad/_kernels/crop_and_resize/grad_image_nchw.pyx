# cython: language_level=3
"""The image gradient in NCHW: the plan of the tiles or planes
(`plan_nchw`) and the tasks `grad_image.grad_image` runs when the output
is ``[batch, depth, height, width]`` (private kernel).

Each (image, channel) plane of the output is independent work: its elements
receive only the samples of that image's boxes in that channel.  A task
owns a band of rows of one or more planes, zeroes it, and walks the image's
boxes, crop rows, crop columns and corners in the serial order, applying
the updates that land in its band: every element is summed by one thread in
the serial order, with the same float32 products as in NHWC, so the result
is the NHWC result transposed, bit for bit, for any number of threads.
Updates of a crop row that fall outside the band go to scratch pixels, so
every element is updated by the same machine code for any banding (even
the bits of NaN results agree).

The channels of a pixel are a plane apart here, where NHWC has them side by
side for its vector loops; two ways through, chosen by the depth alone
(never by the thread count):

planes (depth 1 to 4)
    A task owns a band of rows of every plane: the walk of NHWC's shallow
    pixels, with the channels of a pixel in the lanes of one vector loaded
    from and stored to their planes (cg_shallow_rows.inc).
tiles (depth above 4)
    A task owns a band of rows of a group of up to ``TILE_CHANNELS``
    planes, accumulated ``tile_rows`` rows at a time (whole images where
    they fit) in a per-thread tile whose pixels hold the group's channels
    side by side.  The four corner updates of a sample are then NHWC's
    vector loop (`scatter_row`), on the sample's grads gathered out of
    their planes: for each box, the crop rows that touch the tile, a block
    at a time, each plane's part a contiguous run.  The finished tile rows
    are written to their planes (rounded to float16 there).  The tile only
    changes where the partial sums live: each output element is written
    once.  Walking the planes one at a time instead would be a scalar loop:
    NHWC's walk over one-channel pixels costs about 5 times as much per
    element as its vector loop over 256 channels.  While a box is
    scattered, the next box's grads are asked for, a few cache lines per
    sample: gathering waits on memory, scattering does not.
"""

from libc.string cimport memset

from cropgrad._runtime import tuning as _tuning

from cropgrad._runtime.simd cimport chosen_target

from ..aligned cimport round64
from ..cdefs cimport (
    cg_planes_gather,
    cg_planes_scatter_bf,
    cg_planes_scatter_d,
    cg_planes_scatter_f,
    cg_planes_scatter_h,
    cg_ahead,
    cg_ask,
    cg_shallow_rows_d_planes,
    cg_shallow_rows_f_planes,
    cg_simd_select,
)
from ..types cimport acc_t
from .geometry cimport Geometry

from .grad_image_plan cimport (
    GradImagePlan,
    round_half,
    scatter_one,
    scatter_row,
)

# Channels of a tile: enough for the vector loop over them to run at full
# width, few enough to leave tasks for the threads.
cdef enum:
    TILE_CHANNELS = 64
# Bytes of a tile: it stays in the core's (L2) cache while the task walks
# the boxes.  Whole images of a channel group where they fit: then a box's
# grads are gathered once per group.  From the cache sizes, read when this
# module is imported (cropgrad/_runtime/tuning.py; use_tile_bytes changes
# it, for the tests); it never changes the bits.
cdef size_t TILE_BYTES = max(<size_t>_tuning.tuning()["tile_bytes"], <size_t>1)
# Bytes of grads gathered at a time: the crop rows of a box that touch the
# tile, read plane by plane as contiguous runs.
cdef enum:
    STAGE_BYTES = 1 << 14


cdef size_t use_tile_bytes(size_t nbytes) noexcept nogil:
    """Tiles of about `nbytes` from now on; returns the previous size."""
    global TILE_BYTES
    cdef size_t previous = TILE_BYTES
    TILE_BYTES = max(nbytes, <size_t>1)
    return previous


# This module's deep scatter (the tiles' corner updates) and plane
# transposes run on the instruction set the runtime chose for the process
# (each module holds its own pointers to the clones of cg_simd.h).
cg_simd_select(chosen_target())


cdef Py_ssize_t tile_channels(Py_ssize_t width, Py_ssize_t depth,
                              size_t acc_size) noexcept nogil:
    """Channels per tile: groups of at most ``TILE_CHANNELS``, about equal,
    a multiple of 4 when there are several, and one tile row within
    ``TILE_BYTES`` where the width allows."""
    cdef Py_ssize_t groups = (depth + TILE_CHANNELS - 1) // TILE_CHANNELS
    cdef Py_ssize_t k = (depth + groups - 1) // groups, fit
    if groups > 1:
        k = (k + 3) // 4 * 4
    fit = <Py_ssize_t>(TILE_BYTES // (<size_t>width * acc_size))
    if k > fit:
        k = max(fit, 1)
    return min(k, depth)


cdef Py_ssize_t tile_rows(Py_ssize_t width, Py_ssize_t channels,
                          size_t acc_size) noexcept nogil:
    """Output rows a tile of `channels` channels holds (at least one)."""
    return max(<Py_ssize_t>(TILE_BYTES // (<size_t>(width * channels) * acc_size)), 1)


cdef Py_ssize_t stage_rows(Py_ssize_t crop_w, Py_ssize_t channels) noexcept nogil:
    """Crop rows of grads gathered at a time (at least one)."""
    cdef size_t row_bytes = <size_t>(crop_w * channels) * sizeof(float)
    return max(<Py_ssize_t>(STAGE_BYTES // row_bytes), 1)


cdef size_t tile_scratch(Py_ssize_t width, Py_ssize_t crop_w, Py_ssize_t channels,
                         Py_ssize_t rows, Py_ssize_t staged,
                         size_t acc_size) noexcept nogil:
    """Bytes of one thread's scratch: the tile of `rows` rows, `staged` crop
    rows of gathered grads and two spare pixels, each on whole cache lines."""
    return (round64(<size_t>(rows * width * channels) * acc_size)
            + round64(<size_t>(staged * crop_w * channels) * sizeof(float))
            + round64(<size_t>(2 * channels) * acc_size))


cdef bint plan_nchw(GradImagePlan* p, size_t acc_size, Py_ssize_t* channels,
                    Py_ssize_t* groups, size_t* scratch) noexcept nogil:
    """The NCHW part of `p`'s plan (its geometry set), chosen by the
    geometry alone: True for tiles (more than 4 channels), with
    ``p.tile_rows``, ``p.stage_rows``, the `channels` of a group, the
    `groups` and each thread's `scratch` bytes set; False for planes, with
    none of the three out-arguments touched.  `acc_size`: bytes of an
    accumulated element."""
    cdef const Geometry* g = &p.g
    p.tile_rows = 0
    p.stage_rows = 0
    if g.depth <= 4:
        return False
    channels[0] = tile_channels(g.width, g.depth, acc_size)
    groups[0] = (g.depth + channels[0] - 1) // channels[0]
    # No more rows than the output has: the tile is scratch per thread.
    p.tile_rows = min(tile_rows(g.width, channels[0], acc_size), g.batch * g.height)
    p.stage_rows = stage_rows(g.crop_w, channels[0])
    # Each thread's tile, staged grads and spare pixels.
    scratch[0] = tile_scratch(g.width, g.crop_w, channels[0], p.tile_rows,
                              p.stage_rows, acc_size)
    return True


# --------------------------------------------------------------------------
# Planes: depth 1 to 4

cdef void _planes_rows(acc_t* top, Py_ssize_t top_step, Py_ssize_t top_lane,
                       acc_t* bottom, Py_ssize_t bottom_step,
                       Py_ssize_t bottom_lane, const float* g, Py_ssize_t g_lane,
                       const Py_ssize_t* col_lo, const Py_ssize_t* col_hi,
                       const float* w_left, const float* w_right,
                       Py_ssize_t crop_w, Py_ssize_t width, float w_top,
                       float w_bottom, bint same, Py_ssize_t n) noexcept nogil:
    """One crop row of bilinear samples into `n` planes (see cg_shallow.h).

    Called from one place only, for every crop row whichever of its rows
    the task owns.
    """
    if acc_t is float:
        cg_shallow_rows_f_planes(top, top_step, top_lane, bottom, bottom_step,
                                 bottom_lane, g, g_lane, col_lo, col_hi, w_left,
                                 w_right, crop_w, width, w_top, w_bottom, same, n)
    else:
        cg_shallow_rows_d_planes(top, top_step, top_lane, bottom, bottom_step,
                                 bottom_lane, g, g_lane, col_lo, col_hi, w_left,
                                 w_right, crop_w, width, w_top, w_bottom, same, n)


cdef void _planes_band(GradImagePlan* p, acc_t* out, Py_ssize_t g0,
                       Py_ssize_t g1) noexcept nogil:
    """Zero global rows ``[g0, g1)`` of every plane, then scatter every
    sample's updates that land there, in the serial order."""
    cdef Py_ssize_t H = p.g.height, W = p.g.width, D = p.g.depth, HW = H * W
    cdef Py_ssize_t ch = p.g.crop_h, cw = p.g.crop_w, g_lane = ch * cw
    cdef Py_ssize_t bi, r0, r1, d, j, b, y, k, x, top, bottom, col
    cdef bint do_top, do_bottom, own_bottom
    cdef acc_t spare[4]   # a row the task does not own: one scratch pixel
    cdef acc_t* planes
    cdef acc_t* row
    cdef const float* g
    cdef const float* gd
    memset(spare, 0, sizeof(spare))
    for bi in range(g0 // H, (g1 - 1) // H + 1):
        r0 = max(g0 - bi * H, 0)
        r1 = min(g1 - bi * H, H)
        planes = out + bi * D * HW
        for d in range(D):
            memset(planes + d * HW + r0 * W, 0, (r1 - r0) * W * sizeof(acc_t))
        for j in range(p.starts[bi], p.starts[bi + 1]):
            b = p.order[j]
            if p.box_row_max[b] < r0 or p.box_row_min[b] >= r1:
                continue
            for y in range(ch):
                k = b * ch + y
                top = p.row_lo[k]
                if top < 0:
                    continue
                bottom = p.row_hi[k]
                do_top = r0 <= top < r1
                do_bottom = (not p.g.nearest) and r0 <= bottom < r1
                if not (do_top or do_bottom):
                    continue
                g = p.grads + (b * D * ch + y) * cw
                if p.g.nearest:
                    for d in range(D):
                        row = planes + d * HW + top * W
                        gd = g + d * g_lane
                        for x in range(cw):
                            col = p.col_lo[b * cw + x]
                            if col >= 0:
                                scatter_one(row + col, gd + x, 1)
                    continue
                # A row not owned, or the bottom row when it is the top
                # row, is the scratch pixel (step 0, lanes side by side).
                own_bottom = do_bottom and bottom != top
                _planes_rows(planes + top * W if do_top else spare,
                             1 if do_top else 0, HW if do_top else 1,
                             planes + bottom * W if own_bottom else spare,
                             1 if own_bottom else 0, HW if own_bottom else 1,
                             g, g_lane, p.col_lo + b * cw, p.col_hi + b * cw,
                             p.col_w_lo + b * cw, p.col_w_hi + b * cw, cw, W,
                             p.row_w_lo[k], p.row_w_hi[k], top == bottom, D)


cdef void planes_task(void* ctx, Py_ssize_t t, int thread) noexcept nogil:
    """Task `t`: band `t` of every plane (depth 1 to 4)."""
    cdef GradImagePlan* p = <GradImagePlan*>ctx
    cdef Py_ssize_t g0 = p.bounds[t], g1 = p.bounds[t + 1]
    cdef Py_ssize_t H = p.g.height, W = p.g.width, D = p.g.depth
    cdef Py_ssize_t bi, d, start, stop
    cdef float* acc
    if g0 >= g1:
        return
    if p.acc_double:
        _planes_band(p, <double*>p.acc, g0, g1)
        return
    acc = <float*>p.acc
    _planes_band(p, acc, g0, g1)
    if p.half_out == NULL:
        return
    # Round the finished band while it is in cache.
    for bi in range(g0 // H, (g1 - 1) // H + 1):
        for d in range(D):
            start = (bi * D + d) * H * W + max(g0 - bi * H, 0) * W
            stop = (bi * D + d) * H * W + min(g1 - bi * H, H) * W
            round_half(p, p.half_out + start, acc + start, stop - start)


# --------------------------------------------------------------------------
# Tiles: depth above 4

cdef void _tile_rows(GradImagePlan* p, acc_t* tile, float* stage, acc_t* spare,
                     Py_ssize_t s, Py_ssize_t e, Py_ssize_t c0,
                     Py_ssize_t n) noexcept nogil:
    """Accumulate global rows ``[s, e)`` of channels ``[c0, c0 + n)`` in
    `tile` (row ``r`` at ``tile + (r - s) * width * n``), zeroed first."""
    cdef Py_ssize_t H = p.g.height, W = p.g.width, D = p.g.depth
    cdef Py_ssize_t ch = p.g.crop_h, cw = p.g.crop_w, g_lane = ch * cw
    cdef Py_ssize_t row_size = W * n
    cdef Py_ssize_t bi, r0, r1, j, b, y, y0, y_lo, y_hi, m, k, x, top, bottom
    cdef Py_ssize_t col, nj, ahead = 0, ny_lo, ny_hi
    cdef cg_ahead next_box
    cdef bint do_top, do_bottom
    cdef acc_t* top_row = NULL
    cdef acc_t* bottom_row = NULL
    cdef const float* g
    memset(&next_box, 0, sizeof(next_box))
    memset(tile, 0, (e - s) * row_size * sizeof(acc_t))
    for bi in range(s // H, (e - 1) // H + 1):
        r0 = max(s - bi * H, 0)
        r1 = min(e - bi * H, H)
        for j in range(p.starts[bi], p.starts[bi + 1]):
            b = p.order[j]
            if p.box_row_max[b] < r0 or p.box_row_min[b] >= r1:
                continue
            # The crop rows with a row in the tile: gathered from their
            # planes a block at a time, as contiguous runs.
            y_lo = ch
            y_hi = -1
            for y in range(ch):
                if _touches(p, b * ch + y, r0, r1):
                    y_lo = min(y_lo, y)
                    y_hi = y
            # Gathering waits on memory, the scatter does not: while this
            # box is scattered, ask for the next box's grads a few cache
            # lines per sample, so that its gathering finds them in cache.
            nj = j + 1
            while nj < p.starts[bi + 1] and (p.box_row_max[p.order[nj]] < r0
                                             or p.box_row_min[p.order[nj]] >= r1):
                nj += 1
            next_box.runs = 0
            ahead = 0
            if nj < p.starts[bi + 1] and y_hi >= y_lo:
                # Just the next box's crop rows that touch the tile.
                ny_lo = ch
                ny_hi = -1
                for y in range(ch):
                    if _touches(p, p.order[nj] * ch + y, r0, r1):
                        ny_lo = min(ny_lo, y)
                        ny_hi = y
                if ny_hi >= ny_lo:
                    next_box.start = (p.grads
                                      + ((p.order[nj] * D + c0) * ch + ny_lo) * cw)
                    next_box.lane = g_lane
                    next_box.length = (ny_hi - ny_lo + 1) * cw
                    next_box.runs = n
                    next_box.run = next_box.pos = 0
                    ahead = (n * ((next_box.length + 15) // 16)
                             + (y_hi - y_lo + 1) * cw - 1) // ((y_hi - y_lo + 1) * cw)
            y0 = y_lo
            while y0 <= y_hi:
                m = min(p.stage_rows, y_hi + 1 - y0)
                cg_planes_gather(stage, p.grads + ((b * D + c0) * ch + y0) * cw,
                                 g_lane, m * cw, n)
                for y in range(y0, y0 + m):
                    k = b * ch + y
                    if not _touches(p, k, r0, r1):
                        continue
                    top = p.row_lo[k]
                    bottom = p.row_hi[k]
                    do_top = r0 <= top < r1
                    do_bottom = (not p.g.nearest) and r0 <= bottom < r1
                    if do_top:
                        top_row = tile + (bi * H + top - s) * row_size
                    if do_bottom:
                        bottom_row = tile + (bi * H + bottom - s) * row_size
                    g = stage + (y - y0) * cw * n
                    if p.g.nearest:
                        for x in range(cw):
                            col = p.col_lo[b * cw + x]
                            if col >= 0:
                                cg_ask(&next_box, ahead)
                                scatter_one(top_row + col * n, g + x * n, n)
                        continue
                    # A row outside the tile goes to the spare pixels (NULL
                    # row): every sample is applied by the same code, owned
                    # rows or not.
                    scatter_row(p, b, k, top_row if do_top else NULL,
                                bottom_row if do_bottom else NULL, spare, n, g,
                                top == bottom, n, 0, &next_box, ahead)
                y0 += m


cdef inline bint _touches(const GradImagePlan* p, Py_ssize_t k, Py_ssize_t r0,
                          Py_ssize_t r1) noexcept nogil:
    """Whether crop row `k` (box * crop_h + row) updates rows ``[r0, r1)``."""
    cdef Py_ssize_t top = p.row_lo[k]
    if top < 0:
        return False
    if r0 <= top < r1:
        return True
    return (not p.g.nearest) and r0 <= p.row_hi[k] < r1


cdef void _tile_write(GradImagePlan* p, const acc_t* tile, Py_ssize_t s, Py_ssize_t e,
                      Py_ssize_t c0, Py_ssize_t n) noexcept nogil:
    """Write tile rows ``[s, e)`` to their planes (float16: rounded)."""
    cdef Py_ssize_t H = p.g.height, W = p.g.width, D = p.g.depth, r, bi, dst
    cdef const acc_t* src
    for r in range(s, e):
        bi = r // H
        src = tile + (r - s) * W * n
        dst = ((bi * D + c0) * H + r - bi * H) * W
        if acc_t is double:
            cg_planes_scatter_d(<double*>p.acc + dst, H * W, src, W, n)
        elif p.half_out != NULL and p.bfloat16_out:
            cg_planes_scatter_bf(p.half_out + dst, H * W, src, W, n)
        elif p.half_out != NULL:
            cg_planes_scatter_h(p.half_out + dst, H * W, src, W, n)
        else:
            cg_planes_scatter_f(<float*>p.acc + dst, H * W, src, W, n)


cdef void _tile_band(GradImagePlan* p, acc_t* tile, Py_ssize_t g0, Py_ssize_t g1,
                     Py_ssize_t c0, Py_ssize_t c1, char* scratch) noexcept nogil:
    """Rows ``[g0, g1)`` of channels ``[c0, c1)``, a tile at a time."""
    cdef Py_ssize_t n = c1 - c0, W = p.g.width, s = g0, e
    cdef size_t tile_bytes = round64(<size_t>(p.tile_rows * W * n) * sizeof(acc_t))
    cdef float* stage = <float*>(scratch + tile_bytes)
    cdef acc_t* spare = <acc_t*>(scratch + tile_bytes + round64(
        <size_t>(p.stage_rows * p.g.crop_w * n) * sizeof(float)))
    memset(spare, 0, 2 * n * sizeof(acc_t))
    while s < g1:
        e = min(s + p.tile_rows, g1)
        _tile_rows(p, tile, stage, spare, s, e, c0, n)
        _tile_write(p, tile, s, e, c0, n)
        s = e


cdef void tiles_task(void* ctx, Py_ssize_t t, int thread) noexcept nogil:
    """Task `t`: band ``t // num_splits`` of channel group ``t % num_splits``
    (depth above 4), in thread `thread`'s scratch."""
    cdef GradImagePlan* p = <GradImagePlan*>ctx
    cdef Py_ssize_t g0 = p.bounds[t // p.num_splits]
    cdef Py_ssize_t g1 = p.bounds[t // p.num_splits + 1]
    cdef Py_ssize_t c0 = p.splits[t % p.num_splits]
    cdef Py_ssize_t c1 = p.splits[t % p.num_splits + 1]
    cdef char* scratch = p.spare + <size_t>thread * p.spare_each
    if g0 >= g1 or c1 <= c0:
        return
    if p.acc_double:
        _tile_band(p, <double*>scratch, g0, g1, c0, c1, scratch)
    else:
        _tile_band(p, <float*>scratch, g0, g1, c0, c1, scratch)
