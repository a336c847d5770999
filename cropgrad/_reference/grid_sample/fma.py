"""The fused multiply-add ``fma(a, b, c)`` in float32 or float64: one
rounding of the exact ``a * b + c``, emulated with error-free
transformations (NumPy has no fma), for the grid_sample reference."""

import numpy as np

# Annotated so that type checkers see variables, not aliases of NumPy's types.
f32: type[np.float32] = np.float32
f64: type[np.float64] = np.float64


def _two_sum(a, b):
    """``(s, e)`` with ``s = fl(a + b)`` and ``s + e == a + b`` exactly."""
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


def _round_to_odd(s, e):
    """The float64 nearest ``s + e`` rounded to odd: ``s`` if exact or odd,
    else its neighbour on the side of ``e`` (which is odd)."""
    even = (s.view(np.int64) & 1) == 0
    step = (e != 0) & even & np.isfinite(s)
    return np.where(step, np.nextafter(s, np.where(e > 0, np.inf, -np.inf)), s)


_VELTKAMP = f64(2.0**27 + 1)


def _split(a):
    """Veltkamp's split of float64 ``a`` into two halves of 26 bits."""
    t = _VELTKAMP * a
    hi = t - (t - a)
    return hi, a - hi


def fma(a, b, c):
    """``a * b + c`` with a single rounding, in float32 or float64.

    The type is that of the operands (NumPy's promotion); float32 operands
    give float32.  float32: the product is exact in float64, the sum is
    rounded to odd in float64 (exact sum and error by TwoSum) and then to
    float32, which is correct since float64 has more than 2 * 24 + 1 bits.
    float64: the product is split exactly (Dekker's TwoProduct with
    Veltkamp's split), ``c + hi`` exactly (TwoSum), the two small parts
    added rounding to odd, and the whole rounded once (Boldo and
    Melquiond's emulation of the FMA).  Exact for finite operands whose
    product neither overflows nor loses bits to underflow (the products of
    this module are far from either); otherwise ``a * b + c``.

    Examples
    --------
    ``(1 + 2**-12)**2`` is halfway between two float32; a tiny ``c``
    decides, which the naive float64 sum would round away:

    >>> a = np.float32(1 + 2**-12)
    >>> float(fma(a, a, np.float32(2**-80))) == 1 + 2**-11 + 2**-23
    True
    >>> float(np.float32(np.float64(a) * np.float64(a) + 2**-80)) == 1 + 2**-11
    True
    """
    T = np.result_type(a, b, c)
    if T not in (f32, f64):
        T = f64
    with np.errstate(all="ignore"):
        if T == f32:
            a64, b64, c64 = (np.asarray(v, f32).astype(f64) for v in (a, b, c))
            s, e = _two_sum(a64 * b64, c64)
            out = _round_to_odd(s, e).astype(f32)
            return out[()] if out.ndim == 0 else out
        a, b, c = (np.asarray(v, f64) for v in (a, b, c))
        hi = a * b
        ah, al = _split(a)
        bh, bl = _split(b)
        lo = ((ah * bh - hi) + ah * bl + al * bh) + al * bl
        th, tl = _two_sum(c, hi)
        s, e = _two_sum(tl, lo)
        out = th + _round_to_odd(s, e)
        ok = np.isfinite(out) & np.isfinite(hi) & np.isfinite(lo)
        out = np.where(ok, out, hi + c)
        return out[()] if out.ndim == 0 else out
