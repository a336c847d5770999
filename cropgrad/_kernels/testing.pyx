# cython: language_level=3
"""Thin wrappers of the kernels' inline helpers, for the tests (private).

The tests compare the sampling coordinates and the float16 conversions bit
for bit with NumPy's float32 arithmetic through these.
"""

from libc.stdint cimport int64_t, uint16_t, uint32_t
from libc.string cimport memcpy

import numpy as np

from .cdefs cimport (
    CG_FPENV_SUPPORTED,
    cg_fpenv_enter,
    cg_fpenv_leave,
    cg_half_to_float,
    cg_pages_resident,
    cg_round_half_base,
    cg_round_half_f16c_clone,
    cg_round_half_fn,
)
from .crop_and_resize.sampling cimport (
    crop_ratio,
    crop_scale,
    sample_coord,
)
from .roi_align.plan cimport RoiPlan, RoiProblem, Tiles
from .roi_align.tiles cimport plan_tiles


def pages_resident(array):
    """Whether the pages of an array's memory are resident (cg_pages.h): 1,
    0 (not yet written, as a fresh large allocation), or -1 where the
    system does not say."""
    cdef const unsigned char[::1] view = array.reshape(-1).view(np.uint8)
    return cg_pages_resident(&view[0], view.shape[0])


def sample_coords(const float[:, ::1] boxes,  # IN (num_boxes, 4)
                  Py_ssize_t size, Py_ssize_t crop, int axis,
                  bint boxes_gradient=False):
    """Image coordinates sampled by every crop index of every box.

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


def float_to_half_bits(const float[::1] values, bint f16c=False):  # IN (n,)
    """The float16 bit patterns the kernels write for `values`: the portable
    rounding, or with `f16c` its F16C clone (ValueError where there is
    none).

    Returns
    -------
    ndarray of shape (n,), dtype=uint16
    """
    cdef cg_round_half_fn clone = cg_round_half_base
    if f16c:
        clone = cg_round_half_f16c_clone()
        if clone == NULL:
            raise ValueError("no F16C clone here")
    bits = np.empty(values.shape[0], dtype=np.uint16)
    cdef uint16_t[::1] b = bits
    if values.shape[0] > 0:
        clone(&b[0], &values[0], values.shape[0])
    return bits


def round_half_mismatches(long long start, long long stop):
    """How many float32 bit patterns in ``[start, stop)`` the F16C clone of
    the float16 rounding (cg_half.h) turns into other bits than the portable
    code; None where there is no such clone (not x86-64, or no F16C).

    Runs on the calling thread, in its floating-point mode (see
    `with_flush_to_zero`).
    """
    cdef cg_round_half_fn clone = cg_round_half_f16c_clone()
    if clone == NULL:
        return None
    if not 0 <= start <= stop <= 1 << 32:
        raise ValueError("need 0 <= start <= stop <= 2**32")
    cdef uint32_t bits[1024]
    cdef float values[1024]
    cdef uint16_t expected[1024]
    cdef uint16_t got[1024]
    cdef long long first, mismatches = 0
    cdef Py_ssize_t i, n
    with nogil:
        first = start
        while first < stop:
            n = <Py_ssize_t>min(stop - first, 1024)
            for i in range(n):
                bits[i] = <uint32_t>(first + i)
            memcpy(values, bits, n * sizeof(float))
            cg_round_half_base(expected, values, n)
            clone(got, values, n)
            for i in range(n):
                mismatches += expected[i] != got[i]
            first += n
    return mismatches


def half_bits_to_float(const uint16_t[::1] bits):  # IN (n,)
    """The float32 values the kernels read for float16 `bits`.

    Returns
    -------
    ndarray of shape (n,), dtype=float32
    """
    values = np.empty(bits.shape[0], dtype=np.float32)
    cdef float[::1] v = values
    cdef Py_ssize_t i
    for i in range(bits.shape[0]):
        v[i] = cg_half_to_float(bits[i])
    return values


def roi_tiles(const float[:, ::1] boxes,  # IN (num_boxes, 4)
              const int64_t[::1] box_ind,  # IN (num_boxes,)
              shape, out_size, double spatial_scale, int sampling_ratio,
              bint aligned, size_t tile_bytes, int nthreads, bint read_only):
    """How a float32 NCHW RoIAlign problem on an image of `shape` (NCHW)
    goes: ``(channels, groups, parts)`` of its tiles, or None for the
    planes read where they are (`read_only`: the forward op, its JVP and
    the boxes gradient; else the image gradient)."""
    cdef RoiProblem g
    cdef RoiPlan p
    cdef Tiles t
    cdef Py_ssize_t images = len(set(np.asarray(box_ind).tolist()))
    g.num_boxes = boxes.shape[0]
    g.out_h, g.out_w = out_size
    g.batch, g.channels, g.height, g.width = shape
    g.spatial_scale = spatial_scale
    g.sampling_ratio = sampling_ratio
    g.aligned = aligned
    g.nchw = True
    g.double_arith = False
    g.tile_bytes = tile_bytes
    p.g = &g
    p.boxes = &boxes[0, 0] if boxes.shape[0] else NULL
    p.box_ind = &box_ind[0] if box_ind.shape[0] else NULL
    if not plan_tiles(&p, images if read_only else g.batch, nthreads, read_only,
                      &t, <float*>NULL):
        return None
    return t.channels, t.groups, t.parts


def with_flush_to_zero(fn):
    """Call `fn()` with flush-to-zero set on this thread, as a caller's
    thread may have it (XLA's and TensorFlow's do); returns its result.

    Returns None without calling `fn` where the mode cannot be set.
    """
    if not CG_FPENV_SUPPORTED:
        return None
    cg_fpenv_enter(1)
    try:
        return fn()
    finally:
        cg_fpenv_leave(1)
