# cython: language_level=3
"""grid_sample's kernels (private): the forward op, the image gradient, the
grid gradient and the grid JVP, in float32 or float64 arithmetic.

Trusts its arguments: cropgrad/_api/grid_sample.py checks shapes, options
and finite grids first, and passes C-contiguous NCHW arrays of the
arithmetic type.  The arithmetic is docs/semantics.md's ("Grid sampling"),
the same as the NumPy reference's (cropgrad/_reference/grid_sample/),
every fused multiply-add an explicit ``fma`` (the build does not contract).

Threads never change the bits.  The forward op, the grid gradient and the
JVP write each output element from one task (a row of output points).  The
image gradient is a scatter, run one batch, and one chunk of its points,
at a time: tasks over blocks of points first work out every point's taps
(offsets and the weights that do not depend on the channel); then a task
owns one channel's plane, or a band of its rows when there are fewer
channels than threads, and replays the chunk's points in PyTorch's order
(vectors of 8 float32 or 4 float64 points; per vector, per tap, lane after
lane), adding only to the pixels it owns: each pixel gets its additions in
the serial order.

Float32 bilinear sampling with zeros padding has an AVX2 + FMA clone (the
C block below), eight points a vector with the portable loops' operations
lane for lane: the forward op and the grid gradient in spans of points,
the image gradient in one run of tasks that work out their own points'
corners (a batch each, or a band of its rows when batches are fewer than
threads).
"""

from libc.math cimport floor
from libc.stdint cimport int32_t, int64_t, uintptr_t
from libc.string cimport strcmp

import numpy as np

from cropgrad._kernels.grid_sample.points cimport (
    BICUBIC,
    BILINEAR,
    BORDER,
    NEAREST,
    REFLECTION,
    ZEROS,
    Axis,
    Plan,
    Taps,
    bilinear_taps,
    cubic_coefficients,
    cubic_slopes,
    cubic_taps,
    locate,
    locate_grad,
    make_axis,
    mul_add,
    nearest_tap,
    read,
    real,
    unnormalize,
)
from cropgrad._runtime.parallel cimport (
    SCHEDULE_DYNAMIC,
    resolve_threads,
    run_tasks,
)
from cropgrad._runtime.simd cimport chosen_target

cdef extern from *:
    """
    /* Bilinear sampling with zeros padding in float32, eight points a
     * vector: an AVX2 + FMA clone of the portable loops below, chosen at
     * run time.  Lane for lane it does the portable code's operations in
     * its order (every fused multiply-add an explicit one, the rest
     * rounded as they are), so the bits are the same. */
    #include <stdint.h>
    #if (defined(__x86_64__) || defined(_M_X64)) && \\
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
    } gs_corners8;

    /* Whether `off` is 8 consecutive offsets, each lane's `keep` set. */
    GS_AVX2 static inline int gs_run8(__m256i off, __m256i keep) {
        __m256i first = _mm256_permutevar8x32_epi32(off, _mm256_setzero_si256());
        __m256i next = _mm256_add_epi32(
            first, _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
        __m256i same = _mm256_and_si256(_mm256_cmpeq_epi32(off, next), keep);
        return _mm256_movemask_epi8(same) == -1;
    }

    /* x of eight interleaved (x, y) points in *x, y in *y. */
    GS_AVX2 static inline void gs_split8(const float* g, __m256* x, __m256* y) {
        __m256 lo = _mm256_loadu_ps(g), hi = _mm256_loadu_ps(g + 8);
        /* Per 128-bit half: x0 x1 x4 x5 | x2 x3 x6 x7; the permute puts
         * the 64-bit pairs back in order. */
        __m256 xs = _mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(2, 0, 2, 0));
        __m256 ys = _mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(3, 1, 3, 1));
        *x = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(xs), 0xD8));
        *y = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(ys), 0xD8));
    }

    GS_AVX2 static inline __m256 gs_unnormalize8(__m256 g, float scale,
                                                 int aligned) {
        __m256 g1 = _mm256_add_ps(g, _mm256_set1_ps(1.0f));
        if (aligned) return _mm256_mul_ps(g1, _mm256_set1_ps(scale));
        return _mm256_fmadd_ps(g1, _mm256_set1_ps(scale), _mm256_set1_ps(-0.5f));
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
    }

    /* A corner's pixels, +0 where it is outside (the portable read); one
     * load where they are side by side (a smooth grid's common case). */
    GS_AVX2 static inline __m256 gs_read8(const float* plane,
                                          const gs_corners8* c, int k) {
        if (c->run[k])
            return _mm256_loadu_ps(plane + _mm256_cvtsi256_si32(c->off[k]));
        return _mm256_mask_i32gather_ps(_mm256_setzero_ps(), plane, c->off[k],
                                        _mm256_castsi256_ps(c->in[k]), 4);
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

    /* Points a block: their corners are worked out first, then each
     * channel's plane is read for all of them, while it is in the cache. */
    #define GS_BLOCK 16

    /* The corners of the vectors of points [q, q + 8 * GS_BLOCK) of batch
     * b up to `end`; returns how many vectors. */
    GS_AVX2 static inline int gs_block_corners(
            const float* grid, int64_t per, int64_t b, int64_t q,
            int64_t end, int32_t h, int32_t w, float sx, float sy,
            int aligned, gs_corners8* cn, int* valid) {
        int v = 0;
        __m256 x, y;
        for (; v < GS_BLOCK && q < end; v++, q += 8) {
            valid[v] = (int)(end - q < 8 ? end - q : 8);
            gs_load8(grid + 2 * (b * per + q), valid[v], &x, &y);
            gs_corners(gs_unnormalize8(x, sx, aligned),
                       gs_unnormalize8(y, sy, aligned), h, w, &cn[v]);
        }
        return v;
    }

    /* The forward op of points [first, first + count) of batch b. */
    GS_AVX2 static void gs_forward_bz8(
            const float* image, const float* grid, float* out, int64_t c,
            int32_t h, int32_t w, int64_t per, int64_t b, int64_t first,
            int64_t count, float sx, float sy, int aligned) {
        int64_t q, ch, plane = (int64_t)h * w, end = first + count;
        gs_corners8 cn[GS_BLOCK];
        int valid[GS_BLOCK];
        int v, nv;
        __m256 acc;
        for (q = first; q < end; q += 8 * GS_BLOCK) {
            nv = gs_block_corners(grid, per, b, q, end, h, w, sx, sy, aligned,
                                  cn, valid);
            for (ch = 0; ch < c; ch++) {
                const float* img = image + (b * c + ch) * plane;
                float* dst = out + (b * c + ch) * per + q;
                for (v = 0; v < nv; v++) {
                    const gs_corners8* k = &cn[v];
                    acc = _mm256_fmadd_ps(gs_read8(img, k, 3), k->wt[3],
                          _mm256_fmadd_ps(gs_read8(img, k, 2), k->wt[2],
                          _mm256_fmadd_ps(gs_read8(img, k, 1), k->wt[1],
                          _mm256_mul_ps(gs_read8(img, k, 0), k->wt[0]))));
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
            int64_t b, int64_t first, int64_t count, float sx, float sy,
            int aligned) {
        int64_t q, ch, plane = (int64_t)h * w, end = first + count;
        gs_corners8 cn[GS_BLOCK];
        __m256 gx[GS_BLOCK], gy[GS_BLOCK];
        int valid[GS_BLOCK];
        __m256 gc, nw, ne, sw, se, dx, dy;
        float tx[8], ty[8];
        int v, nv, i;
        for (q = first; q < end; q += 8 * GS_BLOCK) {
            nv = gs_block_corners(grid, per, b, q, end, h, w, sx, sy, aligned,
                                  cn, valid);
            for (v = 0; v < nv; v++) {
                gx[v] = _mm256_setzero_ps();
                gy[v] = _mm256_setzero_ps();
            }
            for (ch = 0; ch < c; ch++) {
                const float* img = image + (b * c + ch) * plane;
                const float* gr = grads + (b * c + ch) * per + q;
                for (v = 0; v < nv; v++) {
                    const gs_corners8* k = &cn[v];
                    if (valid[v] == 8) {
                        gc = _mm256_loadu_ps(gr + 8 * v);
                    } else {
                        for (i = 0; i < 8; i++)
                            tx[i] = i < valid[v] ? gr[8 * v + i] : 0.0f;
                        gc = _mm256_loadu_ps(tx);
                    }
                    nw = gs_read8(img, k, 0);
                    ne = gs_read8(img, k, 1);
                    sw = gs_read8(img, k, 2);
                    se = gs_read8(img, k, 3);
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
                _mm256_storeu_ps(tx, _mm256_mul_ps(gx[v], _mm256_set1_ps(sx)));
                _mm256_storeu_ps(ty, _mm256_mul_ps(gy[v], _mm256_set1_ps(sy)));
                for (i = 0; i < valid[v]; i++) {
                    out[2 * (at + i)] = tx[i];
                    out[2 * (at + i) + 1] = ty[i];
                }
            }
        }
    }

    /* The image gradient's taps of chunk points [first, last) of batch b
     * (offsets, -1 outside, and weights, four a point, at the point's
     * place r = q - q_start in the chunk). */
    GS_AVX2 static void gs_taps_bz8(
            const float* grid, int64_t* offs, float* wts, int32_t h,
            int32_t w, int64_t per, int64_t b, int64_t q_start, int64_t first,
            int64_t last, float sx, float sy, int aligned) {
        int64_t q, r;
        gs_corners8 cn;
        __m256 x, y;
        int32_t off[4][8], in[4][8];
        float wt[4][8];
        int valid, i, k;
        for (q = first; q < last; q += 8) {
            valid = (int)(last - q < 8 ? last - q : 8);
            gs_load8(grid + 2 * (b * per + q), valid, &x, &y);
            gs_corners(gs_unnormalize8(x, sx, aligned),
                       gs_unnormalize8(y, sy, aligned), h, w, &cn);
            for (k = 0; k < 4; k++) {
                _mm256_storeu_si256((__m256i*)off[k], cn.off[k]);
                _mm256_storeu_si256((__m256i*)in[k], cn.in[k]);
                _mm256_storeu_ps(wt[k], cn.wt[k]);
            }
            for (i = 0; i < valid; i++) {
                r = q + i - q_start;
                for (k = 0; k < 4; k++) {
                    offs[4 * r + k] = in[k][i] ? (int64_t)off[k][i] : -1;
                    wts[4 * r + k] = wt[k][i];
                }
            }
        }
    }
    /* The image gradient of batch b's channels [c0, c1), the pixels of
     * offsets [lo, hi) of each plane: per vector of points, per corner
     * nw, ne, sw, se, lane after lane, each addition ``dst += weight * g``
     * in that order (the portable scatter's, from the same taps).  The
     * corners of a block of vectors are worked out once for all the
     * channels, which then go one plane at a time over the block: the
     * order of the additions to each pixel stays the same. */
    GS_AVX2 static void gs_scatter_bz8(
            const float* grads, const float* grid, float* out, int64_t c,
            int64_t c0, int64_t c1, int32_t h, int32_t w, int64_t per,
            int64_t b, int64_t lo, int64_t hi, float sx, float sy,
            int aligned) {
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
        int v, nv, i, k, some;
        for (q = 0; q < per; q += 8 * GS_BLOCK) {
            nv = gs_block_corners(grid, per, b, q, per, h, w, sx, sy, aligned,
                                  cn, valid);
            some = 0;
            for (v = 0; v < nv; v++) {
                any[v] = 0;
                for (k = 0; k < 4; k++) {
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
                for (v = 0; v < nv; v++) {
                    if (!any[v]) continue;
                    for (k = 0; k < 4; k++) {
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
                            _mm256_loadu_ps(wt[v][k]), _mm256_loadu_ps(gr + 8 * v)));
                        for (i = 0; i < valid[v]; i++) {
                            if (in[v][k][i]) dst[off[v][k][i]] += prod[i];
                        }
                    }
                }
            }
        }
    }
    #else
    #define GS_SIMD 0
    static int gs_simd_supported(void) { return 0; }
    static void gs_forward_bz8(
            const float* image, const float* grid, float* out, int64_t c,
            int32_t h, int32_t w, int64_t per, int64_t b, int64_t first,
            int64_t count, float sx, float sy, int aligned) {}
    static void gs_grad_grid_bz8(
            const float* image, const float* grid, const float* grads,
            float* out, int64_t c, int32_t h, int32_t w, int64_t per,
            int64_t b, int64_t first, int64_t count, float sx, float sy,
            int aligned) {}
    static void gs_taps_bz8(
            const float* grid, int64_t* offs, float* wts, int32_t h,
            int32_t w, int64_t per, int64_t b, int64_t q_start, int64_t first,
            int64_t last, float sx, float sy, int aligned) {}
    static void gs_scatter_bz8(
            const float* grads, const float* grid, float* out, int64_t c,
            int64_t c0, int64_t c1, int32_t h, int32_t w, int64_t per,
            int64_t b, int64_t lo, int64_t hi, float sx, float sy,
            int aligned) {}
    #endif
    """
    int gs_simd_supported() noexcept nogil
    void gs_forward_bz8(const float* image, const float* grid, float* out,
                        int64_t c, int32_t h, int32_t w, int64_t per,
                        int64_t b, int64_t first, int64_t count, float sx,
                        float sy, int aligned) noexcept nogil
    void gs_grad_grid_bz8(const float* image, const float* grid,
                          const float* grads, float* out, int64_t c,
                          int32_t h, int32_t w, int64_t per, int64_t b,
                          int64_t first, int64_t count, float sx, float sy,
                          int aligned) noexcept nogil
    void gs_taps_bz8(const float* grid, int64_t* offs, float* wts,
                     int32_t h, int32_t w, int64_t per, int64_t b,
                     int64_t q_start, int64_t first, int64_t last, float sx,
                     float sy, int aligned) noexcept nogil
    void gs_scatter_bz8(const float* grads, const float* grid, float* out,
                        int64_t c, int64_t c0, int64_t c1, int32_t h,
                        int32_t w, int64_t per, int64_t b, int64_t lo,
                        int64_t hi, float sx, float sy,
                        int aligned) noexcept nogil


# The SIMD clone runs where the CPU has AVX2 and FMA and the process's SIMD
# target (CROPGRAD_SIMD) is AVX2 or wider; `use_simd` switches it off for the
# tests, which compare both paths.
cdef bint _simd_ok = gs_simd_supported() and (
    strcmp(chosen_target(), b"avx2") == 0 or strcmp(chosen_target(), b"avx512") == 0)
cdef bint _simd = _simd_ok


def use_simd(bint on):
    """Run the SIMD clone (when `on` and this CPU has it) or the portable
    loops; returns the previous setting."""
    global _simd
    cdef bint before = _simd
    _simd = on and _simd_ok
    return before


cdef inline bint simd_bilinear_zeros(const Plan* p) noexcept nogil:
    """Whether the float32 bilinear, zeros-padded clone takes this problem
    (its offsets are 32-bit)."""
    return (_simd and not p.wide and p.mode == BILINEAR and p.padding == ZEROS
            and p.h * p.w < 2147483647)

cdef enum:
    # The image gradient works out the taps of CHUNK points at a time (a
    # multiple of every vector's lanes, so that no vector is split), in
    # tasks of TAPS_BLOCK points.
    CHUNK = 1 << 15
    TAPS_BLOCK = 256
    # The SIMD forward op's and grid gradient's tasks: spans of SPAN points.
    SPAN = 256


MODE_CODES = {"bilinear": BILINEAR, "nearest": NEAREST, "bicubic": BICUBIC}
PADDING_CODES = {"zeros": ZEROS, "border": BORDER, "reflection": REFLECTION}

# --------------------------------------------------------------------------
# Forward op, grid gradient, JVP: one task per row of output points.

cdef void forward_row(const Plan* p, const real* image, const real* grid,
                      real* out, Py_ssize_t task) noexcept nogil:
    cdef Axis ax = make_axis(<real>0, p.w, p.padding, p.aligned)
    cdef Axis ay = make_axis(<real>0, p.h, p.padding, p.aligned)
    cdef int64_t b = task // p.ho, q, c, plane = p.h * p.w, per = p.ho * p.wo
    cdef int64_t first = (task % p.ho) * p.wo
    cdef const real* g
    cdef const real* img
    cdef real x, y, x0, y0, acc
    cdef real wt[4]
    cdef real frac[4]
    cdef real cx[4]
    cdef real cy[4]
    cdef real rows[4]
    cdef Taps t
    cdef int j
    for q in range(first, first + p.wo):
        g = grid + 2 * (b * per + q)
        if p.mode == NEAREST:
            nearest_tap(p, &ax, &ay, g[0], g[1], &t)
        elif p.mode == BILINEAR:
            x = locate(&ax, g[0])
            y = locate(&ay, g[1])
            bilinear_taps(p, x, y, False, &t, wt, frac)
        else:
            x = unnormalize(&ax, g[0])
            y = unnormalize(&ay, g[1])
            x0 = floor(x)
            y0 = floor(y)
            cubic_coefficients(x - x0, cx)
            cubic_coefficients(y - y0, cy)
            cubic_taps(p, &ax, &ay, x0, y0, &t)
        for c in range(p.c):
            img = image + (b * p.c + c) * plane
            if p.mode == NEAREST:
                acc = read(img, t.off[0])
            elif p.mode == BILINEAR:
                acc = mul_add(read(img, t.off[3]), wt[3], mul_add(
                    read(img, t.off[2]), wt[2], mul_add(
                        read(img, t.off[1]), wt[1], read(img, t.off[0]) * wt[0])))
            else:
                for j in range(4):
                    # Only the first addition fused, as PyTorch's build does.
                    rows[j] = (
                        (mul_add(cx[0], read(img, t.off[j]),
                                 cx[1] * read(img, t.off[4 + j]))
                         + cx[2] * read(img, t.off[8 + j]))
                        + cx[3] * read(img, t.off[12 + j])
                    )
                acc = mul_add(cy[3], rows[3], mul_add(cy[2], rows[2], mul_add(
                    cy[1], rows[1], cy[0] * rows[0])))
            out[(b * p.c + c) * per + q] = acc


cdef void slopes_row(const Plan* p, const real* image, const real* grid,
                     const real* grads, const real* tangent, real* out,
                     Py_ssize_t task) noexcept nogil:
    """The grid gradient (`grads` given: out [N, Ho, Wo, 2]) or the JVP
    (`tangent` given: out [N, C, Ho, Wo]) of a row of points, from the same
    per-channel slopes of the sample in x and in y."""
    cdef Axis ax = make_axis(<real>0, p.w, p.padding, p.aligned)
    cdef Axis ay = make_axis(<real>0, p.h, p.padding, p.aligned)
    cdef int64_t b = task // p.ho, q, c, plane = p.h * p.w, per = p.ho * p.wo
    cdef int64_t first = (task % p.ho) * p.wo, at
    cdef const real* g
    cdef const real* img
    cdef real x, y, x0, y0, gx, gy, sx, sy, vg, v, gc = 0, ux = 0, uy = 0
    cdef real xm, ym
    cdef real wt[4]
    cdef real frac[4]
    cdef real cx[4]
    cdef real cy[4]
    cdef real dx[4]
    cdef real dy[4]
    cdef real nw, ne, sw, se
    cdef Taps t
    cdef int i, j
    for q in range(first, first + p.wo):
        at = b * per + q
        g = grid + 2 * at
        if p.mode == NEAREST:
            # Piecewise constant: no slope.
            if grads != NULL:
                out[2 * at] = 0
                out[2 * at + 1] = 0
            else:
                for c in range(p.c):
                    out[(b * p.c + c) * per + q] = 0
            continue
        if p.mode == BILINEAR:
            x = locate_grad(&ax, g[0], &xm)
            y = locate_grad(&ay, g[1], &ym)
            bilinear_taps(p, x, y, True, &t, wt, frac)
        else:
            x = unnormalize(&ax, g[0])
            y = unnormalize(&ay, g[1])
            x0 = floor(x)
            y0 = floor(y)
            cubic_coefficients(x - x0, cx)
            cubic_coefficients(y - y0, cy)
            cubic_slopes(x - x0, dx)
            cubic_slopes(y - y0, dy)
            cubic_taps(p, &ax, &ay, x0, y0, &t)
            # PyTorch leaves the padding out of bicubic's derivative.
            xm = <real>ax.scale
            ym = <real>ay.scale
        if tangent != NULL:
            ux = xm * tangent[2 * at]
            uy = ym * tangent[2 * at + 1]
        gx = 0
        gy = 0
        for c in range(p.c):
            img = image + (b * p.c + c) * plane
            if grads != NULL:
                gc = grads[(b * p.c + c) * per + q]
            if p.mode == BILINEAR:
                nw = read(img, t.off[0])
                ne = read(img, t.off[1])
                sw = read(img, t.off[2])
                se = read(img, t.off[3])
                # frac: n, s, w, e
                sx = mul_add(se - sw, frac[0], (ne - nw) * frac[1])
                sy = mul_add(se - ne, frac[2], (sw - nw) * frac[3])
                if grads != NULL:
                    gx = mul_add(sx, gc, gx)
                    gy = mul_add(sy, gc, gy)
                else:
                    out[(b * p.c + c) * per + q] = mul_add(sy, uy, sx * ux)
            elif grads != NULL:
                for i in range(4):
                    for j in range(4):
                        vg = read(img, t.off[4 * i + j]) * gc
                        gx = mul_add(-(vg * dx[i]), cy[j], gx)
                        gy = mul_add(-(vg * dy[j]), cx[i], gy)
            else:
                sx = 0
                sy = 0
                for i in range(4):
                    for j in range(4):
                        v = read(img, t.off[4 * i + j])
                        sx = mul_add(-(v * dx[i]), cy[j], sx)
                        sy = mul_add(-(v * dy[j]), cx[i], sy)
                out[(b * p.c + c) * per + q] = mul_add(sy, uy, sx * ux)
        if grads != NULL:
            out[2 * at] = gx * xm
            out[2 * at + 1] = gy * ym


# --------------------------------------------------------------------------
# Image gradient, one batch at a time: first each point's taps (offsets and
# the weights that do not depend on the channel), a task per row of points;
# then the scatter, a task per (channel, band of rows).

cdef void taps_block(const Plan* p, const real* grid, int64_t* offs, real* wts,
                     Py_ssize_t task) noexcept nogil:
    """The taps of block `task` of the chunk's points, stored at each
    point's place in the chunk."""
    cdef Axis ax = make_axis(<real>0, p.w, p.padding, p.aligned)
    cdef Axis ay = make_axis(<real>0, p.h, p.padding, p.aligned)
    cdef int64_t per = p.ho * p.wo, q, r
    cdef int64_t first = p.q_start + task * TAPS_BLOCK
    cdef int64_t last = min(first + TAPS_BLOCK, p.q_end)
    cdef const real* g
    cdef real x, y, x0, y0, xm, ym
    cdef real frac[4]
    cdef Taps t
    cdef int k
    if real is float:
        if simd_bilinear_zeros(p):
            gs_taps_bz8(grid, offs, wts, <int32_t>p.h, <int32_t>p.w, per,
                        p.batch, p.q_start, first, last, <float>ax.scale,
                        <float>ay.scale, p.aligned)
            return
    for q in range(first, last):
        r = q - p.q_start
        g = grid + 2 * (p.batch * per + q)
        if p.mode == NEAREST:
            nearest_tap(p, &ax, &ay, g[0], g[1], &t)
        elif p.mode == BILINEAR:
            x = locate_grad(&ax, g[0], &xm)
            y = locate_grad(&ay, g[1], &ym)
            bilinear_taps(p, x, y, True, &t, wts + 4 * r, frac)
        else:
            x = unnormalize(&ax, g[0])
            y = unnormalize(&ay, g[1])
            x0 = floor(x)
            y0 = floor(y)
            # cx then cy: tap (i, j) adds (g * cx_i) * cy_j.
            cubic_coefficients(x - x0, wts + 8 * r)
            cubic_coefficients(y - y0, wts + 8 * r + 4)
            cubic_taps(p, &ax, &ay, x0, y0, &t)
        for k in range(p.taps):
            offs[p.taps * r + k] = t.off[k]


cdef void scatter_band(const Plan* p, const real* grads, real* out,
                       const int64_t* offs, const real* wts,
                       Py_ssize_t task) noexcept nogil:
    """Channel ``task // bands`` of batch ``p.batch``, the rows of band
    ``task % bands``: the additions of the chunk's points to them in
    PyTorch's order (vectors of points; per vector, per tap, lane after
    lane; a chunk starts at a vector's start)."""
    cdef int64_t band = task % p.bands, c = task // p.bands
    cdef int64_t bc = p.batch * p.c + c
    cdef int64_t plane = p.h * p.w, per = p.ho * p.wo
    cdef int64_t lo = (p.h * band) // p.bands * p.w
    cdef int64_t hi = (p.h * (band + 1)) // p.bands * p.w
    cdef int64_t lanes = 4 if real is double else 8
    cdef int64_t start = 0, end, q, off, count = p.q_end - p.q_start
    cdef int k, taps = p.taps
    cdef const real* gr = grads + bc * per + p.q_start
    cdef real* dst = out + bc * plane
    cdef real gc
    cdef int mode = p.mode
    if mode == BILINEAR:
        # The common case on its own: the mode is not read again for every
        # addition (a store through `dst` may alias the plan, so the
        # compiler reloads what is read through a pointer).
        while start < count:
            end = min(start + lanes, count)
            for k in range(4):
                for q in range(start, end):
                    off = offs[4 * q + k]
                    if off < lo or off >= hi:
                        continue
                    dst[off] += wts[4 * q + k] * gr[q]
            start = end
        return
    while start < count:
        end = min(start + lanes, count)
        for k in range(taps):
            for q in range(start, end):
                off = offs[taps * q + k]
                if off < lo or off >= hi:
                    continue
                gc = gr[q]
                if mode == NEAREST:
                    dst[off] += gc
                else:
                    dst[off] += (gc * wts[8 * q + k // 4]) * wts[8 * q + 4 + k % 4]
        start = end


# --------------------------------------------------------------------------
# Tasks and entry points

cdef void _forward_task(void* ctx, Py_ssize_t task, int thread) noexcept nogil:
    cdef const Plan* p = <const Plan*>ctx
    if p.wide:
        forward_row(p, <const double*>p.image, <const double*>p.grid,
                    <double*>p.out, task)
    else:
        forward_row(p, <const float*>p.image, <const float*>p.grid,
                    <float*>p.out, task)


cdef void _slopes_task(void* ctx, Py_ssize_t task, int thread) noexcept nogil:
    cdef const Plan* p = <const Plan*>ctx
    if p.wide:
        slopes_row(p, <const double*>p.image, <const double*>p.grid,
                   <const double*>p.grads, <const double*>p.tangent,
                   <double*>p.out, task)
    else:
        slopes_row(p, <const float*>p.image, <const float*>p.grid,
                   <const float*>p.grads, <const float*>p.tangent,
                   <float*>p.out, task)


cdef void _taps_task(void* ctx, Py_ssize_t task, int thread) noexcept nogil:
    cdef const Plan* p = <const Plan*>ctx
    if p.wide:
        taps_block(p, <const double*>p.grid, p.offs, <double*>p.wts, task)
    else:
        taps_block(p, <const float*>p.grid, p.offs, <float*>p.wts, task)


cdef void _scatter_task(void* ctx, Py_ssize_t task, int thread) noexcept nogil:
    cdef const Plan* p = <const Plan*>ctx
    if p.wide:
        scatter_band(p, <const double*>p.grads, <double*>p.out, p.offs,
                     <const double*>p.wts, task)
    else:
        scatter_band(p, <const float*>p.grads, <float*>p.out, p.offs,
                     <const float*>p.wts, task)


cdef void _points8_task(void* ctx, Py_ssize_t task, int thread) noexcept nogil:
    """The SIMD forward op or grid gradient (`grads` given) of span
    ``task`` of SPAN points of a batch (spans may cross rows: rows of a few
    points would leave most of each vector empty)."""
    cdef const Plan* p = <const Plan*>ctx
    cdef Axis ax = make_axis(<float>0, p.w, p.padding, p.aligned)
    cdef Axis ay = make_axis(<float>0, p.h, p.padding, p.aligned)
    cdef int64_t per = p.ho * p.wo, spans = (per + SPAN - 1) // SPAN
    cdef int64_t b = task // spans, first = (task % spans) * SPAN
    cdef int64_t count = min(SPAN, per - first)
    if p.grads == NULL:
        gs_forward_bz8(<const float*>p.image, <const float*>p.grid,
                       <float*>p.out, p.c, <int32_t>p.h, <int32_t>p.w, per, b,
                       first, count, <float>ax.scale, <float>ay.scale,
                       p.aligned)
    else:
        gs_grad_grid_bz8(<const float*>p.image, <const float*>p.grid,
                         <const float*>p.grads, <float*>p.out, p.c,
                         <int32_t>p.h, <int32_t>p.w, per, b, first, count,
                         <float>ax.scale, <float>ay.scale, p.aligned)


cdef void _scatter8_task(void* ctx, Py_ssize_t task, int thread) noexcept nogil:
    """The SIMD image gradient's task: batch, group of channels (``taps``
    channels each) and band of rows ``task`` (bands innermost)."""
    cdef const Plan* p = <const Plan*>ctx
    cdef Axis ax = make_axis(<float>0, p.w, p.padding, p.aligned)
    cdef Axis ay = make_axis(<float>0, p.h, p.padding, p.aligned)
    cdef int64_t groups = (p.c + p.taps - 1) // p.taps
    cdef int64_t band = task % p.bands, group = (task // p.bands) % groups
    cdef int64_t b = task // (p.bands * groups)
    cdef int64_t c0 = group * p.taps, c1 = min(c0 + p.taps, p.c)
    cdef int64_t lo = (p.h * band) // p.bands * p.w
    cdef int64_t hi = (p.h * (band + 1)) // p.bands * p.w
    gs_scatter_bz8(<const float*>p.grads, <const float*>p.grid, <float*>p.out,
                   p.c, c0, c1, <int32_t>p.h, <int32_t>p.w, p.ho * p.wo, b, lo,
                   hi, <float>ax.scale, <float>ay.scale, p.aligned)


cdef inline const void* _data(a):
    return <const void*><uintptr_t>a.ctypes.data if a is not None else NULL


cdef Plan _plan(image_shape, grid, int mode, int padding, bint aligned, out):
    cdef Plan p
    p.n, p.c, p.h, p.w = [int(v) for v in image_shape]
    p.ho = grid.shape[1]
    p.wo = grid.shape[2]
    p.mode = mode
    p.padding = padding
    p.aligned = aligned
    p.bands = 1
    p.batch = 0
    p.q_start = p.q_end = 0
    p.taps = _taps(mode)
    p.offs = NULL
    p.wts = NULL
    p.wide = grid.dtype.itemsize == 8
    p.grid = _data(grid)
    p.out = <void*>_data(out)
    p.image = p.grads = p.tangent = NULL
    return p


cdef int _taps(int mode):
    return 1 if mode == NEAREST else (4 if mode == BILINEAR else 16)


def forward(image, grid, out, int mode, int padding, bint aligned,
            int num_threads, bint flush):
    """Sample `image` [N, C, H, W] at `grid` [N, Ho, Wo, 2] into `out`
    [N, C, Ho, Wo], all C-contiguous of one arithmetic type."""
    cdef Plan p = _plan(image.shape, grid, mode, padding, aligned, out)
    cdef int nthreads = resolve_threads(num_threads)
    cdef Py_ssize_t tasks = p.n * p.ho
    cdef Py_ssize_t work = tasks * p.wo * max(p.c, 1) * _taps(mode)
    p.image = _data(image)
    if p.n * p.c * p.ho * p.wo == 0:
        return
    if simd_bilinear_zeros(&p):
        with nogil:
            run_tasks(_points8_task, &p, p.n * ((p.ho * p.wo + SPAN - 1) // SPAN),
                      nthreads, work, flush, SCHEDULE_DYNAMIC)
        return
    with nogil:
        run_tasks(_forward_task, &p, tasks, nthreads, work, flush,
                  SCHEDULE_DYNAMIC)


def slopes(image, grid, grads, tangent, out, int mode, int padding,
           bint aligned, int num_threads, bint flush):
    """The grid gradient (`grads` [N, C, Ho, Wo], `tangent` None; out
    [N, Ho, Wo, 2]) or the grid JVP (`tangent` [N, Ho, Wo, 2], `grads`
    None; out [N, C, Ho, Wo])."""
    cdef Plan p = _plan(image.shape, grid, mode, padding, aligned, out)
    cdef int nthreads = resolve_threads(num_threads)
    cdef Py_ssize_t tasks = p.n * p.ho
    cdef Py_ssize_t work = tasks * p.wo * max(p.c, 1) * _taps(mode)
    p.image = _data(image)
    p.grads = _data(grads)
    p.tangent = _data(tangent)
    if p.n * p.ho * p.wo == 0 or (tangent is not None and p.c == 0):
        return
    if grads is not None and simd_bilinear_zeros(&p):
        with nogil:
            run_tasks(_points8_task, &p, p.n * ((p.ho * p.wo + SPAN - 1) // SPAN),
                      nthreads, work, flush, SCHEDULE_DYNAMIC)
        return
    with nogil:
        run_tasks(_slopes_task, &p, tasks, nthreads, work, flush,
                  SCHEDULE_DYNAMIC)


def grad_image(grads, grid, out, int mode, int padding, bint aligned,
               int num_threads, bint flush):
    """Add the image gradient of `grads` [N, C, Ho, Wo] into `out` [N, C,
    H, W] (zeroed by the caller)."""
    cdef Plan p = _plan(out.shape, grid, mode, padding, aligned, out)
    cdef int nthreads = resolve_threads(num_threads)
    cdef Py_ssize_t per = p.ho * p.wo, b, start, size
    p.grads = _data(grads)
    if p.n * p.c * p.h * p.w * per == 0:
        return
    if simd_bilinear_zeros(&p):
        # One run: a task per batch and band of rows, every channel of it
        # (the field `taps` holds the channels of a task), bands only where
        # the batches are fewer than the threads: each task works out all
        # its batch's corners itself, once for all the channels.
        p.taps = p.c
        if p.n < nthreads:
            p.bands = min((nthreads + p.n - 1) // p.n, p.h)
        size = p.n * ((p.c + p.taps - 1) // p.taps) * p.bands
        with nogil:
            run_tasks(_scatter8_task, &p, size, nthreads,
                      p.n * p.c * per * 4, flush, SCHEDULE_DYNAMIC)
        return
    # Fewer channels than threads: cut each plane into bands of rows, as
    # many as make a task per thread (a band of at least one row).
    if p.c < nthreads:
        p.bands = min((nthreads + p.c - 1) // p.c, p.h)
    # The taps of one chunk of points at a time: a bounded table (4 MiB of
    # offsets for bicubic), the chunks in order.
    size = min(per, CHUNK)
    offs = np.empty(size * p.taps, np.int64)
    wts = np.empty(size * 8, grid.dtype)
    p.offs = <int64_t*><uintptr_t>offs.ctypes.data
    p.wts = <void*><uintptr_t>wts.ctypes.data
    for b in range(p.n):
        p.batch = b
        for start in range(0, per, CHUNK):
            p.q_start = start
            p.q_end = min(start + CHUNK, per)
            size = p.q_end - p.q_start
            with nogil:
                run_tasks(_taps_task, &p, (size + TAPS_BLOCK - 1) // TAPS_BLOCK,
                          nthreads, size * 16, flush, SCHEDULE_DYNAMIC)
                run_tasks(_scatter_task, &p, p.c * p.bands, nthreads,
                          p.c * size * p.taps, flush, SCHEDULE_DYNAMIC)
