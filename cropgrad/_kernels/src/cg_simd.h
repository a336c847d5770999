/* Which clones of the inner loops run: the corner updates (cg_scatter.h)
 * and rows of them, the rows of pixels of 1 to 4 channels (cg_shallow.h),
 * the plane transposes (cg_planes.h), the boxes
 * gradient's terms (cg_terms.h), the forward op's samples (cg_lerp.h),
 * RoIAlign's channel loops (cg_roi.h) and the rounding of a float32
 * accumulator into a float16 output (cg_half.h).
 *
 * Chosen once, when cropgrad._runtime.simd is imported, and set in every module
 * that includes these headers (each holds its own function pointers): the
 * widest instruction set this CPU runs, or the one CROPGRAD_SIMD names.  x86-64: "sse2" (the
 * baseline), "avx2", "avx512"; AArch64: "neon" (every AArch64 CPU has it)
 * and "baseline" (the portable code, scalar there); elsewhere "baseline".  The corner updates
 * and the float16 rounding give the same bits on every target; the
 * transposes only move floats.  The AVX2 and AVX-512F targets round float16
 * with F16C (every CPU with AVX2 has it; checked all the same).
 * AVX-512F pairs its corner updates with the AVX2 transposes: 16 x 16
 * blocks do not fit the registers better. */
#ifndef CG_SIMD_H
#define CG_SIMD_H

#include <string.h>

#include "cg_half.h"
#include "cg_lerp.h"
#include "cg_planes.h"
#include "cg_roi.h"
#include "cg_scatter.h"
#include "cg_shallow.h"
#include "cg_terms.h"

static const char* cg_simd_target = CG_SIMD_BASELINE;

/* Whether this CPU runs `target` ("avx2", "avx512", "neon", or the
 * baseline). */
static inline int cg_simd_supported(const char* target) {
    if (strcmp(target, CG_SIMD_BASELINE) == 0) return 1;
#if CG_SIMD_NEON
    if (strcmp(target, "neon") == 0) return 1;
#endif
#if CG_SIMD_DISPATCH
    __builtin_cpu_init();
    if (strcmp(target, "avx2") == 0) return __builtin_cpu_supports("avx2");
    if (strcmp(target, "avx512") == 0)
        return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx2");
#endif
    return 0;
}

/* Point this module's clones at the suffix's: corner updates, crop rows,
 * terms, forward samples and RoIAlign's loops (CORE), plane transposes and
 * shallow rows (PLANES; AVX2 serves AVX-512F too). */
#define CG_SIMD_USE(CORE, PLANES, NAME)                                       \
    do {                                                                      \
        cg_row_f = cg_row_f_##CORE;                                           \
        cg_row_d = cg_row_d_##CORE;                                           \
        cg_terms = cg_terms_##CORE;                                           \
        cg_lerp_row = cg_lerp_row_##CORE;                                     \
        cg_planes_gather = cg_planes_gather_##PLANES;                         \
        cg_planes_scatter_f = cg_planes_scatter_f_##PLANES;                   \
        cg_shallow_rows_f = cg_shallow_rows_f_##PLANES;                       \
        cg_shallow_rows_f_planes = cg_shallow_rows_f_planes_##PLANES;         \
        cg_round_half = cg_round_half_base;                                   \
        CG_ROI_USE(CORE);                                                     \
        cg_simd_target = NAME;                                                \
    } while (0)

/* What cg_simd_select(target) uses: `target`, or the widest instruction
 * set the CPU has when it is NULL, "" or "auto"; NULL for a target this CPU
 * cannot run. */
static inline const char* cg_simd_choice(const char* target) {
    if (target != NULL && target[0] != 0 && strcmp(target, "auto") != 0)
        return cg_simd_supported(target) ? target : NULL;
#if CG_SIMD_DISPATCH
    if (cg_simd_supported("avx512")) return "avx512";
    if (cg_simd_supported("avx2")) return "avx2";
#endif
#if CG_SIMD_NEON
    return "neon";
#else
    return CG_SIMD_BASELINE;
#endif
}

/* Use `target`, or the widest the CPU has when it is NULL, "" or "auto".
 * Returns 0, or -1 (nothing changed) for a target this CPU cannot run. */
static inline int cg_simd_select(const char* target) {
    const char* name = cg_simd_choice(target);
    if (name == NULL) return -1;
#if CG_SIMD_DISPATCH
    if (strcmp(name, "avx512") == 0 || strcmp(name, "avx2") == 0) {
        if (strcmp(name, "avx512") == 0)
            CG_SIMD_USE(avx512, avx2, "avx512");
        else
            CG_SIMD_USE(avx2, avx2, "avx2");
        cg_round_half_fn f16c = cg_round_half_f16c_clone();
        if (f16c != NULL) cg_round_half = f16c;
        return 0;
    }
#endif
#if CG_SIMD_NEON
    if (strcmp(name, "neon") == 0) {
        CG_SIMD_USE(neon, neon, "neon");
        return 0;
    }
#endif
    CG_SIMD_USE(base, base, CG_SIMD_BASELINE);
    return 0;
}

#endif
