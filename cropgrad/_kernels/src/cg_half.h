/* IEEE binary16 <-> binary32 and bfloat16 <-> binary32 conversions in
 * integer arithmetic.
 *
 * Cython memoryviews have no float16 or bfloat16 type, so such images reach
 * the kernels as their uint16 bit patterns.  Integer arithmetic keeps the
 * conversion exact and independent of the flush-to-zero mode and of the
 * CPU's conversion instructions.
 */
#ifndef CG_HALF_H
#define CG_HALF_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "cg_build.h"

static inline float cg_half_to_float(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exponent = (h >> 10) & 0x1fu;
    uint32_t mantissa = h & 0x3ffu;
    uint32_t bits;
    float value;
    if (exponent == 0x1fu) {            /* inf and NaN keep their payload */
        bits = sign | 0x7f800000u | (mantissa << 13);
    } else if (exponent != 0) {         /* normal: rebias 15 -> 127 */
        bits = sign | ((exponent + 112u) << 23) | (mantissa << 13);
    } else if (mantissa == 0) {         /* signed zero */
        bits = sign;
    } else {                            /* subnormal half: a normal float */
        uint32_t shift = 0;
        while (!(mantissa & 0x400u)) {
            mantissa <<= 1;
            shift++;
        }
        bits = sign | ((113u - shift) << 23) | ((mantissa & 0x3ffu) << 13);
    }
    memcpy(&value, &bits, sizeof value);
    return value;
}

/* binary32 -> binary16, rounding to nearest, ties to even (as NumPy's
 * astype and the CPU's conversion instructions do), in integer arithmetic
 * so that the result does not depend on the flush-to-zero mode. */
static inline uint16_t cg_float_to_half(float value) {
    uint32_t bits, magnitude, sign, rounded;
    memcpy(&bits, &value, sizeof bits);
    sign = (bits >> 16) & 0x8000u;
    magnitude = bits & 0x7fffffffu;
    /* The common case first, in one unsigned comparison: a normal half
     * (magnitudes from 2**-14 up to, not including, 65520). */
    if (magnitude - 0x38800000u < 0x477ff000u - 0x38800000u) {
        magnitude -= 0x38000000u;           /* rebias, then round */
        magnitude += 0xfffu + ((magnitude >> 13) & 1u);
        return (uint16_t)(sign | (magnitude >> 13));
    }
    if (magnitude >= 0x7f800000u) {         /* inf, or NaN made quiet */
        return (uint16_t)(sign | 0x7c00u
                          | (magnitude > 0x7f800000u ? 0x200u | ((magnitude >> 13) & 0x3ffu) : 0u));
    }
    if (magnitude >= 0x477ff000u) {         /* 65520 and up round to inf */
        return (uint16_t)(sign | 0x7c00u);
    }
    if (magnitude < 0x33000000u) {          /* below 2**-25: zero */
        return (uint16_t)sign;
    }
    {                                       /* a subnormal half, in 2**-24 units */
        uint32_t exponent = magnitude >> 23;
        uint32_t mantissa = (magnitude & 0x7fffffu) | 0x800000u;
        uint32_t shift = 126u - exponent;
        uint32_t rest = mantissa & ((1u << shift) - 1u);
        uint32_t halfway = 1u << (shift - 1u);
        rounded = mantissa >> shift;
        if (rest > halfway || (rest == halfway && (rounded & 1u))) {
            rounded += 1u;
        }
        return (uint16_t)(sign | rounded);
    }
}

/* dst[i] = cg_float_to_half(src[i]) for i < n: a float32 accumulator
 * rounded into a float16 output.  The portable loop, and on x86-64 a clone
 * for the AVX2 targets with F16C's conversion (VCVTPS2PH, eight at a time,
 * rounding to nearest even by its immediate, not by the MXCSR), about
 * ten times as fast.  The clone gives the portable bits for every one of
 * the 2**32 float32 inputs, with and without flush-to-zero and
 * denormals-are-zero (tests/test_sampling.py checks them all): a float32
 * subnormal rounds to a signed zero either way, the conversion never
 * flushes a float16 subnormal, and a NaN keeps its sign and the upper ten
 * bits of its payload with the quiet bit set, as the portable code makes
 * it. */
static inline void cg_round_half_base(uint16_t* dst, const float* src, ptrdiff_t n) {
    ptrdiff_t i;
    for (i = 0; i < n; i++) dst[i] = cg_float_to_half(src[i]);
}

#if CG_SIMD_DISPATCH
#include <cpuid.h>
#include <immintrin.h>

__attribute__((target("avx2,f16c"))) static void cg_round_half_avx2(
    uint16_t* dst, const float* src, ptrdiff_t n) {
    ptrdiff_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i*)(dst + i),
                         _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
    for (; i < n; i++) dst[i] = cg_float_to_half(src[i]);
}

/* Whether this CPU has F16C and the OS keeps the AVX registers (the
 * clone's loads are 256 bits wide).  CPUID leaf 1: ECX bit 29 (F16C),
 * bit 28 (AVX), bit 27 (OSXSAVE); then XCR0's SSE and AVX state bits. */
static inline int cg_cpu_has_f16c(void) {
    unsigned int a, b, c, d, xcr0_lo, xcr0_hi;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return 0;
    if ((c & (7u << 27)) != (7u << 27)) return 0;
    __asm__("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
    (void)xcr0_hi;
    return (xcr0_lo & 6u) == 6u;
}
#endif

typedef void (*cg_round_half_fn)(uint16_t*, const float*, ptrdiff_t);

/* The clone in use (set by cg_simd_select, cg_simd.h). */
static cg_round_half_fn cg_round_half = cg_round_half_base;

/* The F16C clone where this build has one and this CPU runs it, else NULL
 * (for the tests, which compare it with the portable loop). */
static inline cg_round_half_fn cg_round_half_f16c_clone(void) {
#if CG_SIMD_DISPATCH
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2") && cg_cpu_has_f16c()) return cg_round_half_avx2;
#endif
    return NULL;
}

/* bfloat16 is the upper half of a binary32: widening is exact. */
static inline float cg_bfloat16_to_float(uint16_t h) {
    uint32_t bits = (uint32_t)h << 16;
    float value;
    memcpy(&value, &bits, sizeof value);
    return value;
}

/* binary32 -> bfloat16, rounding to nearest, ties to even, in integer
 * arithmetic (independent of the flush-to-zero mode).  Finite values
 * round as IEEE says, subnormals included (bfloat16 has binary32's
 * exponent range); magnitudes from the largest bfloat16 plus half an ulp
 * up round to infinity, which the carry into the exponent gives by itself.
 * Infinities stay infinities.  A NaN stays a NaN of the same sign with the
 * upper 7 bits of its payload and the quiet bit set (as the CPUs'
 * conversion instructions make it); rounding its bits could carry it into
 * an infinity. */
static inline uint16_t cg_float_to_bfloat16(float value) {
    uint32_t bits;
    memcpy(&bits, &value, sizeof bits);
    if ((bits & 0x7fffffffu) > 0x7f800000u) {
        return (uint16_t)((bits >> 16) | 0x0040u);
    }
    bits += 0x7fffu + ((bits >> 16) & 1u);
    return (uint16_t)(bits >> 16);
}

#endif
