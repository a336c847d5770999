"""cropgrad.torch: the custom ops against the NumPy API, autograd, opcheck,
torch.compile, memory formats and errors.

Skipped when PyTorch is not installed, unless CROPGRAD_REQUIRE_ADAPTERS=1
(CI sets it): then a missing PyTorch fails the run.
"""

import doctest
import functools
import inspect
import os
import re

import ml_dtypes
import numpy as np
import pytest
from _helpers import assert_same_bits, required, run_python, unrequired

import cropgrad
from cropgrad import _core
from cropgrad._api.validation import LAYOUT_CODES

try:
    import torch
except ImportError:
    if required("CROPGRAD_REQUIRE_ADAPTERS"):
        raise
    torch = None
    cgt = None
else:
    import cropgrad.torch as cgt

needs_torch = pytest.mark.skipif(
    torch is None, reason=unrequired("PyTorch is not installed")
)
# NCHW <-> NHWC
TO_NHWC = (0, 2, 3, 1)
TO_NCHW = (0, 3, 1, 2)
# How a test lays out a 4-D NCHW tensor: contiguous NCHW, NCHW in
# channels_last memory, or an NHWC tensor (data_format="NHWC").
LAYOUTS = ("NCHW", "channels_last", "NHWC")
DTYPES = (
    {}
    if torch is None
    else {
        "uint8": torch.uint8,
        "int8": torch.int8,
        "int16": torch.int16,
        "uint16": torch.uint16,
        "int32": torch.int32,
        "int64": torch.int64,
        "float16": torch.float16,
        "float32": torch.float32,
        "float64": torch.float64,
    }
)


def test_import_without_torch_says_how_to_install():
    parent = os.path.dirname(os.path.dirname(os.path.abspath(cropgrad.__file__)))
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); sys.modules['torch'] = None\n"
        "try:\n"
        "    import cropgrad.torch\n"
        "except ImportError as exc:\n"
        "    print(exc)\n"
        "else:\n"
        "    print('imported')\n"
    )
    run = run_python("-c", code, parent, timeout=120, check=True)
    assert 'pip install "cropgrad[torch]"' in run.stdout, run.stdout + run.stderr


@needs_torch
def test_an_older_pytorch_is_refused_at_import():
    code = (
        "import torch\n"
        "torch.__version__ = '2.4.1+cpu'\n"
        "try:\n"
        "    import cropgrad.torch\n"
        "except ImportError as exc:\n"
        "    print(exc)\n"
    )
    run = run_python("-c", code, timeout=120, check=True)
    assert "needs PyTorch 2.5 or newer, found 2.4.1+cpu" in run.stdout, (
        run.stdout + run.stderr
    )


# --------------------------------------------------------------------------
# Problems


def _image_values(rng, shape, dtype):
    """Values of `dtype` that exercise its range (NumPy, NHWC)."""
    np_dtype = np.dtype(str(dtype).removeprefix("torch."))
    if np_dtype.kind == "f":
        return rng.standard_normal(shape).astype(np_dtype)
    info = np.iinfo(np_dtype)
    lo, hi = max(info.min, -1000), min(info.max, 1000)
    return rng.integers(lo, hi, shape, endpoint=True).astype(np_dtype)


def problem(
    seed=0,
    batch=2,
    height=9,
    width=7,
    depth=5,
    num_boxes=6,
    crop=(4, 3),
    image_dtype="float32",
    index_dtype=np.int32,
):
    """NHWC NumPy arrays: image, grads, boxes (some outside, some flipped), box_ind."""
    rng = np.random.default_rng(seed)
    image = _image_values(rng, (batch, height, width, depth), image_dtype)
    grads = rng.standard_normal((num_boxes, *crop, depth)).astype(np.float32)
    boxes = rng.uniform(-0.3, 1.3, (num_boxes, 4)).astype(np.float32)
    box_ind = rng.integers(0, batch, num_boxes).astype(index_dtype)
    return image, grads, boxes, box_ind


def crops_dtype(image_dtype):
    """The dtype of `cgt.crop_and_resize`'s crops from an image of
    `image_dtype` (NumPy): the image's floating dtype, float32 for integers."""
    dtype = np.dtype(image_dtype)
    return dtype if dtype.kind == "f" else np.dtype(np.float32)


def as_torch(array, layout):
    """An NHWC NumPy array as a tensor in `layout` (see LAYOUTS)."""
    t = torch.from_numpy(np.ascontiguousarray(array))
    if layout == "NHWC":
        return t
    t = t.permute(TO_NCHW)
    if layout == "channels_last":
        assert not t.is_contiguous() and t.is_contiguous(
            memory_format=torch.channels_last
        )
        return t
    return t.contiguous()


def as_nhwc(tensor, layout):
    """A result tensor in `layout`, as an NHWC NumPy array."""
    if layout != "NHWC":
        tensor = tensor.permute(TO_NHWC)
    return np.ascontiguousarray(tensor.detach().numpy())


def data_format(layout):
    return "NHWC" if layout == "NHWC" else "NCHW"


def nchw_size(size, layout):
    """An NHWC shape in the order of `layout`."""
    if layout == "NHWC":
        return list(size)
    return [size[i] for i in TO_NCHW]


# --------------------------------------------------------------------------
# The same bits as the NumPy API


@needs_torch
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("method", ["bilinear", "nearest"])
@pytest.mark.parametrize("image_dtype", sorted(DTYPES) or ["-"])
def test_forward_matches_numpy(image_dtype, method, layout):
    image, _, boxes, box_ind = problem(image_dtype=image_dtype)
    crops = cgt.crop_and_resize(
        as_torch(image, layout),
        torch.from_numpy(boxes),
        torch.from_numpy(box_ind),
        (4, 3),
        method,
        -1.5,
        data_format=data_format(layout),
    )
    # The NumPy API's float32 crops, rounded once to the image's dtype.
    expected = cropgrad.crop_and_resize(
        image, boxes, box_ind, (4, 3), method, -1.5
    ).astype(crops_dtype(image.dtype))
    assert crops.dtype == torch.from_numpy(expected).dtype
    assert_same_bits(as_nhwc(crops, layout), expected)
    if layout == "channels_last":
        assert crops.is_contiguous(memory_format=torch.channels_last)
    else:
        assert crops.is_contiguous()


@needs_torch
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("method", ["bilinear", "nearest"])
@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_grad_image_matches_numpy(dtype, method, layout):
    _, grads, boxes, box_ind = problem(seed=1)
    size = [2, 9, 7, 5]
    out = cgt.crop_and_resize_grad_image(
        as_torch(grads, layout),
        torch.from_numpy(boxes),
        torch.from_numpy(box_ind.astype(np.int64)),
        nchw_size(size, layout),
        DTYPES[dtype],
        method,
        data_format=data_format(layout),
    )
    expected = cropgrad.crop_and_resize_grad_image(
        grads, boxes, box_ind, size, dtype, method
    )
    assert out.dtype == DTYPES[dtype]
    assert_same_bits(as_nhwc(out, layout), expected)


@needs_torch
@pytest.mark.parametrize("grads_layout", LAYOUTS[:2])
@pytest.mark.parametrize("image_layout", LAYOUTS[:2])
@pytest.mark.parametrize("image_dtype", ["uint8", "int32", "float16", "float64"])
def test_grad_boxes_matches_numpy(image_dtype, image_layout, grads_layout):
    image, grads, boxes, box_ind = problem(seed=2, image_dtype=image_dtype)
    out = cgt.crop_and_resize_grad_boxes(
        as_torch(grads, grads_layout),
        as_torch(image, image_layout),
        torch.from_numpy(boxes),
        torch.from_numpy(box_ind),
    )
    expected = cropgrad.crop_and_resize_grad_boxes(grads, image, boxes, box_ind)
    assert_same_bits(out.numpy(), expected)


@needs_torch
def test_grad_boxes_of_nhwc_tensors():
    image, grads, boxes, box_ind = problem(seed=3)
    out = cgt.crop_and_resize_grad_boxes(
        torch.from_numpy(grads),
        torch.from_numpy(image),
        torch.from_numpy(boxes),
        torch.from_numpy(box_ind),
        data_format="NHWC",
    )
    expected = cropgrad.crop_and_resize_grad_boxes(grads, image, boxes, box_ind)
    assert_same_bits(out.numpy(), expected)


@needs_torch
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("method", ["bilinear", "nearest"])
@pytest.mark.parametrize("image_dtype", ["float16", "float32", "float64"])
def test_autograd_matches_numpy(image_dtype, method, layout):
    image, grads, boxes, box_ind = problem(seed=4, image_dtype=image_dtype)
    x = as_torch(image, layout).requires_grad_()
    b = torch.from_numpy(boxes.astype(np.float64)).requires_grad_()
    crops = cgt.crop_and_resize(
        x,
        b,
        torch.from_numpy(box_ind),
        (4, 3),
        method,
        data_format=data_format(layout),
    )
    # The gradient arrives in the crops' dtype (the image's).
    grads = grads.astype(crops_dtype(image.dtype))
    crops.backward(as_torch(grads, layout))
    grads = grads.astype(np.float32)
    d_image = cropgrad.crop_and_resize_grad_image(
        grads, boxes, box_ind, image.shape, image.dtype, method
    )
    assert x.grad.dtype == x.dtype
    assert_same_bits(as_nhwc(x.grad, layout), d_image)
    assert b.grad.dtype == torch.float64
    if method == "bilinear":
        d_boxes = cropgrad.crop_and_resize_grad_boxes(grads, image, boxes, box_ind)
        assert_same_bits(b.grad.numpy(), d_boxes.astype(np.float64))
    else:
        assert not b.grad.any()


@needs_torch
def test_grad_image_is_differentiable_in_grads():
    # Its gradient is the forward op: the adjoint identity, bit for bit.
    image, grads, boxes, box_ind = problem(seed=5)
    g = torch.from_numpy(grads).permute(TO_NCHW).requires_grad_()
    out = cgt.crop_and_resize_grad_image(
        g, torch.from_numpy(boxes), torch.from_numpy(box_ind), [2, 5, 9, 7]
    )
    out.backward(torch.from_numpy(image).permute(TO_NCHW))
    expected = cropgrad.crop_and_resize(image, boxes, box_ind, (4, 3))
    assert_same_bits(as_nhwc(g.grad, "NCHW"), expected)


@needs_torch
@pytest.mark.parametrize("num_threads", [1, 2, 3])
def test_thread_counts_give_the_same_bits(num_threads):
    image, grads, boxes, box_ind = problem(seed=6, num_boxes=40, height=30, width=20)
    x = torch.from_numpy(image).permute(TO_NCHW).contiguous().requires_grad_()
    b = torch.from_numpy(boxes).requires_grad_()
    crops = cgt.crop_and_resize(
        x, b, torch.from_numpy(box_ind), (4, 3), num_threads=num_threads
    )
    crops.backward(torch.from_numpy(grads).permute(TO_NCHW))
    assert_same_bits(
        as_nhwc(crops, "NCHW"), cropgrad.crop_and_resize(image, boxes, box_ind, (4, 3))
    )
    assert_same_bits(
        as_nhwc(x.grad, "NCHW"),
        cropgrad.crop_and_resize_grad_image(grads, boxes, box_ind, image.shape),
    )
    assert_same_bits(
        b.grad.numpy(),
        cropgrad.crop_and_resize_grad_boxes(grads, image, boxes, box_ind),
    )


@needs_torch
def test_empty_boxes():
    image = torch.randn(2, 3, 5, 4, requires_grad=True)
    boxes = torch.zeros(0, 4, requires_grad=True)
    box_ind = torch.zeros(0, dtype=torch.int32)
    crops = cgt.crop_and_resize(image, boxes, box_ind, (2, 2))
    assert crops.shape == (0, 3, 2, 2)
    crops.sum().backward()
    assert image.grad.shape == image.shape and not image.grad.any()
    assert boxes.grad.shape == (0, 4)


@needs_torch
def test_flush_denormals_reaches_the_kernel():
    grads = torch.full((1, 1, 1, 1), 1e-39)
    boxes = torch.tensor([[0.5, 0.5, 0.5, 0.5]])
    index = torch.tensor([0])
    ieee = cgt.crop_and_resize_grad_image(grads, boxes, index, [1, 1, 3, 3])
    flushed = cgt.crop_and_resize_grad_image(
        grads, boxes, index, [1, 1, 3, 3], flush_denormals=True
    )
    assert ieee[0, 0, 1, 1] == torch.tensor(1e-39)
    assert flushed[0, 0, 1, 1] == 0


# --------------------------------------------------------------------------
# Memory: inputs read where they are, outputs written in place


class Spy:
    """Records the arguments, by name, that the bridge of cropgrad._core
    receives (then calls it): what the kernel reads and writes."""

    def __init__(self, monkeypatch, name):
        self.calls = []
        original = getattr(_core, name)
        signature = inspect.signature(original)

        @functools.wraps(original)  # the kernels read its signature
        def spy(*args, **kwargs):
            self.calls.append(signature.bind(*args, **kwargs).arguments)
            return original(*args, **kwargs)

        monkeypatch.setattr(_core, name, spy)


def pointer(array):
    return array.__array_interface__["data"][0]


@needs_torch
@pytest.mark.parametrize("layout", LAYOUTS)
def test_forward_reads_the_image_in_place(monkeypatch, layout):
    spy = Spy(monkeypatch, "crop_and_resize")
    image, _, boxes, box_ind = problem(seed=7)
    x = as_torch(image, layout)
    b = torch.from_numpy(boxes)
    i = torch.from_numpy(box_ind.astype(np.int64))
    crops = cgt.crop_and_resize(x, b, i, (4, 3), data_format=data_format(layout))
    (args,) = spy.calls
    # channels_last NCHW is NHWC in memory: the NHWC kernel reads it.
    assert args["layout"] == LAYOUT_CODES["NCHW" if layout == "NCHW" else "NHWC"]
    assert pointer(args["image"]) == x.data_ptr()
    assert pointer(args["boxes"]) == b.data_ptr()
    assert pointer(args["box_ind"]) == i.data_ptr()
    assert pointer(args["out"]) == crops.data_ptr()


@needs_torch
@pytest.mark.parametrize("layout", LAYOUTS)
def test_grad_image_reads_grads_in_place(monkeypatch, layout):
    spy = Spy(monkeypatch, "crop_and_resize_grad_image")
    _, grads, boxes, box_ind = problem(seed=8)
    g = as_torch(grads, layout)
    out = cgt.crop_and_resize_grad_image(
        g,
        torch.from_numpy(boxes),
        torch.from_numpy(box_ind),
        nchw_size([2, 9, 7, 5], layout),
        torch.float16,
        data_format=data_format(layout),
    )
    (args,) = spy.calls
    assert args["layout"] == LAYOUT_CODES["NCHW" if layout == "NCHW" else "NHWC"]
    assert pointer(args["grads"]) == g.data_ptr()
    assert pointer(args["out"]) == out.data_ptr()
    if layout == "channels_last":
        assert out.is_contiguous(memory_format=torch.channels_last)


@needs_torch
def test_nhwc_view_of_nchw_memory_goes_to_the_nchw_kernel(monkeypatch):
    spy = Spy(monkeypatch, "crop_and_resize_grad_boxes")
    image, grads, boxes, box_ind = problem(seed=9)
    x = torch.from_numpy(image).permute(TO_NCHW).contiguous().permute(TO_NHWC)
    g = torch.from_numpy(grads).permute(TO_NCHW).contiguous().permute(TO_NHWC)
    out = cgt.crop_and_resize_grad_boxes(
        g, x, torch.from_numpy(boxes), torch.from_numpy(box_ind), data_format="NHWC"
    )
    (args,) = spy.calls
    assert args["layout"] == LAYOUT_CODES["NCHW"]
    assert pointer(args["grads"]) == g.data_ptr()
    assert pointer(args["image"]) == x.data_ptr()
    assert pointer(args["out"]) == out.data_ptr()
    expected = cropgrad.crop_and_resize_grad_boxes(grads, image, boxes, box_ind)
    assert_same_bits(out.numpy(), expected)


@needs_torch
@pytest.mark.parametrize("layout", LAYOUTS)
def test_an_eager_call_checks_its_metadata_once(monkeypatch, layout):
    # The plan runs the gate; the kernel then calls the bridge, which checks
    # only the data.
    gates = []

    def counted(check):
        def run(*args):
            gates.append(check.__name__)
            return check(*args)

        return run

    for name in (
        "check_crop_and_resize",
        "check_crop_and_resize_jvp_boxes",
        "check_crop_and_resize_grad_image",
        "check_crop_and_resize_grad_boxes",
    ):
        monkeypatch.setattr(_core, name, counted(getattr(_core, name)))
    image, grads, boxes, box_ind = problem(seed=11)
    x, g = as_torch(image, layout), as_torch(grads, layout)
    b, i = torch.from_numpy(boxes), torch.from_numpy(box_ind)
    fmt = data_format(layout)
    size = nchw_size([2, 9, 7, 5], layout)
    calls = [
        lambda: cgt.crop_and_resize(x, b, i, (4, 3), data_format=fmt),
        lambda: cgt.crop_and_resize_grad_image(g, b, i, size, data_format=fmt),
        lambda: cgt.crop_and_resize_grad_boxes(g, x, b, i, data_format=fmt),
        lambda: torch.ops.cropgrad.crop_and_resize_jvp_boxes(
            x, b, i, b, [4, 3], "bilinear", fmt
        ),
    ]
    for call in calls:
        gates.clear()
        call()
        assert len(gates) == 1, gates


@needs_torch
def test_strided_inputs_are_copied_once():
    image, _, boxes, box_ind = problem(seed=10)
    wide = torch.from_numpy(np.repeat(image, 2, axis=2)).permute(TO_NCHW)
    x = wide[:, :, :, ::2]  # neither layout is contiguous
    crops = cgt.crop_and_resize(
        x, torch.from_numpy(boxes), torch.from_numpy(box_ind), (4, 3)
    )
    expected = cropgrad.crop_and_resize(image, boxes, box_ind, (4, 3))
    assert_same_bits(as_nhwc(crops, "NCHW"), expected)


# --------------------------------------------------------------------------
# torch.library.opcheck


def _opcheck_cases():
    """(id, op name, args): varied inputs for torch.library.opcheck."""
    if torch is None:
        return []
    cases = []
    for k, (dtype, method, layout, n) in enumerate(
        [
            ("uint8", "bilinear", "NCHW", 5),
            ("float16", "nearest", "NCHW", 4),
            ("float32", "bilinear", "channels_last", 6),
            ("float64", "nearest", "channels_last", 3),
            ("float32", "bilinear", "NHWC", 5),
            ("float64", "bilinear", "NCHW", 0),
            ("int16", "bilinear", "channels_last", 2),
        ]
    ):
        image, _, boxes, box_ind = problem(
            seed=20 + k,
            num_boxes=n,
            image_dtype=dtype,
            index_dtype=np.int64 if k % 2 else np.int32,
        )
        x = as_torch(image, layout)
        if x.dtype.is_floating_point:
            x = x.clone().requires_grad_()
        b = torch.from_numpy(boxes).requires_grad_(method == "bilinear")
        args = (
            x,
            b,
            torch.from_numpy(box_ind),
            [4, 3],
            method,
            0.5,
            data_format(layout),
            None,
            False,
        )
        cases.append(
            (f"forward-{dtype}-{method}-{layout}-{n}", "crop_and_resize", args)
        )
    for k, (dtype, method, layout, n) in enumerate(
        [
            (torch.float32, "bilinear", "NCHW", 5),
            (torch.float16, "nearest", "channels_last", 4),
            (torch.float64, "bilinear", "NHWC", 3),
            (torch.float32, "nearest", "NCHW", 0),
        ]
    ):
        _, grads, boxes, box_ind = problem(seed=40 + k, num_boxes=n)
        g = as_torch(grads, layout).clone().requires_grad_()
        args = (
            g,
            torch.from_numpy(boxes),
            torch.from_numpy(box_ind),
            nchw_size([2, 9, 7, 5], layout),
            dtype,
            method,
            data_format(layout),
            2,
            False,
        )
        cases.append(
            (
                f"grad_image-{dtype}-{method}-{layout}-{n}",
                "crop_and_resize_grad_image",
                args,
            )
        )
    for k, (dtype, layouts, n) in enumerate(
        [
            ("float32", ("NCHW", "NCHW"), 5),
            ("uint8", ("channels_last", "NCHW"), 3),
            ("float64", ("NHWC", "NHWC"), 0),
        ]
    ):
        image, grads, boxes, box_ind = problem(
            seed=60 + k, num_boxes=n, image_dtype=dtype
        )
        args = (
            as_torch(grads, layouts[1]),
            as_torch(image, layouts[0]),
            torch.from_numpy(boxes),
            torch.from_numpy(box_ind),
            "bilinear",
            data_format(layouts[0]),
            None,
            True,
        )
        cases.append(
            (
                f"grad_boxes-{dtype}-{layouts[0]}-{layouts[1]}-{n}",
                "crop_and_resize_grad_boxes",
                args,
            )
        )
    for k, (dtype, layout, n) in enumerate(
        [("float32", "NCHW", 4), ("int16", "channels_last", 3), ("float64", "NHWC", 0)]
    ):
        image, _, boxes, box_ind = problem(seed=70 + k, num_boxes=n, image_dtype=dtype)
        # Differentiable in the tangent (its reverse mode in the image has no
        # kernel).
        x = as_torch(image, layout)
        tangent = torch.randn(n, 4, dtype=torch.float64, requires_grad=True)
        args = (
            x,
            torch.from_numpy(boxes),
            torch.from_numpy(box_ind),
            tangent,
            [4, 3],
            "bilinear",
            data_format(layout),
            None,
            False,
        )
        cases.append(
            (f"jvp_boxes-{dtype}-{layout}-{n}", "crop_and_resize_jvp_boxes", args)
        )
    return cases


OPCHECK_CASES = _opcheck_cases()


@needs_torch
def test_opcheck_covers_enough_inputs():
    assert len(OPCHECK_CASES) >= 10


@needs_torch
@pytest.mark.parametrize(
    "op_name, args",
    [c[1:] for c in OPCHECK_CASES] or [("-", ())],
    ids=[c[0] for c in OPCHECK_CASES] or ["-"],
)
def test_opcheck(op_name, args):
    op = getattr(torch.ops.cropgrad, op_name).default
    result = torch.library.opcheck(op, args)
    assert set(result.values()) == {"SUCCESS"}, result


# --------------------------------------------------------------------------
# torch.compile


def _train_step(image, boxes, box_ind, weight, method, data_format):
    crops = cgt.crop_and_resize(
        image, boxes, box_ind, (5, 3), method, data_format=data_format
    )
    return crops, (crops * weight).sum()


@needs_torch
@pytest.mark.parametrize(
    "layout, method",
    [("NCHW", "bilinear"), ("channels_last", "nearest"), ("NHWC", "bilinear")],
)
def test_compiled_forward_and_backward_give_eager_bits(layout, method):
    torch._dynamo.reset()
    image, grads, boxes, box_ind = problem(seed=11, crop=(5, 3))
    results = []
    for fn in (_train_step, torch.compile(_train_step, fullgraph=True)):
        x = as_torch(image, layout).clone().requires_grad_()
        b = torch.from_numpy(boxes).clone().requires_grad_()
        crops, loss = fn(
            x,
            b,
            torch.from_numpy(box_ind),
            as_torch(grads, layout),
            method,
            data_format(layout),
        )
        loss.backward()
        results.append((crops.detach(), x.grad, b.grad))
    for eager, compiled in zip(*results):
        assert eager.stride() == compiled.stride()
        assert_same_bits(compiled.numpy(), eager.numpy())


@needs_torch
def test_compiled_image_gradient_gives_eager_bits():
    torch._dynamo.reset()
    _, grads, boxes, box_ind = problem(seed=12)

    def fn(g, b, i):
        return cgt.crop_and_resize_grad_image(g, b, i, [2, 5, 9, 7], torch.float64)

    g = torch.from_numpy(grads).permute(TO_NCHW).contiguous()
    args = (g, torch.from_numpy(boxes), torch.from_numpy(box_ind))
    compiled = torch.compile(fn, fullgraph=True)(*args)
    assert_same_bits(compiled.numpy(), fn(*args).numpy())


# --------------------------------------------------------------------------
# Numerical gradients.  The ops compute in float32 whatever the input dtype,
# so the inputs are chosen to make float32 exact where it can be: values and
# steps on a grid of powers of two (x +- eps converts to float32 exactly) and
# sampling coordinates that float32 computes exactly.  What remains is the
# rounding of the float32 arithmetic, bounded below for each check.

U = 2.0**-24  # float32 unit roundoff


def _grid_values(rng, shape, step, bound):
    """float64 multiples of `step` in [-bound, bound]: exact in float32."""
    n = int(bound / step)
    return torch.from_numpy(rng.integers(-n, n, shape, endpoint=True) * step)


def _exact_boxes(rng, num_boxes, height, width, crop, margin):
    """Boxes whose sampling coordinates float32 computes exactly, and whose
    samples all lie more than `margin` pixels from a pixel boundary (where the
    forward op has a kink).

    Box coordinates are multiples of 2**-10 and ``crop - 1`` is a power of
    two, so ``y1 * (H - 1) + y * ((y2 - y1) * (H - 1) / (crop - 1))`` is
    exact in float32.
    """
    boxes = []
    while len(boxes) < num_boxes:
        box = rng.integers(51, 973, 4) / 1024.0
        coords = []
        for lo, hi, size, n in (
            (box[0], box[2], height, crop[0]),
            (box[1], box[3], width, crop[1]),
        ):
            coords += [
                lo * (size - 1) + k * (hi - lo) * (size - 1) / (n - 1) for k in range(n)
            ]
        if all(abs(c - round(c)) > margin for c in coords):
            boxes.append(box)
    return torch.tensor(np.array(boxes), dtype=torch.float64)


def _gradcheck(fn, x, eps, atol):
    """Check fn's gradient in its one input x against central differences
    of step eps, within the absolute bound atol alone (no relative slack)."""
    assert torch.autograd.gradcheck(fn, (x,), eps=eps, atol=atol, rtol=0)


@needs_torch
@pytest.mark.parametrize("method", ["bilinear", "nearest"])
def test_gradcheck_image(method):
    rng = np.random.default_rng(13)
    eps = 2.0**-6
    # Pixels are multiples of eps in [-2, 2], so image +- eps is exact in
    # float32.  The bilinear forward, upper = tl + (tr - tl) * x_lerp, then
    # upper + (lower - upper) * y_lerp, has |error| <= 28 U for such pixels
    # (nearest: exact); a central difference divides two such errors by 2 eps.
    image = _grid_values(rng, (2, 3, 6, 5), eps, 2.0).requires_grad_()
    boxes = torch.tensor(rng.uniform(-0.2, 1.2, (5, 4)), dtype=torch.float32)
    box_ind = torch.tensor(rng.integers(0, 2, 5))
    atol = 2 * 28 * U / (2 * eps)
    _gradcheck(
        lambda x: cgt.crop_and_resize(x, boxes, box_ind, (4, 3), method),
        image,
        eps,
        atol,
    )


@needs_torch
def test_gradcheck_boxes():
    rng = np.random.default_rng(14)
    height, width, crop = 8, 6, (5, 3)
    eps = 2.0**-7
    # A step of eps moves a sample by at most eps * (size - 1) pixels: keep
    # every sample farther than that from a kink, where the forward op is
    # linear in each box coordinate (exact coordinates; pixels as above).
    margin = 1.01 * eps * (max(height, width) - 1)
    boxes = _exact_boxes(rng, 4, height, width, crop, margin).requires_grad_()
    image = _grid_values(rng, (2, 3, height, width), 2.0**-6, 2.0).float()
    box_ind = torch.tensor([0, 1, 1, 0], dtype=torch.int32)
    atol = 2 * 28 * U / (2 * eps)
    _gradcheck(
        lambda b: cgt.crop_and_resize(image, b, box_ind, crop),
        boxes,
        eps,
        atol,
    )


@needs_torch
@pytest.mark.parametrize("method", ["bilinear", "nearest"])
def test_gradcheck_image_gradient(method):
    rng = np.random.default_rng(15)
    eps = 2.0**-6
    num_boxes, crop = 3, (3, 3)
    grads = _grid_values(rng, (num_boxes, 2, *crop), eps, 2.0).requires_grad_()
    boxes = torch.tensor(rng.uniform(-0.2, 1.2, (num_boxes, 4)), dtype=torch.float32)
    box_ind = torch.tensor([0, 1, 0])
    # Each update adds a product of two float32 roundings (|grads| <= 2,
    # weights <= 1) into the float64 output, and at most every sample of
    # every box lands on one pixel.
    samples = num_boxes * crop[0] * crop[1]
    atol = 2 * samples * 2 * 2 * U / (2 * eps)
    _gradcheck(
        lambda g: cgt.crop_and_resize_grad_image(
            g, boxes, box_ind, [2, 2, 5, 4], torch.float64, method
        ),
        grads,
        eps,
        atol,
    )


# --------------------------------------------------------------------------
# A small RoI model


@needs_torch
@pytest.mark.parametrize("memory_format", ["contiguous", "channels_last"])
def test_roi_model_trains(memory_format):
    torch.manual_seed(0)
    conv = torch.nn.Conv2d(3, 8, 3, padding=1)
    head = torch.nn.Linear(8 * 4 * 4, 2)
    images = torch.randn(2, 3, 16, 16)
    if memory_format == "channels_last":
        conv = conv.to(memory_format=torch.channels_last)
        images = images.to(memory_format=torch.channels_last)
    boxes = torch.rand(6, 2) * 0.5
    boxes = torch.cat([boxes, boxes + 0.4], dim=1)  # [y1, x1, y2, x2]
    box_ind = torch.tensor([0, 0, 0, 1, 1, 1])
    targets = torch.randn(6, 2)
    optimizer = torch.optim.SGD([*conv.parameters(), *head.parameters()], lr=0.05)
    losses = []
    for _ in range(20):
        optimizer.zero_grad()
        features = torch.relu(conv(images))
        crops = cgt.crop_and_resize(features, boxes, box_ind, (4, 4))
        loss = torch.nn.functional.mse_loss(head(crops.flatten(1)), targets)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert all(np.isfinite(losses))
    assert losses[-1] < 0.5 * losses[0], losses


# --------------------------------------------------------------------------
# Errors


def _call_forward(**changes):
    args = dict(
        image=torch.zeros(2, 3, 5, 4),
        boxes=torch.tensor([[0.0, 0.0, 1.0, 1.0]]),
        box_ind=torch.tensor([1]),
        crop_size=(2, 2),
    )
    args.update(changes)
    return cgt.crop_and_resize(**args)


def _forward_error_cases():
    """(changes to a good call, exception, words of its message)."""
    if torch is None:
        return []
    return [
        ({"image": np.zeros((2, 3, 5, 4))}, TypeError, "image must be a torch.Tensor"),
        (
            {"image": torch.zeros(2, 3, 5)},
            ValueError,
            "[batch, depth, image_height, image_width]",
        ),
        # The C-level API's message, with the shape in the caller's layout.
        (
            {"image": torch.zeros(2, 3, 0, 4)},
            ValueError,
            "image dimensions must be positive, got shape [2, 3, 0, 4]",
        ),
        (
            {"image": torch.zeros(2, 3, 5, 4, dtype=torch.complex64)},
            TypeError,
            "image must hold real numbers",
        ),
        ({"image": torch.zeros(2, 3, 5, 4, dtype=torch.bool)}, TypeError, "image"),
        ({"image": torch.zeros(2, 3, 5, 4, device="meta")}, ValueError, "CPU"),
        ({"boxes": torch.zeros(1, 3)}, ValueError, "boxes must be 2-D with 4"),
        (
            {"boxes": torch.tensor([[0.0, float("nan"), 1.0, 1.0]])},
            ValueError,
            "boxes must be finite: boxes[0]",
        ),
        ({"box_ind": torch.tensor([2])}, IndexError, "box_ind[0] = 2"),
        ({"box_ind": torch.tensor([-1])}, IndexError, "box_ind[0] = -1"),
        ({"box_ind": torch.tensor([0.0])}, TypeError, "box_ind must hold integers"),
        ({"box_ind": torch.tensor([0, 1])}, ValueError, "box_ind has incompatible"),
        ({"crop_size": (2, 0)}, ValueError, "crop dimensions must be positive"),
        ({"crop_size": (2,)}, ValueError, "crop_size must have 2 elements"),
        ({"crop_size": (2.0, 2)}, TypeError, "crop_size must hold integers"),
        ({"method": "bicubic"}, ValueError, "method must be one of"),
        ({"data_format": "NCWH"}, ValueError, "data_format must be 'NHWC' or 'NCHW'"),
        ({"num_threads": 0}, ValueError, "num_threads"),
        ({"num_threads": 2.0}, TypeError, "num_threads"),
        ({"extrapolation_value": "0"}, TypeError, "extrapolation_value"),
        ({"flush_denormals": None}, TypeError, "flush_denormals"),
    ]


@needs_torch
@pytest.mark.parametrize("changes, error, words", _forward_error_cases())
def test_forward_errors(changes, error, words):
    with pytest.raises(error) as info:
        _call_forward(**changes)
    assert words in str(info.value)


@needs_torch
def test_errors_speak_of_the_callers_layout():
    grads = torch.zeros(1, 3, 2, 2)  # NCHW: depth 3
    boxes = torch.tensor([[0.0, 0.0, 1.0, 1.0]])
    index = torch.tensor([0])
    with pytest.raises(ValueError, match="image_size depth is 4 but grads depth is 3"):
        cgt.crop_and_resize_grad_image(grads, boxes, index, [1, 4, 5, 5])
    with pytest.raises(ValueError, match=r"\[num_boxes, crop_height, crop_width"):
        cgt.crop_and_resize_grad_image(
            grads[0], boxes, index, [1, 5, 5, 3], data_format="NHWC"
        )
    with pytest.raises(ValueError, match="image and grads must have the same depth"):
        cgt.crop_and_resize_grad_boxes(grads, torch.zeros(1, 4, 5, 5), boxes, index)
    with pytest.raises(ValueError, match="boxes and grads have incompatible shape"):
        cgt.crop_and_resize_grad_boxes(
            grads, torch.zeros(1, 3, 5, 5), boxes.repeat(2, 1), index.repeat(2)
        )
    with pytest.raises(TypeError, match="dtype must be"):
        cgt.crop_and_resize_grad_image(grads, boxes, index, [1, 3, 5, 5], np.float32)
    with pytest.raises(TypeError, match="dtype must be"):
        cgt.crop_and_resize_grad_image(grads, boxes, index, [1, 3, 5, 5], torch.int32)
    with pytest.raises(ValueError, match="method must be one of 'bilinear', got"):
        cgt.crop_and_resize_grad_boxes(
            grads, torch.zeros(1, 3, 5, 5), boxes, index, method="nearest"
        )


@needs_torch
def test_data_errors_raise_under_compile():
    torch._dynamo.reset()
    fn = torch.compile(
        lambda x, b, i: cgt.crop_and_resize(x, b, i, (2, 2)), fullgraph=True
    )
    x = torch.zeros(1, 2, 4, 4)
    boxes = torch.tensor([[0.0, 0.0, 1.0, 1.0]])
    fn(x, boxes, torch.tensor([0]))
    with pytest.raises(IndexError, match="box_ind"):
        fn(x, boxes, torch.tensor([3]))


@needs_torch
def test_missing_second_derivatives_say_so():
    image = torch.randn(1, 2, 5, 5, requires_grad=True)
    boxes = torch.tensor([[0.1, 0.1, 0.9, 0.8]], requires_grad=True)
    crops = cgt.crop_and_resize(image, boxes, torch.tensor([0]), (3, 3))
    d_image, d_boxes = torch.autograd.grad(
        crops.square().sum(), (image, boxes), create_graph=True
    )
    # The boxes gradient has no gradient with respect to the image.
    with pytest.raises(
        NotImplementedError,
        match="derivative of crop_and_resize_grad_boxes with respect to the image",
    ):
        d_boxes.sum().backward(retain_graph=True)
    # Forward mode: the image gradient has no boxes JVP.
    with pytest.raises(
        NotImplementedError,
        match="forward-mode derivative of crop_and_resize_grad_image with respect "
        "to boxes",
    ):
        torch.func.jvp(
            lambda b: cgt.crop_and_resize_grad_image(
                crops.detach(), b, torch.tensor([0]), [1, 2, 5, 5]
            ),
            (boxes.detach(),),
            (torch.ones(1, 4),),
        )


@needs_torch
def test_hessian_in_the_image_and_its_refusal_in_the_boxes():
    image = torch.randn(1, 2, 5, 4, dtype=torch.float64)
    boxes = torch.tensor([[0.1, 0.2, 0.8, 0.7]])
    index = torch.tensor([0])

    def loss(x, b):
        return cgt.crop_and_resize(x, b, index, (2, 3)).square().sum()

    # The crops are linear in the image: the Hessian is 2 J^T J, exactly
    # (J's entries are the NumPy API's image-gradient weights).
    hessian = torch.func.hessian(loss)(image, boxes).reshape(40, 40)
    jacobian = torch.func.jacrev(
        lambda x: cgt.crop_and_resize(x, boxes, index, (2, 3))
    )(image).reshape(12, 40)
    torch.testing.assert_close(hessian, 2 * jacobian.T @ jacobian, rtol=0, atol=1e-6)
    assert hessian.abs().sum() > 0
    with pytest.raises(
        NotImplementedError,
        match="forward-mode derivative of crop_and_resize_grad_boxes with respect "
        "to boxes",
    ):
        torch.func.hessian(loss, argnums=1)(image, boxes)


@needs_torch
def test_raw_ops_under_torch_func_say_what_to_call():
    image = torch.randn(1, 2, 5, 5)
    boxes = torch.tensor([[0.1, 0.1, 0.9, 0.8]])
    index = torch.tensor([0])

    def raw(x):
        return torch.ops.cropgrad.crop_and_resize(x, boxes, index, [3, 3])

    with pytest.raises(
        NotImplementedError, match="call cropgrad.torch.crop_and_resize"
    ):
        torch.func.grad(lambda x: raw(x).sum())(image)
    with pytest.raises(
        NotImplementedError, match="call cropgrad.torch.crop_and_resize"
    ):
        torch.func.jvp(raw, (image,), (torch.ones_like(image),))
    # Without torch.func, forward-mode AD through the raw op works, with the
    # public function's bits (never a missing tangent).
    fwad = torch.autograd.forward_ad
    tangent = torch.randn(1, 2, 5, 5)
    with fwad.dual_level():
        out = fwad.unpack_dual(raw(fwad.make_dual(image, tangent))).tangent
    expected = cgt.crop_and_resize(tangent, boxes, index, (3, 3))
    assert_same_bits(out.numpy(), expected.numpy())
    # vmap of the raw op folds the mapped axis like the public function's.
    images = torch.randn(3, 1, 2, 5, 5)
    mapped = torch.func.vmap(raw)(images)
    for k in range(3):
        assert_same_bits(mapped[k].numpy(), raw(images[k]).numpy())


@needs_torch
def test_schemas_have_the_python_defaults():
    image, grads, boxes, box_ind = problem(seed=16)
    x = torch.from_numpy(image).permute(TO_NCHW).contiguous()
    g = torch.from_numpy(grads).permute(TO_NCHW).contiguous()
    b = torch.from_numpy(boxes)
    i = torch.from_numpy(box_ind)
    ops = torch.ops.cropgrad
    assert_same_bits(
        ops.crop_and_resize(x, b, i, [4, 3]).numpy(),
        cgt.crop_and_resize(x, b, i, (4, 3)).numpy(),
    )
    out = ops.crop_and_resize_grad_image(g, b, i, [2, 5, 9, 7])
    assert out.dtype == torch.float32
    assert_same_bits(
        out.numpy(), cgt.crop_and_resize_grad_image(g, b, i, [2, 5, 9, 7]).numpy()
    )
    assert_same_bits(
        ops.crop_and_resize_grad_boxes(g, x, b, i).numpy(),
        cgt.crop_and_resize_grad_boxes(g, x, b, i).numpy(),
    )
    tangent = torch.randn(6, 4)
    assert_same_bits(
        as_nhwc(ops.crop_and_resize_jvp_boxes(x, b, i, tangent, [4, 3]), "NCHW"),
        cropgrad.crop_and_resize_jvp_boxes(
            image, boxes, box_ind, tangent.numpy(), (4, 3)
        ),
    )
    schema = str(ops.crop_and_resize.default._schema)
    assert 'str method="bilinear"' in schema and 'data_format="NCHW"' in schema


@needs_torch
def test_meta_tensors_give_shapes_and_dtypes():
    meta = {"device": "meta"}
    image = torch.empty(2, 3, 9, 7, dtype=torch.float16, **meta)
    boxes = torch.empty(6, 4, **meta)
    index = torch.empty(6, dtype=torch.int64, **meta)
    crops = cgt.crop_and_resize(image, boxes, index, (4, 3))
    assert crops.device.type == "meta"
    assert crops.shape == (6, 3, 4, 3) and crops.dtype == torch.float16
    nhwc = cgt.crop_and_resize(
        image.permute(0, 2, 3, 1), boxes, index, (4, 3), data_format="NHWC"
    )
    assert nhwc.shape == (6, 4, 3, 3)
    grads = torch.empty(6, 3, 4, 3, **meta)
    d_image = cgt.crop_and_resize_grad_image(
        grads, boxes, index, [2, 3, 9, 7], torch.float64
    )
    assert d_image.shape == (2, 3, 9, 7) and d_image.dtype == torch.float64
    d_boxes = cgt.crop_and_resize_grad_boxes(grads, image, boxes, index)
    assert d_boxes.shape == (6, 4) and d_boxes.device.type == "meta"
    # Bad metadata is refused as on the CPU; mixed devices are refused.
    with pytest.raises(ValueError, match="boxes must be 2-D with 4"):
        cgt.crop_and_resize(image, torch.empty(6, 3, **meta), index, (4, 3))
    with pytest.raises(ValueError, match="image_size depth is 4 but grads depth is 3"):
        cgt.crop_and_resize_grad_image(grads, boxes, index, [2, 4, 9, 7])
    with pytest.raises(ValueError, match="all be meta tensors, got image on meta"):
        cgt.crop_and_resize(image, torch.zeros(6, 4), index, (4, 3))


@needs_torch
def test_vmap_errors_name_the_callers_indices():
    image = torch.randn(2, 3, 5, 4)
    boxes = torch.tensor([[0.0, 0.0, 1.0, 1.0], [0.1, 0.2, 0.8, 0.9]])
    index = torch.tensor([[0, 1], [1, 0], [0, 2]])  # problem 2, box 1: outside

    def crop(b, i):
        return cgt.crop_and_resize(image, b, i, (2, 2))

    with pytest.raises(IndexError) as info:
        torch.func.vmap(crop, in_dims=(None, 0))(boxes, index)
    message = str(info.value)
    assert "[0, batch_size) = [0, 2): box_ind[1] = 2" in message, message
    assert "at index 2 of the axis torch.func.vmap maps" in message, message
    bad = boxes.expand(3, 2, 4).clone()
    bad[1, 0, 3] = float("nan")
    with pytest.raises(ValueError, match=r"boxes\[0\].*at index 1 of the axis"):
        torch.func.vmap(crop, in_dims=(0, None))(bad, index[0])
    # Metadata: the shapes of one problem.
    with pytest.raises(ValueError, match=r"got shape \(2, 3\)"):
        torch.func.vmap(crop, in_dims=(0, None))(torch.zeros(3, 2, 3), index[0])
    # The image gradient scatters into one image per problem: a box_ind past
    # one problem's batch is refused, not written into the next problem's.
    grads = torch.randn(3, 2, 3, 2, 2)
    with pytest.raises(IndexError, match="box_ind\\[1\\] = 2 .*index 2 of the axis"):
        torch.func.vmap(
            lambda g, i: cgt.crop_and_resize_grad_image(g, boxes, i, [2, 3, 5, 4])
        )(grads, index)


@needs_torch
def test_float64_gradcheck_needs_steps_float32_resolves():
    # The ops compute in float32 (TensorFlow's arithmetic): at gradcheck's
    # default eps, 1e-6, a float64 step is lost in the float32 rounding of
    # the inputs and results, and the numerical gradient is noise.  Steps of
    # 1e-3 with tolerances of 1e-3 check the derivatives.
    rng = np.random.default_rng(17)
    image = torch.tensor(rng.standard_normal((2, 2, 6, 5)), requires_grad=True)
    boxes = torch.tensor(
        # Every sample farther than a step from a pixel boundary, where the
        # forward op has a kink.
        [[0.13, 0.15, 0.77, 0.9], [0.3, 0.05, 0.7, 0.6]],
        dtype=torch.float64,
        requires_grad=True,
    )
    index = torch.tensor([1, 0])

    def f(x, b):
        return cgt.crop_and_resize(x, b, index, (3, 4))

    assert not torch.autograd.gradcheck(f, (image, boxes), raise_exception=False)
    assert torch.autograd.gradcheck(f, (image, boxes), eps=1e-3, atol=1e-3, rtol=1e-3)
    grads = torch.tensor(rng.standard_normal((2, 2, 3, 4)), requires_grad=True)
    assert torch.autograd.gradcheck(
        lambda g, b: cgt.crop_and_resize_grad_image(
            g, b, index, [2, 2, 6, 5], torch.float64
        ),
        (grads, boxes),
        eps=1e-3,
        atol=1e-3,
        rtol=1e-3,
    )


@needs_torch
def test_cpu_autocast_runs_the_ops_as_outside_it():
    image, grads, boxes, box_ind = problem(seed=18)
    x = torch.from_numpy(image).permute(TO_NCHW).contiguous().requires_grad_()
    b = torch.from_numpy(boxes.astype(np.float64)).requires_grad_()
    i = torch.from_numpy(box_ind)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        crops = cgt.crop_and_resize(x, b, i, (4, 3))
        raw = torch.ops.cropgrad.crop_and_resize(x, b, i, [4, 3])
    # No input was cast: float32 results, the NumPy API's bits, and
    # gradients of the inputs' own dtypes.
    expected = cropgrad.crop_and_resize(image, boxes, box_ind, (4, 3))
    for out in (crops, raw):
        assert out.dtype == torch.float32
        assert_same_bits(as_nhwc(out, "NCHW"), expected)
    crops.backward(torch.from_numpy(grads).permute(TO_NCHW))
    assert x.grad.dtype == torch.float32 and b.grad.dtype == torch.float64
    assert_same_bits(
        b.grad.numpy(),
        cropgrad.crop_and_resize_grad_boxes(grads, image, boxes, box_ind).astype(
            np.float64
        ),
    )


def _bfloat16_image(seed, layout):
    """A bfloat16 image in `layout` and the same bits as ml_dtypes' (NHWC)."""
    image, grads, boxes, box_ind = problem(seed=seed)
    bits = image.astype(ml_dtypes.bfloat16)
    t = as_torch(bits.view(np.uint16), layout).view(torch.bfloat16)
    return t, bits, grads, boxes, box_ind


@needs_torch
@pytest.mark.parametrize("layout", LAYOUTS)
def test_bfloat16_image_and_gradients(layout):
    x, bits, grads, boxes, box_ind = _bfloat16_image(19, layout)
    x.requires_grad_()
    b = torch.from_numpy(boxes).requires_grad_()
    crops = cgt.crop_and_resize(
        x, b, torch.from_numpy(box_ind), (4, 3), data_format=data_format(layout)
    )
    # Read exactly as float32 (the bits of the image converted to float32),
    # the crops rounded once to bfloat16.
    expected = cropgrad.crop_and_resize(bits, boxes, box_ind, (4, 3))
    assert crops.dtype == torch.bfloat16
    assert_same_bits(
        as_nhwc(crops.detach().view(torch.uint16), layout),
        expected.astype(ml_dtypes.bfloat16).view(np.uint16),
    )
    widened = cgt.crop_and_resize(
        x.detach().float(),
        b.detach(),
        torch.from_numpy(box_ind),
        (4, 3),
        data_format=data_format(layout),
    )
    assert_same_bits(
        crops.detach().float().numpy(), widened.to(torch.bfloat16).float().numpy()
    )
    # The gradient arrives in the crops' dtype, bfloat16.
    grads = grads.astype(ml_dtypes.bfloat16).astype(np.float32)
    crops.backward(as_torch(grads, layout).to(torch.bfloat16))
    # The image gradient in the image's dtype, rounded once.
    assert x.grad.dtype == torch.bfloat16
    d_image = cropgrad.crop_and_resize_grad_image(
        grads, boxes, box_ind, bits.shape, "bfloat16"
    )
    assert_same_bits(
        as_nhwc(x.grad.view(torch.uint16), layout), d_image.view(np.uint16)
    )
    d_boxes = cropgrad.crop_and_resize_grad_boxes(grads, bits, boxes, box_ind)
    assert_same_bits(b.grad.numpy(), d_boxes)


@needs_torch
def test_bfloat16_image_gradient_output():
    _, grads, boxes, box_ind = problem(seed=20)
    out = cgt.crop_and_resize_grad_image(
        torch.from_numpy(grads).permute(TO_NCHW),
        torch.from_numpy(boxes),
        torch.from_numpy(box_ind),
        [2, 5, 9, 7],
        torch.bfloat16,
    )
    assert out.dtype == torch.bfloat16
    expected = cropgrad.crop_and_resize_grad_image(
        grads, boxes, box_ind, [2, 9, 7, 5], "bfloat16"
    )
    assert_same_bits(as_nhwc(out.view(torch.uint16), "NCHW"), expected.view(np.uint16))


@needs_torch
def test_bfloat16_autocast_detector_step():
    # A bfloat16 feature map from an autocast convolution is read where it is;
    # the crops come in its dtype and every parameter gets a gradient.
    torch.manual_seed(1)
    conv = torch.nn.Conv2d(3, 4, 3, padding=1)
    head = torch.nn.Linear(4 * 3 * 3, 2)
    images = torch.randn(2, 3, 10, 10)
    boxes = torch.tensor([[0.1, 0.1, 0.7, 0.6], [0.2, 0.3, 0.9, 0.9]])
    box_ind = torch.tensor([0, 1])
    with torch.autocast("cpu", dtype=torch.bfloat16):
        features = conv(images)
        assert features.dtype == torch.bfloat16
        crops = cgt.crop_and_resize(features, boxes, box_ind, (3, 3))
        loss = head(crops.flatten(1)).float().square().sum()
    assert crops.dtype == torch.bfloat16
    expected = cgt.crop_and_resize(features.detach(), boxes, box_ind, (3, 3))
    assert_same_bits(crops.detach().float().numpy(), expected.float().numpy())
    loss.backward()
    assert conv.weight.grad is not None and conv.weight.grad.abs().sum() > 0


@needs_torch
def test_docstring_examples():
    result = doctest.testmod(cgt, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0
    assert result.failed == 0


@needs_torch
def test_readme_example_runs():
    readme = os.path.join(os.path.dirname(__file__), os.pardir, "README.md")
    with open(readme, encoding="utf-8") as f:
        blocks = re.findall(r"```python\n(.*?)```", f.read(), flags=re.S)
    (block,) = [b for b in blocks if "import cropgrad.torch" in b]
    namespace = {}
    exec(block, namespace)
    assert namespace["logits"].shape == (2, 5)
    assert namespace["model"].backbone.weight.grad.abs().sum() > 0
