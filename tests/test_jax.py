"""cropgrad.jax: the XLA FFI ops against the NumPy API, bit for bit.

Skipped only when JAX cannot be imported and CROPGRAD_REQUIRE_ADAPTERS is
not 1 (CI sets it, so that a missing JAX fails there).  Whatever can crash
or needs its own XLA flags runs in a child process.
"""

import contextlib
import os
import re

import numpy as np
import pytest
from _helpers import (
    assert_same_bits,
    check_boxes_derivatives,
    missing,
    run_child,
    run_exported_in_child,
    run_on_two_devices,
)

import cropgrad

try:
    import jax
    import jax.numpy as jnp
    from jax.test_util import check_grads
except ImportError as exc:
    missing(f"JAX cannot be imported ({exc})", "CROPGRAD_REQUIRE_ADAPTERS")

import cropgrad.jax as cgj
from cropgrad import _ops
from cropgrad._api.validation import CODES
from cropgrad._jax import handlers as _handlers
from cropgrad._jax import ops as _jax_ops
from cropgrad._jax import primitives as _primitives

METHODS = ["bilinear", "nearest"]
IMAGE_DTYPES = ["uint8", "float16", "bfloat16", "float32", "float64"]
OUT_DTYPES = ["float16", "bfloat16", "float32", "float64"]
# NCHW cases check the bits when this build computes in NCHW, and the
# documented NotImplementedError until then.
LAYOUTS = ["NHWC", "NCHW"]
NCHW_BUILT = _handlers.layout_status(CODES["CG_NCHW"])[0] == CODES["CG_OK"]
# Where the subprocesses find the cropgrad under test (installed or in place).


def problem(seed, batch=2, height=9, width=7, depth=5, num_boxes=6, crop=(4, 3)):
    """Random image, grads, boxes (some outside, some flipped), box_ind."""
    rng = np.random.default_rng(seed)
    image = rng.standard_normal((batch, height, width, depth)).astype(np.float32)
    grads = rng.standard_normal((num_boxes, *crop, depth)).astype(np.float32)
    boxes = rng.uniform(-0.3, 1.3, (num_boxes, 4)).astype(np.float32)
    box_ind = rng.integers(0, batch, num_boxes).astype(np.int32)
    return image, grads, boxes, box_ind


def image_of(image, dtype):
    """`image` in `dtype` (uint8 spread over its range)."""
    if dtype == "uint8":
        return np.clip(image * 60 + 128, 0, 255).astype(np.uint8)
    if dtype == "bfloat16":
        return image.astype(jnp.bfloat16)
    return image.astype(dtype)


def crops_dtype(dtype):
    """The dtype of `crop_and_resize`'s crops from an image of `dtype`: the
    image's floating dtype, float32 for integers."""
    return np.dtype(
        np.float32 if dtype == "uint8" else image_of(np.zeros(1), dtype).dtype
    )


def to_layout(x, data_format):
    return np.ascontiguousarray(x.transpose(0, 3, 1, 2)) if data_format == "NCHW" else x


def expect_layout(data_format):
    """A context: nothing for NHWC, NotImplementedError for an unbuilt NCHW."""
    if data_format == "NCHW" and not NCHW_BUILT:
        return pytest.raises(NotImplementedError, match="NCHW")
    return contextlib.nullcontext()


# --------------------------------------------------------------------------
# The forward op and the two gradients, bit for bit


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("dtype", IMAGE_DTYPES)
@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
def test_forward_bits(method, dtype, jit, x64):
    image, _, boxes, box_ind = problem(1)
    image = image_of(image, dtype)
    # The NumPy API's float32 crops, rounded once to the image's dtype.
    expected = cropgrad.crop_and_resize(
        image, boxes, box_ind, (4, 3), method, 0.5, flush_denormals=True
    ).astype(crops_dtype(dtype))

    def f(image, boxes, box_ind):
        return cgj.crop_and_resize(image, boxes, box_ind, (4, 3), method, 0.5)

    actual = (jax.jit(f) if jit else f)(image, boxes, box_ind)
    assert actual.dtype == expected.dtype
    assert_same_bits(np.asarray(actual), expected)


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("dtype", OUT_DTYPES)
@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
def test_grad_image_op_bits(method, dtype, jit, x64):
    image, grads, boxes, box_ind = problem(2)
    expected = cropgrad.crop_and_resize_grad_image(
        grads, boxes, box_ind, image.shape, dtype, method, flush_denormals=True
    )

    def f(grads, boxes, box_ind):
        return cgj.crop_and_resize_grad_image(
            grads, boxes, box_ind, image.shape, dtype, method
        )

    actual = (jax.jit(f) if jit else f)(grads, boxes, box_ind)
    assert_same_bits(np.asarray(actual), expected)


@pytest.mark.parametrize("dtype", IMAGE_DTYPES)
@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
def test_grad_boxes_op_bits(dtype, jit, x64):
    image, grads, boxes, box_ind = problem(3)
    image = image_of(image, dtype)
    expected = cropgrad.crop_and_resize_grad_boxes(
        grads, image, boxes, box_ind, flush_denormals=True
    )
    f = (
        jax.jit(cgj.crop_and_resize_grad_boxes)
        if jit
        else cgj.crop_and_resize_grad_boxes
    )
    assert_same_bits(np.asarray(f(grads, image, boxes, box_ind)), expected)


@pytest.mark.parametrize("data_format", LAYOUTS)
def test_layouts(data_format):
    image, grads, boxes, box_ind = problem(4)
    with expect_layout(data_format):
        crops = cgj.crop_and_resize(
            to_layout(image, data_format),
            boxes,
            box_ind,
            (4, 3),
            data_format=data_format,
        )
        assert_same_bits(
            np.asarray(crops),
            to_layout(
                cropgrad.crop_and_resize(image, boxes, box_ind, (4, 3)), data_format
            ),
        )
        shape = to_layout(image, data_format).shape
        d_image = cgj.crop_and_resize_grad_image(
            to_layout(grads, data_format),
            boxes,
            box_ind,
            shape,
            data_format=data_format,
        )
        assert_same_bits(
            np.asarray(d_image),
            to_layout(
                cropgrad.crop_and_resize_grad_image(grads, boxes, box_ind, image.shape),
                data_format,
            ),
        )
        d_boxes = cgj.crop_and_resize_grad_boxes(
            to_layout(grads, data_format),
            to_layout(image, data_format),
            boxes,
            box_ind,
            data_format=data_format,
        )
        assert_same_bits(
            np.asarray(d_boxes),
            cropgrad.crop_and_resize_grad_boxes(grads, image, boxes, box_ind),
        )


def test_box_ind_dtypes_and_list_inputs(x64):
    image, _, boxes, box_ind = problem(5)
    expected = cropgrad.crop_and_resize(image, boxes, box_ind, (4, 3))
    for index in (box_ind.astype(np.int64), box_ind.astype(np.uint8), box_ind.tolist()):
        actual = cgj.crop_and_resize(image, boxes.tolist(), index, [4, 3])
        assert_same_bits(np.asarray(actual), expected)


# --------------------------------------------------------------------------
# Autodiff


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
def test_grad_equals_the_gradient_kernels(method, dtype, x64):
    # The image gradient comes in the image's dtype (bfloat16 rounded once).
    image, grads, boxes, box_ind = problem(6)
    image = image_of(image, dtype)

    @jax.jit
    @jax.grad
    def gradients(args):
        image, boxes = args
        crops = cgj.crop_and_resize(image, boxes, box_ind, (4, 3), method)
        return jnp.sum(crops * grads)

    d_image, d_boxes = gradients((image, boxes))
    # The crops' cotangent reaches the kernels through the crops' dtype.
    grads = grads.astype(crops_dtype(dtype)).astype(np.float32)
    assert_same_bits(
        np.asarray(d_image),
        cropgrad.crop_and_resize_grad_image(
            grads, boxes, box_ind, image.shape, dtype, method, flush_denormals=True
        ),
    )
    if method == "bilinear":
        expected = cropgrad.crop_and_resize_grad_boxes(
            grads, image, boxes, box_ind, flush_denormals=True
        )
    else:
        # Nearest sampling is piecewise constant in the boxes.
        expected = np.zeros_like(boxes)
    assert_same_bits(np.asarray(d_boxes), expected)


def test_vjp_eager_and_integer_image():
    image, grads, boxes, box_ind = problem(7)
    crops, vjp = jax.vjp(
        lambda x, b: cgj.crop_and_resize(x, b, box_ind, (4, 3)), image, boxes
    )
    d_image, d_boxes = vjp(jnp.asarray(grads))
    assert_same_bits(
        np.asarray(d_image),
        cropgrad.crop_and_resize_grad_image(grads, boxes, box_ind, image.shape),
    )
    # An integer image has no gradient; the boxes still have theirs.
    pixels = image_of(image, "uint8")
    d_boxes = jax.grad(
        lambda b: jnp.sum(cgj.crop_and_resize(pixels, b, box_ind, (4, 3)) * grads)
    )(boxes)
    assert_same_bits(
        np.asarray(d_boxes),
        cropgrad.crop_and_resize_grad_boxes(grads, pixels, boxes, box_ind),
    )


def test_grad_image_vjp_is_the_forward_op_and_the_boxes_gradient():
    image, grads, boxes, box_ind = problem(8)
    _, vjp = jax.vjp(
        lambda g, b: cgj.crop_and_resize_grad_image(g, b, box_ind, image.shape),
        grads,
        boxes,
    )
    d_grads, d_boxes = vjp(jnp.asarray(image))
    assert_same_bits(
        np.asarray(d_grads), cropgrad.crop_and_resize(image, boxes, box_ind, (4, 3))
    )
    assert_same_bits(
        np.asarray(d_boxes),
        cropgrad.crop_and_resize_grad_boxes(grads, image, boxes, box_ind),
    )


@pytest.mark.parametrize("method", METHODS)
def test_check_grads_image_to_second_order(method):
    # The ops are linear in the image (and in grads): a large finite
    # difference step is exact, and keeps float32 rounding of the outputs
    # from swamping the differences.
    image, _, boxes, box_ind = problem(9)
    check_grads(
        lambda x: cgj.crop_and_resize(x, boxes, box_ind, (4, 3), method),
        (image,),
        order=2,
        modes=["fwd", "rev"],
        eps=1e-2,
    )
    check_grads(
        lambda g: cgj.crop_and_resize_grad_image(
            g, boxes, box_ind, image.shape, method=method
        ),
        (problem(9)[1],),
        order=2,
        modes=["fwd", "rev"],
        eps=1e-2,
    )


def test_check_grads_boxes():
    # Boxes well inside the image, so that the finite differences do not
    # step across the edge where samples start to be skipped.
    image, _, _, box_ind = problem(10, height=17, width=15)
    rng = np.random.default_rng(10)
    boxes = np.sort(rng.uniform(0.1, 0.9, (6, 2, 2)), axis=1)
    boxes = boxes.transpose(0, 2, 1).reshape(6, 4)[:, [0, 2, 1, 3]].astype(np.float32)
    check_grads(
        lambda b: cgj.crop_and_resize(image, b, box_ind, (4, 3)),
        (boxes,),
        order=1,
        modes=["fwd", "rev"],
    )


def test_second_derivative_through_the_image_gradient():
    image, grads, boxes, box_ind = problem(11)

    def loss(x):
        return jnp.sum(cgj.crop_and_resize(x, boxes, box_ind, (4, 3)) ** 2)

    # grad(loss) = grad_image(2 * crops): the gradient of <v, grad(loss)> is
    # grad_image(2 * crop(v)), v being any image.
    v = jnp.asarray(problem(12)[0])
    hvp = jax.jit(jax.grad(lambda x: jnp.vdot(v, jax.grad(loss)(x))))(image)
    crops_v = cropgrad.crop_and_resize(np.asarray(v), boxes, box_ind, (4, 3))
    expected = cropgrad.crop_and_resize_grad_image(
        2 * crops_v, boxes, box_ind, image.shape
    )
    assert_same_bits(np.asarray(hvp), expected)


def test_boxes_gradient_is_not_differentiable():
    image, grads, boxes, box_ind = problem(13)
    with pytest.raises(NotImplementedError, match="not differentiable"):
        jax.grad(
            lambda b: jnp.sum(cgj.crop_and_resize_grad_boxes(grads, image, b, box_ind))
        )(boxes)


# --------------------------------------------------------------------------
# vmap: one FFI call for the whole batch


def ffi_calls(fn, *args):
    """crop_and_resize's FFI custom calls by target in the HLO of
    ``jax.jit(fn)(*args)``."""
    text = jax.jit(fn).lower(*args).as_text()
    return {
        target: text.count(f"@{target}(") + text.count(f'"{target}"')
        for target in cgj.FFI_TARGETS
        if target.startswith("cropgrad_crop_and_resize")
    }


@pytest.mark.parametrize(
    "in_axes",
    [(0, 0, 0), (0, None, None), (None, 0, 0), (None, 0, None), (0, 0, None)],
)
def test_vmap_forward(in_axes):
    rng = np.random.default_rng(14)
    n = 3
    image, _, boxes, box_ind = problem(14)
    images = rng.standard_normal((n, *image.shape)).astype(np.float32)
    boxes_n = rng.uniform(-0.3, 1.3, (n, *boxes.shape)).astype(np.float32)
    index_n = rng.integers(0, image.shape[0], (n, *box_ind.shape)).astype(np.int32)
    args = [
        a if axis == 0 else b
        for a, b, axis in zip(
            (images, boxes_n, index_n), (image, boxes, box_ind), in_axes
        )
    ]

    def f(image, boxes, box_ind):
        return cgj.crop_and_resize(image, boxes, box_ind, (4, 3))

    batched = jax.vmap(f, in_axes=in_axes)
    out = batched(*args)
    for k in range(n):
        one = [a[k] if axis == 0 else a for a, axis in zip(args, in_axes)]
        assert_same_bits(np.asarray(out[k]), cropgrad.crop_and_resize(*one, (4, 3)))
    assert ffi_calls(batched, *args)["cropgrad_crop_and_resize"] == 1


def test_vmap_gradients_and_nesting():
    rng = np.random.default_rng(15)
    image, grads, boxes, box_ind = problem(15)
    n, m = 2, 3
    images = rng.standard_normal((n, m, *image.shape)).astype(np.float32)
    boxes_nm = rng.uniform(-0.3, 1.3, (n, m, *boxes.shape)).astype(np.float32)

    def grad_fn(image, boxes):
        return jax.grad(
            lambda x, b: jnp.sum(cgj.crop_and_resize(x, b, box_ind, (4, 3)) * grads),
            argnums=(0, 1),
        )(image, boxes)

    batched = jax.vmap(jax.vmap(grad_fn))
    d_images, d_boxes = batched(images, boxes_nm)
    for i in range(n):
        for j in range(m):
            assert_same_bits(
                np.asarray(d_images[i, j]),
                cropgrad.crop_and_resize_grad_image(
                    grads, boxes_nm[i, j], box_ind, image.shape
                ),
            )
            assert_same_bits(
                np.asarray(d_boxes[i, j]),
                cropgrad.crop_and_resize_grad_boxes(
                    grads, images[i, j], boxes_nm[i, j], box_ind
                ),
            )
    calls = ffi_calls(batched, images, boxes_nm)
    assert calls == {
        "cropgrad_crop_and_resize": 0,  # only the gradients are used
        "cropgrad_crop_and_resize_grad_image": 1,
        "cropgrad_crop_and_resize_grad_boxes": 1,
        "cropgrad_crop_and_resize_jvp_boxes": 0,  # transposed, never run
    }


def test_vmap_grad_image_op():
    rng = np.random.default_rng(16)
    image, grads, boxes, box_ind = problem(16)
    grads_n = rng.standard_normal((4, *grads.shape)).astype(np.float32)

    def f(g):
        return cgj.crop_and_resize_grad_image(g, boxes, box_ind, image.shape)

    out = jax.vmap(f)(grads_n)
    for k in range(4):
        assert_same_bits(np.asarray(out[k]), np.asarray(f(grads_n[k])))
    assert ffi_calls(jax.vmap(f), grads_n)["cropgrad_crop_and_resize_grad_image"] == 1


def test_vmap_keeps_bad_indices_out_of_range():
    # Index 2 of a batch of 2 must not read the next problem's first image.
    image, _, boxes, box_ind = problem(17, num_boxes=2)
    images = np.stack([image, image])
    bad = np.array([[0, 2], [0, 1]], np.int32)
    f = jax.vmap(lambda x, i: cgj.crop_and_resize(x, boxes, i, (4, 3)))
    with pytest.raises(Exception, match=r"IndexError: box_ind has values outside"):
        np.asarray(f(images, bad))
    with pytest.raises(Exception, match=r"IndexError: box_ind has values outside"):
        np.asarray(f(images, np.array([[0, 1], [-1, 1]], np.int32)))


@pytest.mark.parametrize("value", [2, 5, -3])
def test_vmap_messages_name_the_callers_indices(value):
    # The folded call sees box 3 * 2 + 2 = 8 of 4 images, and the value
    # shifted past the folded end: the message restates both.
    image, grads, boxes, _ = problem(17, num_boxes=3)
    images = np.broadcast_to(image, (2, 2, *image.shape))
    index = np.zeros((2, 2, 3), np.int32)
    index[1, 0, 2] = value
    f = jax.vmap(jax.vmap(lambda x, i: cgj.crop_and_resize(x, boxes, i, (4, 3))))
    expected = (
        "box_ind has values outside [0, batch_size) = [0, 2): "
        f"box_ind[1, 0, 2] = {value}"
    )
    with pytest.raises(Exception, match=re.escape(expected)):
        np.asarray(f(images, index))
    g = jax.vmap(lambda i: cgj.crop_and_resize_grad_image(grads, boxes, i, image.shape))
    with pytest.raises(Exception, match=re.escape(expected.replace("1, 0, 2", "2, 2"))):
        np.asarray(g(index.reshape(4, 3)))
    nan_boxes = np.broadcast_to(boxes, (4, 3, 4)).copy()
    nan_boxes[2, 1, 3] = np.nan
    h = jax.vmap(lambda b: cgj.crop_and_resize(image, b, index[0, 0], (4, 3)))
    with pytest.raises(
        Exception, match=re.escape("boxes must be finite: boxes[2, 1] = [")
    ):
        np.asarray(h(nan_boxes))


# --------------------------------------------------------------------------
# Threads, denormals


def test_num_threads_is_a_static_attribute():
    # Large enough for the kernel to start a team of threads.
    image, grads, boxes, box_ind = problem(
        18, height=64, width=64, depth=32, num_boxes=200, crop=(14, 14)
    )
    results = [
        np.asarray(
            cgj.crop_and_resize_grad_image(
                grads, boxes, box_ind, image.shape, num_threads=n
            )
        )
        for n in (1, 2, 3, 7)
    ]
    for r in results[1:]:
        assert_same_bits(r, results[0])
    text = (
        jax.jit(
            lambda g: cgj.crop_and_resize_grad_image(
                g, boxes, box_ind, image.shape, num_threads=3
            )
        )
        .lower(grads)
        .as_text()
    )
    assert "num_threads = 3 : i32" in text
    with pytest.raises(TypeError, match="num_threads must be a static"):
        jax.jit(
            lambda n: cgj.crop_and_resize(image, boxes, box_ind, (2, 2), num_threads=n)
        )(2)


def test_subnormals_flush_as_xla_does_on_every_thread_count():
    # XLA:CPU flushes subnormals; so must every thread of the kernel.
    # Large enough for the kernel to start a team of threads.
    image, grads, boxes, box_ind = problem(
        19, height=64, width=64, depth=32, num_boxes=200, crop=(14, 14)
    )
    grads[::2] *= np.float32(1e-39)
    expected = cropgrad.crop_and_resize_grad_image(
        grads, boxes, box_ind, image.shape, flush_denormals=True
    )
    for n in (1, 2, 3):
        actual = cgj.crop_and_resize_grad_image(
            grads, boxes, box_ind, image.shape, num_threads=n
        )
        assert_same_bits(np.asarray(actual), expected)


# --------------------------------------------------------------------------
# Empty problems


def test_empty_problems():
    image, _, _, _ = problem(20)
    none = np.zeros((0, 4), np.float32), np.zeros(0, np.int32)
    assert cgj.crop_and_resize(image, *none, (3, 2)).shape == (0, 3, 2, 5)
    shallow = np.zeros((2, 9, 7, 0), np.float32)
    boxes = np.array([[0, 0, 1, 1]], np.float32)
    assert cgj.crop_and_resize(shallow, boxes, [1], (3, 2)).shape == (1, 3, 2, 0)
    zeros = cgj.crop_and_resize_grad_image(np.zeros((0, 3, 2, 5)), *none, image.shape)
    assert_same_bits(np.asarray(zeros), np.zeros(image.shape, np.float32))
    assert cgj.crop_and_resize_grad_image(
        np.zeros((0, 3, 2, 5)), *none, (0, 9, 7, 5)
    ).shape == (0, 9, 7, 5)
    assert cgj.crop_and_resize_grad_boxes(
        np.zeros((0, 3, 2, 5)), image, *none
    ).shape == (0, 4)
    d_image = jax.grad(lambda x: cgj.crop_and_resize(x, *none, (3, 2)).sum())(image)
    assert_same_bits(np.asarray(d_image), np.zeros_like(image))


# --------------------------------------------------------------------------
# Errors


def _image_args():
    image, grads, boxes, box_ind = problem(21)
    return image, grads, boxes, box_ind


TRACE_ERRORS = [
    # (call, exception, message fragment)
    (
        lambda i, g, b, k: cgj.crop_and_resize(i, b, k, (4, 3), "bicubic"),
        ValueError,
        "method must be one of",
    ),
    (
        lambda i, g, b, k: cgj.crop_and_resize(i.astype(bool), b, k, (4, 3)),
        TypeError,
        "image must hold real numbers",
    ),
    (
        lambda i, g, b, k: cgj.crop_and_resize(i.astype(jnp.uint32), b, k, (4, 3)),
        TypeError,
        "image must be uint8",
    ),
    (
        lambda i, g, b, k: cgj.crop_and_resize(i[0], b, k, (4, 3)),
        ValueError,
        "image must be 4-D",
    ),
    (
        lambda i, g, b, k: cgj.crop_and_resize(i[:, :0], b, k, (4, 3)),
        ValueError,
        "image dimensions must be positive",
    ),
    (
        lambda i, g, b, k: cgj.crop_and_resize(i, b[:, :3], k, (4, 3)),
        ValueError,
        "boxes must be 2-D with 4 columns",
    ),
    (
        lambda i, g, b, k: cgj.crop_and_resize(i, b.astype(np.complex64), k, (4, 3)),
        TypeError,
        "boxes must hold real numbers",
    ),
    (
        lambda i, g, b, k: cgj.crop_and_resize(i, b, k[:-1], (4, 3)),
        ValueError,
        "box_ind has incompatible shape",
    ),
    (
        lambda i, g, b, k: cgj.crop_and_resize(i, b, k.astype(np.float32), (4, 3)),
        TypeError,
        "box_ind must hold integers",
    ),
    (
        lambda i, g, b, k: cgj.crop_and_resize(i, b, k, (4, 0)),
        ValueError,
        "crop dimensions must be positive",
    ),
    (
        lambda i, g, b, k: cgj.crop_and_resize(i, b, k, (4, 3, 2)),
        ValueError,
        "crop_size must have 2 elements",
    ),
    (
        lambda i, g, b, k: cgj.crop_and_resize(
            i, b, k, (4, 3), extrapolation_value="x"
        ),
        TypeError,
        "extrapolation_value must be a real number",
    ),
    (
        lambda i, g, b, k: cgj.crop_and_resize(i, b, k, (4, 3), data_format="HWNC"),
        ValueError,
        "data_format must be",
    ),
    (
        lambda i, g, b, k: cgj.crop_and_resize(i, b, k, (4, 3), num_threads=True),
        TypeError,
        "num_threads must be None or an int",
    ),
    (
        lambda i, g, b, k: cgj.crop_and_resize(i, b, k, (4, 3), num_threads=0),
        ValueError,
        "num_threads must be from 1 to 1024",
    ),
    (
        lambda i, g, b, k: cgj.crop_and_resize_grad_image(g, b, k, i.shape, "int32"),
        TypeError,
        "dtype must be float16, float32 or float64",
    ),
    (
        lambda i, g, b, k: cgj.crop_and_resize_grad_image(g, b, k, (2, 9, 7, 4)),
        ValueError,
        "image_shape and grads are incompatible",
    ),
    (
        lambda i, g, b, k: cgj.crop_and_resize_grad_image(g, b, k, (2, 0, 7, 5)),
        ValueError,
        "image dimensions must be positive",
    ),
    (
        lambda i, g, b, k: cgj.crop_and_resize_grad_image(g, b, k, (-1, 9, 7, 5)),
        ValueError,
        "batch and depth must be non-negative",
    ),
    (
        lambda i, g, b, k: cgj.crop_and_resize_grad_image(g, b, k, (2, 9, 7)),
        ValueError,
        "image_shape must have 4 elements",
    ),
    (
        lambda i, g, b, k: cgj.crop_and_resize_grad_image(g[:, :0], b, k, i.shape),
        ValueError,
        "grads dimensions must be positive",
    ),
    (
        lambda i, g, b, k: cgj.crop_and_resize_grad_image(g[:-1], b, k, i.shape),
        ValueError,
        "boxes and grads have incompatible shape",
    ),
    (
        lambda i, g, b, k: cgj.crop_and_resize_grad_boxes(g, i, b, k, "nearest"),
        ValueError,
        "method must be one of 'bilinear'",
    ),
    (
        lambda i, g, b, k: cgj.crop_and_resize_grad_boxes(g, i[..., :2], b, k),
        ValueError,
        "image and grads must have the same depth",
    ),
    (
        lambda i, g, b, k: cgj.crop_and_resize_grad_boxes(g[0], i, b, k),
        ValueError,
        "grads must be 4-D",
    ),
]


@pytest.mark.parametrize("case", range(len(TRACE_ERRORS)))
@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
def test_trace_time_errors(case, jit):
    call, exception, fragment = TRACE_ERRORS[case]
    args = _image_args()
    with pytest.raises(exception, match=fragment):
        if jit:
            jax.jit(call)(*args)
        else:
            call(*args)


def test_static_arguments_cannot_be_traced():
    image, grads, boxes, box_ind = _image_args()
    with pytest.raises(TypeError, match="crop_size must be a static"):
        jax.jit(lambda s: cgj.crop_and_resize(image, boxes, box_ind, s))(
            jnp.array([4, 3])
        )
    with pytest.raises(TypeError, match="image_shape must be a static"):
        jax.jit(lambda s: cgj.crop_and_resize_grad_image(grads, boxes, box_ind, s))(
            jnp.array(image.shape)
        )


def test_run_time_errors_come_back_as_exceptions():
    # In a child: if a bad value crashed the process, only the child dies.
    report = run_child(
        """
        import json
        import numpy as np
        import jax, jax.numpy as jnp
        import cropgrad.jax as cgj

        image = np.zeros((2, 9, 7, 3), np.float32)
        grads = np.ones((2, 4, 3, 3), np.float32)
        good = np.array([[0, 0, 1, 1], [0.2, 0.1, 0.9, 0.8]], np.float32)
        nan = good.copy(); nan[1, 2] = np.nan
        inf = good.copy(); inf[0, 0] = -np.inf
        ok_index, bad_index = np.array([0, 1], np.int32), np.array([0, 7], np.int32)
        forward = jax.jit(lambda x, b, i: cgj.crop_and_resize(x, b, i, (4, 3)))
        grad = jax.jit(jax.grad(
            lambda x, b, i: cgj.crop_and_resize(x, b, i, (4, 3)).sum(), (0, 1)))
        grad_image = jax.jit(lambda g, b, i: cgj.crop_and_resize_grad_image(
            g, b, i, (2, 9, 7, 3)))
        grad_boxes = jax.jit(cgj.crop_and_resize_grad_boxes)
        calls = {
            "forward nan": lambda: forward(image, nan, ok_index),
            "forward index": lambda: forward(image, good, bad_index),
            "forward index again": lambda: forward(image, good, bad_index),
            "grad inf": lambda: grad(image, inf, ok_index),
            "grad_image index": lambda: grad_image(grads, good, bad_index),
            "grad_boxes nan": lambda: grad_boxes(grads, image, nan, ok_index),
            "eager index": lambda: cgj.crop_and_resize(image, good, bad_index, (4, 3)),
        }
        report = {}
        for name, call in calls.items():
            try:
                jax.block_until_ready(call())
                report[name] = "no error"
            except Exception as exc:
                report[name] = str(exc)
        # Still usable afterwards.
        report["after"] = float(forward(image + 1, good, ok_index).sum())
        print(json.dumps(report))
        """
    )
    index_msg = (
        "IndexError: box_ind has values outside [0, batch_size) = [0, 2): "
        "box_ind[1] = 7"
    )
    assert "cropgrad.jax.crop_and_resize: " + index_msg in report["forward index"]
    assert index_msg in report["forward index again"]
    assert index_msg in report["eager index"]
    assert (
        "cropgrad.jax.crop_and_resize_grad_image: " + index_msg
        in (report["grad_image index"])
    )
    for name in ("forward nan", "grad inf", "grad_boxes nan"):
        assert "ValueError: boxes must be finite: boxes[" in report[name], name
    assert report["after"] == 2 * 4 * 3 * 3


# --------------------------------------------------------------------------
# Devices: pmap and shard_map over two CPU devices


def test_pmap_and_shard_map_match_the_serial_result():
    report = run_on_two_devices(
        """
        images, boxes, box_ind, grads = two_problems(
            (2, 9, 7, 3), -0.2, 1.2, (4, 3, 3))

        def step(image, boxes, box_ind, grads):
            crops, vjp = jax.vjp(
                lambda x, b: cgj.crop_and_resize(x, b, box_ind, (4, 3)), image, boxes)
            return (crops,) + vjp(grads)

        serial = [
            [cropgrad.crop_and_resize(images[k], boxes[k], box_ind[k], (4, 3)),
             cropgrad.crop_and_resize_grad_image(
                 grads[k], boxes[k], box_ind[k], images[k].shape),
             cropgrad.crop_and_resize_grad_boxes(
                 grads[k], images[k], boxes[k], box_ind[k])]
            for k in range(2)
        ]
        report = {}
        pmapped = jax.pmap(step)(images, boxes, box_ind, grads)
        report["pmap"] = all(
            np.asarray(pmapped[i][k]).tobytes() == serial[k][i].tobytes()
            for i in range(3) for k in range(2))
        sharded = on_each_device(
            lambda *a: tuple(x[None] for x in step(*(y[0] for y in a))),
            images, boxes, box_ind, grads)
        report["shard_map"] = all(
            np.asarray(sharded[i][k]).tobytes() == serial[k][i].tobytes()
            for i in range(3) for k in range(2))
        report["devices"] = sorted(
            {str(s.device) for s in sharded[0].addressable_shards})
        # An operand closed over (the same on every device) varies over no
        # axis: the op casts it to vary like the others.
        shared = on_each_device(
            lambda x, b: cgj.crop_and_resize(x[0], b[0], box_ind[0], (4, 3))[None],
            images, boxes)
        report["closed_over"] = all(
            np.asarray(shared[k]).tobytes() == cropgrad.crop_and_resize(
                images[k], boxes[k], box_ind[0], (4, 3)).tobytes()
            for k in range(2))
        print(json.dumps(report))
        """
    )
    assert report["pmap"] and report["shard_map"] and report["closed_over"], report
    assert len(report["devices"]) == 2


# --------------------------------------------------------------------------
# FFI plumbing, registration and packaging


def test_handlers_answer_the_metadata_query():
    for name, capsule in _handlers.handlers().items():
        assert _handlers.metadata(capsule) == (*_handlers.FFI_API_VERSION, 0), name


def test_runtime_ffi_version():
    major, minor = np.asarray(
        jax.ffi.ffi_call(
            "cropgrad_ffi_version", jax.ShapeDtypeStruct((2,), jnp.int32)
        )()
    )
    # XLA registered handlers declaring our version: same major, as new a minor.
    assert major == _handlers.FFI_API_VERSION[0]
    assert minor >= _handlers.FFI_API_VERSION[1]


# The attributes each family's handlers decode, in this order (a call with
# more than one missing or wrong gets the first's message): the fold's shape,
# which only a folded call has, in its place; crop_and_resize's fill only
# for its forward op.
DECODED = {
    "crop_and_resize": (
        "method",
        "layout",
        "num_threads",
        "fold_shape",
        "extrapolation_value",
    ),
    "roi_align": (
        "spatial_scale",
        "sampling_ratio",
        "aligned",
        "layout",
        "num_threads",
        "fold_shape",
    ),
    "grid_sample": (
        "mode",
        "padding_mode",
        "align_corners",
        "layout",
        "num_threads",
        "fold_shape",
    ),
}
# XLA's code of each scalar type, as the handlers' messages give it, and a
# value of another type.
XLA_CODES = {"s32": 4, "f32": 11, "f64": 12}
WRONG_TYPES = {"s32": np.int64, "f32": np.float64, "f64": np.float32}


def ffi_error(op, attrs):
    """The message of the FFI call of `op` (a row of cropgrad._jax.ops) with
    attributes `attrs`, its operands and result float32 zeros of their
    ranks, all of size 1: such a call is refused, while its attributes are
    decoded or, past them, for its buffers' dtypes or shapes."""
    model = _ops.OPS[op.name]
    ranks = [a.rank for a in model.args_of("jax") if a.kind == "array"]
    result = jax.ShapeDtypeStruct((1,) * model.result.rank, jnp.float32)
    call = jax.ffi.ffi_call(op.target, result)
    # A new function each time: JAX's cache would take an int64 attribute
    # for the int32 of equal value that an earlier call had.
    run = jax.jit(lambda *operands: call(*operands, **attrs))
    with pytest.raises(jax.errors.JaxRuntimeError) as info:
        jax.block_until_ready(run(*(jnp.zeros((1,) * n, jnp.float32) for n in ranks)))
    return re.search(r"cropgrad\.jax\.\S+: \w+: [^\n]*", str(info.value)).group(0)


@pytest.mark.parametrize(
    "name", [op.name for op in _jax_ops.OPS.values() if op.target is not None]
)
def test_ffi_attributes_are_the_models_in_its_order(name):
    op = _jax_ops.OPS[name]
    family = _ops.OPS[name].family
    expected = [
        n
        for n in DECODED[family]
        if n != "extrapolation_value" or name == "crop_and_resize"
    ]
    assert [a.name for a in op.attributes] == expected
    zeros = {p: 0 for p in op.params if p != "fold"}
    attrs = _primitives._attributes(op, fold=(), **zeros)
    assert sorted(attrs) == sorted(n for n in expected if n != "fold_shape")
    folded = _primitives._attributes(op, fold=((3, True),), **zeros)
    assert folded.keys() - attrs.keys() == {"fold_shape", "fold_images"}
    bad_fold = {"fold_shape": np.array([3], np.int32), "fold_images": np.int64(3)}
    fold_error = "TypeError: attribute fold_shape must be an array of s64"
    before, past_fold = {}, False
    for a in op.attributes:
        if a.field == "fold":
            past_fold = True
            continue
        missing = f"ValueError: attribute {a.name} is missing"
        assert ffi_error(op, before).endswith(missing), a.name
        # A bad fold is found in its place: after this one, or before.
        with_fold = ffi_error(op, {**before, **bad_fold})
        assert with_fold.endswith(fold_error if past_fold else missing), a.name
        wrong = {**attrs, a.name: WRONG_TYPES[a.type](attrs[a.name])}
        assert ffi_error(op, wrong) == (
            f"cropgrad.jax.{name}: TypeError: attribute {a.name} must be a "
            f"scalar of XLA type {XLA_CODES[a.type]}"
        )
        before[a.name] = attrs[a.name]
    assert ffi_error(op, {**attrs, **bad_fold}).endswith(fold_error)
    # With its own, the call gets past the attributes.
    assert "attribute" not in ffi_error(op, attrs)
    # An unknown layout stops the decoding at once.
    unknown = {k: v for k, v in attrs.items() if k != "num_threads"}
    assert ffi_error(op, {**unknown, "layout": np.int32(7)}).endswith(
        "NotImplementedError: layout code 7 is unknown"
    )


def test_incompatible_ffi_version_is_refused_clearly():
    report = run_child(
        """
        import json
        import jax
        import cropgrad.jax
        from cropgrad._jax import handlers, registration

        jax.devices()  # the CPU backend runs: XLA checks versions at once
        try:
            registration.register("cropgrad_test_future", handlers.version_probe(1, 0))
            print(json.dumps({"error": None}))
        except ImportError as exc:
            print(json.dumps({"error": str(exc)}))
        """
    )
    assert "cannot register its XLA handler 'cropgrad_test_future'" in report["error"]
    assert "(1.0) is incompatible" in report["error"]


def test_import_without_jax_says_how_to_install():
    report = run_child(
        """
        import json, sys
        sys.modules["jax"] = None  # as if JAX were not installed
        import cropgrad
        try:
            import cropgrad.jax
            print(json.dumps({"error": None}))
        except ImportError as exc:
            print(json.dumps({"error": str(exc)}))
        """
    )
    assert 'pip install "cropgrad[jax]"' in report["error"]


def test_an_older_jax_is_refused_at_import():
    report = run_child(
        """
        import json
        import jax
        jax.__version__ = "0.9.2"
        try:
            import cropgrad.jax
            print(json.dumps({"error": None}))
        except ImportError as exc:
            print(json.dumps({"error": str(exc)}))
        """
    )
    assert report["error"] == (
        "cropgrad.jax needs JAX 0.10 or newer, found 0.9.2: upgrade it "
        "(pip install -U jax jaxlib)"
    )


@pytest.mark.parametrize(
    "module", ["cropgrad.jax", "cropgrad._jax.roi_align", "cropgrad._jax.grid_sample"]
)
def test_docstring_examples(module):
    import doctest
    import importlib

    # cropgrad.jax re-exports the RoIAlign and grid-sampling functions,
    # whose examples testmod finds only in the module defining them.
    module = importlib.import_module(module)
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0
    assert result.failed == 0


def test_readme_jax_example_runs():
    readme = os.path.join(os.path.dirname(__file__), os.pardir, "README.md")
    with open(readme, encoding="utf-8") as f:
        text = f.read()
    blocks = [
        block
        for block in text.split("```python\n")[1:]
        if "cropgrad.jax" in block.split("```")[0]
    ]
    assert blocks, "the README has no JAX example"
    namespace = {}
    exec(blocks[0].split("```")[0], namespace)
    assert np.isfinite(float(namespace["loss_value"]))


# --------------------------------------------------------------------------
# Regression: gradients must not depend on which inputs an earlier call
# differentiated


def test_boxes_gradient_after_an_image_only_gradient():
    # A trace of the op once cached per pattern of differentiated inputs
    # gave zero boxes gradients after an image-only gradient.
    rng = np.random.default_rng(0)
    img = jnp.asarray(rng.standard_normal((1, 8, 8, 2), dtype=np.float32))
    boxes = jnp.array([[0.1, 0.2, 0.7, 0.9]], jnp.float32)
    bi = jnp.array([0], jnp.int32)

    def f(im, bx):
        return cgj.crop_and_resize(im, bx, bi, (3, 3)).sum()

    ones = np.ones((1, 3, 3, 2), np.float32)
    expected_boxes = cropgrad.crop_and_resize_grad_boxes(
        ones, np.asarray(img), np.asarray(boxes), np.asarray(bi), flush_denormals=True
    )
    expected_image = cropgrad.crop_and_resize_grad_image(
        ones, np.asarray(boxes), np.asarray(bi), img.shape, flush_denormals=True
    )
    jax.grad(f, argnums=(0, 1))(img, boxes)
    assert_same_bits(np.asarray(jax.grad(f, argnums=0)(img, boxes)), expected_image)
    _, vjp = jax.vjp(f, img, boxes)
    d_boxes = np.asarray(vjp(1.0)[1])
    assert_same_bits(d_boxes, expected_boxes)
    np.testing.assert_allclose(
        d_boxes[0], [-20.13, -1.86, -9.35, -20.84], rtol=0, atol=0.006
    )

    def scanned(im, bx):
        return jax.lax.scan(lambda c, _: (c + f(im, bx), None), 0.0, length=1)[0]

    for g in (scanned, jax.checkpoint(f)):
        d_image, d_boxes = jax.grad(g, argnums=(0, 1))(img, boxes)
        assert_same_bits(np.asarray(d_boxes), expected_boxes)
        assert_same_bits(np.asarray(d_image), expected_image)
    # The mirror case: a boxes-only gradient first, then the image's.
    jax.grad(f, argnums=1)(img, boxes)
    d_image = jax.jit(jax.grad(scanned))(img, boxes)
    assert_same_bits(np.asarray(d_image), expected_image)


# --------------------------------------------------------------------------
# Forward mode, second derivatives, what has no kernel


def test_jvp_of_an_integer_image_is_along_the_boxes_only():
    image, _, boxes, box_ind = problem(22)
    pixels = image_of(image, "uint8")
    tangent = np.random.default_rng(22).standard_normal(boxes.shape).astype(np.float32)
    _, t_out = jax.jvp(
        lambda b: cgj.crop_and_resize(pixels, b, box_ind, (4, 3)), (boxes,), (tangent,)
    )
    assert_same_bits(
        np.asarray(t_out),
        cropgrad.crop_and_resize_jvp_boxes(
            pixels, boxes, box_ind, tangent, (4, 3), flush_denormals=True
        ),
    )


@pytest.mark.parametrize("layout", ["NHWC", "NCHW"])
@pytest.mark.parametrize("dtype", ["uint8", "float16", "float32", "float64"])
def test_jvp_boxes_is_the_numpy_apis_and_what_jvp_computes(dtype, layout, x64):
    image, _, boxes, box_ind = problem(24)
    pixels = image_of(image, dtype)
    if layout == "NCHW":
        pixels = np.ascontiguousarray(pixels.transpose(0, 3, 1, 2))
    tangent = np.random.default_rng(24).standard_normal(boxes.shape).astype(np.float32)
    options = dict(flush_denormals=True, data_format=layout)
    expected = cropgrad.crop_and_resize_jvp_boxes(
        pixels, boxes, box_ind, tangent, (4, 3), **options
    )
    if pixels.dtype.kind == "f":
        # As crop_and_resize returns its crops: in the image's dtype.
        expected = expected.astype(pixels.dtype)
    actual = jax.jit(
        lambda x, b, k, t: cgj.crop_and_resize_jvp_boxes(
            x, b, k, t, (4, 3), data_format=layout
        )
    )(pixels, boxes, box_ind, tangent)
    assert actual.dtype == expected.dtype
    assert_same_bits(np.asarray(actual), expected)
    _, t_out = jax.jvp(
        lambda b: cgj.crop_and_resize(pixels, b, box_ind, (4, 3), data_format=layout),
        (boxes,),
        (tangent,),
    )
    assert_same_bits(np.asarray(t_out), expected)


def test_jvp_boxes_refuses_nearest_and_a_bad_tangent():
    image, _, boxes, box_ind = problem(25)
    with pytest.raises(ValueError, match="method"):
        cgj.crop_and_resize_jvp_boxes(image, boxes, box_ind, boxes, (4, 3), "nearest")
    with pytest.raises(ValueError, match="boxes_tangent must have the shape of boxes"):
        cgj.crop_and_resize_jvp_boxes(image, boxes, box_ind, boxes[:2], (4, 3))


def test_hessian_along_the_image():
    image, _, boxes, box_ind = problem(23, batch=1, height=4, width=3, depth=1)

    def loss(x):
        return jnp.sum(
            cgj.crop_and_resize(x, boxes, box_ind, (2, 2), "bilinear", 1.0) ** 2
        )

    # loss = |A x + c|^2 for the crop's matrix A: its Hessian is 2 A^T A.
    basis = np.eye(image.size, dtype=np.float32).reshape(-1, *image.shape)
    a = np.stack(
        [cropgrad.crop_and_resize(e, boxes, box_ind, (2, 2)).ravel() for e in basis], 1
    )
    hessian = np.asarray(jax.hessian(loss)(image)).reshape(image.size, image.size)
    np.testing.assert_allclose(hessian, 2 * a.T @ a, rtol=1e-6, atol=1e-6)
    other = np.asarray(jax.jacrev(jax.jacfwd(loss))(image)).reshape(hessian.shape)
    np.testing.assert_allclose(other, hessian, rtol=1e-6, atol=1e-6)


def test_what_has_no_kernel_raises_clearly():
    image, grads, boxes, box_ind = problem(24)

    def crops(x, b):
        return cgj.crop_and_resize(x, b, box_ind, (4, 3))

    # A second derivative along the boxes.
    with pytest.raises(NotImplementedError, match="once with respect to the boxes"):
        jax.hessian(lambda b: crops(image, b).sum())(boxes)
    # Reverse mode of the boxes gradient along the image, and forward mode
    # of the image gradient along the boxes: the boxes derivative of the
    # image gradient has no kernel.
    with pytest.raises(NotImplementedError, match="no kernel for the derivative"):
        jax.grad(
            lambda x: cgj.crop_and_resize_grad_boxes(grads, x, boxes, box_ind).sum()
        )(image)
    with pytest.raises(NotImplementedError, match="no kernel for the derivative"):
        jax.jvp(
            lambda b: cgj.crop_and_resize_grad_image(grads, b, box_ind, image.shape),
            (boxes,),
            (boxes,),
        )
    # Mixed second derivatives through the boxes gradient along the image
    # work in forward mode: the boxes gradient is linear in the image.
    _, t = jax.jvp(
        lambda x: cgj.crop_and_resize_grad_boxes(grads, x, boxes, box_ind),
        (image,),
        (image,),
    )
    assert_same_bits(
        np.asarray(t),
        cropgrad.crop_and_resize_grad_boxes(
            grads, image, boxes, box_ind, flush_denormals=True
        ),
    )


def test_float64_computes_in_float32_and_check_grads_needs_a_float32_step(x64):
    # The ops read float64 images as float64 but compute in float32, as
    # TensorFlow does: finite differences need a step that float32 rounding
    # does not swamp.  1e-2 works for the image (the op is linear in it);
    # eps=1e-3 with boxes well inside the image for the boxes.
    image, _, _, box_ind = problem(25, height=17, width=15)
    image = image.astype(np.float64)
    rng = np.random.default_rng(25)
    boxes = np.sort(rng.uniform(0.1, 0.9, (6, 2, 2)), axis=1)
    boxes = boxes.transpose(0, 2, 1).reshape(6, 4)[:, [0, 2, 1, 3]]
    out = cgj.crop_and_resize(image, boxes, box_ind, (4, 3))
    # float32 results, widened: the crops are in the image's dtype.
    assert out.dtype == jnp.float64
    assert (out.astype(np.float32).astype(np.float64) == out).all()

    def f64(x, b):
        return cgj.crop_and_resize(x, b, box_ind, (4, 3))

    check_grads(
        lambda x: f64(x, boxes), (image,), order=1, modes=["fwd", "rev"], eps=1e-2
    )
    check_boxes_derivatives(lambda b: f64(image, b), boxes)
    d_image = jax.grad(lambda x: f64(x, boxes).sum())(image)
    assert d_image.dtype == jnp.float64


# --------------------------------------------------------------------------
# jax.export


def test_export_serialize_and_call_in_a_fresh_process(tmp_path):
    image, grads, boxes, box_ind = problem(26)

    def step(image, boxes):
        crops, vjp = jax.vjp(
            lambda x, b: cgj.crop_and_resize(x, b, box_ind, (4, 3)), image, boxes
        )
        return (crops, *vjp(jnp.asarray(grads)))

    report = run_exported_in_child(tmp_path, step, image=image, boxes=boxes)
    expected = [np.asarray(o).tobytes().hex() for o in step(image, boxes)]
    assert report == expected
    # Without the list, jax.export refuses the custom calls.
    with pytest.raises(ValueError, match="cropgrad_crop_and_resize"):
        jax.export.export(jax.jit(step))(image, boxes)
