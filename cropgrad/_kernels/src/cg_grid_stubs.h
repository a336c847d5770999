/* Grid sampling's SIMD clone on CPUs and compilers without it: every
 * function of cg_grid_simd.h, cg_grid_cubic.h and cg_grid_nhwc.h as a
 * stub that is never called (gs_simd_supported() is 0).  Included by
 * cg_grid_simd.h only. */
#ifndef CG_GRID_STUBS_H
#define CG_GRID_STUBS_H

#define GS_STUB_POINTS(name)                                                \
    static void name(const float* image, const float* grid, float* out,     \
                     int64_t c, int32_t h, int32_t w, int64_t per,          \
                     int64_t b, int64_t first, int64_t count,               \
                     const gs_axes* axes) {}
#define GS_STUB_SLOPES(name)                                                \
    static void name(const float* image, const float* grid,                 \
                     const float* grads, float* out, int64_t c, int32_t h,  \
                     int32_t w, int64_t per, int64_t b, int64_t first,      \
                     int64_t count, const gs_axes* axes) {}
#define GS_STUB_SCATTER(name)                                               \
    static void name(const float* grads, const float* grid, float* out,     \
                     int64_t c, int64_t c0, int64_t c1, int32_t h,          \
                     int32_t w, int64_t per, int64_t b, int64_t lo,         \
                     int64_t hi, const gs_axes* axes) {}
static int gs_simd_supported(void) { return 0; }
GS_STUB_POINTS(gs_forward_bz8)
GS_STUB_POINTS(gs_forward_cubic_bz8)
GS_STUB_POINTS(gs_forward_nhwc8)
GS_STUB_SLOPES(gs_grad_grid_bz8)
GS_STUB_SLOPES(gs_grad_grid_cubic_bz8)
GS_STUB_SLOPES(gs_grad_grid_nhwc8)
GS_STUB_SCATTER(gs_scatter_bz8)
GS_STUB_SCATTER(gs_scatter_cubic_bz8)
static void gs_scatter_nhwc8(const float* grads, const float* grid, float* out,
                             int64_t c, int32_t h, int32_t w, int64_t per,
                             int64_t b, int64_t lo, int64_t hi,
                             const gs_axes* axes) {}

#endif /* CG_GRID_STUBS_H */
