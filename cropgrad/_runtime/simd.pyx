# cython: language_level=3
"""The instruction set of the inner loops' clones, one for the process.

The widest this CPU runs, unless the environment variable CROPGRAD_SIMD
names one (the tests run the fixtures on every target this way; every
target gives the same bits).  Chosen once, when this module is imported;
every kernel module with such loops cimports `chosen_target` and, when it
is imported itself, points its own clones of cg_simd.h at that target (the
image gradient's deep scatter, the NCHW tiles' corner updates, the boxes
gradient's terms, the forward op's samples, the plane transposes).
"""

from libc.stdlib cimport getenv
from libc.string cimport strcmp

from cropgrad._kernels.cdefs cimport CG_SIMD_BASELINE, cg_simd_choice, cg_simd_supported


# Every target's name, in static storage (the choice may come from the
# environment, whose strings can change later).
cdef const char* _NAMES[4]
_NAMES[:] = [CG_SIMD_BASELINE, b"avx2", b"avx512", b"neon"]


def simd_targets():
    """The instruction sets of the inner loops this CPU can run."""
    return [_NAMES[i].decode() for i in range(4) if cg_simd_supported(_NAMES[i])]


def simd_target():
    """The instruction set the inner loops use in this process."""
    return _target


cdef const char* _select() except NULL:
    cdef int i
    cdef const char* requested = getenv(b"CROPGRAD_SIMD")
    cdef const char* chosen = cg_simd_choice(requested)
    if chosen == NULL:
        raise ImportError(
            f"CROPGRAD_SIMD={requested.decode(errors='replace')!r}: this CPU "
            f"cannot run it; choose from {simd_targets()} or 'auto'"
        )
    for i in range(4):
        if strcmp(chosen, _NAMES[i]) == 0:
            return _NAMES[i]
    raise ImportError(f"cropgrad: unknown SIMD target {chosen.decode()!r}")


cdef const char* _chosen = _select()
# The Python string of the same name, for show_config.
_target = _chosen.decode()


cdef const char* chosen_target() noexcept nogil:
    return _chosen
