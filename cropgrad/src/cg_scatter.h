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

#include "cg_build.h"

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

#if CG_SIMD_DISPATCH
CG_DEFINE_QUAD(cg_quad_distinct_f_avx2, float, CG_RESTRICT, __attribute__((target("avx2"))))
CG_DEFINE_QUAD(cg_quad_distinct_d_avx2, double, CG_RESTRICT, __attribute__((target("avx2"))))
CG_DEFINE_QUAD(cg_quad_distinct_f_avx512, float, CG_RESTRICT, __attribute__((target("avx512f"))))
CG_DEFINE_QUAD(cg_quad_distinct_d_avx512, double, CG_RESTRICT, __attribute__((target("avx512f"))))
#endif

typedef void (*cg_quad_f_fn)(float*, float*, float*, float*, const float*, float,
                             float, float, float, ptrdiff_t);
typedef void (*cg_quad_d_fn)(double*, double*, double*, double*, const float*,
                             float, float, float, float, ptrdiff_t);

/* The clones in use (set by cg_simd_select, cg_simd.h). */
static cg_quad_f_fn cg_quad_distinct_f = cg_quad_distinct_f_base;
static cg_quad_d_fn cg_quad_distinct_d = cg_quad_distinct_d_base;

#endif
