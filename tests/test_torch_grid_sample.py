"""cropgrad.torch.grid_sample: torch.nn.functional.grid_sample's signature
and bits, the NumPy API's bits, derivatives in the input and the grid under
every transform, torch.compile, torch.export, meta tensors, opcheck.

PyTorch's bits are the fixtures of ``data/grid_sample.npz`` (PyTorch's AVX2
kernel, whose bits its AVX512 dispatch gives too); the PyTorch installed is
compared too, where it runs one of those.
The same mistakes get the NumPy API's answers: tests/test_same_mistakes.py.
Skipped when PyTorch is not installed, unless CROPGRAD_REQUIRE_ADAPTERS=1
(CI sets it).
"""

import inspect
import itertools
import warnings

import numpy as np
import pytest
from _helpers import (
    assert_compiled_step_gives_eager_bits,
    assert_opcheck_passes,
    assert_same_bits,
    load_cases,
    missing,
)

import cropgrad

try:
    import torch
except ImportError:
    missing("PyTorch is not installed", "CROPGRAD_REQUIRE_ADAPTERS")

import ml_dtypes
import torch.nn.functional as F
from torch.func import grad, jacfwd, jacrev, jvp, vjp, vmap

import cropgrad.torch as cgt

CASES = load_cases("grid_sample.npz")
MODES = ("bilinear", "nearest", "bicubic")
PADDINGS = ("zeros", "border", "reflection")
COMBOS = list(itertools.product(MODES, PADDINGS, (False, True)))
DTYPES = (torch.float32, torch.float64)


def _id(value):
    return str(value).removeprefix("torch.")


def _problem(seed=0, dtype=torch.float32, n=2, c=3, h=5, w=6, out=(4, 3)):
    """An image and a grid reaching beyond [-1, 1] (every padding is read)."""
    g = torch.Generator().manual_seed(seed)
    image = torch.randn(n, c, h, w, generator=g, dtype=torch.float64)
    grid = torch.rand(n, *out, 2, generator=g, dtype=torch.float64) * 2.6 - 1.3
    return image.to(dtype), grid.to(dtype)


def _kw(mode, padding, aligned):
    return {"mode": mode, "padding_mode": padding, "align_corners": aligned}


def _sampled_and_grads(fn, image, grid, cotangent, **kw):
    """fn's samples and autograd's gradients in the image and the grid."""
    x, g = image.clone().requires_grad_(), grid.clone().requires_grad_()
    out = fn(x, g, **kw)
    d_image, d_grid = torch.autograd.grad(out, (x, g), cotangent)
    return out.detach(), d_image, d_grid


def _bits(actual, expected, what):
    if isinstance(actual, torch.Tensor):
        actual = actual.detach().numpy()
    if isinstance(expected, torch.Tensor):
        expected = expected.detach().numpy()
    assert_same_bits(np.asarray(actual), np.asarray(expected), what)


# --------------------------------------------------------------------------
# Bits: PyTorch's fixtures, the NumPy API, the PyTorch installed


def test_the_signature_is_pytorchs():
    def parameters(function):
        return [
            (p.name, p.kind, p.default)
            for p in inspect.signature(function).parameters.values()
        ]

    assert parameters(cgt.grid_sample) == parameters(F.grid_sample)


@pytest.mark.parametrize("name", sorted(CASES))
def test_fixtures_are_pytorch_bits_through_autograd(name):
    case = CASES[name]
    kw = _kw(str(case["mode"]), str(case["padding_mode"]), bool(case["align_corners"]))
    image, grid = torch.from_numpy(case["image"]), torch.from_numpy(case["grid"])
    out, d_image, d_grid = _sampled_and_grads(
        cgt.grid_sample, image, grid, torch.from_numpy(case["grads"]), **kw
    )
    _bits(out, case["out"], f"{name} forward")
    _bits(d_image, case["grad_image"], f"{name} input gradient")
    _bits(d_grid, case["grad_grid"], f"{name} grid gradient")


@pytest.mark.parametrize("dtype", DTYPES, ids=_id)
@pytest.mark.parametrize("mode, padding, aligned", COMBOS)
def test_the_numpy_apis_bits(mode, padding, aligned, dtype):
    kw = _kw(mode, padding, aligned)
    image, grid = _problem(1, dtype)
    ct = torch.randn(2, 3, 4, 3, dtype=dtype)
    out, d_image, d_grid = _sampled_and_grads(cgt.grid_sample, image, grid, ct, **kw)
    x, g, c = image.numpy(), grid.numpy(), ct.numpy()
    _bits(out, cropgrad.grid_sample(x, g, **kw), "forward")
    _bits(d_image, cropgrad.grid_sample_grad_image(c, g, x.shape, **kw), "input")
    _bits(d_grid, cropgrad.grid_sample_grad_grid(c, x, g, **kw), "grid")
    # Forward mode: the grid JVP's kernel, plus the input's part, the op on
    # the zero tangent forward-mode AD gives the input (its only trace: a
    # -0.0 of the kernel comes out +0.0, as in tests/test_torch_matrix.py).
    tangent = torch.randn_like(grid)
    _, along = jvp(lambda g: cgt.grid_sample(image, g, **kw), (grid,), (tangent,))
    expected = cropgrad.grid_sample_jvp_grid(x, g, tangent.numpy(), **kw)
    _bits(along, expected + expected.dtype.type(0.0), "grid JVP")


def _pytorchs_kernel():
    """Skip unless the PyTorch installed runs a kernel with the fixtures'
    bits: its AVX2 one, or its AVX512 one, which adds in AVX2's vectors
    (docs/semantics.md); the build without FMA (DEFAULT) rounds otherwise."""
    capability = torch.backends.cpu.get_cpu_capability()
    if capability not in ("AVX2", "AVX512"):
        pytest.skip(
            f"PyTorch runs its {capability} grid_sample kernel here, whose "
            "bits the fixtures do not hold (they are its AVX2 and AVX512 ones)"
        )


@pytest.mark.parametrize("dtype", DTYPES, ids=_id)
def test_the_installed_pytorch_gives_the_same_bits(dtype):
    # Every combination of options, PyTorch's own grid_sample (2.13.0 and
    # the fixtures' 2.14.1 alike: the same AVX2 kernel, which the AVX512
    # dispatch runs too) against cropgrad's forward, input gradient and grid
    # gradient.
    _pytorchs_kernel()
    for mode, padding, aligned in COMBOS:
        kw = _kw(mode, padding, aligned)
        image, grid = _problem(2, dtype, n=3, c=5, h=6, w=7, out=(5, 9))
        ct = torch.randn(3, 5, 5, 9, dtype=dtype)
        ours = _sampled_and_grads(cgt.grid_sample, image, grid, ct, **kw)
        theirs = _sampled_and_grads(F.grid_sample, image, grid, ct, **kw)
        for what, a, b in zip(("forward", "input", "grid"), ours, theirs):
            _bits(a, b, f"{mode} {padding} {aligned} {what}")


def test_align_corners_none_is_false_without_pytorchs_warning():
    image, grid = _problem(3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        default = cgt.grid_sample(image, grid)
        positional = torch.ops.cropgrad.grid_sample(image, grid, "bilinear", "zeros")
    assert torch.equal(default, cgt.grid_sample(image, grid, align_corners=False))
    assert torch.equal(positional, default)


@pytest.mark.parametrize(
    "dtype", (torch.float16, torch.bfloat16, torch.uint8, torch.int32), ids=_id
)
def test_other_input_dtypes_as_the_numpy_api(dtype):
    image, grid = _problem(4)
    image = (image * 40).to(dtype) if not dtype.is_floating_point else image.to(dtype)
    out = cgt.grid_sample(image, grid, "bicubic", "reflection", True)
    expected_dtype = dtype if dtype.is_floating_point else torch.float32
    assert out.dtype == expected_dtype
    if dtype == torch.bfloat16:
        x = image.view(torch.uint16).numpy().view(ml_dtypes.bfloat16)
        got = out.view(torch.uint16).numpy().view(ml_dtypes.bfloat16)
    else:
        x, got = image.numpy(), out.numpy()
    expected = cropgrad.grid_sample(
        x, grid.numpy(), **_kw("bicubic", "reflection", True)
    )
    _bits(got, expected, str(dtype))


def test_a_grid_in_another_dtype_is_converted_to_the_arithmetic_type():
    image, grid = _problem(5)
    a = cgt.grid_sample(image, grid.double())
    assert torch.equal(a, cgt.grid_sample(image, grid.double().float()))
    g = grid.double().requires_grad_()
    cgt.grid_sample(image, g).sum().backward()
    assert g.grad.dtype == torch.float64


def test_channels_last_gives_the_same_bits():
    image, grid = _problem(6, c=4)
    ct = torch.randn(2, 4, 4, 3)
    last = image.contiguous(memory_format=torch.channels_last)
    for kw in (_kw("bilinear", "zeros", False), _kw("bicubic", "border", True)):
        ours = _sampled_and_grads(cgt.grid_sample, last, grid, ct, **kw)
        expected = _sampled_and_grads(cgt.grid_sample, image, grid, ct, **kw)
        for a, b in zip(ours, expected):
            assert torch.equal(a, b)


# --------------------------------------------------------------------------
# Derivatives


def _smooth_problem(aligned, seed=7, h=5, w=6):
    """float64, every sample inside the image and at least 0.2 pixel away
    from a pixel boundary (where the samples are not smooth in the grid)."""
    rng = np.random.default_rng(seed)
    pixels = rng.integers(1, [w - 2, h - 2], (2, 3, 2, 2)) + rng.uniform(0.2, 0.8)
    size = np.array([w, h])
    if aligned:
        grid = pixels / (size - 1) * 2 - 1
    else:
        grid = (pixels + 0.5) / size * 2 - 1
    image = torch.from_numpy(rng.standard_normal((2, 2, h, w)))
    return image, torch.from_numpy(grid)


@pytest.mark.parametrize(
    "mode, padding, aligned",
    [
        ("bilinear", "zeros", False),
        ("bilinear", "reflection", True),
        ("bicubic", "border", False),
        ("bicubic", "zeros", True),
    ],
)
def test_gradcheck_input_and_grid(mode, padding, aligned):
    image, grid = _smooth_problem(aligned)

    def sampled(image, grid):
        return cgt.grid_sample(image, grid, mode, padding, aligned)

    inputs = (image.requires_grad_(), grid.requires_grad_())
    assert torch.autograd.gradcheck(sampled, inputs, check_forward_ad=True)
    # Second order in the input (the input gradient is linear in grads), and
    # in the grid through the input gradient (its grid derivative is the
    # grid gradient's kernel).
    assert torch.autograd.gradgradcheck(lambda x: sampled(x, grid.detach()), inputs[:1])
    ct = torch.randn(2, 2, 3, 2, dtype=torch.float64)
    assert torch.autograd.gradcheck(
        lambda g: torch.ops.cropgrad.grid_sample_grad_image(
            ct, g, list(image.shape), mode, padding, aligned
        ),
        (grid.detach().clone().requires_grad_(),),
    )


def test_nearest_gradcheck_in_the_input_and_zero_in_the_grid():
    image, grid = _problem(8, torch.float64)
    x = image.clone().requires_grad_()
    g = grid.clone().requires_grad_()
    assert torch.autograd.gradcheck(
        lambda x: cgt.grid_sample(x, grid, "nearest"), (x,), check_forward_ad=True
    )
    cgt.grid_sample(x, g, "nearest").sum().backward()
    assert torch.equal(g.grad, torch.zeros_like(grid))
    _, along = jvp(lambda g: cgt.grid_sample(image, g, "nearest"), (grid,), (grid,))
    assert not along.any()


def test_torch_func_transforms():
    image, grid = _problem(9, torch.float64)
    kw = _kw("bilinear", "border", True)

    def loss(x, g):
        return (cgt.grid_sample(x, g, **kw) ** 2).sum()

    d_image, d_grid = grad(loss, argnums=(0, 1))(image, grid)
    out = cgt.grid_sample(image, grid, **kw)
    ct = 2 * out
    x, g, c = image.numpy(), grid.numpy(), ct.numpy()
    _bits(d_image, cropgrad.grid_sample_grad_image(c, g, x.shape, **kw), "grad")
    _bits(d_grid, cropgrad.grid_sample_grad_grid(c, x, g, **kw), "grad grid")
    _, pull = vjp(lambda x, g: cgt.grid_sample(x, g, **kw), image, grid)
    v_image, v_grid = pull(ct)
    assert torch.equal(v_image, d_image) and torch.equal(v_grid, d_grid)
    # Forward mode in both: the sum of the input's (the op itself, linear)
    # and the grid's (the grid JVP).
    t_image, t_grid = torch.randn_like(image), torch.randn_like(grid)
    _, both = jvp(
        lambda x, g: cgt.grid_sample(x, g, **kw), (image, grid), (t_image, t_grid)
    )
    expected = cgt.grid_sample(t_image, grid, **kw) + torch.from_numpy(
        cropgrad.grid_sample_jvp_grid(x, g, t_grid.numpy(), **kw)
    )
    assert torch.equal(both, expected)
    small = grid[:1, :2, :2]
    assert torch.equal(
        jacrev(lambda g: cgt.grid_sample(image[:1], g, **kw))(small),
        jacfwd(lambda g: cgt.grid_sample(image[:1], g, **kw))(small),
    )


def test_vmap_folds_the_problems_into_one_call():
    images = torch.stack([_problem(s)[0] for s in range(3)])
    grids = torch.stack([_problem(s)[1] for s in range(3)])
    kw = _kw("bicubic", "reflection", False)
    mapped = vmap(lambda x, g: cgt.grid_sample(x, g, **kw))(images, grids)
    one_image = vmap(lambda g: cgt.grid_sample(images[0], g, **kw))(grids)
    for k in range(3):
        assert torch.equal(mapped[k], cgt.grid_sample(images[k], grids[k], **kw))
        assert torch.equal(one_image[k], cgt.grid_sample(images[0], grids[k], **kw))
    # Per-problem gradients: the input gradient scattered problem by problem.
    d_images = vmap(grad(lambda x, g: cgt.grid_sample(x, g, **kw).sum()))(images, grids)
    for k in range(3):
        x = images[k].clone().requires_grad_()
        cgt.grid_sample(x, grids[k], **kw).sum().backward()
        assert torch.equal(d_images[k], x.grad)


def test_vmap_of_forward_mode_pushes_every_tangent():
    # jacfwd's way: the grid JVP under vmap, one tangent per problem.
    image, grid = _problem(14, torch.float64)
    kw = _kw("bilinear", "reflection", True)
    tangents = torch.randn(4, *grid.shape, dtype=torch.float64)

    def along(t):
        return jvp(lambda g: cgt.grid_sample(image, g, **kw), (grid,), (t,))[1]

    mapped = vmap(along)(tangents)
    for k in range(4):
        assert torch.equal(mapped[k], along(tangents[k]))


def test_vmap_errors_name_the_callers_problem():
    image, grid = _problem(10)
    grids = torch.stack([grid, grid])
    grids[1, 0, 1, 2, 0] = float("nan")
    with pytest.raises(ValueError, match=r"at index 1 of the axis"):
        vmap(lambda g: cgt.grid_sample(image, g))(grids)


def test_missing_derivatives_say_so():
    image, grid = _problem(11, torch.float64)

    def loss(g):
        return cgt.grid_sample(image, g).square().sum()

    # Second derivatives in the grid but the input gradient's: no kernel.
    with pytest.raises(NotImplementedError, match="grid_sample_grad_grid"):
        torch.func.hessian(loss)(grid)
    with pytest.raises(NotImplementedError, match="grid_sample_jvp_grid"):
        jacfwd(jacfwd(lambda g: cgt.grid_sample(image[:1, :1], g)))(grid[:1, :1, :1])
    # The grid gradient in the input (reverse over reverse): no kernel.
    x = image.clone().requires_grad_()
    g = grid.clone().requires_grad_()
    loss_xg = cgt.grid_sample(x, g).square().sum()
    (d_grid,) = torch.autograd.grad(loss_xg, g, create_graph=True)
    with pytest.raises(NotImplementedError, match="grid_sample_grad_grid"):
        torch.autograd.grad(d_grid.sum(), x)


# --------------------------------------------------------------------------
# torch.compile, torch.export, meta tensors, opcheck


def test_compiled_forward_and_backward_give_eager_bits():
    image, grid = _problem(12)
    image = image.contiguous(memory_format=torch.channels_last)
    assert_compiled_step_gives_eager_bits(
        lambda image, grid: cgt.grid_sample(image, grid, "bicubic", "border", False),
        image,
        grid,
    )


def test_export_keeps_the_op():
    image, grid = _problem(13)

    class Sample(torch.nn.Module):
        def forward(self, image, grid):
            return cgt.grid_sample(image, grid, "nearest", "reflection", True)

    exported = torch.export.export(Sample(), (image, grid))
    assert "cropgrad.grid_sample" in str(exported.graph)
    assert torch.equal(exported.module()(image, grid), Sample()(image, grid))


def test_meta_tensors_give_shapes_and_dtypes():
    grid = torch.empty(2, 7, 9, 2, device="meta")
    for dtype in (torch.float16, torch.bfloat16, torch.float64, torch.uint8):
        image = torch.empty(2, 4, 10, 12, dtype=dtype, device="meta")
        out = cgt.grid_sample(image, grid, "bicubic")
        assert out.device.type == "meta" and out.shape == (2, 4, 7, 9)
        assert out.dtype == (dtype if dtype.is_floating_point else torch.float32)
        d_grid = torch.ops.cropgrad.grid_sample_grad_grid(out, image, grid)
        arithmetic = torch.float64 if dtype == torch.float64 else torch.float32
        assert d_grid.shape == (2, 7, 9, 2) and d_grid.dtype == arithmetic
    g = torch.empty(2, 4, 7, 9, device="meta", dtype=torch.bfloat16)
    d_image = torch.ops.cropgrad.grid_sample_grad_image(g, grid, [2, 4, 10, 12])
    assert d_image.shape == (2, 4, 10, 12) and d_image.dtype == torch.bfloat16
    with pytest.raises(ValueError, match="grid has 1 batch entries"):
        cgt.grid_sample(image, grid[:1])


def _opcheck_cases():
    cases = []
    for k, (dtype, mode, padding) in enumerate(
        [
            (torch.float32, "bilinear", "zeros"),
            (torch.float64, "bicubic", "reflection"),
            (torch.float32, "nearest", "border"),
        ]
    ):
        image, grid = _problem(20 + k, dtype)
        if k == 1:
            image = image.contiguous(memory_format=torch.channels_last)
        options = (mode, padding, bool(k % 2))
        x, g = image.requires_grad_(), grid.requires_grad_()
        ct = torch.randn(2, 3, 4, 3, dtype=dtype)
        cases += [
            ("grid_sample", (x, g, *options)),
            (
                "grid_sample_grad_image",
                (ct.requires_grad_(), g, list(image.shape), *options),
            ),
            ("grid_sample_grad_grid", (ct.detach(), x.detach(), g.detach(), *options)),
            (
                "grid_sample_jvp_grid",
                (x.detach(), g.detach(), torch.randn_like(grid), *options),
            ),
        ]
    return cases


@pytest.mark.parametrize(
    "name, args", _opcheck_cases(), ids=lambda v: v if isinstance(v, str) else ""
)
def test_opcheck(name, args):
    assert_opcheck_passes(name, args)
