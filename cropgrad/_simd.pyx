# cython: language_level=3
"""The instruction set of the inner loops' clones, one for the process.

The widest this CPU runs, unless the environment variable CROPGRAD_SIMD
names one (the tests run the fixtures on every target this way; every
target gives the same bits).  Chosen once, when this module is imported
(`cropgrad.capi` imports it, so before any kernel runs), and pushed to
every kernel module with such loops: each holds its own pointers to the
clones of cg_simd.h (the image gradient's deep scatter, the NCHW tiles'
corner updates, the boxes gradient's terms, the forward op's samples, the
plane transposes).
"""

from libc.stdlib cimport getenv

from cropgrad._cdefs cimport CG_SIMD_BASELINE, cg_simd_choice, cg_simd_supported
from cropgrad._forward cimport use_simd as forward_use_simd
from cropgrad._forward_nchw cimport use_simd as forward_nchw_use_simd
from cropgrad._grad_boxes cimport use_simd as grad_boxes_use_simd
from cropgrad._grad_boxes_nchw cimport use_simd as grad_boxes_nchw_use_simd
from cropgrad._grad_image cimport use_simd as grad_image_use_simd
from cropgrad._grad_image_nchw cimport use_simd as grad_image_nchw_use_simd


def simd_targets():
    """The instruction sets of the inner loops this CPU can run."""
    return [t for t in (CG_SIMD_BASELINE.decode(), "avx2", "avx512", "neon")
            if cg_simd_supported(t.encode())]


def simd_target():
    """The instruction set the inner loops use in this process."""
    return _target


cdef str _select():
    cdef const char* requested = getenv(b"CROPGRAD_SIMD")
    cdef const char* chosen = cg_simd_choice(requested)
    if chosen == NULL:
        raise ImportError(
            f"CROPGRAD_SIMD={requested.decode(errors='replace')!r}: this CPU "
            f"cannot run it; choose from {simd_targets()} or 'auto'"
        )
    # A target this CPU runs: every module takes it.
    grad_image_use_simd(chosen)
    grad_image_nchw_use_simd(chosen)
    forward_use_simd(chosen)
    forward_nchw_use_simd(chosen)
    grad_boxes_use_simd(chosen)
    grad_boxes_nchw_use_simd(chosen)
    return chosen.decode()


_target = _select()
