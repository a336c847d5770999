# cython: language_level=3
#
# A sample's work on its channels, for every RoIAlign kernel: a pixel in
# the arithmetic type, and the loops over channels that lie side by side
# (NHWC pixels, NCHW tiles), run by the SIMD clone the process chose
# (cg_roi.h).  Channels a plane apart take the same expressions one
# element at a time, in the kernels.

from ..cdefs cimport (
    cg_roi_mean_d,
    cg_roi_mean_f,
    cg_roi_pool_d,
    cg_roi_pool_f,
    cg_roi_slopes_d,
    cg_roi_slopes_f,
    cg_roi_spread_d,
    cg_roi_spread_f,
    cg_roi_tangent_d,
    cg_roi_tangent_f,
)
from ..pixels cimport load
from ..types cimport image_t

from .sampling cimport real_t


cdef inline real_t pixel(const image_t* img, Py_ssize_t i, int half,
                         real_t* kind) noexcept nogil:
    """Pixel `i` in the arithmetic type: a float64 image's own value, every
    other dtype's float32 conversion (pixels.load)."""
    if image_t is double:
        return <real_t>img[i]
    else:
        return <real_t>load(img, i, half)


cdef inline void pool(real_t* acc, const real_t* v1, const real_t* v2,
                      const real_t* v3, const real_t* v4, real_t w1, real_t w2,
                      real_t w3, real_t w4, Py_ssize_t n) noexcept nogil:
    """``acc[c] += ((w1 v1[c] + w2 v2[c]) + w3 v3[c]) + w4 v4[c]``."""
    if real_t is float:
        cg_roi_pool_f(acc, v1, v2, v3, v4, w1, w2, w3, w4, n)
    else:
        cg_roi_pool_d(acc, v1, v2, v3, v4, w1, w2, w3, w4, n)


cdef inline void mean(real_t* acc, real_t count, Py_ssize_t n) noexcept nogil:
    """``acc[c] /= count``."""
    if real_t is float:
        cg_roi_mean_f(acc, count, n)
    else:
        cg_roi_mean_d(acc, count, n)


cdef inline void spread(real_t* dst, const real_t* g, real_t w, real_t divisor,
                        bint by_inverse, Py_ssize_t n) noexcept nogil:
    """``dst[c] += (g[c] w) / divisor`` (``* divisor`` when `by_inverse`)."""
    if real_t is float:
        cg_roi_spread_f(dst, g, w, divisor, by_inverse, n)
    else:
        cg_roi_spread_d(dst, g, w, divisor, by_inverse, n)


cdef inline void slopes(real_t* lo, real_t* hi, const real_t* a1, const real_t* b1,
                        const real_t* a2, const real_t* b2, real_t w_rest,
                        real_t w_lerp, const real_t* g, real_t f_lo, real_t f_hi,
                        Py_ssize_t n) noexcept nogil:
    """One axis's terms of the boxes gradient (`hi` NULL: size held)."""
    if real_t is float:
        cg_roi_slopes_f(lo, hi, a1, b1, a2, b2, w_rest, w_lerp, g, f_lo, f_hi, n)
    else:
        cg_roi_slopes_d(lo, hi, a1, b1, a2, b2, w_rest, w_lerp, g, f_lo, f_hi, n)


cdef inline void tangent(real_t* acc, const real_t* v1, const real_t* v2,
                         const real_t* v3, const real_t* v4, real_t hy, real_t ly,
                         real_t hx, real_t lx, real_t rate_y, real_t rate_x,
                         int axes, Py_ssize_t n) noexcept nogil:
    """The JVP's terms of one sample (`axes`: CG_ROI_BOTH, _ROWS_ONLY or
    _COLS_ONLY)."""
    if real_t is float:
        cg_roi_tangent_f(acc, v1, v2, v3, v4, hy, ly, hx, lx, rate_y, rate_x,
                         axes, n)
    else:
        cg_roi_tangent_d(acc, v1, v2, v3, v4, hy, ly, hx, lx, rate_y, rate_x,
                         axes, n)
