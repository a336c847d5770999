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


#define CG_DEFINE_QUAD(NAME, ACC, RESTRICT, ATTR, LOOP)                       \
    static inline ATTR void NAME(ACC* RESTRICT top_left, ACC* RESTRICT top_right,    \
                          ACC* RESTRICT bottom_left,                          \
                          ACC* RESTRICT bottom_right,                         \
                          const float* RESTRICT g, float w_top,               \
                          float w_bottom, float w_left, float w_right,        \
                          ptrdiff_t n) {                                      \
        ptrdiff_t d;                                                          \
        float v;                                                              \
        LOOP                                                                  \
        for (d = 0; d < n; d++) {                                             \
            v = w_top * g[d];                                                 \
            top_left[d] += (ACC)(w_left * v);                                 \
            top_right[d] += (ACC)(w_right * v);                               \
            v = w_bottom * g[d];                                              \
            bottom_left[d] += (ACC)(w_left * v);                              \
            bottom_right[d] += (ACC)(w_right * v);                            \
        }                                                                     \
    }

/* Pixels that may coincide: rare (a sample on a pixel row or column).
 * Used by every clone, so on AArch64 with Clang (where the portable
 * clones' loops are kept scalar by a pragma, not by the function's
 * options) scalar in the NEON clones too. */
CG_DEFINE_QUAD(cg_quad_f, float, , , CG_SCALAR_LOOP)
CG_DEFINE_QUAD(cg_quad_d, double, , , CG_SCALAR_LOOP)

/* Four distinct pixels: the deep scatter's inner loop.  The baseline build
 * (SSE2 on x86-64; scalar on AArch64, see CG_SCALAR_CLONE) and, on x86-64
 * with GCC or Clang, clones for AVX2 and AVX-512F chosen at run time; on
 * AArch64 a NEON clone.  Each SIMD lane computes one channel with exactly
 * the scalar operations (no FMA: the extension is built with
 * -ffp-contract=off, and none of these targets implies contraction), so
 * every clone gives the same bits; only the vector width differs. */
CG_DEFINE_QUAD(cg_quad_distinct_f_base, float, CG_RESTRICT, CG_SCALAR_CLONE,
               CG_SCALAR_LOOP)
CG_DEFINE_QUAD(cg_quad_distinct_d_base, double, CG_RESTRICT, CG_SCALAR_CLONE,
               CG_SCALAR_LOOP)

#if CG_SIMD_DISPATCH
CG_DEFINE_QUAD(cg_quad_distinct_f_avx2, float, CG_RESTRICT, __attribute__((target("avx2"))), )
CG_DEFINE_QUAD(cg_quad_distinct_d_avx2, double, CG_RESTRICT, __attribute__((target("avx2"))), )
CG_DEFINE_QUAD(cg_quad_distinct_f_avx512, float, CG_RESTRICT, __attribute__((target("avx512f"))), )
CG_DEFINE_QUAD(cg_quad_distinct_d_avx512, double, CG_RESTRICT, __attribute__((target("avx512f"))), )
#endif

#if CG_SIMD_NEON
#include <arm_neon.h>

/* The NEON clone, written out: four channels per vector, each the scalar
 * code's products and sums in its order (w_top * g, then w_left * that
 * added to top-left, ...).  Separate multiplies and adds, never vfmaq_*.
 * The double accumulators take each float32 product widened exactly
 * (vcvt), as the scalar (ACC) cast does.  The last n % 4 channels go
 * through the scalar body. */
static inline void cg_quad_distinct_f_neon(
    float* CG_RESTRICT top_left, float* CG_RESTRICT top_right,
    float* CG_RESTRICT bottom_left, float* CG_RESTRICT bottom_right,
    const float* CG_RESTRICT g, float w_top, float w_bottom, float w_left,
    float w_right, ptrdiff_t n) {
    const float32x4_t wt = vdupq_n_f32(w_top), wb = vdupq_n_f32(w_bottom);
    const float32x4_t wl = vdupq_n_f32(w_left), wr = vdupq_n_f32(w_right);
    ptrdiff_t d;
    for (d = 0; d + 4 <= n; d += 4) {
        float32x4_t gd = vld1q_f32(g + d);
        float32x4_t v = vmulq_f32(wt, gd);
        vst1q_f32(top_left + d, vaddq_f32(vld1q_f32(top_left + d), vmulq_f32(wl, v)));
        vst1q_f32(top_right + d, vaddq_f32(vld1q_f32(top_right + d), vmulq_f32(wr, v)));
        v = vmulq_f32(wb, gd);
        vst1q_f32(bottom_left + d,
                  vaddq_f32(vld1q_f32(bottom_left + d), vmulq_f32(wl, v)));
        vst1q_f32(bottom_right + d,
                  vaddq_f32(vld1q_f32(bottom_right + d), vmulq_f32(wr, v)));
    }
    if (d < n)
        cg_quad_f(top_left + d, top_right + d, bottom_left + d, bottom_right + d,
                  g + d, w_top, w_bottom, w_left, w_right, n - d);
}

/* acc[0..3] += (double)p[0..3]: two float64x2 halves. */
static inline void cg_add_widened_neon(double* CG_RESTRICT acc, float32x4_t p) {
    vst1q_f64(acc, vaddq_f64(vld1q_f64(acc), vcvt_f64_f32(vget_low_f32(p))));
    vst1q_f64(acc + 2, vaddq_f64(vld1q_f64(acc + 2), vcvt_high_f64_f32(p)));
}

static inline void cg_quad_distinct_d_neon(
    double* CG_RESTRICT top_left, double* CG_RESTRICT top_right,
    double* CG_RESTRICT bottom_left, double* CG_RESTRICT bottom_right,
    const float* CG_RESTRICT g, float w_top, float w_bottom, float w_left,
    float w_right, ptrdiff_t n) {
    const float32x4_t wt = vdupq_n_f32(w_top), wb = vdupq_n_f32(w_bottom);
    const float32x4_t wl = vdupq_n_f32(w_left), wr = vdupq_n_f32(w_right);
    ptrdiff_t d;
    for (d = 0; d + 4 <= n; d += 4) {
        float32x4_t gd = vld1q_f32(g + d);
        float32x4_t v = vmulq_f32(wt, gd);
        cg_add_widened_neon(top_left + d, vmulq_f32(wl, v));
        cg_add_widened_neon(top_right + d, vmulq_f32(wr, v));
        v = vmulq_f32(wb, gd);
        cg_add_widened_neon(bottom_left + d, vmulq_f32(wl, v));
        cg_add_widened_neon(bottom_right + d, vmulq_f32(wr, v));
    }
    if (d < n)
        cg_quad_d(top_left + d, top_right + d, bottom_left + d, bottom_right + d,
                  g + d, w_top, w_bottom, w_left, w_right, n - d);
}
#endif

/* One crop row of bilinear samples into deep pixels: each sample's four
 * corner updates in turn, with the walk over the samples in the same
 * clone as the updates, so that the vector loop is inlined (a call per
 * sample costs a good part of the work for 64 channels).
 *
 * Pixel `col` of a row is at row + col * stride, a sample's grads at
 * g + x * stride, and `n` channels are updated.  `top` or `bottom` is NULL
 * for a row outside the task's band: its updates then go to the two spare
 * pixels (spare, spare + stride), so that every sample runs this same code
 * for any banding.  `same_row`: the two rows are one.  With ahead > 0, the
 * grads `ahead` floats past each sample's (n of them, up to g_end) are
 * asked for first; with `ask` not NULL, `ask_count` lines of it (see
 * cg_ask) before each sample.  The same arithmetic as cg_quad_*, in the
 * same order. */
#define CG_DEFINE_ROW(NAME, ACC, DISTINCT, ANY, ATTR)                         \
    static ATTR void NAME(ACC* top, ACC* bottom, ACC* spare, ptrdiff_t stride, \
                          const float* g, const ptrdiff_t* col_lo,            \
                          const ptrdiff_t* col_hi, const float* w_left,       \
                          const float* w_right, ptrdiff_t cw, float w_top,    \
                          float w_bottom, int same_row, ptrdiff_t n,          \
                          ptrdiff_t ahead, const float* g_end,                \
                          cg_ahead* ask, ptrdiff_t ask_count) {               \
        ptrdiff_t x, col, right;                                              \
        for (x = 0; x < cw; x++) {                                            \
            const float* gx = g + x * stride;                                 \
            ACC *tl, *tr, *bl, *br;                                           \
            col = col_lo[x];                                                  \
            if (col < 0) continue;                                            \
            right = col_hi[x];                                                \
            if (ahead > 0) {                                                  \
                const float* p = gx + ahead;                                  \
                const float* end = p + n < g_end ? p + n : g_end;             \
                for (; p < end; p += 16) cg_prefetch(p);                      \
            }                                                                 \
            if (ask) cg_ask(ask, ask_count);                                  \
            tl = top ? top + col * stride : spare;                            \
            tr = top ? top + right * stride : spare + stride;                 \
            bl = bottom ? bottom + col * stride : spare;                      \
            br = bottom ? bottom + right * stride : spare + stride;           \
            if (col != right && !same_row)                                    \
                DISTINCT(tl, tr, bl, br, gx, w_top, w_bottom, w_left[x],      \
                         w_right[x], n);                                      \
            else                                                              \
                ANY(tl, tr, bl, br, gx, w_top, w_bottom, w_left[x],           \
                    w_right[x], n);                                           \
        }                                                                     \
    }

CG_DEFINE_ROW(cg_row_f_base, float, cg_quad_distinct_f_base, cg_quad_f,
              CG_SCALAR_CLONE)
CG_DEFINE_ROW(cg_row_d_base, double, cg_quad_distinct_d_base, cg_quad_d,
              CG_SCALAR_CLONE)
#if CG_SIMD_NEON
CG_DEFINE_ROW(cg_row_f_neon, float, cg_quad_distinct_f_neon, cg_quad_f, )
CG_DEFINE_ROW(cg_row_d_neon, double, cg_quad_distinct_d_neon, cg_quad_d, )
#endif
#if CG_SIMD_DISPATCH
CG_DEFINE_ROW(cg_row_f_avx2, float, cg_quad_distinct_f_avx2, cg_quad_f,
              __attribute__((target("avx2"))))
CG_DEFINE_ROW(cg_row_d_avx2, double, cg_quad_distinct_d_avx2, cg_quad_d,
              __attribute__((target("avx2"))))
CG_DEFINE_ROW(cg_row_f_avx512, float, cg_quad_distinct_f_avx512, cg_quad_f,
              __attribute__((target("avx512f"))))
CG_DEFINE_ROW(cg_row_d_avx512, double, cg_quad_distinct_d_avx512, cg_quad_d,
              __attribute__((target("avx512f"))))
#endif

typedef void (*cg_row_f_fn)(float*, float*, float*, ptrdiff_t, const float*,
                            const ptrdiff_t*, const ptrdiff_t*, const float*,
                            const float*, ptrdiff_t, float, float, int, ptrdiff_t,
                            ptrdiff_t, const float*, cg_ahead*, ptrdiff_t);
typedef void (*cg_row_d_fn)(double*, double*, double*, ptrdiff_t, const float*,
                            const ptrdiff_t*, const ptrdiff_t*, const float*,
                            const float*, ptrdiff_t, float, float, int, ptrdiff_t,
                            ptrdiff_t, const float*, cg_ahead*, ptrdiff_t);


/* The clones in use (set by cg_simd_select, cg_simd.h). */
static cg_row_f_fn cg_row_f = cg_row_f_base;
static cg_row_d_fn cg_row_d = cg_row_d_base;

#endif
