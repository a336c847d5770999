/* Flush-to-zero / denormals-are-zero control for the calling thread.
 *
 * TensorFlow's CPU kernels run with subnormal inputs read as zero and
 * subnormal results written as zero.  cropgrad_fpenv_enter(1) switches the
 * calling thread to that arithmetic and keeps the previous control word in
 * thread-local storage; cropgrad_fpenv_leave(1) puts that word back.  With
 * flush == 0 both change nothing.  Calls must not nest within a thread.  On an architecture without a known control register the
 * calls do nothing and CROPGRAD_FPENV_SUPPORTED is 0.
 */
#ifndef CROPGRAD_FPENV_H
#define CROPGRAD_FPENV_H

#include <stdint.h>

#if defined(__x86_64__) || defined(_M_X64) || defined(__i386__) || defined(_M_IX86)
#include <xmmintrin.h>
#define CROPGRAD_FPENV_SUPPORTED 1
/* MXCSR bit 15 is flush-to-zero, bit 6 denormals-are-zero. */
#define CROPGRAD_FLUSH_BITS 0x8040u
static inline uint64_t cropgrad_fpenv_get(void) { return (uint64_t)_mm_getcsr(); }
static inline void cropgrad_fpenv_set(uint64_t word) { _mm_setcsr((unsigned int)word); }

#elif defined(__aarch64__)
#define CROPGRAD_FPENV_SUPPORTED 1
/* FPCR.FZ (bit 24) flushes subnormal inputs and outputs of single and
 * double precision operations. */
#define CROPGRAD_FLUSH_BITS (1u << 24)
static inline uint64_t cropgrad_fpenv_get(void) {
    uint64_t word;
    __asm__ __volatile__("mrs %0, fpcr" : "=r"(word));
    return word;
}
static inline void cropgrad_fpenv_set(uint64_t word) {
    __asm__ __volatile__("msr fpcr, %0" : : "r"(word));
}

#else
#define CROPGRAD_FPENV_SUPPORTED 0
#define CROPGRAD_FLUSH_BITS 0u
static inline uint64_t cropgrad_fpenv_get(void) { return 0; }
static inline void cropgrad_fpenv_set(uint64_t word) { (void)word; }
#endif

/* The word saved by the last enter of this thread. */
#if defined(_MSC_VER)
static __declspec(thread) uint64_t cropgrad_fpenv_saved;
#else
static _Thread_local uint64_t cropgrad_fpenv_saved;
#endif

static inline void cropgrad_fpenv_enter(int flush) {
    if (flush && CROPGRAD_FPENV_SUPPORTED) {
        cropgrad_fpenv_saved = cropgrad_fpenv_get();
        cropgrad_fpenv_set(cropgrad_fpenv_saved | CROPGRAD_FLUSH_BITS);
    }
}

static inline void cropgrad_fpenv_leave(int flush) {
    if (flush && CROPGRAD_FPENV_SUPPORTED) {
        cropgrad_fpenv_set(cropgrad_fpenv_saved);
    }
}

#endif
