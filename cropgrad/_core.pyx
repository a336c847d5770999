# cython: language_level=3
"""The compiled core the Python layer calls: NumPy arrays to the C-level API.

Two kinds of function, one per op each:

- the gate (``check_*``): the C-level API's metadata checks
  (cropgrad/_capi, shapes in the caller's layout) on Python ints,
  raising the exception the NumPy API documents with the C-level API's
  message.  The NumPy API runs it before it allocates the output;
  cropgrad.jax at trace time and cropgrad.torch whenever the shapes are
  concrete, so that every entry point refuses the same calls with the same
  words.
- the bridge (``crop_and_resize`` ..., each named after its op and
  generated from the op model, _bridges.pxi): takes the buffers of arrays that
  the Python layer has converted (C-contiguous, of the dtype their code
  names) and whose metadata the gate has passed, releases the GIL for the
  op's call (cropgrad/_capi: the checks that need the data, then
  the kernel; the metadata is not checked again), and turns its error
  record into the exception.  Only ever called after the gate, with the
  shapes and codes the gate saw.
"""

from cpython.buffer cimport (
    PyBUF_C_CONTIGUOUS,
    PyBUF_WRITABLE,
    PyBuffer_Release,
    PyObject_GetBuffer,
)
from libc.stdint cimport int64_t

from cropgrad._kernels.cdefs cimport (
    CG_CFLAGS,
    CG_COMPILER,
    CG_FPENV_SUPPORTED,
    CG_HUGE_PAGES_FROM,
    cg_advise_huge_pages,
)
from cropgrad._runtime.openmp cimport CROPGRAD_HAVE_OPENMP

from cropgrad._capi cimport crop_and_resize as cr
from cropgrad._capi cimport roi_align as ra
from cropgrad.capi cimport (
    CG_ERR_INDEX,
    CG_ERR_MEMORY,
    CG_ERR_TYPE,
    CG_ERR_UNSUPPORTED,
    CG_ERR_VALUE,
    CG_OK,
    cg_error,
)

# The exception each status code of the C-level API becomes.
_EXCEPTIONS = {
    CG_ERR_VALUE: ValueError,
    CG_ERR_INDEX: IndexError,
    CG_ERR_TYPE: TypeError,
    CG_ERR_MEMORY: MemoryError,
    CG_ERR_UNSUPPORTED: NotImplementedError,
}


cdef int _raise(cg_error* err) except -1:
    raise _EXCEPTIONS[err.status](err.message.decode("utf-8", "replace"))


cdef inline void _shape4(int64_t* dst, shape) except *:
    """Four Python ints (a shape in the caller's layout) as int64."""
    if len(shape) != 4:
        raise ValueError(f"a shape of 4 values is needed, got {tuple(shape)!r}")
    dst[0] = shape[0]
    dst[1] = shape[1]
    dst[2] = shape[2]
    dst[3] = shape[3]


# --------------------------------------------------------------------------
# The gate

cdef _check_crop_and_resize(image_shape, int image_dtype, int64_t num_boxes,
                            int64_t crop_height, int64_t crop_width, int method,
                            int layout, int num_threads, bint jvp):
    cdef cg_error err
    cdef int64_t s[4]
    _shape4(s, image_shape)
    if cr.check_forward(s, image_dtype, num_boxes, crop_height, crop_width, method,
                        layout, num_threads, jvp, &err) != CG_OK:
        _raise(&err)


def check_crop_and_resize(image_shape, int image_dtype, int64_t num_boxes,
                          int64_t crop_height, int64_t crop_width, int method,
                          int layout, int num_threads):
    """Raise what `cg_crop_and_resize` would for these shapes and codes."""
    _check_crop_and_resize(image_shape, image_dtype, num_boxes, crop_height,
                           crop_width, method, layout, num_threads, False)


def check_crop_and_resize_jvp_boxes(image_shape, int image_dtype,
                                    int64_t num_boxes, int64_t crop_height,
                                    int64_t crop_width, int method, int layout,
                                    int num_threads):
    """Raise what `cg_crop_and_resize_jvp_boxes` would for these shapes (the
    forward op's checks, bilinear only)."""
    _check_crop_and_resize(image_shape, image_dtype, num_boxes, crop_height,
                           crop_width, method, layout, num_threads, True)


def check_crop_and_resize_grad_image(grads_shape, image_size, int output_dtype,
                                     int method, int layout, int num_threads,
                                     str size_name="image_size"):
    """Raise what `cg_crop_and_resize_grad_image` would for these shapes
    (`size_name`: the caller's name of `image_size`, for the messages)."""
    cdef cg_error err
    cdef int64_t g[4]
    cdef int64_t s[4]
    cdef bytes name = size_name.encode("utf-8")
    _shape4(g, grads_shape)
    _shape4(s, image_size)
    if cr.check_grad_image(g, s, output_dtype, method, layout, num_threads, name,
                           &err) != CG_OK:
        _raise(&err)


def check_crop_and_resize_grad_boxes(grads_shape, image_shape, int image_dtype,
                                     int method, int layout, int num_threads):
    """Raise what `cg_crop_and_resize_grad_boxes` would for these shapes."""
    cdef cg_error err
    cdef int64_t g[4]
    cdef int64_t s[4]
    _shape4(g, grads_shape)
    _shape4(s, image_shape)
    if cr.check_grad_boxes(g, s, image_dtype, method, layout, num_threads,
                           &err) != CG_OK:
        _raise(&err)


def check_roi_align(image_shape, int image_dtype, int boxes_dtype,
                    int64_t num_boxes, int64_t output_height, int64_t output_width,
                    double spatial_scale, int sampling_ratio, int layout,
                    int output_dtype, int num_threads):
    """Raise what `cg_roi_align` (and its boxes JVP, whose metadata is the
    forward op's) would for these shapes, codes and options."""
    cdef cg_error err
    cdef int64_t s[4]
    _shape4(s, image_shape)
    if ra.check_roi_align(s, image_dtype, boxes_dtype, num_boxes, output_height,
                          output_width, spatial_scale, sampling_ratio, layout,
                          output_dtype, num_threads, &err) != CG_OK:
        _raise(&err)


def check_roi_align_grad_image(grads_shape, int grads_dtype, int boxes_dtype,
                               image_size, double spatial_scale,
                               int sampling_ratio, int layout, int output_dtype,
                               int num_threads, str size_name="image_size"):
    """Raise what `cg_roi_align_grad_image` would (`size_name`: the
    caller's name of `image_size`)."""
    cdef cg_error err
    cdef int64_t g[4]
    cdef int64_t s[4]
    cdef bytes name = size_name.encode("utf-8")
    _shape4(g, grads_shape)
    _shape4(s, image_size)
    if ra.check_roi_align_grad_image(g, grads_dtype, boxes_dtype, s, spatial_scale,
                                     sampling_ratio, layout, output_dtype,
                                     num_threads, name, &err) != CG_OK:
        _raise(&err)


def check_roi_align_grad_boxes(grads_shape, int grads_dtype, image_shape,
                               int image_dtype, int boxes_dtype,
                               double spatial_scale, int sampling_ratio,
                               int layout, int num_threads):
    """Raise what `cg_roi_align_grad_boxes` would."""
    cdef cg_error err
    cdef int64_t g[4]
    cdef int64_t s[4]
    _shape4(g, grads_shape)
    _shape4(s, image_shape)
    if ra.check_roi_align_grad_boxes(g, grads_dtype, s, image_dtype, boxes_dtype,
                                     spatial_scale, sampling_ratio, layout,
                                     num_threads, &err) != CG_OK:
        _raise(&err)


# --------------------------------------------------------------------------
# The bridge: each op's (cropgrad._core.<op>) is generated from the op
# model, in _bridges.pxi, included below.

cdef int _hold(tuple arrays, Py_buffer* views) except -1:
    """Hold the C-contiguous buffers of `arrays` in `views`, the last (the
    output) writable; if one cannot be held, release those that were."""
    cdef int count = 0
    cdef int last = len(arrays) - 1
    cdef int flags
    try:
        for obj in arrays:
            flags = PyBUF_C_CONTIGUOUS | (PyBUF_WRITABLE if count == last else 0)
            PyObject_GetBuffer(obj, &views[count], flags)
            count += 1
    except BaseException:
        _release(views, count)
        raise
    return count


cdef void _release(Py_buffer* views, int count) noexcept:
    while count > 0:
        count -= 1
        PyBuffer_Release(&views[count])


include "_bridges.pxi"


def build_info():
    """Facts fixed when the extension was compiled (see show_config)."""
    return {
        "openmp": bool(CROPGRAD_HAVE_OPENMP),
        "compiler": CG_COMPILER.decode("utf-8", "replace"),
        "cflags": CG_CFLAGS.decode("utf-8", "replace"),
        "flush_denormals_supported": bool(CG_FPENV_SUPPORTED),
    }


# The size of a result from which it is advised huge pages (NumPy's).
HUGE_PAGES_FROM = CG_HUGE_PAGES_FROM


def advise_huge_pages(size_t address, size_t nbytes):
    """Ask for transparent huge pages under memory not yet written (a hint).

    `address` and `nbytes` are those of a block the caller owns (a tensor's
    ``data_ptr()``; an address, not a buffer, because taking a tensor's
    buffer would make PyTorch mark its storage as not resizable).  The
    advice changes no byte of the block and madvise refuses addresses that
    are not mapped, so no argument can do harm.  Returns 0 when the advice
    was given, 1 when there was nothing to advise (cg_pages.h), -1 when the
    kernel refused it; never raises for that.
    """
    return cg_advise_huge_pages(<void*>address, nbytes)
