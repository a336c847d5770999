/* Moving channels between NCHW planes and pixels that hold them side by
 * side: the NCHW kernels' staging (grads and image rows gathered into
 * side-by-side channels, the image gradient's tiles and the forward op's
 * crops written back to planes).
 *
 * Plain copies (and, for float16 outputs, the one rounding of the float32
 * sum): the same values land in the same places whichever way they are
 * moved, and whichever clone moves them.
 */
#ifndef CG_PLANES_H
#define CG_PLANES_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "cg_build.h"
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

/* Blocks of B x B: dst[i * dst_step + j] = src[j * src_step + i].  The
 * portable one, 4 x 4 (one element at a time without the vector builtin),
 * on AArch64 8 x 8 NEON ones (below), and on x86-64 with GCC or Clang an
 * 8 x 8 AVX2 one: each 256-bit register is loaded with four elements of a
 * source row in its low half and the same four of the row 4 below in its
 * high half, so that a 4 x 4 transpose within the halves leaves whole
 * 8-element destination rows. */
static inline void cg_block4(float* dst, ptrdiff_t dst_step, const float* src,
                             ptrdiff_t src_step) {
#ifdef CG_PLANES_VECTOR
    cg_p4_transpose(dst, dst_step, src, src_step);
#else
    ptrdiff_t i, j;
    for (i = 0; i < 4; i++)
        for (j = 0; j < 4; j++) dst[i * dst_step + j] = src[j * src_step + i];
#endif
}

#if CG_SIMD_DISPATCH
#include <immintrin.h>

__attribute__((target("avx2"), always_inline)) static inline void
cg_block8_avx2(float* dst, ptrdiff_t dst_step, const float* src,
               ptrdiff_t src_step) {
    __m256 r[8], t[8];
    int i;
    for (i = 0; i < 4; i++) {
        const float* lo = src + i * src_step;
        const float* hi = lo + 4 * src_step;
        r[i] = _mm256_insertf128_ps(_mm256_castps128_ps256(_mm_loadu_ps(lo)),
                                    _mm_loadu_ps(hi), 1);
        r[i + 4] = _mm256_insertf128_ps(
            _mm256_castps128_ps256(_mm_loadu_ps(lo + 4)), _mm_loadu_ps(hi + 4), 1);
    }
    for (i = 0; i < 8; i += 4) {
        __m256 a = _mm256_unpacklo_ps(r[i], r[i + 1]);
        __m256 b = _mm256_unpackhi_ps(r[i], r[i + 1]);
        __m256 c = _mm256_unpacklo_ps(r[i + 2], r[i + 3]);
        __m256 d = _mm256_unpackhi_ps(r[i + 2], r[i + 3]);
        t[i] = _mm256_shuffle_ps(a, c, 0x44);
        t[i + 1] = _mm256_shuffle_ps(a, c, 0xee);
        t[i + 2] = _mm256_shuffle_ps(b, d, 0x44);
        t[i + 3] = _mm256_shuffle_ps(b, d, 0xee);
    }
    for (i = 0; i < 8; i++) _mm256_storeu_ps(dst + i * dst_step, t[i]);
}
#endif

#if CG_SIMD_NEON
#include <arm_neon.h>

/* 4 x 4 with NEON: zip the rows pairwise as floats, then as pairs of
 * floats (64-bit lanes). */
static inline void cg_block4_neon(float* dst, ptrdiff_t dst_step, const float* src,
                                  ptrdiff_t src_step) {
    float32x4_t a = vld1q_f32(src), b = vld1q_f32(src + src_step);
    float32x4_t c = vld1q_f32(src + 2 * src_step), d = vld1q_f32(src + 3 * src_step);
    float64x2_t ab_lo = vreinterpretq_f64_f32(vzip1q_f32(a, b));
    float64x2_t ab_hi = vreinterpretq_f64_f32(vzip2q_f32(a, b));
    float64x2_t cd_lo = vreinterpretq_f64_f32(vzip1q_f32(c, d));
    float64x2_t cd_hi = vreinterpretq_f64_f32(vzip2q_f32(c, d));
    vst1q_f32(dst, vreinterpretq_f32_f64(vzip1q_f64(ab_lo, cd_lo)));
    vst1q_f32(dst + dst_step, vreinterpretq_f32_f64(vzip2q_f64(ab_lo, cd_lo)));
    vst1q_f32(dst + 2 * dst_step, vreinterpretq_f32_f64(vzip1q_f64(ab_hi, cd_hi)));
    vst1q_f32(dst + 3 * dst_step, vreinterpretq_f32_f64(vzip2q_f64(ab_hi, cd_hi)));
}

/* 8 x 8 as four 4 x 4 blocks: quadrant (i, j) of dst is quadrant (j, i)
 * of src transposed; larger blocks take half the edge overlaps and loop
 * steps of 4 x 4 ones. */
static inline void cg_block8_neon(float* dst, ptrdiff_t dst_step, const float* src,
                                  ptrdiff_t src_step) {
    cg_block4_neon(dst, dst_step, src, src_step);
    cg_block4_neon(dst + 4, dst_step, src + 4 * src_step, src_step);
    cg_block4_neon(dst + 4 * dst_step, dst_step, src + 4, src_step);
    cg_block4_neon(dst + 4 * dst_step + 4, dst_step, src + 4 * src_step + 4, src_step);
}
#endif

/* The block after the one at `i`, of blocks of `b` covering [0, total)
 * (total >= b): where total is not a multiple of b, the last block is
 * moved back to end at total, overlapping the one before it. */
static inline ptrdiff_t cg_next_block(ptrdiff_t i, ptrdiff_t b, ptrdiff_t total) {
    if (i + 2 * b <= total) return i + b;
    return i + b < total ? total - b : total;
}

/* The float copies between planes and side-by-side channels:
 *
 *   gather:    dst[x * n + c] = src[c * src_lane + x]
 *   scatter_f: dst[c * dst_lane + x] = src[x * n + c]
 *
 * for x < count and c < n, in blocks of B planes x B positions, B planes
 * at a time (each plane read or written in order).  Edges are whole
 * blocks overlapping their neighbours, which copy a few elements twice:
 * the same value to the same place.  One element at a time only where n
 * or count is below B.  Short runs (the image gradient's tiles: a few
 * rows of a plane each) go faster in blocks; long runs one plane at a
 * time (cg_planes_scatter_runs_f below).  One body, a baseline and
 * an AVX2 clone (x86-64, chosen at run time) or a NEON one (AArch64),
 * see cg_simd.h. */
#define CG_DEFINE_PLANES(SUFFIX, ATTR, B, BLOCK)                              \
    static ATTR void cg_planes_gather_##SUFFIX(float* dst, const float* src,  \
                                               ptrdiff_t src_lane,            \
                                               ptrdiff_t count, ptrdiff_t n) { \
        ptrdiff_t c, x;                                                       \
        if (n < B || count < B) {                                             \
            for (c = 0; c < n; c++)                                           \
                for (x = 0; x < count; x++)                                   \
                    dst[x * n + c] = src[c * src_lane + x];                   \
            return;                                                           \
        }                                                                     \
        for (c = 0; c < n; c = cg_next_block(c, B, n))                        \
            for (x = 0; x < count; x = cg_next_block(x, B, count))            \
                BLOCK(dst + x * n + c, n, src + c * src_lane + x, src_lane);  \
    }                                                                         \
    static ATTR void cg_planes_scatter_f_##SUFFIX(float* dst,                 \
                                                  ptrdiff_t dst_lane,         \
                                                  const float* src,           \
                                                  ptrdiff_t count,            \
                                                  ptrdiff_t n) {              \
        ptrdiff_t c, x;                                                       \
        if (n < B || count < B) {                                             \
            for (c = 0; c < n; c++)                                           \
                for (x = 0; x < count; x++)                                   \
                    dst[c * dst_lane + x] = src[x * n + c];                   \
            return;                                                           \
        }                                                                     \
        for (c = 0; c < n; c = cg_next_block(c, B, n))                        \
            for (x = 0; x < count; x = cg_next_block(x, B, count))            \
                BLOCK(dst + c * dst_lane + x, dst_lane, src + x * n + c, n);  \
    }

CG_DEFINE_PLANES(base, , 4, cg_block4)
#if CG_SIMD_DISPATCH
CG_DEFINE_PLANES(wide_avx2, __attribute__((target("avx2"))), 8, cg_block8_avx2)

/* Below 8 planes or positions, the 4 x 4 blocks. */
__attribute__((target("avx2"))) static void
cg_planes_gather_avx2(float* dst, const float* src, ptrdiff_t src_lane,
                      ptrdiff_t count, ptrdiff_t n) {
    if (n < 8 || count < 8)
        cg_planes_gather_base(dst, src, src_lane, count, n);
    else
        cg_planes_gather_wide_avx2(dst, src, src_lane, count, n);
}

__attribute__((target("avx2"))) static void
cg_planes_scatter_f_avx2(float* dst, ptrdiff_t dst_lane, const float* src,
                         ptrdiff_t count, ptrdiff_t n) {
    if (n < 8 || count < 8)
        cg_planes_scatter_f_base(dst, dst_lane, src, count, n);
    else
        cg_planes_scatter_f_wide_avx2(dst, dst_lane, src, count, n);
}
#endif
#if CG_SIMD_NEON
CG_DEFINE_PLANES(wide_neon, , 8, cg_block8_neon)

/* Below 8 planes or positions, the 4 x 4 blocks. */
static void cg_planes_gather_neon(float* dst, const float* src, ptrdiff_t src_lane,
                                  ptrdiff_t count, ptrdiff_t n) {
    if (n < 8 || count < 8)
        cg_planes_gather_base(dst, src, src_lane, count, n);
    else
        cg_planes_gather_wide_neon(dst, src, src_lane, count, n);
}

static void cg_planes_scatter_f_neon(float* dst, ptrdiff_t dst_lane, const float* src,
                                     ptrdiff_t count, ptrdiff_t n) {
    if (n < 8 || count < 8)
        cg_planes_scatter_f_base(dst, dst_lane, src, count, n);
    else
        cg_planes_scatter_f_wide_neon(dst, dst_lane, src, count, n);
}
#endif
#undef CG_DEFINE_PLANES

typedef void (*cg_planes_gather_fn)(float*, const float*, ptrdiff_t, ptrdiff_t,
                                    ptrdiff_t);
typedef void (*cg_planes_scatter_f_fn)(float*, ptrdiff_t, const float*,
                                       ptrdiff_t, ptrdiff_t);

/* The clones in use (set by cg_simd_select). */
static cg_planes_gather_fn cg_planes_gather = cg_planes_gather_base;
static cg_planes_scatter_f_fn cg_planes_scatter_f = cg_planes_scatter_f_base;

/* dst[c * dst_lane + x] = src[x * n + c], for x < count and c < n: float,
 * double, and float rounded to float16 or bfloat16 bits.  The planes are written one
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

/* Copy n floats to memory that will not be read again soon (a result far
 * larger than the caches): stores that bypass the caches, so that the
 * lines are not first read from memory.  The same values; on CPUs without
 * SSE2 streaming stores, a memcpy.  A task that uses it calls
 * cg_stream_fence before it ends, so the stores are visible to the other
 * threads when the team joins. */
#if defined(__SSE2__)
#include <emmintrin.h>
static inline void cg_copy_streaming(float* dst, const float* src, ptrdiff_t n) {
    ptrdiff_t i = 0;
    for (; i < n && ((uintptr_t)(dst + i) & 15) != 0; i++) dst[i] = src[i];
    for (; i + 4 <= n; i += 4) _mm_stream_ps(dst + i, _mm_loadu_ps(src + i));
    for (; i < n; i++) dst[i] = src[i];
}
static inline void cg_stream_fence(void) { _mm_sfence(); }
#else
static inline void cg_copy_streaming(float* dst, const float* src, ptrdiff_t n) {
    memcpy(dst, src, (size_t)n * sizeof(float));
}
static inline void cg_stream_fence(void) {}
#endif

#define CG_SAME(v) (v)
CG_DEFINE_SCATTER(cg_planes_scatter_runs_f, float, float, CG_SAME)
CG_DEFINE_SCATTER(cg_planes_scatter_d, double, double, CG_SAME)
CG_DEFINE_SCATTER(cg_planes_scatter_h, uint16_t, float, cg_float_to_half)
CG_DEFINE_SCATTER(cg_planes_scatter_bf, uint16_t, float, cg_float_to_bfloat16)
#undef CG_SAME
#undef CG_DEFINE_SCATTER


#endif
