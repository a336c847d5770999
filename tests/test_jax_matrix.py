"""cropgrad.jax: every op x what is differentiated x every transformation.

Rows: an op of a family (crop_and_resize's, RoIAlign's, grid sampling's)
and the inputs differentiated (each alone, then together), in each layout;
the RoIAlign cells vary their options (sampling ratio, alignment, spatial
scale) from cell to cell, the grid-sampling cells theirs (mode, padding,
alignment).  Columns: how the derivative is taken.  A
reverse-mode cell compares the gradient of ``sum(op(...) * w)`` with the
NumPy API's bits (the gradient kernels on the same arrays); a forward-mode
cell compares ``jax.jvp`` with the NumPy API's bits (the forward op on the
tangent, the boxes JVP, the image gradient on the tangent).  ``jax.jacrev``
and ``jax.jacfwd`` are compared with the NumPy API's bits too, one unit
cotangent (or tangent) at a time.  Derivatives without a kernel are
expected to raise, in every column that would need them.

The cells run in one process, first in the order of the parametrization
(one test each), then all of them again in the reverse order and in a
shuffled order (one test each): a result must not depend on what was
differentiated before it.

shard_map runs on two CPU devices (jax_num_cpu_devices, set before JAX's
backend starts; pytest collects this module before any test runs).
"""

import random

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
ROI_OUTPUT = (3, 2)
BATCH, HEIGHT, WIDTH, DEPTH, NUM_BOXES = 2, 7, 6, 2, 3
EXTRAPOLATION = 0.5
LAYOUTS = ["NHWC", "NCHW"]

# (op, inputs differentiated): the rows.  crop_and_resize's boxes gradient
# is linear in its grads (transpose: the boxes JVP); it has no boxes
# derivative, and its reverse-mode image derivative has no kernel
# (test_jax.py checks both).  RoIAlign's rows hold both (their cells
# raise), and the boxes JVP, which cropgrad.jax makes public for RoIAlign
# only: linear in its tangent (transpose: the boxes gradient) and in the
# image (forward mode only), with no boxes derivative.
ROWS = [
    ("crop_and_resize", ("image",)),
    ("crop_and_resize", ("boxes",)),
    ("crop_and_resize", ("image", "boxes")),
    ("crop_and_resize_grad_image", ("grads",)),
    ("crop_and_resize_grad_image", ("boxes",)),
    ("crop_and_resize_grad_image", ("grads", "boxes")),
    ("crop_and_resize_grad_boxes", ("grads",)),
]
ROI_ROWS = [
    ("roi_align", ("image",)),
    ("roi_align", ("boxes",)),
    ("roi_align", ("image", "boxes")),
    ("roi_align_grad_image", ("grads",)),
    ("roi_align_grad_image", ("boxes",)),
    ("roi_align_grad_image", ("grads", "boxes")),
    ("roi_align_grad_boxes", ("grads",)),
    ("roi_align_grad_boxes", ("image",)),
    ("roi_align_grad_boxes", ("grads", "image")),
    ("roi_align_grad_boxes", ("boxes",)),
    ("roi_align_jvp_boxes", ("boxes_tangent",)),
    ("roi_align_jvp_boxes", ("image",)),
    ("roi_align_jvp_boxes", ("image", "boxes_tangent")),
    ("roi_align_jvp_boxes", ("boxes",)),
]
# Grid sampling's rows: as RoIAlign's, the coordinates a grid.
GRID_ROWS = [
    ("grid_sample", ("image",)),
    ("grid_sample", ("grid",)),
    ("grid_sample", ("image", "grid")),
    ("grid_sample_grad_image", ("grads",)),
    ("grid_sample_grad_image", ("grid",)),
    ("grid_sample_grad_image", ("grads", "grid")),
    ("grid_sample_grad_grid", ("grads",)),
    ("grid_sample_grad_grid", ("image",)),
    ("grid_sample_grad_grid", ("grads", "image")),
    ("grid_sample_grad_grid", ("grid",)),
    ("grid_sample_jvp_grid", ("grid_tangent",)),
    ("grid_sample_jvp_grid", ("image",)),
    ("grid_sample_jvp_grid", ("image", "grid_tangent")),
    ("grid_sample_jvp_grid", ("grid",)),
]
GRID_OUT = (3, 2)
REVERSE = ["eager", "jit", "vmap", "scan", "checkpoint", "vjp", "jacrev"]
SHARDED = ["shard_map-first-replicated", "shard_map-second-replicated"]
FORWARD = ["jvp", "jacfwd"]
COLUMNS = REVERSE + SHARDED + FORWARD

# RoIAlign's options, taken in turn by the cells of a row: torchvision's
# defaults, then each of the others changed.
ROI_OPTIONS = [
    dict(sampling_ratio=-1, aligned=False, spatial_scale=1.0),
    dict(sampling_ratio=2, aligned=True, spatial_scale=0.5),
    dict(sampling_ratio=2, aligned=False, spatial_scale=1.0),
    dict(sampling_ratio=-1, aligned=True, spatial_scale=0.5),
]

# Grid sampling's options, taken in turn as RoIAlign's (nearest sampling
# has a grid derivative of zeros, which the Jacobian cells refuse).
GRID_OPTIONS = [
    dict(mode="bilinear", padding_mode="zeros", align_corners=False),
    dict(mode="bicubic", padding_mode="border", align_corners=True),
    dict(mode="bilinear", padding_mode="reflection", align_corners=True),
    dict(mode="bicubic", padding_mode="zeros", align_corners=False),
]

# The op's two main operands, for the shard_map columns: one replicated
# over the devices, every other array sharded.
MAIN = {
    "crop_and_resize": ("image", "boxes"),
    "crop_and_resize_grad_image": ("grads", "boxes"),
    "crop_and_resize_grad_boxes": ("grads", "image"),
    "roi_align": ("image", "boxes"),
    "roi_align_grad_image": ("grads", "boxes"),
    "roi_align_grad_boxes": ("grads", "image"),
    "roi_align_jvp_boxes": ("image", "boxes_tangent"),
    "grid_sample": ("image", "grid"),
    "grid_sample_grad_image": ("grads", "grid"),
    "grid_sample_grad_grid": ("grads", "image"),
    "grid_sample_jvp_grid": ("image", "grid_tangent"),
}


def family(op):
    for fam in ("roi_align", "grid_sample"):
        if op.startswith(fam):
            return fam
    return "crop_and_resize"


def coords(fam):
    return "grid" if fam == "grid_sample" else "boxes"


def refused(op, wrt, mode):
    """What JAX raises differentiating `op` in `wrt` in `mode` ("forward" or
    "reverse"), as a pattern of its message, or None: it works."""
    fam = family(op)
    where = coords(fam)
    # The derivative along the boxes of the image gradient has no kernel:
    # forward mode of the image gradient along the boxes needs it, and so
    # does reverse mode of the boxes gradient and the boxes JVP along the
    # image (its transpose); reverse mode of the image gradient along the
    # boxes transposes it into the boxes gradient.
    no_kernel = f"no kernel for the derivative of {fam}_grad_image"
    if op in (f"{fam}_grad_{where}", f"{fam}_jvp_{where}"):
        if where in wrt:
            # Themselves derivatives along the boxes: not again.
            return f"differentiates {fam} once with respect to the {where}"
        if mode == "reverse" and "image" in wrt:
            return no_kernel
    if mode == "forward" and op == f"{fam}_grad_image" and where in wrt:
        return no_kernel
    return None


def to_layout(x, data_format):
    return np.ascontiguousarray(x.transpose(0, 3, 1, 2)) if data_format == "NCHW" else x


def problem(seed, op, options):
    """Inputs, output weights and tangents of every op of `op`'s family,
    for `options` (the layout, and RoIAlign's options)."""
    if family(op) == "roi_align":
        return roi_problem(seed, options)
    if family(op) == "grid_sample":
        return grid_problem(seed, options)
    data_format = options["data_format"]
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


def roi_problem(seed, options):
    """RoIAlign's problem: boxes ``[x1, y1, x2, y2]`` in input pixels, which
    `spatial_scale` maps onto the feature map: some partly outside it, one
    smaller than a feature pixel, none on whole pixels (where a sample's
    slope changes)."""
    data_format = options["data_format"]
    rng = np.random.default_rng(seed)

    def normal(*shape):
        return rng.standard_normal(shape).astype(np.float32)

    image = normal(BATCH, HEIGHT, WIDTH, DEPTH)
    grads = normal(NUM_BOXES, *ROI_OUTPUT, DEPTH)
    x1 = rng.uniform(-1.5, WIDTH - 2, NUM_BOXES)
    y1 = rng.uniform(-1.5, HEIGHT - 2, NUM_BOXES)
    w = rng.uniform(1.1, WIDTH / 2 + 1, NUM_BOXES)
    h = rng.uniform(1.1, HEIGHT / 2 + 1, NUM_BOXES)
    w[1] = h[1] = 0.4
    boxes = np.stack([x1, y1, x1 + w, y1 + h], axis=1) / options["spatial_scale"]
    arrays = {
        "image": to_layout(image, data_format),
        "grads": to_layout(grads, data_format),
        "boxes": boxes.astype(np.float32),
        "box_ind": rng.integers(0, BATCH, NUM_BOXES).astype(np.int32),
        "boxes_tangent": normal(NUM_BOXES, 4),
    }
    weights = {
        "roi_align": to_layout(normal(*grads.shape), data_format),
        "roi_align_grad_image": to_layout(normal(*image.shape), data_format),
        "roi_align_grad_boxes": normal(NUM_BOXES, 4),
        "roi_align_jvp_boxes": to_layout(normal(*grads.shape), data_format),
    }
    tangents = {
        "image": to_layout(normal(*image.shape), data_format),
        "grads": to_layout(normal(*grads.shape), data_format),
        "boxes": normal(NUM_BOXES, 4),
        "boxes_tangent": normal(NUM_BOXES, 4),
    }
    return arrays, weights, tangents


def grid_problem(seed, options):
    """Grid sampling's problem: a grid reaching past the image's edges."""
    data_format = options["data_format"]
    rng = np.random.default_rng(seed)

    def normal(*shape):
        return rng.standard_normal(shape).astype(np.float32)

    image = normal(BATCH, HEIGHT, WIDTH, DEPTH)
    grads = normal(BATCH, *GRID_OUT, DEPTH)
    grid_shape = (BATCH, *GRID_OUT, 2)
    arrays = {
        "image": to_layout(image, data_format),
        "grads": to_layout(grads, data_format),
        "grid": rng.uniform(-1.2, 1.2, grid_shape).astype(np.float32),
        "grid_tangent": normal(*grid_shape),
    }
    weights = {
        "grid_sample": to_layout(normal(*grads.shape), data_format),
        "grid_sample_grad_image": to_layout(normal(*image.shape), data_format),
        "grid_sample_grad_grid": normal(*grid_shape),
        "grid_sample_jvp_grid": to_layout(normal(*grads.shape), data_format),
    }
    tangents = {
        "image": to_layout(normal(*image.shape), data_format),
        "grads": to_layout(normal(*grads.shape), data_format),
        "grid": normal(*grid_shape),
        "grid_tangent": normal(*grid_shape),
    }
    return arrays, weights, tangents


def image_shape(data_format):
    return to_layout(np.zeros((BATCH, HEIGHT, WIDTH, DEPTH)), data_format).shape


def call(op, a, options):
    """The JAX op on the arrays of `a`."""
    if family(op) == "grid_sample":
        return grid_call(op, a, options)
    image, boxes, box_ind, grads = a["image"], a["boxes"], a["box_ind"], a["grads"]
    shape = image_shape(options["data_format"])
    if op == "crop_and_resize":
        return cgj.crop_and_resize(
            image, boxes, box_ind, CROP, extrapolation_value=EXTRAPOLATION, **options
        )
    if op == "crop_and_resize_grad_image":
        return cgj.crop_and_resize_grad_image(grads, boxes, box_ind, shape, **options)
    if op == "crop_and_resize_grad_boxes":
        return cgj.crop_and_resize_grad_boxes(grads, image, boxes, box_ind, **options)
    if op == "roi_align":
        return cgj.roi_align(image, boxes, box_ind, ROI_OUTPUT, **options)
    if op == "roi_align_grad_image":
        return cgj.roi_align_grad_image(grads, boxes, box_ind, shape, **options)
    if op == "roi_align_grad_boxes":
        return cgj.roi_align_grad_boxes(grads, image, boxes, box_ind, **options)
    assert op == "roi_align_jvp_boxes"
    return cgj.roi_align_jvp_boxes(
        image, boxes, box_ind, a["boxes_tangent"], ROI_OUTPUT, **options
    )


def grid_call(op, a, options):
    image, grid, grads = a["image"], a["grid"], a["grads"]
    if op == "grid_sample":
        return cgj.grid_sample(image, grid, **options)
    if op == "grid_sample_grad_image":
        shape = image_shape(options["data_format"])
        return cgj.grid_sample_grad_image(grads, grid, shape, **options)
    if op == "grid_sample_grad_grid":
        return cgj.grid_sample_grad_grid(grads, image, grid, **options)
    assert op == "grid_sample_jvp_grid"
    return cgj.grid_sample_jvp_grid(image, grid, a["grid_tangent"], **options)


def grid_parts(a, t):
    """Grid sampling's tables of `expected_gradient` (cotangent `t`) and
    `expected_tangent` (tangents `t`): by op suffix and input, the NumPy
    op's suffix and arguments."""
    x, p, g = a["image"], a["grid"], a["grads"]
    if isinstance(t, dict):
        tx, tg, tp, tt = (t.get(n) for n in ("image", "grads", "grid", "grid_tangent"))
        return {
            "": {"image": ("", (tx, p)), "grid": ("_jvp_grid", (x, p, tp))},
            "_grad_image": {"grads": ("_grad_image", (tg, p, x.shape))},
            "_grad_grid": {
                "grads": ("_grad_grid", (tg, x, p)),
                "image": ("_grad_grid", (g, tx, p)),
            },
            "_jvp_grid": {
                "image": ("_jvp_grid", (tx, p, a["grid_tangent"])),
                "grid_tangent": ("_jvp_grid", (x, p, tt)),
            },
        }
    return {
        "": {
            "image": ("_grad_image", (t, p, x.shape)),
            "grid": ("_grad_grid", (t, x, p)),
        },
        "_grad_image": {
            "grads": ("", (t, p)),
            "grid": ("_grad_grid", (g, t, p)),
        },
        "_grad_grid": {"grads": ("_jvp_grid", (x, p, t))},
        "_jvp_grid": {"grid_tangent": ("_grad_grid", (t, x, p))},
    }


def numpy_op(name, *args, options):
    """The NumPy API's `name` with XLA:CPU's flush-to-zero."""
    return getattr(cropgrad, name)(*args, flush_denormals=True, **options)


def expected_gradient(op, wrt, a, w, options):
    """The NumPy API's gradient of sum(op(a) * w) with respect to `wrt`:
    the transpose of the op's linear map in `wrt`, applied to `w`."""
    fam = family(op)
    if fam == "grid_sample":
        suffix, args = grid_parts(a, w)[op[len(fam) :]][wrt]
        return numpy_op(fam + suffix, *args, options=options)
    size = ROI_OUTPUT if fam == "roi_align" else CROP
    x, b, k, g = a["image"], a["boxes"], a["box_ind"], a["grads"]
    # By the op's name after its family's, then the input: the NumPy op
    # (named the same way) and its arguments.
    transposes = {
        "": {
            "image": ("_grad_image", (w, b, k, x.shape)),
            "boxes": ("_grad_boxes", (w, x, b, k)),
        },
        "_grad_image": {
            "grads": ("", (w, b, k, size)),
            "boxes": ("_grad_boxes", (g, w, b, k)),
        },
        "_grad_boxes": {"grads": ("_jvp_boxes", (x, b, k, w, size))},
        "_jvp_boxes": {"boxes_tangent": ("_grad_boxes", (w, x, b, k))},
    }
    suffix, args = transposes[op[len(fam) :]][wrt]
    return numpy_op(fam + suffix, *args, options=options)


def expected_tangent(op, wrt, a, t, options):
    """The NumPy API's derivative of op(a) along tangents `t` of `wrt`: the
    parts along each input, added in the op's operand order."""
    fam = family(op)
    if fam == "grid_sample":
        total = None
        for name in wrt:
            suffix, args = grid_parts(a, t)[op[len(fam) :]][name]
            part = numpy_op(fam + suffix, *args, options=options)
            total = part if total is None else total + part
        return total
    size = ROI_OUTPUT if fam == "roi_align" else CROP
    x, b, k, g = a["image"], a["boxes"], a["box_ind"], a["grads"]
    tx, tg, tb, tt = (t.get(n) for n in ("image", "grads", "boxes", "boxes_tangent"))
    # Linear in the image but for crop_and_resize's fill: the fill's tangent
    # is 0 (the NumPy op's default fill).  RoIAlign has no fill.
    parts = {
        "": {
            "image": ("", (tx, b, k, size)),
            "boxes": ("_jvp_boxes", (x, b, k, tb, size)),
        },
        "_grad_image": {"grads": ("_grad_image", (tg, b, k, x.shape))},
        "_grad_boxes": {
            "grads": ("_grad_boxes", (tg, x, b, k)),
            "image": ("_grad_boxes", (g, tx, b, k)),
        },
        "_jvp_boxes": {
            "image": ("_jvp_boxes", (tx, b, k, a.get("boxes_tangent"), size)),
            "boxes_tangent": ("_jvp_boxes", (x, b, k, tt, size)),
        },
    }
    total = None
    for name in wrt:
        suffix, args = parts[op[len(fam) :]][name]
        part = numpy_op(fam + suffix, *args, options=options)
        total = part if total is None else total + part
    return total


def units(shape):
    """Every array of `shape` with one 1 and 0 elsewhere, in C order."""
    for i in range(int(np.prod(shape))):
        unit = np.zeros(int(np.prod(shape)), np.float32)
        unit[i] = 1
        yield unit.reshape(shape)


def expected_jacobian(op, wrt, name, a, out_shape, mode, options):
    """The Jacobian of op(a) with respect to `name` (one of `wrt`), shape
    ``out_shape + a[name].shape``, from the NumPy API: one unit cotangent a
    row (reverse mode), or one unit tangent a column (forward mode)."""
    in_shape = a[name].shape
    if mode == "reverse":
        rows = [expected_gradient(op, name, a, e, options) for e in units(out_shape)]
        return np.stack(rows).reshape(out_shape + in_shape)
    # jax.jacfwd pushes every input of `wrt` forward at once, the others'
    # tangents arrays of zeros, not symbolic ones: their parts are added
    # (and decide the sign of a zero).
    zeros = {n: np.zeros_like(a[n]) for n in wrt}
    columns = [
        expected_tangent(op, wrt, a, {**zeros, name: e}, options)
        for e in units(in_shape)
    ]
    return np.stack(columns, axis=-1).reshape(out_shape + in_shape)


def check_jacobian(jacobians, op, wrt, a, out_shape, mode, options):
    for name, got in zip(wrt, jacobians, strict=True):
        want = expected_jacobian(op, wrt, name, a, out_shape, mode, options)
        # Not a Jacobian of zeros by accident (boxes off the image).
        assert np.any(want != 0), name
        assert_same_bits(np.asarray(got), want)


def loss(op, wrt, a, w, options):
    """sum(op * w) as a function of the arrays named by `wrt`."""

    def f(*xs):
        return jnp.sum(call(op, {**a, **dict(zip(wrt, xs))}, options) * w)

    return f


def gradients(column, op, wrt, a, w, options):
    """The gradient of the loss w.r.t. `wrt` taken as `column` says."""
    f = loss(op, wrt, a, w, options)
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


def reverse_cell(column, op, wrt, options):
    a, w, _ = problem(1, op, options)
    if column == "jacrev":

        def f(*xs):
            return call(op, {**a, **dict(zip(wrt, xs))}, options)

        xs = [a[name] for name in wrt]
        jacobians = jax.jacrev(f, tuple(range(len(wrt))))(*xs)
        check_jacobian(jacobians, op, wrt, a, w[op].shape, "reverse", options)
        return
    if column == "vmap":
        # Two problems at once (every array mapped): one call, and each
        # problem's bits.
        b, wb, _ = problem(2, op, options)
        stacked = {k: np.stack([a[k], b[k]]) for k in a}
        ws = np.stack([w[op], wb[op]])

        def one(arrays, w):
            f = loss(op, wrt, arrays, w, options)
            return jax.grad(f, tuple(range(len(wrt))))(*(arrays[n] for n in wrt))

        actual = jax.vmap(one)(stacked, ws)
        for k, (arrays, weights) in enumerate(((a, w[op]), (b, wb[op]))):
            for name, got in zip(wrt, actual):
                want = expected_gradient(op, name, arrays, weights, options)
                assert_same_bits(np.asarray(got[k]), want)
        return
    actual = gradients(column, op, wrt, a, w[op], options)
    expected = [expected_gradient(op, name, a, w[op], options) for name in wrt]
    for got, want in zip(actual, expected, strict=True):
        assert_same_bits(np.asarray(got), want)


def sharded_cell(column, op, wrt, options):
    """Each device differentiates its own problem; one operand is shared."""
    assert jax.device_count() >= 2, (
        "the shard_map cells need two CPU devices: JAX's backend started "
        "before this module set jax_num_cpu_devices"
    )
    shared = MAIN[op][0 if column == SHARDED[0] else 1]
    problems = [problem(3 + k, op, options) for k in range(2)]
    for arrays, _, _ in problems[1:]:
        arrays[shared] = problems[0][0][shared]
    names = sorted(problems[0][0])
    stacked = {k: np.stack([p[0][k] for p in problems]) for k in names}
    ws = np.stack([p[1][op] for p in problems])

    def body(arrays, w):
        arrays = {k: v if k == shared else v[0] for k, v in arrays.items()}
        f = loss(op, wrt, arrays, w[0], options)
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
            expected_gradient(op, name, p[0], p[1][op], options) for p in problems
        ]
        if name == shared:
            # The cotangent summed over the devices (two terms: exact in
            # either order).
            assert_same_bits(np.asarray(got), per_device[0] + per_device[1])
        else:
            for k in range(2):
                assert_same_bits(np.asarray(got[k]), per_device[k])


def forward_cell(column, op, wrt, options):
    a, w, t = problem(5, op, options)

    def f(*xs):
        return call(op, {**a, **dict(zip(wrt, xs))}, options)

    xs = [a[name] for name in wrt]
    if column == "jvp":
        primal, tangent = jax.jvp(f, xs, [t[name] for name in wrt])
        assert_same_bits(np.asarray(primal), np.asarray(f(*xs)))
        assert_same_bits(np.asarray(tangent), expected_tangent(op, wrt, a, t, options))
        return
    jacobians = jax.jacfwd(f, tuple(range(len(wrt))))(*xs)
    check_jacobian(jacobians, op, wrt, a, w[op].shape, "forward", options)


def check(op, wrt, column, options):
    if column in FORWARD:
        mode, run = "forward", forward_cell
    else:
        mode, run = "reverse", sharded_cell if column in SHARDED else reverse_cell
    words = refused(op, wrt, mode)
    if words is None:
        run(column, op, wrt, options)
        return
    with pytest.raises(NotImplementedError, match=words):
        run(column, op, wrt, options)


def roi_options(cell_number):
    """The cell's RoIAlign options: each row's cells take them in turn."""
    return ROI_OPTIONS[cell_number % len(ROI_OPTIONS)]


CELLS = (
    [
        (op, wrt, column, {"data_format": data_format})
        for data_format in LAYOUTS
        for op, wrt in ROWS
        for column in COLUMNS
    ]
    + [
        (op, wrt, column, {"data_format": data_format, **roi_options(r + c + n)})
        for n, data_format in enumerate(LAYOUTS)
        for r, (op, wrt) in enumerate(ROI_ROWS)
        for c, column in enumerate(COLUMNS)
    ]
    + [
        (
            op,
            wrt,
            column,
            {
                "data_format": data_format,
                **GRID_OPTIONS[(r + c + n) % len(GRID_OPTIONS)],
            },
        )
        for n, data_format in enumerate(LAYOUTS)
        for r, (op, wrt) in enumerate(GRID_ROWS)
        for c, column in enumerate(COLUMNS)
    ]
)


def cell_id(cell):
    op, wrt, column, options = cell
    words = [op, f"d_{'+'.join(wrt)}", column, options["data_format"]]
    if family(op) == "roi_align":
        words.append(f"ratio{options['sampling_ratio']}")
        words.append("aligned" if options["aligned"] else "unaligned")
        words.append(f"scale{options['spatial_scale']}")
    if family(op) == "grid_sample":
        words += [options["mode"], options["padding_mode"]]
        words.append("aligned" if options["align_corners"] else "unaligned")
    return "-".join(words)


def test_matrix_dimensions():
    assert len(ROWS) * len(LAYOUTS) == 14
    assert len(ROI_ROWS) * len(LAYOUTS) == 28
    assert len(COLUMNS) == 11
    assert len(GRID_ROWS) * len(LAYOUTS) == 28
    assert len(CELLS) == (14 + 28 + 28) * 11
    # Every RoIAlign row, in each layout, meets every set of options.
    for op, wrt in ROI_ROWS:
        for data_format in LAYOUTS:
            seen = [
                options
                for o, w, _, options in CELLS
                if (o, w) == (op, wrt) and options["data_format"] == data_format
            ]
            for options in ROI_OPTIONS:
                assert {**options, "data_format": data_format} in seen


def test_what_raises():
    """The cells expected to raise, and only they (in each layout)."""
    raising = {
        (op, wrt, mode)
        for op, wrt in ROWS + ROI_ROWS + GRID_ROWS
        for mode in ("forward", "reverse")
        if refused(op, wrt, mode)
    }
    assert raising == {
        ("crop_and_resize_grad_image", ("boxes",), "forward"),
        ("crop_and_resize_grad_image", ("grads", "boxes"), "forward"),
        ("roi_align_grad_image", ("boxes",), "forward"),
        ("roi_align_grad_image", ("grads", "boxes"), "forward"),
        ("roi_align_grad_boxes", ("image",), "reverse"),
        ("roi_align_grad_boxes", ("grads", "image"), "reverse"),
        ("roi_align_grad_boxes", ("boxes",), "reverse"),
        ("roi_align_grad_boxes", ("boxes",), "forward"),
        ("roi_align_jvp_boxes", ("image",), "reverse"),
        ("roi_align_jvp_boxes", ("image", "boxes_tangent"), "reverse"),
        ("roi_align_jvp_boxes", ("boxes",), "reverse"),
        ("roi_align_jvp_boxes", ("boxes",), "forward"),
        ("grid_sample_grad_image", ("grid",), "forward"),
        ("grid_sample_grad_image", ("grads", "grid"), "forward"),
        ("grid_sample_grad_grid", ("image",), "reverse"),
        ("grid_sample_grad_grid", ("grads", "image"), "reverse"),
        ("grid_sample_grad_grid", ("grid",), "reverse"),
        ("grid_sample_grad_grid", ("grid",), "forward"),
        ("grid_sample_jvp_grid", ("image",), "reverse"),
        ("grid_sample_jvp_grid", ("image", "grid_tangent"), "reverse"),
        ("grid_sample_jvp_grid", ("grid",), "reverse"),
        ("grid_sample_jvp_grid", ("grid",), "forward"),
    }


@pytest.mark.parametrize("cell", CELLS, ids=cell_id)
def test_cell(cell):
    check(*cell)


@pytest.mark.parametrize("order", ["reversed", "shuffled"])
def test_every_cell_again(order):
    """After the cells above, in this process: all of them again, reversed
    or shuffled."""
    cells = CELLS[::-1] if order == "reversed" else list(CELLS)
    if order == "shuffled":
        random.Random(23).shuffle(cells)
    failures = []
    for cell in cells:
        try:
            check(*cell)
        except Exception as exc:  # collect them all, then fail once
            failures.append(f"{cell_id(cell)}: {type(exc).__name__}: {exc}"[:600])
    assert not failures, f"{len(failures)} of {len(CELLS)} cells failed:\n" + "\n".join(
        failures
    )


# (public op, NumPy boxes gradient, an image and boxes in its dialect, its
# output size); each image in its default layout.
_REPRODUCER_OPS = {
    "crop_and_resize": (
        cgj.crop_and_resize,
        cropgrad.crop_and_resize_grad_boxes,
        (1, 8, 8, 2),
        [[0.1, 0.2, 0.7, 0.9]],
        (3, 3),
    ),
    "roi_align": (
        cgj.roi_align,
        cropgrad.roi_align_grad_boxes,
        (1, 2, 8, 8),
        [[1.2, 0.7, 6.1, 5.3]],
        (3, 3),
    ),
}


@pytest.mark.parametrize("first", ["both", "image"])
@pytest.mark.parametrize("name", sorted(_REPRODUCER_OPS))
def test_the_reported_reproducer(name, first):
    """The image and the boxes, then the image alone (or the other way
    round), then a vjp: the boxes' gradient is still the NumPy API's."""
    op, numpy_grad_boxes, shape, boxes, size = _REPRODUCER_OPS[name]
    rng = np.random.default_rng(0)
    img = jnp.asarray(rng.standard_normal(shape, dtype=np.float32))
    boxes = jnp.array(boxes, jnp.float32)
    bi = jnp.array([0], jnp.int32)

    def f(im, bx):
        return op(im, bx, bi, size).sum()

    argnums = [(0, 1), 0] if first == "both" else [0, (0, 1)]
    for a in argnums:
        jax.grad(f, argnums=a)(img, boxes)
    _, vjp = jax.vjp(f, img, boxes)
    pooled_shape = jax.eval_shape(lambda: op(img, boxes, bi, size)).shape
    expected = numpy_grad_boxes(
        np.ones(pooled_shape, np.float32),
        np.asarray(img),
        np.asarray(boxes),
        np.asarray(bi),
        flush_denormals=True,
    )
    assert_same_bits(np.asarray(vjp(1.0)[1]), expected)
    assert np.abs(expected).max() > 0.5  # the boxes really move the result
    if name == "crop_and_resize":
        np.testing.assert_allclose(
            expected[0], [-20.13, -1.86, -9.35, -20.84], atol=0.006
        )
