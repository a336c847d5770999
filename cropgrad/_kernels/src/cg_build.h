/* Build facts and small compiler helpers shared by every module.
 *
 * CG_COMPILER and CG_CFLAGS are defined by setup.py on the command line;
 * the fallbacks keep a hand-made build compiling.
 */
#ifndef CG_BUILD_H
#define CG_BUILD_H

#include <stddef.h>

#ifndef CG_COMPILER
#define CG_COMPILER "unknown"
#endif
#ifndef CG_CFLAGS
#define CG_CFLAGS "unknown"
#endif

/* Hints to bring a cache line in (read; keep in all levels, or in the
 * outer levels only); no-ops where the compiler has no such builtin.
 * Never fault. */
#if defined(__GNUC__) || defined(__clang__)
#define cg_prefetch(p) __builtin_prefetch((p), 0, 3)
#define cg_prefetch_outer(p) __builtin_prefetch((p), 0, 2)
#else
#define cg_prefetch(p) ((void)(p))
#define cg_prefetch_outer(p) ((void)(p))
#endif

/* Cache lines to ask for a few at a time, into the outer caches: `runs`
 * runs of `length` floats, `lane` floats apart; the next line is run
 * `run`, float `pos`. */
typedef struct {
    const float* start;
    ptrdiff_t lane, length, runs, run, pos;
} cg_ahead;

/* Ask for the next `count` lines of `a` (none once it is exhausted). */
static inline void cg_ask(cg_ahead* a, ptrdiff_t count) {
    while (count > 0 && a->run < a->runs) {
        cg_prefetch_outer(a->start + a->run * a->lane + a->pos);
        a->pos += 16;
        if (a->pos >= a->length) {
            a->run++;
            a->pos = 0;
        }
        count--;
    }
}

/* Which clones the inner loops have (cg_simd.h):
 *
 * - x86-64 with GCC or Clang (CG_SIMD_DISPATCH): the baseline the build
 *   targets (SSE2, which the compiler vectorises for) and AVX2 / AVX-512F
 *   clones, chosen at run time by what the CPU has;
 * - AArch64 with GCC or Clang (CG_SIMD_NEON): NEON clones written with
 *   <arm_neon.h> (NEON is part of every AArch64 CPU), and a portable
 *   baseline kept scalar (CG_SCALAR_CLONE below), so that the two are
 *   different code giving the same bits;
 * - anything else: the portable code only. */
#if (defined(__x86_64__) || defined(_M_X64)) && (defined(__GNUC__) || defined(__clang__))
#define CG_SIMD_DISPATCH 1
#define CG_SIMD_NEON 0
#define CG_SIMD_BASELINE "sse2"
#elif defined(__aarch64__) && (defined(__GNUC__) || defined(__clang__))
#define CG_SIMD_DISPATCH 0
#define CG_SIMD_NEON 1
#define CG_SIMD_BASELINE "baseline"
#else
#define CG_SIMD_DISPATCH 0
#define CG_SIMD_NEON 0
#define CG_SIMD_BASELINE "baseline"
#endif

/* The portable clones' loops on AArch64: not vectorised (an attribute of
 * the function for GCC, a pragma before the loop for Clang), so that
 * CROPGRAD_SIMD=baseline runs scalar code beside the NEON clones.
 * Elsewhere the baseline stays what the compiler makes of it. */
#if CG_SIMD_NEON && defined(__clang__)
#define CG_SCALAR_CLONE
#define CG_SCALAR_LOOP _Pragma("clang loop vectorize(disable) interleave(disable)")
#elif CG_SIMD_NEON
#define CG_SCALAR_CLONE \
    __attribute__((optimize("no-tree-loop-vectorize", "no-tree-slp-vectorize")))
#define CG_SCALAR_LOOP
#else
#define CG_SCALAR_CLONE
#define CG_SCALAR_LOOP
#endif

#endif
