# cython: language_level=3
#
# Scratch laid out in 64-byte blocks, so that no two threads' parts (nor a
# thread's arrays) share a cache line: shared by the kernels that allocate
# per-thread scratch or many tables at once.

from libc.stdlib cimport malloc


cdef inline size_t round64(size_t n) noexcept nogil:
    """`n` bytes rounded up to a whole number of 64-byte lines."""
    return (n + 63) // 64 * 64


cdef inline char* align64(char* p) noexcept nogil:
    """The first 64-byte boundary at or after `p` (allocate 64 bytes more
    than the aligned part needs)."""
    return p + (64 - <size_t>p % 64) % 64


# Several tables carved out of one allocation, each on a 64-byte boundary.
# A plan lays its tables out twice with the same calls of `carve`: first
# with `base` NULL, which only counts the bytes (every pointer NULL), then
# after `carve_allocate`, which hands out the pointers.
ctypedef struct Carving:
    char* block       # what malloc returned (free it), or NULL
    char* base        # its first 64-byte boundary; NULL while counting
    size_t size       # bytes handed out so far


cdef inline void carve_count(Carving* c) noexcept nogil:
    """Start counting the bytes of a layout."""
    c.block = NULL
    c.base = NULL
    c.size = 0


cdef inline void* carve(Carving* c, size_t nbytes) noexcept nogil:
    """The next `nbytes`, at a 64-byte boundary (NULL while counting)."""
    cdef size_t at = round64(c.size)
    c.size = at + nbytes
    return NULL if c.base == NULL else <void*>(c.base + at)


cdef inline int carve_allocate(Carving* c) noexcept nogil:
    """Allocate the bytes counted; 0, or -1 (``c.size`` is then the bytes
    that could not be allocated).  The layout is then carved again."""
    cdef size_t size = c.size + 64
    c.block = <char*>malloc(size)
    if c.block == NULL:
        c.size = size
        return -1
    c.base = align64(c.block)
    c.size = 0
    return 0
