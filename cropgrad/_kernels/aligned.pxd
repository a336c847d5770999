# cython: language_level=3
#
# Scratch laid out in 64-byte blocks, so that no two threads' parts (nor a
# thread's arrays) share a cache line: shared by the kernels that allocate
# per-thread scratch.


cdef inline size_t round64(size_t n) noexcept nogil:
    """`n` bytes rounded up to a whole number of 64-byte lines."""
    return (n + 63) // 64 * 64


cdef inline char* align64(char* p) noexcept nogil:
    """The first 64-byte boundary at or after `p` (allocate 64 bytes more
    than the aligned part needs)."""
    return p + (64 - <size_t>p % 64) % 64
