# cython: language_level=3
"""The forward op in NCHW: image [batch, depth, height, width], crops
[num_boxes, depth, crop_h, crop_w] (private kernel, run by `forward`).

A crop row reads a few pixels of every plane, a plane apart: read where
they are, every pixel is a scalar load from a cache line of its own (and a
page of its own), and a sample's channels cannot share a vector.  So a
task owns a group of up to ``TILE_CHANNELS`` planes of one image (a band
of its rows, when the planes are large): it first gathers those rows into
a per-thread tile whose pixels hold the group's channels side by side,
reading each plane once, in order; then, for every crop row of the image's
boxes whose top pixel row lies in the band, it computes the group's
channels of each sample with NHWC's vector loop over channels and writes
them to their planes.  Each output element is computed once, by the same
float32 expression on the same float32 pixel values as in NHWC (the tile
holds the pixels converted as the NHWC kernel converts them), so the
crops are the NHWC crops transposed, bit for bit, for any thread count.

Every crop row of a group is written by one task: the band holding its top
row, or, for a crop row outside the image, the group's first band.
"""

from libc.stdint cimport int64_t
from libc.stdlib cimport free, malloc
from libc.string cimport memcpy

from cropgrad._runtime import tuning as _tuning

from cropgrad._runtime.parallel cimport SCHEDULE_DYNAMIC, run_tasks, team_size
from cropgrad._runtime.simd cimport chosen_target

from ..aligned cimport align64, round64
from ..box_groups cimport group_boxes
from ..cdefs cimport (
    cg_lerp_row,
    cg_planes_gather,
    cg_copy_streaming,
    cg_planes_scatter_f,
    cg_pages_resident,
    cg_planes_scatter_runs_f,
    cg_stream_fence,
    cg_simd_select,
)
from ..pixels cimport load
from ..types cimport image_t
from .geometry cimport Geometry

from .sampling cimport crop_scale, linear_taps, nearest_tap, sample_coord

include "../image_dtypes.pxi"


# Channels of a tile: a vector loop's worth of lanes several times over.
cdef enum:
    TILE_CHANNELS = 32
# Bytes of a tile: it stays in the core's (L2) cache while the task walks
# the image's boxes.
cdef enum:
    TILE_BYTES = 1 << 19
# Crop columns computed at a time, in a band of an image's planes.
cdef enum:
    COLUMN_CHUNK = 64
# Bytes of crop rows computed at a time when the tile holds whole planes:
# then the block's channels are written as runs of whole crop rows.
cdef enum:
    BLOCK_BYTES = 1 << 15

# Crops of this many bytes or more are written with streaming stores (see
# cropgrad._runtime.tuning.stream_bytes: larger than the last-level cache),
# when their pages are in memory already (cg_pages_resident).  A result
# that size leaves the caches before anyone reads it, and storing around
# them saves reading each line from memory first: the detector's 100 MB of
# crops into a reused `out=` took 7.1 ms instead of 10.3 (2 threads, the
# Xeon).  Into pages that fault in as they are written (a result just
# allocated) streaming stores took longer than ordinary ones: 22 ms instead
# of 16.
cdef size_t STREAM_BYTES = _tuning.stream_bytes()


def use_stream_bytes(size_t nbytes):
    """Set the streaming threshold (the tests try both ways); returns the
    previous one."""
    global STREAM_BYTES
    previous = STREAM_BYTES
    STREAM_BYTES = nbytes
    return previous


ctypedef struct ForwardNchwPlan:
    const Geometry* g
    const void* image
    int image_dtype
    const float* boxes
    const int64_t* box_ind
    float* crops
    float extrapolation
    bint stream             # crops written around the caches (see STREAM_BYTES)
    int64_t* order          # boxes grouped by image, serial order within
    int64_t* starts         # boxes of image i: order[starts[i]:starts[i + 1]]
    Py_ssize_t channels     # planes per group (the last group may have fewer)
    Py_ssize_t groups
    Py_ssize_t band_rows    # pixel rows per band (the tile holds one more)
    Py_ssize_t bands        # bands per image
    Py_ssize_t block_rows   # crop rows computed at a time (one band only)
    char* scratch           # per thread: the tile, the computed values,
    size_t scratch_each     # then the same values plane by plane
    # each of the two areas after the tile; then a box's column taps
    size_t computed_bytes


ctypedef struct ColumnTaps:
    # A box's crop columns, found once for all its crop rows and channel
    # groups: left pixel (-1: outside the image), right pixel, weight
    Py_ssize_t* left
    Py_ssize_t* right
    float* lerp


# This module's plane transposes run on the instruction set the runtime chose for the
# process (each module holds its own pointers to the clones of cg_simd.h).
cg_simd_select(chosen_target())


cdef void _fill_tile(const ForwardNchwPlan* p, const image_t* planes, int half,
                     float* tile, Py_ssize_t r0, Py_ssize_t r1,
                     Py_ssize_t n) noexcept nogil:
    """Rows ``[r0, r1)`` of `n` planes (``planes``, a plane apart) as
    ``tile[((r - r0) * width + w) * n + c]``, converted to float32 as
    the NHWC kernel converts pixels."""
    cdef Py_ssize_t W = p.g.width, HW = p.g.height * p.g.width, r, w, c
    cdef float* dst
    cdef const image_t* src
    for r in range(r0, r1):
        dst = tile + (r - r0) * W * n
        if image_t is float:
            cg_planes_gather(dst, planes + r * W, HW, W, n)
        else:
            for c in range(n):
                src = planes + c * HW + r * W
                for w in range(W):
                    dst[w * n + c] = load(src, w, half)


cdef ColumnTaps _taps_area(const ForwardNchwPlan* p, float* computed) noexcept nogil:
    """The thread's ColumnTaps arrays, after its two computed areas."""
    cdef ColumnTaps taps
    cdef char* area = <char*>computed + 2 * p.computed_bytes
    taps.left = <Py_ssize_t*>area
    taps.right = taps.left + p.g.crop_w
    taps.lerp = <float*>(taps.right + p.g.crop_w)
    return taps


cdef void _column_taps(const ForwardNchwPlan* p, Py_ssize_t b,
                       ColumnTaps* taps) noexcept nogil:
    """Box `b`'s column taps, as `_crop_row` reads them."""
    # (left and right start at 0: a tap outside the image leaves them.)
    cdef Py_ssize_t W = p.g.width, cw = p.g.crop_w, x, left = 0, right = 0
    cdef float x1 = p.boxes[4 * b + 1], x2 = p.boxes[4 * b + 3]
    cdef float wscale = crop_scale(x1, x2, W, cw), x_lerp = 0, coord
    cdef bint inside
    for x in range(cw):
        coord = sample_coord(x1, x2, wscale, W, cw, x)
        if p.g.nearest:
            inside = nearest_tap(coord, W, &left)
            right = left
        else:
            inside = linear_taps(coord, W, &left, &right, &x_lerp)
        taps.left[x] = left if inside else -1
        taps.right[x] = right
        taps.lerp[x] = x_lerp


cdef void _crop_row(const ForwardNchwPlan* p, const float* tile, Py_ssize_t r0,
                    float* computed, const ColumnTaps* taps, Py_ssize_t b,
                    Py_ssize_t y, Py_ssize_t top, Py_ssize_t bottom, float y_lerp,
                    Py_ssize_t c0, Py_ssize_t n, bint write) noexcept nogil:
    """Channels ``[c0, c0 + n)`` of crop row `y` of box `b` (whose column
    taps are `taps`), whose pixel rows `top` and `bottom` are in the tile
    (row r at ``r - r0``), into ``computed[x * n + c]`` (then into the
    crops, `write` or not)."""
    cdef Py_ssize_t W = p.g.width, D = p.g.depth, ch = p.g.crop_h, cw = p.g.crop_w
    cdef Py_ssize_t x0 = 0, m, i, c, left
    cdef float extrapolation = p.extrapolation
    cdef const float* row_t = tile + (top - r0) * W * n
    cdef const float* row_b = tile + (bottom - r0) * W * n
    cdef float* out
    cdef float* dst = p.crops + ((b * D + c0) * ch + y) * cw
    while x0 < cw:
        # Written column chunk by column chunk; or the whole row, left for
        # the caller to write.
        m = min(<Py_ssize_t>COLUMN_CHUNK, cw - x0) if write else cw
        out = computed + x0 * n if not write else computed
        if not p.g.nearest:
            # NHWC's samples (cg_lerp.h), on the tile's side-by-side channels.
            cg_lerp_row(out, n, row_t, row_b, n, taps.left + x0, taps.right + x0,
                        taps.lerp + x0, m, y_lerp, extrapolation, n)
        else:
            for i in range(m):
                left = taps.left[x0 + i]
                for c in range(n):
                    out[i * n + c] = extrapolation if left < 0 else row_t[left * n + c]
        if write:
            cg_planes_scatter_runs_f(dst + x0, ch * cw, computed, m, n)
        x0 += m


cdef void _rows(const ForwardNchwPlan* p, const float* tile, float* computed,
                Py_ssize_t b, Py_ssize_t c0, Py_ssize_t n) noexcept nogil:
    """Every crop row of box `b`, channels ``[c0, c0 + n)``, from a tile of
    whole planes: computed a block of crop rows at a time, then written as
    one contiguous run per channel."""
    cdef Py_ssize_t H = p.g.height, D = p.g.depth, ch = p.g.crop_h, cw = p.g.crop_w
    cdef Py_ssize_t y0 = 0, m, y, i, top, bottom
    cdef float y1 = p.boxes[4 * b], y2 = p.boxes[4 * b + 2]
    cdef float hscale = crop_scale(y1, y2, H, ch), coord, y_lerp
    cdef float* row
    cdef float* planes = computed + p.computed_bytes // sizeof(float)
    cdef float* dst
    cdef bint inside
    cdef ColumnTaps taps = _taps_area(p, computed)
    _column_taps(p, b, &taps)
    while y0 < ch:
        m = min(p.block_rows, ch - y0)
        for y in range(y0, y0 + m):
            row = computed + (y - y0) * cw * n
            coord = sample_coord(y1, y2, hscale, H, ch, y)
            y_lerp = 0
            if p.g.nearest:
                inside = nearest_tap(coord, H, &top)
                bottom = top
            else:
                inside = linear_taps(coord, H, &top, &bottom, &y_lerp)
            if inside:
                _crop_row(p, tile, 0, row, &taps, b, y, top, bottom, y_lerp, c0, n,
                          False)
            else:
                for i in range(cw * n):
                    row[i] = p.extrapolation
        # Side-by-side channels to planes in blocks (the SIMD clone's
        # transposes, in cache), then each plane's run stored in one go:
        # the strided reads of a plane-at-a-time scatter took longer than
        # computing the samples.
        cg_planes_scatter_f(planes, m * cw, computed, m * cw, n)
        dst = p.crops + ((b * D + c0) * ch + y0) * cw
        if m == ch:
            # The whole crop at once: the group's planes are one run.
            if p.stream:
                cg_copy_streaming(dst, planes, n * ch * cw)
            else:
                memcpy(dst, planes, <size_t>(n * ch * cw) * sizeof(float))
        else:
            for i in range(n):
                memcpy(dst + i * ch * cw, planes + i * m * cw,
                       <size_t>(m * cw) * sizeof(float))
        y0 += m


cdef void _outside_row(const ForwardNchwPlan* p, Py_ssize_t b, Py_ssize_t y,
                       Py_ssize_t c0, Py_ssize_t n) noexcept nogil:
    """Channels ``[c0, c0 + n)`` of a crop row outside the image."""
    cdef Py_ssize_t ch = p.g.crop_h, cw = p.g.crop_w, c, x
    cdef float* dst = p.crops + ((b * p.g.depth + c0) * ch + y) * cw
    for c in range(n):
        for x in range(cw):
            dst[c * ch * cw + x] = p.extrapolation


cdef void _typed_task(const void* ctx, const image_t* image, int half,
                      Py_ssize_t t, int thread) noexcept nogil:
    """Task `t`: band ``t % bands`` of group ``t // bands % groups`` of
    image ``t // (bands * groups)``."""
    cdef const ForwardNchwPlan* p = <const ForwardNchwPlan*>ctx
    cdef Py_ssize_t H = p.g.height, W = p.g.width, D = p.g.depth, ch = p.g.crop_h
    cdef Py_ssize_t band = t % p.bands, group = t // p.bands % p.groups
    cdef Py_ssize_t bi = t // (p.bands * p.groups)
    cdef Py_ssize_t r0 = band * p.band_rows, r1 = min(r0 + p.band_rows, H)
    cdef Py_ssize_t c0 = group * p.channels, n = min(p.channels, D - c0)
    cdef Py_ssize_t j, b, y, top, bottom
    cdef float y1, y2, hscale, coord, y_lerp
    cdef bint inside
    cdef ColumnTaps taps
    cdef float* tile = <float*>(p.scratch + <size_t>thread * p.scratch_each)
    cdef float* computed = tile + round64(
        <size_t>((p.band_rows + 1) * W * p.channels) * sizeof(float)) // sizeof(float)
    if r0 >= r1 or n <= 0 or p.starts[bi] == p.starts[bi + 1]:
        return
    # The band's rows and the row below it (the bottom pixels of its last
    # crop rows).
    _fill_tile(p, image + (bi * D + c0) * H * W, half, tile, r0, min(r1 + 1, H), n)
    if p.bands == 1:
        for j in range(p.starts[bi], p.starts[bi + 1]):
            _rows(p, tile, computed, p.order[j], c0, n)
        cg_stream_fence()
        return
    taps = _taps_area(p, computed)
    for j in range(p.starts[bi], p.starts[bi + 1]):
        b = p.order[j]
        _column_taps(p, b, &taps)
        y1 = p.boxes[4 * b]
        y2 = p.boxes[4 * b + 2]
        hscale = crop_scale(y1, y2, H, ch)
        for y in range(ch):
            coord = sample_coord(y1, y2, hscale, H, ch, y)
            y_lerp = 0
            if p.g.nearest:
                inside = nearest_tap(coord, H, &top)
                bottom = top
            else:
                inside = linear_taps(coord, H, &top, &bottom, &y_lerp)
            if not inside:
                if band == 0:
                    _outside_row(p, b, y, c0, n)
            elif r0 <= top < r1:
                _crop_row(p, tile, r0, computed, &taps, b, y, top, bottom, y_lerp,
                          c0, n, True)


cdef void _task(void* ctx, Py_ssize_t t, int thread) noexcept nogil:
    """Task `t`, of the image's dtype."""
    cdef const ForwardNchwPlan* p = <const ForwardNchwPlan*>ctx
    _image_task(ctx, p.image, p.image_dtype, t, thread)


cdef int crop_and_resize_nchw(const Geometry* geo, const void* image,
                              int image_dtype, const float* boxes,
                              const int64_t* box_ind, float* crops,
                              float extrapolation, int nthreads, bint flush,
                              size_t* failed) noexcept nogil:
    """Crop boxes out of an NCHW image and resize them (see the module).

    Parameters
    ----------
    geo : the problem (``geo.nchw``); ``num_boxes * crop_h * crop_w * depth > 0``.
    image : [batch, depth, height, width] of `image_dtype` (a CG_ code).
    boxes : float32 [num_boxes, 4], finite
    box_ind : int64 [num_boxes], within [0, batch)
    crops : float32 [num_boxes, depth, crop_h, crop_w]; every element written.
    failed : out: the bytes that could not be allocated, on failure.

    Returns
    -------
    int
        0, or -1 when scratch could not be allocated (nothing written).
    """
    cdef ForwardNchwPlan p
    cdef Py_ssize_t W = geo.width, D = geo.depth, num_tasks, team, fit
    cdef size_t nbytes, tables
    cdef char* memory
    p.g = geo
    p.image = image
    p.image_dtype = image_dtype
    p.boxes = boxes
    p.box_ind = box_ind
    p.crops = crops
    p.extrapolation = extrapolation
    nbytes = <size_t>geo.num_boxes * geo.crop_h * geo.crop_w * D * sizeof(float)
    p.stream = nbytes >= STREAM_BYTES and cg_pages_resident(crops, nbytes) != 0
    # Channels per group: at most TILE_CHANNELS, fewer where two rows of
    # them would not fit the tile; then as many rows per band as fit.
    p.channels = min(D, <Py_ssize_t>TILE_CHANNELS)
    fit = <Py_ssize_t>(TILE_BYTES // (2 * <size_t>W * sizeof(float)))
    if p.channels > fit:
        p.channels = max(fit, 1)
    p.groups = (D + p.channels - 1) // p.channels
    # Whole planes where they fit; else bands, each with the row below it.
    p.band_rows = <Py_ssize_t>(TILE_BYTES // (<size_t>(W * p.channels) * sizeof(float)))
    if p.band_rows >= geo.height:
        p.band_rows = geo.height
    else:
        p.band_rows = max(p.band_rows - 1, 1)
    p.bands = (geo.height + p.band_rows - 1) // p.band_rows
    p.block_rows = max(<Py_ssize_t>(BLOCK_BYTES // (<size_t>(geo.crop_w * p.channels)
                                                    * sizeof(float))), 1)
    num_tasks = geo.batch * p.groups * p.bands
    team = team_size(nthreads, num_tasks)
    p.computed_bytes = round64(
        <size_t>(max(<Py_ssize_t>COLUMN_CHUNK, p.block_rows * geo.crop_w) * p.channels)
        * sizeof(float))
    p.scratch_each = (
        round64(<size_t>((p.band_rows + 1) * W * p.channels) * sizeof(float))
        + 2 * p.computed_bytes
        + round64(<size_t>geo.crop_w * (2 * sizeof(Py_ssize_t) + sizeof(float))))
    tables = round64(<size_t>(geo.num_boxes + geo.batch + 1) * sizeof(int64_t))
    nbytes = tables + p.scratch_each * <size_t>team + 64
    memory = <char*>malloc(nbytes)
    if memory == NULL:
        failed[0] = nbytes
        return -1
    p.order = <int64_t*>memory
    p.starts = p.order + geo.num_boxes
    p.scratch = align64(memory + tables)
    group_boxes(box_ind, geo.num_boxes, geo.batch, p.order, p.starts)
    run_tasks(_task, &p, num_tasks, team,
              geo.num_boxes * geo.crop_h * geo.crop_w * D * 4, flush,
              SCHEDULE_DYNAMIC)
    free(memory)
    return 0
