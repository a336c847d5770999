/* The four corner updates of one bilinear sample into deep pixels.
 *
 * Each element gets top-left, top-right, bottom-left, bottom-right in that
 * order, whichever of the pointers coincide; float32 products, widened to
 * the accumulator only when added.  One loop body, four functions: float
 * and double accumulators, each with plain pointers (any pixels may
 * coincide) and with restrict-qualified ones for four distinct pixels (the
 * usual case: the sample is on no pixel row or column), which the compiler
 * vectorises without first checking at run time whether the arrays overlap
 * (that check costs a good part of the work for 64 channels).
 */
#ifndef CG_SCATTER_H
#define CG_SCATTER_H

#include <stddef.h>
#include <string.h>

#if defined(__GNUC__) || defined(__clang__)
#define CG_RESTRICT __restrict__
#elif defined(_MSC_VER)
#define CG_RESTRICT __restrict
#else
#define CG_RESTRICT
#endif


#define CG_DEFINE_QUAD(NAME, ACC, RESTRICT, ATTR)                             \
    static ATTR void NAME(ACC* RESTRICT top_left, ACC* RESTRICT top_right,    \
                          ACC* RESTRICT bottom_left,                          \
                          ACC* RESTRICT bottom_right,                         \
                          const float* RESTRICT g, float w_top,               \
                          float w_bottom, float w_left, float w_right,        \
                          ptrdiff_t n) {                                      \
        ptrdiff_t d;                                                          \
        float v;                                                              \
        for (d = 0; d < n; d++) {                                             \
            v = w_top * g[d];                                                 \
            top_left[d] += (ACC)(w_left * v);                                 \
            top_right[d] += (ACC)(w_right * v);                               \
            v = w_bottom * g[d];                                              \
            bottom_left[d] += (ACC)(w_left * v);                              \
            bottom_right[d] += (ACC)(w_right * v);                            \
        }                                                                     \
    }

/* Pixels that may coincide: rare (a sample on a pixel row or column). */
CG_DEFINE_QUAD(cg_quad_f, float, , inline)
CG_DEFINE_QUAD(cg_quad_d, double, , inline)

/* Four distinct pixels: the deep scatter's inner loop.  The baseline build
 * (SSE2 on x86-64) and, on x86-64 with GCC or Clang, clones for AVX2 and
 * AVX-512F chosen at run time.  Each SIMD lane computes one channel with
 * exactly the scalar operations (no FMA: the extension is built with
 * -ffp-contract=off, and none of these targets implies contraction), so
 * every clone gives the same bits; only the vector width differs. */
CG_DEFINE_QUAD(cg_quad_distinct_f_base, float, CG_RESTRICT, )
CG_DEFINE_QUAD(cg_quad_distinct_d_base, double, CG_RESTRICT, )

#if (defined(__x86_64__) || defined(_M_X64)) && (defined(__GNUC__) || defined(__clang__))
#define CG_SIMD_DISPATCH 1
CG_DEFINE_QUAD(cg_quad_distinct_f_avx2, float, CG_RESTRICT, __attribute__((target("avx2"))))
CG_DEFINE_QUAD(cg_quad_distinct_d_avx2, double, CG_RESTRICT, __attribute__((target("avx2"))))
CG_DEFINE_QUAD(cg_quad_distinct_f_avx512, float, CG_RESTRICT, __attribute__((target("avx512f"))))
CG_DEFINE_QUAD(cg_quad_distinct_d_avx512, double, CG_RESTRICT, __attribute__((target("avx512f"))))
#define CG_SIMD_BASELINE "sse2"
#else
#define CG_SIMD_DISPATCH 0
#define CG_SIMD_BASELINE "baseline"
#endif

typedef void (*cg_quad_f_fn)(float*, float*, float*, float*, const float*, float,
                             float, float, float, ptrdiff_t);
typedef void (*cg_quad_d_fn)(double*, double*, double*, double*, const float*,
                             float, float, float, float, ptrdiff_t);

/* The clones in use (cg_simd_select picks them once, at import). */
static cg_quad_f_fn cg_quad_distinct_f = cg_quad_distinct_f_base;
static cg_quad_d_fn cg_quad_distinct_d = cg_quad_distinct_d_base;
static const char* cg_simd_target = CG_SIMD_BASELINE;

/* Whether this CPU runs `target` ("avx2", "avx512", or the baseline). */
static inline int cg_simd_supported(const char* target) {
    if (strcmp(target, CG_SIMD_BASELINE) == 0) return 1;
#if CG_SIMD_DISPATCH
    __builtin_cpu_init();
    if (strcmp(target, "avx2") == 0) return __builtin_cpu_supports("avx2");
    if (strcmp(target, "avx512") == 0) return __builtin_cpu_supports("avx512f");
#endif
    return 0;
}

/* Use `target`, or the widest the CPU has when it is NULL, "" or "auto".
 * Returns 0, or -1 (nothing changed) for a target this CPU cannot run. */
static inline int cg_simd_select(const char* target) {
    int best = target == NULL || target[0] == 0 || strcmp(target, "auto") == 0;
    if (!best && !cg_simd_supported(target)) return -1;
#if CG_SIMD_DISPATCH
    if (best ? cg_simd_supported("avx512") : strcmp(target, "avx512") == 0) {
        cg_quad_distinct_f = cg_quad_distinct_f_avx512;
        cg_quad_distinct_d = cg_quad_distinct_d_avx512;
        cg_simd_target = "avx512";
        return 0;
    }
    if (best ? cg_simd_supported("avx2") : strcmp(target, "avx2") == 0) {
        cg_quad_distinct_f = cg_quad_distinct_f_avx2;
        cg_quad_distinct_d = cg_quad_distinct_d_avx2;
        cg_simd_target = "avx2";
        return 0;
    }
#endif
    cg_quad_distinct_f = cg_quad_distinct_f_base;
    cg_quad_distinct_d = cg_quad_distinct_d_base;
    cg_simd_target = CG_SIMD_BASELINE;
    return 0;
}

#endif
