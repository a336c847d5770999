/* An extension module calling cropgrad's C-level API (crop_and_resize, its
 * gradients and boxes JVP; RoIAlign's four functions of version 1.1) from
 * plain C (or C++: cxx_consumer.cpp compiles this file again as C++), with
 * nothing but <cropgrad/capi.h>: no Cython, no NumPy headers, no OpenMP
 * flags.
 *
 * Each op takes its arrays as buffers (None for NULL), its shapes as tuples
 * of 4 ints and every code as a number, so that a test can pass anything;
 * it calls the C function without the GIL and returns
 * (status, position, message), or (status,) when called with
 * record=False (then the error record passed is NULL).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <cropgrad/capi.h>

#ifndef CONSUMER_NAME
#define CONSUMER_NAME c_consumer
#endif
#define CONSUMER_STR(x) #x
#define CONSUMER_XSTR(x) CONSUMER_STR(x)
#define CONSUMER_CAT(a, b) a##b
#define CONSUMER_INIT(name) CONSUMER_CAT(PyInit_, name)

/* Up to 5 buffers of one call, released together. */
typedef struct {
    Py_buffer views[5];
    int count;
} Buffers;

/* The data of `obj` (NULL for None), held in `bufs`; -1 with an exception. */
static int get_data(Buffers *bufs, PyObject *obj, int writable, void **data) {
    if (obj == Py_None) {
        *data = NULL;
        return 0;
    }
    if (PyObject_GetBuffer(obj, &bufs->views[bufs->count],
                           writable ? PyBUF_WRITABLE : PyBUF_SIMPLE) < 0) {
        return -1;
    }
    *data = bufs->views[bufs->count].buf;
    bufs->count += 1;
    return 0;
}

static void release(Buffers *bufs) {
    while (bufs->count > 0) {
        bufs->count -= 1;
        PyBuffer_Release(&bufs->views[bufs->count]);
    }
}

static PyObject *result(int status, const cg_error *err, int record) {
    if (!record) {
        return Py_BuildValue("(i)", status);
    }
    return Py_BuildValue("(iLs)", status, (long long)err->position, err->message);
}

static PyObject *crop_and_resize(PyObject *self, PyObject *args) {
    PyObject *image, *boxes, *box_ind, *crops;
    int image_dtype, box_ind_dtype, method, layout, num_threads, flush, record = 1;
    long long shape[4], num_boxes, crop_height, crop_width;
    float extrapolation;
    int64_t image_shape[4];
    void *p_image, *p_boxes, *p_index, *p_crops;
    Buffers bufs;
    cg_error err;
    int status, i;
    (void)self;
    if (!PyArg_ParseTuple(args, "Oi(LLLL)OOiLLLifiOii|p", &image, &image_dtype,
                          &shape[0], &shape[1], &shape[2], &shape[3], &boxes,
                          &box_ind, &box_ind_dtype, &num_boxes, &crop_height,
                          &crop_width, &method, &extrapolation, &layout, &crops,
                          &num_threads, &flush, &record)) {
        return NULL;
    }
    for (i = 0; i < 4; i++) image_shape[i] = (int64_t)shape[i];
    bufs.count = 0;
    if (get_data(&bufs, image, 0, &p_image) < 0 || get_data(&bufs, boxes, 0, &p_boxes) < 0
            || get_data(&bufs, box_ind, 0, &p_index) < 0
            || get_data(&bufs, crops, 1, &p_crops) < 0) {
        release(&bufs);
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS
    status = cg_crop_and_resize(p_image, image_dtype, image_shape, (const float *)p_boxes,
                                p_index, box_ind_dtype, num_boxes, crop_height,
                                crop_width, method, extrapolation, layout,
                                (float *)p_crops, num_threads, flush,
                                record ? &err : NULL);
    Py_END_ALLOW_THREADS
    release(&bufs);
    return result(status, &err, record);
}

static PyObject *crop_and_resize_grad_image(PyObject *self, PyObject *args) {
    PyObject *grads, *boxes, *box_ind, *output;
    int box_ind_dtype, output_dtype, method, layout, num_threads, flush, record = 1;
    long long g[4], s[4];
    int64_t grads_shape[4], image_size[4];
    void *p_grads, *p_boxes, *p_index, *p_output;
    Buffers bufs;
    cg_error err;
    int status, i;
    (void)self;
    if (!PyArg_ParseTuple(args, "O(LLLL)OOi(LLLL)Oiiiii|p", &grads, &g[0], &g[1],
                          &g[2], &g[3], &boxes, &box_ind, &box_ind_dtype, &s[0],
                          &s[1], &s[2], &s[3], &output, &output_dtype, &method,
                          &layout, &num_threads, &flush, &record)) {
        return NULL;
    }
    for (i = 0; i < 4; i++) {
        grads_shape[i] = (int64_t)g[i];
        image_size[i] = (int64_t)s[i];
    }
    bufs.count = 0;
    if (get_data(&bufs, grads, 0, &p_grads) < 0 || get_data(&bufs, boxes, 0, &p_boxes) < 0
            || get_data(&bufs, box_ind, 0, &p_index) < 0
            || get_data(&bufs, output, 1, &p_output) < 0) {
        release(&bufs);
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS
    status = cg_crop_and_resize_grad_image((const float *)p_grads, grads_shape,
                                           (const float *)p_boxes, p_index,
                                           box_ind_dtype, image_size, p_output,
                                           output_dtype, method, layout, num_threads,
                                           flush, record ? &err : NULL);
    Py_END_ALLOW_THREADS
    release(&bufs);
    return result(status, &err, record);
}

static PyObject *crop_and_resize_grad_boxes(PyObject *self, PyObject *args) {
    PyObject *grads, *image, *boxes, *box_ind, *output;
    int image_dtype, box_ind_dtype, method, layout, num_threads, flush, record = 1;
    long long g[4], s[4];
    int64_t grads_shape[4], image_shape[4];
    void *p_grads, *p_image, *p_boxes, *p_index, *p_output;
    Buffers bufs;
    cg_error err;
    int status, i;
    (void)self;
    if (!PyArg_ParseTuple(args, "O(LLLL)Oi(LLLL)OOiOiiii|p", &grads, &g[0], &g[1],
                          &g[2], &g[3], &image, &image_dtype, &s[0], &s[1], &s[2],
                          &s[3], &boxes, &box_ind, &box_ind_dtype, &output, &method,
                          &layout, &num_threads, &flush, &record)) {
        return NULL;
    }
    for (i = 0; i < 4; i++) {
        grads_shape[i] = (int64_t)g[i];
        image_shape[i] = (int64_t)s[i];
    }
    bufs.count = 0;
    if (get_data(&bufs, grads, 0, &p_grads) < 0 || get_data(&bufs, image, 0, &p_image) < 0
            || get_data(&bufs, boxes, 0, &p_boxes) < 0
            || get_data(&bufs, box_ind, 0, &p_index) < 0
            || get_data(&bufs, output, 1, &p_output) < 0) {
        release(&bufs);
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS
    status = cg_crop_and_resize_grad_boxes((const float *)p_grads, grads_shape, p_image,
                                           image_dtype, image_shape,
                                           (const float *)p_boxes, p_index,
                                           box_ind_dtype, (float *)p_output, method,
                                           layout, num_threads, flush,
                                           record ? &err : NULL);
    Py_END_ALLOW_THREADS
    release(&bufs);
    return result(status, &err, record);
}

static PyObject *crop_and_resize_jvp_boxes(PyObject *self, PyObject *args) {
    PyObject *image, *boxes, *tangent, *box_ind, *output;
    int image_dtype, box_ind_dtype, method, layout, num_threads, flush, record = 1;
    long long shape[4], num_boxes, crop_height, crop_width;
    int64_t image_shape[4];
    void *p_image, *p_boxes, *p_tangent, *p_index, *p_output;
    Buffers bufs;
    cg_error err;
    int status, i;
    (void)self;
    if (!PyArg_ParseTuple(args, "Oi(LLLL)OOOiLLLiiOii|p", &image, &image_dtype,
                          &shape[0], &shape[1], &shape[2], &shape[3], &boxes,
                          &tangent, &box_ind, &box_ind_dtype, &num_boxes,
                          &crop_height, &crop_width, &method, &layout, &output,
                          &num_threads, &flush, &record)) {
        return NULL;
    }
    for (i = 0; i < 4; i++) image_shape[i] = (int64_t)shape[i];
    bufs.count = 0;
    if (get_data(&bufs, image, 0, &p_image) < 0 || get_data(&bufs, boxes, 0, &p_boxes) < 0
            || get_data(&bufs, tangent, 0, &p_tangent) < 0
            || get_data(&bufs, box_ind, 0, &p_index) < 0
            || get_data(&bufs, output, 1, &p_output) < 0) {
        release(&bufs);
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS
    status = cg_crop_and_resize_jvp_boxes(p_image, image_dtype, image_shape,
                                          (const float *)p_boxes,
                                          (const float *)p_tangent, p_index,
                                          box_ind_dtype, num_boxes, crop_height,
                                          crop_width, method, layout, (float *)p_output,
                                          num_threads, flush, record ? &err : NULL);
    Py_END_ALLOW_THREADS
    release(&bufs);
    return result(status, &err, record);
}

/* ------------------------------------------------------------ 1.1: RoIAlign */

static PyObject *roi_align(PyObject *self, PyObject *args) {
    PyObject *image, *boxes, *box_ind, *output;
    int image_dtype, boxes_dtype, box_ind_dtype, sampling_ratio, aligned, layout;
    int output_dtype, num_threads, flush, record = 1;
    long long shape[4], num_boxes, output_height, output_width;
    double spatial_scale;
    int64_t image_shape[4];
    void *p_image, *p_boxes, *p_index, *p_output;
    Buffers bufs;
    cg_error err;
    int status, i;
    (void)self;
    if (!PyArg_ParseTuple(args, "Oi(LLLL)OiOiLLLdiiiOiii|p", &image, &image_dtype,
                          &shape[0], &shape[1], &shape[2], &shape[3], &boxes,
                          &boxes_dtype, &box_ind, &box_ind_dtype, &num_boxes,
                          &output_height, &output_width, &spatial_scale,
                          &sampling_ratio, &aligned, &layout, &output, &output_dtype,
                          &num_threads, &flush, &record)) {
        return NULL;
    }
    for (i = 0; i < 4; i++) image_shape[i] = (int64_t)shape[i];
    bufs.count = 0;
    if (get_data(&bufs, image, 0, &p_image) < 0 || get_data(&bufs, boxes, 0, &p_boxes) < 0
            || get_data(&bufs, box_ind, 0, &p_index) < 0
            || get_data(&bufs, output, 1, &p_output) < 0) {
        release(&bufs);
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS
    status = cg_roi_align(p_image, image_dtype, image_shape, p_boxes, boxes_dtype,
                          p_index, box_ind_dtype, num_boxes, output_height,
                          output_width, spatial_scale, sampling_ratio, aligned, layout,
                          p_output, output_dtype, num_threads, flush,
                          record ? &err : NULL);
    Py_END_ALLOW_THREADS
    release(&bufs);
    return result(status, &err, record);
}

static PyObject *roi_align_grad_image(PyObject *self, PyObject *args) {
    PyObject *grads, *boxes, *box_ind, *output;
    int grads_dtype, boxes_dtype, box_ind_dtype, sampling_ratio, aligned, layout;
    int output_dtype, num_threads, flush, record = 1;
    long long g[4], s[4];
    double spatial_scale;
    int64_t grads_shape[4], image_size[4];
    void *p_grads, *p_boxes, *p_index, *p_output;
    Buffers bufs;
    cg_error err;
    int status, i;
    (void)self;
    if (!PyArg_ParseTuple(args, "Oi(LLLL)OiOi(LLLL)diiiOiii|p", &grads, &grads_dtype,
                          &g[0], &g[1], &g[2], &g[3], &boxes, &boxes_dtype, &box_ind,
                          &box_ind_dtype, &s[0], &s[1], &s[2], &s[3], &spatial_scale,
                          &sampling_ratio, &aligned, &layout, &output, &output_dtype,
                          &num_threads, &flush, &record)) {
        return NULL;
    }
    for (i = 0; i < 4; i++) {
        grads_shape[i] = (int64_t)g[i];
        image_size[i] = (int64_t)s[i];
    }
    bufs.count = 0;
    if (get_data(&bufs, grads, 0, &p_grads) < 0 || get_data(&bufs, boxes, 0, &p_boxes) < 0
            || get_data(&bufs, box_ind, 0, &p_index) < 0
            || get_data(&bufs, output, 1, &p_output) < 0) {
        release(&bufs);
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS
    status = cg_roi_align_grad_image(p_grads, grads_dtype, grads_shape, p_boxes,
                                     boxes_dtype, p_index, box_ind_dtype, image_size,
                                     spatial_scale, sampling_ratio, aligned, layout,
                                     p_output, output_dtype, num_threads, flush,
                                     record ? &err : NULL);
    Py_END_ALLOW_THREADS
    release(&bufs);
    return result(status, &err, record);
}

static PyObject *roi_align_grad_boxes(PyObject *self, PyObject *args) {
    PyObject *grads, *image, *boxes, *box_ind, *output;
    int grads_dtype, image_dtype, boxes_dtype, box_ind_dtype, sampling_ratio;
    int aligned, layout, num_threads, flush, record = 1;
    long long g[4], s[4];
    double spatial_scale;
    int64_t grads_shape[4], image_shape[4];
    void *p_grads, *p_image, *p_boxes, *p_index, *p_output;
    Buffers bufs;
    cg_error err;
    int status, i;
    (void)self;
    if (!PyArg_ParseTuple(args, "Oi(LLLL)Oi(LLLL)OiOidiiiOii|p", &grads, &grads_dtype,
                          &g[0], &g[1], &g[2], &g[3], &image, &image_dtype, &s[0],
                          &s[1], &s[2], &s[3], &boxes, &boxes_dtype, &box_ind,
                          &box_ind_dtype, &spatial_scale, &sampling_ratio, &aligned,
                          &layout, &output, &num_threads, &flush, &record)) {
        return NULL;
    }
    for (i = 0; i < 4; i++) {
        grads_shape[i] = (int64_t)g[i];
        image_shape[i] = (int64_t)s[i];
    }
    bufs.count = 0;
    if (get_data(&bufs, grads, 0, &p_grads) < 0 || get_data(&bufs, image, 0, &p_image) < 0
            || get_data(&bufs, boxes, 0, &p_boxes) < 0
            || get_data(&bufs, box_ind, 0, &p_index) < 0
            || get_data(&bufs, output, 1, &p_output) < 0) {
        release(&bufs);
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS
    status = cg_roi_align_grad_boxes(p_grads, grads_dtype, grads_shape, p_image,
                                     image_dtype, image_shape, p_boxes, boxes_dtype,
                                     p_index, box_ind_dtype, spatial_scale,
                                     sampling_ratio, aligned, layout, p_output,
                                     num_threads, flush, record ? &err : NULL);
    Py_END_ALLOW_THREADS
    release(&bufs);
    return result(status, &err, record);
}

static PyObject *roi_align_jvp_boxes(PyObject *self, PyObject *args) {
    PyObject *image, *boxes, *tangent, *box_ind, *output;
    int image_dtype, boxes_dtype, box_ind_dtype, sampling_ratio, aligned, layout;
    int output_dtype, num_threads, flush, record = 1;
    long long shape[4], num_boxes, output_height, output_width;
    double spatial_scale;
    int64_t image_shape[4];
    void *p_image, *p_boxes, *p_tangent, *p_index, *p_output;
    Buffers bufs;
    cg_error err;
    int status, i;
    (void)self;
    if (!PyArg_ParseTuple(args, "Oi(LLLL)OOiOiLLLdiiiOiii|p", &image, &image_dtype,
                          &shape[0], &shape[1], &shape[2], &shape[3], &boxes,
                          &tangent, &boxes_dtype, &box_ind, &box_ind_dtype,
                          &num_boxes, &output_height, &output_width, &spatial_scale,
                          &sampling_ratio, &aligned, &layout, &output, &output_dtype,
                          &num_threads, &flush, &record)) {
        return NULL;
    }
    for (i = 0; i < 4; i++) image_shape[i] = (int64_t)shape[i];
    bufs.count = 0;
    if (get_data(&bufs, image, 0, &p_image) < 0 || get_data(&bufs, boxes, 0, &p_boxes) < 0
            || get_data(&bufs, tangent, 0, &p_tangent) < 0
            || get_data(&bufs, box_ind, 0, &p_index) < 0
            || get_data(&bufs, output, 1, &p_output) < 0) {
        release(&bufs);
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS
    status = cg_roi_align_jvp_boxes(p_image, image_dtype, image_shape, p_boxes,
                                    p_tangent, boxes_dtype, p_index, box_ind_dtype,
                                    num_boxes, output_height, output_width,
                                    spatial_scale, sampling_ratio, aligned, layout,
                                    p_output, output_dtype, num_threads, flush,
                                    record ? &err : NULL);
    Py_END_ALLOW_THREADS
    release(&bufs);
    return result(status, &err, record);
}

/* What the header says and what the table it got holds. */
static PyObject *header_facts(PyObject *self, PyObject *unused) {
    (void)self;
    (void)unused;
    return Py_BuildValue(
        "{s(ii)si" "s(nnnn)" "s{sKsKsKsKsKsKsKsKsKsKsKsKsKsK}}",
        "version", CG_API_VERSION_MAJOR, CG_API_VERSION_MINOR,
        "runtime_version", cg_api_version(),
        "error_layout", (Py_ssize_t)sizeof(cg_error),
        (Py_ssize_t)offsetof(cg_error, status), (Py_ssize_t)offsetof(cg_error, position),
        (Py_ssize_t)offsetof(cg_error, message),
        "table",
        "cg_api_version", (unsigned long long)(uintptr_t)cropgrad_api->api_version,
        "cg_default_threads", (unsigned long long)(uintptr_t)cropgrad_api->default_threads,
        "cg_crop_and_resize", (unsigned long long)(uintptr_t)cropgrad_api->crop_and_resize,
        "cg_crop_and_resize_grad_image",
        (unsigned long long)(uintptr_t)cropgrad_api->crop_and_resize_grad_image,
        "cg_crop_and_resize_grad_boxes",
        (unsigned long long)(uintptr_t)cropgrad_api->crop_and_resize_grad_boxes,
        "cg_crop_and_resize_jvp_boxes",
        (unsigned long long)(uintptr_t)cropgrad_api->crop_and_resize_jvp_boxes,
        "cg_roi_align", (unsigned long long)(uintptr_t)cropgrad_api->roi_align,
        "cg_roi_align_grad_image",
        (unsigned long long)(uintptr_t)cropgrad_api->roi_align_grad_image,
        "cg_roi_align_grad_boxes",
        (unsigned long long)(uintptr_t)cropgrad_api->roi_align_grad_boxes,
        "cg_roi_align_jvp_boxes",
        (unsigned long long)(uintptr_t)cropgrad_api->roi_align_jvp_boxes,
        "cg_grid_sample", (unsigned long long)(uintptr_t)cropgrad_api->grid_sample,
        "cg_grid_sample_grad_image",
        (unsigned long long)(uintptr_t)cropgrad_api->grid_sample_grad_image,
        "cg_grid_sample_grad_grid",
        (unsigned long long)(uintptr_t)cropgrad_api->grid_sample_grad_grid,
        "cg_grid_sample_jvp_grid",
        (unsigned long long)(uintptr_t)cropgrad_api->grid_sample_jvp_grid);
}

static PyObject *default_threads(PyObject *self, PyObject *unused) {
    (void)self;
    (void)unused;
    return PyLong_FromLong(cg_default_threads());
}

static PyMethodDef methods[] = {
    {"crop_and_resize", crop_and_resize, METH_VARARGS, "cg_crop_and_resize"},
    {"crop_and_resize_grad_image", crop_and_resize_grad_image, METH_VARARGS,
     "cg_crop_and_resize_grad_image"},
    {"crop_and_resize_grad_boxes", crop_and_resize_grad_boxes, METH_VARARGS,
     "cg_crop_and_resize_grad_boxes"},
    {"crop_and_resize_jvp_boxes", crop_and_resize_jvp_boxes, METH_VARARGS,
     "cg_crop_and_resize_jvp_boxes"},
    {"roi_align", roi_align, METH_VARARGS, "cg_roi_align"},
    {"roi_align_grad_image", roi_align_grad_image, METH_VARARGS,
     "cg_roi_align_grad_image"},
    {"roi_align_grad_boxes", roi_align_grad_boxes, METH_VARARGS,
     "cg_roi_align_grad_boxes"},
    {"roi_align_jvp_boxes", roi_align_jvp_boxes, METH_VARARGS, "cg_roi_align_jvp_boxes"},
    {"header_facts", header_facts, METH_NOARGS, "the header's constants and table"},
    {"default_threads", default_threads, METH_NOARGS, "cg_default_threads()"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, CONSUMER_XSTR(CONSUMER_NAME), NULL, -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC CONSUMER_INIT(CONSUMER_NAME)(void) {
    if (cropgrad_import() < 0) {
        return NULL;
    }
    return PyModule_Create(&module);
}
