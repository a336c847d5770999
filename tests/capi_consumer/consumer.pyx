# An extension module calling cropgrad's three ops from compiled code,
# without the GIL.  Each function returns (status, position, message) and
# writes its result into `out`.
from libc.stdint cimport int64_t

from cropgrad cimport capi


cdef tuple _result(int status, capi.cg_error* err):
    return status, err.position, err.message.decode()


def crop_and_resize(const float[:, :, :, ::1] image, const float[:, ::1] boxes,
                    const int64_t[::1] box_ind, float[:, :, :, ::1] out,
                    bint nearest=False):
    cdef capi.cg_error err
    cdef int64_t shape[4]
    cdef int status, i
    cdef int method = capi.CG_NEAREST if nearest else capi.CG_BILINEAR
    for i in range(4):
        shape[i] = image.shape[i]
    with nogil:
        status = capi.cg_crop_and_resize(
            &image[0, 0, 0, 0], capi.CG_FLOAT32, shape, &boxes[0, 0],
            &box_ind[0], capi.CG_INT64, boxes.shape[0], out.shape[1],
            out.shape[2], method, 0.0, capi.CG_NHWC, &out[0, 0, 0, 0],
            0, 0, &err)
    return _result(status, &err)


def crop_and_resize_grad_image(const float[:, :, :, ::1] grads,
                               const float[:, ::1] boxes,
                               const int64_t[::1] box_ind,
                               double[:, :, :, ::1] out):
    cdef capi.cg_error err
    cdef int64_t grads_shape[4]
    cdef int64_t image_size[4]
    cdef int status, i
    for i in range(4):
        grads_shape[i] = grads.shape[i]
        image_size[i] = out.shape[i]
    with nogil:
        status = capi.cg_crop_and_resize_grad_image(
            &grads[0, 0, 0, 0], grads_shape, &boxes[0, 0], &box_ind[0],
            capi.CG_INT64, image_size, &out[0, 0, 0, 0], capi.CG_FLOAT64,
            capi.CG_BILINEAR, capi.CG_NHWC, 2, 1, &err)
    return _result(status, &err)


def crop_and_resize_grad_boxes(const float[:, :, :, ::1] grads,
                               const float[:, :, :, ::1] image,
                               const float[:, ::1] boxes,
                               const int64_t[::1] box_ind, float[:, ::1] out):
    cdef capi.cg_error err
    cdef int64_t grads_shape[4]
    cdef int64_t image_shape[4]
    cdef int status, i
    for i in range(4):
        grads_shape[i] = grads.shape[i]
        image_shape[i] = image.shape[i]
    with nogil:
        status = capi.cg_crop_and_resize_grad_boxes(
            &grads[0, 0, 0, 0], grads_shape, &image[0, 0, 0, 0],
            capi.CG_FLOAT32, image_shape, &boxes[0, 0], &box_ind[0],
            capi.CG_INT64, &out[0, 0], capi.CG_BILINEAR, capi.CG_NHWC, 0, 0,
            &err)
    return _result(status, &err)


def default_threads():
    return capi.cg_default_threads()
