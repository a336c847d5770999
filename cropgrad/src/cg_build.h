/* Build facts and small compiler helpers shared by every module.
 *
 * CG_COMPILER and CG_CFLAGS are defined by setup.py on the command line;
 * the fallbacks keep a hand-made build compiling.
 */
#ifndef CG_BUILD_H
#define CG_BUILD_H

#ifndef CG_COMPILER
#define CG_COMPILER "unknown"
#endif
#ifndef CG_CFLAGS
#define CG_CFLAGS "unknown"
#endif

/* A hint to bring a cache line in (read, keep in all levels); a no-op
 * where the compiler has no such builtin.  Never faults. */
#if defined(__GNUC__) || defined(__clang__)
#define cg_prefetch(p) __builtin_prefetch((p), 0, 3)
#else
#define cg_prefetch(p) ((void)(p))
#endif

#endif
