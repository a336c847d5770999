# cython: language_level=3
# The NCHW tasks of the image gradient (see _grad_image_nchw.pyx).

cdef int use_simd(const char* target) noexcept nogil
cdef size_t use_tile_bytes(size_t nbytes) noexcept nogil
cdef Py_ssize_t tile_channels(Py_ssize_t width, Py_ssize_t depth,
                              size_t acc_size) noexcept nogil
cdef Py_ssize_t tile_rows(Py_ssize_t width, Py_ssize_t channels,
                          size_t acc_size) noexcept nogil
cdef Py_ssize_t stage_rows(Py_ssize_t crop_w, Py_ssize_t channels) noexcept nogil
cdef size_t tile_scratch(Py_ssize_t width, Py_ssize_t crop_w, Py_ssize_t channels,
                         Py_ssize_t rows, Py_ssize_t staged,
                         size_t acc_size) noexcept nogil
cdef void planes_task(void* ctx, Py_ssize_t t, int thread) noexcept nogil
cdef void tiles_task(void* ctx, Py_ssize_t t, int thread) noexcept nogil
