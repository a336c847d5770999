# cython: language_level=3
# The NCHW plan and tasks of the image gradient (see grad_image_nchw.pyx).

from .grad_image_plan cimport GradImagePlan


cdef size_t use_tile_bytes(size_t nbytes) noexcept nogil
cdef bint plan_nchw(GradImagePlan* p, size_t acc_size, Py_ssize_t* channels,
                    Py_ssize_t* groups, size_t* scratch) noexcept nogil
cdef void planes_task(void* ctx, Py_ssize_t t, int thread) noexcept nogil
cdef void tiles_task(void* ctx, Py_ssize_t t, int thread) noexcept nogil
