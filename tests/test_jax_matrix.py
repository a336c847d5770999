"""cropgrad.jax: every op x what is differentiated x every transformation.

Rows: an op and the inputs differentiated (each alone, then together), in
each layout.  Columns: how the derivative is taken.  A reverse-mode cell
compares the gradient of ``sum(op(...) * w)`` with the NumPy API's bits
(the gradient kernels on the same arrays); a forward-mode cell compares
``jax.jvp`` with the NumPy API's bits (the forward op on the tangent, the
boxes JVP, the image gradient on the tangent) and ``jax.jacfwd`` with
``jax.jacrev``.  Derivatives without a kernel are expected to raise.

The cells run in one process, first in the order of the parametrization
(one test each), then all of them again in the reverse order (one test):
a result must not depend on what was differentiated before it.

shard_map runs on two CPU devices (jax_num_cpu_devices, set before JAX's
backend starts; pytest collects this module before any test runs).
"""

import numpy as np
import pytest
from _helpers import assert_same_bits, missing

import cropgrad

try:
    import jax
    import jax.numpy as jnp
    from jax.sharding import Mesh
    from jax.sharding import PartitionSpec as P
except ImportError as exc:
    missing(f"JAX cannot be imported ({exc})", "CROPGRAD_REQUIRE_ADAPTERS")

try:
    jax.config.update("jax_num_cpu_devices", 2)
except RuntimeError:  # the backend already runs: the shard_map cells say so
    pass

import cropgrad.jax as cgj

CROP = (3, 4)
BATCH, HEIGHT, WIDTH, DEPTH, NUM_BOXES = 2, 7, 6, 2, 3
EXTRAPOLATION = 0.5
LAYOUTS = ["NHWC", "NCHW"]

# (op, inputs differentiated): the rows.  The boxes gradient is linear in
# its grads (transpose: the boxes JVP); it has no boxes derivative, and its
# reverse-mode image derivative has no kernel (test_jax.py checks both).
ROWS = [
    ("crop_and_resize", ("image",)),
    ("crop_and_resize", ("boxes",)),
    ("crop_and_resize", ("image", "boxes")),
    ("crop_and_resize_grad_image", ("grads",)),
    ("crop_and_resize_grad_image", ("boxes",)),
    ("crop_and_resize_grad_image", ("grads", "boxes")),
    ("crop_and_resize_grad_boxes", ("grads",)),
]
REVERSE = ["eager", "jit", "vmap", "scan", "checkpoint", "vjp"]
SHARDED = ["shard_map-first-replicated", "shard_map-second-replicated"]
FORWARD = ["jvp", "jacfwd"]
COLUMNS = REVERSE + SHARDED + FORWARD

# What forward mode cannot do: the boxes derivative of the image gradient
# has no kernel (reverse mode only transposes it).
NO_FORWARD = "no kernel for the derivative of crop_and_resize_grad_image"

# The op's two main operands, for the shard_map columns: one replicated
# over the devices, every other array sharded.
MAIN = {
    "crop_and_resize": ("image", "boxes"),
    "crop_and_resize_grad_image": ("grads", "boxes"),
    "crop_and_resize_grad_boxes": ("grads", "image"),
}


def to_layout(x, data_format):
    return np.ascontiguousarray(x.transpose(0, 3, 1, 2)) if data_format == "NCHW" else x


def problem(seed, data_format):
    """Inputs, output weights and tangents of every op, in `data_format`."""
    rng = np.random.default_rng(seed)

    def normal(*shape):
        return rng.standard_normal(shape).astype(np.float32)

    image = normal(BATCH, HEIGHT, WIDTH, DEPTH)
    grads = normal(NUM_BOXES, *CROP, DEPTH)
    arrays = {
        "image": to_layout(image, data_format),
        "grads": to_layout(grads, data_format),
        "boxes": rng.uniform(-0.2, 1.2, (NUM_BOXES, 4)).astype(np.float32),
        "box_ind": rng.integers(0, BATCH, NUM_BOXES).astype(np.int32),
    }
    weights = {
        "crop_and_resize": to_layout(normal(NUM_BOXES, *CROP, DEPTH), data_format),
        "crop_and_resize_grad_image": to_layout(normal(*image.shape), data_format),
        "crop_and_resize_grad_boxes": normal(NUM_BOXES, 4),
    }
    tangents = {
        "image": to_layout(normal(*image.shape), data_format),
        "grads": to_layout(normal(*grads.shape), data_format),
        "boxes": normal(NUM_BOXES, 4),
    }
    return arrays, weights, tangents


def image_shape(data_format):
    return to_layout(np.zeros((BATCH, HEIGHT, WIDTH, DEPTH)), data_format).shape


def call(op, a, data_format):
    """The JAX op on the arrays of `a`."""
    if op == "crop_and_resize":
        return cgj.crop_and_resize(
            a["image"],
            a["boxes"],
            a["box_ind"],
            CROP,
            extrapolation_value=EXTRAPOLATION,
            data_format=data_format,
        )
    if op == "crop_and_resize_grad_image":
        return cgj.crop_and_resize_grad_image(
            a["grads"],
            a["boxes"],
            a["box_ind"],
            image_shape(data_format),
            data_format=data_format,
        )
    return cgj.crop_and_resize_grad_boxes(
        a["grads"], a["image"], a["boxes"], a["box_ind"], data_format=data_format
    )


def expected_gradient(op, wrt, a, w, data_format):
    """The NumPy API's gradient of sum(op(a) * w) with respect to `wrt`."""
    np_kw = dict(data_format=data_format, flush_denormals=True)
    boxes, box_ind = a["boxes"], a["box_ind"]
    if (op, wrt) == ("crop_and_resize", "image"):
        return cropgrad.crop_and_resize_grad_image(
            w, boxes, box_ind, a["image"].shape, **np_kw
        )
    if (op, wrt) == ("crop_and_resize", "boxes"):
        return cropgrad.crop_and_resize_grad_boxes(
            w, a["image"], boxes, box_ind, **np_kw
        )
    if (op, wrt) == ("crop_and_resize_grad_image", "grads"):
        return cropgrad.crop_and_resize(w, boxes, box_ind, CROP, **np_kw)
    if (op, wrt) == ("crop_and_resize_grad_image", "boxes"):
        return cropgrad.crop_and_resize_grad_boxes(
            a["grads"], w, boxes, box_ind, **np_kw
        )
    assert (op, wrt) == ("crop_and_resize_grad_boxes", "grads")
    return cropgrad.crop_and_resize_jvp_boxes(
        a["image"], boxes, box_ind, w, CROP, **np_kw
    )


def expected_tangent(op, wrt, a, t, data_format):
    """The NumPy API's derivative of op(a) along tangents `t` of `wrt`."""
    np_kw = dict(data_format=data_format, flush_denormals=True)
    boxes, box_ind = a["boxes"], a["box_ind"]
    total = None
    for name in wrt:
        if (op, name) == ("crop_and_resize", "image"):
            # Linear in the image but for the fill: the fill's tangent is 0.
            part = cropgrad.crop_and_resize(t["image"], boxes, box_ind, CROP, **np_kw)
        elif (op, name) == ("crop_and_resize", "boxes"):
            part = cropgrad.crop_and_resize_jvp_boxes(
                a["image"], boxes, box_ind, t["boxes"], CROP, **np_kw
            )
        elif (op, name) == ("crop_and_resize_grad_image", "grads"):
            part = cropgrad.crop_and_resize_grad_image(
                t["grads"], boxes, box_ind, a["image"].shape, **np_kw
            )
        else:
            assert (op, name) == ("crop_and_resize_grad_boxes", "grads")
            part = cropgrad.crop_and_resize_grad_boxes(
                t["grads"], a["image"], boxes, box_ind, **np_kw
            )
        total = part if total is None else total + part
    return total


def loss(op, wrt, a, w, data_format):
    """sum(op * w) as a function of the arrays named by `wrt`."""

    def f(*xs):
        return jnp.sum(call(op, {**a, **dict(zip(wrt, xs))}, data_format) * w)

    return f


def gradients(column, op, wrt, a, w, data_format):
    """The gradient of the loss w.r.t. `wrt` taken as `column` says."""
    f = loss(op, wrt, a, w, data_format)
    xs = [a[name] for name in wrt]
    argnums = tuple(range(len(wrt)))
    if column == "eager":
        return jax.grad(f, argnums)(*xs)
    if column == "jit":
        return jax.jit(jax.grad(f, argnums))(*xs)
    if column == "scan":

        def scanned(*xs):
            return jax.lax.scan(lambda c, _: (c + f(*xs), None), 0.0, length=1)[0]

        return jax.grad(scanned, argnums)(*xs)
    if column == "checkpoint":
        return jax.grad(jax.checkpoint(f), argnums)(*xs)
    assert column == "vjp"
    value, vjp = jax.vjp(f, *xs)
    return vjp(jnp.ones_like(value))


def check_reverse(column, op, wrt, data_format):
    a, w, _ = problem(1, data_format)
    expected = [expected_gradient(op, name, a, w[op], data_format) for name in wrt]
    if column == "vmap":
        # Two problems at once (every array mapped): one call, and each
        # problem's bits.
        b, wb, _ = problem(2, data_format)
        stacked = {k: np.stack([a[k], b[k]]) for k in a}
        ws = np.stack([w[op], wb[op]])

        def one(arrays, w):
            f = loss(op, wrt, arrays, w, data_format)
            return jax.grad(f, tuple(range(len(wrt))))(*(arrays[n] for n in wrt))

        actual = jax.vmap(one)(stacked, ws)
        for k, (arrays, weights) in enumerate(((a, w[op]), (b, wb[op]))):
            for name, got in zip(wrt, actual):
                want = expected_gradient(op, name, arrays, weights, data_format)
                assert_same_bits(np.asarray(got[k]), want)
        return
    actual = gradients(column, op, wrt, a, w[op], data_format)
    for got, want in zip(actual, expected, strict=True):
        assert_same_bits(np.asarray(got), want)


def check_sharded(column, op, wrt, data_format):
    """Each device differentiates its own problem; one operand is shared."""
    assert jax.device_count() >= 2, (
        "the shard_map cells need two CPU devices: JAX's backend started "
        "before this module set jax_num_cpu_devices"
    )
    shared = MAIN[op][0 if column == SHARDED[0] else 1]
    problems = [problem(3 + k, data_format) for k in range(2)]
    for arrays, _, _ in problems[1:]:
        arrays[shared] = problems[0][0][shared]
    names = sorted(problems[0][0])
    stacked = {k: np.stack([p[0][k] for p in problems]) for k in names}
    ws = np.stack([p[1][op] for p in problems])

    def body(arrays, w):
        arrays = {k: v if k == shared else v[0] for k, v in arrays.items()}
        f = loss(op, wrt, arrays, w[0], data_format)
        grads = jax.grad(f, tuple(range(len(wrt))))(*(arrays[n] for n in wrt))
        return tuple(g if n == shared else g[None] for n, g in zip(wrt, grads))

    mesh = Mesh(np.array(jax.devices()[:2]), ("d",))
    in_specs = ({k: P() if k == shared else P("d") for k in names}, P("d"))
    out_specs = tuple(P() if n == shared else P("d") for n in wrt)
    args = ({k: v[0] if k == shared else v for k, v in stacked.items()}, ws)
    actual = jax.jit(
        jax.shard_map(body, mesh=mesh, in_specs=in_specs, out_specs=out_specs)
    )(*args)
    for name, got in zip(wrt, actual, strict=True):
        per_device = [
            expected_gradient(op, name, p[0], p[1][op], data_format) for p in problems
        ]
        if name == shared:
            # The cotangent summed over the devices (two terms: exact in
            # either order).
            assert_same_bits(np.asarray(got), per_device[0] + per_device[1])
        else:
            for k in range(2):
                assert_same_bits(np.asarray(got[k]), per_device[k])


def check_forward(column, op, wrt, data_format):
    a, _, t = problem(5, data_format)

    def f(*xs):
        return call(op, {**a, **dict(zip(wrt, xs))}, data_format)

    xs = [a[name] for name in wrt]
    argnums = tuple(range(len(wrt)))
    if op == "crop_and_resize_grad_image" and "boxes" in wrt:
        with pytest.raises(NotImplementedError, match=NO_FORWARD):
            if column == "jvp":
                jax.jvp(f, xs, [t[name] for name in wrt])
            else:
                jax.jacfwd(f, argnums)(*xs)
        return
    if column == "jvp":
        primal, tangent = jax.jvp(f, xs, [t[name] for name in wrt])
        assert_same_bits(np.asarray(primal), np.asarray(f(*xs)))
        assert_same_bits(
            np.asarray(tangent), expected_tangent(op, wrt, a, t, data_format)
        )
        return
    forward = jax.jacfwd(f, argnums)(*xs)
    reverse = jax.jacrev(f, argnums)(*xs)
    for fwd, rev in zip(forward, reverse, strict=True):
        fwd, rev = np.asarray(fwd), np.asarray(rev)
        assert fwd.shape == rev.shape
        assert np.any(rev != 0)
        # The same derivative factors, rounded in another order.
        np.testing.assert_allclose(fwd, rev, rtol=1e-5, atol=1e-5 * np.abs(rev).max())


def check(op, wrt, column, data_format):
    if column in REVERSE:
        check_reverse(column, op, wrt, data_format)
    elif column in SHARDED:
        check_sharded(column, op, wrt, data_format)
    else:
        check_forward(column, op, wrt, data_format)


CELLS = [
    (op, wrt, column, data_format)
    for data_format in LAYOUTS
    for op, wrt in ROWS
    for column in COLUMNS
]


def cell_id(cell):
    op, wrt, column, data_format = cell
    return f"{op}-d_{'+'.join(wrt)}-{column}-{data_format}"


def test_matrix_dimensions():
    assert len(ROWS) * len(LAYOUTS) == 14
    assert len(COLUMNS) == 10
    assert len(CELLS) == 140


@pytest.mark.parametrize("cell", CELLS, ids=cell_id)
def test_cell(cell):
    check(*cell)


def test_every_cell_again_in_reverse_order():
    """After the cells above, in this process: all of them again, reversed."""
    failures = []
    for cell in CELLS[::-1]:
        try:
            check(*cell)
        except Exception as exc:  # collect them all, then fail once
            failures.append(f"{cell_id(cell)}: {type(exc).__name__}: {exc}"[:600])
    assert not failures, f"{len(failures)} of {len(CELLS)} cells failed:\n" + "\n".join(
        failures
    )


def test_the_reported_reproducer():
    """Image and boxes, then the image alone, then a vjp: the boxes' gradient."""
    rng = np.random.default_rng(0)
    img = jnp.asarray(rng.standard_normal((1, 8, 8, 2), dtype=np.float32))
    boxes = jnp.array([[0.1, 0.2, 0.7, 0.9]], jnp.float32)
    bi = jnp.array([0], jnp.int32)

    def f(im, bx):
        return cgj.crop_and_resize(im, bx, bi, (3, 3)).sum()

    jax.grad(f, argnums=(0, 1))(img, boxes)
    jax.grad(f, argnums=0)(img, boxes)
    _, vjp = jax.vjp(f, img, boxes)
    expected = cropgrad.crop_and_resize_grad_boxes(
        np.ones((1, 3, 3, 2), np.float32),
        np.asarray(img),
        np.asarray(boxes),
        np.asarray(bi),
        flush_denormals=True,
    )
    assert_same_bits(np.asarray(vjp(1.0)[1]), expected)
    np.testing.assert_allclose(expected[0], [-20.13, -1.86, -9.35, -20.84], atol=0.006)
