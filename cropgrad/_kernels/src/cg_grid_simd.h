/* Grid sampling's SIMD clone: bilinear and nearest sampling in float32
 * (every padding), eight points a vector (AVX2 + FMA), declared in
 * cropgrad/_kernels/grid_sample/kernels.pyx, which picks it at run time.
 * On other CPUs and compilers the functions are stubs that are never
 * called (gs_simd_supported() is 0). */
#ifndef CG_GRID_SIMD_H
#define CG_GRID_SIMD_H

/* Lane for lane the clone does the portable loops' operations in their
 * order (every fused multiply-add an explicit one, the rest rounded as
 * they are), so the bits are the same. */
#include <stdint.h>

/* How grid values become taps: the mode, and along x (0) and y (1) the
 * unnormalisation's scales, the padding (0 zeros, 1 border, 2
 * reflection: grid_sample's codes) and its constants, make_axis's. */
typedef struct {
    int nearest;       /* mode="nearest" */
    int cubic;         /* mode="bicubic" (neither: bilinear) */
    float scale[2];
    float top[2];      /* size - 1: the clip's bound */
    float twice[2];    /* the reflection's period */
    int empty[2];      /* no room to reflect in: the coordinate is 0 */
    float low;         /* where the reflection starts: 0 or -0.5 */
    int aligned;
    int padding;
} gs_axes;

#if (defined(__x86_64__) || defined(_M_X64)) && \
    (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define GS_SIMD 1
#define GS_AVX2 __attribute__((target("avx2,fma")))

static int gs_simd_supported(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}

/* Eight points' corners: weights nw, ne, sw, se, fractions n, s, w,
 * e, plane offsets and the masks of the corners inside the image. */
typedef struct {
    __m256 wt[4];
    __m256 frac[4];
    __m256i off[4];
    __m256i in[4];
    int run[4];     /* all inside, at 8 consecutive offsets */
    int pair[2];    /* rows n and s: both corners inside for all eight */
} gs_corners8;

/* Whether `off` is 8 consecutive offsets, each lane's `keep` set. */
GS_AVX2 static inline int gs_run8(__m256i off, __m256i keep) {
    __m256i first = _mm256_permutevar8x32_epi32(off, _mm256_setzero_si256());
    __m256i next = _mm256_add_epi32(
        first, _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    __m256i same = _mm256_and_si256(_mm256_cmpeq_epi32(off, next), keep);
    return _mm256_movemask_epi8(same) == -1;
}

/* The firsts of eight interleaved pairs (lo: pairs 0-3, hi: 4-7) in
 * *x, the seconds in *y. */
GS_AVX2 static inline void gs_unzip8(__m256 lo, __m256 hi, __m256* x,
                                     __m256* y) {
    /* Per 128-bit half: x0 x1 x4 x5 | x2 x3 x6 x7; the permute puts
     * the 64-bit pairs back in order. */
    __m256 xs = _mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(2, 0, 2, 0));
    __m256 ys = _mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(3, 1, 3, 1));
    *x = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(xs), 0xD8));
    *y = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(ys), 0xD8));
}

/* x of eight interleaved (x, y) points in *x, y in *y. */
GS_AVX2 static inline void gs_split8(const float* g, __m256* x, __m256* y) {
    gs_unzip8(_mm256_loadu_ps(g), _mm256_loadu_ps(g + 8), x, y);
}

GS_AVX2 static inline __m256 gs_unnormalize8(__m256 g, float scale,
                                             int aligned) {
    __m256 g1 = _mm256_add_ps(g, _mm256_set1_ps(1.0f));
    if (aligned) return _mm256_mul_ps(g1, _mm256_set1_ps(scale));
    return _mm256_fmadd_ps(g1, _mm256_set1_ps(scale), _mm256_set1_ps(-0.5f));
}

/* The forward's clip to [0, top]: v > 0 ? v : 0 (NaN gives 0), then
 * v < top ? v : top, as max and min have it. */
GS_AVX2 static inline __m256 gs_clip8(__m256 v, float top) {
    return _mm256_min_ps(_mm256_max_ps(v, _mm256_setzero_ps()),
                         _mm256_set1_ps(top));
}

/* The backward's clip (clip_grad): NaN stays NaN; *inside is set where
 * neither bound was reached (a bound itself counts as outside). */
GS_AVX2 static inline __m256 gs_clip_grad8(__m256 v, float top,
                                           __m256* inside) {
    __m256 zero = _mm256_setzero_ps(), t = _mm256_set1_ps(top);
    __m256 lo = _mm256_blendv_ps(zero, v, _mm256_cmp_ps(v, zero, _CMP_NLE_UQ));
    __m256 res = _mm256_blendv_ps(t, lo, _mm256_cmp_ps(lo, t, _CMP_NGE_UQ));
    *inside = _mm256_and_ps(_mm256_cmp_ps(lo, zero, _CMP_NEQ_UQ),
                            _mm256_cmp_ps(res, t, _CMP_NEQ_UQ));
    return res;
}

/* Reflection padding's fold of v along axis k (reflect, or reflect_grad
 * with `slope` given: its sign, +-1), before the clip. */
GS_AVX2 static inline __m256 gs_reflect8(__m256 v, const gs_axes* a, int k,
                                         __m256* slope) {
    __m256 zero = _mm256_setzero_ps(), sign = _mm256_set1_ps(-0.0f);
    __m256 twice = _mm256_set1_ps(a->twice[k]), low = _mm256_set1_ps(a->low);
    __m256 shifted, u, flips, extra, other, res, flip;
    if (a->empty[k]) {
        if (slope) *slope = zero;
        return zero;
    }
    shifted = a->aligned ? v : _mm256_sub_ps(v, low);
    u = _mm256_andnot_ps(sign, shifted);
    flips = _mm256_round_ps(_mm256_div_ps(u, twice),
                            _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    extra = _mm256_fmadd_ps(_mm256_xor_ps(flips, sign), twice, u);
    other = _mm256_sub_ps(twice, extra);
    if (slope) {
        flip = _mm256_cmp_ps(extra, other, _CMP_GT_OQ);
        res = _mm256_blendv_ps(extra, other, flip);
        /* -1 where the fold flipped it and v was not below low, or the
         * other way round. */
        *slope = _mm256_blendv_ps(
            _mm256_set1_ps(1.0f), _mm256_set1_ps(-1.0f),
            _mm256_xor_ps(flip, _mm256_cmp_ps(shifted, zero, _CMP_LT_OQ)));
    } else {
        /* The smaller of the two.  Where either is NaN (v infinite), both
         * are, and so is this: the forward's clip makes it 0. */
        res = _mm256_blendv_ps(other, extra,
                               _mm256_cmp_ps(extra, other, _CMP_LE_OQ));
    }
    return a->aligned ? res : _mm256_add_ps(res, low);
}

/* Grid values `g` along axis k as pixel coordinates, padded: the
 * forward's (locate), or with `backward` the backward's (locate_grad),
 * whose derivative in g goes to `mult` if it is not NULL. */
GS_AVX2 static inline __m256 gs_locate8(__m256 g, const gs_axes* a, int k,
                                        int backward, __m256* mult) {
    __m256 v = gs_unnormalize8(g, a->scale[k], a->aligned);
    __m256 scale = _mm256_set1_ps(a->scale[k]), slope, inside;
    if (a->padding == 0) {
        if (mult) *mult = scale;
        return v;
    }
    if (!backward) {
        if (a->padding == 2) v = gs_reflect8(v, a, k, NULL);
        return gs_clip8(v, a->top[k]);
    }
    if (a->padding == 2) {
        v = gs_reflect8(v, a, k, &slope);
        scale = _mm256_mul_ps(slope, scale);
    }
    v = gs_clip_grad8(v, a->top[k], &inside);
    if (mult) *mult = _mm256_and_ps(inside, scale);
    return v;
}

GS_AVX2 static inline __m256i gs_inside8(__m256i iy, __m256i ix,
                                         __m256i h, __m256i w) {
    __m256i m1 = _mm256_set1_epi32(-1);
    __m256i okx = _mm256_and_si256(_mm256_cmpgt_epi32(ix, m1),
                                   _mm256_cmpgt_epi32(w, ix));
    __m256i oky = _mm256_and_si256(_mm256_cmpgt_epi32(iy, m1),
                                   _mm256_cmpgt_epi32(h, iy));
    return _mm256_and_si256(okx, oky);
}

/* The corners of pixel coordinates (x, y); the truncation gives
 * INT32_MIN for NaN and out-of-range values, as to_index does. */
GS_AVX2 static inline void gs_corners(__m256 x, __m256 y, int32_t h,
                                      int32_t w, gs_corners8* c) {
    __m256 one = _mm256_set1_ps(1.0f);
    __m256 x_w = _mm256_floor_ps(x), y_n = _mm256_floor_ps(y);
    __m256 fw = _mm256_sub_ps(x, x_w), fe = _mm256_sub_ps(one, fw);
    __m256 fn = _mm256_sub_ps(y, y_n), fs = _mm256_sub_ps(one, fn);
    __m256i ix_w = _mm256_cvttps_epi32(x_w), iy_n = _mm256_cvttps_epi32(y_n);
    __m256i one_i = _mm256_set1_epi32(1);
    __m256i ix_e = _mm256_add_epi32(ix_w, one_i);
    __m256i iy_s = _mm256_add_epi32(iy_n, one_i);
    __m256i hv = _mm256_set1_epi32(h), wv = _mm256_set1_epi32(w);
    __m256i row_n = _mm256_mullo_epi32(iy_n, wv);
    __m256i row_s = _mm256_mullo_epi32(iy_s, wv);
    c->wt[0] = _mm256_mul_ps(fs, fe);
    c->wt[1] = _mm256_mul_ps(fs, fw);
    c->wt[2] = _mm256_mul_ps(fn, fe);
    c->wt[3] = _mm256_mul_ps(fn, fw);
    c->frac[0] = fn;
    c->frac[1] = fs;
    c->frac[2] = fw;
    c->frac[3] = fe;
    c->in[0] = gs_inside8(iy_n, ix_w, hv, wv);
    c->in[1] = gs_inside8(iy_n, ix_e, hv, wv);
    c->in[2] = gs_inside8(iy_s, ix_w, hv, wv);
    c->in[3] = gs_inside8(iy_s, ix_e, hv, wv);
    c->off[0] = _mm256_add_epi32(row_n, ix_w);
    c->off[1] = _mm256_add_epi32(row_n, ix_e);
    c->off[2] = _mm256_add_epi32(row_s, ix_w);
    c->off[3] = _mm256_add_epi32(row_s, ix_e);
    c->run[0] = gs_run8(c->off[0], c->in[0]);
    c->run[1] = gs_run8(c->off[1], c->in[1]);
    c->run[2] = gs_run8(c->off[2], c->in[2]);
    c->run[3] = gs_run8(c->off[3], c->in[3]);
    c->pair[0] = _mm256_movemask_epi8(
        _mm256_and_si256(c->in[0], c->in[1])) == -1;
    c->pair[1] = _mm256_movemask_epi8(
        _mm256_and_si256(c->in[2], c->in[3])) == -1;
}

/* Nearest's one tap, as corner nw of weight 1 (the only corner read):
 * the pixel at x and y rounded half to even, as nearbyint rounds them;
 * with zeros padding only inside the image (the truncation gives
 * INT32_MIN for NaN and out-of-range values), with the others always
 * (their coordinates are clipped). */
GS_AVX2 static inline void gs_nearest(__m256 x, __m256 y, int32_t h,
                                      int32_t w, int zeros, gs_corners8* c) {
    /* (The rounding is a macro's argument: it must be a constant.) */
    __m256i ix = _mm256_cvttps_epi32(_mm256_round_ps(
        x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    __m256i iy = _mm256_cvttps_epi32(_mm256_round_ps(
        y, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    __m256i off = _mm256_add_epi32(
        _mm256_mullo_epi32(iy, _mm256_set1_epi32(w)), ix);
    c->off[0] = off;
    c->in[0] = zeros ? gs_inside8(iy, ix, _mm256_set1_epi32(h),
                                  _mm256_set1_epi32(w))
                     : _mm256_set1_epi32(-1);
    c->wt[0] = _mm256_set1_ps(1.0f);
    c->run[0] = gs_run8(off, c->in[0]);
    c->pair[0] = c->pair[1] = 0;
}

/* Eight pixels of `plane` at offsets `off`, +0 where `in` is not set, in
 * eight loads: for the one to four taps of a nearest or bilinear point,
 * they take less time than a masked gather (AMD Zen 4: a third less for
 * the deformable-attention benchmark's forward op).  Bicubic's sixteen
 * taps keep the gather, which is the faster there. */
GS_AVX2 static inline __m256 gs_gather8(const float* plane, __m256i off,
                                        __m256i in) {
    int32_t at[8], keep[8];
    _mm256_storeu_si256((__m256i*)at, off);
    _mm256_storeu_si256((__m256i*)keep, in);
    /* Put together in registers: a vector load of eight values just
     * stored one by one would wait for the stores (no forwarding). */
#define GS_PIXEL(i) (keep[i] ? plane[at[i]] : 0.0f)
    return _mm256_setr_ps(GS_PIXEL(0), GS_PIXEL(1), GS_PIXEL(2), GS_PIXEL(3),
                          GS_PIXEL(4), GS_PIXEL(5), GS_PIXEL(6), GS_PIXEL(7));
#undef GS_PIXEL
}

/* A corner's pixels, +0 where it is outside (the portable read); one
 * load where they are side by side (a smooth grid's common case). */
GS_AVX2 static inline __m256 gs_read8(const float* plane,
                                      const gs_corners8* c, int k) {
    if (c->run[k])
        return _mm256_loadu_ps(plane + _mm256_cvtsi256_si32(c->off[k]));
    return gs_gather8(plane, c->off[k], c->in[k]);
}

/* Row r's two corners (r = 0: nw, ne; 1: sw, se) of eight points: where
 * both are inside for all eight and not side by side, each point's two
 * pixels (x, x + 1) as one 64-bit element, in two gathers of four
 * instead of two of eight (a gather's cost grows with its elements). */
GS_AVX2 static inline void gs_read_row8(const float* plane,
                                        const gs_corners8* c, int r,
                                        __m256* west, __m256* east) {
    __m256i at = c->off[2 * r];
    if (c->pair[r] && !c->run[2 * r]) {
        gs_unzip8(
            _mm256_castsi256_ps(_mm256_i32gather_epi64(
                (const long long*)plane, _mm256_castsi256_si128(at), 4)),
            _mm256_castsi256_ps(_mm256_i32gather_epi64(
                (const long long*)plane, _mm256_extracti128_si256(at, 1), 4)),
            west, east);
        return;
    }
    *west = gs_read8(plane, c, 2 * r);
    *east = gs_read8(plane, c, 2 * r + 1);
}

/* Eight points from `g` (interleaved x, y), the last of them `valid`
 * at most: the rest of the vector holds the point (0, 0), computed and
 * dropped. */
GS_AVX2 static inline void gs_load8(const float* g, int valid,
                                    __m256* x, __m256* y) {
    float tmp[16] = {0};
    int i;
    if (valid == 8) {
        gs_split8(g, x, y);
        return;
    }
    for (i = 0; i < 2 * valid; i++) tmp[i] = g[i];
    gs_split8(tmp, x, y);
}

/* Eight values from `src`, the first `valid` of them read (the last
 * vector of a plane may hold fewer points; nothing past them is read),
 * the rest +0. */
GS_AVX2 static inline __m256 gs_part8(const float* src, int valid) {
    float tmp[8] = {0};
    int i;
    if (valid == 8) return _mm256_loadu_ps(src);
    for (i = 0; i < valid; i++) tmp[i] = src[i];
    return _mm256_loadu_ps(tmp);
}

GS_AVX2 static inline void gs_store8(float* dst, __m256 v, int valid) {
    float tmp[8];
    int i;
    if (valid == 8) {
        _mm256_storeu_ps(dst, v);
        return;
    }
    _mm256_storeu_ps(tmp, v);
    for (i = 0; i < valid; i++) dst[i] = tmp[i];
}

/* A hint to fetch the pixels one row below a vector's south corners,
 * where the next row of a smooth grid's points goes: the CPU's own
 * prefetchers stop at the end of a page, and each row of a wide image
 * is a page or more (1024 float32 pixels), so each new row would start
 * with misses.  A prefetch never faults; the address is worked out in
 * integers, as a point outside the image has no pixel there. */
GS_AVX2 static inline void gs_prefetch_below(const float* plane,
                                             int32_t south, int32_t w) {
    _mm_prefetch((const char*)((uintptr_t)plane +
                               sizeof(float) * ((intptr_t)south + w)),
                 _MM_HINT_T0);
}

/* Points a block: their corners are worked out first, then each
 * channel's plane is read for all of them, while it is in the cache. */
#define GS_BLOCK 16

/* The corners (nearest: the tap) of the vectors of points [q, q + 8 *
 * GS_BLOCK) of batch b up to `end`, located as the forward op or
 * (`backward`) the gradients locate them (nearest's gradient as its
 * forward op), and (if `mult` is not NULL) the padding's derivatives in
 * x and y, two vectors a vector of points; returns how many vectors. */
GS_AVX2 static inline int gs_block_corners(
        const float* grid, int64_t per, int64_t b, int64_t q,
        int64_t end, int32_t h, int32_t w, const gs_axes* axes,
        int backward, gs_corners8* cn, int* valid, __m256* mult) {
    int v = 0;
    __m256 x, y;
    backward = backward && !axes->nearest;
    for (; v < GS_BLOCK && q < end; v++, q += 8) {
        valid[v] = (int)(end - q < 8 ? end - q : 8);
        gs_load8(grid + 2 * (b * per + q), valid[v], &x, &y);
        x = gs_locate8(x, axes, 0, backward, mult ? &mult[2 * v] : NULL);
        y = gs_locate8(y, axes, 1, backward, mult ? &mult[2 * v + 1] : NULL);
        if (axes->nearest)
            gs_nearest(x, y, h, w, axes->padding == 0, &cn[v]);
        else
            gs_corners(x, y, h, w, &cn[v]);
    }
    return v;
}

/* The forward op of points [first, first + count) of batch b. */
GS_AVX2 static void gs_forward_bz8(
        const float* image, const float* grid, float* out, int64_t c,
        int32_t h, int32_t w, int64_t per, int64_t b, int64_t first,
        int64_t count, const gs_axes* axes) {
    int64_t q, ch, plane = (int64_t)h * w, end = first + count;
    gs_corners8 cn[GS_BLOCK];
    int valid[GS_BLOCK];
    int v, nv;
    __m256 acc, nw, ne, sw, se;
    for (q = first; q < end; q += 8 * GS_BLOCK) {
        nv = gs_block_corners(grid, per, b, q, end, h, w, axes, 0, cn,
                              valid, NULL);
        for (ch = 0; ch < c; ch++) {
            const float* img = image + (b * c + ch) * plane;
            float* dst = out + (b * c + ch) * per + q;
            if (axes->nearest) {
                /* The pixel itself (+0 outside), no arithmetic. */
                for (v = 0; v < nv; v++)
                    gs_store8(dst + 8 * v, gs_read8(img, &cn[v], 0), valid[v]);
                continue;
            }
            for (v = 0; v < nv; v++) {
                const gs_corners8* k = &cn[v];
                gs_prefetch_below(img, _mm256_cvtsi256_si32(k->off[2]), w);
                gs_read_row8(img, k, 0, &nw, &ne);
                gs_read_row8(img, k, 1, &sw, &se);
                acc = _mm256_fmadd_ps(se, k->wt[3],
                      _mm256_fmadd_ps(sw, k->wt[2],
                      _mm256_fmadd_ps(ne, k->wt[1],
                      _mm256_mul_ps(nw, k->wt[0]))));
                gs_store8(dst + 8 * v, acc, valid[v]);
            }
        }
    }
}

/* The grid gradient of points [first, first + count) of batch b: each
 * point's sums over the channels in their order. */
GS_AVX2 static void gs_grad_grid_bz8(
        const float* image, const float* grid, const float* grads,
        float* out, int64_t c, int32_t h, int32_t w, int64_t per,
        int64_t b, int64_t first, int64_t count, const gs_axes* axes) {
    int64_t q, ch, plane = (int64_t)h * w, end = first + count;
    gs_corners8 cn[GS_BLOCK];
    __m256 gx[GS_BLOCK], gy[GS_BLOCK], mult[2 * GS_BLOCK];
    int valid[GS_BLOCK];
    __m256 gc, nw, ne, sw, se, dx, dy;
    float tx[8], ty[8];
    int v, nv, i;
    for (q = first; q < end; q += 8 * GS_BLOCK) {
        nv = gs_block_corners(grid, per, b, q, end, h, w, axes, 1, cn,
                              valid, mult);
        for (v = 0; v < nv; v++) {
            gx[v] = _mm256_setzero_ps();
            gy[v] = _mm256_setzero_ps();
        }
        for (ch = 0; ch < c; ch++) {
            const float* img = image + (b * c + ch) * plane;
            const float* gr = grads + (b * c + ch) * per + q;
            for (v = 0; v < nv; v++) {
                const gs_corners8* k = &cn[v];
                gs_prefetch_below(img, _mm256_cvtsi256_si32(k->off[2]), w);
                gc = gs_part8(gr + 8 * v, valid[v]);
                gs_read_row8(img, k, 0, &nw, &ne);
                gs_read_row8(img, k, 1, &sw, &se);
                /* frac: n, s, w, e */
                dx = _mm256_fmadd_ps(
                    _mm256_sub_ps(se, sw), k->frac[0],
                    _mm256_mul_ps(_mm256_sub_ps(ne, nw), k->frac[1]));
                dy = _mm256_fmadd_ps(
                    _mm256_sub_ps(se, ne), k->frac[2],
                    _mm256_mul_ps(_mm256_sub_ps(sw, nw), k->frac[3]));
                gx[v] = _mm256_fmadd_ps(dx, gc, gx[v]);
                gy[v] = _mm256_fmadd_ps(dy, gc, gy[v]);
            }
        }
        for (v = 0; v < nv; v++) {
            int64_t at = b * per + q + 8 * v;
            _mm256_storeu_ps(tx, _mm256_mul_ps(gx[v], mult[2 * v]));
            _mm256_storeu_ps(ty, _mm256_mul_ps(gy[v], mult[2 * v + 1]));
            for (i = 0; i < valid[v]; i++) {
                out[2 * (at + i)] = tx[i];
                out[2 * (at + i) + 1] = ty[i];
            }
        }
    }
}

/* Whether any point of the vectors [q, q + 8 * GS_BLOCK) of batch b,
 * up to `end`, has a corner in the rows [row_lo, row_hi): the rows of
 * its corners are floor(y) and floor(y) + 1, with y worked out as
 * gs_corners gets it.  A band's task skips a block that has none
 * without working out its corners (a dense, smooth grid sends most
 * blocks to one band).  NaN compares false: such a point has no
 * corner inside the image.  Nearest's tap is in one of those rows (y
 * rounded), located as its forward op locates it. */
GS_AVX2 static inline int gs_block_in_rows(
        const float* grid, int64_t per, int64_t b, int64_t q, int64_t end,
        const gs_axes* axes, float row_lo, float row_hi) {
    __m256 x, y, y_n, hit = _mm256_setzero_ps();
    __m256 lo = _mm256_set1_ps(row_lo - 1.0f), hi = _mm256_set1_ps(row_hi);
    int v;
    for (v = 0; v < GS_BLOCK && q < end; v++, q += 8) {
        gs_load8(grid + 2 * (b * per + q), (int)(end - q < 8 ? end - q : 8),
                 &x, &y);
        y_n = _mm256_floor_ps(gs_locate8(y, axes, 1, !axes->nearest, NULL));
        hit = _mm256_or_ps(hit, _mm256_and_ps(
            _mm256_cmp_ps(y_n, lo, _CMP_GE_OQ),
            _mm256_cmp_ps(y_n, hi, _CMP_LT_OQ)));
    }
    return !_mm256_testz_ps(hit, hit);
}

/* The additions of a row's two corners of eight points that are runs
 * (side by side, inside the image and the band): the west corner's
 * products to pixels [at, at + 8), then the east one's to [at + 1,
 * at + 9), each pixel's two in that order, as the scatter makes them.
 * Both in registers, with one load and one store of the eight pixels:
 * two overlapping stores and loads would stall (a load of pixels that
 * the store before it wrote only in part is not forwarded).  The
 * ninth pixel's addition is left pending (`gs_tail`) for the next pair
 * of the row, which takes it in its first lane where it starts there
 * (a smooth grid's next vector) instead of reading it back from
 * memory. */
typedef struct {
    float* at;      /* the pixel, or NULL */
    float value;
} gs_tail;

GS_AVX2 static inline void gs_flush(gs_tail* t) {
    if (t->at) *t->at += t->value;
    t->at = NULL;
}

/* Flush `t` if pixel range [at, at + 8] holds its pixel. */
GS_AVX2 static inline void gs_flush_in(gs_tail* t, const float* at) {
    if (t->at && t->at >= at && t->at <= at + 8) gs_flush(t);
}

GS_AVX2 static inline void gs_add_pair8(float* at, __m256 west, __m256 east,
                                        gs_tail* tail) {
    /* east's lane i to pixel i + 1; lane 0 gets lane 7, pixel 8's. */
    __m256 up = _mm256_permutevar8x32_ps(
        east, _mm256_setr_epi32(7, 0, 1, 2, 3, 4, 5, 6));
    __m256 t;
    /* Another pending pixel gets its addition first: it may be one of
     * these (a jump back). */
    if (tail->at != at) gs_flush(tail);
    t = _mm256_loadu_ps(at);
    if (tail->at == at) {
        /* The row's last pair's ninth pixel is this one's first, whose
         * additions come after it. */
        t = _mm256_blend_ps(
            t, _mm256_add_ps(t, _mm256_set1_ps(tail->value)), 0x01);
    }
    t = _mm256_add_ps(t, west);
    _mm256_storeu_ps(at, _mm256_blend_ps(_mm256_add_ps(t, up), t, 0x01));
    tail->at = at + 8;
    tail->value = _mm256_cvtss_f32(up);
}

/* The image gradient of batch b's channels [c0, c1), the pixels of
 * offsets [lo, hi) of each plane: per vector of points, per corner
 * nw, ne, sw, se, lane after lane, each addition ``dst += weight * g``
 * in that order (the portable scatter's, from the same taps).  The
 * corners of a block of vectors are worked out once for all the
 * channels, which then go one plane at a time over the block: the
 * order of the additions to each pixel stays the same.  Nearest has
 * one tap, corner nw of weight 1: g * 1 is g, the portable dst += g. */
GS_AVX2 static void gs_scatter_bz8(
        const float* grads, const float* grid, float* out, int64_t c,
        int64_t c0, int64_t c1, int32_t h, int32_t w, int64_t per,
        int64_t b, int64_t lo, int64_t hi, const gs_axes* axes) {
    int64_t q, ch, plane = (int64_t)h * w;
    gs_corners8 cn[GS_BLOCK];
    int valid[GS_BLOCK];
    __m256i lov = _mm256_set1_epi32((int32_t)lo);
    __m256i hiv = _mm256_set1_epi32((int32_t)hi);
    __m256i ones = _mm256_set1_epi32(-1);
    int32_t off[GS_BLOCK][4][8], in[GS_BLOCK][4][8];
    int run[GS_BLOCK][4];
    float wt[GS_BLOCK][4][8];
    float prod[8];
    int any[GS_BLOCK];
    int v, nv, i, k, some, corners = axes->nearest ? 1 : 4;
    /* A band of rows [row_lo, row_hi) (lo and hi are whole rows), which
     * passes blocks over where its rows are exact in float. */
    int banded = (lo > 0 || hi < plane) && h <= (1 << 24);
    float row_lo = (float)(lo / w), row_hi = (float)(hi / w);
    for (q = 0; q < per; q += 8 * GS_BLOCK) {
        if (banded && !gs_block_in_rows(grid, per, b, q, per, axes, row_lo,
                                        row_hi))
            continue;
        nv = gs_block_corners(grid, per, b, q, per, h, w, axes, 1, cn,
                              valid, NULL);
        some = 0;
        for (v = 0; v < nv; v++) {
            any[v] = 0;
            for (k = 0; k < corners; k++) {
                /* Inside the image and the band: lo <= off < hi. */
                __m256i keep = _mm256_andnot_si256(
                    _mm256_or_si256(
                        _mm256_cmpgt_epi32(lov, cn[v].off[k]),
                        _mm256_xor_si256(_mm256_cmpgt_epi32(hiv, cn[v].off[k]),
                                         ones)),
                    cn[v].in[k]);
                any[v] |= !_mm256_testz_si256(keep, keep);
                run[v][k] = valid[v] == 8 && gs_run8(cn[v].off[k], keep);
                _mm256_storeu_si256((__m256i*)off[v][k], cn[v].off[k]);
                _mm256_storeu_si256((__m256i*)in[v][k], keep);
                _mm256_storeu_ps(wt[v][k], cn[v].wt[k]);
            }
            some |= any[v];
        }
        if (!some) continue;
        for (ch = c0; ch < c1; ch++) {
            const float* gr = grads + (b * c + ch) * per + q;
            float* dst = out + (b * c + ch) * plane;
            /* The north and south rows' pending additions. */
            gs_tail tails[2] = {{NULL, 0.0f}, {NULL, 0.0f}};
            for (v = 0; v < nv; v++) {
                if (!any[v]) continue;
                gs_prefetch_below(dst, off[v][corners > 1 ? 2 : 0][0], w);
                for (k = 0; k < corners; k++) {
                    if (k + 1 < corners && k % 2 == 0 && run[v][k] &&
                        run[v][k + 1]) {
                        /* nw and ne (or sw and se): nine pixels, after
                         * the other row's pending addition if it is one
                         * of them. */
                        float* at = dst + off[v][k][0];
                        __m256 g8 = _mm256_loadu_ps(gr + 8 * v);
                        gs_flush_in(&tails[1 - k / 2], at);
                        gs_add_pair8(
                            at, _mm256_mul_ps(_mm256_loadu_ps(wt[v][k]), g8),
                            _mm256_mul_ps(_mm256_loadu_ps(wt[v][k + 1]), g8),
                            &tails[k / 2]);
                        k++;
                        continue;
                    }
                    /* Any other addition comes after the pending ones. */
                    gs_flush(&tails[0]);
                    gs_flush(&tails[1]);
                    if (run[v][k]) {
                        /* Eight different pixels: the same additions
                         * at once. */
                        float* at = dst + off[v][k][0];
                        _mm256_storeu_ps(at, _mm256_add_ps(
                            _mm256_loadu_ps(at),
                            _mm256_mul_ps(_mm256_loadu_ps(wt[v][k]),
                                          _mm256_loadu_ps(gr + 8 * v))));
                        continue;
                    }
                    /* The eight products at once (the same roundings),
                     * then the additions lane after lane. */
                    _mm256_storeu_ps(prod, _mm256_mul_ps(
                        _mm256_loadu_ps(wt[v][k]), gs_part8(gr + 8 * v, valid[v])));
                    for (i = 0; i < valid[v]; i++) {
                        if (in[v][k][i]) dst[off[v][k][i]] += prod[i];
                    }
                }
            }
            gs_flush(&tails[0]);
            gs_flush(&tails[1]);
        }
    }
}
#else
#define GS_SIMD 0
#include "cg_grid_stubs.h"
#endif

#endif /* CG_GRID_SIMD_H */
