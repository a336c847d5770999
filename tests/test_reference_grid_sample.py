"""The grid_sample NumPy reference against PyTorch's bits and against calculus.

The reference (``cropgrad/_reference/grid_sample/``) is written from
PyTorch's CPU arithmetic, independently of any kernel; the kernels' tests
will trust it.  Here it earns that trust: it reproduces every committed
PyTorch fixture (``tests/data/grid_sample.npz``, made with the AVX2
dispatch) bit for bit, forward, image gradient and grid gradient, float32
and float64, every mode, padding mode and alignment; its fused
multiply-add is correctly rounded; its image gradient is the transpose of
its forward op and its grid gradient the derivative of its forward op.
"""

import doctest
import itertools
from fractions import Fraction

import numpy as np
import pytest
from _helpers import assert_same_bits, load_cases

from cropgrad._reference import grid_sample as ref

CASES = load_cases("grid_sample.npz")
NAMES = sorted(CASES)
COMBOS = list(itertools.product(ref.MODES, ref.PADDING_MODES, (False, True)))


def _args(case):
    return (
        str(case["mode"]),
        str(case["padding_mode"]),
        bool(case["align_corners"]),
    )


def test_fixture_file_covers_the_cases():
    seen = {
        (*_args(c), c["image"].dtype.name)
        for c in CASES.values()
        if c["image"].shape[2:] != (1, 1)
    }
    for combo in COMBOS:
        for dtype in ("float32", "float64"):
            assert (*combo, dtype) in seen
    shapes = [c["image"].shape for c in CASES.values()]
    assert any(s[2:] == (1, 1) for s in shapes)
    assert any(s[1] == 1 for s in shapes) and any(s[0] == 2 for s in shapes)
    assert any(c["grid"].shape[1] == 1 for c in CASES.values())
    assert max(float(np.abs(c["grid"]).max()) for c in CASES.values()) > 100


@pytest.mark.parametrize("name", NAMES)
def test_forward_is_pytorch_bits(name):
    case = CASES[name]
    out = ref.grid_sample(case["image"], case["grid"], *_args(case))
    assert_same_bits(out, case["out"], name)


@pytest.mark.parametrize("name", NAMES)
def test_grad_image_is_pytorch_bits(name):
    case = CASES[name]
    out = ref.grid_sample_grad_image(
        case["grads"], case["grid"], case["image"].shape, *_args(case)
    )
    assert_same_bits(out, case["grad_image"], name)


@pytest.mark.parametrize("name", NAMES)
def test_grad_grid_is_pytorch_bits(name):
    case = CASES[name]
    out = ref.grid_sample_grad_grid(
        case["grads"], case["image"], case["grid"], *_args(case)
    )
    assert_same_bits(out, case["grad_grid"], name)


@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
@pytest.mark.parametrize("dtype", ["f32", "f64"])
def test_scatter_order_is_the_vectors(mode, dtype):
    """Several lanes of a vector add into one pixel in the crowded cases:
    the AVX2 lane count gives PyTorch's bits, other counts do not."""
    case = CASES[f"crowded_{mode}_{dtype}"]
    args = (case["grads"], case["grid"], case["image"].shape, *_args(case))
    lanes = ref.lanes(case["image"].dtype)
    assert lanes == (8 if dtype == "f32" else 4)
    assert_same_bits(ref.grid_sample_grad_image(*args, lanes=lanes), case["grad_image"])
    for other in (1, 2 * lanes):
        out = ref.grid_sample_grad_image(*args, lanes=other)
        assert out.tobytes() != case["grad_image"].tobytes()


# --------------------------------------------------------------------------
# The fused multiply-add


def _exact_fma(a, b, c, T):
    """The correctly rounded ``a * b + c`` from exact rationals."""
    x = Fraction(float(a)) * Fraction(float(b)) + Fraction(float(c))
    if T == np.float64:
        return np.float64(x.numerator / x.denominator)  # correctly rounded
    g = np.float32(x.numerator / x.denominator)
    near = [
        g,
        np.nextafter(g, np.float32(np.inf)),
        np.nextafter(g, np.float32(-np.inf)),
    ]
    return min(
        near, key=lambda v: (abs(Fraction(float(v)) - x), int(v.view(np.int32)) & 1)
    )


def test_fma_known_cases():
    # (1 + 2**-12)**2 (float32) and (1 + 2**-26)(1 + 2**-27) (float64) are halfway
    # between two neighbours; a tiny positive c must round them up, which
    # the sum of the float64 product and c, rounded again, does not.
    a = np.float32(1 + 2**-12)
    assert ref.fma(a, a, np.float32(2**-80)) == np.float32(1 + 2**-11 + 2**-23)
    assert ref.fma(a, a, np.float32(-(2**-80))) == np.float32(1 + 2**-11)
    assert ref.fma(a, a, np.float32(0)) == np.float32(1 + 2**-11)  # to even
    b, d = np.float64(1 + 2**-26), np.float64(1 + 2**-27)  # 1 + 3 * 2**-27 + 2**-53
    assert ref.fma(b, d, np.float64(2**-150)) == 1 + 3 * 2**-27 + 2**-52
    assert ref.fma(b, d, np.float64(0)) == 1 + 3 * 2**-27
    assert b * d + 2**-150 == 1 + 3 * 2**-27
    # The exact residual of a product, which an unfused product loses.
    x = np.float64(0.1)
    assert ref.fma(x, x, -(x * x)) == float(Fraction(0.1) ** 2 - Fraction(float(x * x)))
    assert ref.fma(np.float32(3), np.float32(5), np.float32(-15)) == 0
    assert ref.fma(np.float32(0.5), np.float32(2), np.float32(1)).dtype == np.float32


@pytest.mark.parametrize("T", [np.float32, np.float64])
def test_fma_is_correctly_rounded(T):
    r = np.random.default_rng(7)
    n = 3000
    e = r.integers(-40, 40, (3, n))
    a = np.ldexp(r.random(n) + 1, e[0]).astype(T)
    b = (np.ldexp(r.random(n) + 1, e[1]) * r.choice([-1, 1], n)).astype(T)
    c = (np.ldexp(r.random(n) + 1, e[2]) * r.choice([-1, 1], n)).astype(T)
    c[::3] = (-(a[::3].astype(np.float64) * b[::3])).astype(T)  # cancellation
    got = ref.fma(a, b, c)
    assert got.dtype == T
    for i in range(n):
        assert got[i] == _exact_fma(a[i], b[i], c[i], T), (a[i], b[i], c[i])


# --------------------------------------------------------------------------
# Calculus (float64)


def _problem(seed, shape=(2, 3, 5, 7), out=(4, 6), spread=1.2):
    r = np.random.default_rng(seed)
    image = r.standard_normal(shape)
    grid = r.uniform(-spread, spread, (shape[0], *out, 2))
    grads = r.standard_normal((shape[0], shape[1], *out))
    return image, grid, grads


@pytest.mark.parametrize("mode,padding,aligned", COMBOS)
def test_grad_image_is_the_transpose(mode, padding, aligned):
    """<grid_sample(x, g), c> == <x, grid_sample_grad_image(c, g)>."""
    image, grid, grads = _problem(hash((mode, padding, aligned)) % 2**32)
    out = ref.grid_sample(image, grid, mode, padding, aligned)
    back = ref.grid_sample_grad_image(grads, grid, image.shape, mode, padding, aligned)
    lhs, rhs = np.sum(out * grads), np.sum(image * back)
    scale = np.sum(np.abs(out * grads)) + np.sum(np.abs(image * back))
    assert abs(lhs - rhs) <= 1e-13 * scale


@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
@pytest.mark.parametrize("padding", ref.PADDING_MODES)
@pytest.mark.parametrize("aligned", [False, True])
def test_grad_grid_is_the_derivative(mode, padding, aligned):
    """Central differences of the float64 forward op, at points whose taps
    all lie inside the image and away from pixel boundaries (where the
    op is smooth and the padding does not act)."""
    r = np.random.default_rng(11)
    n, c, h, w = 2, 3, 9, 10
    image = r.standard_normal((n, c, h, w))
    grads = r.standard_normal((n, c, 3, 4))
    # Pixel coordinates in [2, h - 3] with fractions in [0.1, 0.9].
    px = r.integers(2, w - 3, (n, 3, 4)) + r.uniform(0.1, 0.9, (n, 3, 4))
    py = r.integers(2, h - 3, (n, 3, 4)) + r.uniform(0.1, 0.9, (n, 3, 4))
    if aligned:
        gx, gy = 2 * px / (w - 1) - 1, 2 * py / (h - 1) - 1
    else:
        gx, gy = (2 * px + 1) / w - 1, (2 * py + 1) / h - 1
    grid = np.stack([gx, gy], -1)
    got = ref.grid_sample_grad_grid(grads, image, grid, mode, padding, aligned)
    step = 1e-6
    want = np.zeros_like(grid)
    for axis in (0, 1):
        d = np.zeros_like(grid)
        d[..., axis] = step
        hi = ref.grid_sample(image, grid + d, mode, padding, aligned)
        lo = ref.grid_sample(image, grid - d, mode, padding, aligned)
        # Each point's output depends on its own grid entry only.
        want[..., axis] = np.sum((hi - lo) * grads, axis=1) / (2 * step)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)


def test_nearest_has_no_grid_gradient():
    image, grid, grads = _problem(3)
    out = ref.grid_sample_grad_grid(grads, image, grid, "nearest")
    assert out.shape == grid.shape and not out.any()


def test_doctests():
    result = doctest.testmod(ref, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0
