/* The forward op's bilinear samples of one crop row, from float32 pixels.
 *
 * For each of `count` crop columns x, `n` channels of
 *
 *     upper = tl + (tr - tl) * x_lerp[x]
 *     lower = bl + (br - bl) * x_lerp[x]
 *     out   = upper + (lower - upper) * y_lerp
 *
 * in float32, TensorFlow's order (docs/semantics.md), where tl and tr are
 * pixels left[x] and right[x] of the `top` row, bl and br those of the
 * `bottom` row; pixel `col` of a row is at row + col * pixel_stride, sample
 * x is written at out + x * out_stride.  A column outside the image
 * (left[x] < 0) gets `extrapolation` in every channel.
 *
 * Both layouts call it: NHWC on the image's pixels (channels side by side),
 * NCHW on a tile of pixels gathered from their planes, so the two compute
 * every element with the same machine code.  Each SIMD lane does exactly
 * the scalar operations, without contraction (the extension is built with
 * -ffp-contract=off), so the baseline and the AVX2 / AVX-512F clones
 * (chosen at run time, cg_simd.h), or the NEON one on AArch64, give the
 * same bits.
 */
#ifndef CG_LERP_H
#define CG_LERP_H

#include <stddef.h>

#include "cg_build.h"
#include "cg_scatter.h"    /* CG_RESTRICT */

/* One sample's channels: SAMPLE is its loop (restrict-qualified, so that
 * the compiler vectorises it without checking at run time whether the
 * pixels overlap the output), ROW the walk over the columns. */
#define CG_DEFINE_LERP(SAMPLE, ROW, ATTR, LOOP)                               \
    static inline ATTR void SAMPLE(float* CG_RESTRICT out,                    \
                                   const float* CG_RESTRICT tl,               \
                                   const float* CG_RESTRICT tr,               \
                                   const float* CG_RESTRICT bl,               \
                                   const float* CG_RESTRICT br, float x_lerp, \
                                   float y_lerp, ptrdiff_t n) {               \
        ptrdiff_t c;                                                          \
        float upper, lower;                                                   \
        LOOP                                                                  \
        for (c = 0; c < n; c++) {                                             \
            upper = tl[c] + (tr[c] - tl[c]) * x_lerp;                         \
            lower = bl[c] + (br[c] - bl[c]) * x_lerp;                         \
            out[c] = upper + (lower - upper) * y_lerp;                        \
        }                                                                     \
    }                                                                         \
    static ATTR void ROW(float* out, ptrdiff_t out_stride, const float* top,  \
                         const float* bottom, ptrdiff_t pixel_stride,         \
                         const ptrdiff_t* left, const ptrdiff_t* right,       \
                         const float* x_lerp, ptrdiff_t count, float y_lerp,  \
                         float extrapolation, ptrdiff_t n) {                  \
        ptrdiff_t x, c;                                                       \
        for (x = 0; x < count; x++) {                                         \
            float* o = out + x * out_stride;                                  \
            if (left[x] < 0) {                                                \
                for (c = 0; c < n; c++) o[c] = extrapolation;                 \
                continue;                                                     \
            }                                                                 \
            SAMPLE(o, top + left[x] * pixel_stride,                           \
                   top + right[x] * pixel_stride,                             \
                   bottom + left[x] * pixel_stride,                           \
                   bottom + right[x] * pixel_stride, x_lerp[x], y_lerp, n);   \
        }                                                                     \
    }

CG_DEFINE_LERP(cg_lerp_sample_base, cg_lerp_row_base, CG_SCALAR_CLONE, CG_SCALAR_LOOP)
#if CG_SIMD_DISPATCH
CG_DEFINE_LERP(cg_lerp_sample_avx2, cg_lerp_row_avx2, __attribute__((target("avx2"))), )
CG_DEFINE_LERP(cg_lerp_sample_avx512, cg_lerp_row_avx512,
               __attribute__((target("avx512f"))), )
#endif
#if CG_SIMD_NEON
/* NEON is part of every AArch64 CPU: the compiler's vector loop. */
CG_DEFINE_LERP(cg_lerp_sample_neon, cg_lerp_row_neon, , )
#endif
#undef CG_DEFINE_LERP

typedef void (*cg_lerp_row_fn)(float*, ptrdiff_t, const float*, const float*,
                               ptrdiff_t, const ptrdiff_t*, const ptrdiff_t*,
                               const float*, ptrdiff_t, float, float, ptrdiff_t);

/* The clone in use (set by cg_simd_select, cg_simd.h). */
static cg_lerp_row_fn cg_lerp_row = cg_lerp_row_base;

#endif
