# cython: language_level=3
#
# The plan of an image-gradient call (its sampling tables and bands, made
# by grad_image.pyx for both layouts) and the updates of one sample, shared
# by its NHWC tasks (grad_image.pyx) and its NCHW tasks
# (grad_image_nchw.pyx): both layouts add the same terms the same way.

from libc.stdint cimport int64_t, uint16_t

from ..cdefs cimport (
    cg_ahead,
    cg_float_to_bfloat16,
    cg_round_half,
    cg_row_d,
    cg_row_f,
)
from ..types cimport acc_t
from .geometry cimport Geometry

from .sampling cimport crop_scale, linear_taps, nearest_tap, sample_coord


ctypedef struct GradImagePlan:
    Geometry g
    # The accumulator (the output itself, or float32 scratch for a float16
    # output; NULL for NCHW tiles, which accumulate in their own scratch)
    void* acc
    # 0, or (NHWC float16 and bfloat16 output) ``acc`` is per-thread
    # scratch of this many bytes holding only the band of the task at hand
    size_t acc_each
    bint acc_double
    # float16 or bfloat16 output (or NULL): each task rounds its finished
    # float32 band into it while the band is still in cache.
    uint16_t* half_out
    bint bfloat16_out        # half_out holds bfloat16, not float16
    const float* grads
    Py_ssize_t grads_size    # elements of grads
    int64_t* order           # box numbers grouped by image, serial order within
    int64_t* starts          # boxes of image i: order[starts[i]:starts[i + 1]]
    # Per box and crop row: pixel rows and weights (row < 0: outside)
    Py_ssize_t* row_lo
    Py_ssize_t* row_hi
    float* row_w_lo
    float* row_w_hi
    # Per box and crop column: pixel columns and weights (col < 0: outside)
    Py_ssize_t* col_lo
    Py_ssize_t* col_hi
    float* col_w_lo
    float* col_w_hi
    # Per box: the range of pixel rows it touches and its valid columns
    Py_ssize_t* box_row_min
    Py_ssize_t* box_row_max
    Py_ssize_t* box_cols
    # Per thread, ``spare_each`` bytes of scratch (64-byte aligned).  NHWC:
    # two pixels where a deep sample sends the updates of a row outside the
    # task's band (NULL with a single band).  NCHW tiles: the tile, the
    # staged grads of a crop row and the two spare pixels.
    char* spare
    size_t spare_each
    # Tasks: band k is global rows [bounds[k], bounds[k + 1]); channel range
    # s is [splits[s], splits[s + 1]); task t is band t // num_splits and
    # range t % num_splits.
    Py_ssize_t* bounds
    Py_ssize_t* splits
    Py_ssize_t num_splits
    # NCHW tiles: output rows accumulated at a time, and crop rows of grads
    # gathered at a time (see grad_image_nchw)
    Py_ssize_t tile_rows
    Py_ssize_t stage_rows


cdef inline void scatter_row(const GradImagePlan* p, Py_ssize_t b, Py_ssize_t k,
                             acc_t* top, acc_t* bottom, acc_t* spare,
                             Py_ssize_t stride, const float* g, bint same_row,
                             Py_ssize_t n, Py_ssize_t ahead, cg_ahead* ask,
                             Py_ssize_t ask_count) noexcept nogil:
    """Crop row `k` of box `b`, bilinear: each sample's four corner updates
    into `n` channels, pixels and grads `stride` apart (cg_row_* in
    cg_scatter.h).  A NULL row sends its updates to the two spare pixels;
    `ahead` and `ask` are the prefetches (0 and NULL for none)."""
    cdef Py_ssize_t cw = p.g.crop_w
    if acc_t is float:
        cg_row_f(top, bottom, spare, stride, g, p.col_lo + b * cw,
                 p.col_hi + b * cw, p.col_w_lo + b * cw, p.col_w_hi + b * cw,
                 cw, p.row_w_lo[k], p.row_w_hi[k], same_row, n, ahead,
                 p.grads + p.grads_size, ask, ask_count)
    else:
        cg_row_d(top, bottom, spare, stride, g, p.col_lo + b * cw,
                 p.col_hi + b * cw, p.col_w_lo + b * cw, p.col_w_hi + b * cw,
                 cw, p.row_w_lo[k], p.row_w_hi[k], same_row, n, ahead,
                 p.grads + p.grads_size, ask, ask_count)


cdef inline void scatter_one(acc_t* dst, const float* g,
                             Py_ssize_t n) noexcept nogil:
    """A nearest sample: `n` channels of `g` added to the pixel `dst`."""
    cdef Py_ssize_t d
    for d in range(n):
        dst[d] += <acc_t>g[d]


cdef inline void round_half(const GradImagePlan* p, uint16_t* dst, const float* src,
                            Py_ssize_t n) noexcept nogil:
    """``dst[i] = src[i]`` rounded once to the float16 or bfloat16 output
    (float16: the module's clone, cg_half.h)."""
    cdef Py_ssize_t i
    if p.bfloat16_out:
        for i in range(n):
            dst[i] = cg_float_to_bfloat16(src[i])
    else:
        cg_round_half(dst, src, n)


# Cost histogram resolution: at most this many buckets of output rows.
cdef enum:
    MAX_BUCKETS = 1 << 16


cdef inline void plan_taps(GradImagePlan* p, const float* boxes) noexcept nogil:
    """Fill the per-box row and column tables of `p` from `boxes`."""
    cdef Py_ssize_t b, i, k, lo, hi
    cdef Py_ssize_t ch = p.g.crop_h, cw = p.g.crop_w, H = p.g.height, W = p.g.width
    cdef bint nearest = p.g.nearest
    cdef float y1, x1, y2, x2, scale, coord, lerp
    for b in range(p.g.num_boxes):
        y1 = boxes[4 * b]
        x1 = boxes[4 * b + 1]
        y2 = boxes[4 * b + 2]
        x2 = boxes[4 * b + 3]
        p.box_row_min[b] = H
        p.box_row_max[b] = -1
        scale = crop_scale(y1, y2, H, ch)
        for i in range(ch):
            k = b * ch + i
            coord = sample_coord(y1, y2, scale, H, ch, i)
            p.row_lo[k] = -1
            if nearest:
                if nearest_tap(coord, H, &lo):
                    p.row_lo[k] = lo
                    p.row_hi[k] = lo
            elif linear_taps(coord, H, &lo, &hi, &lerp):
                p.row_lo[k] = lo
                p.row_hi[k] = hi
                p.row_w_lo[k] = <float>1 - lerp
                p.row_w_hi[k] = lerp
            if p.row_lo[k] >= 0:
                if p.row_lo[k] < p.box_row_min[b]:
                    p.box_row_min[b] = p.row_lo[k]
                if p.row_hi[k] > p.box_row_max[b]:
                    p.box_row_max[b] = p.row_hi[k]
        p.box_cols[b] = 0
        scale = crop_scale(x1, x2, W, cw)
        for i in range(cw):
            k = b * cw + i
            coord = sample_coord(x1, x2, scale, W, cw, i)
            p.col_lo[k] = -1
            if nearest:
                if nearest_tap(coord, W, &lo):
                    p.col_lo[k] = lo
                    p.col_hi[k] = lo
            elif linear_taps(coord, W, &lo, &hi, &lerp):
                p.col_lo[k] = lo
                p.col_hi[k] = hi
                p.col_w_lo[k] = <float>1 - lerp
                p.col_w_hi[k] = lerp
            if p.col_lo[k] >= 0:
                p.box_cols[b] += 1


cdef inline Py_ssize_t plan_bands(GradImagePlan* p, Py_ssize_t num_bands,
                                  int64_t* cost) noexcept nogil:
    """Cut the output rows into `num_bands` bands of about equal work.

    Output rows are numbered globally, ``image * height + row``.  The work
    of a row is the number of crop samples scattered into it plus the cost
    of zeroing it, histogrammed into at most ``MAX_BUCKETS`` buckets of
    rows.  Fills ``p.bounds`` (``num_bands + 1`` global row numbers) and
    returns the total work, in element updates per channel.  `cost` is
    scratch of ``min(rows, MAX_BUCKETS)`` entries.
    """
    cdef Py_ssize_t rows = p.g.batch * p.g.height, shift = 0, nbuckets, i, j
    cdef Py_ssize_t b, bi, k, first, last
    cdef int64_t total = 0, running = 0, per_sample
    cdef Py_ssize_t* bounds = p.bounds
    while ((rows - 1) >> shift) >= MAX_BUCKETS:
        shift += 1
    nbuckets = ((rows - 1) >> shift) + 1
    for i in range(nbuckets):
        first = i << shift
        last = min((i + 1) << shift, rows)
        # Zeroing a row is one store per element: about a quarter of the
        # four read-modify-writes of a bilinear sample.
        cost[i] = (last - first) * p.g.width
    for bi in range(p.g.batch):
        for j in range(p.starts[bi], p.starts[bi + 1]):
            b = p.order[j]
            per_sample = p.box_cols[b] * (1 if p.g.nearest else 2) * 4
            for k in range(b * p.g.crop_h, (b + 1) * p.g.crop_h):
                if p.row_lo[k] < 0:
                    continue
                cost[(bi * p.g.height + p.row_lo[k]) >> shift] += per_sample
                if not p.g.nearest:
                    cost[(bi * p.g.height + p.row_hi[k]) >> shift] += per_sample
    for i in range(nbuckets):
        total += cost[i]
    bounds[0] = 0
    j = 1
    for i in range(nbuckets):
        running += cost[i]
        while j < num_bands and running * num_bands >= total * j:
            bounds[j] = min((i + 1) << shift, rows)
            j += 1
    while j <= num_bands:
        bounds[j] = rows
        j += 1
    return total


cdef inline Py_ssize_t cap_bands(Py_ssize_t* bounds, Py_ssize_t num_bands,
                                 Py_ssize_t max_rows) noexcept nogil:
    """Drop empty bands and cut every band of more than `max_rows` rows
    into equal parts, in place; returns the new number of bands (at most
    ``num_bands + rows // max_rows``, where `bounds` must have room; and
    never more than the rows, so the tasks never outnumber a team sized
    for the rows)."""
    cdef Py_ssize_t k, total = 0, parts, i, j = 0, start, length
    for k in range(1, num_bands + 1):
        if bounds[k] != bounds[j]:
            j += 1
            bounds[j] = bounds[k]
    num_bands = j
    for k in range(num_bands):
        total += (bounds[k + 1] - bounds[k] + max_rows - 1) // max_rows
    # From the last band back, so that no bound is overwritten unread.
    j = total
    for k in range(num_bands - 1, -1, -1):
        start = bounds[k]
        length = bounds[k + 1] - start
        parts = (length + max_rows - 1) // max_rows
        bounds[j] = bounds[k + 1]
        for i in range(parts - 1, 0, -1):
            j -= 1
            bounds[j] = start + length * i // parts
        j -= 1
    bounds[0] = 0
    return total
