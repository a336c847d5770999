# cython: language_level=3
"""Compiled kernels of cropgrad (private).

Everything here trusts its arguments: the public functions in
``cropgrad/__init__.py`` check shapes, dtypes, box indices and finiteness,
make the arrays C-contiguous and allocate the outputs first.  The kernels
run without the GIL.

Determinism
-----------
The image gradient scatters every crop sample into up to four pixels.  Its
work is split into tasks that each *own* a band of output rows (and, when
there are few rows, a range of channels) of the output.  A task walks the
boxes, crop rows, crop columns and corners in the serial order and applies
only the updates that land in its band, so every output element is summed
by one thread in the serial order: the bits do not depend on the number of
threads.  The forward op and the boxes gradient write disjoint outputs per
box and per crop row, so their tasks are simply boxes or crop rows.
"""

from cython.parallel cimport parallel, prange, threadid
from libc.stdint cimport int32_t, int64_t, uint8_t, int8_t, uint16_t, int16_t, uint64_t
from libc.stdlib cimport malloc, free
from libc.string cimport memset
from libc.math cimport isfinite

cimport cython

from cropgrad._openmp cimport (
    CROPGRAD_HAVE_OPENMP,
    omp_get_max_threads,
    omp_get_num_procs,
)
from cropgrad._sampling cimport (
    crop_ratio,
    crop_scale,
    inside,
    linear_taps,
    nearest_tap,
    sample_coord,
)

import numpy as np

cdef extern from "_fpenv.h" nogil:
    const bint CROPGRAD_FPENV_SUPPORTED
    void cropgrad_fpenv_enter(int flush)
    void cropgrad_fpenv_leave(int flush)

cdef extern from "_shallow.h" nogil:
    void cg_shallow_rows_f(float* top, Py_ssize_t top_step, float* bottom,
                           Py_ssize_t bottom_step, const float* g,
                           const Py_ssize_t* col_lo, const Py_ssize_t* col_hi,
                           const float* w_left, const float* w_right,
                           Py_ssize_t crop_w, Py_ssize_t width, float w_top,
                           float w_bottom, int same, Py_ssize_t n)
    void cg_shallow_rows_d(double* top, Py_ssize_t top_step, double* bottom,
                           Py_ssize_t bottom_step, const float* g,
                           const Py_ssize_t* col_lo, const Py_ssize_t* col_hi,
                           const float* w_left, const float* w_right,
                           Py_ssize_t crop_w, Py_ssize_t width, float w_top,
                           float w_bottom, int same, Py_ssize_t n)

cdef extern from "_scatter.h" nogil:
    void cg_quad_f(float* top_left, float* top_right, float* bottom_left,
                   float* bottom_right, const float* g, float w_top,
                   float w_bottom, float w_left, float w_right, Py_ssize_t n)
    void cg_quad_d(double* top_left, double* top_right, double* bottom_left,
                   double* bottom_right, const float* g, float w_top,
                   float w_bottom, float w_left, float w_right, Py_ssize_t n)
    void cg_quad_distinct_f(float* top_left, float* top_right,
                            float* bottom_left, float* bottom_right,
                            const float* g, float w_top, float w_bottom,
                            float w_left, float w_right, Py_ssize_t n)
    void cg_quad_distinct_d(double* top_left, double* top_right,
                            double* bottom_left, double* bottom_right,
                            const float* g, float w_top, float w_bottom,
                            float w_left, float w_right, Py_ssize_t n)

cdef extern from "_half.h" nogil:
    float cropgrad_half_to_float(uint16_t h)
    uint16_t cropgrad_float_to_half(float f)

cdef extern from *:
    """
    /* A hint to bring a cache line in (read, keep in all levels); a no-op
       where the compiler has no such builtin.  Never faults. */
    #if defined(__GNUC__) || defined(__clang__)
    #define cropgrad_prefetch(p) __builtin_prefetch((p), 0, 3)
    #else
    #define cropgrad_prefetch(p) ((void)(p))
    #endif
    """
    void cropgrad_prefetch(const void* p) nogil

cdef extern from *:
    """
    #ifndef CROPGRAD_COMPILER
    #define CROPGRAD_COMPILER "unknown"
    #endif
    #ifndef CROPGRAD_CFLAGS
    #define CROPGRAD_CFLAGS "unknown"
    #endif
    """
    const char* CROPGRAD_COMPILER
    const char* CROPGRAD_CFLAGS


# The output accumulator: float16 outputs accumulate in float32 and are
# rounded once by the caller.
ctypedef fused acc_t:
    float
    double

ctypedef fused index_t:
    int32_t
    int64_t

# Every real image dtype TensorFlow's forward op accepts; float16 arrives as
# its uint16 bit pattern with ``half=True``.
ctypedef fused image_t:
    uint8_t
    int8_t
    uint16_t
    int16_t
    int32_t
    int64_t
    float
    double


# Below this many element updates a call runs on the calling thread without
# entering OpenMP: waking a thread team costs more than the work.
cdef enum:
    SERIAL_WORK = 1 << 17
# Tasks per thread in the image gradient: more, smaller bands balance better
# (they are handed out dynamically) at the cost of walking the boxes again.
cdef enum:
    TASKS_PER_THREAD = 4
# Target size of an output band: the rows a task accumulates into should
# stay in the core's cache while it walks the boxes.
cdef Py_ssize_t BAND_BYTES = 1 << 20
# How far ahead of the sample being scattered the image gradient asks for
# grads, in bytes (deep pixels only).  grads is read once, in order, yet
# without the hint the scatter of deep pixels keeps waiting for it
# (detector workload: 1.4x faster with it; a hint for the output pixels
# made it slower).
cdef Py_ssize_t PREFETCH_BYTES = 2048

# Cost histogram resolution: at most this many buckets of output rows.
cdef enum:
    MAX_BUCKETS = 1 << 16
# Channel ranges of split tasks are multiples of this many elements, so two
# threads never write the same 64-byte cache line within a pixel.
cdef enum:
    CHANNEL_ALIGN = 16


# A team never has more threads than this many per available processor:
# more only share the same cores, and a team the system cannot start ends
# the process inside the OpenMP runtime (no exception is possible there).
cdef enum:
    THREADS_PER_PROC = 4


cdef inline int _team_size(int requested, Py_ssize_t work_units) noexcept nogil:
    """Threads to start for `work_units` independent tasks.

    At most `requested`, the number of tasks and ``THREADS_PER_PROC`` times
    the processors OpenMP may use.  Only called when ``requested > 1``, so a
    forked child running on one thread makes no OpenMP call.
    """
    cdef Py_ssize_t n = requested
    if n > work_units:
        n = work_units
    if n > <Py_ssize_t>THREADS_PER_PROC * omp_get_num_procs():
        n = <Py_ssize_t>THREADS_PER_PROC * omp_get_num_procs()
    return <int>max(n, 1)


# --------------------------------------------------------------------------
# Build facts

def _set_prefetch_bytes(Py_ssize_t n):
    """Change the prefetch distance (for tuning experiments only)."""
    global PREFETCH_BYTES
    PREFETCH_BYTES = n


def _set_band_bytes(Py_ssize_t n):
    """Change the band size target (for tuning experiments only)."""
    global BAND_BYTES
    BAND_BYTES = n


def build_info():
    """Facts fixed when the extension was compiled.

    Returns
    -------
    dict
        ``openmp`` (bool), ``compiler`` and ``cflags`` (str),
        ``flush_denormals_supported`` (bool).
    """
    return {
        "openmp": bool(CROPGRAD_HAVE_OPENMP),
        "compiler": CROPGRAD_COMPILER.decode("utf-8", "replace"),
        "cflags": CROPGRAD_CFLAGS.decode("utf-8", "replace"),
        "flush_denormals_supported": bool(CROPGRAD_FPENV_SUPPORTED),
    }


def max_threads():
    """``omp_get_max_threads()`` now (1 without OpenMP).

    Honours ``OMP_NUM_THREADS`` and threadpoolctl.  Never call it in a child
    created by ``fork()`` after the parent used threads.
    """
    return omp_get_max_threads()


# --------------------------------------------------------------------------
# Input checks: one compiled pass each, with the GIL released.

def first_nonfinite_box(const float[:, ::1] boxes):  # IN (num_boxes, 4)
    """Index of the first box with a NaN or infinite coordinate, or -1.

    Parameters
    ----------
    boxes : ndarray of shape (num_boxes, 4), dtype=float32
    """
    cdef Py_ssize_t b, n = boxes.shape[0], bad = -1
    with nogil:
        for b in range(n):
            if not (isfinite(boxes[b, 0]) and isfinite(boxes[b, 1])
                    and isfinite(boxes[b, 2]) and isfinite(boxes[b, 3])):
                bad = b
                break
    return bad


def first_bad_index(const index_t[::1] box_ind,  # IN (num_boxes,)
                    Py_ssize_t batch):
    """Position of the first value of `box_ind` outside ``[0, batch)``, or -1."""
    cdef Py_ssize_t b, n = box_ind.shape[0], bad = -1
    cdef int64_t v
    with nogil:
        for b in range(n):
            v = box_ind[b]
            if v < 0 or v >= batch:
                bad = b
                break
    return bad


# --------------------------------------------------------------------------
# Sampling coordinates, exposed for tests only.

def sample_coords(const float[:, ::1] boxes,  # IN (num_boxes, 4)
                  Py_ssize_t size, Py_ssize_t crop, int axis,
                  bint boxes_gradient=False):
    """Image coordinates sampled by every crop index of every box.

    A thin wrapper over `sample_coord` so tests can compare the kernels'
    coordinates bit for bit with float32 NumPy arithmetic.

    Parameters
    ----------
    boxes : ndarray of shape (num_boxes, 4), dtype=float32
    size, crop : int
        Image and crop extent along the axis.
    axis : {0, 1}
        0 for rows (``y1, y2``), 1 for columns (``x1, x2``).
    boxes_gradient : bool
        Use the boxes gradient's spacing ``(hi - lo) * crop_ratio``.

    Returns
    -------
    ndarray of shape (num_boxes, crop), dtype=float32
    """
    coords = np.empty((boxes.shape[0], crop), dtype=np.float32)
    cdef float[:, ::1] c = coords
    cdef Py_ssize_t b, i
    cdef float lo, hi, scale
    for b in range(boxes.shape[0]):
        lo = boxes[b, axis]
        hi = boxes[b, axis + 2]
        if boxes_gradient:
            scale = (hi - lo) * crop_ratio(size, crop) if crop > 1 else 0
        else:
            scale = crop_scale(lo, hi, size, crop)
        for i in range(crop):
            c[b, i] = sample_coord(lo, hi, scale, size, crop, i)
    return coords


def float_to_half_bits(const float[::1] values):  # IN (n,)
    """The float16 bit patterns the kernels write for `values` (for tests).

    Returns
    -------
    ndarray of shape (n,), dtype=uint16
    """
    bits = np.empty(values.shape[0], dtype=np.uint16)
    cdef uint16_t[::1] b = bits
    cdef Py_ssize_t i
    for i in range(values.shape[0]):
        b[i] = cropgrad_float_to_half(values[i])
    return bits


def half_bits_to_float(const uint16_t[::1] bits):  # IN (n,)
    """The float32 values the kernels read for float16 `bits` (for tests).

    Returns
    -------
    ndarray of shape (n,), dtype=float32
    """
    values = np.empty(bits.shape[0], dtype=np.float32)
    cdef float[::1] v = values
    cdef Py_ssize_t i
    for i in range(bits.shape[0]):
        v[i] = cropgrad_half_to_float(bits[i])
    return values


# --------------------------------------------------------------------------
# Image gradient

cdef struct GradImagePlan:
    # Sizes
    Py_ssize_t num_boxes, crop_h, crop_w, depth, batch, height, width
    bint nearest
    # float16 output (or NULL): each task rounds its finished float32 band
    # into it, while the band is still in cache.
    uint16_t* half_out
    # Inputs
    float* grads
    Py_ssize_t grads_size   # elements of grads
    int64_t* order      # box numbers grouped by image, serial order within
    int64_t* starts     # boxes of image i: order[starts[i]:starts[i + 1]]
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
    # Per thread (omp thread number), ``spare_each`` bytes of scratch: two
    # pixels where a deep sample sends the updates of a row that is not in
    # the task's band (see _scatter_row); NULL with a single band.
    char* spare
    size_t spare_each
    # Per box: the range of pixel rows it touches and its valid columns
    Py_ssize_t* box_row_min
    Py_ssize_t* box_row_max
    Py_ssize_t* box_cols


cdef void _plan_taps(GradImagePlan* p, const float[:, ::1] boxes) noexcept nogil:
    """Fill the per-box row and column tables of `p` from `boxes`."""
    cdef Py_ssize_t b, i, k, lo, hi
    cdef Py_ssize_t ch = p.crop_h, cw = p.crop_w, H = p.height, W = p.width
    cdef float y1, x1, y2, x2, scale, coord, lerp
    for b in range(p.num_boxes):
        y1 = boxes[b, 0]
        x1 = boxes[b, 1]
        y2 = boxes[b, 2]
        x2 = boxes[b, 3]
        p.box_row_min[b] = H
        p.box_row_max[b] = -1
        scale = crop_scale(y1, y2, H, ch)
        for i in range(ch):
            k = b * ch + i
            coord = sample_coord(y1, y2, scale, H, ch, i)
            p.row_lo[k] = -1
            if p.nearest:
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
            if p.nearest:
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


cdef Py_ssize_t _plan_bands(GradImagePlan* p, Py_ssize_t* bounds,
                            Py_ssize_t num_bands,
                            int64_t* cost) noexcept nogil:
    """Cut the output rows into `num_bands` bands of about equal work.

    Output rows are numbered globally, ``image * height + row``.  The work
    of a row is the number of crop samples scattered into it plus the cost of
    zeroing it, histogrammed into at most ``MAX_BUCKETS`` buckets of rows.

    Parameters
    ----------
    bounds : Py_ssize_t*
        Out: ``num_bands + 1`` global row numbers; band ``k`` is
        ``[bounds[k], bounds[k + 1])``.
    cost : int64_t*
        Scratch of ``MAX_BUCKETS`` entries.

    Returns
    -------
    Py_ssize_t
        The total work, in element updates per channel.
    """
    cdef Py_ssize_t rows = p.batch * p.height, shift = 0, nbuckets, i, j
    cdef Py_ssize_t b, bi, k, first, last
    cdef int64_t total = 0, running = 0, per_sample
    while ((rows - 1) >> shift) >= MAX_BUCKETS:
        shift += 1
    nbuckets = ((rows - 1) >> shift) + 1
    for i in range(nbuckets):
        first = i << shift
        last = min((i + 1) << shift, rows)
        # Zeroing a row is one store per element: about a quarter of the
        # four read-modify-writes of a bilinear sample.
        cost[i] = (last - first) * p.width
    for bi in range(p.batch):
        for j in range(p.starts[bi], p.starts[bi + 1]):
            b = p.order[j]
            per_sample = p.box_cols[b] * (1 if p.nearest else 2) * 4
            for k in range(b * p.crop_h, (b + 1) * p.crop_h):
                if p.row_lo[k] < 0:
                    continue
                cost[(bi * p.height + p.row_lo[k]) >> shift] += per_sample
                if not p.nearest:
                    cost[(bi * p.height + p.row_hi[k]) >> shift] += per_sample
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


cdef inline void _scatter_quad(acc_t* top_left, acc_t* top_right,
                               acc_t* bottom_left, acc_t* bottom_right,
                               const float* g, float w_top, float w_bottom,
                               float w_left, float w_right, Py_ssize_t n,
                               bint distinct) noexcept nogil:
    """The four corner updates of one bilinear sample (see _scatter.h).

    `distinct`: the four pixels are distinct, so the restrict-qualified loop
    may be used.
    """
    if acc_t is float:
        if distinct:
            cg_quad_distinct_f(top_left, top_right, bottom_left, bottom_right,
                               g, w_top, w_bottom, w_left, w_right, n)
        else:
            cg_quad_f(top_left, top_right, bottom_left, bottom_right, g,
                      w_top, w_bottom, w_left, w_right, n)
    else:
        if distinct:
            cg_quad_distinct_d(top_left, top_right, bottom_left, bottom_right,
                               g, w_top, w_bottom, w_left, w_right, n)
        else:
            cg_quad_d(top_left, top_right, bottom_left, bottom_right, g,
                      w_top, w_bottom, w_left, w_right, n)


cdef void _shallow_rows(acc_t* top, Py_ssize_t top_step,
                        acc_t* bottom, Py_ssize_t bottom_step,
                        const float* g,
                        const Py_ssize_t* col_lo, const Py_ssize_t* col_hi,
                        const float* w_left, const float* w_right,
                        Py_ssize_t crop_w, Py_ssize_t width,
                        float w_top, float w_bottom, bint same,
                        Py_ssize_t n) noexcept nogil:
    """One crop row of bilinear samples with `n` (1 to 4) channels (see _shallow.h).

    Called from one place only, and for every crop row whichever of its
    rows the task owns: each element is then updated by the same machine
    code for any banding, so even the bits of NaN results (which depend on
    the operand order the compiler picks for an addition) do not depend on
    the number of threads.
    """
    if acc_t is float:
        cg_shallow_rows_f(top, top_step, bottom, bottom_step, g, col_lo, col_hi,
                          w_left, w_right, crop_w, width, w_top, w_bottom, same, n)
    else:
        cg_shallow_rows_d(top, top_step, bottom, bottom_step, g, col_lo, col_hi,
                          w_left, w_right, crop_w, width, w_top, w_bottom, same, n)


cdef inline void _prefetch_grads(GradImagePlan* p, Py_ssize_t start,
                                 Py_ssize_t n) noexcept nogil:
    """Hint that ``grads[start:start + n]`` (flat, clipped) is needed soon."""
    cdef Py_ssize_t i = 0
    if start + n > p.grads_size:
        n = p.grads_size - start
    while i < n:
        cropgrad_prefetch(p.grads + start + i)
        i += 16    # floats per 64-byte cache line


cdef inline void _scatter_one(acc_t* dst, const float* g,
                              Py_ssize_t n) noexcept nogil:
    cdef Py_ssize_t d
    for d in range(n):
        dst[d] += <acc_t>g[d]


cdef inline void _scatter_row(GradImagePlan* p, acc_t* top_row,
                              acc_t* bottom_row, const float* g,
                              Py_ssize_t b, Py_ssize_t k, Py_ssize_t n,
                              bint do_top, bint do_bottom, acc_t* spare,
                              Py_ssize_t ahead) noexcept nogil:
    """Crop row ``k`` of box `b`, sample by sample, into the owned rows.

    Called with ``ahead`` either 0 or a distance that depends only on the
    depth, each from its own call site: the copy without prefetching has no
    trace of it, and which copy updates an element does not depend on the
    banding.  `spare` holds two pixels (``2 * depth`` elements) for a row
    outside the band (NULL when every row is owned).
    """
    cdef Py_ssize_t x, col, right, cw = p.crop_w, D = p.depth
    cdef acc_t* tl
    cdef acc_t* tr
    cdef acc_t* bl
    cdef acc_t* br
    for x in range(cw):
        col = p.col_lo[b * cw + x]
        if col < 0:
            continue
        if p.nearest:
            _scatter_one(top_row + col * D, g + x * D, n)
            continue
        right = p.col_hi[b * cw + x]
        if ahead > 0:
            _prefetch_grads(p, (g - p.grads) + x * D + ahead, n)
        # A row outside the band goes to the scratch pixels: every sample
        # is then applied by the same code, owned rows or not.
        tl = top_row + col * D if do_top else spare
        tr = top_row + right * D if do_top else spare + D
        bl = bottom_row + col * D if do_bottom else spare
        br = bottom_row + right * D if do_bottom else spare + D
        _scatter_quad(tl, tr, bl, br, g + x * D, p.row_w_lo[k], p.row_w_hi[k],
                      p.col_w_lo[b * cw + x], p.col_w_hi[b * cw + x], n,
                      col != right and top_row != bottom_row)


cdef void _grad_image_task(GradImagePlan* p, acc_t* out,
                           Py_ssize_t g0, Py_ssize_t g1,
                           Py_ssize_t c0, Py_ssize_t c1,
                           int thread) noexcept nogil:
    """Zero and accumulate global output rows ``[g0, g1)``, channels ``[c0, c1)``.

    Walks boxes, crop rows, crop columns and corners in the serial order and
    applies only the updates that land in the band; for a float16 output,
    then rounds the finished band into ``p.half_out``.  `thread` is the
    OpenMP thread number (0 on the calling thread): it picks the scratch.
    """
    cdef Py_ssize_t W = p.width, D = p.depth, n = c1 - c0, pixel, d
    if g0 >= g1 or n <= 0:
        return
    _accumulate_band(p, out, g0, g1, c0, c1,
                     <acc_t*>(p.spare + thread * p.spare_each) if p.spare != NULL else NULL)
    if p.half_out == NULL:
        return
    for pixel in range(g0 * W, g1 * W):
        for d in range(c0, c1):
            p.half_out[pixel * D + d] = cropgrad_float_to_half(<float>out[pixel * D + d])


cdef inline void _accumulate_band(GradImagePlan* p, acc_t* out,
                                  Py_ssize_t g0, Py_ssize_t g1,
                                  Py_ssize_t c0, Py_ssize_t c1,
                                  acc_t* deep_spare) noexcept nogil:
    """The body of `_grad_image_task`: zero, then scatter into the band."""
    cdef Py_ssize_t H = p.height, W = p.width, D = p.depth
    cdef Py_ssize_t ch = p.crop_h, cw = p.crop_w, n = c1 - c0
    cdef Py_ssize_t bi, r0, r1, r, x, j, b, y, k, top, bottom
    cdef acc_t shallow_spare[4]   # a row a shallow task does not own (see _shallow.h)
    cdef bint do_top, do_bottom, own_bottom
    # Bilinear samples of 1 to 4 channels go a whole crop row at a time.
    # (Channel ranges are only split in multiples of CHANNEL_ALIGN, so a
    # shallow task always has every channel: n == D.)
    cdef bint shallow = not p.nearest and n == D and D <= 4
    # Deep pixels (at least 128 channels): prefetch the task's channels of
    # the sample about PREFETCH_BYTES ahead, at least the next one.  With
    # fewer channels the hint only costs time (measured at 32 and 64).
    # PREFETCH_BYTES = 0 turns it off (to measure it).
    cdef Py_ssize_t ahead = 0
    if PREFETCH_BYTES > 0 and D >= 128:
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
            top_row = out + (bi * H + r) * W * D
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
                do_bottom = (not p.nearest) and r0 <= bottom < r1
                if not (do_top or do_bottom):
                    continue
                top_row = out + ((bi * H + top) * W) * D + c0
                bottom_row = out + ((bi * H + bottom) * W) * D + c0
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
                if ahead > 0:
                    _scatter_row(p, top_row, bottom_row, g, b, k, n,
                                 do_top, do_bottom, deep_spare, ahead)
                else:
                    _scatter_row(p, top_row, bottom_row, g, b, k, n,
                                 do_top, do_bottom, deep_spare, 0)


def grad_image(const float[:, :, :, ::1] grads,  # IN (num_boxes, crop_h, crop_w, depth)
               const float[:, ::1] boxes,        # IN (num_boxes, 4)
               const int64_t[::1] order,         # IN (num_boxes,)
               const int64_t[::1] starts,        # IN (batch + 1,)
               acc_t[:, :, :, ::1] out,          # OUT (batch, height, width, depth)
               bint nearest, int num_threads, bint flush,
               uint16_t[:, :, :, ::1] half_out=None):  # OUT (batch, height, width, depth)
    """Gradient of crop-and-resize with respect to the image.

    Parameters
    ----------
    grads : ndarray of shape (num_boxes, crop_h, crop_w, depth), dtype=float32
    boxes : ndarray of shape (num_boxes, 4), dtype=float32
        Finite ``[y1, x1, y2, x2]``.
    order, starts : ndarray, dtype=int64
        Boxes grouped by image (from `group_boxes`).
    out : ndarray of shape (batch, height, width, depth), dtype=float32 or float64
        Overwritten: zeroed, then accumulated.
    nearest : bool
        Nearest-neighbour instead of bilinear sampling.
    num_threads : int
        Upper bound on the OpenMP threads; 1 never enters OpenMP.
    flush : bool
        Run with flush-to-zero and denormals-are-zero.
    half_out : ndarray of shape (batch, height, width, depth), dtype=uint16, optional
        The bits of a float16 output: `out` (float32) is then the
        accumulator, rounded into `half_out` once, band by band.
    """
    cdef GradImagePlan p
    cdef Py_ssize_t N = grads.shape[0]
    cdef Py_ssize_t rows, num_bands, num_splits = 1, num_tasks, t, s, work
    cdef Py_ssize_t* bounds = NULL
    cdef Py_ssize_t* splits = NULL
    cdef int64_t* cost = NULL
    cdef acc_t* out_ptr
    cdef void* tables = NULL
    cdef int nthreads = num_threads
    if out.shape[0] == 0 or out.shape[1] == 0 or out.shape[2] == 0 or out.shape[3] == 0:
        return
    p.num_boxes = N
    p.crop_h = grads.shape[1]
    p.crop_w = grads.shape[2]
    p.depth = out.shape[3]
    p.batch = out.shape[0]
    p.height = out.shape[1]
    p.width = out.shape[2]
    p.nearest = nearest
    p.half_out = &half_out[0, 0, 0, 0] if half_out is not None else NULL
    p.grads = <float*>&grads[0, 0, 0, 0] if N > 0 else NULL
    p.grads_size = N * grads.shape[1] * grads.shape[2] * grads.shape[3]
    p.order = <int64_t*>&order[0] if N > 0 else NULL
    p.starts = <int64_t*>&starts[0]
    out_ptr = &out[0, 0, 0, 0]
    rows = p.batch * p.height
    # Bands small enough that the rows being accumulated stay in cache, and
    # enough of them to balance the threads.
    num_bands = (rows * p.width * p.depth * <Py_ssize_t>sizeof(acc_t)) // BAND_BYTES
    if nthreads > 1 and num_bands < <Py_ssize_t>nthreads * TASKS_PER_THREAD:
        num_bands = <Py_ssize_t>nthreads * TASKS_PER_THREAD
    num_bands = max(1, min(num_bands, rows))
    # With several bands, each thread of the team gets two pixels of scratch
    # for deep samples (bilinear, more than 4 channels) whose crop row has a
    # row outside the task's band.  Where those would outweigh the output
    # (a few huge pixels), one band instead: channel ranges still split it.
    cdef Py_ssize_t team = 1 if nthreads <= 1 else _team_size(nthreads, rows * p.depth)
    cdef size_t spare_each = 0
    if num_bands > 1 and not nearest and p.depth > 4:
        # Whole cache lines per thread: no false sharing.
        spare_each = (2 * p.depth * sizeof(acc_t) + 63) // 64 * 64
        if spare_each * team > <size_t>(rows * p.width * p.depth) * sizeof(acc_t):
            num_bands = 1
            spare_each = 0
    # One allocation for every table: 4 row entries per (box, crop row),
    # 4 per (box, crop column), 3 per box, the band and split bounds, the
    # cost histogram and the scratch pixels (64-byte aligned).
    cdef size_t n_rows = <size_t>(N * p.crop_h), n_cols = <size_t>(N * p.crop_w)
    cdef size_t nbytes = (
        n_rows * (2 * sizeof(Py_ssize_t) + 2 * sizeof(float))
        + n_cols * (2 * sizeof(Py_ssize_t) + 2 * sizeof(float))
        + <size_t>N * 3 * sizeof(Py_ssize_t)
        + <size_t>(num_bands + 1 + 2 * nthreads + 2) * sizeof(Py_ssize_t)
        + MAX_BUCKETS * sizeof(int64_t)
        + spare_each * team + 64
    )
    tables = malloc(nbytes)
    if tables == NULL:
        raise MemoryError(
            f"crop_and_resize_grad_image: could not allocate {nbytes} bytes "
            "of sampling tables")
    try:
        with nogil:
            p.row_lo = <Py_ssize_t*>tables
            p.row_hi = p.row_lo + n_rows
            p.col_lo = p.row_hi + n_rows
            p.col_hi = p.col_lo + n_cols
            p.box_row_min = p.col_hi + n_cols
            p.box_row_max = p.box_row_min + N
            p.box_cols = p.box_row_max + N
            bounds = p.box_cols + N
            splits = bounds + num_bands + 1
            cost = <int64_t*>(splits + 2 * nthreads + 2)
            p.row_w_lo = <float*>(cost + MAX_BUCKETS)
            p.row_w_hi = p.row_w_lo + n_rows
            p.col_w_lo = p.row_w_hi + n_rows
            p.col_w_hi = p.col_w_lo + n_cols
            p.spare_each = spare_each
            p.spare = NULL
            if spare_each > 0:
                p.spare = <char*>(p.col_w_hi + n_cols)
                p.spare = p.spare + (64 - <size_t>p.spare % 64) % 64

            cropgrad_fpenv_enter(flush)
            _plan_taps(&p, boxes)
            work = _plan_bands(&p, bounds, num_bands, cost) * p.depth
            cropgrad_fpenv_leave(flush)

            # Few rows but deep pixels: split channels too, in aligned ranges.
            if nthreads > 1 and rows < <Py_ssize_t>nthreads * TASKS_PER_THREAD:
                num_splits = min(
                    (<Py_ssize_t>nthreads * TASKS_PER_THREAD + rows - 1) // rows,
                    p.depth // CHANNEL_ALIGN,
                    2 * nthreads + 1)
                if num_splits < 1:
                    num_splits = 1
            for s in range(num_splits + 1):
                splits[s] = (p.depth * s // num_splits) // CHANNEL_ALIGN * CHANNEL_ALIGN
            splits[num_splits] = p.depth
            num_tasks = num_bands * num_splits

            if nthreads <= 1 or work < SERIAL_WORK:
                cropgrad_fpenv_enter(flush)
                for t in range(num_tasks):
                    _grad_image_task(&p, out_ptr,
                                     bounds[t // num_splits],
                                     bounds[t // num_splits + 1],
                                     splits[t % num_splits],
                                     splits[t % num_splits + 1], 0)
                cropgrad_fpenv_leave(flush)
            else:
                nthreads = _team_size(nthreads, num_tasks)
                with parallel(num_threads=nthreads):
                    cropgrad_fpenv_enter(flush)
                    for t in prange(num_tasks, schedule="dynamic"):
                        _grad_image_task(&p, out_ptr,
                                         bounds[t // num_splits],
                                         bounds[t // num_splits + 1],
                                         splits[t % num_splits],
                                         splits[t % num_splits + 1],
                                         threadid())
                    cropgrad_fpenv_leave(flush)
    finally:
        free(tables)


def group_boxes(const index_t[::1] box_ind,  # IN (num_boxes,)
                Py_ssize_t batch,
                int64_t[::1] order,          # OUT (num_boxes,)
                int64_t[::1] starts):        # OUT (batch + 1,), zeroed by the caller
    """Group the boxes by image, keeping their order within an image.

    A stable counting sort: ``order[starts[i]:starts[i + 1]]`` are the boxes
    of image ``i`` in increasing box number.  `box_ind` must already be
    within ``[0, batch)`` (see `first_bad_index`).
    """
    cdef Py_ssize_t b, n = box_ind.shape[0], i
    cdef int64_t v
    with nogil:
        for b in range(n):
            starts[box_ind[b] + 1] += 1
        for i in range(batch):
            starts[i + 1] += starts[i]
        # Place each box at its image's cursor, then shift the cursors
        # (which ended at the next image's start) back into starts.
        for b in range(n):
            v = box_ind[b]
            order[starts[v]] = b
            starts[v] += 1
        for i in range(batch, 0, -1):
            starts[i] = starts[i - 1]
        starts[0] = 0


# --------------------------------------------------------------------------
# Forward op and boxes gradient

cdef inline float _load(const image_t* image, Py_ssize_t i, bint half) noexcept nogil:
    """Pixel `i` of the image as float32 (C's conversion; float16 exactly)."""
    if image_t is uint16_t:
        if half:
            return cropgrad_half_to_float(image[i])
    return <float>image[i]


cdef void _forward_row(const image_t* image, const float* boxes,
                       const int64_t* box_ind, float* crops,
                       Py_ssize_t H, Py_ssize_t W, Py_ssize_t D,
                       Py_ssize_t ch, Py_ssize_t cw, Py_ssize_t task,
                       bint nearest, float extrapolation,
                       bint half) noexcept nogil:
    """Crop row ``task % ch`` of box ``task // ch``."""
    cdef Py_ssize_t b = task // ch, y = task % ch, x, d, n
    cdef Py_ssize_t top, bottom, left, right
    cdef float y1 = boxes[4 * b], x1 = boxes[4 * b + 1]
    cdef float y2 = boxes[4 * b + 2], x2 = boxes[4 * b + 3]
    cdef float coord, y_lerp, x_lerp, tl, tr, bl, br, upper, lower
    cdef float wscale = crop_scale(x1, x2, W, cw)
    cdef float* dst = crops + (b * ch + y) * cw * D
    cdef const image_t* img = image + box_ind[b] * H * W * D
    cdef const image_t* p_tl
    cdef const image_t* p_tr
    cdef const image_t* p_bl
    cdef const image_t* p_br
    coord = sample_coord(y1, y2, crop_scale(y1, y2, H, ch), H, ch, y)
    if nearest:
        if not nearest_tap(coord, H, &top):
            for n in range(cw * D):
                dst[n] = extrapolation
            return
        for x in range(cw):
            if not nearest_tap(sample_coord(x1, x2, wscale, W, cw, x), W, &left):
                for d in range(D):
                    dst[x * D + d] = extrapolation
                continue
            p_tl = img + (top * W + left) * D
            for d in range(D):
                dst[x * D + d] = _load(p_tl, d, half)
        return
    if not linear_taps(coord, H, &top, &bottom, &y_lerp):
        for n in range(cw * D):
            dst[n] = extrapolation
        return
    for x in range(cw):
        if not linear_taps(sample_coord(x1, x2, wscale, W, cw, x), W,
                           &left, &right, &x_lerp):
            for d in range(D):
                dst[x * D + d] = extrapolation
            continue
        p_tl = img + (top * W + left) * D
        p_tr = img + (top * W + right) * D
        p_bl = img + (bottom * W + left) * D
        p_br = img + (bottom * W + right) * D
        for d in range(D):
            tl = _load(p_tl, d, half)
            tr = _load(p_tr, d, half)
            bl = _load(p_bl, d, half)
            br = _load(p_br, d, half)
            upper = tl + (tr - tl) * x_lerp
            lower = bl + (br - bl) * x_lerp
            dst[x * D + d] = upper + (lower - upper) * y_lerp


def crop_and_resize(const image_t[:, :, :, ::1] image,  # IN (batch, height, width, depth)
                    const float[:, ::1] boxes,          # IN (num_boxes, 4)
                    const int64_t[::1] box_ind,         # IN (num_boxes,)
                    float[:, :, :, ::1] crops,          # OUT (num_boxes, crop_h, crop_w, depth)
                    bint nearest, float extrapolation, bint half,
                    int num_threads, bint flush):
    """Crop boxes out of the image and resize them (TensorFlow's CropAndResize).

    Parameters
    ----------
    image : ndarray of shape (batch, height, width, depth)
        Any real dtype; float16 as its uint16 bits with ``half=True``.
    boxes : ndarray of shape (num_boxes, 4), dtype=float32
    box_ind : ndarray of shape (num_boxes,), dtype=int64
    crops : ndarray of shape (num_boxes, crop_h, crop_w, depth), dtype=float32
        Every element is written.
    """
    cdef Py_ssize_t N = crops.shape[0], ch = crops.shape[1], cw = crops.shape[2]
    cdef Py_ssize_t D = crops.shape[3], H = image.shape[1], W = image.shape[2]
    cdef Py_ssize_t t, num_tasks = N * ch
    cdef int nthreads = num_threads
    if num_tasks == 0 or cw == 0 or D == 0:
        return
    cdef const image_t* img = &image[0, 0, 0, 0]
    cdef float* dst = &crops[0, 0, 0, 0]
    cdef const int64_t* ind = &box_ind[0]
    cdef const float* bx = &boxes[0, 0]
    if nthreads > 1:
        nthreads = _team_size(nthreads, num_tasks)
    with nogil:
        if nthreads <= 1 or num_tasks * cw * D * 4 < SERIAL_WORK:
            cropgrad_fpenv_enter(flush)
            for t in range(num_tasks):
                _forward_row(img, bx, ind, dst, H, W, D, ch, cw, t,
                             nearest, extrapolation, half)
            cropgrad_fpenv_leave(flush)
        else:
            with parallel(num_threads=nthreads):
                cropgrad_fpenv_enter(flush)
                for t in prange(num_tasks, schedule="static"):
                    _forward_row(img, bx, ind, dst, H, W, D, ch, cw, t,
                                 nearest, extrapolation, half)
                cropgrad_fpenv_leave(flush)


cdef void _grad_boxes_one(const float* grads, const image_t* image,
                          const float* boxes, const int64_t* box_ind,
                          float* out, Py_ssize_t H, Py_ssize_t W, Py_ssize_t D,
                          Py_ssize_t ch, Py_ssize_t cw, Py_ssize_t b,
                          bint half) noexcept nogil:
    """The four box-coordinate gradients of box `b`, summed in serial order."""
    cdef float y1 = boxes[4 * b], x1 = boxes[4 * b + 1]
    cdef float y2 = boxes[4 * b + 2], x2 = boxes[4 * b + 3]
    cdef float h_ratio = crop_ratio(H, ch), w_ratio = crop_ratio(W, cw)
    cdef float h_scale = (y2 - y1) * h_ratio if ch > 1 else 0
    cdef float w_scale = (x2 - x1) * w_ratio if cw > 1 else 0
    cdef float dy1 = 0, dx1 = 0, dy2 = 0, dx2 = 0
    cdef float y_lerp, x_lerp, tl, tr, bl, br, grad_y, grad_x, g
    cdef Py_ssize_t y, x, d, top, bottom, left, right
    cdef const image_t* img = image + box_ind[b] * H * W * D
    cdef const float* gp
    for y in range(ch):
        if not linear_taps(sample_coord(y1, y2, h_scale, H, ch, y), H,
                           &top, &bottom, &y_lerp):
            continue
        for x in range(cw):
            if not linear_taps(sample_coord(x1, x2, w_scale, W, cw, x), W,
                               &left, &right, &x_lerp):
                continue
            gp = grads + ((b * ch + y) * cw + x) * D
            for d in range(D):
                tl = _load(img, (top * W + left) * D + d, half)
                tr = _load(img, (top * W + right) * D + d, half)
                bl = _load(img, (bottom * W + left) * D + d, half)
                br = _load(img, (bottom * W + right) * D + d, half)
                grad_y = (<float>1 - x_lerp) * (bl - tl) + x_lerp * (br - tr)
                grad_x = (<float>1 - y_lerp) * (tr - tl) + y_lerp * (br - bl)
                g = gp[d]
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
    out[4 * b + 0] = dy1
    out[4 * b + 1] = dx1
    out[4 * b + 2] = dy2
    out[4 * b + 3] = dx2


cdef Py_ssize_t _grad_boxes_row_terms(
        const float* grads, const image_t* image, const float* boxes,
        const int64_t* box_ind, Py_ssize_t H, Py_ssize_t W, Py_ssize_t D,
        Py_ssize_t ch, Py_ssize_t cw, Py_ssize_t b, Py_ssize_t y, bint half,
        float* terms) noexcept nogil:
    """The terms crop row `y` of box `b` adds to its four box gradients.

    Writes ``terms[4 * i + k]`` for term i, in the serial (column, channel)
    order, and accumulator k (dy1, dx1, dy2, dx2), and returns the number of
    terms.  One interleaved output array keeps the overlap checks of the
    vectorized loop few enough for the compiler to emit them.  Needs ``crop_h > 1`` and ``crop_w > 1``.  Only the
    sums are serial; the terms themselves are independent, so this loop
    vectorizes over channels.
    """
    cdef float y1 = boxes[4 * b], x1 = boxes[4 * b + 1]
    cdef float y2 = boxes[4 * b + 2], x2 = boxes[4 * b + 3]
    cdef float h_ratio = crop_ratio(H, ch), w_ratio = crop_ratio(W, cw)
    cdef float h_scale = (y2 - y1) * h_ratio, w_scale = (x2 - x1) * w_ratio
    cdef float y_lerp, x_lerp, tl, tr, bl, br, grad_y, grad_x, g
    cdef float f_y1 = <float>(H - 1) - <float>y * h_ratio, f_y2 = <float>y * h_ratio
    cdef float f_x1, f_x2
    cdef Py_ssize_t x, d, top, bottom, left, right, n = 0
    cdef const image_t* img = image + box_ind[b] * H * W * D
    cdef const image_t* p_tl
    cdef const image_t* p_tr
    cdef const image_t* p_bl
    cdef const image_t* p_br
    cdef const float* gp
    cdef float* t
    if not linear_taps(sample_coord(y1, y2, h_scale, H, ch, y), H,
                       &top, &bottom, &y_lerp):
        return 0
    for x in range(cw):
        if not linear_taps(sample_coord(x1, x2, w_scale, W, cw, x), W,
                           &left, &right, &x_lerp):
            continue
        f_x1 = <float>(W - 1) - <float>x * w_ratio
        f_x2 = <float>x * w_ratio
        p_tl = img + (top * W + left) * D
        p_tr = img + (top * W + right) * D
        p_bl = img + (bottom * W + left) * D
        p_br = img + (bottom * W + right) * D
        gp = grads + ((b * ch + y) * cw + x) * D
        t = terms + 4 * n
        for d in range(D):
            tl = _load(p_tl, d, half)
            tr = _load(p_tr, d, half)
            bl = _load(p_bl, d, half)
            br = _load(p_br, d, half)
            grad_y = (<float>1 - x_lerp) * (bl - tl) + x_lerp * (br - tr)
            grad_x = (<float>1 - y_lerp) * (tr - tl) + y_lerp * (br - bl)
            g = gp[d]
            grad_y = grad_y * g
            grad_x = grad_x * g
            t[4 * d] = grad_y * f_y1
            t[4 * d + 1] = grad_x * f_x1
            t[4 * d + 2] = grad_y * f_y2
            t[4 * d + 3] = grad_x * f_x2
        n += D
    return n


cdef void _grad_boxes_pair(const float* grads, const image_t* image,
                           const float* boxes, const int64_t* box_ind,
                           float* out, Py_ssize_t H, Py_ssize_t W,
                           Py_ssize_t D, Py_ssize_t ch, Py_ssize_t cw,
                           Py_ssize_t b0, Py_ssize_t b1, bint half,
                           float* terms) noexcept nogil:
    """Box gradients of boxes `b0` and `b1` (or `b0` alone when ``b1 < 0``).

    Each box's four sums are serial chains of float32 additions, slow to
    wait on one at a time; summing two boxes in one loop keeps eight chains
    in flight.  Each chain still adds its own terms in the serial order.
    `terms` holds ``8 * crop_w * depth`` floats.
    """
    cdef float a0 = 0, a1 = 0, a2 = 0, a3 = 0
    cdef float c0 = 0, c1 = 0, c2 = 0, c3 = 0
    cdef Py_ssize_t y, i, na, nb, common
    cdef float* ta = terms
    cdef float* tb = terms + 4 * cw * D
    for y in range(ch):
        na = _grad_boxes_row_terms(grads, image, boxes, box_ind, H, W, D, ch,
                                   cw, b0, y, half, ta)
        nb = 0
        if b1 >= 0:
            nb = _grad_boxes_row_terms(grads, image, boxes, box_ind, H, W, D,
                                       ch, cw, b1, y, half, tb)
        common = min(na, nb)
        for i in range(common):
            a0 += ta[4 * i]
            a1 += ta[4 * i + 1]
            a2 += ta[4 * i + 2]
            a3 += ta[4 * i + 3]
            c0 += tb[4 * i]
            c1 += tb[4 * i + 1]
            c2 += tb[4 * i + 2]
            c3 += tb[4 * i + 3]
        for i in range(common, na):
            a0 += ta[4 * i]
            a1 += ta[4 * i + 1]
            a2 += ta[4 * i + 2]
            a3 += ta[4 * i + 3]
        for i in range(common, nb):
            c0 += tb[4 * i]
            c1 += tb[4 * i + 1]
            c2 += tb[4 * i + 2]
            c3 += tb[4 * i + 3]
    out[4 * b0 + 0] = a0
    out[4 * b0 + 1] = a1
    out[4 * b0 + 2] = a2
    out[4 * b0 + 3] = a3
    if b1 >= 0:
        out[4 * b1 + 0] = c0
        out[4 * b1 + 1] = c1
        out[4 * b1 + 2] = c2
        out[4 * b1 + 3] = c3


cdef void _grad_boxes_task(const float* grads, const image_t* image,
                           const float* boxes, const int64_t* box_ind,
                           float* out, Py_ssize_t H, Py_ssize_t W,
                           Py_ssize_t D, Py_ssize_t ch, Py_ssize_t cw,
                           Py_ssize_t N, Py_ssize_t t, bint half,
                           float* terms) noexcept nogil:
    """Task `t`: box `t` for one-sample crops, boxes 2t and 2t + 1 otherwise."""
    if ch == 1 or cw == 1:
        _grad_boxes_one(grads, image, boxes, box_ind, out, H, W, D, ch, cw, t, half)
    else:
        _grad_boxes_pair(grads, image, boxes, box_ind, out, H, W, D, ch, cw,
                         2 * t, 2 * t + 1 if 2 * t + 1 < N else -1, half, terms)


def grad_boxes(const float[:, :, :, ::1] grads,  # IN (num_boxes, crop_h, crop_w, depth)
               const image_t[:, :, :, ::1] image, # IN (batch, height, width, depth)
               const float[:, ::1] boxes,         # IN (num_boxes, 4)
               const int64_t[::1] box_ind,        # IN (num_boxes,)
               float[:, ::1] out,                 # OUT (num_boxes, 4)
               bint half, int num_threads, bint flush):
    """Gradient of crop-and-resize with respect to the boxes (bilinear).

    Parameters
    ----------
    grads : ndarray of shape (num_boxes, crop_h, crop_w, depth), dtype=float32
    image : ndarray of shape (batch, height, width, depth)
        Any real dtype; float16 as its uint16 bits with ``half=True``.
    boxes : ndarray of shape (num_boxes, 4), dtype=float32
    box_ind : ndarray of shape (num_boxes,), dtype=int64
    out : ndarray of shape (num_boxes, 4), dtype=float32
        Every element is written.
    """
    cdef Py_ssize_t N = grads.shape[0], ch = grads.shape[1], cw = grads.shape[2]
    cdef Py_ssize_t D = grads.shape[3], H = image.shape[1], W = image.shape[2]
    cdef Py_ssize_t t, num_tasks
    cdef int nthreads = num_threads
    cdef float* terms
    if N == 0:
        return
    out[:, :] = 0
    if D == 0 or image.shape[0] == 0:
        return
    cdef const float* gp = &grads[0, 0, 0, 0]
    cdef const image_t* img = &image[0, 0, 0, 0]
    cdef const int64_t* ind = &box_ind[0]
    cdef float* dst = &out[0, 0]
    cdef const float* bx = &boxes[0, 0]
    # One-sample crops accumulate partly in double: the plain serial loop.
    if ch == 1 or cw == 1:
        num_tasks = N
    else:
        num_tasks = (N + 1) // 2
    if nthreads <= 1 or N * ch * cw * D * 8 < SERIAL_WORK:
        nthreads = 1
    else:
        nthreads = _team_size(nthreads, num_tasks)
    terms = <float*>malloc(<size_t>nthreads * 8 * cw * D * sizeof(float))
    if terms == NULL:
        raise MemoryError(
            "crop_and_resize_grad_boxes: could not allocate "
            f"{nthreads * 8 * cw * D * sizeof(float)} bytes of scratch")
    try:
        with nogil:
            if nthreads == 1:
                cropgrad_fpenv_enter(flush)
                for t in range(num_tasks):
                    _grad_boxes_task(gp, img, bx, ind, dst, H, W, D, ch, cw, N, t,
                                     half, terms)
                cropgrad_fpenv_leave(flush)
            else:
                with parallel(num_threads=nthreads):
                    cropgrad_fpenv_enter(flush)
                    for t in prange(num_tasks, schedule="dynamic"):
                        _grad_boxes_task(gp, img, bx, ind, dst, H, W, D, ch, cw,
                                         N, t, half,
                                         terms + threadid() * 8 * cw * D)
                    cropgrad_fpenv_leave(flush)
    finally:
        free(terms)
