/* The four corner updates of one bilinear sample into deep pixels.
 *
 * Each element gets top-left, top-right, bottom-left, bottom-right in that
 * order, whichever of the pointers coincide; float32 products, widened to
 * the accumulator only when added.  One loop body, four functions: float
 * and double accumulators, each with plain pointers (any pixels may
 * coincide) and with restrict-qualified ones for four distinct pixels (the
 * usual case: the sample is on no pixel row or column), which the compiler
 * vectorises without first checking at run time whether the arrays overlap
 * (that check costs a good part of the work for 64 channels).
 */
#ifndef CG_SCATTER_H
#define CG_SCATTER_H

#include <stddef.h>

#if defined(__GNUC__) || defined(__clang__)
#define CG_RESTRICT __restrict__
#elif defined(_MSC_VER)
#define CG_RESTRICT __restrict
#else
#define CG_RESTRICT
#endif

#define CG_DEFINE_QUAD(NAME, ACC, RESTRICT)                                   \
    static inline void NAME(ACC* RESTRICT top_left, ACC* RESTRICT top_right,  \
                            ACC* RESTRICT bottom_left,                        \
                            ACC* RESTRICT bottom_right,                       \
                            const float* RESTRICT g, float w_top,             \
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

CG_DEFINE_QUAD(cg_quad_f, float, )
CG_DEFINE_QUAD(cg_quad_d, double, )
CG_DEFINE_QUAD(cg_quad_distinct_f, float, CG_RESTRICT)
CG_DEFINE_QUAD(cg_quad_distinct_d, double, CG_RESTRICT)

#endif
