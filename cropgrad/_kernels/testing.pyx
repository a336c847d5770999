# cython: language_level=3
"""Thin wrappers of the kernels' inline helpers, for the tests (private).

The tests compare the sampling coordinates and the float16 conversions bit
for bit with NumPy's float32 arithmetic through these.
"""

from libc.stdint cimport uint16_t, uint32_t
from libc.string cimport memcpy

import numpy as np

from .cdefs cimport (
    CG_FPENV_SUPPORTED,
    cg_fpenv_enter,
    cg_fpenv_leave,
    cg_half_to_float,
    cg_round_half_base,
    cg_round_half_f16c_clone,
    cg_round_half_fn,
)
from .crop_and_resize.sampling cimport (
    crop_ratio,
    crop_scale,
    sample_coord,
)


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
