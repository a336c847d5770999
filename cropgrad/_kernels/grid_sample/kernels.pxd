# cython: language_level=3
#
# grid_sample's kernels as the C-level API calls them (cropgrad/_capi/
# grid_sample.pyx): without the GIL, on a Plan (points.pxd) whose sizes,
# options, arithmetic type and pointers the caller has filled (`plan`
# does the rest), the arrays C-contiguous, NCHW or (`nhwc`) NHWC, checked by
# the gate.

from libc.stdint cimport int64_t

from cropgrad._kernels.grid_sample.points cimport Plan


cdef void plan(Plan* p, int64_t n, int64_t c, int64_t h, int64_t w, int64_t ho,
               int64_t wo, int mode, int padding, bint aligned, bint wide,
               bint nhwc) noexcept nogil
# The sampled output [N, C, Ho, Wo] of `p.image` at `p.grid`.
cdef void forward_run(Plan* p, int threads, bint flush) noexcept nogil
# The grid gradient (`p.grads` set, `p.tangent` NULL; out [N, Ho, Wo, 2]) or
# the grid JVP (`p.tangent` set, `p.grads` NULL; out [N, C, Ho, Wo]).
cdef void slopes_run(Plan* p, int threads, bint flush) noexcept nogil
# The image gradient of `p.grads` into `p.out` [N, C, H, W], which it zeroes
# first; returns 0, or 1 with the bytes of scratch it could not allocate in
# `failed`.
cdef int grad_image_run(Plan* p, int threads, bint flush,
                        size_t* failed) noexcept nogil
