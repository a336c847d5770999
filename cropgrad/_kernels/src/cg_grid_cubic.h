/* Grid sampling's SIMD clone, bicubic: the forward op, the grid gradient
 * and the image gradient in float32, eight points a vector (AVX2 + FMA), beside the
 * bilinear and nearest ones of cg_grid_simd.h, whose helpers it uses.
 * Lane for lane the portable loops' operations in their order
 * (cropgrad/_kernels/grid_sample/points.pxd: cubic_coefficients,
 * cubic_slopes, cubic_taps; kernels.pyx: forward_row, slopes_row), so
 * the bits are the same. */
#ifndef CG_GRID_CUBIC_H
#define CG_GRID_CUBIC_H

#include "cg_grid_simd.h"

#if GS_SIMD

/* Eight points' 16 taps, tap (i, j) (column x0 - 1 + i, row y0 - 1 + j)
 * at 4 * i + j as in cubic_taps: plane offsets and the masks of those
 * inside the image, the ones read; the weights along x and y, and for the grid
 * gradient their slopes. */
typedef struct {
    __m256i off[16];
    __m256i in[16];
    __m256 cx[4], cy[4];
    __m256 dx[4], dy[4];
} gs_cubic8;

/* cubic_coefficients: ((A u - 5A) u + 8A) u - 4A for the outer taps, the
 * inner ones with two fused multiply-adds. */
GS_AVX2 static inline void gs_cubic_weights8(__m256 t, __m256* c) {
    __m256 one = _mm256_set1_ps(1.0f), a = _mm256_set1_ps(-0.75f);
    __m256 five = _mm256_set1_ps(-3.75f), eight = _mm256_set1_ps(-6.0f);
    __m256 four = _mm256_set1_ps(-3.0f);
    __m256 a2 = _mm256_set1_ps(1.25f), a3 = _mm256_set1_ps(-2.25f);
    __m256 u = _mm256_add_ps(t, one);
    c[0] = _mm256_sub_ps(_mm256_mul_ps(_mm256_add_ps(_mm256_mul_ps(
               _mm256_sub_ps(_mm256_mul_ps(a, u), five), u), eight), u), four);
    c[1] = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_fmadd_ps(a2, t, a3), t), t,
                           one);
    u = _mm256_sub_ps(one, t);
    c[2] = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_fmadd_ps(a2, u, a3), u), u,
                           one);
    u = _mm256_sub_ps(_mm256_set1_ps(2.0f), t);
    c[3] = _mm256_sub_ps(_mm256_mul_ps(_mm256_add_ps(_mm256_mul_ps(
               _mm256_sub_ps(_mm256_mul_ps(a, u), five), u), eight), u), four);
}

/* cubic_slopes: the weights' derivatives in the tap's distance. */
GS_AVX2 static inline void gs_cubic_slopes8(__m256 t, __m256* d) {
    __m256 a3 = _mm256_set1_ps(-2.25f), a10 = _mm256_set1_ps(-7.5f);
    __m256 a8 = _mm256_set1_ps(-6.0f), b3 = _mm256_set1_ps(3.75f);
    __m256 b2 = _mm256_set1_ps(4.5f);
    __m256 x0 = _mm256_sub_ps(_mm256_set1_ps(-1.0f), t);
    __m256 x1 = _mm256_sub_ps(_mm256_setzero_ps(), t);
    __m256 x2 = _mm256_sub_ps(_mm256_set1_ps(1.0f), t);
    __m256 x3 = _mm256_sub_ps(_mm256_set1_ps(2.0f), t);
    d[0] = _mm256_sub_ps(_mm256_mul_ps(_mm256_sub_ps(
               _mm256_mul_ps(_mm256_set1_ps(2.25f), x0), a10), x0), a8);
    d[1] = _mm256_mul_ps(_mm256_sub_ps(
               _mm256_mul_ps(_mm256_set1_ps(-3.75f), x1), b2), x1);
    d[2] = _mm256_mul_ps(_mm256_sub_ps(_mm256_mul_ps(b3, x2), b2), x2);
    d[3] = _mm256_add_ps(_mm256_mul_ps(_mm256_sub_ps(
               _mm256_mul_ps(a3, x3), a10), x3), a8);
}

/* pad_tap: a tap's coordinate along axis k, padded as the forward op
 * pads (clipped; reflected first with reflection padding). */
GS_AVX2 static inline __m256 gs_pad8(__m256 v, const gs_axes* a, int k) {
    if (a->padding == 0) return v;
    if (a->padding == 2) v = gs_reflect8(v, a, k, NULL);
    return gs_clip8(v, a->top[k]);
}

/* The taps of grid values (gx, gy), unnormalised without padding as
 * bicubic's weights are; with `slopes`, their derivatives too. */
GS_AVX2 static inline void gs_cubic_taps8(__m256 gx, __m256 gy,
                                          const gs_axes* a, int32_t h,
                                          int32_t w, int slopes,
                                          gs_cubic8* c) {
    __m256 x = gs_unnormalize8(gx, a->scale[0], a->aligned);
    __m256 y = gs_unnormalize8(gy, a->scale[1], a->aligned);
    __m256 x0 = _mm256_floor_ps(x), y0 = _mm256_floor_ps(y);
    __m256 tx = _mm256_sub_ps(x, x0), ty = _mm256_sub_ps(y, y0);
    __m256i hv = _mm256_set1_epi32(h), wv = _mm256_set1_epi32(w);
    __m256i ix[4], iy[4], row;
    int i, j;
    gs_cubic_weights8(tx, c->cx);
    gs_cubic_weights8(ty, c->cy);
    if (slopes) {
        gs_cubic_slopes8(tx, c->dx);
        gs_cubic_slopes8(ty, c->dy);
    }
    for (i = 0; i < 4; i++) {
        __m256 step = _mm256_set1_ps((float)(i - 1));
        /* The truncation gives INT32_MIN for NaN and values out of
         * range, as to_index does. */
        ix[i] = _mm256_cvttps_epi32(gs_pad8(_mm256_add_ps(x0, step), a, 0));
        iy[i] = _mm256_cvttps_epi32(gs_pad8(_mm256_add_ps(y0, step), a, 1));
    }
    for (j = 0; j < 4; j++) {
        row = _mm256_mullo_epi32(iy[j], wv);
        for (i = 0; i < 4; i++) {
            c->off[4 * i + j] = _mm256_add_epi32(row, ix[i]);
            /* With the other paddings every tap is inside (its
             * coordinates clipped), unless the image is empty. */
            c->in[4 * i + j] = gs_inside8(iy[j], ix[i], hv, wv);
        }
    }
}

/* Tap k's pixels, +0 where it is not read (the portable read). */
GS_AVX2 static inline __m256 gs_cubic_read8(const float* plane,
                                            const gs_cubic8* c, int k) {
    return _mm256_mask_i32gather_ps(_mm256_setzero_ps(), plane, c->off[k],
                                    _mm256_castsi256_ps(c->in[k]), 4);
}

/* Vectors of points a block: their taps are worked out first, then each
 * channel's plane is read for all of them. */
#define GS_CUBIC_BLOCK 8

/* The taps of the vectors of points [q, q + 8 * GS_CUBIC_BLOCK) of
 * batch b up to `end`; returns how many vectors. */
GS_AVX2 static inline int gs_cubic_block(
        const float* grid, int64_t per, int64_t b, int64_t q, int64_t end,
        int32_t h, int32_t w, const gs_axes* axes, int slopes,
        gs_cubic8* cn, int* valid) {
    int v = 0;
    __m256 x, y;
    for (; v < GS_CUBIC_BLOCK && q < end; v++, q += 8) {
        valid[v] = (int)(end - q < 8 ? end - q : 8);
        gs_load8(grid + 2 * (b * per + q), valid[v], &x, &y);
        gs_cubic_taps8(x, y, axes, h, w, slopes, &cn[v]);
    }
    return v;
}

/* The bicubic forward op of points [first, first + count) of batch b:
 * per row of taps, the first product fused with the second, then the
 * third and fourth added; the rows' sum fused, as forward_row has it. */
GS_AVX2 static void gs_forward_cubic_bz8(
        const float* image, const float* grid, float* out, int64_t c,
        int32_t h, int32_t w, int64_t per, int64_t b, int64_t first,
        int64_t count, const gs_axes* axes) {
    int64_t q, ch, plane = (int64_t)h * w, end = first + count;
    gs_cubic8 cn[GS_CUBIC_BLOCK];
    int valid[GS_CUBIC_BLOCK];
    __m256 rows[4];
    int v, nv, j;
    for (q = first; q < end; q += 8 * GS_CUBIC_BLOCK) {
        nv = gs_cubic_block(grid, per, b, q, end, h, w, axes, 0, cn, valid);
        for (ch = 0; ch < c; ch++) {
            const float* img = image + (b * c + ch) * plane;
            float* dst = out + (b * c + ch) * per + q;
            for (v = 0; v < nv; v++) {
                const gs_cubic8* k = &cn[v];
                for (j = 0; j < 4; j++) {
                    rows[j] = _mm256_add_ps(
                        _mm256_add_ps(
                            _mm256_fmadd_ps(
                                k->cx[0], gs_cubic_read8(img, k, j),
                                _mm256_mul_ps(k->cx[1],
                                              gs_cubic_read8(img, k, 4 + j))),
                            _mm256_mul_ps(k->cx[2],
                                          gs_cubic_read8(img, k, 8 + j))),
                        _mm256_mul_ps(k->cx[3], gs_cubic_read8(img, k, 12 + j)));
                }
                gs_store8(dst + 8 * v,
                          _mm256_fmadd_ps(k->cy[3], rows[3],
                          _mm256_fmadd_ps(k->cy[2], rows[2],
                          _mm256_fmadd_ps(k->cy[1], rows[1],
                          _mm256_mul_ps(k->cy[0], rows[0])))),
                          valid[v]);
            }
        }
    }
}

/* The bicubic grid gradient of points [first, first + count) of batch
 * b: each point's sums over the channels in their order and, per
 * channel, over the taps (i, j) in theirs, then times the scales (the
 * padding left out of the derivative, as slopes_row has it). */
GS_AVX2 static void gs_grad_grid_cubic_bz8(
        const float* image, const float* grid, const float* grads,
        float* out, int64_t c, int32_t h, int32_t w, int64_t per,
        int64_t b, int64_t first, int64_t count, const gs_axes* axes) {
    int64_t q, ch, plane = (int64_t)h * w, end = first + count;
    gs_cubic8 cn[GS_CUBIC_BLOCK];
    __m256 gx[GS_CUBIC_BLOCK], gy[GS_CUBIC_BLOCK];
    __m256 sign = _mm256_set1_ps(-0.0f), gc, vg;
    int valid[GS_CUBIC_BLOCK];
    float tx[8], ty[8];
    int v, nv, i, j;
    for (q = first; q < end; q += 8 * GS_CUBIC_BLOCK) {
        nv = gs_cubic_block(grid, per, b, q, end, h, w, axes, 1, cn, valid);
        for (v = 0; v < nv; v++) {
            gx[v] = _mm256_setzero_ps();
            gy[v] = _mm256_setzero_ps();
        }
        for (ch = 0; ch < c; ch++) {
            const float* img = image + (b * c + ch) * plane;
            const float* gr = grads + (b * c + ch) * per + q;
            for (v = 0; v < nv; v++) {
                const gs_cubic8* k = &cn[v];
                gc = gs_part8(gr + 8 * v, valid[v]);
                for (i = 0; i < 4; i++) {
                    for (j = 0; j < 4; j++) {
                        vg = _mm256_mul_ps(gs_cubic_read8(img, k, 4 * i + j),
                                           gc);
                        gx[v] = _mm256_fmadd_ps(
                            _mm256_xor_ps(_mm256_mul_ps(vg, k->dx[i]), sign),
                            k->cy[j], gx[v]);
                        gy[v] = _mm256_fmadd_ps(
                            _mm256_xor_ps(_mm256_mul_ps(vg, k->dy[j]), sign),
                            k->cx[i], gy[v]);
                    }
                }
            }
        }
        for (v = 0; v < nv; v++) {
            int64_t at = b * per + q + 8 * v;
            _mm256_storeu_ps(tx, _mm256_mul_ps(
                gx[v], _mm256_set1_ps(axes->scale[0])));
            _mm256_storeu_ps(ty, _mm256_mul_ps(
                gy[v], _mm256_set1_ps(axes->scale[1])));
            for (i = 0; i < valid[v]; i++) {
                out[2 * (at + i)] = tx[i];
                out[2 * (at + i) + 1] = ty[i];
            }
        }
    }
}
/* The bicubic image gradient of batch b's channels [c0, c1), the pixels
 * of offsets [lo, hi) of each plane: per vector of points, per tap (i, j)
 * in cubic_taps' order, lane after lane, each addition ``dst += (g *
 * cx_i) * cy_j`` (the portable scatter's, from the same taps).  The taps
 * of a block of vectors are worked out once for all the channels, which
 * then go one plane at a time over the block: the order of the additions
 * to each pixel stays the same. */
GS_AVX2 static void gs_scatter_cubic_bz8(
        const float* grads, const float* grid, float* out, int64_t c,
        int64_t c0, int64_t c1, int32_t h, int32_t w, int64_t per,
        int64_t b, int64_t lo, int64_t hi, const gs_axes* axes) {
    int64_t q, ch, plane = (int64_t)h * w;
    gs_cubic8 cn[GS_CUBIC_BLOCK];
    int valid[GS_CUBIC_BLOCK], any[GS_CUBIC_BLOCK];
    int32_t off[GS_CUBIC_BLOCK][16][8], keep[GS_CUBIC_BLOCK][16][8];
    __m256i lov = _mm256_set1_epi32((int32_t)lo);
    __m256i hiv = _mm256_set1_epi32((int32_t)hi);
    __m256i ones = _mm256_set1_epi32(-1);
    __m256 g8, gi;
    float prod[8];
    int v, nv, i, j, k, lane, some;
    for (q = 0; q < per; q += 8 * GS_CUBIC_BLOCK) {
        nv = gs_cubic_block(grid, per, b, q, per, h, w, axes, 0, cn, valid);
        some = 0;
        for (v = 0; v < nv; v++) {
            any[v] = 0;
            for (k = 0; k < 16; k++) {
                /* Inside the image and the band: lo <= off < hi. */
                __m256i in = _mm256_andnot_si256(
                    _mm256_or_si256(
                        _mm256_cmpgt_epi32(lov, cn[v].off[k]),
                        _mm256_xor_si256(_mm256_cmpgt_epi32(hiv, cn[v].off[k]),
                                         ones)),
                    cn[v].in[k]);
                any[v] |= !_mm256_testz_si256(in, in);
                _mm256_storeu_si256((__m256i*)off[v][k], cn[v].off[k]);
                _mm256_storeu_si256((__m256i*)keep[v][k], in);
            }
            some |= any[v];
        }
        if (!some) continue;
        for (ch = c0; ch < c1; ch++) {
            const float* gr = grads + (b * c + ch) * per + q;
            float* dst = out + (b * c + ch) * plane;
            for (v = 0; v < nv; v++) {
                if (!any[v]) continue;
                g8 = gs_part8(gr + 8 * v, valid[v]);
                for (i = 0; i < 4; i++) {
                    gi = _mm256_mul_ps(g8, cn[v].cx[i]);
                    for (j = 0; j < 4; j++) {
                        k = 4 * i + j;
                        /* The eight products at once (the same roundings),
                         * then the additions lane after lane. */
                        _mm256_storeu_ps(prod, _mm256_mul_ps(gi, cn[v].cy[j]));
                        for (lane = 0; lane < valid[v]; lane++) {
                            if (keep[v][k][lane])
                                dst[off[v][k][lane]] += prod[lane];
                        }
                    }
                }
            }
        }
    }
}
#endif

#endif /* CG_GRID_CUBIC_H */
