/* Grid sampling's SIMD clone for NHWC arrays (float32, every mode and
 * padding, AVX2 + FMA): the image, its gradient, the samples and their
 * grads [N, H, W, C], read and written in place.  The taps of eight points
 * are worked out as for NCHW (cg_grid_simd.h, cg_grid_cubic.h); then the
 * forward op and the image gradient go along each point's channels, eight
 * at a time, and the grid gradient along the points, each point's channels
 * in their order.  Every element gets the portable loops' operations in
 * their order, so the bits are NCHW's. */
#ifndef CG_GRID_NHWC_H
#define CG_GRID_NHWC_H

#include "cg_grid_cubic.h"
#include "cg_transpose.h"

#if GS_SIMD

/* One vector of points' taps, lane by lane: each tap's element offset in
 * the batch's image (pixel offset times the channels; -1: not read) and
 * weight (bilinear: the corner's; bicubic: cx then cy of the point). */
typedef struct {
    int taps;           /* 1 nearest, 4 bilinear, 16 bicubic */
    int64_t at[16][8];
    float wt[8][8];     /* bilinear: [corner][lane]; bicubic: cx 0-3, cy 4-7 */
} gs_taps_nhwc;

/* Tap k's element offsets in an NHWC image of `c` channels, lane by lane
 * (-1 where it is not read), from its pixel offsets and inside-mask. */
GS_AVX2 static inline void gs_nhwc_at(__m256i off, __m256i in, int64_t c,
                                      int64_t* at) {
    int32_t o[8], m[8];
    int lane;
    _mm256_storeu_si256((__m256i*)o, off);
    _mm256_storeu_si256((__m256i*)m, in);
    for (lane = 0; lane < 8; lane++)
        at[lane] = m[lane] ? (int64_t)o[lane] * c : -1;
}

/* Bicubic's 16 taps as NHWC taps. */
GS_AVX2 static inline void gs_nhwc_cubic(const gs_cubic8* cb, int64_t c,
                                         gs_taps_nhwc* t) {
    int k;
    t->taps = 16;
    for (k = 0; k < 16; k++)
        gs_nhwc_at(cb->off[k], cb->in[k], c, t->at[k]);
    for (k = 0; k < 4; k++) {
        _mm256_storeu_ps(t->wt[k], cb->cx[k]);
        _mm256_storeu_ps(t->wt[4 + k], cb->cy[k]);
    }
}

/* The first `taps` corners as NHWC taps. */
GS_AVX2 static inline void gs_nhwc_corners(const gs_corners8* cn, int taps,
                                           int64_t c, gs_taps_nhwc* t) {
    int k;
    t->taps = taps;
    for (k = 0; k < taps; k++) {
        gs_nhwc_at(cn->off[k], cn->in[k], c, t->at[k]);
        _mm256_storeu_ps(t->wt[k], cn->wt[k]);
    }
}

/* The taps of the `valid` points from `g` (interleaved x, y), located as
 * the forward op (`backward` 0) or the image gradient locates them. */
GS_AVX2 static inline void gs_nhwc_taps(const float* g, int valid,
                                        int64_t c, int32_t h, int32_t w,
                                        const gs_axes* axes, int backward,
                                        gs_taps_nhwc* t) {
    __m256 x, y;
    gs_load8(g, valid, &x, &y);
    if (axes->cubic) {
        gs_cubic8 cb;
        gs_cubic_taps8(x, y, axes, h, w, 0, &cb);
        gs_nhwc_cubic(&cb, c, t);
        return;
    }
    gs_corners8 cn;
    backward = backward && !axes->nearest;
    x = gs_locate8(x, axes, 0, backward, NULL);
    y = gs_locate8(y, axes, 1, backward, NULL);
    if (axes->nearest)
        gs_nearest(x, y, h, w, axes->padding == 0, &cn);
    else
        gs_corners(x, y, h, w, &cn);
    gs_nhwc_corners(&cn, axes->nearest ? 1 : 4, c, t);
}

/* Channel `ch` of eight rows of channels, row i at ``base + at[i]`` (+0
 * where at[i] is -1): a tap of eight points, or their grads. */
GS_AVX2 static inline __m256 gs_lanes8(const float* base, const int64_t* at,
                                       int64_t ch) {
#define GS_LANE(i) (at[i] >= 0 ? base[at[i] + ch] : 0.0f)
    return _mm256_setr_ps(GS_LANE(0), GS_LANE(1), GS_LANE(2), GS_LANE(3),
                          GS_LANE(4), GS_LANE(5), GS_LANE(6), GS_LANE(7));
#undef GS_LANE
}

/* Channel `ch` of eight points' tap k (+0 where it is not read). */
GS_AVX2 static inline __m256 gs_tap8(const float* img, const gs_taps_nhwc* t,
                                     int k, int64_t ch) {
    return gs_lanes8(img, t->at[k], ch);
}

/* A row of eight zeros: the row of a tap that is not read. */
static const float gs_zeros8[8] = {0};

/* Channels [ch, ch + 8) of eight rows as gs_lanes8 reads one: v[j] is
 * channel ch + j of the eight rows, read eight channels a row and
 * transposed (the same values, fewer loads). */
GS_AVX2 static inline void gs_lanes8x8(const float* base, const int64_t* at,
                                       int64_t ch, __m256* v) {
    const float* row[8];
    int i;
    for (i = 0; i < 8; i++) row[i] = at[i] >= 0 ? base + at[i] + ch : gs_zeros8;
    cg_rows8x8(row, v);
}

/* Channels [ch, ch + n) of eight points, n = min(8, c - ch): their
 * grads (rows at ``grads + rows[i]``) in gb[j] and their taps' pixels in
 * v[k][j], channel ch + j each; eight channels a load and transposed, or
 * the last ones a value at a time.  Returns n. */
GS_AVX2 static inline int gs_channels8(const float* grads,
                                       const int64_t* rows, const float* img,
                                       const gs_taps_nhwc* t, int64_t ch,
                                       int64_t c, __m256* gb, __m256 (*v)[8]) {
    int j, k, n = c - ch < 8 ? (int)(c - ch) : 8;
    if (n == 8) {
        gs_lanes8x8(grads, rows, ch, gb);
        for (k = 0; k < t->taps; k++) gs_lanes8x8(img, t->at[k], ch, v[k]);
        return n;
    }
    for (j = 0; j < n; j++) {
        gb[j] = gs_lanes8(grads, rows, ch + j);
        for (k = 0; k < t->taps; k++) v[k][j] = gs_tap8(img, t, k, ch + j);
    }
    return n;
}

/* Channels [ch, ch + 8) of a tap's pixel, +0 for a tap that is not read
 * (`px` NULL). */
GS_AVX2 static inline __m256 gs_pixel8(const float* px, int64_t ch) {
    return px ? _mm256_loadu_ps(px + ch) : _mm256_setzero_ps();
}

/* One sample from its taps' values `v` and weights `cw` (broadcast or
 * lane by lane): bilinear (4 taps) or bicubic (16), in forward_row's
 * operations. */
GS_AVX2 static inline __m256 gs_sample8(int taps, const __m256* v,
                                        const __m256* cw) {
    __m256 rows[4];
    int j;
    if (taps == 4)
        return _mm256_fmadd_ps(v[3], cw[3],
               _mm256_fmadd_ps(v[2], cw[2],
               _mm256_fmadd_ps(v[1], cw[1], _mm256_mul_ps(v[0], cw[0]))));
    for (j = 0; j < 4; j++) {
        rows[j] = _mm256_add_ps(
            _mm256_add_ps(
                _mm256_fmadd_ps(cw[0], v[j], _mm256_mul_ps(cw[1], v[4 + j])),
                _mm256_mul_ps(cw[2], v[8 + j])),
            _mm256_mul_ps(cw[3], v[12 + j]));
    }
    return _mm256_fmadd_ps(cw[7], rows[3],
           _mm256_fmadd_ps(cw[6], rows[2],
           _mm256_fmadd_ps(cw[5], rows[1], _mm256_mul_ps(cw[4], rows[0]))));
}

/* The forward op of points [first, first + count) of batch b: whole
 * groups of eight channels a point at a time, the channels left over
 * (all of them when there are fewer than eight) eight points at a time. */
GS_AVX2 static void gs_forward_nhwc8(
        const float* image, const float* grid, float* out, int64_t c,
        int32_t h, int32_t w, int64_t per, int64_t b, int64_t first,
        int64_t count, const gs_axes* axes) {
    const float* img = image + b * ((int64_t)h * w) * c;
    int64_t q, ch, end = first + count, whole = c - c % 8;
    gs_taps_nhwc t;
    const float* px[16];
    __m256 cw[8], v[16];
    float res[8];
    int lane, k, valid, weights;
    for (q = first; q < end; q += 8) {
        valid = (int)(end - q < 8 ? end - q : 8);
        gs_nhwc_taps(grid + 2 * (b * per + q), valid, c, h, w, axes, 0, &t);
        weights = t.taps == 16 ? 8 : t.taps;
        for (lane = 0; lane < valid && whole > 0; lane++) {
            float* dst = out + (b * per + q + lane) * c;
            for (k = 0; k < t.taps; k++)
                px[k] = t.at[k][lane] >= 0 ? img + t.at[k][lane] : NULL;
            for (k = 0; k < weights; k++) cw[k] = _mm256_set1_ps(t.wt[k][lane]);
            for (ch = 0; ch < whole; ch += 8) {
                for (k = 0; k < t.taps; k++) v[k] = gs_pixel8(px[k], ch);
                /* Nearest: the pixel itself (+0 outside), no arithmetic. */
                _mm256_storeu_ps(dst + ch, t.taps == 1 ? v[0]
                                                       : gs_sample8(t.taps, v, cw));
            }
        }
        for (k = 0; k < weights; k++) cw[k] = _mm256_loadu_ps(t.wt[k]);
        for (ch = whole; ch < c; ch++) {
            for (k = 0; k < t.taps; k++) v[k] = gs_tap8(img, &t, k, ch);
            _mm256_storeu_ps(res, t.taps == 1 ? v[0] : gs_sample8(t.taps, v, cw));
            for (lane = 0; lane < valid; lane++)
                out[(b * per + q + lane) * c + ch] = res[lane];
        }
    }
}

/* The image gradient of batch b, the pixels of offsets [lo, hi) (every
 * channel): per vector of points, per tap, lane after lane, the point's
 * grads times the tap's weight added to the pixel's channels, as the
 * portable scatter adds them (bilinear w * g, nearest g, bicubic
 * (g * cx) * cy): eight channels at a time, then one at a time. */
GS_AVX2 static void gs_scatter_nhwc8(
        const float* grads, const float* grid, float* out, int64_t c,
        int32_t h, int32_t w, int64_t per, int64_t b, int64_t lo,
        int64_t hi, const gs_axes* axes) {
    float* img = out + b * ((int64_t)h * w) * c;
    int64_t q, ch, at, from = lo * c, to = hi * c, whole = c - c % 8;
    gs_taps_nhwc t;
    __m256 g8, a8, s8;
    float a, s = 1.0f;
    int lane, k, valid;
    for (q = 0; q < per; q += 8) {
        valid = (int)(per - q < 8 ? per - q : 8);
        gs_nhwc_taps(grid + 2 * (b * per + q), valid, c, h, w, axes, 1, &t);
        for (k = 0; k < t.taps; k++) {
            for (lane = 0; lane < valid; lane++) {
                const float* gr = grads + (b * per + q + lane) * c;
                at = t.at[k][lane];
                if (at < from || at >= to) continue;
                float* dst = img + at;
                a = t.wt[t.taps == 16 ? k / 4 : k][lane];
                if (t.taps == 16) s = t.wt[4 + k % 4][lane];
                a8 = _mm256_set1_ps(a);
                s8 = _mm256_set1_ps(s);
                for (ch = 0; ch < whole; ch += 8) {
                    g8 = _mm256_loadu_ps(gr + ch);
                    if (t.taps == 4)
                        g8 = _mm256_mul_ps(a8, g8);
                    else if (t.taps == 16)
                        g8 = _mm256_mul_ps(_mm256_mul_ps(g8, a8), s8);
                    _mm256_storeu_ps(dst + ch,
                                     _mm256_add_ps(_mm256_loadu_ps(dst + ch), g8));
                }
                /* The same products and sums, one channel at a time (the
                 * build contracts none into a fused multiply-add). */
                for (; ch < c; ch++) {
                    if (t.taps == 4)
                        dst[ch] += a * gr[ch];
                    else if (t.taps == 16)
                        dst[ch] += (gr[ch] * a) * s;
                    else
                        dst[ch] += gr[ch];
                }
            }
        }
    }
}

/* The grid gradient (bilinear, bicubic) of points [first, first + count)
 * of batch b: each point's sums over its channels in their order, as
 * gs_grad_grid_bz8 and gs_grad_grid_cubic_bz8 make them, the channels
 * read from each tap's pixel. */
GS_AVX2 static void gs_grad_grid_nhwc8(
        const float* image, const float* grid, const float* grads,
        float* out, int64_t c, int32_t h, int32_t w, int64_t per,
        int64_t b, int64_t first, int64_t count, const gs_axes* axes) {
    const float* img = image + b * ((int64_t)h * w) * c;
    int64_t q, ch, end = first + count, rows[8];
    __m256 sign = _mm256_set1_ps(-0.0f), gx, gy, mult[2], x, y;
    /* Eight channels at a time (gs_channels8), each channel's terms in
     * the channels' order. */
    __m256 gb[8], v[16][8];
    float tx[8], ty[8];
    int i, j, k, n, lane, valid;
    for (q = first; q < end; q += 8) {
        const float* g = grid + 2 * (b * per + q);
        valid = (int)(end - q < 8 ? end - q : 8);
        for (lane = 0; lane < 8; lane++)
            rows[lane] = lane < valid ? (b * per + q + lane) * c : -1;
        gx = gy = _mm256_setzero_ps();
        gs_load8(g, valid, &x, &y);
        if (axes->cubic) {
            gs_taps_nhwc t;
            gs_cubic8 cb;
            gs_cubic_taps8(x, y, axes, h, w, 1, &cb);
            gs_nhwc_cubic(&cb, c, &t);
            mult[0] = _mm256_set1_ps(axes->scale[0]);
            mult[1] = _mm256_set1_ps(axes->scale[1]);
            for (ch = 0; ch < c; ch += 8) {
                n = gs_channels8(grads, rows, img, &t, ch, c, gb, v);
                for (j = 0; j < n; j++) {
                    for (k = 0; k < 16; k++) {
                        __m256 vg = _mm256_mul_ps(v[k][j], gb[j]);
                        i = k / 4;
                        gx = _mm256_fmadd_ps(
                            _mm256_xor_ps(_mm256_mul_ps(vg, cb.dx[i]), sign),
                            cb.cy[k % 4], gx);
                        gy = _mm256_fmadd_ps(
                            _mm256_xor_ps(_mm256_mul_ps(vg, cb.dy[k % 4]), sign),
                            cb.cx[i], gy);
                    }
                }
            }
        } else {
            gs_taps_nhwc t;
            gs_corners8 cn;
            x = gs_locate8(x, axes, 0, 1, &mult[0]);
            y = gs_locate8(y, axes, 1, 1, &mult[1]);
            gs_corners(x, y, h, w, &cn);
            gs_nhwc_corners(&cn, 4, c, &t);
            for (ch = 0; ch < c; ch += 8) {
                n = gs_channels8(grads, rows, img, &t, ch, c, gb, v);
                for (j = 0; j < n; j++) {
                    __m256 gc = gb[j], nw = v[0][j], ne = v[1][j];
                    __m256 sw = v[2][j], se = v[3][j], dx, dy;
                    /* frac: n, s, w, e */
                    dx = _mm256_fmadd_ps(
                        _mm256_sub_ps(se, sw), cn.frac[0],
                        _mm256_mul_ps(_mm256_sub_ps(ne, nw), cn.frac[1]));
                    dy = _mm256_fmadd_ps(
                        _mm256_sub_ps(se, ne), cn.frac[2],
                        _mm256_mul_ps(_mm256_sub_ps(sw, nw), cn.frac[3]));
                    gx = _mm256_fmadd_ps(dx, gc, gx);
                    gy = _mm256_fmadd_ps(dy, gc, gy);
                }
            }
        }
        _mm256_storeu_ps(tx, _mm256_mul_ps(gx, mult[0]));
        _mm256_storeu_ps(ty, _mm256_mul_ps(gy, mult[1]));
        for (lane = 0; lane < valid; lane++) {
            out[2 * (b * per + q + lane)] = tx[lane];
            out[2 * (b * per + q + lane) + 1] = ty[lane];
        }
    }
}
#endif

#endif /* CG_GRID_NHWC_H */
