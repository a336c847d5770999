"""Consumers of the C-level API of every kind, judged against the NumPy API.

- C and C++: ``tests/capi_c_consumer/`` (one source compiled as both) uses
  nothing but ``cropgrad/include/cropgrad/capi.h``; built here as a wheel
  from its pyproject.toml + setup.py with ``--no-build-isolation``;
- ctypes: ``tests/capi_ctypes.py``, on ``cropgrad.capi.function_addresses()``;
- Numba: ``@njit(nogil=True)`` functions calling the same ctypes pointers
  (skipped without Numba unless CROPGRAD_REQUIRE_ADAPTERS=1).

All four take the C consumer's convention (see capi_ctypes.py), so one set
of tests runs through each: every op bit for bit, error records and their
messages, NULL error records, empty problems with NULL pointers, an output
overlapping an input.  RoIAlign's four functions (C-level API 1.1) in both
layouts, float32 and float64 arithmetic, int32 and int64 box_ind, on 1 to 3
threads and the default, with every error a caller can make.  The Cython
consumer is tested in test_capi.py.
"""

import ctypes
import importlib.util
import os
import random
import re

import capi_build
import capi_ctypes
import fuzz_capi
import numpy as np
import pytest
from _helpers import required, starting_teams, unrequired

import cropgrad
import cropgrad.capi

HERE = os.path.dirname(os.path.abspath(__file__))
C = cropgrad.capi._CODES
REQUIRE = required("CROPGRAD_REQUIRE_ADAPTERS")


@pytest.fixture(scope="module")
def c_modules(tmp_path_factory):
    return capi_build.build(
        os.path.join(HERE, "capi_c_consumer"),
        str(tmp_path_factory.mktemp("c_consumer")),
        ["c_consumer", "cxx_consumer"],
    )


class NumbaConsumer:
    """Every op from ``@njit(nogil=True)`` code, in the C convention.

    Every array reaches the compiled functions as its bytes (one
    specialisation each); an empty one is passed as a NULL pointer, and a
    NULL error record as an empty record array.
    """

    def __init__(self):
        import numba

        fn = capi_ctypes.functions()
        forward = fn["cg_crop_and_resize"]
        grad_image = fn["cg_crop_and_resize_grad_image"]
        grad_boxes = fn["cg_crop_and_resize_grad_boxes"]
        jvp_boxes = fn["cg_crop_and_resize_jvp_boxes"]

        @numba.njit(nogil=True)
        def ptr(a):
            return a.ctypes.data if a.size > 0 else np.uintp(0)

        @numba.njit(nogil=True)
        def call_forward(image, image_dtype, shape, boxes, box_ind, index_dtype,
                         num_boxes, crop_h, crop_w, method, extrapolation, layout,
                         crops, num_threads, flush, err):  # fmt: skip
            return forward(
                ptr(image), image_dtype, ptr(shape), ptr(boxes), ptr(box_ind),
                index_dtype, num_boxes, crop_h, crop_w, method, extrapolation,
                layout, ptr(crops), num_threads, flush, ptr(err),
            )  # fmt: skip

        @numba.njit(nogil=True)
        def call_grad_image(grads, grads_shape, boxes, box_ind, index_dtype,
                            image_size, output, output_dtype, method, layout,
                            num_threads, flush, err):  # fmt: skip
            return grad_image(
                ptr(grads), ptr(grads_shape), ptr(boxes), ptr(box_ind),
                index_dtype, ptr(image_size), ptr(output), output_dtype, method,
                layout, num_threads, flush, ptr(err),
            )  # fmt: skip

        @numba.njit(nogil=True)
        def call_grad_boxes(grads, grads_shape, image, image_dtype, image_shape,
                            boxes, box_ind, index_dtype, output, method, layout,
                            num_threads, flush, err):  # fmt: skip
            return grad_boxes(
                ptr(grads), ptr(grads_shape), ptr(image), image_dtype,
                ptr(image_shape), ptr(boxes), ptr(box_ind), index_dtype,
                ptr(output), method, layout, num_threads, flush, ptr(err),
            )  # fmt: skip

        @numba.njit(nogil=True)
        def call_jvp_boxes(image, image_dtype, shape, boxes, tangent, box_ind,
                           index_dtype, num_boxes, crop_h, crop_w, method, layout,
                           output, num_threads, flush, err):  # fmt: skip
            return jvp_boxes(
                ptr(image), image_dtype, ptr(shape), ptr(boxes), ptr(tangent),
                ptr(box_ind), index_dtype, num_boxes, crop_h, crop_w, method,
                layout, ptr(output), num_threads, flush, ptr(err),
            )  # fmt: skip

        roi_forward = fn["cg_roi_align"]
        roi_grad_image = fn["cg_roi_align_grad_image"]
        roi_grad_boxes = fn["cg_roi_align_grad_boxes"]
        roi_jvp_boxes = fn["cg_roi_align_jvp_boxes"]

        @numba.njit(nogil=True)
        def call_roi_forward(image, image_dtype, shape, boxes, boxes_dtype, box_ind,
                             index_dtype, num_boxes, out_h, out_w, scale, ratio,
                             aligned, layout, output, output_dtype, num_threads,
                             flush, err):  # fmt: skip
            return roi_forward(
                ptr(image), image_dtype, ptr(shape), ptr(boxes), boxes_dtype,
                ptr(box_ind), index_dtype, num_boxes, out_h, out_w, scale, ratio,
                aligned, layout, ptr(output), output_dtype, num_threads, flush,
                ptr(err),
            )  # fmt: skip

        @numba.njit(nogil=True)
        def call_roi_grad_image(grads, grads_dtype, grads_shape, boxes, boxes_dtype,
                                box_ind, index_dtype, image_size, scale, ratio,
                                aligned, layout, output, output_dtype, num_threads,
                                flush, err):  # fmt: skip
            return roi_grad_image(
                ptr(grads), grads_dtype, ptr(grads_shape), ptr(boxes), boxes_dtype,
                ptr(box_ind), index_dtype, ptr(image_size), scale, ratio, aligned,
                layout, ptr(output), output_dtype, num_threads, flush, ptr(err),
            )  # fmt: skip

        @numba.njit(nogil=True)
        def call_roi_grad_boxes(grads, grads_dtype, grads_shape, image, image_dtype,
                                image_shape, boxes, boxes_dtype, box_ind,
                                index_dtype, scale, ratio, aligned, layout, output,
                                num_threads, flush, err):  # fmt: skip
            return roi_grad_boxes(
                ptr(grads), grads_dtype, ptr(grads_shape), ptr(image), image_dtype,
                ptr(image_shape), ptr(boxes), boxes_dtype, ptr(box_ind),
                index_dtype, scale, ratio, aligned, layout, ptr(output),
                num_threads, flush, ptr(err),
            )  # fmt: skip

        @numba.njit(nogil=True)
        def call_roi_jvp_boxes(image, image_dtype, shape, boxes, tangent,
                               boxes_dtype, box_ind, index_dtype, num_boxes, out_h,
                               out_w, scale, ratio, aligned, layout, output,
                               output_dtype, num_threads, flush, err):  # fmt: skip
            return roi_jvp_boxes(
                ptr(image), image_dtype, ptr(shape), ptr(boxes), ptr(tangent),
                boxes_dtype, ptr(box_ind), index_dtype, num_boxes, out_h, out_w,
                scale, ratio, aligned, layout, ptr(output), output_dtype,
                num_threads, flush, ptr(err),
            )  # fmt: skip

        self._jvp_boxes = call_jvp_boxes
        self._forward = call_forward
        self._grad_image = call_grad_image
        self._grad_boxes = call_grad_boxes
        self._roi_forward = call_roi_forward
        self._roi_grad_image = call_roi_grad_image
        self._roi_grad_boxes = call_roi_grad_boxes
        self._roi_jvp_boxes = call_roi_jvp_boxes

    @staticmethod
    def _bytes(a):
        return np.zeros(0, np.uint8) if a is None else a.reshape(-1).view(np.uint8)

    @staticmethod
    def _shape(shape):
        return np.array(shape, np.int64)

    @staticmethod
    def _record(record):
        return np.zeros(1 if record else 0, capi_ctypes.ERROR_DTYPE)

    @staticmethod
    def _result(status, err):
        if err.size == 0:
            return (status,)
        return status, int(err["position"][0]), err["message"][0].decode()

    def crop_and_resize(self, image, image_dtype, image_shape, boxes, box_ind,
                        box_ind_dtype, num_boxes, crop_height, crop_width, method,
                        extrapolation_value, layout, crops, num_threads, flush,
                        record=True):  # fmt: skip
        err = self._record(record)
        status = self._forward(
            self._bytes(image), image_dtype, self._shape(image_shape),
            self._bytes(boxes), self._bytes(box_ind), box_ind_dtype, num_boxes,
            crop_height, crop_width, method, np.float32(extrapolation_value),
            layout, self._bytes(crops), num_threads, flush, err,
        )  # fmt: skip
        return self._result(status, err)

    def crop_and_resize_jvp_boxes(self, image, image_dtype, image_shape, boxes,
                                  boxes_tangent, box_ind, box_ind_dtype, num_boxes,
                                  crop_height, crop_width, method, layout, output,
                                  num_threads, flush, record=True):  # fmt: skip
        err = self._record(record)
        status = self._jvp_boxes(
            self._bytes(image), image_dtype, self._shape(image_shape),
            self._bytes(boxes), self._bytes(boxes_tangent), self._bytes(box_ind),
            box_ind_dtype, num_boxes, crop_height, crop_width, method, layout,
            self._bytes(output), num_threads, flush, err,
        )  # fmt: skip
        return self._result(status, err)

    def crop_and_resize_grad_image(self, grads, grads_shape, boxes, box_ind,
                                   box_ind_dtype, image_size, output, output_dtype,
                                   method, layout, num_threads, flush,
                                   record=True):  # fmt: skip
        err = self._record(record)
        status = self._grad_image(
            self._bytes(grads), self._shape(grads_shape), self._bytes(boxes),
            self._bytes(box_ind), box_ind_dtype, self._shape(image_size),
            self._bytes(output), output_dtype, method, layout, num_threads, flush,
            err,
        )  # fmt: skip
        return self._result(status, err)

    def crop_and_resize_grad_boxes(self, grads, grads_shape, image, image_dtype,
                                   image_shape, boxes, box_ind, box_ind_dtype,
                                   output, method, layout, num_threads, flush,
                                   record=True):  # fmt: skip
        err = self._record(record)
        status = self._grad_boxes(
            self._bytes(grads), self._shape(grads_shape), self._bytes(image),
            image_dtype, self._shape(image_shape), self._bytes(boxes),
            self._bytes(box_ind), box_ind_dtype, self._bytes(output), method,
            layout, num_threads, flush, err,
        )  # fmt: skip
        return self._result(status, err)

    def roi_align(self, image, image_dtype, image_shape, boxes, boxes_dtype, box_ind,
                  box_ind_dtype, num_boxes, output_height, output_width,
                  spatial_scale, sampling_ratio, aligned, layout, output,
                  output_dtype, num_threads, flush, record=True):  # fmt: skip
        err = self._record(record)
        status = self._roi_forward(
            self._bytes(image), image_dtype, self._shape(image_shape),
            self._bytes(boxes), boxes_dtype, self._bytes(box_ind), box_ind_dtype,
            num_boxes, output_height, output_width, float(spatial_scale),
            sampling_ratio, aligned, layout, self._bytes(output), output_dtype,
            num_threads, flush, err,
        )  # fmt: skip
        return self._result(status, err)

    def roi_align_grad_image(self, grads, grads_dtype, grads_shape, boxes,
                             boxes_dtype, box_ind, box_ind_dtype, image_size,
                             spatial_scale, sampling_ratio, aligned, layout, output,
                             output_dtype, num_threads, flush,
                             record=True):  # fmt: skip
        err = self._record(record)
        status = self._roi_grad_image(
            self._bytes(grads), grads_dtype, self._shape(grads_shape),
            self._bytes(boxes), boxes_dtype, self._bytes(box_ind), box_ind_dtype,
            self._shape(image_size), float(spatial_scale), sampling_ratio, aligned,
            layout, self._bytes(output), output_dtype, num_threads, flush, err,
        )  # fmt: skip
        return self._result(status, err)

    def roi_align_grad_boxes(self, grads, grads_dtype, grads_shape, image,
                             image_dtype, image_shape, boxes, boxes_dtype, box_ind,
                             box_ind_dtype, spatial_scale, sampling_ratio, aligned,
                             layout, output, num_threads, flush,
                             record=True):  # fmt: skip
        err = self._record(record)
        status = self._roi_grad_boxes(
            self._bytes(grads), grads_dtype, self._shape(grads_shape),
            self._bytes(image), image_dtype, self._shape(image_shape),
            self._bytes(boxes), boxes_dtype, self._bytes(box_ind), box_ind_dtype,
            float(spatial_scale), sampling_ratio, aligned, layout,
            self._bytes(output), num_threads, flush, err,
        )  # fmt: skip
        return self._result(status, err)

    def roi_align_jvp_boxes(self, image, image_dtype, image_shape, boxes,
                            boxes_tangent, boxes_dtype, box_ind, box_ind_dtype,
                            num_boxes, output_height, output_width, spatial_scale,
                            sampling_ratio, aligned, layout, output, output_dtype,
                            num_threads, flush, record=True):  # fmt: skip
        err = self._record(record)
        status = self._roi_jvp_boxes(
            self._bytes(image), image_dtype, self._shape(image_shape),
            self._bytes(boxes), self._bytes(boxes_tangent), boxes_dtype,
            self._bytes(box_ind), box_ind_dtype, num_boxes, output_height,
            output_width, float(spatial_scale), sampling_ratio, aligned, layout,
            self._bytes(output), output_dtype, num_threads, flush, err,
        )  # fmt: skip
        return self._result(status, err)


@pytest.fixture(scope="module", params=["c", "c++", "ctypes", "numba"])
def consumer(request):
    if request.param in ("c", "c++"):
        c_module, cxx_module = request.getfixturevalue("c_modules")
        return c_module if request.param == "c" else cxx_module
    if request.param == "ctypes":
        return capi_ctypes.CtypesConsumer()
    if importlib.util.find_spec("numba") is None and not REQUIRE:
        pytest.skip(unrequired("Numba is not installed"))
    return NumbaConsumer()


def _problem(op, seed, **changes):
    """A valid random problem of `op` (the fuzz target's generator)."""
    rng = random.Random(seed)
    while True:
        p = fuzz_capi.make_problem(rng)
        p["record"] = True
        if p["op"] != op or p["out"].size == 0 or len(p["boxes"]) < 3:
            continue
        if any(p[k].size == 0 for k in ("image", "grads") if k in p):
            continue
        if any(np.shares_memory(p[k], p["out"]) for k in p if k in ("image", "grads")):
            continue
        p.update(changes)
        p["boxes"] = np.nan_to_num(p["boxes"], nan=0.25, posinf=0.75)
        batch = p["image"].shape[0] if "image" in p else p["image_size"][0]
        p["box_ind"] = np.clip(p["box_ind"], 0, batch - 1)
        if fuzz_capi.numpy_result(dict(p, out=p["out"].copy()))[0] == "ok":
            return p


def _numpy_and_c(consumer, p):
    before = p["out"].copy()
    expected = fuzz_capi.numpy_result(dict(p, out=p["out"].copy()))
    result = fuzz_capi.c_call(consumer, p)
    return expected, result, before


OPS = ["forward", "grad_image", "grad_boxes", "jvp_boxes"]


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("seed", range(6))
def test_ops_match_numpy_api(consumer, op, seed):
    p = _problem(op, seed)
    expected, result, before = _numpy_and_c(consumer, p)
    assert expected[0] == "ok"
    assert result == (0, -1, "")
    assert fuzz_capi.same_bits(p["out"], expected[1])


@pytest.mark.parametrize("op", OPS)
def test_null_error_record_returns_the_status(consumer, op):
    p = _problem(op, 11, record=False)
    expected, result, _ = _numpy_and_c(consumer, p)
    assert result == (0,)
    assert fuzz_capi.same_bits(p["out"], expected[1])
    p["boxes"][1, 2] = np.nan
    assert fuzz_capi.c_call(consumer, p) == (C["CG_ERR_VALUE"],)


@pytest.mark.parametrize("op", OPS)
def test_error_records_match_numpy_api(consumer, op):
    p = _problem(op, 3)
    p["boxes"][2, 1] = np.inf
    expected, result, before = _numpy_and_c(consumer, p)
    assert expected[:2] == ("error", C["CG_ERR_VALUE"])
    assert result == (C["CG_ERR_VALUE"], 2, expected[2])
    assert "boxes[2]" in result[2]
    assert fuzz_capi.same_bits(p["out"], before), "an error, yet the output was written"

    p = _problem(op, 4)
    batch = p["image"].shape[0] if "image" in p else p["image_size"][0]
    p["box_ind"][1] = batch
    expected, result, before = _numpy_and_c(consumer, p)
    assert result == (C["CG_ERR_INDEX"], 1, expected[2])
    assert f"box_ind[1] = {batch}" in result[2]


@pytest.mark.parametrize("op", OPS)
def test_output_overlapping_an_input_is_refused(consumer, op):
    p = _problem(op, 5)
    # The output starts inside boxes: the NumPy API refuses that.
    buf = np.zeros(p["boxes"].nbytes + p["out"].nbytes, np.uint8)
    boxes = buf[: p["boxes"].nbytes].view(np.float32).reshape(p["boxes"].shape)
    boxes[...] = p["boxes"]
    p["boxes"] = boxes
    start = 8
    out = buf[start : start + p["out"].nbytes].view(p["out"].dtype)
    p["out"] = out.reshape(p["out"].shape)
    expected = fuzz_capi.numpy_result(p)  # the output itself: refused, unwritten
    result = fuzz_capi.c_call(consumer, p)
    message = "out must not share memory with an input"
    assert expected == ("error", C["CG_ERR_VALUE"], message)
    assert result == (C["CG_ERR_VALUE"], -1, message)


def test_empty_problems_with_null_pointers(consumer):
    f32, i64 = C["CG_FLOAT32"], C["CG_INT64"]
    # No boxes: every array pointer NULL but the image's.
    image = np.ones((2, 4, 5, 3), np.float32)
    ok = (0, -1, "")
    assert (
        consumer.crop_and_resize(image, f32, image.shape, None, None, i64, 0, 3, 3,
                                 0, 0.0, 0, None, 0, 0) == ok
    )  # fmt: skip
    # Depth 0: the image and the crops are empty too.
    assert (
        consumer.crop_and_resize(None, f32, (2, 4, 5, 0), np.zeros((1, 4), np.float32),
                                 np.zeros(1, np.int64), i64, 1, 3, 3, 1, 0.0, 0,
                                 None, 2, 1) == ok
    )  # fmt: skip
    # An empty batch of image gradient; no boxes.
    assert (
        consumer.crop_and_resize_grad_image(None, (0, 2, 2, 3), None, None, i64,
                                            (0, 4, 5, 3), None, f32, 0, 0, 0, 0)
        == ok
    )  # fmt: skip
    out = np.full((2, 4, 5, 3), 7.0, np.float32)
    assert (
        consumer.crop_and_resize_grad_image(None, (0, 2, 2, 3), None, None, i64,
                                            out.shape, out, f32, 1, 0, 0, 0) == ok
    )  # fmt: skip
    assert not out.any(), "the image gradient of no boxes is zeros"
    assert (
        consumer.crop_and_resize_grad_boxes(None, (0, 2, 2, 3), image, f32,
                                            image.shape, None, None, i64, None, 0,
                                            0, 0, 0) == ok
    )  # fmt: skip
    # The same calls through the NumPy API succeed: nothing to compare but
    # that, and the shapes.
    assert cropgrad.crop_and_resize(image, np.zeros((0, 4)), [], [3, 3]).shape == (
        0, 3, 3, 3)  # fmt: skip
    # A NULL pointer for an array that is not empty is an error, not a crash.
    status, position, message = consumer.crop_and_resize(
        None, f32, image.shape, None, None, i64, 0, 3, 3, 0, 0.0, 0, None, 0, 0
    )
    assert (status, position) == (C["CG_ERR_VALUE"], -1)
    assert message == (
        "image is NULL but its shape holds 480 bytes (NULL is only for an empty array)"
    )


def test_codes_only_c_can_pass_have_documented_messages(consumer):
    image = np.ones((1, 4, 4, 1), np.float32)
    boxes = np.array([[0, 0, 1, 1]], np.float32)
    index = np.zeros(1, np.int32)
    crops = np.zeros((1, 2, 2, 1), np.float32)
    f32, i32 = C["CG_FLOAT32"], C["CG_INT32"]

    def forward(image_dtype=f32, index_dtype=i32, method=0, layout=0, threads=0):
        return consumer.crop_and_resize(image, image_dtype, image.shape, boxes, index,
                                        index_dtype, 1, 2, 2, method, 0.0, layout,
                                        crops, threads, 0)  # fmt: skip

    v, t = C["CG_ERR_VALUE"], C["CG_ERR_TYPE"]
    assert forward(method=2) == (v, -1, fuzz_capi.method_message(2, False))
    assert forward(layout=-1) == (v, -1, fuzz_capi.layout_message(-1))
    assert forward(threads=1025) == (v, -1, fuzz_capi.threads_message(1025))
    assert forward(image_dtype=12)[2] == (
        "image_dtype must be CG_UINT8, CG_INT8, CG_UINT16, CG_INT16, CG_INT32, "
        "CG_INT64, CG_FLOAT16, CG_FLOAT32, CG_FLOAT64 or CG_BFLOAT16, got 12 "
        "(not a dtype code)"
    )
    assert forward(index_dtype=f32) == (
        t, -1, "box_ind_dtype must be CG_INT32 or CG_INT64, got CG_FLOAT32 (8)"
    )  # fmt: skip
    status, _, message = consumer.crop_and_resize_grad_boxes(
        crops, crops.shape, image, f32, image.shape, boxes, index, i32,
        np.zeros((1, 4), np.float32), 1, 0, 0, 0,
    )  # fmt: skip
    assert (status, message) == (v, fuzz_capi.method_message(1, True))
    assert not crops.any()


def test_c_header_table_and_layout(c_modules):
    addresses = cropgrad.capi.function_addresses()
    for module in c_modules:
        facts = module.header_facts()
        assert facts["version"] == cropgrad.capi.api_version() == (1, 2)
        assert len(facts["table"]) == 14
        major, minor = facts["version"]
        assert facts["runtime_version"] == (major << 16) | minor
        assert facts["error_layout"] == (528, 0, 8, 16)
        assert ctypes.sizeof(capi_ctypes.CgError) == 528
        assert capi_ctypes.ERROR_DTYPE.itemsize == 528
        # The header's table holds every function at its address.
        assert facts["table"] == addresses
        assert (
            module.default_threads() == cropgrad.show_config("dicts")["default_threads"]
        )


def test_docs_ctypes_and_numba_examples_run():
    """docs/capi.md's ctypes examples (and the Numba one, with Numba) run,
    with the public codes, and give the NumPy API's bits."""
    docs = os.path.join(HERE, os.pardir, "docs", "capi.md")
    if not os.path.exists(docs):
        pytest.skip("the documentation is not beside the tests")
    with open(docs) as f:
        text = f.read()
    (record,) = re.findall(r"```python\n(class CgError.*?)```", text, re.S)
    section = text[text.index("## From ctypes, cffi or Numba") :]
    crop, roi, numba_block = re.findall(r"```python\n(.*?)```", section, re.S)
    namespace = {"ctypes": ctypes}
    for block in (record, crop, roi):
        exec(block, namespace)
    n = namespace
    assert n["status"] == cropgrad.capi.CG_OK and n["err"].status == 0
    expected = cropgrad.crop_and_resize(n["image"], n["boxes"], n["box_ind"], (7, 7))
    assert fuzz_capi.same_bits(n["crops"], expected)
    expected = cropgrad.roi_align(
        n["features"], n["rois"], n["roi_ind"], 7, spatial_scale=1 / 4,
        sampling_ratio=2, aligned=True,
    )  # fmt: skip
    assert fuzz_capi.same_bits(n["pooled"], expected)
    if importlib.util.find_spec("numba") is None and not REQUIRE:
        return
    exec(numba_block, namespace)
    crops = np.full_like(n["crops"], np.nan)
    err = np.zeros(1, capi_ctypes.ERROR_DTYPE)
    shape = np.array(n["image"].shape, np.int64)
    status = n["crop"](n["image"], shape, n["boxes"], n["box_ind"], crops, err)
    assert status == cropgrad.capi.CG_OK and err["status"][0] == 0
    assert fuzz_capi.same_bits(crops, n["crops"])


def _header():
    with open(os.path.join(cropgrad.get_include(), "cropgrad", "capi.h")) as f:
        return f.read()


def test_header_codes_match_capi_pxd():
    text = _header()
    codes = {name: int(v) for name, v in re.findall(r"\b(CG_[A-Z0-9_]+) = (\d+)", text)}
    assert codes == cropgrad.capi._CODES
    versions = dict(re.findall(r"#define (CG_API_VERSION_M\w+) (\d+)", text))
    assert tuple(int(versions[k]) for k in sorted(versions)) == (
        cropgrad.capi.api_version()
    )
    assert '#define CROPGRAD_CAPSULE_NAME "cropgrad.capi._C_API"' in text


def _probe_source(name):
    return (
        '#include <Python.h>\n#include "capi.h"\n'
        f'static struct PyModuleDef m = {{PyModuleDef_HEAD_INIT, "{name}"}};\n'
        f"PyMODINIT_FUNC PyInit_{name}(void) {{\n"
        "    if (cropgrad_import() < 0) return NULL;\n"
        "    return PyModule_Create(&m);\n}\n"
    )


def test_import_refuses_an_incompatible_runtime(tmp_path):
    """Modules built against a later minor and another major fail to import."""
    major, minor = cropgrad.capi.api_version()
    header = _header()
    later = header.replace(
        f"#define CG_API_VERSION_MINOR {minor}",
        f"#define CG_API_VERSION_MINOR {minor + 1}",
    )
    other = header.replace(
        f"#define CG_API_VERSION_MAJOR {major}",
        f"#define CG_API_VERSION_MAJOR {major + 1}",
    )
    same = header
    assert later != header and other != header
    setup = (
        "from setuptools import Extension, setup\n"
        "setup(name='probes', version='0', ext_modules=[\n"
        "    Extension('later_minor', ['later/probe.c'], include_dirs=['later']),\n"
        "    Extension('other_major', ['other/probe.c'], include_dirs=['other']),\n"
        "    Extension('same_version', ['same/probe.c'], include_dirs=['same']),\n"
        "])\n"
    )
    files = {"setup.py": setup}
    for folder, text, name in (
        ("later", later, "later_minor"),
        ("other", other, "other_major"),
        ("same", same, "same_version"),
    ):
        files[f"{folder}/capi.h"] = text
        files[f"{folder}/probe.c"] = _probe_source(name)
    with pytest.raises(ImportError) as later_error:
        capi_build.build(None, str(tmp_path), ["later_minor"], files)
    assert str(later_error.value) == (
        f"cropgrad's C-level API is version {major}.{minor}, but this module was "
        f"built against version {major}.{minor + 1}: it needs a cropgrad whose "
        f"C-level API is {major}.{minor + 1} or a later {major}.x"
    )
    with pytest.raises(
        ImportError, match=rf"built against version {major + 1}\.{minor}"
    ):
        capi_build.build(None, str(tmp_path / "again"), ["other_major"], files)
    (module,) = capi_build.build(None, str(tmp_path / "ok"), ["same_version"], files)
    assert module.__name__ == "same_version"


# --------------------------------------------------------------------------
# RoIAlign (C-level API 1.1)

ROI_OPS = fuzz_capi.ROI_OPS
# Each op's arrays by fuzz_capi's names (its "out" is the C "output").
ROI_ARRAYS = {
    "roi_forward": ("image", "boxes", "box_ind", "out"),
    "roi_grad_image": ("grads", "boxes", "box_ind", "out"),
    "roi_grad_boxes": ("grads", "image", "boxes", "box_ind", "out"),
    "roi_jvp_boxes": ("image", "boxes", "boxes_tangent", "box_ind", "out"),
}


def _roi_problem(op, arith=np.float32, index_dtype=np.int64, layout=1, seed=0):
    """A valid RoIAlign problem of `op` in fuzz_capi's terms, every array
    holding bytes: boxes inside and partly outside the image, one flipped,
    one on whole pixels; float32 arithmetic reads a float32, uint8 or float16
    image (by `seed`), and the options change with `seed` too."""
    rng = np.random.default_rng([seed, ROI_OPS.index(op), layout])
    arith = np.dtype(arith)
    batch, height, width, channels = 4, 7, 6, 3
    num_boxes, out_size = 5, (3, 2)
    image_dtype = (
        arith if arith == np.float64 else (np.float32, np.uint8, np.float16)[seed % 3]
    )
    image = rng.standard_normal((batch, height, width, channels)) * 20
    if image_dtype == np.uint8:
        # In range: a float cast out of an integer's range is undefined
        # (and warns on AArch64).
        image = np.clip(image, 0, 255)
    image = image.astype(image_dtype)
    grads = rng.standard_normal((num_boxes, *out_size, channels)).astype(arith)
    boxes = rng.uniform(-2, 10, (num_boxes, 4))
    boxes[0] = np.round(boxes[0])
    boxes[1, 2:] = boxes[1, :2] - 1.5
    if layout == 1:
        image, grads = (
            np.ascontiguousarray(a.transpose(0, 3, 1, 2)) for a in (image, grads)
        )
    p = {
        "op": op,
        "layout": layout,
        "num_threads": 0,
        "flush": seed % 2,
        "record": True,
        "spatial_scale": (0.5, 1.0, 2.0)[seed % 3],
        "sampling_ratio": (-1, 2, 0)[seed % 3],
        "aligned": (seed + 1) % 2,
        "arith": arith,
        "boxes": boxes.astype(arith),
        "box_ind": rng.integers(0, batch, num_boxes).astype(index_dtype),
    }
    if op == "roi_grad_image":
        p.update(grads=grads, image_size=image.shape, out_dtype=arith)
        p["out"] = np.full(image.shape, 7, arith)
        return p
    p["image"] = image
    if op == "roi_grad_boxes":
        p.update(grads=grads, out=np.full((num_boxes, 4), 7, arith))
        return p
    p.update(out_size=out_size, out_dtype=arith, out=np.full(grads.shape, 7, arith))
    if op == "roi_jvp_boxes":
        p["boxes_tangent"] = rng.standard_normal((num_boxes, 4)).astype(arith)
    return p


@pytest.mark.parametrize("layout", [0, 1], ids=["NHWC", "NCHW"])
@pytest.mark.parametrize("index_dtype", [np.int32, np.int64], ids=["int32", "int64"])
@pytest.mark.parametrize("arith", [np.float32, np.float64], ids=["float32", "float64"])
@pytest.mark.parametrize("op", ROI_OPS)
def test_roi_ops_match_numpy_api(consumer, op, arith, index_dtype, layout):
    for seed in range(3):
        p = _roi_problem(op, arith, index_dtype, layout, seed)
        expected = fuzz_capi.numpy_result(dict(p, out=p["out"].copy(), num_threads=1))
        assert expected[0] == "ok", expected
        default = cropgrad.show_config("dicts")["default_threads"]
        with starting_teams() as parallel:
            for threads in (0, 1, 2, 3):
                p["out"][...] = 7
                result = fuzz_capi.c_call(consumer, dict(p, num_threads=threads))
                assert result == (0, -1, ""), (seed, threads)
                assert parallel.last_team() == (threads or default)
                assert fuzz_capi.same_bits(p["out"], expected[1]), (seed, threads)
        if expected[1].dtype == np.float32 and op != "roi_grad_boxes":
            # Another output dtype: the same sums rounded once.
            p.update(out_dtype=np.dtype(np.float16), out=p["out"].astype(np.float16))
            expected = fuzz_capi.numpy_result(dict(p, out=p["out"].copy()))
            assert fuzz_capi.c_call(consumer, p) == (0, -1, "")
            assert fuzz_capi.same_bits(p["out"], expected[1])


def _refused(consumer, p, overrides=None):
    """The C call's result with a record and without (which must agree), the
    output checked untouched by both."""
    before = p["out"].copy()
    result = fuzz_capi.c_call(consumer, p, overrides=overrides)
    without = fuzz_capi.c_call(consumer, dict(p, record=False), overrides=overrides)
    assert without == result[:1], (without, result)
    assert fuzz_capi.same_bits(p["out"], before), "an error, yet the output was written"
    return result


@pytest.mark.parametrize("op", ROI_OPS)
def test_roi_null_pointers_with_bytes_are_refused(consumer, op):
    p = _roi_problem(op)
    for name in ROI_ARRAYS[op]:
        c_name = "output" if name == "out" else name
        message = fuzz_capi.null_message(c_name, p[name].nbytes)
        assert _refused(consumer, p, {"null": (name,)}) == (
            C["CG_ERR_VALUE"], -1, message)  # fmt: skip


@pytest.mark.parametrize("arith", [np.float32, np.float64], ids=["float32", "float64"])
@pytest.mark.parametrize("op", ROI_OPS)
def test_roi_codes_only_c_can_pass(consumer, op, arith):
    p = _roi_problem(op, arith)
    t = C["CG_ERR_TYPE"]
    other = C["CG_FLOAT32"] if arith == np.float64 else C["CG_FLOAT64"]
    typed = fuzz_capi.roi_typed_text(arith)
    cases = [
        ("box_ind_dtype", C["CG_FLOAT32"], "CG_INT32 or CG_INT64"),
        ("boxes_dtype", other, typed),
        ("boxes_dtype", 99, typed),
    ]
    if "image" in p:
        cases.append(("image_dtype", 11, fuzz_capi.IMAGE_CODES_TEXT))
    if op == "roi_grad_image":
        allowed = "CG_FLOAT32 or CG_FLOAT64 (the arithmetic type)"
        cases.append(("grads_dtype", C["CG_FLOAT16"], allowed))
    if op == "roi_grad_boxes":
        cases.append(("grads_dtype", other, typed))
    if "out_dtype" in p:
        cases.append(("output_dtype", C["CG_INT64"], fuzz_capi.OUTPUT_CODES_TEXT))
    if arith == np.float64 and "out_dtype" in p:
        allowed = "CG_FLOAT32 or CG_FLOAT64 for float64 arithmetic"
        cases.append(("output_dtype", C["CG_BFLOAT16"], allowed))
    for name, code, allowed in cases:
        message = fuzz_capi.code_message(name, allowed, code)
        assert _refused(consumer, p, {name: code}) == (t, -1, message), name
    v = C["CG_ERR_VALUE"]
    assert _refused(consumer, p, {"layout": 2}) == (v, -1, fuzz_capi.layout_message(2))
    assert _refused(consumer, p, {"num_threads": -1}) == (
        v, -1, fuzz_capi.threads_message(-1))  # fmt: skip


ROI_ERRORS = ["not finite", "box_ind", "samples per bin", "sampling_ratio", "overlap"]


def _break(p, kind):
    """Make problem `p` wrong in one way the NumPy API can say too; the
    position the record must name."""
    if kind == "not finite":
        p["boxes"][3, 2] = np.nan
        return 3
    if kind == "box_ind":
        p["box_ind"][4] = -1
        return 4
    if kind == "samples per bin":
        # An adaptive grid of ceil(4e6 / 3) x ceil(... / 2) samples.
        p["boxes"][2] = [0, 0, 8e6, 8e6]
        p["sampling_ratio"] = 0
        return 2
    if kind == "sampling_ratio":
        p["sampling_ratio"] = 4097
        return -1
    # The output starts inside the boxes, as in test_output_overlapping_...
    boxes = p["boxes"]
    buf = np.zeros(boxes.nbytes + p["out"].nbytes, np.uint8)
    p["boxes"] = buf[: boxes.nbytes].view(boxes.dtype).reshape(boxes.shape)
    p["boxes"][...] = boxes
    out = buf[8 : 8 + p["out"].nbytes].view(p["out"].dtype)
    p["out"] = out.reshape(p["out"].shape)
    return -1


@pytest.mark.parametrize("kind", ROI_ERRORS)
@pytest.mark.parametrize("op", ROI_OPS)
def test_roi_error_records_match_numpy_api(consumer, op, kind):
    p = _roi_problem(op, np.float64 if kind == "overlap" else np.float32)
    position = _break(p, kind)
    expected = fuzz_capi.numpy_result(dict(p, out=p["out"]))
    _, status, message = expected
    assert _refused(consumer, p) == (status, position, message)
    documented = {
        "not finite": (C["CG_ERR_VALUE"], "boxes[3] = ["),
        "box_ind": (C["CG_ERR_INDEX"], "box_ind[4] = -1"),
        "samples per bin": (C["CG_ERR_VALUE"], "samples in each bin"),
        "sampling_ratio": (
            C["CG_ERR_VALUE"],
            "sampling_ratio must be at most 4096 (4096 x 4096 samples per bin, "
            "the most a bin may hold), got 4097; 0 or less is adaptive",
        ),
        "overlap": (C["CG_ERR_VALUE"], "out must not share memory with an input"),
    }[kind]
    assert status == documented[0] and documented[1] in message, message


@pytest.mark.parametrize("op", ROI_OPS)
def test_roi_empty_problems_with_null_pointers(consumer, op):
    ok = (0, -1, "")
    # No boxes: NULL boxes, box_ind, tangent, grads and output.
    p = _roi_problem(op)
    p["boxes"] = p["boxes"][:0]
    p["box_ind"] = p["box_ind"][:0]
    empty = ["boxes", "box_ind", "boxes_tangent", "grads"]
    if op != "roi_grad_image":
        p["out"] = p["out"][:0]
        empty.append("out")
    for name in ("grads", "boxes_tangent"):
        if name in p:
            p[name] = p[name][:0]
    before = p["out"].copy()
    assert fuzz_capi.c_call(consumer, p, overrides={"null": empty}) == ok
    if op == "roi_grad_image":
        assert before.all() and not p["out"].any(), "no boxes: a gradient of zeros"
    # No channels: the image (or grads) holds no bytes, nor does the output
    # but the boxes gradient's, which is zeros.
    p = _roi_problem(op)  # NCHW: the channels are axis 1
    for name in ("image", "grads"):
        if name in p:
            p[name] = p[name][:, :0]
    empty = ["image", "grads"]
    if op == "roi_grad_image":
        p["image_size"] = (4, 0, 7, 6)
        p["out"] = np.zeros(p["image_size"], p["arith"])
    elif op != "roi_grad_boxes":
        p["out"] = p["out"][:, :0]
    if p["out"].size == 0:
        empty.append("out")
    assert fuzz_capi.c_call(consumer, p, overrides={"null": empty}) == ok
    if op == "roi_grad_boxes":
        assert not p["out"].any(), "no channels: a boxes gradient of zeros"
