# An extension module calling cropgrad's three ops from compiled code,
# without the GIL.  Each function returns (status, position, message) and
# writes its result into `out`.  An empty array is passed as NULL, which the
# C-level API takes (&a[0, 0] of an empty array would raise IndexError).
from libc.stdint cimport int64_t

from cropgrad cimport capi


cdef tuple _result(int status, capi.cg_error* err):
    return status, err.position, err.message.decode()


# The address of each array's first element, or NULL when it has none.
cdef const float* _in4(const float[:, :, :, ::1] a):
    return &a[0, 0, 0, 0] if a.size > 0 else NULL


cdef const float* _in2(const float[:, ::1] a):
    return &a[0, 0] if a.shape[0] > 0 else NULL


cdef const int64_t* _index(const int64_t[::1] a):
    return &a[0] if a.shape[0] > 0 else NULL


def crop_and_resize(const float[:, :, :, ::1] image, const float[:, ::1] boxes,
                    const int64_t[::1] box_ind, float[:, :, :, ::1] out,
                    bint nearest=False):
    cdef capi.cg_error err
    cdef int64_t shape[4]
    cdef int status, i
    cdef int method = capi.CG_NEAREST if nearest else capi.CG_BILINEAR
    cdef const float* p_image = _in4(image)
    cdef const float* p_boxes = _in2(boxes)
    cdef const int64_t* p_index = _index(box_ind)
    cdef float* p_out = &out[0, 0, 0, 0] if out.size > 0 else NULL
    for i in range(4):
        shape[i] = image.shape[i]
    with nogil:
        status = capi.cg_crop_and_resize(
            p_image, capi.CG_FLOAT32, shape, p_boxes, p_index, capi.CG_INT64,
            boxes.shape[0], out.shape[1], out.shape[2], method, 0.0,
            capi.CG_NHWC, p_out, 0, 0, &err)
    return _result(status, &err)


def crop_and_resize_grad_image(const float[:, :, :, ::1] grads,
                               const float[:, ::1] boxes,
                               const int64_t[::1] box_ind,
                               double[:, :, :, ::1] out):
    cdef capi.cg_error err
    cdef int64_t grads_shape[4]
    cdef int64_t image_size[4]
    cdef int status, i
    cdef const float* p_grads = _in4(grads)
    cdef const float* p_boxes = _in2(boxes)
    cdef const int64_t* p_index = _index(box_ind)
    cdef double* p_out = &out[0, 0, 0, 0] if out.size > 0 else NULL
    for i in range(4):
        grads_shape[i] = grads.shape[i]
        image_size[i] = out.shape[i]
    with nogil:
        status = capi.cg_crop_and_resize_grad_image(
            p_grads, grads_shape, p_boxes, p_index, capi.CG_INT64, image_size,
            p_out, capi.CG_FLOAT64, capi.CG_BILINEAR, capi.CG_NHWC, 2, 1, &err)
    return _result(status, &err)


def crop_and_resize_grad_boxes(const float[:, :, :, ::1] grads,
                               const float[:, :, :, ::1] image,
                               const float[:, ::1] boxes,
                               const int64_t[::1] box_ind, float[:, ::1] out):
    cdef capi.cg_error err
    cdef int64_t grads_shape[4]
    cdef int64_t image_shape[4]
    cdef int status, i
    cdef const float* p_grads = _in4(grads)
    cdef const float* p_image = _in4(image)
    cdef const float* p_boxes = _in2(boxes)
    cdef const int64_t* p_index = _index(box_ind)
    cdef float* p_out = &out[0, 0] if out.shape[0] > 0 else NULL
    for i in range(4):
        grads_shape[i] = grads.shape[i]
        image_shape[i] = image.shape[i]
    with nogil:
        status = capi.cg_crop_and_resize_grad_boxes(
            p_grads, grads_shape, p_image, capi.CG_FLOAT32, image_shape,
            p_boxes, p_index, capi.CG_INT64, p_out, capi.CG_BILINEAR,
            capi.CG_NHWC, 0, 0, &err)
    return _result(status, &err)


def default_threads():
    return capi.cg_default_threads()


def api_version():
    """The runtime's version, and the one this module was compiled against."""
    return capi.cg_api_version(), (capi.CG_API_VERSION_MAJOR,
                                   capi.CG_API_VERSION_MINOR)
