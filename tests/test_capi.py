"""The C-level API: a compiled consumer built against the installed package,
and the exported signatures, pinned.

``tests/capi_consumer/`` is the example of ``docs/capi.md``: an extension
module that cimports ``cropgrad.capi`` and calls the three ops inside
``with nogil``.  It is built here, in a temporary directory, against the
cropgrad that the tests import, and must give the NumPy API's bits.
"""

import ctypes
import importlib.util
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
from conftest import random_problem

import cropgrad
import cropgrad.capi

HERE = os.path.dirname(os.path.abspath(__file__))
CONSUMER = os.path.join(HERE, "capi_consumer")

# The exported functions and their signatures as Cython records them in the
# capsules: a release may add names, never change one of these.
ERROR = "__pyx_t_8cropgrad_4capi_cg_error *"
SIGNATURES = {
    "cg_crop_and_resize": (
        "int (void const *, int, int64_t const *, float const *, void const *, "
        "int, int64_t, int64_t, int64_t, int, float, int, float *, int, int, "
        f"{ERROR})"
    ),
    "cg_crop_and_resize_grad_image": (
        "int (float const *, int64_t const *, float const *, void const *, int, "
        f"int64_t const *, void *, int, int, int, int, int, {ERROR})"
    ),
    "cg_crop_and_resize_grad_boxes": (
        "int (float const *, int64_t const *, void const *, int, int64_t const *, "
        f"float const *, void const *, int, float *, int, int, int, int, {ERROR})"
    ),
    "cg_crop_and_resize_jvp_boxes": (
        "int (void const *, int, int64_t const *, float const *, float const *, "
        "void const *, int, int64_t, int64_t, int64_t, int, int, float *, int, int, "
        f"{ERROR})"
    ),
    "cg_default_threads": "int (void)",
}

# The codes of capi.pxd: numbers compiled into consumers, so never changed.
CODES = {
    "CG_OK": 0,
    "CG_ERR_VALUE": 1,
    "CG_ERR_INDEX": 2,
    "CG_ERR_TYPE": 3,
    "CG_ERR_MEMORY": 4,
    "CG_ERR_UNSUPPORTED": 5,
    "CG_UINT8": 1,
    "CG_INT8": 2,
    "CG_UINT16": 3,
    "CG_INT16": 4,
    "CG_INT32": 5,
    "CG_INT64": 6,
    "CG_FLOAT16": 7,
    "CG_FLOAT32": 8,
    "CG_FLOAT64": 9,
    "CG_BFLOAT16": 10,
    "CG_NHWC": 0,
    "CG_NCHW": 1,
    "CG_BILINEAR": 0,
    "CG_NEAREST": 1,
    "CG_MESSAGE_SIZE": 512,
}


def _capsule_name(capsule):
    get_name = ctypes.pythonapi.PyCapsule_GetName
    get_name.restype = ctypes.c_char_p
    get_name.argtypes = [ctypes.py_object]
    return get_name(capsule).decode()


def test_exported_signatures_are_pinned():
    exported = {
        name: _capsule_name(capsule)
        for name, capsule in cropgrad.capi.__pyx_capi__.items()
    }
    for name, signature in SIGNATURES.items():
        assert exported.get(name) == signature, name


def test_codes_are_pinned():
    assert {k: cropgrad.capi._CODES[k] for k in CODES} == CODES


@pytest.fixture(scope="module")
def consumer(tmp_path_factory):
    """The example consumer, built against the cropgrad the tests import."""
    build = tmp_path_factory.mktemp("consumer")
    for name in ("setup.py", "consumer.pyx"):
        shutil.copy(os.path.join(CONSUMER, name), build)
    package_root = os.path.dirname(os.path.dirname(cropgrad.__file__))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [package_root] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    )
    run = subprocess.run(
        [sys.executable, "setup.py", "build_ext", "--inplace"],
        cwd=build,
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    (path,) = [
        p
        for p in os.listdir(build)
        if p.startswith("consumer.") and p.endswith((".so", ".pyd"))
    ]
    spec = importlib.util.spec_from_file_location("consumer", build / path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _problem(seed):
    rng = np.random.default_rng(seed)
    grads, boxes, box_ind, size = random_problem(
        rng, batch=3, height=11, width=9, depth=6, num_boxes=7, crop=(5, 4)
    )
    image = rng.standard_normal(size).astype(np.float32)
    return grads, boxes, box_ind.astype(np.int64), size, image


@pytest.mark.parametrize("seed", range(4))
def test_consumer_forward_matches_numpy_api(consumer, seed):
    grads, boxes, box_ind, size, image = _problem(seed)
    for nearest in (False, True):
        out = np.full(grads.shape, np.nan, np.float32)
        status, position, message = consumer.crop_and_resize(
            image, boxes, box_ind, out, nearest
        )
        assert (status, position, message) == (0, -1, "")
        method = "nearest" if nearest else "bilinear"
        expected = cropgrad.crop_and_resize(image, boxes, box_ind, [5, 4], method)
        np.testing.assert_array_equal(out.view(np.uint32), expected.view(np.uint32))


@pytest.mark.parametrize("seed", range(4))
def test_consumer_grad_image_matches_numpy_api(consumer, seed):
    grads, boxes, box_ind, size, _ = _problem(seed)
    out = np.full(size, np.nan, np.float64)
    assert consumer.crop_and_resize_grad_image(grads, boxes, box_ind, out)[0] == 0
    expected = cropgrad.crop_and_resize_grad_image(
        grads, boxes, box_ind, size, np.float64, flush_denormals=True
    )
    np.testing.assert_array_equal(out.view(np.uint64), expected.view(np.uint64))


@pytest.mark.parametrize("seed", range(4))
def test_consumer_grad_boxes_matches_numpy_api(consumer, seed):
    grads, boxes, box_ind, _, image = _problem(seed)
    out = np.full((len(boxes), 4), np.nan, np.float32)
    assert (
        consumer.crop_and_resize_grad_boxes(grads, image, boxes, box_ind, out)[0] == 0
    )
    expected = cropgrad.crop_and_resize_grad_boxes(grads, image, boxes, box_ind)
    np.testing.assert_array_equal(out.view(np.uint32), expected.view(np.uint32))


def test_consumer_gets_error_records(consumer):
    grads, boxes, box_ind, size, image = _problem(0)
    out = np.full(size, 7.0, np.float64)
    boxes[3, 2] = np.nan
    status, position, message = consumer.crop_and_resize_grad_image(
        grads, boxes, box_ind, out
    )
    assert (status, position) == (CODES["CG_ERR_VALUE"], 3)
    assert "boxes[3]" in message and "finite" in message
    assert np.all(out == 7.0), "an error record, yet the output was written"

    grads, boxes, box_ind, size, image = _problem(1)
    box_ind[5] = 3  # batch is 3
    crops = np.zeros(grads.shape, np.float32)
    status, position, message = consumer.crop_and_resize(image, boxes, box_ind, crops)
    assert (status, position) == (CODES["CG_ERR_INDEX"], 5)
    assert "box_ind[5] = 3" in message

    box_ind[5] = -1
    out = np.zeros((len(boxes), 4), np.float32)
    status, position, message = consumer.crop_and_resize_grad_boxes(
        grads, image, boxes, box_ind, out
    )
    assert (status, position) == (CODES["CG_ERR_INDEX"], 5)
    assert "box_ind" in message


def test_consumer_default_threads(consumer):
    assert (
        consumer.default_threads() == cropgrad.show_config("dicts")["default_threads"]
    )
