/* Transposes of 32-bit values (float32, or any bits of that size: they are
 * only moved, never computed with), in 8 x 8 blocks through AVX2 registers
 * on x86-64 CPUs that have them, one value at a time elsewhere and at the
 * edges.  Shared by the layout changes (layout.pyx) and grid sampling's
 * staged runs and NHWC loads (cg_grid_nhwc.h). */
#ifndef CG_TRANSPOSE_H
#define CG_TRANSPOSE_H

#include <stdint.h>

#if (defined(__x86_64__) || defined(_M_X64)) && \
    (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define CG_TRANSPOSE_SIMD 1
#define CG_TR_AVX2 __attribute__((target("avx2")))

/* v[j] = column j of the 8 x 8 matrix whose row i is the eight floats at
 * row[i].  Each half of a row is loaded into the 128-bit lane where its
 * column ends (rows i and i + 4 share a register), so that two rounds of
 * shuffles within the lanes finish the transpose: a third fewer shuffles
 * than a transpose of loaded rows, and twice as fast in a copy of 4096 x
 * 32 floats. */
CG_TR_AVX2 static inline void cg_rows8x8(const float* const* row, __m256* v) {
    __m256 t[8];
    int k;
    for (k = 0; k < 4; k++) {
        v[k] = _mm256_insertf128_ps(_mm256_castps128_ps256(_mm_loadu_ps(row[k])),
                                    _mm_loadu_ps(row[k + 4]), 1);
        v[k + 4] = _mm256_insertf128_ps(
            _mm256_castps128_ps256(_mm_loadu_ps(row[k] + 4)),
            _mm_loadu_ps(row[k + 4] + 4), 1);
    }
    /* v[k], k < 4: columns 0-3 of rows k and k + 4; v[k + 4]: 4-7. */
    for (k = 0; k < 8; k += 4) {
        t[k] = _mm256_unpacklo_ps(v[k], v[k + 1]);
        t[k + 1] = _mm256_unpackhi_ps(v[k], v[k + 1]);
        t[k + 2] = _mm256_unpacklo_ps(v[k + 2], v[k + 3]);
        t[k + 3] = _mm256_unpackhi_ps(v[k + 2], v[k + 3]);
        v[k] = _mm256_shuffle_ps(t[k], t[k + 2], 0x44);
        v[k + 1] = _mm256_shuffle_ps(t[k], t[k + 2], 0xEE);
        v[k + 2] = _mm256_shuffle_ps(t[k + 1], t[k + 3], 0x44);
        v[k + 3] = _mm256_shuffle_ps(t[k + 1], t[k + 3], 0xEE);
    }
}

/* The 8 x 8 block at row i, column j of src into dst (cg_transpose32's
 * arguments).  Always inlined (GCC keeps it a call, in two loops, and the
 * loop loses a quarter of its speed). */
CG_TR_AVX2 __attribute__((always_inline)) static inline void cg_block8(
        const float* src, int64_t src_stride, float* dst, int64_t dst_stride,
        int64_t i, int64_t j) {
    const float* row[8];
    __m256 v[8];
    int k;
    for (k = 0; k < 8; k++) row[k] = src + (i + k) * src_stride + j;
    cg_rows8x8(row, v);
    for (k = 0; k < 8; k++) _mm256_storeu_ps(dst + (j + k) * dst_stride + i, v[k]);
}

/* Two blocks on top of each other, rows i to i + 16: each row of dst gets
 * sixteen values, a whole cache line where dst is aligned, at once. */
CG_TR_AVX2 __attribute__((always_inline)) static inline void cg_block16(
        const float* src, int64_t src_stride, float* dst, int64_t dst_stride,
        int64_t i, int64_t j) {
    const float* row[8];
    __m256 v[8], w[8];
    int k;
    for (k = 0; k < 8; k++) row[k] = src + (i + k) * src_stride + j;
    cg_rows8x8(row, v);
    for (k = 0; k < 8; k++) row[k] += 8 * src_stride;
    cg_rows8x8(row, w);
    for (k = 0; k < 8; k++) {
        _mm256_storeu_ps(dst + (j + k) * dst_stride + i, v[k]);
        _mm256_storeu_ps(dst + (j + k) * dst_stride + i + 8, w[k]);
    }
}

/* The whole blocks of cg_transpose32, along the longer side: 4096 pixels
 * by 32 channels become 32 rows of 4096 written sixteen at a time from
 * start to end (a block at a time across all 32, 16 KB apart, they would
 * share a set of the first-level cache and evict each other: twice as
 * slow; eight at a time, about 15% slower). */
CG_TR_AVX2 static void cg_blocks8(const float* src, int64_t src_stride,
                                  float* dst, int64_t dst_stride, int64_t rows,
                                  int64_t cols) {
    int64_t i, j, i8 = rows - rows % 8, j8 = cols - cols % 8;
    if (rows > cols) {
        for (j = 0; j < j8; j += 8) {
            for (i = 0; i + 16 <= i8; i += 16)
                cg_block16(src, src_stride, dst, dst_stride, i, j);
            if (i < i8) cg_block8(src, src_stride, dst, dst_stride, i, j);
        }
    } else {
        for (i = 0; i < i8; i += 8)
            for (j = 0; j < j8; j += 8)
                cg_block8(src, src_stride, dst, dst_stride, i, j);
    }
}

/* Whether this CPU runs the blocks (asked once a call, by the caller). */
static inline int cg_transpose_simd(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2");
}
#else
#define CG_TRANSPOSE_SIMD 0
static inline int cg_transpose_simd(void) { return 0; }
#endif

/* dst = src transposed: src `rows` x `cols`, its rows `src_stride` values
 * apart; dst `cols` x `rows`, its rows `dst_stride` apart.  `simd`:
 * cg_transpose_simd()'s answer.  A copy: the bits are unchanged. */
static inline void cg_transpose32(const void* src, int64_t src_stride,
                                  void* dst, int64_t dst_stride, int64_t rows,
                                  int64_t cols, int simd) {
    const uint32_t* s = (const uint32_t*)src;
    uint32_t* d = (uint32_t*)dst;
    int64_t i, j, i8 = 0, j8 = 0;
#if CG_TRANSPOSE_SIMD
    if (simd) {
        cg_blocks8((const float*)src, src_stride, (float*)dst, dst_stride,
                   rows, cols);
        i8 = rows - rows % 8;
        j8 = cols - cols % 8;
    }
#else
    (void)simd;
#endif
    for (j = 0; j < cols; j++) {
        /* The rows past the blocks, and the columns past them (every
         * value where there are no blocks). */
        for (i = j < j8 ? i8 : 0; i < rows; i++)
            d[j * dst_stride + i] = s[i * src_stride + j];
    }
}

#endif /* CG_TRANSPOSE_H */
