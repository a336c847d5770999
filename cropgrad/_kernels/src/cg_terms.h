/* The boxes gradient's terms of one bilinear sample, from float32 pixels.
 *
 * For each of `n` channels, the four terms the sample adds to its box's
 * four sums (dy1, dx1, dy2, dx2), interleaved: t[4 * d + k].  Only the sums
 * are serial (they are added elsewhere, in order); the terms are
 * independent, so this loop runs over channels in SIMD lanes.  Each lane
 * does exactly the scalar float32 operations, without contraction (the
 * extension is built with -ffp-contract=off), so the baseline and the
 * AVX2 / AVX-512F clones (chosen at run time, cg_simd.h), or the NEON one
 * on AArch64, give the same bits.  `one_minus_x` and `one_minus_y` are
 * 1 - x_lerp and 1 - y_lerp, rounded to float32 by the caller.
 */
#ifndef CG_TERMS_H
#define CG_TERMS_H

#include <stddef.h>
#include <string.h>

#include "cg_build.h"
#include "cg_scatter.h"    /* CG_RESTRICT */

#define CG_DEFINE_TERMS(NAME, ATTR, LOOP)                                     \
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
        LOOP                                                                  \
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

CG_DEFINE_TERMS(cg_terms_base, CG_SCALAR_CLONE, CG_SCALAR_LOOP)
#if CG_SIMD_DISPATCH
CG_DEFINE_TERMS(cg_terms_avx2, __attribute__((target("avx2"))), )
CG_DEFINE_TERMS(cg_terms_avx512, __attribute__((target("avx512f"))), )
#endif
#if CG_SIMD_NEON
/* The last n % 4 channels of the NEON clone: the scalar body. */
CG_DEFINE_TERMS(cg_terms_tail, , )
#endif
#undef CG_DEFINE_TERMS

#if CG_SIMD_NEON
#include <arm_neon.h>

/* The NEON clone, written out: four channels per vector, each lane the
 * scalar code's operations (the two differences, their products, one sum;
 * then the products with g and the four factors), with separate multiplies
 * and adds, never vfmaq_*; vst4q interleaves the four terms of each
 * channel as t[4 * d + k]. */
static void cg_terms_neon(const float* CG_RESTRICT tl, const float* CG_RESTRICT tr,
                          const float* CG_RESTRICT bl, const float* CG_RESTRICT br,
                          const float* CG_RESTRICT g, float x_lerp,
                          float one_minus_x, float y_lerp, float one_minus_y,
                          float f_y1, float f_x1, float f_y2, float f_x2,
                          ptrdiff_t n, float* CG_RESTRICT t) {
    const float32x4_t xl = vdupq_n_f32(x_lerp), omx = vdupq_n_f32(one_minus_x);
    const float32x4_t yl = vdupq_n_f32(y_lerp), omy = vdupq_n_f32(one_minus_y);
    const float32x4_t fy1 = vdupq_n_f32(f_y1), fx1 = vdupq_n_f32(f_x1);
    const float32x4_t fy2 = vdupq_n_f32(f_y2), fx2 = vdupq_n_f32(f_x2);
    ptrdiff_t d;
    for (d = 0; d + 4 <= n; d += 4) {
        float32x4_t a = vld1q_f32(tl + d), b = vld1q_f32(tr + d);
        float32x4_t c = vld1q_f32(bl + d), e = vld1q_f32(br + d);
        float32x4_t gd = vld1q_f32(g + d);
        float32x4_t grad_y = vaddq_f32(vmulq_f32(omx, vsubq_f32(c, a)),
                                       vmulq_f32(xl, vsubq_f32(e, b)));
        float32x4_t grad_x = vaddq_f32(vmulq_f32(omy, vsubq_f32(b, a)),
                                       vmulq_f32(yl, vsubq_f32(e, c)));
        float32x4x4_t out;
        grad_y = vmulq_f32(grad_y, gd);
        grad_x = vmulq_f32(grad_x, gd);
        out.val[0] = vmulq_f32(grad_y, fy1);
        out.val[1] = vmulq_f32(grad_x, fx1);
        out.val[2] = vmulq_f32(grad_y, fy2);
        out.val[3] = vmulq_f32(grad_x, fx2);
        vst4q_f32(t + 4 * d, out);
    }
    if (d < n)
        cg_terms_tail(tl + d, tr + d, bl + d, br + d, g + d, x_lerp, one_minus_x,
                      y_lerp, one_minus_y, f_y1, f_x1, f_y2, f_x2, n - d, t + 4 * d);
}
#endif

/* The boxes a task sums together (see cg_sum_terms): four vector chains
 * in flight.  Eight measured no faster (detector problem), with twice the
 * scratch per thread. */
#define CG_SUM_GROUP 4

/* sums[4 * j + k] += terms[j][4 * i + k] for i < n[j], in the order of i,
 * for each box j < count (count <= CG_SUM_GROUP): each of the 4 * count
 * sums is its own serial chain of float32 additions.  A chain waits on its
 * previous addition; the chains of CG_SUM_GROUP boxes advance together,
 * one box's four sums in the four lanes of one vector, so that several
 * additions are in flight at once.  Lane k only ever adds term k: the bits
 * of scalar code.
 *
 * Boxes with fewer terms (samples outside the image) are padded up to the
 * longest with -0.0, which leaves every float32 sum as it was (x + -0.0 is
 * x for every x, -0.0, infinities and NaN included; a sum is never a
 * subnormal that flush-to-zero would change, as it starts at 0 and every
 * addition is flushed).  Each box's buffer has room for 4 * max(n) floats. */
static inline void cg_sum_terms(float* sums, float* const* terms,
                                const ptrdiff_t* n, int count) {
    ptrdiff_t i, longest = 0;
    int j;
#if defined(__GNUC__) || defined(__clang__)
    /* Every box goes through the same vector additions, whichever group
     * it falls in (a full one, or the last of a call): NaN results keep
     * the same bits. */
    typedef float cg_v4 __attribute__((vector_size(16)));
    cg_v4 acc[CG_SUM_GROUP], t;
    for (j = 0; j < count; j++) longest = n[j] > longest ? n[j] : longest;
    for (j = 0; j < count; j++) {
        for (i = 4 * n[j]; i < 4 * longest; i++) terms[j][i] = -0.0f;
        memcpy(&acc[j], sums + 4 * j, sizeof acc[j]);
    }
    if (count == CG_SUM_GROUP) {
        for (i = 0; i < longest; i++) {
            for (j = 0; j < CG_SUM_GROUP; j++) {
                memcpy(&t, terms[j] + 4 * i, sizeof t);
                acc[j] += t;
            }
        }
    } else {
        for (i = 0; i < longest; i++) {
            for (j = 0; j < count; j++) {
                memcpy(&t, terms[j] + 4 * i, sizeof t);
                acc[j] += t;
            }
        }
    }
    for (j = 0; j < count; j++) memcpy(sums + 4 * j, &acc[j], sizeof acc[j]);
#else
    int k;
    (void)longest;
    for (j = 0; j < count; j++)
        for (i = 0; i < n[j]; i++)
            for (k = 0; k < 4; k++) sums[4 * j + k] += terms[j][4 * i + k];
#endif
}

typedef void (*cg_terms_fn)(const float*, const float*, const float*,
                            const float*, const float*, float, float, float,
                            float, float, float, float, float, ptrdiff_t,
                            float*);

/* The clone in use (set by cg_simd_select). */
static cg_terms_fn cg_terms = cg_terms_base;

#endif
