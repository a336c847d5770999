# cython: language_level=3
#
# NCHW through tiles.  A sample reads (or, in the image gradient, adds to)
# four pixels of every channel; in NCHW a pixel's channels are a plane
# apart, so read where they are, every channel is a scalar access to a
# cache line of its own, and a sample's channels cannot share a vector.  A
# tile holds whole planes of one image, a group of channels side by side
# (``tile[i * n + c]``, pixel i, channel c of the group), in the arithmetic
# type: gathered from the image once (the forward op, its JVP, the boxes
# gradient), or accumulated and then written to the planes once (the image
# gradient).  The samples then run the NHWC loops over the group's
# channels (channels.pxd): the same expressions on the same values in the
# same order, so NCHW results are the NHWC results transposed, bit for bit,
# whichever way a problem goes.
#
# A problem goes through tiles when a group of at least GROUP_LEAST planes
# fits the problem's tile budget and (when tiles are only read) its samples
# are many enough to repay gathering them: a tile moves every pixel of an
# image with boxes once, in vector copies, where a sample read in the
# planes costs four scalar loads per channel, each from a cache line of its
# own.  On a 200 x 272 map with about one sample for every pixel moved,
# the forward op through tiles took half the time of the planes; below
# one sample for every PIXELS_PER_SAMPLE pixels, the planes are read where
# they are.

from libc.stdint cimport int64_t, uint16_t

from cropgrad.capi cimport CG_BFLOAT16, CG_FLOAT16, CG_FLOAT32, CG_FLOAT64

from ..aligned cimport round64
from ..cdefs cimport (
    cg_planes_gather,
    cg_planes_scatter_bf,
    cg_planes_scatter_d,
    cg_planes_scatter_h,
    cg_planes_scatter_f,
)
from ..types cimport image_t

from .channels cimport pixel
from .plan cimport (
    CHANNEL_ALIGN,
    RoiPlan,
    RoiProblem,
    Tiles,
    box_axes,
    store,
)
from .sampling cimport RoiAxis, real_t


cdef enum:
    # Channels of a group: at most, and at least (fewer would not repay the
    # tile: the planes are then read where they are).
    GROUP_MOST = 128
    GROUP_LEAST = 8
    # Bytes of a box's bins computed at a time before they are written to
    # their planes.
    BIN_BLOCK_BYTES = 1 << 15
    # Tasks per thread wanted of the tiles of an image's groups (parts of
    # its boxes make more, each gathering its tile again).
    TILE_TASKS_PER_THREAD = 2
    PIXELS_PER_SAMPLE = 8


cdef inline Py_ssize_t group_channels(const RoiProblem* g,
                                      size_t itemsize) noexcept nogil:
    """Channels of a group within the tile budget (0: no tiles)."""
    cdef size_t plane = <size_t>(g.height * g.width) * itemsize
    cdef Py_ssize_t n
    if plane == 0 or g.tile_bytes < plane * GROUP_LEAST:
        return 0
    n = <Py_ssize_t>min(<size_t>GROUP_MOST, g.tile_bytes // plane)
    if n >= g.channels:
        return g.channels
    if n >= CHANNEL_ALIGN:
        n = n // CHANNEL_ALIGN * CHANNEL_ALIGN
    return n if n >= GROUP_LEAST else 0


cdef inline double sample_count(const RoiPlan* p, real_t* kind) noexcept nogil:
    """The samples of every bin of every box (each bin at least 1)."""
    cdef const RoiProblem* g = p.g
    cdef RoiAxis rows, cols
    cdef double total = 0
    cdef Py_ssize_t k
    for k in range(g.num_boxes):
        box_axes(p, k, <real_t*>p.boxes, &rows, &cols)
        total += <double>max(rows.grid, 1) * <double>max(cols.grid, 1)
    return total * <double>(g.out_h * g.out_w)


cdef inline bint plan_tiles(const RoiPlan* p, Py_ssize_t images, int nthreads,
                            bint read_only, Tiles* t, real_t* kind) noexcept nogil:
    """Whether the NCHW problem goes through tiles, and how (`images`: the
    images that have boxes; `read_only`: the tiles are gathered from the
    image, and must be repaid by the samples)."""
    cdef const RoiProblem* g = p.g
    cdef size_t itemsize = sizeof(real_t)
    cdef Py_ssize_t want = <Py_ssize_t>nthreads * TILE_TASKS_PER_THREAD
    cdef Py_ssize_t bins_row
    t.channels = group_channels(g, itemsize)
    if not g.nchw or t.channels == 0 or images == 0:
        return False
    if read_only and (<double>(images * g.height * g.width)
                      > PIXELS_PER_SAMPLE * sample_count(p, kind)):
        return False
    t.groups = (g.channels + t.channels - 1) // t.channels
    t.parts = 1
    if nthreads > 1 and images * t.groups < want:
        if read_only:
            # More tasks from parts of the boxes, each gathering its tile.
            t.parts = (want + images * t.groups - 1) // (images * t.groups)
        else:
            # A sum is one task's: more tasks from smaller groups only, still
            # whole multiples of CHANNEL_ALIGN, so that a channel keeps its
            # place among the vector lanes whatever the thread count.
            while images * t.groups < want and t.channels > CHANNEL_ALIGN:
                t.channels = (t.channels // 2 + CHANNEL_ALIGN - 1) // CHANNEL_ALIGN
                t.channels *= CHANNEL_ALIGN
                t.groups = (g.channels + t.channels - 1) // t.channels
    t.tile_bytes = round64(<size_t>(g.height * g.width * t.channels) * itemsize)
    bins_row = g.out_w * t.channels * <Py_ssize_t>itemsize
    t.block_rows = max(1, min(g.out_h, BIN_BLOCK_BYTES // max(bins_row, 1)))
    return True


cdef inline void _fill_each(real_t* tile, const image_t* planes, int half,
                            Py_ssize_t lane, Py_ssize_t count,
                            Py_ssize_t n) noexcept nogil:
    """`fill_tile` an element at a time, converting each pixel."""
    cdef Py_ssize_t i, c
    cdef const image_t* src
    for c in range(n):
        src = planes + c * lane
        for i in range(count):
            tile[i * n + c] = pixel(src, i, half, tile)


cdef inline void fill_tile(real_t* tile, const image_t* planes, int half,
                           Py_ssize_t lane, Py_ssize_t count,
                           Py_ssize_t n) noexcept nogil:
    """``tile[i * n + c] = planes[c * lane + i]`` in the arithmetic type,
    for ``i < count``, ``c < n`` (pixels converted as the NHWC kernels
    convert them)."""
    cdef bint floats = False
    if image_t is float:
        if real_t is float:
            floats = True
    if floats:
        cg_planes_gather(<float*>tile, <const float*>planes, lane, count, n)
    else:
        _fill_each(tile, planes, half, lane, count, n)


cdef inline void store_planes(void* out, int out_dtype, Py_ssize_t at,
                              Py_ssize_t lane, const real_t* src, Py_ssize_t count,
                              Py_ssize_t n) noexcept nogil:
    """``out[at + c * lane + i] = src[i * n + c]`` for ``i < count``,
    ``c < n``, rounded once to the output's dtype (plan.store's rounding)."""
    cdef Py_ssize_t i, c
    if real_t is float:
        if out_dtype == CG_FLOAT32:
            cg_planes_scatter_f(<float*>out + at, lane, src, count, n)
            return
        if out_dtype == CG_FLOAT16:
            cg_planes_scatter_h(<uint16_t*>out + at, lane, src, count, n)
            return
        if out_dtype == CG_BFLOAT16:
            cg_planes_scatter_bf(<uint16_t*>out + at, lane, src, count, n)
            return
    else:
        if out_dtype == CG_FLOAT64:
            cg_planes_scatter_d(<double*>out + at, lane, src, count, n)
            return
    for c in range(n):
        for i in range(count):
            store(out, at + c * lane + i, out_dtype, src[i * n + c])


cdef inline void part_of(const int64_t* starts, Py_ssize_t image, Py_ssize_t part,
                         Py_ssize_t parts, Py_ssize_t* j0,
                         Py_ssize_t* j1) noexcept nogil:
    """Part `part` of image `image`'s boxes: ``order[j0:j1]``."""
    cdef Py_ssize_t first = starts[image], n = starts[image + 1] - starts[image]
    j0[0] = first + n * part // parts
    j1[0] = first + n * (part + 1) // parts
