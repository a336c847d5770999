/* Asking the kernel to back a block of memory with transparent huge pages.
 *
 * A large result written for the first time takes a page fault per page:
 * some 25,000 of them for 100 MB in 4 KiB pages, which can cost more than
 * the op that fills it.  NumPy's allocator advises huge pages for blocks
 * of 4 MiB and more; cropgrad.torch does the same for the tensors it
 * allocates, before their first write.  Only a hint: on systems without
 * MADV_HUGEPAGE, or with huge pages turned off, nothing changes.
 */
#ifndef CG_PAGES_H
#define CG_PAGES_H

#include <stddef.h>
#include <stdint.h>

#if defined(__linux__)
#include <sys/mman.h>
#include <unistd.h>
#endif

/* 0 when the advice was given, 1 when there was nothing to advise (no
 * MADV_HUGEPAGE here, or no whole page inside the block), -1 when madvise
 * refused it (errno says why). */
static int cg_advise_huge_pages(void* start, size_t nbytes) {
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

#endif
