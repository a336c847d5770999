/* The boxes gradient's terms of one bilinear sample, from float32 pixels.
 *
 * For each of `n` channels, the four terms the sample adds to its box's
 * four sums (dy1, dx1, dy2, dx2), interleaved: t[4 * d + k].  Only the sums
 * are serial (they are added elsewhere, in order); the terms are
 * independent, so this loop runs over channels in SIMD lanes.  Each lane
 * does exactly the scalar float32 operations, without contraction (the
 * extension is built with -ffp-contract=off), so the baseline and the
 * AVX2 / AVX-512F clones (chosen at run time, cg_simd.h) give the same
 * bits.  `one_minus_x` and `one_minus_y` are 1 - x_lerp and 1 - y_lerp,
 * rounded to float32 by the caller.
 */
#ifndef CG_TERMS_H
#define CG_TERMS_H

#include <stddef.h>

#include "cg_build.h"
#include "cg_scatter.h"    /* CG_RESTRICT */

#define CG_DEFINE_TERMS(NAME, ATTR)                                           \
    static ATTR void NAME(const float* CG_RESTRICT tl,                        \
                          const float* CG_RESTRICT tr,                        \
                          const float* CG_RESTRICT bl,                        \
                          const float* CG_RESTRICT br,                        \
                          const float* CG_RESTRICT g, float x_lerp,           \
                          float one_minus_x, float y_lerp,                    \
                          float one_minus_y, float f_y1, float f_x1,          \
                          float f_y2, float f_x2, ptrdiff_t n,                \
                          float* CG_RESTRICT t) {                             \
        ptrdiff_t d;                                                          \
        float grad_y, grad_x;                                                 \
        for (d = 0; d < n; d++) {                                             \
            grad_y = one_minus_x * (bl[d] - tl[d]) + x_lerp * (br[d] - tr[d]); \
            grad_x = one_minus_y * (tr[d] - tl[d]) + y_lerp * (br[d] - bl[d]); \
            grad_y = grad_y * g[d];                                           \
            grad_x = grad_x * g[d];                                           \
            t[4 * d] = grad_y * f_y1;                                         \
            t[4 * d + 1] = grad_x * f_x1;                                     \
            t[4 * d + 2] = grad_y * f_y2;                                     \
            t[4 * d + 3] = grad_x * f_x2;                                     \
        }                                                                     \
    }

CG_DEFINE_TERMS(cg_terms_base, )
#if CG_SIMD_DISPATCH
CG_DEFINE_TERMS(cg_terms_avx2, __attribute__((target("avx2"))))
CG_DEFINE_TERMS(cg_terms_avx512, __attribute__((target("avx512f"))))
#endif
#undef CG_DEFINE_TERMS

typedef void (*cg_terms_fn)(const float*, const float*, const float*,
                            const float*, const float*, float, float, float,
                            float, float, float, float, float, ptrdiff_t,
                            float*);

/* The clone in use (set by cg_simd_select). */
static cg_terms_fn cg_terms = cg_terms_base;

#endif
