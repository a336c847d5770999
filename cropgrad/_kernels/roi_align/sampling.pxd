# cython: language_level=3
#
# Where RoIAlign's samples fall: the one copy of the family's arithmetic of
# sample coordinates, clamps and weights, in torchvision's order
# (docs/semantics.md, "RoIAlign"), shared by every RoIAlign kernel and by
# the gate's check of the samples per bin.
#
# Everything is computed in the arithmetic type `real_t` (float for every
# image dtype but float64, double for float64), one rounding per operation.
# The structs hold those values as double, which every float is exactly.

from libc.math cimport ceil, isfinite
from libc.stdint cimport int64_t


ctypedef fused real_t:
    float
    double


# At most this many samples in a bin (grid_h * grid_w): its count is then
# exact in float32, and no int product of torchvision's overflows.
cdef enum:
    MAX_SAMPLES_PER_BIN = 1 << 24


ctypedef struct RoiAxis:
    # One box along one axis (rows: y1, y2, height, out_h; columns: x1, x2,
    # width, out_w), all in the arithmetic type.
    double start        # lo * scale - offset
    double bin          # the size (held at 1 when not aligned) over pooled
    double scale        # spatial_scale, rounded to the arithmetic type
    int64_t grid        # samples per bin along the axis (0: none)
    int64_t pooled      # bins along the axis
    int64_t size        # the feature map's extent
    bint size_held      # aligned=False held the size at 1 (raw size < 1)


ctypedef struct RoiTap:
    # Where one sample falls along one axis.
    bint inside         # -1 <= c <= size (False for NaN): the sample reads
    int64_t low         # the two pixels it reads along the axis
    int64_t high
    double lerp         # l = c - low (after the clamps)
    double rest         # h = 1 - l
    bint held           # a clamp holds c (c <= 0, or low = size - 1)
    double f_lo         # dc/dlo and dc/dhi (`roi_factors`), for the
    double f_hi         # derivatives in the boxes


cdef inline int64_t roi_grid(real_t bin_size, int sampling_ratio) noexcept nogil:
    """Samples per bin along an axis: the ratio, else ``ceil(bin)``; 0 for
    a non-finite or negative one (no samples), MAX_SAMPLES_PER_BIN + 1 for
    one beyond the bound (refused by the gate before any work)."""
    cdef double g
    if sampling_ratio > 0:
        return sampling_ratio
    if not isfinite(bin_size):
        return 0
    # ceil of a float is exact in double.
    g = ceil(<double>bin_size)
    if g <= 0:
        return 0
    if g > MAX_SAMPLES_PER_BIN:
        return MAX_SAMPLES_PER_BIN + 1
    return <int64_t>g


cdef inline void roi_axis(real_t lo, real_t hi, real_t scale, bint aligned,
                          int64_t pooled, int64_t size, int sampling_ratio,
                          RoiAxis* a) noexcept nogil:
    """One box's geometry along one axis, in torchvision's roundings:
    ``start = lo * s - off``, ``size = (hi * s - off) - start`` (held at 1
    when not aligned), ``bin = size / pooled``, ``grid``."""
    cdef real_t offset = <real_t>0.5 if aligned else <real_t>0
    cdef real_t start = lo * scale - offset
    cdef real_t end = hi * scale - offset
    cdef real_t length = end - start
    a.size_held = (not aligned) and length < 1
    if a.size_held:
        length = 1
    cdef real_t bin_size = length / <real_t>pooled
    a.start = start
    a.bin = bin_size
    a.scale = scale
    a.grid = roi_grid(bin_size, sampling_ratio)
    a.pooled = pooled
    a.size = size


cdef inline real_t roi_coord(real_t start, real_t bin_size, int64_t grid,
                             int64_t p, int64_t i) noexcept nogil:
    """The coordinate of sample `i` of bin `p`:
    ``(start + p * bin) + ((i + 0.5) * bin) / grid``, with ``i + 0.5`` a
    float addition as torchvision writes it (``iy + .5f``; exact below
    2**23, i < 2**24 here)."""
    cdef real_t base = start + <real_t>p * bin_size
    cdef float half = <float>i + <float>0.5
    return base + (<real_t>half * bin_size) / <real_t>grid


cdef inline void roi_tap(real_t c, int64_t size, RoiTap* t) noexcept nogil:
    """Where coordinate `c` falls along an axis of `size` pixels: the
    clamps at [-1, 0] and [size - 1, size], the two pixels and ``l, h``."""
    cdef real_t lerp
    t.inside = c >= -1 and c <= <real_t>size
    if not t.inside:
        return
    t.held = c <= 0
    if c <= 0:
        c = 0
    t.low = <int64_t>c
    if t.low >= size - 1:
        t.low = size - 1
        t.high = size - 1
        c = <real_t>t.low
        t.held = True
    else:
        t.high = t.low + 1
    lerp = c - <real_t>t.low
    t.lerp = lerp
    # torchvision's 1. - l in double, rounded to the arithmetic type: for
    # float that is the float subtraction (double holds 1 - l exactly).
    t.rest = <real_t>1 - lerp


cdef inline int64_t roi_count(const RoiAxis* rows,
                              const RoiAxis* cols) noexcept nogil:
    """The samples of a bin, at least 1 (the divisor of its sums)."""
    cdef int64_t n = rows.grid * cols.grid
    return n if n > 0 else 1


cdef inline bint roi_power_of_two(int64_t n) noexcept nogil:
    """Whether dividing by `n` is multiplying by ``1 / n``, exactly: a
    power of two, whose reciprocal is exact, gives the correctly rounded
    quotient either way, for every dividend."""
    return n > 0 and (n & (n - 1)) == 0


cdef inline void roi_factors(const RoiAxis* a, int64_t p, int64_t i, real_t* f_lo,
                             real_t* f_hi) noexcept nogil:
    """How fast sample `i` of bin `p` moves with the box's low and high
    edges (``dc/dlo``, ``dc/dhi``): ``s * (1 - frac)`` and ``s * frac`` with
    ``frac = (p + (i + 0.5) / grid) / pooled``, each operation rounded; ``s``
    and 0 when the size is held at 1 (the box only moves).  `f_lo` and
    `f_hi` have the arithmetic type; their pointers' type picks it."""
    cdef real_t s = <real_t>a.scale
    cdef real_t frac
    cdef float half = <float>i + <float>0.5
    if a.size_held:
        f_lo[0] = s
        f_hi[0] = 0
        return
    frac = (<real_t>p + <real_t>half / <real_t>a.grid) / <real_t>a.pooled
    f_hi[0] = s * frac
    f_lo[0] = s * (<real_t>1 - frac)


cdef inline void roi_sample(const RoiAxis* a, int64_t p, int64_t i, RoiTap* t,
                            real_t* kind) noexcept nogil:
    """Sample `i` of bin `p` along the axis, with its rates (`kind`: a
    pointer of the arithmetic type)."""
    cdef real_t f_lo, f_hi
    roi_tap(roi_coord(<real_t>a.start, <real_t>a.bin, a.grid, p, i), a.size, t)
    roi_factors(a, p, i, &f_lo, &f_hi)
    t.f_lo = f_lo
    t.f_hi = f_hi


cdef inline void roi_taps(const RoiAxis* a, RoiTap* taps, real_t* kind) noexcept nogil:
    """Every sample of the axis, ``taps[p * grid + i]``."""
    cdef int64_t p, i
    for p in range(a.pooled):
        for i in range(a.grid):
            roi_sample(a, p, i, &taps[p * a.grid + i], kind)
