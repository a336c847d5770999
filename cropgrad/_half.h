/* Exact IEEE binary16 -> binary32 conversion in integer arithmetic.
 *
 * Cython memoryviews have no float16 type, so float16 images reach the
 * kernels as their uint16 bit patterns.  Integer arithmetic keeps the
 * conversion exact and independent of the flush-to-zero mode and of the
 * CPU's conversion instructions.
 */
#ifndef CROPGRAD_HALF_H
#define CROPGRAD_HALF_H

#include <stdint.h>
#include <string.h>

static inline float cropgrad_half_to_float(uint16_t h) {
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

#endif
