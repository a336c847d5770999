# cython: language_level=3
"""The boxes gradient, CropAndResizeGradBoxes (private kernel).

Trusts its arguments: `cropgrad.capi` checks shapes, box indices and
finiteness first.  Each box's four sums belong to one task and are added
in the serial order (crop row, crop column, channel), so the result does
not depend on the number of threads.

NCHW (grads [num_boxes, depth, crop_h, crop_w], image [batch, depth,
height, width]) keeps that order and that arithmetic, so its result is the
NHWC result on the transposed arrays, bit for bit.  A crop row's two pixel
rows (the columns its box reads) and its grads are first gathered from
their planes with the channels side by side (`_stage`; the pixel rows are
kept while the next crop rows of the box read them), and the terms are
then NHWC's vector loop over channels.  Read in place, each pixel of each
channel is a cache line of its own: 6 times slower on the detector's
problem.  A float32 image that is smaller than what its crop rows would
stage (many boxes on small feature maps) is instead staged whole, in one
pass before the boxes (`_pixel_row`), and its rows are read where they
are.  One-row and one-column crops read in place, with NCHW strides.
"""

from libc.stdint cimport int8_t, int16_t, int32_t, int64_t, uint8_t, uint16_t
from libc.stdlib cimport free, malloc
from libc.string cimport memset

from cropgrad._cdefs cimport (
    CG_SUM_GROUP,
    cg_planes_gather,
    cg_prefetch,
    cg_simd_select,
    cg_sum_terms,
    cg_terms,
)
from cropgrad._image cimport HALF_BFLOAT16, HALF_FLOAT16, HALF_NONE, load
from cropgrad._parallel cimport SCHEDULE_DYNAMIC, SERIAL_WORK, run_tasks, team_size
from cropgrad._sampling cimport crop_ratio, linear_taps, sample_coord
from cropgrad._types cimport (
    DT_BFLOAT16,
    DT_FLOAT16,
    DT_FLOAT32,
    DT_INT8,
    DT_INT16,
    DT_INT32,
    DT_INT64,
    DT_UINT8,
    DT_UINT16,
    Geometry,
    image_t,
    layout_t,
    nchw_t,
    nhwc_t,
)


# Boxes per task (bilinear crops of more than one row and column): their
# sums advance together (cg_sum_terms).
cdef enum:
    GROUP = CG_SUM_GROUP


# How far ahead of a sample's grads to ask for them: 2 KiB, as the image
# gradient's deep scatter does.
cdef enum:
    PREFETCH_FLOATS = 2048 // 4


ctypedef struct Staged:
    # NCHW: one box's pixel rows and grads with the channels side by side
    Py_ssize_t box           # whose rows `rows` holds (-1: none yet)
    Py_ssize_t row[2]        # the image rows in the two slots (-1: empty)
    Py_ssize_t col0          # the first column held
    Py_ssize_t cols          # the columns held
    float* rows              # [2][width][depth], from column col0
    float* grads             # [crop_w][depth]: the crop row's grads


ctypedef struct Plan:
    const Geometry* g
    const float* grads
    const void* image
    int image_dtype
    const float* boxes
    const int64_t* box_ind
    float* out
    # Per thread, GROUP * 4 * crop_w * depth floats of terms (see _group),
    # and for NCHW the GROUP boxes' Staged (`staged_each` bytes per thread)
    float* terms
    char* staged
    size_t staged_each
    # NCHW, float32 image: the whole image with its channels side by side
    # ([batch, height, width, depth]), when that is less to copy than the
    # pixel rows each crop row would stage (else NULL)
    float* pixels


cdef int use_simd(const char* target) noexcept nogil:
    """Make this module's terms and plane transposes run on `target`, the
    instruction set _grad_image chose (each module holds its own pointers
    to the clones of cg_simd.h).  Returns 0, or -1 when this CPU cannot run
    it."""
    return cg_simd_select(target)


cdef void _one(const Plan* p, const image_t* image, Py_ssize_t b,
               int half, layout_t* layout) noexcept nogil:
    """The four box-coordinate gradients of box `b`, summed in serial order.

    For crops of one row or one column, whose sums are partly in double.
    """
    cdef Py_ssize_t H = p.g.height, W = p.g.width, D = p.g.depth
    cdef Py_ssize_t ch = p.g.crop_h, cw = p.g.crop_w
    cdef float y1 = p.boxes[4 * b], x1 = p.boxes[4 * b + 1]
    cdef float y2 = p.boxes[4 * b + 2], x2 = p.boxes[4 * b + 3]
    cdef float h_ratio = crop_ratio(H, ch), w_ratio = crop_ratio(W, cw)
    cdef float h_scale = (y2 - y1) * h_ratio if ch > 1 else 0
    cdef float w_scale = (x2 - x1) * w_ratio if cw > 1 else 0
    cdef float dy1 = 0, dx1 = 0, dy2 = 0, dx2 = 0
    cdef float y_lerp, x_lerp, tl, tr, bl, br, grad_y, grad_x, g
    cdef Py_ssize_t y, x, d, top, bottom, left, right
    cdef const image_t* img = image + p.box_ind[b] * H * W * D
    cdef const float* gp
    # Pixel and channel strides of the image, channel stride of grads.
    cdef Py_ssize_t px = D, cs = 1, gc = 1
    if layout_t is nchw_t:
        px, cs, gc = 1, H * W, ch * cw
    for y in range(ch):
        if not linear_taps(sample_coord(y1, y2, h_scale, H, ch, y), H,
                           &top, &bottom, &y_lerp):
            continue
        for x in range(cw):
            if not linear_taps(sample_coord(x1, x2, w_scale, W, cw, x), W,
                               &left, &right, &x_lerp):
                continue
            if layout_t is nchw_t:
                gp = p.grads + b * D * ch * cw + y * cw + x
            else:
                gp = p.grads + ((b * ch + y) * cw + x) * D
            for d in range(D):
                tl = load(img, (top * W + left) * px + d * cs, half)
                tr = load(img, (top * W + right) * px + d * cs, half)
                bl = load(img, (bottom * W + left) * px + d * cs, half)
                br = load(img, (bottom * W + right) * px + d * cs, half)
                grad_y = (<float>1 - x_lerp) * (bl - tl) + x_lerp * (br - tr)
                grad_x = (<float>1 - y_lerp) * (tr - tl) + y_lerp * (br - bl)
                g = gp[d * gc]
                grad_y = grad_y * g
                grad_x = grad_x * g
                if ch > 1:
                    dy1 += grad_y * (<float>(H - 1) - <float>y * h_ratio)
                    dy2 += grad_y * (<float>y * h_ratio)
                else:
                    # A double product added to the float32 sum in double,
                    # then rounded: the reference kernel's `float += double`.
                    dy1 = <float>(<double>dy1 + <double>grad_y * 0.5 * <double>(H - 1))
                    dy2 = <float>(<double>dy2 + <double>grad_y * 0.5 * <double>(H - 1))
                if cw > 1:
                    dx1 += grad_x * (<float>(W - 1) - <float>x * w_ratio)
                    dx2 += grad_x * (<float>x * w_ratio)
                else:
                    dx1 = <float>(<double>dx1 + <double>grad_x * 0.5 * <double>(W - 1))
                    dx2 = <float>(<double>dx2 + <double>grad_x * 0.5 * <double>(W - 1))
    p.out[4 * b + 0] = dy1
    p.out[4 * b + 1] = dx1
    p.out[4 * b + 2] = dy2
    p.out[4 * b + 3] = dx2


cdef void _stage_row(const Plan* p, const image_t* image, int half,
                     Py_ssize_t b, Py_ssize_t row, Py_ssize_t col0,
                     Py_ssize_t cols, float* dst) noexcept nogil:
    """Columns ``[col0, col0 + cols)`` of image row `row` of box `b`'s image,
    every plane, as ``dst[x * depth + d]`` (float32, as `load` reads)."""
    cdef Py_ssize_t H = p.g.height, W = p.g.width, D = p.g.depth, d, x
    cdef const image_t* src = image + p.box_ind[b] * D * H * W + row * W + col0
    if image_t is float:
        cg_planes_gather(dst, src, H * W, cols, D)
    else:
        for d in range(D):
            for x in range(cols):
                dst[x * D + d] = load(src + d * H * W, x, half)


cdef (const float*, const float*) _stage(
        const Plan* p, const image_t* image, int half, Py_ssize_t b, Py_ssize_t y,
        Py_ssize_t top, Py_ssize_t bottom, float w_scale,
        Staged* st) noexcept nogil:
    """NCHW: crop row `y` of box `b` with its channels side by side.

    Stages the crop row's grads, and its two pixel rows unless `st` holds
    them already (crop rows of a box share pixel rows); the rows span the
    columns the box's samples read.  Returns the staged top and bottom rows
    (column ``st.col0`` first), or NULLs when no sample is inside.
    """
    cdef Py_ssize_t W = p.g.width, D = p.g.depth, ch = p.g.crop_h, cw = p.g.crop_w
    cdef Py_ssize_t x, left, right, lo = W, hi = -1, i, slot, k
    cdef Py_ssize_t need[2]
    cdef float x1 = p.boxes[4 * b + 1], x_lerp
    cdef float* slots[2]
    cdef const float* pixels
    if p.pixels != NULL:
        # The image is staged whole: its rows are read where they are.
        cg_planes_gather(st.grads, p.grads + (b * D * ch + y) * cw, ch * cw, cw, D)
        st.col0 = 0
        pixels = p.pixels + p.box_ind[b] * p.g.height * W * D
        return pixels + top * W * D, pixels + bottom * W * D
    if st.box != b:
        # The columns this box reads, the same for all its crop rows.
        for x in range(cw):
            if linear_taps(sample_coord(x1, p.boxes[4 * b + 3], w_scale, W, cw, x),
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
    cg_planes_gather(st.grads, p.grads + (b * D * ch + y) * cw, ch * cw, cw, D)
    i = 0 if st.row[0] == top else 1
    slot = 0 if st.row[0] == bottom else 1
    return slots[i], slots[slot]


cdef Py_ssize_t _row_terms(const Plan* p, const image_t* image, Py_ssize_t b,
                           Py_ssize_t y, int half, float* terms,
                           Staged* staged) noexcept nogil:
    """The terms crop row `y` of box `b` adds to its four box gradients.

    Writes ``terms[4 * i + k]`` for term i, in the serial (column, channel)
    order, and accumulator k (dy1, dx1, dy2, dx2), and returns the number of
    terms.  One interleaved array keeps the overlap checks of the vectorized
    loop few enough for the compiler to emit them.  Needs ``crop_h > 1``
    and ``crop_w > 1``.  Only the sums are serial; the terms themselves are
    independent, so this loop vectorizes over channels: for float32 pixels
    in `cg_terms` (cg_terms.h), whose SIMD clone is chosen at run time.

    NCHW (`staged` not NULL): the pixels and grads are read from `staged`,
    where `_stage` puts them with the channels side by side (as float32,
    the values `load` gives), so the loop is NHWC's.
    """
    cdef Py_ssize_t H = p.g.height, W = p.g.width, D = p.g.depth
    cdef Py_ssize_t ch = p.g.crop_h, cw = p.g.crop_w
    cdef float y1 = p.boxes[4 * b], x1 = p.boxes[4 * b + 1]
    cdef float y2 = p.boxes[4 * b + 2], x2 = p.boxes[4 * b + 3]
    cdef float h_ratio = crop_ratio(H, ch), w_ratio = crop_ratio(W, cw)
    cdef float h_scale = (y2 - y1) * h_ratio, w_scale = (x2 - x1) * w_ratio
    cdef float y_lerp, x_lerp, tl, tr, bl, br, grad_y, grad_x, g
    cdef float f_y1 = <float>(H - 1) - <float>y * h_ratio, f_y2 = <float>y * h_ratio
    cdef float f_x1, f_x2
    cdef Py_ssize_t x, d, top, bottom, left, right, n = 0
    cdef const image_t* img = image + p.box_ind[b] * H * W * D
    cdef const image_t* p_tl
    cdef const image_t* p_tr
    cdef const image_t* p_bl
    cdef const image_t* p_br
    cdef const float* gp
    cdef float* t
    cdef const float* s_top = NULL
    cdef const float* s_bottom = NULL
    cdef const float* ahead
    cdef const float* end
    cdef const float* grads_end = p.grads + p.g.num_boxes * ch * cw * D
    if not linear_taps(sample_coord(y1, y2, h_scale, H, ch, y), H,
                       &top, &bottom, &y_lerp):
        return 0
    if staged != NULL:
        s_top, s_bottom = _stage(p, image, half, b, y, top, bottom, w_scale, staged)
        if s_top == NULL:
            return 0
    for x in range(cw):
        if not linear_taps(sample_coord(x1, x2, w_scale, W, cw, x), W,
                           &left, &right, &x_lerp):
            continue
        f_x1 = <float>(W - 1) - <float>x * w_ratio
        f_x2 = <float>x * w_ratio
        t = terms + 4 * n
        n += D
        if staged != NULL:
            # NCHW: float32 pixels and grads, staged side by side.
            cg_terms(s_top + (left - staged.col0) * D,
                     s_top + (right - staged.col0) * D,
                     s_bottom + (left - staged.col0) * D,
                     s_bottom + (right - staged.col0) * D,
                     staged.grads + x * D, x_lerp, <float>1 - x_lerp, y_lerp,
                     <float>1 - y_lerp, f_y1, f_x1, f_y2, f_x2, D, t)
            continue
        p_tl = img + (top * W + left) * D
        p_tr = img + (top * W + right) * D
        p_bl = img + (bottom * W + left) * D
        p_br = img + (bottom * W + right) * D
        gp = p.grads + ((b * ch + y) * cw + x) * D
        if image_t is float:
            # grads is read once, in order: ask for it PREFETCH_BYTES ahead
            # (the terms otherwise wait on it).
            ahead = gp + PREFETCH_FLOATS
            end = min(ahead + D, grads_end)
            while ahead < end:
                cg_prefetch(ahead)
                ahead += 16
            cg_terms(p_tl, p_tr, p_bl, p_br, gp, x_lerp, <float>1 - x_lerp, y_lerp,
                     <float>1 - y_lerp, f_y1, f_x1, f_y2, f_x2, D, t)
        else:
            for d in range(D):
                tl = load(p_tl, d, half)
                tr = load(p_tr, d, half)
                bl = load(p_bl, d, half)
                br = load(p_br, d, half)
                grad_y = (<float>1 - x_lerp) * (bl - tl) + x_lerp * (br - tr)
                grad_x = (<float>1 - y_lerp) * (tr - tl) + y_lerp * (br - bl)
                g = gp[d]
                grad_y = grad_y * g
                grad_x = grad_x * g
                t[4 * d] = grad_y * f_y1
                t[4 * d + 1] = grad_x * f_x1
                t[4 * d + 2] = grad_y * f_y2
                t[4 * d + 3] = grad_x * f_x2
    return n


cdef void _group(const Plan* p, const image_t* image, Py_ssize_t b0,
                 int count, int half, float* terms,
                 Staged* staged) noexcept nogil:
    """Box gradients of boxes ``b0`` to ``b0 + count - 1`` (at most GROUP).

    Each box's four sums are serial chains of float32 additions, slow to
    wait on one at a time: crop row by crop row, the boxes' terms are
    computed, then added to their sums together (cg_sum_terms).  Each chain
    still adds its own terms in the serial order.  `terms` holds
    ``GROUP * 4 * crop_w * depth`` floats; `staged`, GROUP Staged (NCHW).
    The sums start from the zeroed output.
    """
    cdef Py_ssize_t row_terms = 4 * p.g.crop_w * p.g.depth, y
    cdef float* box_terms[GROUP]
    cdef Py_ssize_t n[GROUP]
    cdef int j
    for j in range(count):
        box_terms[j] = terms + j * row_terms
    for y in range(p.g.crop_h):
        for j in range(count):
            n[j] = _row_terms(p, image, b0 + j, y, half, box_terms[j],
                              staged + j if staged != NULL else NULL)
        cg_sum_terms(p.out + 4 * b0, box_terms, n, count)


cdef void _typed_task(const Plan* p, const image_t* image, Py_ssize_t t,
                      int half, float* terms, Staged* staged) noexcept nogil:
    """Box `t` for one-row or one-column crops, boxes ``GROUP * t`` to
    ``GROUP * t + GROUP - 1`` otherwise (`staged`: the thread's GROUP
    Staged, NCHW only)."""
    cdef Py_ssize_t N = p.g.num_boxes
    if p.g.crop_h == 1 or p.g.crop_w == 1:
        if p.g.nchw:
            _one(p, image, t, half, <nchw_t*>NULL)
        else:
            _one(p, image, t, half, <nhwc_t*>NULL)
    else:
        _group(p, image, GROUP * t, <int>min(GROUP, N - GROUP * t), half, terms,
               staged)


cdef void _task(void* ctx, Py_ssize_t t, int thread) noexcept nogil:
    """Task `t`, of the image's dtype, with thread `thread`'s scratch."""
    cdef const Plan* p = <const Plan*>ctx
    cdef float* terms = p.terms + (<Py_ssize_t>thread * GROUP * 4 * p.g.crop_w
                                   * p.g.depth)
    cdef Staged* staged = NULL
    cdef int code = p.image_dtype
    if p.staged != NULL:
        staged = <Staged*>(p.staged + <size_t>thread * p.staged_each)
    if code == DT_UINT8:
        _typed_task(p, <const uint8_t*>p.image, t, HALF_NONE, terms, staged)
    elif code == DT_INT8:
        _typed_task(p, <const int8_t*>p.image, t, HALF_NONE, terms, staged)
    elif code == DT_UINT16:
        _typed_task(p, <const uint16_t*>p.image, t, HALF_NONE, terms, staged)
    elif code == DT_FLOAT16:
        _typed_task(p, <const uint16_t*>p.image, t, HALF_FLOAT16, terms, staged)
    elif code == DT_BFLOAT16:
        _typed_task(p, <const uint16_t*>p.image, t, HALF_BFLOAT16, terms, staged)
    elif code == DT_INT16:
        _typed_task(p, <const int16_t*>p.image, t, HALF_NONE, terms, staged)
    elif code == DT_INT32:
        _typed_task(p, <const int32_t*>p.image, t, HALF_NONE, terms, staged)
    elif code == DT_INT64:
        _typed_task(p, <const int64_t*>p.image, t, HALF_NONE, terms, staged)
    elif code == DT_FLOAT32:
        _typed_task(p, <const float*>p.image, t, HALF_NONE, terms, staged)
    else:
        _typed_task(p, <const double*>p.image, t, HALF_NONE, terms, staged)


cdef void _pixel_row(void* ctx, Py_ssize_t t, int thread) noexcept nogil:
    """Row `t` (of batch * height) of a float32 NCHW image into `pixels`,
    channels side by side."""
    cdef const Plan* p = <const Plan*>ctx
    cdef Py_ssize_t H = p.g.height, W = p.g.width, D = p.g.depth
    cdef Py_ssize_t bi = t // H, r = t % H
    cg_planes_gather(p.pixels + t * W * D, <const float*>p.image + (bi * D * H + r) * W,
                     H * W, W, D)


cdef void _init_staged(Staged* st, const Geometry* geo) noexcept nogil:
    """Lay out a thread's GROUP Staged and their arrays, after them."""
    cdef size_t floats = <size_t>(2 * geo.width + geo.crop_w) * geo.depth
    cdef float* arrays = <float*>(<char*>st + GROUP * sizeof(Staged))
    cdef int k
    for k in range(GROUP):
        st[k].box = -1
        st[k].rows = arrays + k * floats
        st[k].grads = st[k].rows + 2 * geo.width * geo.depth


cdef int grad_boxes(const Geometry* geo, const float* grads, const void* image,
                    int image_dtype, const float* boxes, const int64_t* box_ind,
                    float* out, int nthreads, bint flush,
                    size_t* failed) noexcept nogil:
    """Gradient of crop-and-resize with respect to the boxes (bilinear).

    Parameters
    ----------
    geo : the problem; ``num_boxes > 0``.
    grads : float32 [num_boxes, crop_h, crop_w, depth]
        ([num_boxes, depth, crop_h, crop_w] when ``geo.nchw``)
    image : [batch, height, width, depth] of `image_dtype` (a DT_ code).
        ([batch, depth, height, width] when ``geo.nchw``)
    boxes : float32 [num_boxes, 4], finite
    box_ind : int64 [num_boxes], within [0, batch)
    out : float32 [num_boxes, 4]; every element written.
    failed : out: the bytes that could not be allocated, on failure.

    Returns
    -------
    int
        0, or -1 when scratch could not be allocated (nothing written).
    """
    cdef Plan p
    cdef Py_ssize_t N = geo.num_boxes, num_tasks, work
    cdef int team, i
    cdef size_t nbytes, terms_bytes, pixel_floats
    cdef bint whole
    if geo.depth == 0 or geo.batch == 0:
        memset(out, 0, 4 * N * sizeof(float))
        return 0
    # One-row or one-column crops accumulate partly in double: one box per
    # task; otherwise GROUP (see _group).
    if geo.crop_h == 1 or geo.crop_w == 1:
        num_tasks = N
    else:
        num_tasks = (N + GROUP - 1) // GROUP
    work = N * geo.crop_h * geo.crop_w * geo.depth * 8
    team = team_size(nthreads, num_tasks) if work >= SERIAL_WORK else 1
    terms_bytes = <size_t>team * GROUP * 4 * geo.crop_w * geo.depth * sizeof(float)
    # NCHW groups: each thread's GROUP Staged, their rows and grads.
    p.staged_each = 0
    if geo.nchw and geo.crop_h > 1 and geo.crop_w > 1:
        p.staged_each = GROUP * (sizeof(Staged) + (<size_t>(2 * geo.width + geo.crop_w)
                                                   * geo.depth) * sizeof(float))
        p.staged_each = (p.staged_each + 63) // 64 * 64
    nbytes = terms_bytes + <size_t>team * p.staged_each + 64
    # A float32 NCHW image is staged whole (read once, in order) where that
    # copies fewer pixels than staging each crop row's rows would: one row
    # of crop_w columns or more per crop row, every channel.  Reading the
    # planes' rows for every crop row made the boxes gradient twice as slow
    # in NCHW as in NHWC; whole, the staging costs one pass over the image.
    pixel_floats = <size_t>geo.batch * geo.height * geo.width * geo.depth
    whole = (p.staged_each > 0 and image_dtype == DT_FLOAT32
             and pixel_floats <= <size_t>N * geo.crop_h * geo.crop_w * geo.depth)
    if whole:
        nbytes += pixel_floats * sizeof(float) + 64
    p.terms = <float*>malloc(nbytes)
    if p.terms == NULL:
        failed[0] = nbytes
        return -1
    p.staged = NULL
    if p.staged_each > 0:
        p.staged = <char*>p.terms + terms_bytes
        p.staged = p.staged + (64 - <size_t>p.staged % 64) % 64
        for i in range(team):
            _init_staged(<Staged*>(p.staged + <size_t>i * p.staged_each), geo)
    memset(out, 0, 4 * N * sizeof(float))
    p.g = geo
    p.grads = grads
    p.image = image
    p.image_dtype = image_dtype
    p.boxes = boxes
    p.box_ind = box_ind
    p.out = out
    p.pixels = NULL
    if whole:
        p.pixels = <float*>(p.staged + <size_t>team * p.staged_each)
        p.pixels = p.pixels + (64 - <size_t>p.pixels % 64) % 64 // sizeof(float)
        run_tasks(_pixel_row, &p, geo.batch * geo.height, team,
                  <Py_ssize_t>pixel_floats * 2, flush, SCHEDULE_DYNAMIC)
    run_tasks(_task, &p, num_tasks, team, work, flush, SCHEDULE_DYNAMIC)
    free(p.terms)
    return 0
