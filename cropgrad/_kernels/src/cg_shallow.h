/* The image gradient of pixels with 1 to 4 channels, a crop row at a time
 * (NHWC pixels, or the same pixel of 1 to 4 NCHW planes).
 *
 * When a crop enlarges its box, successive samples of a crop row land on
 * the same pixels.  Updating them in memory makes every update wait for the
 * previous store to the same address, so the walk below keeps the pixels of
 * columns c and c + 1 of the crop row's two output rows in registers and
 * writes them back when it moves on.  That only changes where the partial
 * sums live: every element still gets its updates in the serial order.
 *
 * The channels of a pixel sit in the lanes of one 4-lane vector.  Each lane
 * does exactly the scalar arithmetic (float32 products, widened to the
 * accumulator only when added; no contraction: the extension is built with
 * -ffp-contract=off), so the vector width changes no bit.  Compilers
 * without GCC's vector extensions get the same code on 4-element structs.
 */
#ifndef CG_SHALLOW_H
#define CG_SHALLOW_H

#include <stddef.h>

#include "cg_build.h"

/* Every function here is static inline: the ABI of passing a 32-byte
 * vector, which GCC notes without AVX, never applies.  (GCC emits the note
 * at the end of the translation unit, so it stays off from here on; it
 * only ever concerns vector arguments.) */
#if defined(__clang__)
#if __has_warning("-Wpsabi")
#pragma clang diagnostic ignored "-Wpsabi"
#endif
#elif defined(__GNUC__)
#pragma GCC diagnostic ignored "-Wpsabi"
#endif

/* GCC and Clang: vector extensions.  Other compilers (MSVC; no wheel is
 * built with one) get 4-element structs with the same lane arithmetic. */
#if defined(__GNUC__) || defined(__clang__)
typedef float cg_f4 __attribute__((vector_size(16)));
typedef double cg_d4 __attribute__((vector_size(32)));
#define CG_SPLAT(x) {(x), (x), (x), (x)}
static inline cg_f4 cg_f4_splat(float x) {
    cg_f4 r = {x, x, x, x};
    return r;
}
static inline cg_f4 cg_f4_mul(cg_f4 a, cg_f4 b) { return a * b; }
static inline cg_f4 cg_f4_add(cg_f4 a, cg_f4 b) { return a + b; }
static inline cg_d4 cg_d4_add(cg_d4 a, cg_d4 b) { return a + b; }
static inline cg_d4 cg_f4_widen(cg_f4 a) {
    cg_d4 r = {a[0], a[1], a[2], a[3]};
    return r;
}
#define CG_LANE(v, i) ((v)[i])
#else
typedef struct { float v[4]; } cg_f4;
typedef struct { double v[4]; } cg_d4;
#define CG_SPLAT(x) {{(x), (x), (x), (x)}}
static inline cg_f4 cg_f4_splat(float x) {
    cg_f4 r = {{x, x, x, x}};
    return r;
}
static inline cg_f4 cg_f4_mul(cg_f4 a, cg_f4 b) {
    int i;
    for (i = 0; i < 4; i++) a.v[i] *= b.v[i];
    return a;
}
static inline cg_f4 cg_f4_add(cg_f4 a, cg_f4 b) {
    int i;
    for (i = 0; i < 4; i++) a.v[i] += b.v[i];
    return a;
}
static inline cg_d4 cg_d4_add(cg_d4 a, cg_d4 b) {
    int i;
    for (i = 0; i < 4; i++) a.v[i] += b.v[i];
    return a;
}
static inline cg_d4 cg_f4_widen(cg_f4 a) {
    cg_d4 r;
    int i;
    for (i = 0; i < 4; i++) r.v[i] = a.v[i];
    return r;
}
#define CG_LANE(x, i) ((x).v[i])
#endif

/* Float accumulators add the float32 product as it is. */
static inline cg_f4 cg_f4_acc(cg_f4 acc, cg_f4 term) { return cg_f4_add(acc, term); }
static inline cg_d4 cg_d4_acc(cg_d4 acc, cg_f4 term) { return cg_d4_add(acc, cg_f4_widen(term)); }

/* A function every call reaches through one copy of its machine code,
 * and which a module may leave unused without a warning. */
#if defined(_MSC_VER)
#define CG_NOINLINE __declspec(noinline)
#else
#define CG_NOINLINE __attribute__((noinline, unused))
#endif

/* cg_shallow_rows_f_base (float accumulator) and cg_shallow_rows_d_base
 * (double), and their NCHW forms cg_shallow_rows_f_planes_base and
 * cg_shallow_rows_d_planes_base: one body, cg_shallow_rows.inc, included
 * once per accumulator type. */
#define CG_ACC float
#define CG_VEC cg_f4
#define CG_ADD cg_f4_acc
#define CG_NAME(suffix) cg_shallow_rows_f##suffix
#include "cg_shallow_rows.inc"

#define CG_ACC double
#define CG_VEC cg_d4
#define CG_ADD cg_d4_acc
#define CG_NAME(suffix) cg_shallow_rows_d##suffix
#include "cg_shallow_rows.inc"

/* The float walks have clones: on x86-64, the AVX2 walks of
 * cg_shallow_pairs.h, which hold both of a row's columns in one vector
 * (NHWC and NCHW run the same walk, so the two layouts keep the same bits
 * where two NaNs meet); NEON runs the portable walks.  cg_simd_select
 * (cg_simd.h) chooses them with the other clones.  Every call goes
 * through the pointers, so every banding runs one copy of the machine code
 * (DEVELOPING.md, rule 4). */
#if CG_SIMD_DISPATCH
#include "cg_shallow_pairs.h"
#endif
#define cg_shallow_rows_f_neon cg_shallow_rows_f_base
#define cg_shallow_rows_f_planes_neon cg_shallow_rows_f_planes_base

typedef void (*cg_shallow_rows_f_fn)(float*, ptrdiff_t, float*, ptrdiff_t,
                                     const float*, const ptrdiff_t*,
                                     const ptrdiff_t*, const float*,
                                     const float*, ptrdiff_t, ptrdiff_t, float,
                                     float, int, ptrdiff_t);
typedef void (*cg_shallow_rows_f_planes_fn)(float*, ptrdiff_t, ptrdiff_t,
                                            float*, ptrdiff_t, ptrdiff_t,
                                            const float*, ptrdiff_t,
                                            const ptrdiff_t*, const ptrdiff_t*,
                                            const float*, const float*,
                                            ptrdiff_t, ptrdiff_t, float, float,
                                            int, ptrdiff_t);
static cg_shallow_rows_f_fn cg_shallow_rows_f = cg_shallow_rows_f_base;
static cg_shallow_rows_f_planes_fn cg_shallow_rows_f_planes =
    cg_shallow_rows_f_planes_base;

/* A double accumulator: the portable walks. */
#define cg_shallow_rows_d cg_shallow_rows_d_base
#define cg_shallow_rows_d_planes cg_shallow_rows_d_planes_base

#endif
