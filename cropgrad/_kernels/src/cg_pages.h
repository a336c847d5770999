/* Asking the kernel to back a block of memory with transparent huge pages,
 * and whether a block's pages are in memory yet.
 *
 * A large result written for the first time takes a page fault per page:
 * some 25,000 of them for 100 MB in 4 KiB pages, which can cost more than
 * the op that fills it.  NumPy's allocator advises huge pages for blocks
 * of 4 MiB and more; cropgrad.torch does the same for the tensors it
 * allocates, and cropgrad.jax for the results XLA hands its handlers,
 * before their first write.  Only a hint: on systems without
 * MADV_HUGEPAGE, or with huge pages turned off, nothing changes.
 */
#ifndef CG_PAGES_H
#define CG_PAGES_H

#include <stddef.h>
#include <stdint.h>

#if defined(__linux__) || defined(__APPLE__)
#include <sys/mman.h>
#include <unistd.h>
#endif

/* The size from which a result is advised huge pages: NumPy's. */
#define CG_HUGE_PAGES_FROM ((size_t)4 << 20)

/* 0 when the advice was given, 1 when there was nothing to advise (no
 * MADV_HUGEPAGE here, or no whole page inside the block), -1 when madvise
 * refused it (errno says why). */
static inline int cg_advise_huge_pages(void* start, size_t nbytes) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    long page = sysconf(_SC_PAGESIZE);
    uintptr_t lo, hi;
    if (page <= 0) return 1;
    /* madvise wants a page-aligned start: the whole pages inside the block
     * (the partial first and last pages may be shared with other blocks). */
    lo = ((uintptr_t)start + (uintptr_t)page - 1) & ~((uintptr_t)page - 1);
    hi = ((uintptr_t)start + nbytes) & ~((uintptr_t)page - 1);
    if (hi <= lo) return 1;
    return madvise((void*)lo, (size_t)(hi - lo), MADV_HUGEPAGE) == 0 ? 0 : -1;
#else
    (void)start;
    (void)nbytes;
    return 1;
#endif
}

/* Whether a block's pages have been written before: 1 when its first,
 * middle and last whole pages are all resident, 0 when one is not (a
 * result NumPy or PyTorch has just allocated: its pages fault in, zeroed,
 * as the op writes them), -1 when the system does not say.  Streaming
 * stores pay off on the first kind only: into freshly faulted pages they
 * cost more than ordinary ones (forward_nchw.pyx has the figures). */
static inline int cg_pages_resident(const void* start, size_t nbytes) {
#if defined(__linux__) || defined(__APPLE__)
    long page = sysconf(_SC_PAGESIZE);
    uintptr_t lo, hi, at[3];
    int i;
    if (page <= 0) return -1;
    lo = ((uintptr_t)start + (uintptr_t)page - 1) & ~((uintptr_t)page - 1);
    hi = ((uintptr_t)start + nbytes) & ~((uintptr_t)page - 1);
    if (hi <= lo) return -1;
    at[0] = lo;
    at[1] = lo + ((hi - lo) / 2 & ~((uintptr_t)page - 1));
    at[2] = hi - (uintptr_t)page;
    for (i = 0; i < 3; i++) {
#if defined(__APPLE__)
        char in = 0;
#else
        unsigned char in = 0;
#endif
        if (mincore((void*)at[i], (size_t)page, &in) != 0) return -1;
        if (!(in & 1)) return 0;
    }
    return 1;
#else
    (void)start;
    (void)nbytes;
    return -1;
#endif
}

#endif
