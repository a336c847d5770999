"""cropgrad.jax's grid sampling: the XLA FFI ops against PyTorch's fixtures
and the NumPy API, bit for bit, under JAX's transformations.

The NumPy API is called with ``flush_denormals=True``, XLA:CPU's
arithmetic; the fixtures (``data/grid_sample.npz``, PyTorch's bits) hold
no subnormal result, so the ops give their bits as they are.  Skipped only
when JAX cannot be imported and CROPGRAD_REQUIRE_ADAPTERS is not 1.
"""

import re

import numpy as np
import pytest
from _helpers import assert_same_bits, load_cases, missing, run_exported_in_child

import cropgrad

try:
    import jax
    import jax.numpy as jnp
except ImportError as exc:
    missing(f"JAX cannot be imported ({exc})", "CROPGRAD_REQUIRE_ADAPTERS")

import cropgrad.jax as cgj

CASES = load_cases("grid_sample.npz")
NAMES = sorted(CASES)
MODES = ["bilinear", "nearest", "bicubic"]
PADDINGS = ["zeros", "border", "reflection"]


def options(case):
    return {
        "mode": str(case["mode"]),
        "padding_mode": str(case["padding_mode"]),
        "align_corners": bool(case["align_corners"]),
    }


def np_op(op, *args, **kw):
    """The NumPy API's `op` with XLA:CPU's flush-to-zero."""
    return getattr(cropgrad, op)(*args, flush_denormals=True, **kw)


def bits(x):
    return np.asarray(x)


def problem(seed, dtype=np.float32, n=2, c=3, h=5, w=6, ho=4, wo=5):
    """An NCHW image, a grid reaching past the edges, grads and a grid
    tangent."""
    rng = np.random.default_rng(seed)
    image = rng.standard_normal((n, c, h, w)).astype(dtype)
    grid = rng.uniform(-1.3, 1.3, (n, ho, wo, 2)).astype(dtype)
    grads = rng.standard_normal((n, c, ho, wo)).astype(dtype)
    tangent = rng.standard_normal((n, ho, wo, 2)).astype(dtype)
    return image, grid, grads, tangent


@pytest.fixture(params=[False, True], ids=["eager", "jit"])
def jit(request):
    return (lambda f: jax.jit(f)) if request.param else (lambda f: f)


@pytest.fixture(autouse=True)
def float64_data(request):
    """JAX's float64 arrays for the whole module: the fixtures hold both."""
    with jax.enable_x64(True):
        yield


# --------------------------------------------------------------------------
# PyTorch's fixtures, and JAX's derivatives against the NumPy API's ops


@pytest.mark.parametrize("name", NAMES)
def test_fixtures_are_pytorch_bits(name, jit):
    case = CASES[name]
    kw = options(case)
    image, grid, grads = case["image"], case["grid"], case["grads"]
    assert_same_bits(
        bits(jit(lambda x, g: cgj.grid_sample(x, g, **kw))(image, grid)),
        case["out"],
        name,
    )

    def grad_image(g, grid):
        return cgj.grid_sample_grad_image(g, grid, image.shape, **kw)

    assert_same_bits(bits(jit(grad_image)(grads, grid)), case["grad_image"], name)
    grad_grid = jit(lambda g, x, p: cgj.grid_sample_grad_grid(g, x, p, **kw))
    assert_same_bits(bits(grad_grid(grads, image, grid)), case["grad_grid"], name)


@pytest.mark.parametrize("name", NAMES)
def test_grad_and_jvp_are_the_numpy_ops(name):
    case = CASES[name]
    kw = options(case)
    image, grid, grads = case["image"], case["grid"], case["grads"]
    out, vjp = jax.vjp(lambda x, g: cgj.grid_sample(x, g, **kw), image, grid)
    d_image, d_grid = vjp(jnp.asarray(grads))
    assert_same_bits(bits(d_image), case["grad_image"], name)
    assert_same_bits(bits(d_grid), case["grad_grid"], name)
    tangent = np.random.default_rng(3).standard_normal(grid.shape).astype(grid.dtype)
    _, t_out = jax.jvp(lambda g: cgj.grid_sample(image, g, **kw), (grid,), (tangent,))
    expected = np_op("grid_sample_jvp_grid", image, grid, tangent, **kw)
    assert_same_bits(bits(t_out), expected, name)
    direct = cgj.grid_sample_jvp_grid(image, grid, tangent, **kw)
    assert_same_bits(bits(direct), expected, name)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_grad_of_a_loss(dtype):
    image, grid, grads, _ = problem(1, dtype)

    def loss(x, g):
        return jnp.vdot(jnp.asarray(grads), cgj.grid_sample(x, g, mode="bicubic"))

    d_image, d_grid = jax.jit(jax.grad(loss, (0, 1)))(image, grid)
    kw = dict(mode="bicubic")
    expected = np_op("grid_sample_grad_image", grads, grid, image.shape, **kw)
    assert_same_bits(bits(d_image), expected)
    assert_same_bits(
        bits(d_grid), np_op("grid_sample_grad_grid", grads, image, grid, **kw)
    )


@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
@pytest.mark.parametrize(
    "dtype", ["uint8", "float16", "bfloat16", "float32", "float64"]
)
def test_image_dtypes_layouts_and_output_dtypes(dtype, layout):
    image, grid, grads, tangent = problem(2)
    image = (np.clip(image * 40 + 100, 0, 255) if dtype == "uint8" else image).astype(
        jnp.bfloat16 if dtype == "bfloat16" else dtype
    )
    if layout == "NHWC":
        image = np.ascontiguousarray(image.transpose(0, 2, 3, 1))
    kw = dict(data_format=layout)
    out = cgj.grid_sample(image, grid, **kw)
    assert out.dtype == (np.float32 if dtype == "uint8" else image.dtype)
    assert_same_bits(bits(out), np_op("grid_sample", image, grid, **kw))
    narrow = (
        cgj.grid_sample(image, grid, dtype=jnp.bfloat16, **kw)
        if dtype != "float64"
        else None
    )
    if narrow is not None:
        assert_same_bits(
            bits(narrow), np_op("grid_sample", image, grid, dtype=jnp.bfloat16, **kw)
        )
    if layout == "NHWC":
        grads = np.ascontiguousarray(grads.transpose(0, 2, 3, 1))
    assert_same_bits(
        bits(cgj.grid_sample_grad_image(grads, grid, image.shape, **kw)),
        np_op("grid_sample_grad_image", grads, grid, image.shape, **kw),
    )
    assert_same_bits(
        bits(cgj.grid_sample_grad_grid(grads, image, grid, **kw)),
        np_op("grid_sample_grad_grid", grads, image, grid, **kw),
    )
    assert_same_bits(
        bits(cgj.grid_sample_jvp_grid(image, grid, tangent, **kw)),
        np_op("grid_sample_jvp_grid", image, grid, tangent, **kw),
    )


# --------------------------------------------------------------------------
# vmap: one folded call, a loop's bits


def _count_calls(f, *args):
    text = jax.jit(f).lower(*args).as_text()
    return text.count("cropgrad_grid_sample")


@pytest.mark.parametrize("in_axes", [(0, 0), (None, 0), (0, None), (1, 2)])
def test_vmap_folds_into_one_call(in_axes):
    image, grid, _, _ = problem(4)
    images = np.stack([image, image * 2, -image])
    grids = np.stack([grid, grid[:, ::-1], -grid])
    x = images if in_axes[0] is not None else image
    g = grids if in_axes[1] is not None else grid
    if in_axes[0] == 1:
        x = np.moveaxis(images, 0, 1)
    if in_axes[1] == 2:
        g = np.moveaxis(grids, 0, 2)

    def f(x, g):
        return cgj.grid_sample(x, g, padding_mode="reflection")

    batched = jax.vmap(f, in_axes=in_axes)
    out = batched(x, g)
    assert _count_calls(batched, x, g) == 1
    for k in range(3):
        xk = images[k] if in_axes[0] is not None else image
        gk = grids[k] if in_axes[1] is not None else grid
        assert_same_bits(
            bits(out[k]), np_op("grid_sample", xk, gk, padding_mode="reflection")
        )


def test_vmap_messages_name_the_callers_indices():
    # The folded call sees point (1 * 2 + 1, 2, 3) of a batch of 4 grids
    # (and of 12 under two vmaps): the message names the caller's problem
    # and batch.
    image, grid, grads, _ = problem(6)
    grids = np.stack([grid, grid])
    grids[1, 1, 2, 3, 0] = np.nan
    f = jax.vmap(lambda g: cgj.grid_sample(image, g))
    expected = "ValueError: grid must be finite: grid[1, 1, 2, 3, 0] = nan"
    with pytest.raises(Exception, match=re.escape(expected)):
        np.asarray(f(grids))
    nested = np.stack([grids] * 3)
    nested[:, 1, 1, 2, 3, 0] = grid[1, 2, 3, 0]
    nested[2, 0, 1, 0, 4, 1] = -np.inf
    g = jax.vmap(jax.vmap(lambda g: cgj.grid_sample_grad_image(grads, g, image.shape)))
    expected = "grid must be finite: grid[2, 0, 1, 0, 4, 1] = -inf"
    with pytest.raises(Exception, match=re.escape(expected)):
        np.asarray(g(nested))


def test_vmap_of_the_gradients():
    image, grid, grads, _ = problem(5)
    grids = np.stack([grid, -grid])
    d_image, d_grid = jax.vmap(
        jax.grad(lambda x, g: jnp.vdot(grads, cgj.grid_sample(x, g)), (0, 1)),
        in_axes=(None, 0),
    )(image, grids)
    for k in range(2):
        assert_same_bits(
            bits(d_image[k]),
            np_op("grid_sample_grad_image", grads, grids[k], image.shape),
        )
        assert_same_bits(
            bits(d_grid[k]), np_op("grid_sample_grad_grid", grads, image, grids[k])
        )


# --------------------------------------------------------------------------
# Second derivatives


def test_second_derivatives():
    image, grid, grads, tangent = problem(6, n=1, c=2, h=3, w=4, ho=2, wo=3)

    def loss(x, g):
        return jnp.vdot(grads, cgj.grid_sample(x, g))

    # The image gradient along the grid, in reverse mode: the mixed
    # derivative exists (grid_sample_grad_grid is its transpose).
    mixed = jax.jacrev(jax.grad(loss, 0), 1)(image, grid)
    assert mixed.shape == image.shape + grid.shape
    assert np.any(np.asarray(mixed))
    # Reverse over reverse in the image and the grid: d/dg of grad_image is
    # the transposed JVP, whose transpose is grad_grid.
    jax.grad(lambda x, g: jnp.sum(jax.grad(loss, 0)(x, g) ** 2), 1)(image, grid)
    # The image's second derivative is zero (linear).
    hess = jax.hessian(loss, 0)(image, grid)
    assert not np.any(np.asarray(hess))
    with pytest.raises(NotImplementedError, match="differentiates grid_sample once"):
        jax.hessian(loss, 1)(image, grid)
    with pytest.raises(NotImplementedError, match="grid_sample_grad_image"):
        jax.jvp(
            lambda g: cgj.grid_sample_grad_image(grads, g, image.shape),
            (grid,),
            (tangent,),
        )


# --------------------------------------------------------------------------
# export, errors


def test_export_serialize_and_call_in_a_fresh_process(tmp_path):
    image, grid, grads, _ = problem(7)

    def step(image, grid):
        out, vjp = jax.vjp(
            lambda x, g: cgj.grid_sample(x, g, mode="bicubic"), image, grid
        )
        return (out, *vjp(jnp.asarray(grads)))

    report = run_exported_in_child(tmp_path, step, image=image, grid=grid)
    kw = dict(mode="bicubic")
    expected = [
        np_op("grid_sample", image, grid, **kw),
        np_op("grid_sample_grad_image", grads, grid, image.shape, **kw),
        np_op("grid_sample_grad_grid", grads, image, grid, **kw),
    ]
    assert report == [e.tobytes().hex() for e in expected]
    with pytest.raises(ValueError, match="cropgrad_grid_sample"):
        jax.export.export(jax.jit(step))(image, grid)


IMAGE, GRID, GRADS, TANGENT = problem(8)
MISTAKES = [
    ("mode", dict(mode="linear"), ValueError),
    ("padding", dict(padding_mode="edge"), ValueError),
    ("align_corners", dict(align_corners="yes"), TypeError),
    ("layout", dict(data_format="NWHC"), ValueError),
    ("threads", dict(num_threads=0), ValueError),
    ("grid rank", dict(grid=GRID[0]), ValueError),
    ("grid batch", dict(grid=GRID[:1]), ValueError),
    ("grid columns", dict(grid=GRID[..., :1]), ValueError),
    ("empty image", dict(image=IMAGE[:, :, :0]), ValueError),
    ("5-D image", dict(image=IMAGE[..., None]), ValueError),
    ("complex image", dict(image=IMAGE.astype(np.complex64)), TypeError),
    (
        "float16 from float64",
        dict(image=IMAGE.astype(np.float64), dtype=np.float16),
        TypeError,
    ),
]


@pytest.mark.parametrize(
    "change, error", [m[1:] for m in MISTAKES], ids=[m[0] for m in MISTAKES]
)
def test_errors_are_the_numpy_apis(change, error):
    args = {"image": IMAGE, "grid": GRID, **change}
    with pytest.raises(error) as expected:
        cropgrad.grid_sample(**args)
    with pytest.raises(error) as actual:
        cgj.grid_sample(**args)
    assert str(actual.value) == str(expected.value)


def test_gradient_errors_are_the_numpy_apis():
    cases = [
        ("grid_sample_grad_image", (GRADS[:, :, :1], GRID, IMAGE.shape)),
        ("grid_sample_grad_image", (GRADS, GRID, (2, 3, 0, 6))),
        ("grid_sample_grad_grid", (GRADS[:1], IMAGE, GRID)),
        ("grid_sample_jvp_grid", (IMAGE, GRID, TANGENT[:, :1])),
    ]
    for op, args in cases:
        with pytest.raises(ValueError) as expected:
            getattr(cropgrad, op)(*args)
        with pytest.raises(ValueError) as actual:
            getattr(cgj, op)(*args)
        words = str(expected.value).replace("image_size", "image_shape")
        assert str(actual.value) == words, op


def test_a_non_finite_grid_is_refused_when_it_runs():
    grid = GRID.copy()
    grid[1, 2, 3, 0] = np.nan
    with pytest.raises(Exception, match="cropgrad.jax.grid_sample|grid_sample") as info:
        np.asarray(jax.jit(cgj.grid_sample)(IMAGE, grid))
    assert "finite" in str(info.value)


@pytest.mark.parametrize("channels", [3, 12])
@pytest.mark.parametrize("mode", ["bilinear", "nearest", "bicubic"])
def test_nhwc_gives_the_numpy_api_bits(mode, channels):
    # NHWC arrays go to the NHWC kernels, or (few channels) are transposed
    # around the NCHW ones: either way the NumPy API's NHWC bits, forward,
    # both gradients and the grid JVP.
    rng = np.random.default_rng(channels)
    image = rng.standard_normal((2, 9, 11, channels)).astype(np.float32)
    grid = rng.uniform(-1.1, 1.1, (2, 7, 6, 2)).astype(np.float32)
    ct = rng.standard_normal((2, 7, 6, channels)).astype(np.float32)
    tangent = rng.standard_normal(grid.shape).astype(np.float32)
    kw = dict(mode=mode, data_format="NHWC")
    assert_same_bits(
        np.asarray(cgj.grid_sample(image, grid, **kw)),
        cropgrad.grid_sample(image, grid, **kw),
    )
    d_image, d_grid = jax.grad(
        lambda x, g: jnp.vdot(cgj.grid_sample(x, g, **kw), ct), (0, 1)
    )(image, grid)
    assert_same_bits(
        np.asarray(d_image),
        cropgrad.grid_sample_grad_image(ct, grid, image.shape, **kw),
    )
    assert_same_bits(
        np.asarray(d_grid), cropgrad.grid_sample_grad_grid(ct, image, grid, **kw)
    )
    _, along = jax.jvp(lambda g: cgj.grid_sample(image, g, **kw), (grid,), (tangent,))
    assert_same_bits(
        np.asarray(along), cropgrad.grid_sample_jvp_grid(image, grid, tangent, **kw)
    )
