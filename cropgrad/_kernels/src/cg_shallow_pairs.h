/* cg_shallow_rows_f and cg_shallow_rows_f_planes on AVX2: the walk of
 * cg_shallow_rows.inc for pixels of 1 to 4 channels (NHWC) or 1 to 4
 * planes (NCHW) and a float accumulator, with the two columns it holds of
 * a row in one 8-lane vector.
 *
 * A row's held columns c and c + 1 share a vector: column p in the slot of
 * its parity, lanes [0, n) for an even p and [n, 2n) for an odd one.  A
 * sample then updates a row with one multiply and one add: its grads are
 * in both slots, its left weight in column c's slot and its right weight
 * in column c + 1's.  Moving one column to the right writes column c back
 * and reads column c + 2 into the same slot, while column c + 1 stays
 * where it is.  The sample's updates form a chain of dependent additions
 * through the row; the portable walk holds the columns in two 4-lane
 * vectors and takes about twice the instructions per sample, and here the
 * move costs the chain one blend.
 *
 * Every lane computes exactly what the portable walk computes for its
 * element, in the same order (float32 products, no contraction), so the
 * bits are the same.  A sample whose two columns are one (an integer
 * column coordinate) adds both weights to column c's slot, leaving the
 * other as it was.
 *
 * Each pixel is read and written alone, n floats: a wider access would
 * overlap the pixel written just before, and a load overlapping a recent
 * store waits until the store has left the core.  NCHW reads and writes
 * a pixel one plane at a time.  A row the caller does not own is a scratch
 * with a step of 0 (every column at its start). */
#ifndef CG_SHALLOW_PAIRS_H
#define CG_SHALLOW_PAIRS_H

#include <immintrin.h>
#include <stddef.h>

#define CG_PAIRS_TARGET __attribute__((target("avx2")))
/* The helpers and the walk are inlined into each (n, same) copy whatever
 * the compiler's size limits: only then do their constants fold away (a
 * walk left as a call measured slower than the portable one). */
#define CG_PAIRS_INLINE static inline __attribute__((always_inline, target("avx2")))

/* The lane vectors of n channels: each slot's lanes (`slot`), the
 * permutations copying a sample's n channels to both slots (`dup`; lanes
 * past 2n, which exist for n < 4, take lane 3, zero in a read of n
 * channels), from the odd slot to lanes [0, n) (`down`) and back (`up`),
 * and the lanes of one pixel's 4-lane access (`pixel`). */
typedef struct {
    __m256 slot[2];
    __m256i dup, down, up;
    __m128i pixel;
} cg_pair_lanes;

CG_PAIRS_INLINE cg_pair_lanes cg_pair_lanes_of(int n) {
    cg_pair_lanes k;
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const __m256i n1 = _mm256_set1_epi32(n), seven = _mm256_set1_epi32(7);
    const __m256i even = _mm256_cmpgt_epi32(n1, lane);
    const __m256i both = _mm256_cmpgt_epi32(_mm256_set1_epi32(2 * n), lane);
    const __m256i odd = _mm256_andnot_si256(even, both);
    /* The lane within its slot. */
    const __m256i within = _mm256_sub_epi32(lane, _mm256_and_si256(odd, n1));
    k.slot[0] = _mm256_castsi256_ps(even);
    k.slot[1] = _mm256_castsi256_ps(odd);
    k.dup = _mm256_blendv_epi8(_mm256_set1_epi32(3), within, both);
    k.down = _mm256_min_epi32(_mm256_add_epi32(lane, n1), seven);
    k.up = _mm256_and_si256(within, odd);
    k.pixel = _mm256_castsi256_si128(even);
    return k;
}

/* A pixel's n floats, `lane` apart, in lanes [0, n) (lane 3 zero for
 * n < 4).  NHWC channels are side by side (`lane` 1, a constant in the
 * NHWC walk); NCHW planes are read one float each. */
CG_PAIRS_INLINE __m128 cg_pixel_read(const float* p, ptrdiff_t lane, int n,
                                     const cg_pair_lanes* k) {
    if (n == 1) return _mm_load_ss(p);
    if (lane == 1) {
        switch (n) {
        case 2: return _mm_castpd_ps(_mm_load_sd((const double*)p));
        case 4: return _mm_loadu_ps(p);
        default: return _mm_maskload_ps(p, k->pixel);
        }
    }
    switch (n) {
    case 2: return _mm_setr_ps(p[0], p[lane], 0.0f, 0.0f);
    case 4: return _mm_setr_ps(p[0], p[lane], p[2 * lane], p[3 * lane]);
    default: return _mm_setr_ps(p[0], p[lane], p[2 * lane], 0.0f);
    }
}

/* acc + term, acc the first source operand.  Where two NaNs meet, x86
 * keeps the first source's, so the sum keeps the accumulator's NaN in
 * every copy of the walk, whichever compiler built it: left to the
 * compiler, the operands' order may differ between the NHWC and NCHW
 * copies (Clang's does), and the two layouts would end with different
 * NaNs. */
CG_PAIRS_INLINE __m256 cg_pair_add(__m256 acc, __m256 term) {
    __m256 sum;
    __asm__("vaddps %2, %1, %0" : "=x"(sum) : "x"(acc), "x"(term));
    return sum;
}

/* Pixel `col` (at p), in its slot of a vector (the other lanes zero or
 * anything), and back. */
CG_PAIRS_INLINE __m256 cg_pixel_load(const float* p, ptrdiff_t lane,
                                     ptrdiff_t col, int n,
                                     const cg_pair_lanes* k) {
    __m256 v = _mm256_castps128_ps256(cg_pixel_read(p, lane, n, k));
    return (col & 1) ? _mm256_permutevar8x32_ps(v, k->up) : v;
}

CG_PAIRS_INLINE void cg_pixel_store(float* p, ptrdiff_t lane, ptrdiff_t col,
                                    __m256 row, int n,
                                    const cg_pair_lanes* k) {
    __m128 v = _mm256_castps256_ps128(
        (col & 1) ? _mm256_permutevar8x32_ps(row, k->down) : row);
    if (lane == 1 && n > 1) {
        switch (n) {
        case 2: _mm_store_sd((double*)p, _mm_castps_pd(v)); break;
        case 4: _mm_storeu_ps(p, v); break;
        default: _mm_maskstore_ps(p, k->pixel, v); break;
        }
        return;
    }
    /* One float per plane (one channel is one float in either layout). */
    _mm_store_ss(p, v);
    if (n > 1) _mm_store_ss(p + lane, _mm_shuffle_ps(v, v, 1));
    if (n > 2) _mm_store_ss(p + 2 * lane, _mm_shuffle_ps(v, v, 2));
    if (n > 3) _mm_store_ss(p + 3 * lane, _mm_shuffle_ps(v, v, 3));
}

/* Columns c and c + 1 (if it exists) of a row, read and written. */
CG_PAIRS_INLINE __m256 cg_pair_load(const float* row, ptrdiff_t step,
                                    ptrdiff_t lane, ptrdiff_t c,
                                    ptrdiff_t width, int n,
                                    const cg_pair_lanes* k) {
    __m256 v = _mm256_and_ps(cg_pixel_load(row + c * step, lane, c, n, k),
                             k->slot[c & 1]);
    if (c + 1 < width)
        v = _mm256_blendv_ps(
            v, cg_pixel_load(row + (c + 1) * step, lane, c + 1, n, k),
            k->slot[(c + 1) & 1]);
    return v;
}

CG_PAIRS_INLINE void cg_pair_store(float* row, ptrdiff_t step, ptrdiff_t lane,
                                   ptrdiff_t c, ptrdiff_t width, __m256 v,
                                   int n, const cg_pair_lanes* k) {
    cg_pixel_store(row + c * step, lane, c, v, n, k);
    if (c + 1 < width)
        cg_pixel_store(row + (c + 1) * step, lane, c + 1, v, n, k);
}

/* The walk, inlined below with constant n and `same`, so that the lane
 * vectors are constants and the loop tests neither.  Same arguments as
 * cg_shallow_rows_f (cg_shallow.h). */
CG_PAIRS_INLINE void cg_pair_walk(
    float* top, ptrdiff_t top_step, ptrdiff_t top_lane, float* bottom,
    ptrdiff_t bottom_step, ptrdiff_t bottom_lane, const float* g,
    ptrdiff_t g_step, ptrdiff_t g_lane, const ptrdiff_t* col_lo,
    const ptrdiff_t* col_hi, const float* w_left, const float* w_right,
    ptrdiff_t crop_w, ptrdiff_t width, float w_top, float w_bottom, int same,
    int n) {
    const cg_pair_lanes k = cg_pair_lanes_of(n);
    const __m256 wt = _mm256_set1_ps(w_top), wb = _mm256_set1_ps(w_bottom);
    __m256 t = _mm256_setzero_ps(), b = _mm256_setzero_ps();
    /* Column c's slot and column c + 1's. */
    __m256 here = k.slot[0], next = k.slot[1];
    /* Held: columns c and c + 1 (if it exists); c = -2: nothing. */
    ptrdiff_t x, left, c = -2;
    for (x = 0; x < crop_w; x++) {
        __m256 gv, wl, wr, vt, vb;
        left = col_lo[x];
        if (left < 0) continue;
        if (left != c) {
            if (left == c + 1) {
                /* One column to the right: column c's slot is column
                 * c + 2's now. */
                cg_pixel_store(top + c * top_step, top_lane, c, t, n, &k);
                cg_pixel_store(bottom + c * bottom_step, bottom_lane, c, b, n,
                               &k);
                if (left + 1 < width) {
                    t = _mm256_blendv_ps(
                        t,
                        cg_pixel_load(top + (left + 1) * top_step, top_lane,
                                      left + 1, n, &k),
                        here);
                    b = _mm256_blendv_ps(
                        b,
                        cg_pixel_load(bottom + (left + 1) * bottom_step,
                                      bottom_lane, left + 1, n, &k),
                        here);
                }
            } else {
                /* Write back before reading: the columns may overlap. */
                if (c >= 0) {
                    cg_pair_store(top, top_step, top_lane, c, width, t, n, &k);
                    cg_pair_store(bottom, bottom_step, bottom_lane, c, width,
                                  b, n, &k);
                }
                t = cg_pair_load(top, top_step, top_lane, left, width, n, &k);
                b = cg_pair_load(bottom, bottom_step, bottom_lane, left,
                                 width, n, &k);
            }
            c = left;
            here = k.slot[c & 1];
            next = k.slot[(c + 1) & 1];
        }
        gv = _mm256_permutevar8x32_ps(
            _mm256_castps128_ps256(cg_pixel_read(g + x * g_step, g_lane, n, &k)),
            k.dup);
        wl = _mm256_set1_ps(w_left[x]);
        wr = _mm256_set1_ps(w_right[x]);
        vt = _mm256_mul_ps(wt, gv);
        vb = _mm256_mul_ps(wb, gv);
        if (col_hi[x] != left) {
            __m256 w = _mm256_blendv_ps(wl, wr, next);
            t = cg_pair_add(t, _mm256_mul_ps(w, vt));
            if (same)
                t = cg_pair_add(t, _mm256_mul_ps(w, vb));
            else
                b = cg_pair_add(b, _mm256_mul_ps(w, vb));
        } else {
            /* The right pixel is the left one: both weights to column c. */
            t = _mm256_blendv_ps(
                t,
                cg_pair_add(cg_pair_add(t, _mm256_mul_ps(wl, vt)),
                            _mm256_mul_ps(wr, vt)),
                here);
            if (same)
                t = _mm256_blendv_ps(
                    t,
                    cg_pair_add(cg_pair_add(t, _mm256_mul_ps(wl, vb)),
                                _mm256_mul_ps(wr, vb)),
                    here);
            else
                b = _mm256_blendv_ps(
                    b,
                    cg_pair_add(cg_pair_add(b, _mm256_mul_ps(wl, vb)),
                                _mm256_mul_ps(wr, vb)),
                    here);
        }
    }
    if (c >= 0) {
        cg_pair_store(top, top_step, top_lane, c, width, t, n, &k);
        cg_pair_store(bottom, bottom_step, bottom_lane, c, width, b, n, &k);
    }
}

/* Both entry points: n and `same` made constants for the walk.  NHWC has
 * its channels side by side (lane strides 1, grads of n channels per
 * sample); NCHW has n planes `*_lane` apart, pixels and samples 1 apart.
 * Both layouts run this one walk, so that they compute every element with
 * the same instructions (which of two NaNs a sum keeps included). */
#define CG_PAIR_WALK(N, SAME)                                                 \
    cg_pair_walk(top, top_step, top_lane, bottom, bottom_step, bottom_lane,   \
                 g, channels_last ? (N) : 1, g_lane, col_lo, col_hi, w_left,  \
                 w_right, crop_w, width, w_top, w_bottom, (SAME), (N))
#define CG_PAIR_CASE(N)                                                       \
    if (same)                                                                 \
        CG_PAIR_WALK(N, 1);                                                   \
    else                                                                      \
        CG_PAIR_WALK(N, 0);                                                   \
    break
CG_PAIRS_INLINE void cg_pair_dispatch(
    float* top, ptrdiff_t top_step, ptrdiff_t top_lane, float* bottom,
    ptrdiff_t bottom_step, ptrdiff_t bottom_lane, const float* g,
    ptrdiff_t g_lane, const ptrdiff_t* col_lo, const ptrdiff_t* col_hi,
    const float* w_left, const float* w_right, ptrdiff_t crop_w,
    ptrdiff_t width, float w_top, float w_bottom, int same, ptrdiff_t n,
    int channels_last) {
    switch (n) {
    case 1: CG_PAIR_CASE(1);
    case 2: CG_PAIR_CASE(2);
    case 3: CG_PAIR_CASE(3);
    default: CG_PAIR_CASE(4);
    }
}
#undef CG_PAIR_CASE
#undef CG_PAIR_WALK

static CG_PAIRS_TARGET void cg_shallow_rows_f_avx2(
    float* top, ptrdiff_t top_step, float* bottom, ptrdiff_t bottom_step,
    const float* g, const ptrdiff_t* col_lo, const ptrdiff_t* col_hi,
    const float* w_left, const float* w_right, ptrdiff_t crop_w,
    ptrdiff_t width, float w_top, float w_bottom, int same, ptrdiff_t n) {
    cg_pair_dispatch(top, top_step, 1, bottom, bottom_step, 1, g, 1, col_lo,
                     col_hi, w_left, w_right, crop_w, width, w_top, w_bottom,
                     same, n, 1);
}

static CG_PAIRS_TARGET void cg_shallow_rows_f_planes_avx2(
    float* top, ptrdiff_t top_step, ptrdiff_t top_lane, float* bottom,
    ptrdiff_t bottom_step, ptrdiff_t bottom_lane, const float* g,
    ptrdiff_t g_lane, const ptrdiff_t* col_lo, const ptrdiff_t* col_hi,
    const float* w_left, const float* w_right, ptrdiff_t crop_w,
    ptrdiff_t width, float w_top, float w_bottom, int same, ptrdiff_t n) {
    cg_pair_dispatch(top, top_step, top_lane, bottom, bottom_step,
                     bottom_lane, g, g_lane, col_lo, col_hi, w_left, w_right,
                     crop_w, width, w_top, w_bottom, same, n, 0);
}

#endif
