# The one place that talks to OpenMP.  Compiled without OpenMP, the same
# names exist as serial stand-ins, so the kernels need no #ifdefs (macros,
# so that a module that reads only CROPGRAD_HAVE_OPENMP has no unused
# function to be warned of).

cdef extern from *:
    """
    #ifdef _OPENMP
    #include <omp.h>
    #define CROPGRAD_HAVE_OPENMP 1
    #else
    #define CROPGRAD_HAVE_OPENMP 0
    #define omp_get_max_threads() 1
    #define omp_get_num_procs() 1
    #endif
    """
    const bint CROPGRAD_HAVE_OPENMP
    int omp_get_max_threads() noexcept nogil
    int omp_get_num_procs() noexcept nogil
