"""cropgrad.torch's RoIAlign: torchvision's signature and bits, the NumPy
API's bits, derivatives in the input and the boxes under every transform,
torch.compile, torch.export, meta tensors and errors.

torchvision is not imported: its results are the fixtures of
``data/roi_align.npz`` (``data/README.md``).  Skipped when PyTorch is not
installed, unless CROPGRAD_REQUIRE_ADAPTERS=1 (CI sets it).
"""

import inspect

import numpy as np
import pytest
from _helpers import (
    ROI_SPECIAL,
    assert_compiled_step_gives_eager_bits,
    assert_opcheck_passes,
    assert_same_bits,
    load_cases,
    missing,
    roi_case_names,
    roi_case_options,
    run_python,
)

import cropgrad

try:
    import torch
except ImportError:
    missing("PyTorch is not installed", "CROPGRAD_REQUIRE_ADAPTERS")

import ml_dtypes
from torch.func import grad, jacfwd, jacrev, jvp, vjp, vmap

import cropgrad.torch as cgt

CASES = load_cases("roi_align.npz")
COMPUTED = roi_case_names(CASES, exclude=ROI_SPECIAL)
MEMORY = ("contiguous", "channels_last")


def _options(case):
    """The case's options, positional (spatial_scale, sampling_ratio, aligned)."""
    return tuple(roi_case_options(case).values())


def _in_memory(t, memory):
    if memory == "channels_last":
        return t.contiguous(memory_format=torch.channels_last)
    return t


def _rois(boxes, box_ind, dtype=None):
    """torchvision's ``Tensor[K, 5]``: the image index, then the box."""
    boxes = torch.as_tensor(boxes)
    index = torch.as_tensor(box_ind).to(boxes.dtype)[:, None]
    rois = torch.cat([index, boxes], dim=1)
    return rois if dtype is None else rois.to(dtype)


def _box_list(boxes, box_ind, batch):
    """One ``Tensor[L, 4]`` per image (the boxes sorted by image)."""
    box_ind = np.asarray(box_ind)
    assert np.all(np.diff(box_ind) >= 0)
    return [torch.as_tensor(boxes[box_ind == n]) for n in range(batch)]


def _torchvision_boxes(case):
    """The boxes as the fixture's script gave them to torchvision."""
    if str(case["box_format"]) == "list":
        return _box_list(case["boxes"], case["box_ind"], case["image"].shape[0])
    return _rois(case["boxes"], case["box_ind"])


def _numpy_options(scale, ratio, aligned):
    return dict(spatial_scale=scale, sampling_ratio=ratio, aligned=aligned)


# --------------------------------------------------------------------------
# Signature


def test_signature_is_torchvisions():
    parameters = inspect.signature(cgt.roi_align).parameters
    assert [(p.name, p.default) for p in parameters.values()] == [
        ("input", inspect.Parameter.empty),
        ("boxes", inspect.Parameter.empty),
        ("output_size", inspect.Parameter.empty),
        ("spatial_scale", 1.0),
        ("sampling_ratio", -1),
        ("aligned", False),
    ]
    assert all(
        p.kind == inspect.Parameter.POSITIONAL_OR_KEYWORD for p in parameters.values()
    )


def test_ops_are_registered_with_torchvisions_arguments():
    schema = str(torch.ops.cropgrad.roi_align.default._schema)
    assert schema == (
        "cropgrad::roi_align(Tensor image, Tensor boxes, SymInt[] output_size, "
        "float spatial_scale=1., int sampling_ratio=-1, bool aligned=False) "
        "-> Tensor"
    )
    for name in ("roi_align_grad_image", "roi_align_grad_boxes", "roi_align_jvp_boxes"):
        assert hasattr(torch.ops.cropgrad, name)


# --------------------------------------------------------------------------
# torchvision's bits


def test_the_fixtures_are_there():
    assert len(COMPUTED) >= 60
    formats = {str(CASES[n]["box_format"]) for n in COMPUTED}
    assert formats == {"tensor", "list"}


@pytest.mark.parametrize("memory", MEMORY)
@pytest.mark.parametrize("name", COMPUTED)
def test_forward_and_input_gradient_are_torchvision_bits(name, memory):
    case = CASES[name]
    image = _in_memory(torch.from_numpy(case["image"]), memory).requires_grad_()
    out = cgt.roi_align(
        image,
        _torchvision_boxes(case),
        tuple(int(v) for v in case["output_size"]),
        *_options(case),
    )
    assert out.dtype == image.dtype
    assert_same_bits(out.detach().numpy(), case["out"], name)
    out.backward(torch.from_numpy(case["grads"]))
    assert image.grad.dtype == image.dtype
    assert_same_bits(image.grad.numpy(), case["grad_image"], name)


@pytest.mark.parametrize("name", ["special_values_f32", "nan_pixel0_f32"])
def test_special_values_are_the_numpy_apis(name):
    # (Where the NaNs fall in torchvision's results is the NumPy API's
    # tests' concern; here the adapter gives the NumPy API's bits.)
    case = CASES[name]
    scale, ratio, aligned = _options(case)
    size = tuple(int(v) for v in case["output_size"])
    out = cgt.roi_align(
        torch.from_numpy(case["image"]),
        _torchvision_boxes(case),
        size,
        scale,
        ratio,
        aligned,
    )
    expected = cropgrad.roi_align(
        case["image"],
        case["boxes"],
        case["box_ind"],
        size,
        **_numpy_options(scale, ratio, aligned),
    )
    assert_same_bits(out.numpy(), expected, name)


def test_an_int_output_size_is_a_square():
    case = CASES["matrix_sr2_aligned_f32"]
    image = torch.from_numpy(case["image"])
    boxes = _torchvision_boxes(case)
    square = cgt.roi_align(image, boxes, 3, *_options(case))
    assert torch.equal(square, cgt.roi_align(image, boxes, (3, 3), *_options(case)))
    assert square.shape[2:] == (3, 3)


def test_list_and_tensor_boxes_give_the_same_bits():
    case = CASES["multi_image_f64"]
    image = torch.from_numpy(case["image"])
    order = np.argsort(case["box_ind"], kind="stable")
    boxes, box_ind = case["boxes"][order], case["box_ind"][order]
    rois = _rois(boxes, box_ind)
    listed = _box_list(boxes, box_ind, image.shape[0])
    assert len(listed) == 3 and all(len(b) for b in listed)
    assert torch.equal(
        cgt.roi_align(image, rois, (2, 3), 0.5, 2),
        cgt.roi_align(image, listed, (2, 3), 0.5, 2),
    )
    # A tuple is a list.
    assert torch.equal(
        cgt.roi_align(image, tuple(listed), (2, 3), 0.5, 2),
        cgt.roi_align(image, rois, (2, 3), 0.5, 2),
    )


# --------------------------------------------------------------------------
# The NumPy API's bits


def _problem(seed, dtype=torch.float32, batch=2, channels=3, size=(11, 13), k=7):
    """An image, torchvision boxes (some outside, one smaller than a pixel,
    some on whole pixels), the NumPy API's boxes and indices."""
    rng = np.random.default_rng(seed)
    image = torch.from_numpy(rng.standard_normal((batch, channels, *size)) * 4)
    if dtype.is_floating_point:
        image = image.to(dtype)
    else:
        image = image.round().clamp(0, 100).to(dtype)
    lo = rng.uniform(-6, 40, (k, 2))
    boxes = np.concatenate([lo, lo + rng.uniform(1, 30, (k, 2))], axis=1)
    boxes[::3] = np.round(boxes[::3])
    boxes[1:2] = [5, 5, 5.3, 5.2]
    box_ind = rng.integers(0, batch, k)
    return image, boxes, box_ind


def _numpy_image(image):
    """What the NumPy API reads of a tensor: bfloat16 as ml_dtypes'."""
    if image.dtype == torch.bfloat16:
        bits = image.contiguous().view(torch.uint16).numpy()
        return bits.view(ml_dtypes.bfloat16)
    return image.contiguous().numpy()


def _numpy_result(t):
    if t.dtype == torch.bfloat16:
        return t.contiguous().view(torch.uint16).numpy().view(ml_dtypes.bfloat16)
    return t.contiguous().numpy()


DTYPES = (
    torch.float16,
    torch.bfloat16,
    torch.float32,
    torch.float64,
    torch.uint8,
    torch.int32,
)
OPTIONS = [(1.0, -1, False), (0.5, 2, True), (0.25, 0, False), (1.0, 3, True)]


@pytest.mark.parametrize("memory", MEMORY)
@pytest.mark.parametrize("options", OPTIONS, ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_forward_is_the_numpy_apis(dtype, options, memory):
    image, boxes, box_ind = _problem(1, dtype)
    out = cgt.roi_align(
        _in_memory(image, memory), _rois(boxes, box_ind), (4, 3), *options
    )
    expected = cropgrad.roi_align(
        _numpy_image(image), boxes, box_ind, (4, 3), **_numpy_options(*options)
    )
    assert out.dtype == (dtype if dtype.is_floating_point else torch.float32)
    assert out.is_contiguous(
        memory_format=torch.channels_last
        if memory == "channels_last"
        else torch.contiguous_format
    )
    assert_same_bits(_numpy_result(out), expected)


@pytest.mark.parametrize("memory", MEMORY)
@pytest.mark.parametrize("options", OPTIONS, ids=str)
@pytest.mark.parametrize("dtype", DTYPES[:4], ids=str)
def test_derivatives_are_the_numpy_apis(dtype, options, memory):
    image, boxes, box_ind = _problem(2, dtype)
    image = _in_memory(image, memory).requires_grad_()
    rois = _rois(boxes, box_ind).requires_grad_()
    out = cgt.roi_align(image, rois, (2, 3), *options)
    g = torch.randn(out.shape, generator=torch.Generator().manual_seed(3)).to(dtype)
    g = _in_memory(g, memory)
    out.backward(g)
    kw = _numpy_options(*options)
    ng = _numpy_result(g)
    expected_image = cropgrad.roi_align_grad_image(
        ng, boxes, box_ind, tuple(image.shape), **kw
    )
    assert image.grad.dtype == dtype
    assert_same_bits(_numpy_result(image.grad), expected_image)
    expected_boxes = cropgrad.roi_align_grad_boxes(
        ng, _numpy_image(image.detach()), boxes, box_ind, **kw
    )
    # The image index gets zero; the coordinates the NumPy API's gradient
    # in the boxes' dtype.
    assert rois.grad.dtype == rois.dtype
    assert torch.equal(rois.grad[:, 0], torch.zeros(len(boxes), dtype=rois.dtype))
    assert_same_bits(rois.grad[:, 1:].numpy(), expected_boxes.astype(np.float64))
    # Forward mode: the boxes JVP.
    tangent = torch.randn(rois.shape, dtype=torch.float64)
    _, out_t = jvp(
        lambda r: cgt.roi_align(image.detach(), r, (2, 3), *options),
        (rois.detach(),),
        (tangent,),
    )
    expected_t = cropgrad.roi_align_jvp_boxes(
        _numpy_image(image.detach()),
        boxes,
        box_ind,
        tangent[:, 1:].numpy(),
        (2, 3),
        **kw,
    )
    assert out_t.dtype == dtype
    assert_same_bits(_numpy_result(out_t), expected_t)


def test_boxes_of_another_dtype_are_rounded_as_the_numpy_api_rounds_them():
    image, boxes, box_ind = _problem(4, torch.float32)
    for dtype in (torch.float16, torch.bfloat16, torch.float32, torch.float64):
        rois = _rois(boxes, box_ind, dtype)
        out = cgt.roi_align(image, rois, 2, 0.5, 2)
        expected = cropgrad.roi_align(
            image.numpy(),
            rois[:, 1:].to(torch.float64).numpy(),
            box_ind,
            2,
            spatial_scale=0.5,
            sampling_ratio=2,
        )
        assert_same_bits(out.numpy(), expected, str(dtype))


def _without_ml_dtypes(tmp_path, inputs, code):
    """Run `code` in a fresh interpreter that cannot import ml_dtypes, with
    sys, torch and cropgrad.torch (as cgt) imported, `inputs` saved to
    sys.argv[1] and sys.argv[2] for its results; return its stdout and the
    results it saved there."""
    torch.save(inputs, tmp_path / "inputs.pt")
    prelude = (
        "import sys\n"
        "sys.modules['ml_dtypes'] = None\n"
        "import torch\n"
        "import cropgrad.torch as cgt\n"
    )
    done = run_python(
        "-c",
        prelude + code,
        tmp_path / "inputs.pt",
        tmp_path / "out.pt",
        check=False,
        timeout=None,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout, torch.load(tmp_path / "out.pt")


def test_bfloat16_without_ml_dtypes(tmp_path):
    # PyTorch's bfloat16 reaches the kernels as its bits: the adapter needs
    # no ml_dtypes.  Compared with the NumPy API (which does) afterwards.
    image, boxes, box_ind = _problem(5, torch.bfloat16)
    rois = _rois(boxes, box_ind, torch.bfloat16)
    stdout, (out, d_image, d_rois) = _without_ml_dtypes(
        tmp_path,
        (image, rois),
        "image, rois = torch.load(sys.argv[1])\n"
        "image.requires_grad_(); rois.requires_grad_()\n"
        "out = cgt.roi_align(image, rois, (3, 2), 0.5, 2, True)\n"
        "out.backward(torch.ones_like(out))\n"
        "torch.save((out, image.grad, rois.grad), sys.argv[2])\n"
        "try:\n"
        "    import ml_dtypes\n"
        "except ImportError:\n"
        "    print('no ml_dtypes')\n",
    )
    assert stdout.strip() == "no ml_dtypes"
    kw = _numpy_options(0.5, 2, True)
    boxes = rois[:, 1:].float().numpy()  # as rounded to bfloat16
    assert out.dtype == d_image.dtype == d_rois.dtype == torch.bfloat16
    expected = cropgrad.roi_align(_numpy_image(image), boxes, box_ind, (3, 2), **kw)
    assert_same_bits(_numpy_result(out), expected)
    ones = np.ones(out.shape, dtype=ml_dtypes.bfloat16)
    expected = cropgrad.roi_align_grad_image(
        ones, boxes, box_ind, tuple(image.shape), **kw
    )
    assert_same_bits(_numpy_result(d_image), expected)
    expected = cropgrad.roi_align_grad_boxes(
        ones, _numpy_image(image), boxes, box_ind, **kw
    )
    assert_same_bits(_numpy_result(d_rois[:, 1:]), expected.astype(ml_dtypes.bfloat16))


def test_empty_boxes():
    image = torch.rand(2, 3, 8, 8, requires_grad=True)
    for boxes in ([], torch.zeros(0, 5), [torch.zeros(0, 4), torch.zeros(0, 4)]):
        out = cgt.roi_align(image, boxes, (2, 2))
        assert out.shape == (0, 3, 2, 2)
        out.sum().backward()
        assert torch.equal(image.grad, torch.zeros_like(image))


# --------------------------------------------------------------------------
# Derivatives


def _smooth_problem(seed=6):
    """float64 (computed in float64), samples away from pixel boundaries."""
    image, boxes, box_ind = _problem(seed, torch.float64, k=5)
    rng = np.random.default_rng(seed)
    boxes = np.round(boxes) + rng.uniform(0.2, 0.4, boxes.shape)
    return image, boxes, box_ind


@pytest.mark.parametrize("options", OPTIONS[1:], ids=str)
def test_gradcheck_input_and_boxes(options):
    image, boxes, box_ind = _smooth_problem()
    index = torch.as_tensor(box_ind, dtype=torch.float64)[:, None]

    def pooled(image, coordinates):
        return cgt.roi_align(image, torch.cat([index, coordinates], 1), 2, *options)

    inputs = (image.requires_grad_(), torch.from_numpy(boxes).requires_grad_())
    assert torch.autograd.gradcheck(pooled, inputs, check_forward_ad=True)
    # Second order in the input (the image gradient is linear in grads).
    assert torch.autograd.gradgradcheck(
        lambda i: pooled(i, inputs[1].detach()), inputs[:1]
    )


def test_boxes_gradient_against_finite_differences():
    image, boxes, box_ind = _smooth_problem(7)
    rois = _rois(boxes, box_ind).requires_grad_()
    g = torch.randn(len(boxes), 3, 3, 2, dtype=torch.float64)
    loss = (cgt.roi_align(image, rois, (3, 2), 0.5, 2, True) * g).sum()
    (d_rois,) = torch.autograd.grad(loss, rois)
    step = 1e-6
    for k in range(len(boxes)):
        for c in range(1, 5):
            moved = [rois.detach().clone(), rois.detach().clone()]
            moved[0][k, c] += step
            moved[1][k, c] -= step
            up, down = (
                (cgt.roi_align(image, m, (3, 2), 0.5, 2, True) * g).sum() for m in moved
            )
            fd = (up - down) / (2 * step)
            assert abs(float(fd) - float(d_rois[k, c])) <= 1e-6 * (
                1 + abs(float(fd))
            ), (k, c)


def _case():
    image, boxes, box_ind = _smooth_problem(8)
    return image, _rois(boxes, box_ind), (3, 2), (0.5, 2, True)


def test_torch_func_transforms_agree_with_autograd():
    image, rois, size, options = _case()

    def loss(image, rois):
        return cgt.roi_align(image, rois, size, *options).square().sum()

    x, r = image.clone().requires_grad_(), rois.clone().requires_grad_()
    d_image, d_rois = torch.autograd.grad(loss(x, r), (x, r))
    g_image, g_rois = grad(loss, argnums=(0, 1))(image, rois)
    assert torch.equal(g_image, d_image) and torch.equal(g_rois, d_rois)
    out, pullback = vjp(lambda i, b: cgt.roi_align(i, b, size, *options), image, rois)
    v_image, v_rois = pullback(2 * out)
    assert torch.equal(v_image, d_image) and torch.equal(v_rois, d_rois)
    # Jacobians in reverse and forward mode agree; the image index column
    # has none.
    pooled = lambda b: cgt.roi_align(image, b, size, *options)  # noqa: E731
    rev, fwd = jacrev(pooled)(rois), jacfwd(pooled)(rois)
    assert rev.shape == (*out.shape, *rois.shape)
    torch.testing.assert_close(rev, fwd, rtol=1e-12, atol=1e-12)
    assert not rev[..., 0].any() and rev[..., 1:].any()
    # The image Jacobian is the op itself (linear): its JVP is the op on
    # the tangent.
    t = torch.randn_like(image)
    _, out_t = jvp(lambda i: cgt.roi_align(i, rois, size, *options), (image,), (t,))
    assert torch.equal(out_t, cgt.roi_align(t, rois, size, *options))


def test_forward_ad():
    import torch.autograd.forward_ad as fwAD

    image, rois, size, options = _case()
    t_image, t_rois = torch.randn_like(image), torch.randn_like(rois)
    _, expected = jvp(
        lambda i, b: cgt.roi_align(i, b, size, *options),
        (image, rois),
        (t_image, t_rois),
    )
    with fwAD.dual_level():
        out = cgt.roi_align(
            fwAD.make_dual(image, t_image), fwAD.make_dual(rois, t_rois), size, *options
        )
        tangent = fwAD.unpack_dual(out).tangent
    assert torch.equal(tangent, expected)
    # The image index's tangent is not read.
    t_moved = t_rois.clone()
    t_moved[:, 0] = 1e6
    _, moved = jvp(
        lambda i, b: cgt.roi_align(i, b, size, *options),
        (image, rois),
        (t_image, t_moved),
    )
    assert torch.equal(moved, expected)


@pytest.mark.parametrize("mapped", ["image", "boxes", "both"])
def test_vmap_folds_the_problems_into_one_call(mapped):
    image, rois, size, options = _case()
    n = 3
    images = torch.stack([image * (k + 1) for k in range(n)])
    boxes = torch.stack([rois + torch.tensor([0, k, 0, k, 0.5]) for k in range(n)])
    in_dims = {"image": (0, None), "boxes": (None, 0), "both": (0, 0)}[mapped]
    args = (images if in_dims[0] == 0 else image, boxes if in_dims[1] == 0 else rois)

    def one(k):
        return (
            images[k] if in_dims[0] == 0 else image,
            boxes[k] if in_dims[1] == 0 else rois,
        )

    def loss(i, b):
        return cgt.roi_align(i, b, size, *options).square().sum()

    out = vmap(lambda i, b: cgt.roi_align(i, b, size, *options), in_dims)(*args)
    grads = vmap(grad(loss, argnums=(0, 1)), in_dims)(*args)
    for k in range(n):
        assert torch.equal(out[k], cgt.roi_align(*one(k), size, *options))
        g_image, g_rois = grad(loss, argnums=(0, 1))(*one(k))
        assert torch.equal(grads[0][k], g_image)
        assert torch.equal(grads[1][k], g_rois)
    # Forward mode under vmap (jacfwd maps the tangents).
    jac = vmap(jacfwd(lambda i, b: cgt.roi_align(i, b, size, *options), 1), in_dims)(
        *args
    )
    for k in range(n):
        expected = jacfwd(lambda i, b: cgt.roi_align(i, b, size, *options), 1)(*one(k))
        assert torch.equal(jac[k], expected)


def test_vmap_errors_name_the_callers_problem():
    image, rois, size, options = _case()
    boxes = torch.stack([rois, rois])
    boxes[1, 2, 0] = 5  # image 5 of a batch of 2
    with pytest.raises(IndexError, match=r"at index 1 of the axis"):
        vmap(lambda b: cgt.roi_align(image, b, size, *options))(boxes)


def test_missing_derivatives_say_so():
    image, rois, size, options = _case()

    def loss(r):
        return cgt.roi_align(image, r, size, *options).square().sum()

    # Second derivatives in the boxes: no kernel.
    with pytest.raises(NotImplementedError, match="roi_align_grad_boxes"):
        torch.func.hessian(loss)(rois)
    with pytest.raises(NotImplementedError, match="roi_align_jvp_boxes"):
        jacfwd(jacfwd(lambda r: cgt.roi_align(image, r, size, *options)))(rois)


# --------------------------------------------------------------------------
# torch.compile, torch.export, meta tensors, opcheck


@pytest.mark.parametrize("memory", MEMORY)
def test_compiled_forward_and_backward_give_eager_bits(memory):
    image, rois, size, options = _case()
    image = _in_memory(image.float(), memory)
    rois = rois.float()
    assert_compiled_step_gives_eager_bits(
        lambda image, rois: cgt.roi_align(image, rois, size, *options), image, rois
    )


def test_export_keeps_the_op():
    image, rois, size, options = _case()

    class Pool(torch.nn.Module):
        def forward(self, image, rois):
            return cgt.roi_align(image, rois, size, *options)

    exported = torch.export.export(Pool(), (image, rois))
    assert "cropgrad.roi_align" in str(exported.graph)
    assert torch.equal(exported.module()(image, rois), Pool()(image, rois))


def test_meta_tensors_give_shapes_and_dtypes():
    for dtype in (torch.float16, torch.bfloat16, torch.float64, torch.uint8):
        image = torch.empty(2, 4, 10, 12, dtype=dtype, device="meta")
        rois = torch.empty(7, 5, device="meta")
        out = cgt.roi_align(image, rois, (3, 5), 0.25, 2)
        assert out.device.type == "meta"
        assert out.shape == (7, 4, 3, 5)
        assert out.dtype == (dtype if dtype.is_floating_point else torch.float32)
    g = torch.empty(7, 4, 3, 5, device="meta", dtype=torch.bfloat16)
    d_image = torch.ops.cropgrad.roi_align_grad_image(g, rois, [2, 4, 10, 12])
    assert d_image.shape == (2, 4, 10, 12) and d_image.dtype == torch.bfloat16
    d_boxes = torch.ops.cropgrad.roi_align_grad_boxes(g, image, rois)
    assert d_boxes.shape == (7, 4) and d_boxes.dtype == torch.float32


def _opcheck_cases():
    cases = []
    for k, (dtype, memory, n) in enumerate(
        [
            (torch.float32, "contiguous", 5),
            (torch.float64, "channels_last", 4),
            (torch.float16, "contiguous", 3),
            (torch.float32, "channels_last", 0),
        ]
    ):
        image, boxes, box_ind = _problem(20 + k, dtype, k=n)
        image = _in_memory(image, memory).requires_grad_()
        rois = _rois(boxes, box_ind).requires_grad_()
        options = (0.5, k, bool(k % 2))
        cases.append(("roi_align", (image, rois, [3, 2], *options)))
        g = torch.randn(n, 3, 3, 2, dtype=dtype)
        cases.append(
            (
                "roi_align_grad_image",
                (g.requires_grad_(), rois, list(image.shape), *options),
            )
        )
        cases.append(
            (
                "roi_align_grad_boxes",
                (g.detach(), image.detach(), rois.detach(), *options),
            )
        )
        tangent = torch.randn(n, 5, dtype=torch.float64, requires_grad=True)
        cases.append(
            (
                "roi_align_jvp_boxes",
                (image.detach(), rois.detach(), tangent, [3, 2], *options),
            )
        )
    return cases


@pytest.mark.parametrize(
    "name, args", _opcheck_cases(), ids=lambda v: v if isinstance(v, str) else ""
)
def test_opcheck(name, args):
    assert_opcheck_passes(name, args)


# --------------------------------------------------------------------------
# Errors: the NumPy API's type and words for the same mistake


def _numpy_error(**changes):
    image = np.zeros((1, 2, 5, 5), np.float32)
    kw = dict(image=image, boxes=[[0, 0, 2, 2]], box_ind=[0], output_size=2)
    kw.update(changes)
    with pytest.raises(Exception) as info:
        cropgrad.roi_align(
            kw.pop("image"),
            kw.pop("boxes"),
            kw.pop("box_ind"),
            kw.pop("output_size"),
            **kw,
        )
    return info.value


@pytest.mark.parametrize(
    "torch_changes, numpy_changes",
    [
        ({"output_size": 0}, {"output_size": 0}),
        ({"output_size": (2, 3, 4)}, {"output_size": (2, 3, 4)}),
        ({"output_size": 2.5}, {"output_size": 2.5}),
        ({"sampling_ratio": 1.5}, {"sampling_ratio": 1.5}),
        ({"spatial_scale": "1"}, {"spatial_scale": "1"}),
        ({"aligned": 2}, {"aligned": 2}),
        (
            {"boxes": torch.tensor([[0, 0, float("nan"), 2, 2]])},
            {"boxes": [[0, float("nan"), 2, 2]]},
        ),
    ],
)
def test_errors_are_the_numpy_apis(torch_changes, numpy_changes):
    expected = _numpy_error(**numpy_changes)
    kw = dict(
        input=torch.zeros(1, 2, 5, 5),
        boxes=torch.tensor([[0.0, 0, 0, 2, 2]]),
        output_size=2,
    )
    kw.update(torch_changes)
    with pytest.raises(type(expected)) as info:
        cgt.roi_align(**kw)
    assert str(info.value) == str(expected)


@pytest.mark.parametrize(
    "boxes, error, words",
    [
        (torch.zeros(2, 4), ValueError, r"boxes must be 2-D with 5 columns \[image"),
        ([torch.zeros(2, 5)], ValueError, r"boxes\[0\] must be 2-D with 4 columns"),
        (np.zeros((2, 5)), TypeError, "boxes must be a torch.Tensor"),
        (torch.tensor([[2.0, 0, 0, 2, 2]]), IndexError, r"boxes\[0, 0\] = 2"),
        (torch.tensor([[-1.0, 0, 0, 2, 2]]), IndexError, r"\[0, 2\)"),
        (torch.tensor([[1e20, 0, 0, 2, 2]], dtype=torch.float64), IndexError, "1e"),
        (torch.tensor([[float("inf"), 0, 0, 2, 2]]), IndexError, "inf"),
        (torch.tensor([[0.5, 0, 0, 2, 2]]), ValueError, "a whole number"),
        (torch.tensor([[float("nan"), 0, 0, 2, 2]]), ValueError, "a whole number"),
        (torch.tensor([[0, 0, 0, 2, 2]], dtype=torch.complex64), TypeError, "real"),
    ],
)
def test_boxes_errors(boxes, error, words):
    with pytest.raises(error, match=words):
        cgt.roi_align(torch.zeros(2, 2, 5, 5), boxes, 2)


def test_input_errors():
    boxes = torch.tensor([[0.0, 0, 0, 2, 2]])
    with pytest.raises(ValueError, match=r"input must be 4-D \[batch, depth"):
        cgt.roi_align(torch.zeros(2, 5, 5), boxes, 2)
    with pytest.raises(TypeError, match="input must be a torch.Tensor"):
        cgt.roi_align(np.zeros((1, 2, 5, 5)), boxes, 2)
    with pytest.raises(TypeError, match="input must hold real numbers"):
        cgt.roi_align(torch.zeros(1, 2, 5, 5, dtype=torch.bool), boxes, 2)
    with pytest.raises(ValueError, match="meta tensors"):
        cgt.roi_align(torch.zeros(1, 2, 5, 5, device="meta"), boxes, 2)


# --------------------------------------------------------------------------
# The modules: RoIAlign and MultiScaleRoIAlign


def test_roi_align_module_is_the_function():
    image, rois, size, options = _case()
    pool = cgt.RoIAlign(size, *options)
    assert repr(pool) == (
        "RoIAlign(output_size=(3, 2), spatial_scale=0.5, sampling_ratio=2, "
        "aligned=True)"
    )
    assert torch.equal(pool(image, rois), cgt.roi_align(image, rois, size, *options))
    assert not cgt.RoIAlign(2, 1.0, 2).aligned


MULTI_SCALE = load_cases("multi_scale_roi_align.npz")


def _multi_scale_inputs(case, maps):
    features = {m: torch.from_numpy(case[f"feature_{m}"]) for m in maps}
    for m in features.values():
        m.requires_grad_()
    count = len(case["image_sizes"])
    boxes = [torch.from_numpy(case[f"boxes_{n}"]) for n in range(count)]
    sizes = [tuple(int(v) for v in s) for s in case["image_sizes"]]
    return features, boxes, sizes


def _multi_scale_cases():
    cases = []
    for name, case in MULTI_SCALE.items():
        maps = [str(m) for m in case["maps"]]
        pooled = [str(m) for m in case["featmap_names"]]
        cases.append(
            (
                name,
                case,
                maps,
                pooled,
                int(case["canonical_scale"]),
                int(case["canonical_level"]),
            )
        )
    # The pyramid of roi_align.npz: three levels, the default mapping.
    case = CASES["multi_scale_fpn_f32"]
    maps = ["p2", "p3", "p4"]
    cases.append(("multi_scale_fpn_f32", case, maps, maps, 224, 4))
    return cases


@pytest.mark.parametrize(
    "name, case, maps, pooled, canonical_scale, canonical_level",
    _multi_scale_cases(),
    ids=lambda v: v if isinstance(v, str) and v.islower() and "_" in v else "",
)
def test_multi_scale_is_torchvision_bits(
    name, case, maps, pooled, canonical_scale, canonical_level
):
    features, boxes, sizes = _multi_scale_inputs(case, maps)
    pool = cgt.MultiScaleRoIAlign(
        pooled,
        tuple(int(v) for v in case["output_size"]),
        int(case["sampling_ratio"]),
        canonical_scale=canonical_scale,
        canonical_level=canonical_level,
    )
    out = pool(features, boxes, sizes)
    assert pool.scales == case["scales"].tolist()
    if "levels" in case:
        from cropgrad._torch import pyramid

        levels = pyramid.box_levels(
            boxes, *pool.levels, canonical_scale, canonical_level
        )
        assert np.array_equal(levels.numpy(), case["levels"])
        assert len(set(case["levels"].tolist())) == len(pooled)  # every level used
    assert out.dtype == features[pooled[0]].dtype
    assert_same_bits(out.detach().numpy(), case["out"], name)
    out.backward(torch.from_numpy(case["grads"]))
    for m in maps:
        if m in pooled:
            assert_same_bits(features[m].grad.numpy(), case[f"grad_{m}"], m)
        else:
            assert features[m].grad is None


def test_multi_scale_boxes_gradient_is_each_levels():
    case = MULTI_SCALE["fpn4_adaptive_f32"]
    maps = [str(m) for m in case["featmap_names"]]
    features, boxes, sizes = _multi_scale_inputs(case, maps)
    features = {m: f.detach() for m, f in features.items()}
    boxes = [b.clone().requires_grad_() for b in boxes]
    pool = cgt.MultiScaleRoIAlign(maps, (7, 5), 0)
    out = pool(features, boxes, sizes)
    grads = torch.from_numpy(case["grads"])
    out.backward(grads)
    rois = torch.cat(
        [
            torch.cat([torch.full((len(b), 1), float(n)), b.detach()], 1)
            for n, b in enumerate(boxes)
        ]
    )
    gradient = torch.cat([b.grad for b in boxes])
    assert gradient.abs().sum() > 0
    for k, level in enumerate(case["levels"]):
        r = rois[k : k + 1].clone().requires_grad_()
        feature = features[maps[level]]
        one = cgt.roi_align(feature, r, (7, 5), pool.scales[level], 0)
        one.backward(grads[k : k + 1])
        assert torch.equal(gradient[k], r.grad[0, 1:]), k


def test_multi_scale_keeps_the_scales_of_its_first_call():
    case = MULTI_SCALE["canonical_f64"]
    maps = [str(m) for m in case["maps"]]
    features, boxes, sizes = _multi_scale_inputs(case, maps)
    pool = cgt.MultiScaleRoIAlign(maps, 3, 2, canonical_scale=112, canonical_level=3)
    first = pool(features, boxes, sizes)
    # torchvision infers the scales once: other image sizes later change
    # nothing.
    again = pool(features, boxes, [(s[0] * 2, s[1] * 2) for s in sizes])
    assert torch.equal(first, again)
    assert repr(pool) == (
        "MultiScaleRoIAlign(featmap_names=['c3', 'c4', 'c5'], output_size=(3, 3), "
        "sampling_ratio=2)"
    )


def test_multi_scale_errors():
    pool = cgt.MultiScaleRoIAlign(["p2"], 2, 2)
    feature = torch.zeros(1, 2, 8, 8)
    with pytest.raises(ValueError, match="none of featmap_names"):
        pool({"p3": feature}, [torch.zeros(1, 4)], [(32, 32)])
    with pytest.raises(ValueError, match="image_shapes is empty"):
        pool({"p2": feature}, [torch.zeros(1, 4)], [])
    with pytest.raises(ValueError, match=r"boxes\[0\] must be 2-D with 4 columns"):
        pool({"p2": feature}, [torch.zeros(1, 5)], [(32, 32)])


def test_crop_and_resize_bfloat16_without_ml_dtypes(tmp_path):
    # The crop_and_resize family reads and writes bfloat16 tensors without
    # ml_dtypes too: the bits of a process that has it (test_torch.py
    # compares those with the NumPy API's, which reads bfloat16 through
    # ml_dtypes).
    rng = np.random.default_rng(9)
    image = torch.from_numpy(rng.standard_normal((2, 3, 7, 6))).to(torch.bfloat16)
    boxes = torch.from_numpy(rng.uniform(-0.2, 1.2, (4, 4))).float()
    box_ind = torch.tensor([0, 1, 1, 0])
    _, saved = _without_ml_dtypes(
        tmp_path,
        (image, boxes, box_ind),
        "image, boxes, box_ind = torch.load(sys.argv[1])\n"
        "image.requires_grad_(); boxes.requires_grad_()\n"
        "crops = cgt.crop_and_resize(image, boxes, box_ind, (3, 4))\n"
        "crops.backward(torch.ones_like(crops))\n"
        "g = torch.ones(4, 3, 3, 4, dtype=torch.bfloat16)\n"
        "d = cgt.crop_and_resize_grad_image(g, boxes, box_ind, [2, 3, 7, 6], "
        "torch.bfloat16)\n"
        "torch.save((crops, image.grad, boxes.grad, d), sys.argv[2])\n",
    )
    image.requires_grad_()
    b = boxes.clone().requires_grad_()
    crops = cgt.crop_and_resize(image, b, box_ind, (3, 4))
    crops.backward(torch.ones_like(crops))
    g = torch.ones(4, 3, 3, 4, dtype=torch.bfloat16)
    d = cgt.crop_and_resize_grad_image(g, boxes, box_ind, [2, 3, 7, 6], torch.bfloat16)
    expected = (crops, image.grad, b.grad, d)
    for got, want in zip(saved, expected):
        assert got.dtype == want.dtype
        assert torch.equal(
            got.view(-1).view(torch.uint8), want.view(-1).view(torch.uint8)
        )
