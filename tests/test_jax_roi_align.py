"""cropgrad.jax's RoIAlign: the XLA FFI ops against the NumPy API and
torchvision's fixtures, bit for bit, under JAX's transformations.

The NumPy API is called with ``flush_denormals=True``, XLA:CPU's
arithmetic; the fixtures (``data/roi_align.npz``, made by torchvision
0.29.1: ``data/README.md``) hold no subnormal result, so the ops give their
bits as they are.  Skipped only when JAX cannot be imported and
CROPGRAD_REQUIRE_ADAPTERS is not 1.  What needs its own XLA flags, or a
fresh process, runs in a child process.
"""

import numpy as np
import pytest
from _helpers import (
    ROI_SPECIAL,
    assert_same_bits,
    check_boxes_derivatives,
    load_cases,
    missing,
    roi_case_names,
    run_exported_in_child,
    run_on_two_devices,
)

import cropgrad

try:
    import jax
    import jax.numpy as jnp
except ImportError as exc:
    missing(f"JAX cannot be imported ({exc})", "CROPGRAD_REQUIRE_ADAPTERS")

import cropgrad.jax as cgj

CASES = load_cases("roi_align.npz")
COMPUTED = roi_case_names(CASES, exclude=ROI_SPECIAL)
LAYOUTS = ["NCHW", "NHWC"]
IMAGE_DTYPES = ["uint8", "int16", "float16", "bfloat16", "float32", "float64"]
FLOAT_DTYPES = ["float16", "bfloat16", "float32", "float64"]
# Two sets of options: torchvision's defaults, and the others changed.
OPTIONS = [
    dict(spatial_scale=1.0, sampling_ratio=-1, aligned=False),
    dict(spatial_scale=0.5, sampling_ratio=2, aligned=True),
]


def problem(seed, batch=2, channels=3, height=9, width=8, num_boxes=6, out=(3, 2)):
    """A random NCHW problem: image, boxes in pixels (some partly outside,
    one flipped, one smaller than a pixel), box_ind, grads and a boxes
    tangent, all float32."""
    rng = np.random.default_rng(seed)
    image = rng.standard_normal((batch, channels, height, width)).astype(np.float32)
    x1 = rng.uniform(-2, width, num_boxes)
    y1 = rng.uniform(-2, height, num_boxes)
    w = rng.uniform(0.5, width / 2, num_boxes)
    h = rng.uniform(0.5, height / 2, num_boxes)
    boxes = np.stack([x1, y1, x1 + w, y1 + h], axis=1)
    boxes[1] = boxes[1, [2, 3, 0, 1]]  # flipped
    boxes[2, 2:] = boxes[2, :2] + 0.3  # smaller than a pixel
    box_ind = rng.integers(0, batch, num_boxes).astype(np.int32)
    grads = rng.standard_normal((num_boxes, channels, *out)).astype(np.float32)
    tangent = rng.standard_normal((num_boxes, 4)).astype(np.float32)
    return image, boxes.astype(np.float32), box_ind, grads, tangent


def as_dtype(x, dtype):
    """`x` in `dtype` (integers spread over a range)."""
    if dtype in ("uint8", "int16"):
        return np.clip(x * 40 + 100, 0, 255).astype(dtype)
    if dtype == "bfloat16":
        return x.astype(jnp.bfloat16)
    return x.astype(dtype)


def arith(dtype):
    return np.float64 if np.dtype(dtype) == np.float64 else np.float32


def to_layout(x, layout):
    """An NCHW array in `layout`."""
    return np.ascontiguousarray(x.transpose(0, 2, 3, 1)) if layout == "NHWC" else x


def in_dtype(x, boxes, dtype, layout):
    """An NCHW operand in `dtype` and `layout`, and the boxes in the
    arithmetic type of `dtype`."""
    return to_layout(as_dtype(x, dtype), layout), boxes.astype(arith(dtype))


def shape_in(shape, layout):
    return (shape[0], shape[2], shape[3], shape[1]) if layout == "NHWC" else shape


def np_op(op, *args, **kw):
    """The NumPy API's `op` with XLA:CPU's flush-to-zero."""
    return getattr(cropgrad, op)(*args, flush_denormals=True, **kw)


def bits(x):
    """A JAX result as a NumPy array, for assert_same_bits."""
    return np.asarray(x)


# --------------------------------------------------------------------------
# The four ops against the NumPy API


def every_option_and_layout(test):
    """`test` for both sets of options in both layouts."""
    test = pytest.mark.parametrize("layout", LAYOUTS)(test)
    return pytest.mark.parametrize("options", OPTIONS)(test)


@every_option_and_layout
@pytest.mark.parametrize("dtype", IMAGE_DTYPES)
@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
def test_forward_bits(dtype, layout, options, jit, x64):
    image, boxes, box_ind, _, _ = problem(1)
    image, boxes = in_dtype(image, boxes, dtype, layout)
    expected = np_op(
        "roi_align", image, boxes, box_ind, (3, 2), data_format=layout, **options
    )

    def f(image, boxes, box_ind):
        return cgj.roi_align(
            image, boxes, box_ind, (3, 2), data_format=layout, **options
        )

    actual = (jax.jit(f) if jit else f)(image, boxes, box_ind)
    # The image's floating dtype, float32 for integers, as the NumPy API.
    assert actual.dtype == (np.float32 if dtype in ("uint8", "int16") else image.dtype)
    assert_same_bits(bits(actual), expected)


@pytest.mark.parametrize("out_dtype", FLOAT_DTYPES)
def test_forward_output_dtype(out_dtype, x64):
    image, boxes, box_ind, _, _ = problem(2)
    expected = np_op("roi_align", image, boxes, box_ind, 2, dtype=out_dtype)
    actual = cgj.roi_align(image, boxes, box_ind, 2, dtype=out_dtype)
    assert_same_bits(bits(actual), expected)


@every_option_and_layout
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
def test_grad_image_op_bits(dtype, layout, options, jit, x64):
    image, boxes, box_ind, grads, _ = problem(3)
    shape = shape_in(image.shape, layout)
    grads, boxes = in_dtype(grads, boxes, dtype, layout)
    expected = np_op(
        "roi_align_grad_image",
        grads,
        boxes,
        box_ind,
        shape,
        data_format=layout,
        **options,
    )

    def f(grads, boxes, box_ind):
        return cgj.roi_align_grad_image(
            grads, boxes, box_ind, shape, data_format=layout, **options
        )

    actual = (jax.jit(f) if jit else f)(grads, boxes, box_ind)
    assert actual.dtype == grads.dtype
    assert_same_bits(bits(actual), expected)
    explicit = cgj.roi_align_grad_image(
        grads, boxes, box_ind, shape, dtype="float32", data_format=layout, **options
    )
    assert explicit.dtype == np.float32
    assert_same_bits(
        bits(explicit),
        np_op(
            "roi_align_grad_image",
            grads,
            boxes,
            box_ind,
            shape,
            dtype="float32",
            data_format=layout,
            **options,
        ),
    )


@every_option_and_layout
@pytest.mark.parametrize("dtype", IMAGE_DTYPES)
def test_grad_boxes_op_bits(dtype, layout, options, x64):
    image, boxes, box_ind, grads, _ = problem(4)
    image = to_layout(as_dtype(image, dtype), layout)
    grads = to_layout(grads, layout)
    boxes = boxes.astype(arith(dtype))
    expected = np_op(
        "roi_align_grad_boxes",
        grads,
        image,
        boxes,
        box_ind,
        data_format=layout,
        **options,
    )
    actual = jax.jit(
        lambda g, x, b, k: cgj.roi_align_grad_boxes(
            g, x, b, k, data_format=layout, **options
        )
    )(grads, image, boxes, box_ind)
    assert actual.dtype == arith(dtype)
    assert_same_bits(bits(actual), expected)


@every_option_and_layout
@pytest.mark.parametrize("dtype", IMAGE_DTYPES)
def test_jvp_boxes_op_bits(dtype, layout, options, x64):
    image, boxes, box_ind, _, tangent = problem(5)
    image, boxes = in_dtype(image, boxes, dtype, layout)
    expected = np_op(
        "roi_align_jvp_boxes",
        image,
        boxes,
        box_ind,
        tangent,
        (3, 2),
        data_format=layout,
        **options,
    )
    actual = jax.jit(
        lambda x, b, k, t: cgj.roi_align_jvp_boxes(
            x, b, k, t, (3, 2), data_format=layout, **options
        )
    )(image, boxes, box_ind, tangent)
    assert_same_bits(bits(actual), expected)


def test_lists_and_index_dtypes(x64):
    image, boxes, box_ind, _, _ = problem(6)
    expected = np_op("roi_align", image, boxes, box_ind, 2)
    for index in (box_ind.tolist(), box_ind.astype(np.uint8), box_ind.astype(np.int64)):
        actual = cgj.roi_align(image, boxes.tolist(), index, [2, 2])
        assert_same_bits(bits(actual), expected)


def test_no_boxes():
    image = np.ones((1, 2, 4, 4), np.float32)
    out = cgj.roi_align(image, [], [], 3)
    assert out.shape == (0, 2, 3, 3)
    grads = jax.grad(lambda x: cgj.roi_align(x, [], [], 3).sum())(image)
    assert_same_bits(bits(grads), np.zeros_like(image))


# --------------------------------------------------------------------------
# torchvision's bits


def _case(name):
    case = CASES[name]
    options = dict(
        spatial_scale=float(case["spatial_scale"]),
        sampling_ratio=int(case["sampling_ratio"]),
        aligned=bool(case["aligned"]),
    )
    size = tuple(int(v) for v in case["output_size"])
    return case, options, size


def test_the_fixtures_are_there():
    assert len(COMPUTED) >= 60


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("name", COMPUTED)
def test_torchvision_bits(name, layout, x64):
    case, options, size = _case(name)
    image = to_layout(case["image"], layout)
    grads = to_layout(case["grads"], layout)

    def step(image, boxes):
        out, vjp = jax.vjp(
            lambda x: cgj.roi_align(
                x, boxes, case["box_ind"], size, data_format=layout, **options
            ),
            image,
        )
        return out, vjp(grads)[0]

    out, grad = jax.jit(step)(image, case["boxes"])
    assert_same_bits(bits(out), to_layout(case["out"], layout), name)
    assert_same_bits(bits(grad), to_layout(case["grad_image"], layout), name)


def test_multi_scale_levels_are_torchvision_bits():
    # MultiScaleRoIAlign: roi_align per pyramid level, on that level's boxes.
    case = CASES["multi_scale_fpn_f32"]
    boxes = np.concatenate([case["boxes_0"], case["boxes_1"]])
    box_ind = np.repeat([0, 1], [len(case["boxes_0"]), len(case["boxes_1"])])
    for level, (name, scale) in enumerate(zip(("p2", "p3", "p4"), case["scales"])):
        at = np.flatnonzero(case["levels"] == level)
        feature = case["feature_" + name]
        pool = jax.jit(
            lambda x, b, k, s=float(scale): cgj.roi_align(
                x, b, k, 7, spatial_scale=s, sampling_ratio=2
            )
        )
        out, vjp = jax.vjp(lambda x: pool(x, boxes[at], box_ind[at]), feature)
        assert_same_bits(bits(out), case["out"][at], name)
        assert_same_bits(bits(vjp(case["grads"][at])[0]), case["grad_" + name], name)


# --------------------------------------------------------------------------
# Derivatives: the gradient kernels, in every mode


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_grad_is_the_gradient_kernels(dtype, layout, x64):
    image, boxes, box_ind, grads, _ = problem(7)
    image, boxes = in_dtype(image, boxes, dtype, layout)
    grads = to_layout(as_dtype(grads, dtype), layout)
    options = dict(sampling_ratio=0, spatial_scale=0.75, data_format=layout)

    def f(x, b):
        return cgj.roi_align(x, b, box_ind, (3, 2), **options)

    out, vjp = jax.vjp(jax.jit(f), image, boxes)
    g_image, g_boxes = vjp(jnp.asarray(grads))
    # The image gradient in the image's dtype, the boxes' in theirs.
    assert g_image.dtype == image.dtype and g_boxes.dtype == boxes.dtype
    expected_image = np_op(
        "roi_align_grad_image",
        grads,
        boxes,
        box_ind,
        image.shape,
        dtype=image.dtype,
        **options,
    )
    expected_boxes = np_op(
        "roi_align_grad_boxes", grads, image, boxes, box_ind, **options
    )
    assert_same_bits(bits(g_image), expected_image)
    assert_same_bits(bits(g_boxes), expected_boxes)


def test_jvp_and_jacfwd_are_the_forward_op_and_the_boxes_jvp():
    image, boxes, box_ind, _, tangent = problem(8)
    t_image = np.random.default_rng(9).standard_normal(image.shape).astype(np.float32)

    def f(x, b):
        return cgj.roi_align(x, b, box_ind, (3, 2), sampling_ratio=2)

    out, t_out = jax.jit(lambda *a: jax.jvp(f, a[:2], a[2:]))(
        image, boxes, t_image, tangent
    )
    along_image = np_op("roi_align", t_image, boxes, box_ind, (3, 2), sampling_ratio=2)
    along_boxes = np_op(
        "roi_align_jvp_boxes", image, boxes, box_ind, tangent, (3, 2), sampling_ratio=2
    )
    assert_same_bits(
        bits(out), np_op("roi_align", image, boxes, box_ind, (3, 2), sampling_ratio=2)
    )
    assert_same_bits(bits(t_out), along_image + along_boxes)
    jac = jax.jacfwd(f, argnums=1)(image, boxes)
    assert jac.shape == (6, 3, 3, 2, 6, 4)
    for box, coord in [(0, 0), (3, 2), (5, 3)]:
        unit = np.zeros_like(boxes)
        unit[box, coord] = 1
        expected = np_op(
            "roi_align_jvp_boxes", image, boxes, box_ind, unit, (3, 2), sampling_ratio=2
        )
        assert_same_bits(bits(jac[..., box, coord]), expected)


def test_derivatives_of_the_gradient_ops():
    image, boxes, box_ind, grads, tangent = problem(10)
    shape = image.shape
    # grad_image is linear in grads: its transpose is the forward op.
    cot = np.random.default_rng(11).standard_normal(shape).astype(np.float32)
    _, vjp = jax.vjp(
        lambda g: cgj.roi_align_grad_image(g, boxes, box_ind, shape), grads
    )
    assert_same_bits(bits(vjp(cot)[0]), np_op("roi_align", cot, boxes, box_ind, (3, 2)))
    # Reverse mode of grad_image along the boxes: through the boxes gradient.
    _, vjp = jax.vjp(
        lambda b: cgj.roi_align_grad_image(grads, b, box_ind, shape), boxes
    )
    assert_same_bits(
        bits(vjp(cot)[0]), np_op("roi_align_grad_boxes", grads, cot, boxes, box_ind)
    )
    # jvp_boxes is linear in the tangent: its transpose is grad_boxes.
    _, vjp = jax.vjp(
        lambda t: cgj.roi_align_jvp_boxes(image, boxes, box_ind, t, (3, 2)), tangent
    )
    assert_same_bits(
        bits(vjp(grads)[0]), np_op("roi_align_grad_boxes", grads, image, boxes, box_ind)
    )
    # grad_boxes is linear in grads: its transpose is jvp_boxes.
    _, vjp = jax.vjp(
        lambda g: cgj.roi_align_grad_boxes(g, image, boxes, box_ind), grads
    )
    assert_same_bits(
        bits(vjp(tangent)[0]),
        np_op("roi_align_jvp_boxes", image, boxes, box_ind, tangent, (3, 2)),
    )


def test_one_ffi_call_each():
    image, boxes, box_ind, grads, _ = problem(14)

    def calls(fn, *args):
        text = jax.jit(fn).lower(*args).as_text()
        return {
            t: text.count(f"@{t}(") + text.count(f'"{t}"')
            for t in cgj.FFI_TARGETS
            if t.startswith("cropgrad_roi_align")
        }

    def step(x, b):
        out, vjp = jax.vjp(lambda x, b: cgj.roi_align(x, b, box_ind, (3, 2)), x, b)
        return out, vjp(grads)

    assert calls(step, image, boxes) == {
        "cropgrad_roi_align": 1,
        "cropgrad_roi_align_grad_image": 1,
        "cropgrad_roi_align_grad_boxes": 1,
        "cropgrad_roi_align_jvp_boxes": 0,  # transposed, never run
    }
    # vmap folds the mapped axis into the op's own: still one call.
    batched = jax.vmap(lambda x: cgj.roi_align(x, boxes, box_ind, 2))
    assert calls(batched, np.stack([image, image]))["cropgrad_roi_align"] == 1


def test_second_derivatives():
    image, boxes, box_ind, _, _ = problem(12, batch=1, channels=1, height=5, width=4)

    def f(x, b):
        return (cgj.roi_align(x, b, box_ind, 2) ** 2).sum()

    # Along the image, any number of times (the op is linear in it).
    hessian = jax.hessian(f)(image, boxes)
    assert hessian.shape == image.shape * 2
    assert np.isfinite(np.asarray(hessian)).all() and np.asarray(hessian).any()
    # Along the boxes, once.
    with pytest.raises(NotImplementedError, match="differentiates roi_align once"):
        jax.hessian(f, argnums=1)(image, boxes)
    with pytest.raises(NotImplementedError, match="roi_align_grad_image"):
        jax.jvp(
            lambda b: cgj.roi_align_grad_image(
                jnp.ones((6, 1, 2, 2)), b, box_ind, image.shape
            ),
            (boxes,),
            (boxes,),
        )


def test_check_grads():
    from jax.test_util import check_grads

    image, boxes, box_ind, _, _ = problem(13)
    check_grads(
        lambda x: cgj.roi_align(x, boxes, box_ind, 2, sampling_ratio=2),
        (image,),
        order=2,
        modes=["fwd", "rev"],
        eps=1e-2,
    )
    # Boxes away from whole pixels (where a sample's slope changes).
    inside = np.array([[1.3, 1.2, 5.6, 6.7], [2.1, 0.6, 6.2, 3.9]], np.float32)
    check_boxes_derivatives(
        lambda b: cgj.roi_align(image, b, [0, 1], 2, sampling_ratio=2), inside
    )


# --------------------------------------------------------------------------
# vmap, scan, checkpoint


def test_vmap_is_the_loop():
    images, boxes, box_ind, grads = [], [], [], []
    for seed in range(3):
        x, b, k, g, _ = problem(20 + seed)
        images.append(x), boxes.append(b), box_ind.append(k), grads.append(g)
    images, boxes, box_ind, grads = map(np.stack, (images, boxes, box_ind, grads))

    def step(x, b, k, g):
        out, vjp = jax.vjp(lambda x, b: cgj.roi_align(x, b, k, (3, 2)), x, b)
        return (out, *vjp(g))

    outs = jax.jit(jax.vmap(step))(images, boxes, box_ind, grads)
    for n in range(3):
        args = images[n], boxes[n], box_ind[n]
        assert_same_bits(bits(outs[0][n]), np_op("roi_align", *args, (3, 2)))
        assert_same_bits(
            bits(outs[1][n]),
            np_op(
                "roi_align_grad_image", grads[n], boxes[n], box_ind[n], images[n].shape
            ),
        )
        assert_same_bits(
            bits(outs[2][n]), np_op("roi_align_grad_boxes", grads[n], *args)
        )
    # One image, boxes mapped (and nested).
    nested = jax.vmap(jax.vmap(lambda b: cgj.roi_align(images[0], b, box_ind[0], 2)))(
        boxes[None]
    )
    for n in range(3):
        assert_same_bits(
            bits(nested[0, n]), np_op("roi_align", images[0], boxes[n], box_ind[0], 2)
        )


@pytest.mark.parametrize("which", ["index", "nan", "samples"])
def test_vmap_messages_name_the_callers_indices(which):
    # The NumPy API's message on problem 1 alone, the box named [1, 4].
    image, boxes, box_ind, _, _ = problem(24)
    boxes = np.stack([boxes, boxes])
    box_ind = np.stack([box_ind, box_ind])
    if which == "index":
        box_ind[1, 4] = 7
    elif which == "nan":
        boxes[1, 4, 2] = np.nan
    else:
        boxes[1, 4] = [0, 0, 1e6, 1e6]
    with pytest.raises((IndexError, ValueError)) as numpy_error:
        np_op("roi_align", image, boxes[1], box_ind[1], 2, sampling_ratio=0)
    expected = str(numpy_error.value).replace("[4]", "[1, 4]")
    assert "[1, 4]" in expected
    f = jax.jit(jax.vmap(lambda b, k: cgj.roi_align(image, b, k, 2, sampling_ratio=0)))
    with pytest.raises(jax.errors.JaxRuntimeError) as info:
        f(boxes, box_ind).block_until_ready()
    kind = type(numpy_error.value).__name__
    assert str(info.value).endswith(f"cropgrad.jax.roi_align: {kind}: {expected}")


def test_scan_and_checkpoint():
    image, boxes, box_ind, grads, _ = problem(25)
    steps = np.stack([boxes + d for d in (0.0, 0.5, 1.25)])

    def loss(x, b):
        return (cgj.roi_align(x, b, box_ind, (3, 2)) * grads).sum()

    def scanned(x, bs):
        def body(total, b):
            return total + loss(x, b), None

        return jax.lax.scan(body, jnp.float32(0), bs)[0]

    g_scan = jax.jit(jax.grad(scanned))(image, steps)
    # Reverse mode runs the steps backwards, adding each step's image
    # gradient (the kernel's bits) to the sum so far.
    expected = np.zeros_like(image)
    for b in steps[::-1]:
        expected = expected + np_op(
            "roi_align_grad_image", grads, b, box_ind, image.shape
        )
    assert_same_bits(bits(g_scan), expected)
    # checkpoint recomputes the forward op: the same bits.
    plain = jax.grad(loss, argnums=(0, 1))(image, boxes)
    remat = jax.jit(jax.grad(jax.checkpoint(loss), argnums=(0, 1)))(image, boxes)
    for a, b in zip(plain, remat):
        assert_same_bits(bits(b), bits(a))


# --------------------------------------------------------------------------
# Devices, export


def test_pmap_and_shard_map_match_the_serial_result():
    report = run_on_two_devices(
        """
        images, boxes, box_ind, grads = two_problems((2, 3, 9, 7), -1, 8, (3, 2, 2))
        kw = dict(flush_denormals=True)

        def step(image, boxes, box_ind, grads):
            out, vjp = jax.vjp(
                lambda x, b: cgj.roi_align(x, b, box_ind, 2), image, boxes)
            return (out,) + vjp(grads)

        def serial(image, boxes, box_ind, grads):
            return [
                cropgrad.roi_align(image, boxes, box_ind, 2, **kw),
                cropgrad.roi_align_grad_image(
                    grads, boxes, box_ind, image.shape, **kw),
                cropgrad.roi_align_grad_boxes(grads, image, boxes, box_ind, **kw),
            ]

        def same(outs, expected):
            return all(np.asarray(outs[i][k]).tobytes() == expected[k][i].tobytes()
                       for i in range(3) for k in range(2))

        report = {}
        expected = [serial(images[k], boxes[k], box_ind[k], grads[k])
                    for k in range(2)]
        report["pmap"] = same(jax.pmap(step)(images, boxes, box_ind, grads),
                              expected)
        sharded = on_each_device(
            lambda *a: tuple(x[None] for x in step(*(y[0] for y in a))),
            images, boxes, box_ind, grads)
        report["shard_map"] = same(sharded, expected)
        report["devices"] = len({s.device for s in sharded[0].addressable_shards})
        # Either operand replicated (closed over, varying over no axis): the
        # other operand's gradient is each device's, the replicated one's
        # their sum, on every device.
        def replicated(outs, expected, summed):
            total = expected[0][summed] + expected[1][summed]
            return all(
                np.asarray(outs[i][k]).tobytes() == (
                    total if i == summed else expected[k][i]).tobytes()
                for i in range(3) for k in range(2))

        replicated_boxes = on_each_device(
            lambda x, g: tuple(
                o[None] for o in step(x[0], boxes[0], box_ind[0], g[0])),
            images, grads)
        expected = [serial(images[k], boxes[0], box_ind[0], grads[k])
                    for k in range(2)]
        report["boxes_replicated"] = replicated(replicated_boxes, expected, 2)
        replicated_image = on_each_device(
            lambda b, k, g: tuple(o[None] for o in step(images[0], b[0], k[0], g[0])),
            boxes, box_ind, grads)
        expected = [serial(images[0], boxes[k], box_ind[k], grads[k])
                    for k in range(2)]
        report["image_replicated"] = replicated(replicated_image, expected, 1)
        print(json.dumps(report))
        """
    )
    assert report == {
        "pmap": True,
        "shard_map": True,
        "devices": 2,
        "boxes_replicated": True,
        "image_replicated": True,
    }


def test_export_serialize_and_call_in_a_fresh_process(tmp_path):
    image, boxes, box_ind, grads, _ = problem(26)

    def step(image, boxes):
        out, vjp = jax.vjp(
            lambda x, b: cgj.roi_align(x, b, box_ind, (3, 2), sampling_ratio=0),
            image,
            boxes,
        )
        return (out, *vjp(jnp.asarray(grads)))

    report = run_exported_in_child(tmp_path, step, image=image, boxes=boxes)
    expected = [
        np_op("roi_align", image, boxes, box_ind, (3, 2), sampling_ratio=0),
        np_op(
            "roi_align_grad_image", grads, boxes, box_ind, image.shape, sampling_ratio=0
        ),
        np_op("roi_align_grad_boxes", grads, image, boxes, box_ind, sampling_ratio=0),
    ]
    assert report == [e.tobytes().hex() for e in expected]
    with pytest.raises(ValueError, match="cropgrad_roi_align"):
        jax.export.export(jax.jit(step))(image, boxes)


# --------------------------------------------------------------------------
# Errors: the NumPy API's exception and words


IMAGE, BOXES, BOX_IND, GRADS, TANGENT = problem(30)
VALID = {
    "roi_align": {
        "image": IMAGE,
        "boxes": BOXES,
        "box_ind": BOX_IND,
        "output_size": (3, 2),
    },
    "roi_align_grad_image": {
        "grads": GRADS,
        "boxes": BOXES,
        "box_ind": BOX_IND,
        "image_size": IMAGE.shape,
    },
    "roi_align_grad_boxes": {
        "grads": GRADS,
        "image": IMAGE,
        "boxes": BOXES,
        "box_ind": BOX_IND,
    },
    "roi_align_jvp_boxes": {
        "image": IMAGE,
        "boxes": BOXES,
        "box_ind": BOX_IND,
        "boxes_tangent": TANGENT,
        "output_size": (3, 2),
    },
}
KEYWORDS = ("spatial_scale", "sampling_ratio", "aligned", "dtype", "data_format")

_nan_box = BOXES.copy()
_nan_box[3, 1] = np.nan
_huge_box = BOXES.copy()
_huge_box[2] = [0, 0, 1e6, 1e6]

# (name, op, argument, spoilt value, exception); the last three are in the
# data, which JAX sees only when the call runs.
MISTAKES = [
    ("zero output", "roi_align", "output_size", (0, 2), ValueError),
    ("float output", "roi_align", "output_size", (2.5, 2), TypeError),
    ("three output sizes", "roi_align", "output_size", (2, 2, 2), ValueError),
    ("three box columns", "roi_align", "boxes", BOXES[:, :3], ValueError),
    ("box index short", "roi_align", "box_ind", BOX_IND[:2], ValueError),
    ("float box index", "roi_align", "box_ind", BOX_IND * 1.0, TypeError),
    ("float32 box index", "roi_align", "box_ind", BOX_IND.astype("f4"), TypeError),
    ("3-D image", "roi_align", "image", IMAGE[0], ValueError),
    ("complex image", "roi_align", "image", IMAGE.astype(np.complex64), TypeError),
    ("unknown layout", "roi_align", "data_format", "CHW", ValueError),
    ("string scale", "roi_align", "spatial_scale", "a", TypeError),
    ("infinite scale", "roi_align", "spatial_scale", np.inf, ValueError),
    ("float ratio", "roi_align", "sampling_ratio", 1.5, TypeError),
    ("huge ratio", "roi_align", "sampling_ratio", 5000, ValueError),
    ("aligned 2", "roi_align", "aligned", 2, TypeError),
    ("int dtype", "roi_align", "dtype", "int32", TypeError),
    ("tangent rows", "roi_align_jvp_boxes", "boxes_tangent", TANGENT[:2], ValueError),
    ("3 image sizes", "roi_align_grad_image", "image_size", (2, 3, 9), ValueError),
    ("channels", "roi_align_grad_image", "image_size", (2, 4, 9, 8), ValueError),
    ("grads rank", "roi_align_grad_image", "grads", GRADS[0], ValueError),
    ("grads boxes", "roi_align_grad_boxes", "grads", GRADS[:2], ValueError),
    ("grads channels", "roi_align_grad_boxes", "image", IMAGE[:, :2], ValueError),
    ("box index range", "roi_align", "box_ind", BOX_IND + 5, IndexError),
    ("NaN box", "roi_align_grad_boxes", "boxes", _nan_box, ValueError),
    ("samples per bin", "roi_align", "boxes", _huge_box, ValueError),
]
DATA = ("box index range", "NaN box", "samples per bin")


def _call(api, op, args, jit=False):
    args = dict(args)
    kwargs = {k: args.pop(k) for k in KEYWORDS if k in args}
    kwargs.setdefault("sampling_ratio", 0)
    if api == "numpy":
        return getattr(cropgrad, op)(*args.values(), **kwargs)
    arrays = {k: v for k, v in args.items() if isinstance(v, np.ndarray)}
    static = {k: v for k, v in args.items() if k not in arrays}
    names = list(args)

    def f(**arrays):
        values = {**static, **arrays}
        return getattr(cgj, op)(*(values[k] for k in names), **kwargs)

    return (jax.jit(f) if jit else f)(**arrays)


# Each mistake eager and under jit, but float64 box indices: jax.jit makes
# float32 of them before the function sees them (the row after has float32).
CALLS = [
    pytest.param(*row, jit, id=f"{row[0]}-{'jit' if jit else 'eager'}")
    for row in MISTAKES
    for jit in (False, True)
    if not (jit and row[0] == "float box index")
]


@pytest.mark.parametrize("name, op, arg, value, exc, jit", CALLS)
def test_the_same_mistake_gets_the_same_answer(name, op, arg, value, exc, jit):
    args = {**VALID[op], arg: value}
    with pytest.raises(exc) as numpy_error:
        _call("numpy", op, args)
    expected = str(numpy_error.value)
    if name in DATA:
        # XLA's error: "<status>: cropgrad.jax.<op>: <exception>: <message>".
        with pytest.raises(jax.errors.JaxRuntimeError) as info:
            np.asarray(_call("jax", op, args, jit))
        assert str(info.value).endswith(
            f"cropgrad.jax.{op}: {exc.__name__}: {expected}"
        )
    else:
        with pytest.raises(exc) as info:
            _call("jax", op, args, jit)
        assert str(info.value).replace("image_shape", "image_size") == expected


@pytest.mark.parametrize("op", sorted(VALID))
def test_the_valid_calls_are_valid(op):
    for api in ("numpy", "jax"):
        _call(api, op, VALID[op])


def test_static_arguments_cannot_be_traced():
    f = jax.jit(lambda s: cgj.roi_align(IMAGE, BOXES, BOX_IND, 2, spatial_scale=s))
    with pytest.raises(TypeError, match="spatial_scale must be a static Python value"):
        f(0.5)


def test_float64_images_need_float32_or_float64_outputs(x64):
    image = IMAGE.astype(np.float64)
    with pytest.raises(TypeError) as expected:
        np_op("roi_align", image, BOXES, BOX_IND, 2, dtype="float16")
    with pytest.raises(TypeError) as info:
        cgj.roi_align(image, BOXES, BOX_IND, 2, dtype="float16")
    assert str(info.value) == str(expected.value)
