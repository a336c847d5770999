"""The C-level API: a compiled consumer built against the installed package,
and the exported signatures, pinned.

``tests/capi_consumer/`` is the example of ``docs/capi.md``: an extension
module that cimports ``cropgrad.capi`` and calls crop_and_resize's family
and RoIAlign's (float32 and float64, int32 and int64 box_ind, both
layouts) inside ``with nogil``.  It is built here as a wheel from its pyproject.toml and
setup.py (``pip wheel --no-build-isolation``), in a temporary directory,
against the cropgrad that the tests import, and must give the NumPy API's
bits.  The other kinds of consumer are in test_capi_consumers.py.
"""

import ctypes
import os

import capi_build
import numpy as np
import pytest
from _helpers import assert_same_bits, random_problem, starting_teams

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
    "cg_api_version": "int (void)",
    # 1.1
    "cg_roi_align": (
        "int (void const *, int, int64_t const *, void const *, int, void const *, "
        "int, int64_t, int64_t, int64_t, double, int, int, int, void *, int, int, "
        f"int, {ERROR})"
    ),
    "cg_roi_align_grad_image": (
        "int (void const *, int, int64_t const *, void const *, int, void const *, "
        "int, int64_t const *, double, int, int, int, void *, int, int, int, "
        f"{ERROR})"
    ),
    "cg_roi_align_grad_boxes": (
        "int (void const *, int, int64_t const *, void const *, int, "
        "int64_t const *, void const *, int, void const *, int, double, int, int, "
        f"int, void *, int, int, {ERROR})"
    ),
    "cg_roi_align_jvp_boxes": (
        "int (void const *, int, int64_t const *, void const *, void const *, int, "
        "void const *, int, int64_t, int64_t, int64_t, double, int, int, int, "
        f"void *, int, int, int, {ERROR})"
    ),
    # 1.2
    "cg_grid_sample": (
        "int (void const *, int64_t const *, void const *, int64_t const *, int, "
        f"int, int, int, int, void *, int, int, {ERROR})"
    ),
    "cg_grid_sample_grad_image": (
        "int (void const *, int64_t const *, void const *, int64_t const *, int, "
        f"int64_t const *, int, int, int, int, void *, int, int, {ERROR})"
    ),
    "cg_grid_sample_grad_grid": (
        "int (void const *, int64_t const *, void const *, int64_t const *, "
        "void const *, int64_t const *, int, int, int, int, int, void *, int, int, "
        f"{ERROR})"
    ),
    "cg_grid_sample_jvp_grid": (
        "int (void const *, int64_t const *, void const *, void const *, "
        f"int64_t const *, int, int, int, int, int, void *, int, int, {ERROR})"
    ),
}

# The version of the C-level API this release provides (docs/capi.md): a
# release that adds names raises the minor, one that changed a name would
# raise the major.
API_VERSION = (1, 2)

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
    "CG_BICUBIC": 2,
    "CG_ZEROS": 0,
    "CG_BORDER": 1,
    "CG_REFLECTION": 2,
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


def test_codes_are_public_names():
    """Each code is an int attribute of cropgrad.capi (ctypes, cffi, Numba)."""
    names = [k for k in dir(cropgrad.capi) if k.startswith("CG_")]
    public = {k: getattr(cropgrad.capi, k) for k in names}
    assert public == CODES
    assert all(type(v) is int for v in public.values())


def test_version_is_pinned():
    assert cropgrad.capi.api_version() == API_VERSION
    version = ctypes.CFUNCTYPE(ctypes.c_int)(
        cropgrad.capi.function_addresses()["cg_api_version"]
    )
    assert version() == (API_VERSION[0] << 16) | API_VERSION[1]


def test_table_capsule():
    capsule = cropgrad.capi._C_API
    assert _capsule_name(capsule) == "cropgrad.capi._C_API"
    get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
    get_pointer.restype = ctypes.c_void_p
    get_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
    table = get_pointer(capsule, b"cropgrad.capi._C_API")
    # The header's cropgrad_api_t: two ints, then the function pointers.
    major, minor = (ctypes.c_int * 2).from_address(table)
    assert (major, minor) == API_VERSION
    names = [
        "cg_api_version",
        "cg_default_threads",
        "cg_crop_and_resize",
        "cg_crop_and_resize_grad_image",
        "cg_crop_and_resize_grad_boxes",
        "cg_crop_and_resize_jvp_boxes",
        "cg_roi_align",
        "cg_roi_align_grad_image",
        "cg_roi_align_grad_boxes",
        "cg_roi_align_jvp_boxes",
        "cg_grid_sample",
        "cg_grid_sample_grad_image",
        "cg_grid_sample_grad_grid",
        "cg_grid_sample_jvp_grid",
    ]
    pointers = (ctypes.c_void_p * len(names)).from_address(table + 8)
    addresses = cropgrad.capi.function_addresses()
    assert {name: pointers[i] for i, name in enumerate(names)} == addresses
    assert sorted(addresses) == sorted(SIGNATURES)


def test_get_include_holds_the_header():
    header = os.path.join(cropgrad.get_include(), "cropgrad", "capi.h")
    assert os.path.isfile(header)


@pytest.fixture(scope="module")
def consumer(tmp_path_factory):
    """The example consumer's wheel, built against the cropgrad the tests import."""
    (module,) = capi_build.build(
        CONSUMER, str(tmp_path_factory.mktemp("consumer")), ["consumer"]
    )
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


def test_consumer_version(consumer):
    runtime, built_against = consumer.api_version()
    assert built_against == API_VERSION
    assert runtime == (API_VERSION[0] << 16) | API_VERSION[1]


def test_consumer_empty_problems(consumer):
    """Zero boxes and depth 0: the consumer passes NULL for the empty arrays."""
    image = np.ones((2, 5, 4, 3), np.float32)
    no_boxes = np.zeros((0, 4), np.float32)
    no_index = np.zeros(0, np.int64)
    crops = np.zeros((0, 3, 2, 3), np.float32)
    assert consumer.crop_and_resize(image, no_boxes, no_index, crops) == (0, -1, "")
    flat = np.ones((2, 5, 4, 0), np.float32)
    boxes = np.array([[0, 0, 1, 1]], np.float32)
    index = np.zeros(1, np.int64)
    crops = np.zeros((1, 3, 2, 0), np.float32)
    assert consumer.crop_and_resize(flat, boxes, index, crops) == (0, -1, "")
    grads = np.zeros((0, 3, 2, 3), np.float32)
    out = np.full((2, 5, 4, 3), 7.0)
    assert consumer.crop_and_resize_grad_image(grads, no_boxes, no_index, out) == (
        0, -1, "")  # fmt: skip
    assert not out.any()
    out = np.zeros((0, 4), np.float32)
    assert consumer.crop_and_resize_grad_boxes(
        grads, image, no_boxes, no_index, out) == (0, -1, "")  # fmt: skip


# --------------------------------------------------------------------------
# RoIAlign (C-level API 1.1)

ROI_OPS = ["roi_align", "roi_align_grad_image", "roi_align_grad_boxes",
           "roi_align_jvp_boxes"]  # fmt: skip
OUTPUT_SIZE = (3, 2)


def _roi_problem(arith, index_dtype, nchw, seed=0):
    """A RoIAlign problem in `arith` arithmetic (boxes inside, partly outside
    and flipped; options by `seed`), its arrays in the layout `nchw` says."""
    rng = np.random.default_rng([seed, nchw])
    image = rng.standard_normal((3, 8, 7, 4)).astype(arith)  # NHWC
    grads = rng.standard_normal((6, *OUTPUT_SIZE, 4)).astype(arith)
    if nchw:
        image = np.ascontiguousarray(image.transpose(0, 3, 1, 2))
        grads = np.ascontiguousarray(grads.transpose(0, 3, 1, 2))
    boxes = rng.uniform(-2, 10, (6, 4)).astype(arith)
    boxes[1, 2:] = boxes[1, :2] - 1
    return dict(
        image=image,
        grads=grads,
        boxes=boxes,
        box_ind=rng.integers(0, 3, 6).astype(index_dtype),
        tangent=rng.standard_normal((6, 4)).astype(arith),
        nchw=nchw,
        options=dict(
            spatial_scale=(0.5, 1.0, 2.0)[seed % 3],
            sampling_ratio=(-1, 2, 0)[seed % 3],
            aligned=bool(seed % 2),
        ),
    )


def _numpy_roi(op, q, **kw):
    """The NumPy API's result of `op` on problem `q`."""
    kw.update(q["options"], data_format="NCHW" if q["nchw"] else "NHWC")
    image, grads, boxes, box_ind = q["image"], q["grads"], q["boxes"], q["box_ind"]
    if op == "roi_align":
        return cropgrad.roi_align(image, boxes, box_ind, OUTPUT_SIZE, **kw)
    if op == "roi_align_grad_image":
        return cropgrad.roi_align_grad_image(grads, boxes, box_ind, image.shape, **kw)
    if op == "roi_align_grad_boxes":
        return cropgrad.roi_align_grad_boxes(grads, image, boxes, box_ind, **kw)
    return cropgrad.roi_align_jvp_boxes(
        image, boxes, box_ind, q["tangent"], OUTPUT_SIZE, **kw
    )


def _consumer_roi(consumer, op, q, out, num_threads=0):
    """The consumer's call of `op` on problem `q`, writing `out`."""
    kw = dict(q["options"], nchw=q["nchw"], num_threads=num_threads)
    image, grads, boxes, box_ind = q["image"], q["grads"], q["boxes"], q["box_ind"]
    if op == "roi_align":
        return consumer.roi_align(image, boxes, box_ind, out, **kw)
    if op == "roi_align_grad_image":
        return consumer.roi_align_grad_image(grads, boxes, box_ind, out, **kw)
    if op == "roi_align_grad_boxes":
        return consumer.roi_align_grad_boxes(grads, image, boxes, box_ind, out, **kw)
    return consumer.roi_align_jvp_boxes(image, boxes, q["tangent"], box_ind, out, **kw)


@pytest.mark.parametrize("nchw", [True, False], ids=["NCHW", "NHWC"])
@pytest.mark.parametrize("index_dtype", [np.int32, np.int64], ids=["int32", "int64"])
@pytest.mark.parametrize("arith", [np.float32, np.float64], ids=["float32", "float64"])
@pytest.mark.parametrize("op", ROI_OPS)
def test_consumer_roi_align_matches_numpy_api(consumer, op, arith, index_dtype, nchw):
    default = cropgrad.show_config("dicts")["default_threads"]
    for seed in range(3):
        q = _roi_problem(arith, index_dtype, nchw, seed)
        expected = _numpy_roi(op, q, num_threads=1)
        with starting_teams() as parallel:
            for threads in (0, 1, 2, 3):
                out = np.full_like(expected, np.nan)
                result = _consumer_roi(consumer, op, q, out, threads)
                assert result == (0, -1, ""), (seed, threads)
                assert parallel.last_team() == (threads or default)
                assert_same_bits(out, expected, (seed, threads))


def _numpy_message(op, q, exception):
    """The message of the NumPy API's `exception` for `op` on problem `q`."""
    with pytest.raises(exception) as info:
        _numpy_roi(op, q)
    return str(info.value)


@pytest.mark.parametrize("op", ROI_OPS)
def test_consumer_roi_align_error_records(consumer, op):
    value, index = CODES["CG_ERR_VALUE"], CODES["CG_ERR_INDEX"]
    cases = {
        # what is wrong: (its change, status, position, words of the message)
        "a box not finite": ("boxes", (3, 1), np.nan, value, 3, "boxes[3] = ["),
        "box_ind out of range": ("box_ind", 5, 3, index, 5, "box_ind[5] = 3"),
        "too many samples": (
            "boxes", 2, [0, 0, 1e8, 1e8], value, 2, "samples in each bin"),
        "sampling_ratio": ("options", "sampling_ratio", 4097, value, -1,
                           "sampling_ratio must be at most 4096"),
    }  # fmt: skip
    for what, (name, at, bad, status, position, words) in cases.items():
        q = _roi_problem(np.float32, np.int64, True)
        q["options"]["sampling_ratio"] = 0
        out = np.full_like(_numpy_roi(op, q), 7)
        q[name][at] = bad
        exception = IndexError if status == index else ValueError
        message = _numpy_message(op, q, exception)
        assert _consumer_roi(consumer, op, q, out) == (status, position, message)
        assert words in message, what
        assert np.all(out == 7), f"{what}: an error record, yet the output was written"

    # An output overlapping the boxes: the NumPy API's words.
    q = _roi_problem(np.float32, np.int64, True)
    shape = _numpy_roi(op, q).shape
    buf = np.zeros(q["boxes"].size + int(np.prod(shape)), np.float32)
    buf[: q["boxes"].size] = q["boxes"].reshape(-1)
    q["boxes"] = buf[: q["boxes"].size].reshape(q["boxes"].shape)
    out = buf[4 : 4 + int(np.prod(shape))].reshape(shape)
    message = "out must not share memory with an input"
    with pytest.raises(ValueError, match=message):
        _numpy_roi(op, q, out=out)
    assert _consumer_roi(consumer, op, q, out) == (value, -1, message)


@pytest.mark.parametrize("op", ROI_OPS)
def test_consumer_roi_align_empty_problems(consumer, op):
    """No boxes: the consumer passes NULL for every array but the image (or
    the image gradient, which is zeros)."""
    q = _roi_problem(np.float64, np.int32, False)
    for name in ("boxes", "box_ind", "tangent", "grads"):
        q[name] = q[name][:0]
    expected = _numpy_roi(op, q)
    out = np.full_like(expected, 7)
    assert _consumer_roi(consumer, op, q, out) == (0, -1, "")
    assert_same_bits(out, expected)


@pytest.mark.parametrize("op", ["forward", "grad_image", "grad_boxes"])
def test_numpy_api_refuses_an_output_sharing_an_input(op):
    grads, boxes, box_ind, size, image = _problem(2)
    message = "out must not share memory with an input"
    with pytest.raises(ValueError, match=message):
        if op == "forward":
            buf = np.zeros(image.size + grads.size, np.float32)
            image = buf[: image.size].reshape(image.shape)
            out = buf[image.size - 4 : image.size - 4 + grads.size]  # overlaps
            cropgrad.crop_and_resize(
                image, boxes, box_ind, [5, 4], out=out.reshape(grads.shape)
            )
        elif op == "grad_image":
            out = np.zeros(size, np.float32)
            cropgrad.crop_and_resize_grad_image(
                out.reshape(-1)[: grads.size].reshape(grads.shape), boxes, box_ind,
                size, out=out,
            )  # fmt: skip
        else:
            cropgrad.crop_and_resize_grad_boxes(grads, image, boxes, box_ind, out=boxes)


def test_docs_show_the_tested_consumer():
    """docs/capi.md's Cython consumer and its build files are the tested ones."""
    docs = os.path.join(HERE, os.pardir, "docs", "capi.md")
    if not os.path.exists(docs):
        pytest.skip("the documentation is not beside the tests")
    with open(docs) as f:
        text = f.read()
    for name in ("consumer.pyx", "setup.py", "pyproject.toml"):
        with open(os.path.join(CONSUMER, name)) as f:
            assert f.read().rstrip() in text, name
