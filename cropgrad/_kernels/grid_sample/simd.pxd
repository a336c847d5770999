# cython: language_level=3
#
# The SIMD clone of grid sampling's kernels (float32, AVX2 + FMA; hand-written
# C in cropgrad/_kernels/src): eight points a vector, the portable loops'
# operations lane for lane.  On other CPUs and compilers the functions are
# stubs that are never called (gs_simd_supported() is 0).

from libc.stdint cimport int32_t, int64_t


cdef extern from "cg_grid_simd.h":
    ctypedef struct gs_axes:
        int nearest
        int cubic
        float scale[2]
        float top[2]
        float twice[2]
        int empty[2]
        float low
        int aligned
        int padding
    int gs_simd_supported() noexcept nogil
    void gs_forward_bz8(const float* image, const float* grid, float* out,
                        int64_t c, int32_t h, int32_t w, int64_t per,
                        int64_t b, int64_t first, int64_t count,
                        const gs_axes* axes) noexcept nogil
    void gs_grad_grid_bz8(const float* image, const float* grid,
                          const float* grads, float* out, int64_t c,
                          int32_t h, int32_t w, int64_t per, int64_t b,
                          int64_t first, int64_t count,
                          const gs_axes* axes) noexcept nogil
    void gs_scatter_bz8(const float* grads, const float* grid, float* out,
                        int64_t c, int64_t c0, int64_t c1, int32_t h,
                        int32_t w, int64_t per, int64_t b, int64_t lo,
                        int64_t hi, const gs_axes* axes) noexcept nogil

cdef extern from "cg_grid_nhwc.h":
    void gs_forward_nhwc8(const float* image, const float* grid, float* out,
                          int64_t c, int32_t h, int32_t w, int64_t per,
                          int64_t b, int64_t first, int64_t count,
                          const gs_axes* axes) noexcept nogil
    void gs_grad_grid_nhwc8(const float* image, const float* grid,
                            const float* grads, float* out, int64_t c,
                            int32_t h, int32_t w, int64_t per, int64_t b,
                            int64_t first, int64_t count,
                            const gs_axes* axes) noexcept nogil
    void gs_scatter_nhwc8(const float* grads, const float* grid, float* out,
                          int64_t c, int32_t h, int32_t w, int64_t per,
                          int64_t b, int64_t lo, int64_t hi,
                          const gs_axes* axes) noexcept nogil

cdef extern from "cg_grid_cubic.h":
    void gs_forward_cubic_bz8(const float* image, const float* grid,
                              float* out, int64_t c, int32_t h, int32_t w,
                              int64_t per, int64_t b, int64_t first,
                              int64_t count, const gs_axes* axes) noexcept nogil
    void gs_grad_grid_cubic_bz8(const float* image, const float* grid,
                                const float* grads, float* out, int64_t c,
                                int32_t h, int32_t w, int64_t per, int64_t b,
                                int64_t first, int64_t count,
                                const gs_axes* axes) noexcept nogil
    void gs_scatter_cubic_bz8(const float* grads, const float* grid,
                              float* out, int64_t c, int64_t c0, int64_t c1,
                              int32_t h, int32_t w, int64_t per, int64_t b,
                              int64_t lo, int64_t hi,
                              const gs_axes* axes) noexcept nogil

# The forward ops' and the grid gradients' signatures (a task picks one).
ctypedef void (*points_fn)(const float* image, const float* grid, float* out,
                           int64_t c, int32_t h, int32_t w, int64_t per,
                           int64_t b, int64_t first, int64_t count,
                           const gs_axes* axes) noexcept nogil
ctypedef void (*slopes_fn)(const float* image, const float* grid,
                           const float* grads, float* out, int64_t c,
                           int32_t h, int32_t w, int64_t per, int64_t b,
                           int64_t first, int64_t count,
                           const gs_axes* axes) noexcept nogil
