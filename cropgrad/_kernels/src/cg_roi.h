/* RoIAlign's loops over the channels of one sample, on pixels (or
 * gradients) whose channels lie side by side: NHWC images, and the NCHW
 * kernels' tiles.
 *
 *   pool:    acc[c] += ((w1 v1[c] + w2 v2[c]) + w3 v3[c]) + w4 v4[c]
 *   mean:    acc[c] /= count
 *   spread:  dst[c] += (g[c] w) / count    (or (g[c] w) * inverse)
 *   slopes:  d = ((w_rest (b1[c] - a1[c])) + (w_lerp (b2[c] - a2[c]))) g[c]
 *            lo[c] += d f_lo;  hi[c] += d f_hi  (unless hi is NULL)
 *   tangent: acc[c] += the sample's slope along each free axis times the
 *            rate at which the sample moves along the tangent
 *
 * torchvision's order of operations, one rounding each (docs/semantics.md,
 * "RoIAlign"), for float and double.  Each SIMD lane does exactly the
 * scalar operations, without contraction (the extension is built with
 * -ffp-contract=off), so the baseline and the AVX2 / AVX-512F clones
 * (chosen at run time, cg_simd.h), or the NEON one on AArch64, give the
 * same bits.  The pixel pointers may point at the same pixel (a clamped
 * sample reads one pixel twice); only the accumulators are written, and
 * they never overlap what is read.
 */
#ifndef CG_ROI_H
#define CG_ROI_H

#include <stddef.h>

#include "cg_build.h"
#include "cg_scatter.h"    /* CG_RESTRICT */

/* Which axes of a sample have a slope in the JVP (cg_roi_tangent): a
 * clamp that holds a coordinate leaves its axis's term out. */
enum { CG_ROI_BOTH = 0, CG_ROI_ROWS_ONLY = 1, CG_ROI_COLS_ONLY = 2 };

#define CG_DEFINE_ROI(T, S, SUFFIX, ATTR, LOOP)                               \
    static ATTR void cg_roi_pool_##S##_##SUFFIX(                              \
        T* CG_RESTRICT acc, const T* v1, const T* v2, const T* v3,            \
        const T* v4, T w1, T w2, T w3, T w4, ptrdiff_t n) {                   \
        ptrdiff_t c;                                                          \
        LOOP                                                                  \
        for (c = 0; c < n; c++)                                               \
            acc[c] = acc[c] + (((w1 * v1[c] + w2 * v2[c]) + w3 * v3[c])       \
                               + w4 * v4[c]);                                 \
    }                                                                         \
    static ATTR void cg_roi_mean_##S##_##SUFFIX(T* acc, T count,              \
                                                ptrdiff_t n) {                \
        ptrdiff_t c;                                                          \
        LOOP                                                                  \
        for (c = 0; c < n; c++) acc[c] = acc[c] / count;                      \
    }                                                                         \
    static ATTR void cg_roi_spread_##S##_##SUFFIX(                            \
        T* CG_RESTRICT dst, const T* CG_RESTRICT g, T w, T divisor,           \
        int by_inverse, ptrdiff_t n) {                                        \
        ptrdiff_t c;                                                          \
        if (by_inverse) {                                                     \
            LOOP                                                              \
            for (c = 0; c < n; c++) dst[c] += (g[c] * w) * divisor;           \
        } else {                                                              \
            LOOP                                                              \
            for (c = 0; c < n; c++) dst[c] += (g[c] * w) / divisor;           \
        }                                                                     \
    }                                                                         \
    static ATTR void cg_roi_slopes_##S##_##SUFFIX(                            \
        T* CG_RESTRICT lo, T* CG_RESTRICT hi, const T* a1, const T* b1,       \
        const T* a2, const T* b2, T w_rest, T w_lerp, const T* g, T f_lo,     \
        T f_hi, ptrdiff_t n) {                                                \
        ptrdiff_t c;                                                          \
        T d;                                                                  \
        if (hi != NULL) {                                                     \
            LOOP                                                              \
            for (c = 0; c < n; c++) {                                         \
                d = ((w_rest * (b1[c] - a1[c])) + (w_lerp * (b2[c] - a2[c]))) \
                    * g[c];                                                   \
                lo[c] = lo[c] + d * f_lo;                                     \
                hi[c] = hi[c] + d * f_hi;                                     \
            }                                                                 \
        } else {                                                              \
            LOOP                                                              \
            for (c = 0; c < n; c++) {                                         \
                d = ((w_rest * (b1[c] - a1[c])) + (w_lerp * (b2[c] - a2[c]))) \
                    * g[c];                                                   \
                lo[c] = lo[c] + d * f_lo;                                     \
            }                                                                 \
        }                                                                     \
    }                                                                         \
    static ATTR void cg_roi_tangent_##S##_##SUFFIX(                           \
        T* CG_RESTRICT acc, const T* v1, const T* v2, const T* v3,            \
        const T* v4, T hy, T ly, T hx, T lx, T rate_y, T rate_x, int axes,    \
        ptrdiff_t n) {                                                        \
        ptrdiff_t c;                                                          \
        if (axes == CG_ROI_ROWS_ONLY) {                                       \
            LOOP                                                              \
            for (c = 0; c < n; c++)                                           \
                acc[c] = acc[c] + (((hx * (v3[c] - v1[c]))                    \
                                    + (lx * (v4[c] - v2[c]))) * rate_y);      \
        } else if (axes == CG_ROI_COLS_ONLY) {                                \
            LOOP                                                              \
            for (c = 0; c < n; c++)                                           \
                acc[c] = acc[c] + (((hy * (v2[c] - v1[c]))                    \
                                    + (ly * (v4[c] - v3[c]))) * rate_x);      \
        } else {                                                              \
            LOOP                                                              \
            for (c = 0; c < n; c++)                                           \
                acc[c] = acc[c] + ((((hx * (v3[c] - v1[c]))                   \
                                     + (lx * (v4[c] - v2[c]))) * rate_y)      \
                                   + (((hy * (v2[c] - v1[c]))                 \
                                       + (ly * (v4[c] - v3[c]))) * rate_x));  \
        }                                                                     \
    }

#define CG_DEFINE_ROI_BOTH(SUFFIX, ATTR, LOOP)                                \
    CG_DEFINE_ROI(float, f, SUFFIX, ATTR, LOOP)                               \
    CG_DEFINE_ROI(double, d, SUFFIX, ATTR, LOOP)

CG_DEFINE_ROI_BOTH(base, CG_SCALAR_CLONE, CG_SCALAR_LOOP)
#if CG_SIMD_DISPATCH
CG_DEFINE_ROI_BOTH(avx2, __attribute__((target("avx2"))), )
CG_DEFINE_ROI_BOTH(avx512, __attribute__((target("avx512f"))), )
#endif
#if CG_SIMD_NEON
/* NEON is part of every AArch64 CPU: the compiler's vector loops. */
CG_DEFINE_ROI_BOTH(neon, , )
#endif
#undef CG_DEFINE_ROI_BOTH
#undef CG_DEFINE_ROI

/* The clones in use (set by cg_simd_select, cg_simd.h). */
#define CG_ROI_POINTERS(T, S)                                                 \
    typedef void (*cg_roi_pool_##S##_fn)(T*, const T*, const T*, const T*,    \
                                         const T*, T, T, T, T, ptrdiff_t);    \
    typedef void (*cg_roi_mean_##S##_fn)(T*, T, ptrdiff_t);                   \
    typedef void (*cg_roi_spread_##S##_fn)(T*, const T*, T, T, int,           \
                                           ptrdiff_t);                        \
    typedef void (*cg_roi_slopes_##S##_fn)(T*, T*, const T*, const T*,        \
                                           const T*, const T*, T, T,          \
                                           const T*, T, T, ptrdiff_t);        \
    typedef void (*cg_roi_tangent_##S##_fn)(T*, const T*, const T*,           \
                                            const T*, const T*, T, T, T, T,   \
                                            T, T, int, ptrdiff_t);            \
    static cg_roi_pool_##S##_fn cg_roi_pool_##S = cg_roi_pool_##S##_base;     \
    static cg_roi_mean_##S##_fn cg_roi_mean_##S = cg_roi_mean_##S##_base;     \
    static cg_roi_spread_##S##_fn cg_roi_spread_##S =                         \
        cg_roi_spread_##S##_base;                                             \
    static cg_roi_slopes_##S##_fn cg_roi_slopes_##S =                         \
        cg_roi_slopes_##S##_base;                                             \
    static cg_roi_tangent_##S##_fn cg_roi_tangent_##S =                       \
        cg_roi_tangent_##S##_base;

CG_ROI_POINTERS(float, f)
CG_ROI_POINTERS(double, d)
#undef CG_ROI_POINTERS

/* Point this module's RoIAlign loops at the clones with `suffix`. */
#define CG_ROI_USE(SUFFIX)                                                    \
    do {                                                                      \
        cg_roi_pool_f = cg_roi_pool_f_##SUFFIX;                               \
        cg_roi_pool_d = cg_roi_pool_d_##SUFFIX;                               \
        cg_roi_mean_f = cg_roi_mean_f_##SUFFIX;                               \
        cg_roi_mean_d = cg_roi_mean_d_##SUFFIX;                               \
        cg_roi_spread_f = cg_roi_spread_f_##SUFFIX;                           \
        cg_roi_spread_d = cg_roi_spread_d_##SUFFIX;                           \
        cg_roi_slopes_f = cg_roi_slopes_f_##SUFFIX;                           \
        cg_roi_slopes_d = cg_roi_slopes_d_##SUFFIX;                           \
        cg_roi_tangent_f = cg_roi_tangent_f_##SUFFIX;                         \
        cg_roi_tangent_d = cg_roi_tangent_d_##SUFFIX;                         \
    } while (0)

#endif
