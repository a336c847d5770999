# cython: language_level=3
#
# The instruction set of the inner loops' clones, chosen once for the
# process when this module is imported.  Each kernel module reads it when it
# is imported and points its own clones of cg_simd.h at it.

# The chosen target's name ("sse2", "avx2", "avx512", "neon", "baseline").
cdef const char* chosen_target() noexcept nogil
