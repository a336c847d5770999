# cython: language_level=3
#
# What the RoIAlign kernels share: the problem, the plan a call's tasks
# read, a box's two axes, and the one store of a result into an output of
# any float dtype.

from libc.stdint cimport int64_t, uint16_t

from cropgrad.capi cimport CG_BFLOAT16, CG_FLOAT16, CG_FLOAT32

from ..cdefs cimport cg_float_to_bfloat16, cg_float_to_half

from .sampling cimport (
    RoiAxis,
    RoiTap,
    real_t,
    roi_axis,
    roi_count,
    roi_sample,
    roi_taps,
)


ctypedef struct RoiProblem:
    # Boxes and the bins each one is pooled into
    Py_ssize_t num_boxes
    Py_ssize_t out_h
    Py_ssize_t out_w
    # The feature map (or its gradient): batch of channels x height x width
    Py_ssize_t batch
    Py_ssize_t channels
    Py_ssize_t height
    Py_ssize_t width
    double spatial_scale
    int sampling_ratio        # <= 0: adaptive
    bint aligned
    bint nchw                 # [n, c, h, w] memory (else [n, h, w, c])
    bint double_arith         # the arithmetic type is double (float64 data)
    size_t tile_bytes         # budget of a thread's NCHW tile (tiles.pxd)


ctypedef struct Tiles:
    # How an NCHW problem goes through tiles (tiles.pxd).
    Py_ssize_t channels       # per group (the last group may have fewer)
    Py_ssize_t groups         # per image
    Py_ssize_t parts          # of an image's boxes, each a task of its own
    size_t tile_bytes         # one thread's tile, 64-byte aligned
    Py_ssize_t block_rows     # bin rows computed at a time


ctypedef struct RoiPlan:
    const RoiProblem* g
    const void* image         # of image_dtype (forward, JVP, boxes gradient)
    int image_dtype
    const void* grads         # the arithmetic type (image and boxes gradients)
    const void* boxes         # the arithmetic type, [num_boxes, 4]
    const void* tangent       # the arithmetic type, [num_boxes, 4] (JVP)
    const int64_t* box_ind
    void* out
    int out_dtype
    Py_ssize_t ranges         # channel ranges per box (or per image)
    Py_ssize_t range_size     # channels per range
    char* scratch             # per thread, scratch_each bytes each
    size_t scratch_each
    const int64_t* order      # boxes grouped by image (image gradient,
    const int64_t* starts     # tiles): order[starts[i]:starts[i + 1]]
    bint tiled                # the NCHW problem goes through tiles
    char* sums                # the boxes gradient's channel sums (tiles)
    Tiles tiles


cdef inline void box_axes(const RoiPlan* p, Py_ssize_t k, real_t* box,
                          RoiAxis* rows, RoiAxis* cols) noexcept nogil:
    """The two axes of box `k` (`box`: the boxes, in the arithmetic type)."""
    cdef const RoiProblem* g = p.g
    cdef real_t* b = box + 4 * k
    cdef real_t scale = <real_t>g.spatial_scale
    # [x1, y1, x2, y2]: rows from y1, y2; columns from x1, x2.
    roi_axis(b[1], b[3], scale, g.aligned, g.out_h, g.height, g.sampling_ratio,
             rows)
    roi_axis(b[0], b[2], scale, g.aligned, g.out_w, g.width, g.sampling_ratio,
             cols)


cdef inline void store(void* out, Py_ssize_t i, int out_dtype,
                       real_t value) noexcept nogil:
    """``out[i] = value``, rounded once to the output's dtype (float16 and
    bfloat16 from float32 only: the gate refuses them for double)."""
    if out_dtype == CG_FLOAT32:
        (<float*>out)[i] = <float>value
    elif out_dtype == CG_FLOAT16:
        (<uint16_t*>out)[i] = cg_float_to_half(<float>value)
    elif out_dtype == CG_BFLOAT16:
        (<uint16_t*>out)[i] = cg_float_to_bfloat16(<float>value)
    else:
        (<double*>out)[i] = <double>value


# Channel ranges are multiples of this many elements, so two threads never
# write the same 64-byte line of an NHWC pixel.
cdef enum:
    CHANNEL_ALIGN = 16
    # NCHW tasks read a sample's pixels from this many planes at most, so
    # that the box's part of them stays in the core's cache.
    NCHW_CHANNELS = 32
    # Tasks per thread wanted when boxes (or images) are few.
    TASKS_PER_THREAD = 4


cdef inline void channel_ranges(RoiPlan* p, Py_ssize_t units, int nthreads,
                                Py_ssize_t most, Py_ssize_t per_thread) noexcept nogil:
    """Split the channels of each of `units` (boxes, or images) into
    ranges when the units alone give fewer than `per_thread` tasks a thread,
    and into ranges of at most `most` channels (0: any; rounded to
    CHANNEL_ALIGN)."""
    cdef Py_ssize_t C = p.g.channels, want = <Py_ssize_t>nthreads * per_thread
    cdef Py_ssize_t ranges = 1
    if nthreads > 1 and units < want:
        ranges = min((want + units - 1) // units, max(C // CHANNEL_ALIGN, 1))
    if most > 0 and C > most:
        ranges = max(ranges, (C + most - 1) // most)
    p.range_size = (C + ranges - 1) // ranges
    if ranges > 1:
        p.range_size = ((p.range_size + CHANNEL_ALIGN - 1) // CHANNEL_ALIGN
                        * CHANNEL_ALIGN)
    p.ranges = (C + p.range_size - 1) // p.range_size


# The boxes gradient's sums are kept in this many lanes (channel c in lane
# c % LANES) and combined by `lane_total`.
cdef enum:
    LANES = 8


cdef inline real_t lane_total(const real_t* lanes) noexcept nogil:
    """``((l0 + l1) + (l2 + l3)) + ((l4 + l5) + (l6 + l7))``."""
    return (((lanes[0] + lanes[1]) + (lanes[2] + lanes[3]))
            + ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7])))


# A box's samples along an axis are found once per box, into a table of at
# most MAX_TAPS taps (pooled * grid); a longer axis (a huge adaptive grid)
# finds them as they are needed.  Either way they are the same values.
cdef enum:
    MAX_TAPS = 1 << 12
    # The bytes of one box's tables (both axes), 64-byte aligned.
    TAP_BYTES = ((2 * MAX_TAPS * sizeof(RoiTap) + 63) // 64) * 64


ctypedef struct BoxTaps:
    # One box's samples: its axes, their tables (NULL: found as needed) and
    # the bins' count, in the arithmetic type.
    Py_ssize_t box
    RoiAxis rows
    RoiAxis cols
    RoiTap* row_taps
    RoiTap* col_taps
    double count


cdef inline Py_ssize_t tap_space(const RoiAxis* a) noexcept nogil:
    """The table entries axis `a` takes (0: none, it finds its samples)."""
    cdef int64_t n = a.pooled * a.grid
    return n if n <= MAX_TAPS else 0


cdef inline Py_ssize_t box_taps(const RoiPlan* p, Py_ssize_t k, RoiTap* space,
                                BoxTaps* b, real_t* kind) noexcept nogil:
    """Box `k`'s samples, their tables in `space` (2 * MAX_TAPS entries at
    most); returns the entries used."""
    cdef Py_ssize_t rows_n, cols_n
    b.box = k
    box_axes(p, k, <real_t*>p.boxes, &b.rows, &b.cols)
    b.count = <real_t>roi_count(&b.rows, &b.cols)
    rows_n = tap_space(&b.rows)
    cols_n = tap_space(&b.cols)
    b.row_taps = NULL
    b.col_taps = NULL
    if rows_n > 0:
        b.row_taps = space
        roi_taps(&b.rows, b.row_taps, kind)
    if cols_n > 0:
        b.col_taps = space + rows_n
        roi_taps(&b.cols, b.col_taps, kind)
    return rows_n + cols_n


cdef inline const RoiTap* row_tap(const BoxTaps* b, Py_ssize_t ph, Py_ssize_t iy,
                                  RoiTap* spare, real_t* kind) noexcept nogil:
    """Sample `iy` of bin row `ph` (from the table, or found into `spare`)."""
    if b.row_taps != NULL:
        return &b.row_taps[ph * b.rows.grid + iy]
    roi_sample(&b.rows, ph, iy, spare, kind)
    return spare


cdef inline const RoiTap* col_tap(const BoxTaps* b, Py_ssize_t pw, Py_ssize_t ix,
                                  RoiTap* spare, real_t* kind) noexcept nogil:
    """Sample `ix` of bin column `pw` (from the table, or into `spare`)."""
    if b.col_taps != NULL:
        return &b.col_taps[pw * b.cols.grid + ix]
    roi_sample(&b.cols, pw, ix, spare, kind)
    return spare
