# The one place that talks to OpenMP.  Compiled without OpenMP, the same
# names exist as serial stand-ins, so the kernels need no #ifdefs.

cdef extern from *:
    """
    #ifdef _OPENMP
    #include <omp.h>
    #define CROPGRAD_HAVE_OPENMP 1
    #else
    #define CROPGRAD_HAVE_OPENMP 0
    static int omp_get_max_threads(void) { return 1; }
    static int omp_get_thread_num(void) { return 0; }
    static int omp_get_num_threads(void) { return 1; }
    static int omp_get_num_procs(void) { return 1; }
    typedef enum { omp_pause_soft = 1, omp_pause_hard = 2 } omp_pause_resource_t;
    static int omp_pause_resource_all(omp_pause_resource_t k) { (void)k; return 0; }
    #endif
    """
    const bint CROPGRAD_HAVE_OPENMP
    int omp_get_max_threads() noexcept nogil
    int omp_get_thread_num() noexcept nogil
    int omp_get_num_threads() noexcept nogil
    int omp_get_num_procs() noexcept nogil
    ctypedef enum omp_pause_resource_t:
        omp_pause_soft
        omp_pause_hard
    int omp_pause_resource_all(omp_pause_resource_t kind) noexcept nogil
