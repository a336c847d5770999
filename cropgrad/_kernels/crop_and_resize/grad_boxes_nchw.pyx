# cython: language_level=3
"""The boxes gradient in NCHW: grads [num_boxes, depth, crop_h, crop_w],
image [batch, depth, height, width] (private kernel, run by `grad_boxes`).

It keeps NHWC's order and arithmetic, so its result is the NHWC result on
the transposed arrays, bit for bit, for any thread count.  A crop row's two
pixel rows (the columns its box reads) and its grads are first gathered
from their planes with the channels side by side (`_stage`; the pixel rows
are kept while the next crop rows of the box read them, and the grads are
gathered several crop rows at a time, the next ones asked for meanwhile:
on an AMD EPYC (Zen 3) 1.1 times as fast as a crop row at a time), and the
terms are then NHWC's vector loop over channels (`cg_terms`).  Read in
place, each pixel of each channel is a cache line of its own: 6 times
slower on the detector's problem.  A float32 image that is smaller than
what its crop rows would stage (many boxes on small feature maps) is
instead staged whole, in one pass before the boxes (`_pixel_row`), and its
rows are read where they are.  One-row and one-column crops read in
place, with NCHW strides (`one_box`, shared with NHWC).
"""

from libc.stdint cimport int64_t
from libc.stdlib cimport free, malloc
from libc.string cimport memset

from cropgrad._runtime.parallel cimport (
    SCHEDULE_DYNAMIC,
    run_tasks,
    serial_work,
    team_size,
)
from cropgrad._runtime.simd cimport chosen_target
from cropgrad.capi cimport CG_FLOAT32

from ..aligned cimport align64, round64
from ..cdefs cimport (
    cg_ahead,
    cg_ask,
    cg_planes_gather,
    cg_simd_select,
    cg_sum_terms,
    cg_terms,
)
from ..pixels cimport load
from ..types cimport image_t, nchw_t
from .geometry cimport Geometry

from .grad_boxes_plan cimport GROUP, BoxesGradPlan, one_box
from .sampling cimport crop_ratio, linear_taps, sample_coord

include "../image_dtypes.pxi"


ctypedef struct Staged:
    # One box's pixel rows and grads with the channels side by side
    Py_ssize_t box           # whose rows `rows` holds (-1: none yet)
    Py_ssize_t row[2]        # the image rows in the two slots (-1: empty)
    Py_ssize_t col0          # the first column held
    Py_ssize_t cols          # the columns held
    float* rows              # [2][width][depth], from column col0
    float* grads             # [stage_rows][crop_w][depth]: crop rows' grads
    Py_ssize_t grads_box     # whose crop rows `grads` holds (-1: none yet)
    Py_ssize_t grads_y0      # the first crop row held
    Py_ssize_t grads_rows    # the crop rows held
    const float* row_grads   # the grads of the crop row _stage staged
    cg_ahead ahead           # the box's next crop rows of grads, asked for
    Py_ssize_t ask_count     # lines of them per sample of these


ctypedef struct BoxesGradNchwPlan:
    BoxesGradPlan base
    # Per thread, its GROUP boxes' Staged (`staged_each` bytes)
    char* staged
    size_t staged_each
    # Float32 image: the whole image with its channels side by side
    # ([batch, height, width, depth]), when that is less to copy than the
    # pixel rows each crop row would stage (else NULL)
    float* pixels
    # Crop rows of grads gathered at a time (see STAGE_BYTES)
    Py_ssize_t stage_rows


# Bytes of a box's grads gathered at a time: several crop rows, so that each
# plane is read in runs of several cache lines (a crop row of 14 samples is
# 56 bytes of each plane, a line or two, and the next crop row comes back
# to the same lines), while the GROUP boxes' staged grads stay in the L2.
cdef enum:
    STAGE_BYTES = 1 << 16


# This module's terms and plane transposes run on the instruction set the
# runtime chose for the process (each module holds its own pointers to the
# clones of cg_simd.h).
cg_simd_select(chosen_target())


cdef void _stage_row(const BoxesGradNchwPlan* p, const image_t* image, int half,
                     Py_ssize_t b, Py_ssize_t row, Py_ssize_t col0,
                     Py_ssize_t cols, float* dst) noexcept nogil:
    """Columns ``[col0, col0 + cols)`` of image row `row` of box `b`'s image,
    every plane, as ``dst[x * depth + d]`` (float32, as `load` reads)."""
    cdef const Geometry* g = p.base.g
    cdef Py_ssize_t H = g.height, W = g.width, D = g.depth, d, x
    cdef const image_t* src = image + p.base.box_ind[b] * D * H * W + row * W + col0
    if image_t is float:
        cg_planes_gather(dst, src, H * W, cols, D)
    else:
        for d in range(D):
            for x in range(cols):
                dst[x * D + d] = load(src + d * H * W, x, half)


cdef (const float*, const float*) _stage(
        const BoxesGradNchwPlan* p, const image_t* image, int half, Py_ssize_t b,
        Py_ssize_t y, Py_ssize_t top, Py_ssize_t bottom, float w_scale,
        Staged* st) noexcept nogil:
    """Crop row `y` of box `b` with its channels side by side.

    Stages the crop row's grads (``st.row_grads``; with the next crop rows
    of the box, ``p.stage_rows`` at a time), and its two pixel rows unless
    `st` holds them already (crop rows of a box share pixel rows); the rows
    span the columns the box's samples read.  Returns the staged top and
    bottom rows (column ``st.col0`` first), or NULLs when no sample is
    inside.
    """
    cdef const Geometry* g = p.base.g
    cdef Py_ssize_t W = g.width, D = g.depth, ch = g.crop_h, cw = g.crop_w
    cdef Py_ssize_t x, left, right, lo = W, hi = -1, i, slot, k
    cdef Py_ssize_t need[2]
    cdef const float* boxes = p.base.boxes
    cdef const float* grads = p.base.grads
    cdef float x1 = boxes[4 * b + 1], x_lerp
    cdef float* slots[2]
    cdef const float* pixels
    if st.grads_box != b or not st.grads_y0 <= y < st.grads_y0 + st.grads_rows:
        # Consecutive crop rows are one run of each plane.
        st.grads_box = b
        st.grads_y0 = y
        st.grads_rows = min(p.stage_rows, ch - y)
        cg_planes_gather(st.grads, grads + (b * D * ch + y) * cw, ch * cw,
                         st.grads_rows * cw, D)
        # The gathering waits on memory (a run of each plane, a plane
        # apart, which the hardware prefetcher does not follow): while
        # these crop rows' terms are computed, ask for the box's next ones,
        # a few lines per sample.
        st.ahead.start = grads + (b * D * ch + y + st.grads_rows) * cw
        st.ahead.lane = ch * cw
        st.ahead.length = min(p.stage_rows, ch - y - st.grads_rows) * cw
        st.ahead.runs = D if st.ahead.length > 0 else 0
        st.ahead.run = st.ahead.pos = 0
        st.ask_count = (D * ((st.ahead.length + 15) // 16 + 1)
                        + st.grads_rows * cw - 1) // (st.grads_rows * cw)
    st.row_grads = st.grads + (y - st.grads_y0) * cw * D
    if p.pixels != NULL:
        # The image is staged whole: its rows are read where they are.
        st.col0 = 0
        pixels = p.pixels + p.base.box_ind[b] * g.height * W * D
        return pixels + top * W * D, pixels + bottom * W * D
    if st.box != b:
        # The columns this box reads, the same for all its crop rows.
        for x in range(cw):
            if linear_taps(sample_coord(x1, boxes[4 * b + 3], w_scale, W, cw, x),
                           W, &left, &right, &x_lerp):
                lo = min(lo, left)
                hi = max(hi, right)
        if hi < 0:
            return NULL, NULL
        st.box = b
        st.col0 = lo
        st.row[0] = st.row[1] = -1
        st.cols = hi - lo + 1
    slots[0] = st.rows
    slots[1] = st.rows + W * D
    need[0] = top
    need[1] = bottom
    for k in range(2):
        if st.row[0] == need[k] or st.row[1] == need[k]:
            continue
        # A slot holding neither needed row.
        slot = 0 if st.row[0] != need[1 - k] else 1
        _stage_row(p, image, half, b, need[k], st.col0, st.cols, slots[slot])
        st.row[slot] = need[k]
    i = 0 if st.row[0] == top else 1
    slot = 0 if st.row[0] == bottom else 1
    return slots[i], slots[slot]


cdef Py_ssize_t _row_terms(const BoxesGradNchwPlan* p, const image_t* image,
                           Py_ssize_t b, Py_ssize_t y, int half, float* terms,
                           Staged* staged) noexcept nogil:
    """The terms crop row `y` of box `b` adds to its four box gradients.

    As NHWC's `_row_terms` (grad_boxes.pyx): ``terms[4 * i + k]`` for term
    i in the serial (column, channel) order and accumulator k (dy1, dx1,
    dy2, dx2); returns the number of terms.  The pixels and grads are read
    from `staged`, where `_stage` puts them with the channels side by side
    (as float32, the values `load` gives), so the loop is NHWC's float32
    one, `cg_terms`.  Needs ``crop_h > 1`` and ``crop_w > 1``.
    """
    cdef const Geometry* g = p.base.g
    cdef Py_ssize_t H = g.height, W = g.width, D = g.depth
    cdef Py_ssize_t ch = g.crop_h, cw = g.crop_w
    cdef const float* boxes = p.base.boxes
    cdef float y1 = boxes[4 * b], x1 = boxes[4 * b + 1]
    cdef float y2 = boxes[4 * b + 2], x2 = boxes[4 * b + 3]
    cdef float h_ratio = crop_ratio(H, ch), w_ratio = crop_ratio(W, cw)
    cdef float h_scale = (y2 - y1) * h_ratio, w_scale = (x2 - x1) * w_ratio
    cdef float y_lerp, x_lerp
    cdef float f_y1 = <float>(H - 1) - <float>y * h_ratio, f_y2 = <float>y * h_ratio
    cdef float f_x1, f_x2
    cdef Py_ssize_t x, top, bottom, left, right, n = 0
    cdef const float* s_top
    cdef const float* s_bottom
    if not linear_taps(sample_coord(y1, y2, h_scale, H, ch, y), H,
                       &top, &bottom, &y_lerp):
        return 0
    s_top, s_bottom = _stage(p, image, half, b, y, top, bottom, w_scale, staged)
    if s_top == NULL:
        return 0
    for x in range(cw):
        if not linear_taps(sample_coord(x1, x2, w_scale, W, cw, x), W,
                           &left, &right, &x_lerp):
            continue
        f_x1 = <float>(W - 1) - <float>x * w_ratio
        f_x2 = <float>x * w_ratio
        cg_ask(&staged.ahead, staged.ask_count)
        cg_terms(s_top + (left - staged.col0) * D,
                 s_top + (right - staged.col0) * D,
                 s_bottom + (left - staged.col0) * D,
                 s_bottom + (right - staged.col0) * D,
                 staged.row_grads + x * D, x_lerp, <float>1 - x_lerp, y_lerp,
                 <float>1 - y_lerp, f_y1, f_x1, f_y2, f_x2, D, terms + 4 * n)
        n += D
    return n


cdef void _group(const BoxesGradNchwPlan* p, const image_t* image, Py_ssize_t b0,
                 int count, int half, float* terms,
                 Staged* staged) noexcept nogil:
    """Box gradients of boxes ``b0`` to ``b0 + count - 1`` (at most GROUP),
    their sums advancing together crop row by crop row, as NHWC's `_group`;
    `staged` holds GROUP Staged."""
    cdef Py_ssize_t row_terms = 4 * p.base.g.crop_w * p.base.g.depth, y
    cdef float* box_terms[GROUP]
    cdef Py_ssize_t n[GROUP]
    cdef int j
    for j in range(count):
        box_terms[j] = terms + j * row_terms
    for y in range(p.base.g.crop_h):
        for j in range(count):
            n[j] = _row_terms(p, image, b0 + j, y, half, box_terms[j], staged + j)
        cg_sum_terms(p.base.out + 4 * b0, box_terms, n, count)


cdef void _typed_task(const void* ctx, const image_t* image, int half,
                      Py_ssize_t t, int thread) noexcept nogil:
    """Box `t` for one-row or one-column crops, boxes ``GROUP * t`` to
    ``GROUP * t + GROUP - 1`` otherwise, with thread `thread`'s scratch."""
    cdef const BoxesGradNchwPlan* p = <const BoxesGradNchwPlan*>ctx
    cdef const Geometry* g = p.base.g
    cdef float* terms
    cdef Staged* staged
    if g.crop_h == 1 or g.crop_w == 1:
        one_box(&p.base, image, t, half, <nchw_t*>NULL)
        return
    terms = p.base.terms + <Py_ssize_t>thread * GROUP * 4 * g.crop_w * g.depth
    staged = <Staged*>(p.staged + <size_t>thread * p.staged_each)
    _group(p, image, GROUP * t, <int>min(GROUP, g.num_boxes - GROUP * t), half,
           terms, staged)


cdef void _task(void* ctx, Py_ssize_t t, int thread) noexcept nogil:
    """Task `t`, of the image's dtype."""
    cdef const BoxesGradNchwPlan* p = <const BoxesGradNchwPlan*>ctx
    _image_task(ctx, p.base.image, p.base.image_dtype, t, thread)


cdef void _pixel_row(void* ctx, Py_ssize_t t, int thread) noexcept nogil:
    """Row `t` (of batch * height) of a float32 image into `pixels`,
    channels side by side."""
    cdef const BoxesGradNchwPlan* p = <const BoxesGradNchwPlan*>ctx
    cdef Py_ssize_t H = p.base.g.height, W = p.base.g.width, D = p.base.g.depth
    cdef Py_ssize_t bi = t // H, r = t % H
    cg_planes_gather(p.pixels + t * W * D,
                     <const float*>p.base.image + (bi * D * H + r) * W, H * W, W, D)


cdef size_t _staged_floats(const Geometry* geo, Py_ssize_t stage_rows) noexcept nogil:
    """Floats of one Staged's arrays: two pixel rows, `stage_rows` crop
    rows of grads."""
    return <size_t>(2 * geo.width + stage_rows * geo.crop_w) * geo.depth


cdef void _init_staged(Staged* st, const Geometry* geo,
                       Py_ssize_t stage_rows) noexcept nogil:
    """Lay out a thread's GROUP Staged and their arrays, after them."""
    cdef size_t floats = _staged_floats(geo, stage_rows)
    cdef float* arrays = <float*>(<char*>st + GROUP * sizeof(Staged))
    cdef int k
    for k in range(GROUP):
        st[k].box = -1
        st[k].grads_box = -1
        st[k].ahead.runs = 0
        st[k].rows = arrays + k * floats
        st[k].grads = st[k].rows + 2 * geo.width * geo.depth


cdef int grad_boxes_nchw(const Geometry* geo, const float* grads, const void* image,
                         int image_dtype, const float* boxes,
                         const int64_t* box_ind, float* out, int nthreads,
                         bint flush, size_t* failed) noexcept nogil:
    """`grad_boxes.grad_boxes` for ``geo.nchw``: the same arguments, in
    NCHW; ``depth > 0`` and ``batch > 0``.

    Returns
    -------
    int
        0, or -1 when scratch could not be allocated (nothing written).
    """
    cdef BoxesGradNchwPlan p
    cdef Py_ssize_t N = geo.num_boxes, num_tasks, work
    cdef int team, i
    cdef size_t nbytes, terms_bytes, pixel_floats, row_bytes
    cdef bint whole
    # One-row or one-column crops accumulate partly in double: one box per
    # task, read in place; otherwise GROUP (see _group), staged.
    if geo.crop_h == 1 or geo.crop_w == 1:
        num_tasks = N
    else:
        num_tasks = (N + GROUP - 1) // GROUP
    work = N * geo.crop_h * geo.crop_w * geo.depth * 8
    team = team_size(nthreads, num_tasks) if work >= serial_work() else 1
    terms_bytes = <size_t>team * GROUP * 4 * geo.crop_w * geo.depth * sizeof(float)
    # Groups: each thread's GROUP Staged, their rows and grads.
    p.staged_each = 0
    row_bytes = <size_t>(geo.crop_w * geo.depth) * sizeof(float)
    p.stage_rows = max(min(<Py_ssize_t>(STAGE_BYTES // row_bytes), geo.crop_h), 1)
    if geo.crop_h > 1 and geo.crop_w > 1:
        p.staged_each = round64(GROUP * (sizeof(Staged)
                                         + _staged_floats(geo, p.stage_rows)
                                         * sizeof(float)))
    nbytes = terms_bytes + <size_t>team * p.staged_each + 64
    # A float32 image is staged whole (read once, in order) where that
    # copies fewer pixels than staging each crop row's rows would: one row
    # of crop_w columns or more per crop row, every channel.  Reading the
    # planes' rows for every crop row made the boxes gradient twice as slow
    # in NCHW as in NHWC; whole, the staging costs one pass over the image.
    pixel_floats = <size_t>geo.batch * geo.height * geo.width * geo.depth
    whole = (p.staged_each > 0 and image_dtype == CG_FLOAT32
             and pixel_floats <= <size_t>N * geo.crop_h * geo.crop_w * geo.depth)
    if whole:
        nbytes += pixel_floats * sizeof(float) + 64
    p.base.terms = <float*>malloc(nbytes)
    if p.base.terms == NULL:
        failed[0] = nbytes
        return -1
    p.staged = NULL
    if p.staged_each > 0:
        p.staged = align64(<char*>p.base.terms + terms_bytes)
        for i in range(team):
            _init_staged(<Staged*>(p.staged + <size_t>i * p.staged_each), geo,
                         p.stage_rows)
    memset(out, 0, 4 * N * sizeof(float))
    p.base.g = geo
    p.base.grads = grads
    p.base.image = image
    p.base.image_dtype = image_dtype
    p.base.boxes = boxes
    p.base.box_ind = box_ind
    p.base.out = out
    p.pixels = NULL
    if whole:
        p.pixels = <float*>align64(p.staged + <size_t>team * p.staged_each)
        run_tasks(_pixel_row, &p, geo.batch * geo.height, team,
                  <Py_ssize_t>pixel_floats * 2, flush, SCHEDULE_DYNAMIC)
    run_tasks(_task, &p, num_tasks, team, work, flush, SCHEDULE_DYNAMIC)
    free(p.base.terms)
    return 0
