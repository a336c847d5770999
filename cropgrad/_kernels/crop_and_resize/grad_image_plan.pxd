# cython: language_level=3
#
# The plan of an image-gradient call and the updates of one sample, shared
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
from ..types cimport Geometry, acc_t


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
