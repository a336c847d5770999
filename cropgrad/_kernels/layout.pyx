# cython: language_level=3
"""Layout changes between NHWC and NCHW (private): each image of a batch,
a matrix of pixels by channels, copied to channels by pixels or back.

The grid-sampling family's kernels read and write NCHW; its NumPy
functions take NHWC arrays too and change their layout here instead of
through NumPy's strided copy, which walks the source one element at a
time on one thread.  A copy moves bits unchanged, so any dtype of the
same itemsize goes through as unsigned integers of that size.

The pixels of an image are cut into spans of `SPAN`, a task each, claimed
by the team.  A span of 32-bit values in 8 channels or more, on a CPU
with AVX2, is transposed in 8 x 8 blocks through registers
(cg_transpose.h: two to three times faster than the loop below with 32
channels); any other goes over its span in tiles of `TILE` pixels, each
tile channel after channel, so that the strided side of the copy stays
within a few kilobytes.
"""

from cpython.buffer cimport (
    PyBUF_C_CONTIGUOUS,
    PyBUF_WRITABLE,
    PyBuffer_Release,
    PyObject_GetBuffer,
)
from libc.stdint cimport int64_t, uint16_t, uint32_t, uint64_t

from cropgrad._kernels.cdefs cimport cg_transpose32, cg_transpose_simd
from cropgrad._runtime.parallel cimport (
    SCHEDULE_STATIC,
    resolve_threads,
    run_tasks,
)

ctypedef fused bits:
    uint16_t
    uint32_t
    uint64_t

cdef enum:
    SPAN = 4096
    TILE = 64


cdef struct Job:
    const void* src
    void* dst
    int64_t n, p, c      # images, pixels of an image, channels
    int64_t spans        # tasks per image
    bint to_channels     # NHWC source to NCHW destination (else back)
    int itemsize
    bint blocks          # 32-bit values through cg_transpose32's blocks


cdef inline void _copy(const Job* j, const bits* src, bits* dst,
                       Py_ssize_t task) noexcept nogil:
    cdef int64_t b = task // j.spans, p0 = (task % j.spans) * SPAN
    cdef int64_t p1 = min(p0 + SPAN, j.p), t0, t1, p, ch
    cdef int64_t c = j.c, pixels = j.p
    src += b * pixels * c
    dst += b * pixels * c
    t0 = p0
    while t0 < p1:
        t1 = min(t0 + TILE, p1)
        for ch in range(c):
            if j.to_channels:
                for p in range(t0, t1):
                    dst[ch * pixels + p] = src[p * c + ch]
            else:
                for p in range(t0, t1):
                    dst[p * c + ch] = src[ch * pixels + p]
        t0 = t1


cdef void _blocks(const Job* j, Py_ssize_t task) noexcept nogil:
    """`_copy`'s span as a transpose of pixels by channels (or back)."""
    cdef int64_t b = task // j.spans, p0 = (task % j.spans) * SPAN
    cdef int64_t span = min(p0 + SPAN, j.p) - p0, c = j.c, pixels = j.p
    cdef const uint32_t* src = <const uint32_t*>j.src + b * pixels * c
    cdef uint32_t* dst = <uint32_t*>j.dst + b * pixels * c
    if j.to_channels:
        cg_transpose32(src + p0 * c, c, dst + p0, pixels, span, c, 1)
    else:
        cg_transpose32(src + p0, pixels, dst + p0 * c, c, c, span, 1)


cdef void _task(void* ctx, Py_ssize_t task, int thread) noexcept nogil:
    cdef const Job* j = <const Job*>ctx
    if j.blocks:
        _blocks(j, task)
    elif j.itemsize == 2:
        _copy(j, <const uint16_t*>j.src, <uint16_t*>j.dst, task)
    elif j.itemsize == 4:
        _copy(j, <const uint32_t*>j.src, <uint32_t*>j.dst, task)
    else:
        _copy(j, <const uint64_t*>j.src, <uint64_t*>j.dst, task)


def change_layout(src, dst, bint to_channels, int num_threads):
    """Copy C-contiguous `src` into C-contiguous `dst` of the same itemsize
    (2, 4 or 8: the bits are copied), the axes of each image moved: ``[N,
    H, W, C]`` to ``[N, C, H, W]`` when `to_channels`, else back.
    `num_threads` as the ops take it (0: the default)."""
    cdef Job j
    cdef Py_buffer s, d
    cdef int threads = resolve_threads(num_threads)
    n, a, b, c = src.shape
    moved = (n, c, a, b) if to_channels else (n, b, c, a)
    if (dst.shape != moved or dst.dtype.itemsize != src.dtype.itemsize
            or src.dtype.itemsize not in (2, 4, 8) or not src.flags.c_contiguous
            or not dst.flags.c_contiguous):
        raise ValueError(f"cannot copy {src.dtype} {src.shape} to {dst.dtype} "
                         f"{dst.shape} with its axes moved")
    if src.size == 0:
        return
    # Raw buffers, not typed memoryviews: their support code would double
    # this module's compile time.
    PyObject_GetBuffer(src, &s, PyBUF_C_CONTIGUOUS)
    try:
        PyObject_GetBuffer(dst, &d, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE)
    except BaseException:
        PyBuffer_Release(&s)
        raise
    j.src = s.buf
    j.dst = d.buf
    j.n = n
    j.c = c if to_channels else a
    j.p = src.size // (j.n * j.c)
    j.spans = (j.p + SPAN - 1) // SPAN
    j.to_channels = to_channels
    j.itemsize = src.dtype.itemsize
    # Fewer than 8 channels make no block: the tiles are faster there.
    j.blocks = j.itemsize == 4 and j.c >= 8 and cg_transpose_simd() != 0
    with nogil:
        run_tasks(_task, &j, j.n * j.spans, threads, j.n * j.p * j.c, False,
                  SCHEDULE_STATIC)
    PyBuffer_Release(&d)
    PyBuffer_Release(&s)
