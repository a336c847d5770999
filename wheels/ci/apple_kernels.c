/* Every clone of the inner loops, for wheels/ci/check_apple_arm64.sh.
 *
 * The clones are static functions reached through the pointers that
 * cg_simd_select sets; calls through those pointers keep every clone in
 * the output, under its own name. */
#include "cg_simd.h"

int apple_select(const char* target) { return cg_simd_select(target); }

void apple_row_f(float* top, float* bottom, float* spare, ptrdiff_t stride,
                 const float* g, const ptrdiff_t* col_lo, const ptrdiff_t* col_hi,
                 const float* w_left, const float* w_right, ptrdiff_t cw,
                 float w_top, float w_bottom, int same_row, ptrdiff_t n) {
    cg_row_f(top, bottom, spare, stride, g, col_lo, col_hi, w_left, w_right, cw,
             w_top, w_bottom, same_row, n, 0, g, NULL, 0);
}

void apple_row_d(double* top, double* bottom, double* spare, ptrdiff_t stride,
                 const float* g, const ptrdiff_t* col_lo, const ptrdiff_t* col_hi,
                 const float* w_left, const float* w_right, ptrdiff_t cw,
                 float w_top, float w_bottom, int same_row, ptrdiff_t n) {
    cg_row_d(top, bottom, spare, stride, g, col_lo, col_hi, w_left, w_right, cw,
             w_top, w_bottom, same_row, n, 0, g, NULL, 0);
}

void apple_terms(const float* tl, const float* tr, const float* bl, const float* br,
                 const float* g, float x_lerp, float one_minus_x, float y_lerp,
                 float one_minus_y, float f_y1, float f_x1, float f_y2, float f_x2,
                 ptrdiff_t n, float* t) {
    cg_terms(tl, tr, bl, br, g, x_lerp, one_minus_x, y_lerp, one_minus_y, f_y1,
             f_x1, f_y2, f_x2, n, t);
}

void apple_sum_terms(float* sums, float* const* terms, const ptrdiff_t* n, int count) {
    cg_sum_terms(sums, terms, n, count);
}

void apple_gather(float* dst, const float* src, ptrdiff_t src_lane, ptrdiff_t count,
                  ptrdiff_t n) {
    cg_planes_gather(dst, src, src_lane, count, n);
}

void apple_scatter_f(float* dst, ptrdiff_t dst_lane, const float* src,
                     ptrdiff_t count, ptrdiff_t n) {
    cg_planes_scatter_f(dst, dst_lane, src, count, n);
}

void apple_lerp_row(float* out, ptrdiff_t out_stride, const float* top,
                    const float* bottom, ptrdiff_t pixel_stride, const ptrdiff_t* left,
                    const ptrdiff_t* right, const float* x_lerp, ptrdiff_t count,
                    float y_lerp, float extrapolation, ptrdiff_t n) {
    cg_lerp_row(out, out_stride, top, bottom, pixel_stride, left, right, x_lerp, count,
                y_lerp, extrapolation, n);
}
