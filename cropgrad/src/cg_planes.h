/* Moving channels between NCHW planes and pixels that hold them side by
 * side: the NCHW image gradient's tiles (see _grad_image_nchw.pyx).
 *
 * Plain copies (and, for float16 outputs, the one rounding of the float32
 * sum): the same values land in the same places whichever way they are
 * moved.  Gathering into side-by-side channels moves blocks of 4 channels
 * x 4 positions as four 16-byte loads, a 4 x 4 transpose in registers and
 * four 16-byte stores where the compiler has __builtin_shufflevector (GCC
 * 12+, Clang); elsewhere, and at the edges, one element at a time.
 */
#ifndef CG_PLANES_H
#define CG_PLANES_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "cg_half.h"

#if defined(__has_builtin)
#if __has_builtin(__builtin_shufflevector)
#define CG_PLANES_VECTOR 1
#endif
#endif

#ifdef CG_PLANES_VECTOR
typedef float cg_p4 __attribute__((vector_size(16)));

static inline cg_p4 cg_p4_load(const float* p) {
    cg_p4 v;
    memcpy(&v, p, sizeof v);    /* an unaligned 16-byte load */
    return v;
}

static inline void cg_p4_store(float* p, cg_p4 v) { memcpy(p, &v, sizeof v); }

/* Rows a, b, c, d of a 4 x 4 block, loaded from `src` (`src_step` apart)
 * and stored transposed at `dst` (`dst_step` apart). */
static inline void cg_p4_transpose(float* dst, ptrdiff_t dst_step,
                                   const float* src, ptrdiff_t src_step) {
    cg_p4 a = cg_p4_load(src), b = cg_p4_load(src + src_step);
    cg_p4 c = cg_p4_load(src + 2 * src_step), d = cg_p4_load(src + 3 * src_step);
    cg_p4 ab_lo = __builtin_shufflevector(a, b, 0, 4, 1, 5);
    cg_p4 ab_hi = __builtin_shufflevector(a, b, 2, 6, 3, 7);
    cg_p4 cd_lo = __builtin_shufflevector(c, d, 0, 4, 1, 5);
    cg_p4 cd_hi = __builtin_shufflevector(c, d, 2, 6, 3, 7);
    cg_p4_store(dst, __builtin_shufflevector(ab_lo, cd_lo, 0, 1, 4, 5));
    cg_p4_store(dst + dst_step, __builtin_shufflevector(ab_lo, cd_lo, 2, 3, 6, 7));
    cg_p4_store(dst + 2 * dst_step, __builtin_shufflevector(ab_hi, cd_hi, 0, 1, 4, 5));
    cg_p4_store(dst + 3 * dst_step, __builtin_shufflevector(ab_hi, cd_hi, 2, 3, 6, 7));
}
#endif

/* dst[x * n + c] = src[c * src_lane + x], for x < count and c < n. */
static inline void cg_planes_gather(float* dst, const float* src,
                                    ptrdiff_t src_lane, ptrdiff_t count,
                                    ptrdiff_t n) {
    ptrdiff_t c = 0, x;
    for (; c + 4 <= n; c += 4) {
        const float* s0 = src + c * src_lane;
        const float* s1 = s0 + src_lane;
        const float* s2 = s1 + src_lane;
        const float* s3 = s2 + src_lane;
        x = 0;
#ifdef CG_PLANES_VECTOR
        for (; x + 4 <= count; x += 4)
            cg_p4_transpose(dst + x * n + c, n, s0 + x, src_lane);
#endif
        for (; x < count; x++) {
            float* d = dst + x * n + c;
            d[0] = s0[x];
            d[1] = s1[x];
            d[2] = s2[x];
            d[3] = s3[x];
        }
    }
    for (; c < n; c++) {
        const float* s = src + c * src_lane;
        for (x = 0; x < count; x++) dst[x * n + c] = s[x];
    }
}

/* dst[c * dst_lane + x] = src[x * n + c], for x < count and c < n: float,
 * double, and float rounded to float16 bits.  The planes are written one
 * after the other, each as one sequential run: writing several planes at
 * once (a 4 x 4 transpose stored straight to four planes) makes the stores
 * wait on memory far longer (measured: the NCHW forward op 1.3 times
 * slower). */
#define CG_DEFINE_SCATTER(NAME, OUT, IN, CONVERT)                             \
    static inline void NAME(OUT* dst, ptrdiff_t dst_lane, const IN* src,      \
                            ptrdiff_t count, ptrdiff_t n) {                   \
        ptrdiff_t c, x;                                                       \
        for (c = 0; c < n; c++) {                                             \
            OUT* d = dst + c * dst_lane;                                      \
            const IN* s = src + c;                                            \
            for (x = 0; x < count; x++) d[x] = CONVERT(s[x * n]);             \
        }                                                                     \
    }

#define CG_SAME(v) (v)
CG_DEFINE_SCATTER(cg_planes_scatter_runs_f, float, float, CG_SAME)
CG_DEFINE_SCATTER(cg_planes_scatter_d, double, double, CG_SAME)
CG_DEFINE_SCATTER(cg_planes_scatter_h, uint16_t, float, cg_float_to_half)
#undef CG_SAME
#undef CG_DEFINE_SCATTER

/* The same for float, in 4 x 4 blocks where the compiler can: four planes
 * written at once.  Best where the planes are few rows each (the NCHW
 * image gradient's tiles); long runs go faster one plane at a time. */
static inline void cg_planes_scatter_f(float* dst, ptrdiff_t dst_lane,
                                       const float* src, ptrdiff_t count,
                                       ptrdiff_t n) {
    ptrdiff_t c = 0, x;
    for (; c + 4 <= n; c += 4) {
        float* d0 = dst + c * dst_lane;
        x = 0;
#ifdef CG_PLANES_VECTOR
        for (; x + 4 <= count; x += 4)
            cg_p4_transpose(d0 + x, dst_lane, src + x * n + c, n);
#endif
        for (; x < count; x++) {
            const float* s = src + x * n + c;
            d0[x] = s[0];
            d0[dst_lane + x] = s[1];
            d0[2 * dst_lane + x] = s[2];
            d0[3 * dst_lane + x] = s[3];
        }
    }
    for (; c < n; c++) {
        float* d = dst + c * dst_lane;
        for (x = 0; x < count; x++) d[x] = src[x * n + c];
    }
}

#endif
