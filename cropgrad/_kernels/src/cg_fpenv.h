/* Flush-to-zero / denormals-are-zero control for the calling thread.
 *
 * TensorFlow's CPU kernels run with subnormal inputs read as zero and
 * subnormal results written as zero.  cg_fpenv_enter(1) switches the
 * calling thread to that arithmetic, cg_fpenv_enter(0) to IEEE arithmetic
 * (flush-to-zero and denormals-are-zero off), and each keeps the previous
 * control word in thread-local storage; cg_fpenv_leave puts it back.
 * Calls must not nest within a thread.  On an architecture without a known
 * control register the calls do nothing and CG_FPENV_SUPPORTED is 0.
 */
#ifndef CG_FPENV_H
#define CG_FPENV_H

#include <stdint.h>

#if defined(__x86_64__) || defined(_M_X64) || defined(__i386__) || defined(_M_IX86)
#include <xmmintrin.h>
#define CG_FPENV_SUPPORTED 1
/* MXCSR bit 15 is flush-to-zero, bit 6 denormals-are-zero. */
#define CG_FLUSH_BITS 0x8040u
static inline uint64_t cg_fpenv_get(void) { return (uint64_t)_mm_getcsr(); }
static inline void cg_fpenv_set(uint64_t word) { _mm_setcsr((unsigned int)word); }

#elif defined(__aarch64__)
#define CG_FPENV_SUPPORTED 1
/* FPCR.FZ (bit 24) flushes subnormal inputs and outputs of single and
 * double precision operations. */
#define CG_FLUSH_BITS (1u << 24)
static inline uint64_t cg_fpenv_get(void) {
    uint64_t word;
    __asm__ __volatile__("mrs %0, fpcr" : "=r"(word));
    return word;
}
static inline void cg_fpenv_set(uint64_t word) {
    __asm__ __volatile__("msr fpcr, %0" : : "r"(word));
}

#else
#define CG_FPENV_SUPPORTED 0
#define CG_FLUSH_BITS 0u
static inline uint64_t cg_fpenv_get(void) { return 0; }
static inline void cg_fpenv_set(uint64_t word) { (void)word; }
#endif

/* The word saved by the last enter of this thread. */
#if defined(_MSC_VER)
static __declspec(thread) uint64_t cg_fpenv_saved;
#else
static _Thread_local uint64_t cg_fpenv_saved;
#endif

/* Both ways: the calling thread may come with flush-to-zero already set
 * (XLA's and TensorFlow's threads do) while OpenMP's workers do not; every
 * thread of a call must compute in the mode the call asked for, or the
 * bits would depend on which thread summed which element. */
static inline void cg_fpenv_enter(int flush) {
    if (CG_FPENV_SUPPORTED) {
        uint64_t word = cg_fpenv_get();
        uint64_t wanted = flush ? (word | CG_FLUSH_BITS) : (word & ~(uint64_t)CG_FLUSH_BITS);
        cg_fpenv_saved = word;
        if (wanted != word) cg_fpenv_set(wanted);
    }
}

static inline void cg_fpenv_leave(int flush) {
    (void)flush;
    if (CG_FPENV_SUPPORTED && cg_fpenv_get() != cg_fpenv_saved) {
        cg_fpenv_set(cg_fpenv_saved);
    }
}

#endif
