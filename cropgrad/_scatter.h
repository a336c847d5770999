/* The four corner updates of one bilinear sample into deep pixels, when its
 * four pixels are distinct (the usual case: the sample is on no pixel row
 * or column).
 *
 * The same loop as _scatter_quad in _core.pyx, but with restrict-qualified
 * pointers: the compiler then vectorises it without first checking at run
 * time whether the five arrays overlap, which costs as much as a good part
 * of the work for 64 channels.  Each element gets top-left, top-right,
 * bottom-left, bottom-right in that order; float32 products, widened to the
 * accumulator only when added.
 */
#ifndef CROPGRAD_SCATTER_H
#define CROPGRAD_SCATTER_H

#include <stddef.h>

#if defined(__GNUC__) || defined(__clang__)
#define CG_RESTRICT __restrict__
#elif defined(_MSC_VER)
#define CG_RESTRICT __restrict
#else
#define CG_RESTRICT
#endif

#define CG_DEFINE_QUAD_DISTINCT(NAME, ACC)                                    \
    static inline void NAME(ACC* CG_RESTRICT top_left,                        \
                            ACC* CG_RESTRICT top_right,                       \
                            ACC* CG_RESTRICT bottom_left,                     \
                            ACC* CG_RESTRICT bottom_right,                    \
                            const float* CG_RESTRICT g, float w_top,          \
                            float w_bottom, float w_left, float w_right,      \
                            ptrdiff_t n) {                                    \
        ptrdiff_t d;                                                          \
        float v;                                                              \
        for (d = 0; d < n; d++) {                                             \
            v = w_top * g[d];                                                 \
            top_left[d] += (ACC)(w_left * v);                                 \
            top_right[d] += (ACC)(w_right * v);                               \
            v = w_bottom * g[d];                                              \
            bottom_left[d] += (ACC)(w_left * v);                              \
            bottom_right[d] += (ACC)(w_right * v);                            \
        }                                                                     \
    }

CG_DEFINE_QUAD_DISTINCT(cg_quad_distinct_f, float)
CG_DEFINE_QUAD_DISTINCT(cg_quad_distinct_d, double)

#endif
