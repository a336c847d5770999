# An extension module calling cropgrad's ops from compiled code, without
# the GIL: crop_and_resize's family, and RoIAlign's (C-level API 1.1).  Each
# function returns (status, position, message) and writes its result into
# `out`.  An empty array is passed as NULL, which the C-level API takes
# (&a[0, 0] of an empty array would raise IndexError).
from libc.stdint cimport int32_t, int64_t

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


# RoIAlign computes in double for float64 data and in float otherwise; its
# boxes, grads, tangents and boxes gradient are of that type, whose dtype
# code is passed with them.  One function per op serves both types and
# both box_ind dtypes (fused types); `nchw` picks the layout.
ctypedef fused real:
    float
    double

ctypedef fused index_t:
    int32_t
    int64_t


def roi_align(const real[:, :, :, ::1] image, const real[:, ::1] boxes,
              const index_t[::1] box_ind, real[:, :, :, ::1] out,
              double spatial_scale=1.0, int sampling_ratio=-1, bint aligned=False,
              bint nchw=True, int num_threads=0):
    cdef capi.cg_error err
    cdef int64_t shape[4]
    cdef int status, i
    cdef int code = capi.CG_FLOAT64 if real is double else capi.CG_FLOAT32
    cdef int index_code = capi.CG_INT32 if index_t is int32_t else capi.CG_INT64
    cdef int layout = capi.CG_NCHW if nchw else capi.CG_NHWC
    cdef int64_t out_h = out.shape[2] if nchw else out.shape[1]
    cdef int64_t out_w = out.shape[3] if nchw else out.shape[2]
    cdef const real* p_image = &image[0, 0, 0, 0] if image.size > 0 else NULL
    cdef const real* p_boxes = &boxes[0, 0] if boxes.shape[0] > 0 else NULL
    cdef const index_t* p_index = &box_ind[0] if box_ind.shape[0] > 0 else NULL
    cdef real* p_out = &out[0, 0, 0, 0] if out.size > 0 else NULL
    for i in range(4):
        shape[i] = image.shape[i]
    with nogil:
        status = capi.cg_roi_align(
            p_image, code, shape, p_boxes, code, p_index, index_code,
            boxes.shape[0], out_h, out_w, spatial_scale, sampling_ratio, aligned,
            layout, p_out, code, num_threads, 0, &err)
    return _result(status, &err)


def roi_align_grad_image(const real[:, :, :, ::1] grads, const real[:, ::1] boxes,
                         const index_t[::1] box_ind, real[:, :, :, ::1] out,
                         double spatial_scale=1.0, int sampling_ratio=-1,
                         bint aligned=False, bint nchw=True, int num_threads=0):
    cdef capi.cg_error err
    cdef int64_t grads_shape[4]
    cdef int64_t image_size[4]
    cdef int status, i
    cdef int code = capi.CG_FLOAT64 if real is double else capi.CG_FLOAT32
    cdef int index_code = capi.CG_INT32 if index_t is int32_t else capi.CG_INT64
    cdef int layout = capi.CG_NCHW if nchw else capi.CG_NHWC
    cdef const real* p_grads = &grads[0, 0, 0, 0] if grads.size > 0 else NULL
    cdef const real* p_boxes = &boxes[0, 0] if boxes.shape[0] > 0 else NULL
    cdef const index_t* p_index = &box_ind[0] if box_ind.shape[0] > 0 else NULL
    cdef real* p_out = &out[0, 0, 0, 0] if out.size > 0 else NULL
    for i in range(4):
        grads_shape[i] = grads.shape[i]
        image_size[i] = out.shape[i]
    with nogil:
        status = capi.cg_roi_align_grad_image(
            p_grads, code, grads_shape, p_boxes, code, p_index, index_code,
            image_size, spatial_scale, sampling_ratio, aligned, layout, p_out,
            code, num_threads, 0, &err)
    return _result(status, &err)


def roi_align_grad_boxes(const real[:, :, :, ::1] grads,
                         const real[:, :, :, ::1] image, const real[:, ::1] boxes,
                         const index_t[::1] box_ind, real[:, ::1] out,
                         double spatial_scale=1.0, int sampling_ratio=-1,
                         bint aligned=False, bint nchw=True, int num_threads=0):
    cdef capi.cg_error err
    cdef int64_t grads_shape[4]
    cdef int64_t image_shape[4]
    cdef int status, i
    cdef int code = capi.CG_FLOAT64 if real is double else capi.CG_FLOAT32
    cdef int index_code = capi.CG_INT32 if index_t is int32_t else capi.CG_INT64
    cdef int layout = capi.CG_NCHW if nchw else capi.CG_NHWC
    cdef const real* p_grads = &grads[0, 0, 0, 0] if grads.size > 0 else NULL
    cdef const real* p_image = &image[0, 0, 0, 0] if image.size > 0 else NULL
    cdef const real* p_boxes = &boxes[0, 0] if boxes.shape[0] > 0 else NULL
    cdef const index_t* p_index = &box_ind[0] if box_ind.shape[0] > 0 else NULL
    cdef real* p_out = &out[0, 0] if out.shape[0] > 0 else NULL
    for i in range(4):
        grads_shape[i] = grads.shape[i]
        image_shape[i] = image.shape[i]
    with nogil:
        status = capi.cg_roi_align_grad_boxes(
            p_grads, code, grads_shape, p_image, code, image_shape, p_boxes, code,
            p_index, index_code, spatial_scale, sampling_ratio, aligned, layout,
            p_out, num_threads, 0, &err)
    return _result(status, &err)


def roi_align_jvp_boxes(const real[:, :, :, ::1] image, const real[:, ::1] boxes,
                        const real[:, ::1] boxes_tangent,
                        const index_t[::1] box_ind, real[:, :, :, ::1] out,
                        double spatial_scale=1.0, int sampling_ratio=-1,
                        bint aligned=False, bint nchw=True, int num_threads=0):
    cdef capi.cg_error err
    cdef int64_t shape[4]
    cdef int status, i
    cdef int code = capi.CG_FLOAT64 if real is double else capi.CG_FLOAT32
    cdef int index_code = capi.CG_INT32 if index_t is int32_t else capi.CG_INT64
    cdef int layout = capi.CG_NCHW if nchw else capi.CG_NHWC
    cdef int64_t out_h = out.shape[2] if nchw else out.shape[1]
    cdef int64_t out_w = out.shape[3] if nchw else out.shape[2]
    cdef const real* p_image = &image[0, 0, 0, 0] if image.size > 0 else NULL
    cdef const real* p_boxes = &boxes[0, 0] if boxes.shape[0] > 0 else NULL
    cdef const real* p_tangent = (&boxes_tangent[0, 0]
                                  if boxes_tangent.shape[0] > 0 else NULL)
    cdef const index_t* p_index = &box_ind[0] if box_ind.shape[0] > 0 else NULL
    cdef real* p_out = &out[0, 0, 0, 0] if out.size > 0 else NULL
    for i in range(4):
        shape[i] = image.shape[i]
    with nogil:
        status = capi.cg_roi_align_jvp_boxes(
            p_image, code, shape, p_boxes, p_tangent, code, p_index, index_code,
            boxes.shape[0], out_h, out_w, spatial_scale, sampling_ratio, aligned,
            layout, p_out, code, num_threads, 0, &err)
    return _result(status, &err)


def default_threads():
    return capi.cg_default_threads()


def api_version():
    """The runtime's version, and the one this module was compiled against."""
    return capi.cg_api_version(), (capi.CG_API_VERSION_MAJOR,
                                   capi.CG_API_VERSION_MINOR)
