# cython: language_level=3
"""The image gradient, CropAndResizeGradImage (private kernel).

Trusts its arguments: the gate (cropgrad/_capi) checks shapes, box indices
and finiteness first.

Determinism
-----------
Every crop sample scatters into up to four pixels.  The work is split into
tasks that each *own* a band of output rows (and, when there are few rows,
a range of channels).  A task zeroes its band, then walks the boxes, crop
rows, crop columns and corners in the serial order and applies only the
updates that land in its band, so every output element is summed by one
thread in the serial order: the bits do not depend on the number of
threads.  Updates of a crop row that fall outside the band go to per-thread
scratch pixels instead of being skipped, so every element is updated by the
same machine code for any banding (even the bits of NaN results agree).

The planning (sampling tables, bands) serves both layouts; the NCHW part
of the plan (tiles or planes, `plan_nchw`) and the NCHW tasks are in
`grad_image_nchw`.
"""

from libc.stdint cimport int64_t, uint16_t
from libc.stdlib cimport free, malloc
from libc.string cimport memset

from cropgrad._runtime import tuning as _tuning

from cropgrad._runtime.parallel cimport (
    SCHEDULE_DYNAMIC,
    run_tasks,
    serial_work,
    team_size,
)
from cropgrad._runtime.simd cimport chosen_target
from cropgrad.capi cimport CG_BFLOAT16, CG_FLOAT16, CG_FLOAT64

from ..aligned cimport Carving, carve, carve_allocate, carve_count, round64
from ..box_groups cimport group_boxes
from ..cdefs cimport (
    cg_fpenv_enter,
    cg_fpenv_leave,
    cg_shallow_rows_d,
    cg_shallow_rows_f,
    cg_simd_select,
)
from ..types cimport acc_t
from .geometry cimport Geometry

from .grad_image_nchw cimport (
    plan_nchw,
    planes_task,
    tiles_task,
    use_tile_bytes,
)
from .grad_image_plan cimport (
    GradImagePlan,
    MAX_BUCKETS,
    cap_bands,
    plan_bands,
    plan_taps,
    round_half,
    scatter_one,
    scatter_row,
)

# The machine-dependent sizes (cropgrad/_runtime/tuning.py, from the cache
# sizes, read when this module is imported; grad_image_nchw reads its own).
# None of them changes the bits.
#
# Bands per thread of a team: more, smaller bands balance better (they are
# handed out dynamically) at the cost of walking the boxes again.
cdef Py_ssize_t TASKS_PER_THREAD = 4
# Target size of an output band: the rows a task accumulates into should
# stay in the core's cache while it walks the boxes.
cdef size_t BAND_BYTES = 1 << 20
# How far ahead of the sample being scattered to ask for grads, in bytes,
# for pixels of at least PREFETCH_MIN_DEPTH channels.  grads is read once,
# in order, yet without the hint the scatter of deep pixels keeps waiting
# for it (detector workload: 1.4x faster with it on a 2 MiB-L2 Xeon, where
# with 32 or 64 channels the hint only costs time; on a 1 MiB-L2 EPYC it
# pays from 16 channels).
cdef Py_ssize_t PREFETCH_BYTES = 2048
cdef Py_ssize_t PREFETCH_MIN_DEPTH = 128
# Channel ranges per thread when a problem has fewer rows than that.
cdef enum:
    SPLITS_PER_THREAD = 4
# Channel ranges of split tasks are multiples of this many elements, so two
# threads never write the same 64-byte cache line within a pixel.
cdef enum:
    CHANNEL_ALIGN = 16


# This module's deep scatter run on the instruction set the runtime chose for the
# process (each module holds its own pointers to the clones of cg_simd.h).
cg_simd_select(chosen_target())


def tuning():
    """The machine-dependent sizes in use (see cropgrad._runtime.tuning)."""
    cdef size_t tile_bytes = use_tile_bytes(0)
    use_tile_bytes(tile_bytes)
    return {"band_bytes": BAND_BYTES, "tasks_per_thread": TASKS_PER_THREAD,
            "prefetch_bytes": PREFETCH_BYTES,
            "prefetch_min_depth": PREFETCH_MIN_DEPTH, "tile_bytes": tile_bytes}


cdef void _use_sizes(sizes) except *:
    """This module's sizes from `sizes` (the keys of `tuning`)."""
    global BAND_BYTES, TASKS_PER_THREAD, PREFETCH_BYTES, PREFETCH_MIN_DEPTH
    BAND_BYTES = max(<size_t>sizes["band_bytes"], <size_t>1)
    TASKS_PER_THREAD = max(<Py_ssize_t>sizes["tasks_per_thread"], 1)
    PREFETCH_BYTES = max(<Py_ssize_t>sizes["prefetch_bytes"], 0)
    PREFETCH_MIN_DEPTH = max(<Py_ssize_t>sizes["prefetch_min_depth"], 1)


def use_tuning(sizes):
    """Use `sizes` (the keys of `tuning`, the NCHW tiles' too) from now on;
    returns the previous ones.  For the tests and for measuring other
    choices: no choice changes the bits.  Not thread-safe: no call may run
    meanwhile."""
    previous = tuning()
    _use_sizes(sizes)
    use_tile_bytes(<size_t>sizes["tile_bytes"])
    return previous


_use_sizes(_tuning.tuning())


cdef void _shallow_rows(acc_t* top, Py_ssize_t top_step,
                        acc_t* bottom, Py_ssize_t bottom_step,
                        const float* g,
                        const Py_ssize_t* col_lo, const Py_ssize_t* col_hi,
                        const float* w_left, const float* w_right,
                        Py_ssize_t crop_w, Py_ssize_t width,
                        float w_top, float w_bottom, bint same,
                        Py_ssize_t n) noexcept nogil:
    """One crop row of bilinear samples with `n` (1 to 4) channels.

    See cg_shallow.h.  Called from one place only, and for every crop row
    whichever of its rows the task owns: each element is then updated by
    the same machine code for any banding.
    """
    if acc_t is float:
        cg_shallow_rows_f(top, top_step, bottom, bottom_step, g, col_lo, col_hi,
                          w_left, w_right, crop_w, width, w_top, w_bottom, same, n)
    else:
        cg_shallow_rows_d(top, top_step, bottom, bottom_step, g, col_lo, col_hi,
                          w_left, w_right, crop_w, width, w_top, w_bottom, same, n)


cdef inline void _scatter_row(GradImagePlan* p, acc_t* top_row, acc_t* bottom_row,
                              const float* g, Py_ssize_t b, Py_ssize_t k,
                              Py_ssize_t n, bint do_top, bint do_bottom,
                              bint same, acc_t* spare,
                              Py_ssize_t ahead) noexcept nogil:
    """Crop row ``k`` of box `b`, sample by sample, into the owned rows.

    `ahead`: 0, or how far ahead of each sample to ask for grads (it
    depends only on the depth).  `spare` holds two pixels (``2 * depth``
    elements) for a row outside the band (NULL when every row is owned):
    bilinear samples then go through the same code, owned rows or not.
    `same`: the two rows are one.
    """
    cdef Py_ssize_t x, col, cw = p.g.crop_w, D = p.g.depth
    if p.g.nearest:
        for x in range(cw):
            col = p.col_lo[b * cw + x]
            if col >= 0:
                scatter_one(top_row + col * D, g + x * D, n)
        return
    scatter_row(p, b, k, top_row if do_top else NULL,
                bottom_row if do_bottom else NULL, spare, D, g,
                same, n, ahead, NULL, 0)


cdef void _accumulate_band(GradImagePlan* p, acc_t* out, Py_ssize_t g0, Py_ssize_t g1,
                           Py_ssize_t c0, Py_ssize_t c1,
                           acc_t* deep_spare, Py_ssize_t row0) noexcept nogil:
    """Zero global output rows ``[g0, g1)``, channels ``[c0, c1)``, then
    scatter every sample's updates that land there, in the serial order.
    Global row ``r`` is at ``out + (r - row0) * width * depth``."""
    cdef Py_ssize_t H = p.g.height, W = p.g.width, D = p.g.depth
    cdef Py_ssize_t ch = p.g.crop_h, cw = p.g.crop_w, n = c1 - c0
    cdef Py_ssize_t bi, r0, r1, r, x, j, b, y, k, top, bottom
    cdef acc_t shallow_spare[4]   # a row a shallow task does not own
    cdef bint do_top, do_bottom, own_bottom
    # Bilinear samples of 1 to 4 channels go a whole crop row at a time.
    # (Channel ranges are only split in multiples of CHANNEL_ALIGN, so a
    # shallow task always has every channel: n == D.)
    cdef bint shallow = not p.g.nearest and n == D and D <= 4
    # Deep pixels: prefetch the task's channels of the sample about
    # PREFETCH_BYTES ahead, at least the next one.
    cdef Py_ssize_t ahead = 0
    if D >= PREFETCH_MIN_DEPTH:
        ahead = max(PREFETCH_BYTES // (D * <Py_ssize_t>sizeof(float)), 1) * D
    cdef acc_t* top_row
    cdef acc_t* bottom_row
    cdef const float* g
    memset(shallow_spare, 0, sizeof(shallow_spare))
    if deep_spare != NULL:
        memset(deep_spare, 0, 2 * D * sizeof(acc_t))
    for bi in range(g0 // H, (g1 - 1) // H + 1):
        r0 = max(g0 - bi * H, 0)
        r1 = min(g1 - bi * H, H)
        # Zero the band here, not in the caller: the owner thread touches
        # its pages first and the work is spread over the threads.
        for r in range(r0, r1):
            top_row = out + (bi * H + r - row0) * W * D
            if n == D:
                memset(top_row, 0, W * D * sizeof(acc_t))
            else:
                for x in range(W):
                    memset(top_row + x * D + c0, 0, n * sizeof(acc_t))
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
                # (Rows outside the band: no pointer, they may be outside
                # a band's scratch.)
                top_row = out + ((bi * H + top - row0) * W) * D + c0 \
                    if do_top else NULL
                bottom_row = out + ((bi * H + bottom - row0) * W) * D + c0 \
                    if do_bottom else NULL
                g = p.grads + ((b * ch + y) * cw) * D + c0
                if shallow:
                    # A row not owned, or the bottom row when it is the top
                    # row, is the scratch pixel.
                    own_bottom = do_bottom and bottom != top
                    _shallow_rows(top_row if do_top else shallow_spare,
                                  D if do_top else 0,
                                  bottom_row if own_bottom else shallow_spare,
                                  D if own_bottom else 0, g,
                                  p.col_lo + b * cw, p.col_hi + b * cw,
                                  p.col_w_lo + b * cw, p.col_w_hi + b * cw,
                                  cw, W, p.row_w_lo[k], p.row_w_hi[k],
                                  top == bottom, D)
                    continue
                _scatter_row(p, top_row, bottom_row, g, b, k, n, do_top,
                             do_bottom, top == bottom, deep_spare, ahead)


cdef void _task(void* ctx, Py_ssize_t t, int thread) noexcept nogil:
    """Task `t`: one band of rows and one range of channels (see GradImagePlan)."""
    cdef GradImagePlan* p = <GradImagePlan*>ctx
    cdef Py_ssize_t g0 = p.bounds[t // p.num_splits]
    cdef Py_ssize_t g1 = p.bounds[t // p.num_splits + 1]
    cdef Py_ssize_t c0 = p.splits[t % p.num_splits]
    cdef Py_ssize_t c1 = p.splits[t % p.num_splits + 1]
    cdef Py_ssize_t W = p.g.width, D = p.g.depth, pixel, row0 = 0
    cdef char* spare = NULL
    cdef float* acc
    if g0 >= g1 or c1 <= c0:
        return
    if p.spare != NULL:
        spare = p.spare + thread * p.spare_each
    if p.acc_double:
        _accumulate_band(p, <double*>p.acc, g0, g1, c0, c1, <double*>spare, 0)
        return
    acc = <float*>p.acc
    if p.acc_each > 0:
        # The thread's float32 scratch holds this band only.
        acc = <float*>(<char*>p.acc + <size_t>thread * p.acc_each)
        row0 = g0
    _accumulate_band(p, acc, g0, g1, c0, c1, <float*>spare, row0)
    if p.half_out != NULL:
        for pixel in range(g0 * W, g1 * W):
            round_half(p, p.half_out + pixel * D + c0,
                       acc + (pixel - row0 * W) * D + c0, c1 - c0)


ctypedef struct Tasks:
    # How the output is cut into tasks (chosen by _plan_tasks).
    bint tiles                # NCHW tiles of channel groups (else planes, or NHWC)
    Py_ssize_t channels       # NCHW: channels per group
    Py_ssize_t groups         # NCHW: channel groups (1 otherwise)
    size_t tile_each          # NCHW tiles: scratch per thread
    int nthreads              # upper bound on the team
    int team                  # threads that will run
    Py_ssize_t num_bands      # bands of output rows
    Py_ssize_t max_rows       # float16/bfloat16 NHWC: rows per band at most (0: any)
    Py_ssize_t extra          # bands that cap may add
    Py_ssize_t slots          # entries of the plan's `splits`


cdef void _plan_tasks(GradImagePlan* p, Tasks* k, bint half,
                      size_t acc_size) noexcept nogil:
    """Bands (and NCHW channel groups) for `k.nthreads` threads, the scratch
    pixels of each thread; fills `k` and ``p.spare_each``."""
    cdef const Geometry* geo = &p.g
    cdef Py_ssize_t rows = geo.batch * geo.height, per_thread
    cdef size_t out_bytes = <size_t>(rows * geo.width * geo.depth) * acc_size
    # Bands small enough that the rows being accumulated stay in cache, and
    # enough of them to balance the threads.  Tiles bound their own working
    # set, and their channel groups are tasks too: they take one task per
    # thread (the bands balanced by their samples), since every band walks
    # the boxes and gathers the crop rows it touches again (dense workload,
    # 2 threads: 4 bands per thread cost 1.15 times one).
    per_thread = 1 if k.tiles else TASKS_PER_THREAD
    # A call whose work is surely below serial_work() (every sample counted
    # on two rows, plus the zeroing) runs on the calling thread anyway:
    # plan it for one thread, without the bands a team would need.
    if (<int64_t>geo.num_boxes * geo.crop_h * geo.crop_w * 16
            + rows * geo.width) * geo.depth < serial_work():
        k.nthreads = 1
    k.num_bands = <Py_ssize_t>(out_bytes // BAND_BYTES) if not k.tiles else 1
    if (k.nthreads > 1
            and k.num_bands * k.groups < <Py_ssize_t>k.nthreads * per_thread):
        k.num_bands = (<Py_ssize_t>k.nthreads * per_thread + k.groups - 1) // k.groups
    k.num_bands = max(1, min(k.num_bands, rows))
    k.team = team_size(k.nthreads, rows * geo.depth)
    # float16 and bfloat16 NHWC: bands of at most about BAND_BYTES of
    # float32, each accumulated in its thread's scratch, so that the scratch
    # stays small however large the output.
    k.max_rows = 0
    if half and not geo.nchw:
        k.max_rows = max(<Py_ssize_t>(BAND_BYTES // (<size_t>(geo.width * geo.depth)
                                                     * sizeof(float))), 1)
        if k.max_rows >= rows:
            k.max_rows = 0
    p.spare_each = 0
    if k.tiles:
        p.spare_each = k.tile_each
    elif ((k.num_bands > 1 or k.max_rows > 0) and not geo.nearest
          and geo.depth > 4):
        # With several bands, each thread gets two pixels of scratch for
        # deep samples (bilinear, more than 4 channels) whose crop row has
        # a row outside the task's band.  Where those would outweigh the
        # output (a few huge pixels), one band instead: channel ranges
        # still split it.  Whole cache lines per thread: no false sharing.
        p.spare_each = round64(2 * geo.depth * acc_size)
        if p.spare_each * k.team > out_bytes:
            k.num_bands = 1
            p.spare_each = 0
            k.max_rows = 0
    k.extra = rows // k.max_rows + 1 if k.max_rows > 0 else 0
    k.slots = max(2 * k.nthreads + 2, k.groups + 1)


cdef void _lay_out(GradImagePlan* p, Carving* c, const Tasks* k,
                   int64_t** cost) noexcept nogil:
    """Carve the plan's tables out of `c`: 4 entries per (box, crop row),
    4 per (box, crop column), 3 per box, the grouping of boxes, the band and
    split bounds, the cost histogram (`cost`) and the scratch pixels."""
    cdef Py_ssize_t N = p.g.num_boxes, rows = p.g.batch * p.g.height
    cdef size_t n_rows = <size_t>(N * p.g.crop_h), n_cols = <size_t>(N * p.g.crop_w)
    p.row_lo = <Py_ssize_t*>carve(c, n_rows * sizeof(Py_ssize_t))
    p.row_hi = <Py_ssize_t*>carve(c, n_rows * sizeof(Py_ssize_t))
    p.col_lo = <Py_ssize_t*>carve(c, n_cols * sizeof(Py_ssize_t))
    p.col_hi = <Py_ssize_t*>carve(c, n_cols * sizeof(Py_ssize_t))
    p.row_w_lo = <float*>carve(c, n_rows * sizeof(float))
    p.row_w_hi = <float*>carve(c, n_rows * sizeof(float))
    p.col_w_lo = <float*>carve(c, n_cols * sizeof(float))
    p.col_w_hi = <float*>carve(c, n_cols * sizeof(float))
    p.box_row_min = <Py_ssize_t*>carve(c, <size_t>N * sizeof(Py_ssize_t))
    p.box_row_max = <Py_ssize_t*>carve(c, <size_t>N * sizeof(Py_ssize_t))
    p.box_cols = <Py_ssize_t*>carve(c, <size_t>N * sizeof(Py_ssize_t))
    p.bounds = <Py_ssize_t*>carve(
        c, <size_t>(k.num_bands + k.extra + 1) * sizeof(Py_ssize_t))
    p.splits = <Py_ssize_t*>carve(c, <size_t>k.slots * sizeof(Py_ssize_t))
    p.order = <int64_t*>carve(c, <size_t>N * sizeof(int64_t))
    p.starts = <int64_t*>carve(c, <size_t>(p.g.batch + 1) * sizeof(int64_t))
    cost[0] = <int64_t*>carve(c, <size_t>min(rows, MAX_BUCKETS) * sizeof(int64_t))
    p.spare = <char*>carve(c, p.spare_each * k.team) if p.spare_each > 0 else NULL


cdef void* _half_accumulator(GradImagePlan* p, Tasks* k,
                             size_t* nbytes) noexcept nogil:
    """The float32 accumulator of a float16 or bfloat16 NHWC output: per
    thread, of the longest band, or (where that is no smaller) of the whole
    output.  NULL when it cannot be allocated (`nbytes` says how much)."""
    cdef Py_ssize_t longest = 0, b
    cdef size_t whole = <size_t>(p.g.batch * p.g.height * p.g.width * p.g.depth)
    nbytes[0] = whole * sizeof(float)
    if k.max_rows > 0:
        k.num_bands = cap_bands(p.bounds, k.num_bands, k.max_rows)
        for b in range(k.num_bands):
            longest = max(longest, p.bounds[b + 1] - p.bounds[b])
        p.acc_each = round64(<size_t>(longest * p.g.width * p.g.depth) * sizeof(float))
        if p.acc_each * k.team < nbytes[0]:
            nbytes[0] = p.acc_each * k.team
        else:
            p.acc_each = 0
    return malloc(nbytes[0])


cdef void _run(GradImagePlan* p, const Tasks* k, Py_ssize_t work,
               bint flush) noexcept nogil:
    """The tasks: bands times channel ranges (NHWC) or channel groups
    (NCHW tiles or planes)."""
    cdef const Geometry* geo = &p.g
    cdef Py_ssize_t rows = geo.batch * geo.height, s
    if geo.nchw:
        # Channel groups of tiles (one group of every plane otherwise).
        p.num_splits = k.groups
        for s in range(k.groups + 1):
            p.splits[s] = min(s * k.channels, geo.depth)
        run_tasks(tiles_task if k.tiles else planes_task, p,
                  k.num_bands * k.groups, k.nthreads, work, flush,
                  SCHEDULE_DYNAMIC)
        return
    # Few rows but deep pixels: split channels too, in aligned ranges.
    p.num_splits = 1
    if k.nthreads > 1 and rows < <Py_ssize_t>k.nthreads * SPLITS_PER_THREAD:
        p.num_splits = min(
            (<Py_ssize_t>k.nthreads * SPLITS_PER_THREAD + rows - 1) // rows,
            geo.depth // CHANNEL_ALIGN,
            2 * k.nthreads + 1)
        if p.num_splits < 1:
            p.num_splits = 1
    for s in range(p.num_splits + 1):
        p.splits[s] = (geo.depth * s // p.num_splits) // CHANNEL_ALIGN * CHANNEL_ALIGN
    p.splits[p.num_splits] = geo.depth
    run_tasks(_task, p, k.num_bands * p.num_splits, k.nthreads, work, flush,
              SCHEDULE_DYNAMIC)


cdef int grad_image(const Geometry* geo, const float* grads, const float* boxes,
                    const int64_t* box_ind, void* out, int out_dtype,
                    int nthreads, bint flush, size_t* failed) noexcept nogil:
    """Gradient of crop-and-resize with respect to the image.

    Parameters
    ----------
    geo : the problem; ``batch * height * width * depth > 0``.
    grads : float32 [num_boxes, crop_h, crop_w, depth]
        ([num_boxes, depth, crop_h, crop_w] when ``geo.nchw``)
    boxes : float32 [num_boxes, 4], finite
    box_ind : int64 [num_boxes], within [0, batch)
    out : [batch, height, width, depth] of `out_dtype` (CG_FLOAT32,
        CG_FLOAT64, or CG_FLOAT16 and CG_BFLOAT16: accumulated in float32,
        rounded once); overwritten.  ([batch, depth, height, width] when
        ``geo.nchw``: see grad_image_nchw)
    nthreads : upper bound on the team (resolved).
    flush : flush-to-zero and denormals-are-zero.
    failed : out: the bytes that could not be allocated, on failure.

    Returns
    -------
    int
        0, or -1 when scratch memory could not be allocated (nothing was
        written then).

    The steps: the tasks (`_plan_tasks`), the tables (`_lay_out`, one
    allocation), the sampling tables and bands (`plan_taps`,
    `plan_bands`), the float32 accumulator of a float16 or bfloat16 output
    (`_half_accumulator`), the tasks run (`_run`).
    """
    cdef GradImagePlan p
    cdef Tasks k
    cdef Carving tables
    cdef int64_t* cost
    cdef Py_ssize_t work
    cdef size_t acc_bytes = 0
    cdef bint half = out_dtype == CG_FLOAT16 or out_dtype == CG_BFLOAT16
    cdef size_t acc_size = sizeof(double) if out_dtype == CG_FLOAT64 else sizeof(float)
    cdef size_t out_elems = <size_t>(geo.batch * geo.height * geo.width * geo.depth)
    if geo.num_boxes == 0:
        # No sample: zeros, without the tables or the float32 accumulator of
        # a float16 or bfloat16 output (for a huge image, a whole image of
        # scratch).  All-zero bytes are +0.0 in every output dtype, the bits
        # the tasks' zeroing and rounding give.
        memset(out, 0, out_elems * (2 if half else acc_size))
        return 0
    p.g = geo[0]
    p.acc_double = out_dtype == CG_FLOAT64
    p.grads = grads
    p.grads_size = geo.num_boxes * geo.crop_h * geo.crop_w * geo.depth
    p.tile_rows = 0
    p.stage_rows = 0
    p.acc = out
    p.acc_each = 0
    p.half_out = NULL
    p.bfloat16_out = out_dtype == CG_BFLOAT16
    if half:
        p.half_out = <uint16_t*>out
        # NCHW tiles round into the output as they write it; NHWC
        # accumulates in float32 scratch (_half_accumulator).
        p.acc = NULL
    k.tiles = False
    k.channels = 0
    k.groups = 1
    k.tile_each = 0
    k.nthreads = nthreads
    if geo.nchw:
        # Tiles of channel groups (more than 4 channels) or whole planes:
        # grad_image_nchw plans them.
        k.tiles = plan_nchw(&p, acc_size, &k.channels, &k.groups, &k.tile_each)
    _plan_tasks(&p, &k, half, acc_size)

    carve_count(&tables)
    _lay_out(&p, &tables, &k, &cost)
    if carve_allocate(&tables) != 0:
        failed[0] = tables.size
        return -1
    _lay_out(&p, &tables, &k, &cost)

    group_boxes(box_ind, geo.num_boxes, geo.batch, p.order, p.starts)
    cg_fpenv_enter(flush)
    plan_taps(&p, boxes)
    cg_fpenv_leave(flush)
    work = plan_bands(&p, k.num_bands, cost) * geo.depth
    if half and not k.tiles:
        p.acc = _half_accumulator(&p, &k, &acc_bytes)
        if p.acc == NULL:
            free(tables.block)
            failed[0] = acc_bytes
            return -1
    _run(&p, &k, work, flush)
    if acc_bytes > 0:
        free(p.acc)
    free(tables.block)
    return 0
