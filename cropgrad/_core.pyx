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
- the bridge (``crop_and_resize`` ...): takes the buffers of arrays that
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

from cropgrad._kernels.cdefs cimport CG_CFLAGS, CG_COMPILER, CG_FPENV_SUPPORTED
from cropgrad._runtime.openmp cimport CROPGRAD_HAVE_OPENMP

cdef extern from "cg_pages.h":
    int cg_advise_huge_pages(void* start, size_t nbytes) noexcept nogil

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

def check_forward(image_shape, int image_dtype, int64_t num_boxes,
                  int64_t crop_height, int64_t crop_width, int method, int layout,
                  int num_threads):
    """Raise what `cg_crop_and_resize` would for these shapes and codes."""
    cdef cg_error err
    cdef int64_t s[4]
    _shape4(s, image_shape)
    if cr.check_forward(s, image_dtype, num_boxes, crop_height, crop_width, method,
                        layout, num_threads, False, &err) != CG_OK:
        _raise(&err)


def check_jvp_boxes(image_shape, int image_dtype, int64_t num_boxes,
                    int64_t crop_height, int64_t crop_width, int method,
                    int layout, int num_threads):
    """Raise what `cg_crop_and_resize_jvp_boxes` would for these shapes."""
    cdef cg_error err
    cdef int64_t s[4]
    _shape4(s, image_shape)
    if cr.check_forward(s, image_dtype, num_boxes, crop_height, crop_width, method,
                        layout, num_threads, True, &err) != CG_OK:
        _raise(&err)


def check_grad_image(grads_shape, image_size, int output_dtype, int method,
                     int layout, int num_threads, str size_name="image_size"):
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


def check_grad_boxes(grads_shape, image_shape, int image_dtype, int method,
                     int layout, int num_threads):
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
    """Raise what `cg_roi_align` (and `cg_roi_align_jvp_boxes`) would for
    these shapes, codes and options."""
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
# The bridge

cdef enum Op:
    FORWARD
    GRAD_IMAGE
    GRAD_BOXES
    JVP_BOXES
    ROI_ALIGN
    ROI_GRAD_IMAGE
    ROI_GRAD_BOXES
    ROI_JVP_BOXES


ctypedef struct Call:
    # One call of the C-level API: the op, its array pointers (inputs in the
    # order of the op's arguments, the output last) and its other arguments.
    Op op
    void* data[5]
    int64_t grads_shape[4]
    int64_t image_shape[4]
    int64_t num_boxes
    int64_t crop_height
    int64_t crop_width
    int image_dtype
    int box_ind_dtype
    int output_dtype
    int method
    int layout
    float extrapolation_value
    int num_threads
    int flush
    # RoIAlign's: the arithmetic type of boxes (and grads, tangents), the
    # bins and the sampling.
    int boxes_dtype
    int64_t out_h
    int64_t out_w
    double spatial_scale
    int sampling_ratio
    int aligned


cdef int _dispatch(Call* c, cg_error* err) noexcept nogil:
    if c.op == FORWARD:
        return cr.run_forward(
            "crop_and_resize", False,
            c.data[0], c.image_dtype, c.image_shape, <const float*>c.data[1],
            c.data[2], c.box_ind_dtype, c.num_boxes, c.crop_height, c.crop_width,
            c.method, c.extrapolation_value, c.layout, <float*>c.data[3],
            c.num_threads, c.flush, err)
    if c.op == GRAD_IMAGE:
        return cr.run_grad_image(
            "crop_and_resize_grad_image", False,
            <const float*>c.data[0], c.grads_shape, <const float*>c.data[1],
            c.data[2], c.box_ind_dtype, c.image_shape, c.data[3], c.output_dtype,
            c.method, c.layout, c.num_threads, c.flush, err)
    if c.op == GRAD_BOXES:
        return cr.run_grad_coords(
            "crop_and_resize_grad_boxes", False,
            <const float*>c.data[0], c.grads_shape, c.data[1], c.image_dtype,
            c.image_shape, <const float*>c.data[2], c.data[3], c.box_ind_dtype,
            <float*>c.data[4], c.method, c.layout, c.num_threads, c.flush, err)
    if c.op == JVP_BOXES:
        return cr.run_jvp_coords(
            "crop_and_resize_jvp_boxes", False,
            c.data[0], c.image_dtype, c.image_shape, <const float*>c.data[1],
            <const float*>c.data[2], c.data[3], c.box_ind_dtype, c.num_boxes,
            c.crop_height, c.crop_width, c.method, c.layout, <float*>c.data[4],
            c.num_threads, c.flush, err)
    if c.op == ROI_ALIGN:
        return ra.run_forward(
            "roi_align", False,
            c.data[0], c.image_dtype, c.image_shape, c.data[1], c.boxes_dtype,
            c.data[2], c.box_ind_dtype, c.num_boxes, c.out_h, c.out_w,
            c.spatial_scale, c.sampling_ratio, c.aligned, c.layout, c.data[3],
            c.output_dtype, c.num_threads, c.flush, err)
    if c.op == ROI_GRAD_IMAGE:
        return ra.run_grad_image(
            "roi_align_grad_image", False,
            c.data[0], c.boxes_dtype, c.grads_shape, c.data[1], c.boxes_dtype,
            c.data[2], c.box_ind_dtype, c.image_shape, c.spatial_scale,
            c.sampling_ratio, c.aligned, c.layout, c.data[3], c.output_dtype,
            c.num_threads, c.flush, err)
    if c.op == ROI_GRAD_BOXES:
        return ra.run_grad_coords(
            "roi_align_grad_boxes", False,
            c.data[0], c.boxes_dtype, c.grads_shape, c.data[1], c.image_dtype,
            c.image_shape, c.data[2], c.boxes_dtype, c.data[3], c.box_ind_dtype,
            c.spatial_scale, c.sampling_ratio, c.aligned, c.layout, c.data[4],
            c.num_threads, c.flush, err)
    return ra.run_jvp_coords(
        "roi_align_jvp_boxes", False,
        c.data[0], c.image_dtype, c.image_shape, c.data[1], c.data[2],
        c.boxes_dtype, c.data[3], c.box_ind_dtype, c.num_boxes, c.out_h, c.out_w,
        c.spatial_scale, c.sampling_ratio, c.aligned, c.layout, c.data[4],
        c.output_dtype, c.num_threads, c.flush, err)


cdef _run(Call* c, tuple arrays):
    """Hold the buffers of `arrays` (the output last, written), run `c`
    without the GIL, release the buffers, raise the error record's exception.
    """
    cdef Py_buffer views[5]
    cdef int count = 0
    cdef int last = len(arrays) - 1
    cdef int flags
    cdef int status = CG_OK
    cdef cg_error err
    try:
        for obj in arrays:
            flags = PyBUF_C_CONTIGUOUS | (PyBUF_WRITABLE if count == last else 0)
            PyObject_GetBuffer(obj, &views[count], flags)
            c.data[count] = views[count].buf
            count += 1
        with nogil:
            status = _dispatch(c, &err)
    finally:
        while count > 0:
            count -= 1
            PyBuffer_Release(&views[count])
    if status != CG_OK:
        _raise(&err)


cdef inline void _common(Call* c, Op op, int box_ind_dtype, int method, int layout,
                         int num_threads, bint flush) noexcept:
    c.op = op
    c.box_ind_dtype = box_ind_dtype
    c.method = method
    c.layout = layout
    c.num_threads = num_threads
    c.flush = flush


cdef inline void _crops(Call* c, image, int image_dtype, int64_t num_boxes,
                        int64_t crop_height, int64_t crop_width) except *:
    """The arguments the forward op and the boxes JVP share."""
    _shape4(c.image_shape, image.shape)
    c.image_dtype = image_dtype
    c.num_boxes = num_boxes
    c.crop_height = crop_height
    c.crop_width = crop_width


def crop_and_resize(image, int image_dtype, boxes, box_ind, int box_ind_dtype,
                    int64_t crop_height, int64_t crop_width, int method,
                    float extrapolation_value, int layout, out, int num_threads,
                    bint flush):
    """`cg_crop_and_resize` on NumPy arrays; raises on error."""
    cdef Call c
    _common(&c, FORWARD, box_ind_dtype, method, layout, num_threads, flush)
    _crops(&c, image, image_dtype, boxes.shape[0], crop_height, crop_width)
    c.extrapolation_value = extrapolation_value
    _run(&c, (image, boxes, box_ind, out))


def grad_image(grads, boxes, box_ind, int box_ind_dtype, image_size, out,
               int output_dtype, int method, int layout, int num_threads,
               bint flush):
    """`cg_crop_and_resize_grad_image` on NumPy arrays; raises on error."""
    cdef Call c
    _common(&c, GRAD_IMAGE, box_ind_dtype, method, layout, num_threads, flush)
    _shape4(c.grads_shape, grads.shape)
    _shape4(c.image_shape, image_size)
    c.output_dtype = output_dtype
    _run(&c, (grads, boxes, box_ind, out))


def grad_boxes(grads, image, int image_dtype, boxes, box_ind, int box_ind_dtype,
               out, int method, int layout, int num_threads, bint flush):
    """`cg_crop_and_resize_grad_boxes` on NumPy arrays; raises on error."""
    cdef Call c
    _common(&c, GRAD_BOXES, box_ind_dtype, method, layout, num_threads, flush)
    _shape4(c.grads_shape, grads.shape)
    _shape4(c.image_shape, image.shape)
    c.image_dtype = image_dtype
    _run(&c, (grads, image, boxes, box_ind, out))


def jvp_boxes(image, int image_dtype, boxes, boxes_tangent, box_ind,
              int box_ind_dtype, int64_t crop_height, int64_t crop_width,
              int method, int layout, out, int num_threads, bint flush):
    """`cg_crop_and_resize_jvp_boxes` on NumPy arrays; raises on error."""
    cdef Call c
    _common(&c, JVP_BOXES, box_ind_dtype, method, layout, num_threads, flush)
    _crops(&c, image, image_dtype, boxes.shape[0], crop_height, crop_width)
    _run(&c, (image, boxes, boxes_tangent, box_ind, out))


cdef inline void _roi(Call* c, int boxes_dtype, double spatial_scale,
                      int sampling_ratio, bint aligned) noexcept:
    """The arguments RoIAlign's ops share."""
    c.boxes_dtype = boxes_dtype
    c.spatial_scale = spatial_scale
    c.sampling_ratio = sampling_ratio
    c.aligned = aligned


def roi_align(image, int image_dtype, boxes, int boxes_dtype, box_ind,
              int box_ind_dtype, int64_t output_height, int64_t output_width,
              double spatial_scale, int sampling_ratio, bint aligned, int layout,
              out, int output_dtype, int num_threads, bint flush):
    """`cg_roi_align` on NumPy arrays; raises on error."""
    cdef Call c
    _common(&c, ROI_ALIGN, box_ind_dtype, 0, layout, num_threads, flush)
    _roi(&c, boxes_dtype, spatial_scale, sampling_ratio, aligned)
    _shape4(c.image_shape, image.shape)
    c.image_dtype = image_dtype
    c.num_boxes = boxes.shape[0]
    c.out_h = output_height
    c.out_w = output_width
    c.output_dtype = output_dtype
    _run(&c, (image, boxes, box_ind, out))


def roi_align_grad_image(grads, boxes, int boxes_dtype, box_ind,
                         int box_ind_dtype, image_size, double spatial_scale,
                         int sampling_ratio, bint aligned, int layout, out,
                         int output_dtype, int num_threads, bint flush):
    """`cg_roi_align_grad_image` on NumPy arrays (grads and boxes in the
    arithmetic type `boxes_dtype`); raises on error."""
    cdef Call c
    _common(&c, ROI_GRAD_IMAGE, box_ind_dtype, 0, layout, num_threads, flush)
    _roi(&c, boxes_dtype, spatial_scale, sampling_ratio, aligned)
    _shape4(c.grads_shape, grads.shape)
    _shape4(c.image_shape, image_size)
    c.output_dtype = output_dtype
    _run(&c, (grads, boxes, box_ind, out))


def roi_align_grad_boxes(grads, image, int image_dtype, boxes, int boxes_dtype,
                         box_ind, int box_ind_dtype, double spatial_scale,
                         int sampling_ratio, bint aligned, int layout, out,
                         int num_threads, bint flush):
    """`cg_roi_align_grad_boxes` on NumPy arrays (grads, boxes and the
    result in the arithmetic type `boxes_dtype`); raises on error."""
    cdef Call c
    _common(&c, ROI_GRAD_BOXES, box_ind_dtype, 0, layout, num_threads, flush)
    _roi(&c, boxes_dtype, spatial_scale, sampling_ratio, aligned)
    _shape4(c.grads_shape, grads.shape)
    _shape4(c.image_shape, image.shape)
    c.image_dtype = image_dtype
    _run(&c, (grads, image, boxes, box_ind, out))


def roi_align_jvp_boxes(image, int image_dtype, boxes, boxes_tangent,
                        int boxes_dtype, box_ind, int box_ind_dtype,
                        int64_t output_height, int64_t output_width,
                        double spatial_scale, int sampling_ratio, bint aligned,
                        int layout, out, int output_dtype, int num_threads,
                        bint flush):
    """`cg_roi_align_jvp_boxes` on NumPy arrays; raises on error."""
    cdef Call c
    _common(&c, ROI_JVP_BOXES, box_ind_dtype, 0, layout, num_threads, flush)
    _roi(&c, boxes_dtype, spatial_scale, sampling_ratio, aligned)
    _shape4(c.image_shape, image.shape)
    c.image_dtype = image_dtype
    c.num_boxes = boxes.shape[0]
    c.out_h = output_height
    c.out_w = output_width
    c.output_dtype = output_dtype
    _run(&c, (image, boxes, boxes_tangent, box_ind, out))


def build_info():
    """Facts fixed when the extension was compiled (see show_config)."""
    return {
        "openmp": bool(CROPGRAD_HAVE_OPENMP),
        "compiler": CG_COMPILER.decode("utf-8", "replace"),
        "cflags": CG_CFLAGS.decode("utf-8", "replace"),
        "flush_denormals_supported": bool(CG_FPENV_SUPPORTED),
    }


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
