"""cropgrad for JAX: crop-and-resize and its gradients as XLA custom calls.

The three ops of cropgrad as JAX primitives.  They run eagerly and under
`jax.jit`, `jax.vmap`, `jax.pmap`, `jax.shard_map`, `jax.lax.scan` and
`jax.checkpoint` on CPU devices.  Each op is one XLA FFI call into the
compiled kernels (through ``cropgrad._jax.handlers``), which read and write
XLA's buffers in place: no Python callback, no copy, no GIL.

Derivatives: `crop_and_resize` is differentiable in forward and reverse
mode with respect to the image (any number of times) and the boxes
(bilinear; once).  Each op has a forward-mode rule, linear in the tangents,
and JAX transposes it for reverse mode, the transposes being cropgrad's
gradient kernels: `jax.grad`, `jax.vjp`, `jax.jvp`, `jax.jacfwd`,
`jax.jacrev` and `jax.hessian` all work, and no result depends on which
inputs are differentiated.  What has no kernel raises NotImplementedError:
a second derivative along the boxes, and forward mode of
`crop_and_resize_grad_image` along the boxes (reverse mode of it works).

float64 images are read exactly, but the ops compute in float32, as
TensorFlow does: finite-difference checks need a step float32 rounding
does not swamp (``jax.test_util.check_grads(..., eps=1e-2)`` for the image,
on which the ops are linear; ``eps=1e-3`` and tolerance 1e-2 for boxes well
inside the image).

jax.export: the ops are custom calls, which `jax.export.export` accepts
when `FFI_TARGETS` are listed as known ones, and the process running the
exported function must import cropgrad.jax (registering the handlers)::

    checks = [jax.export.DisabledSafetyCheck.custom_call(t) for t in FFI_TARGETS]
    exported = jax.export.export(jax.jit(f), disabled_checks=checks)(*args)
    blob = exported.serialize()
    # elsewhere, after importing cropgrad.jax:
    jax.export.deserialize(blob).call(*args)

Results are the NumPy API's bits, computed as XLA:CPU computes everything
else: with flush-to-zero and denormals-are-zero, TensorFlow's arithmetic.
They equal ``cropgrad.crop_and_resize(..., flush_denormals=True)`` (and its
siblings), which is the default's result whenever no subnormal number occurs.

Argument errors are found while tracing and raised as the NumPy API raises
them (`TypeError`, `ValueError`, `NotImplementedError`, naming the
argument).  Errors in the data (a non-finite box, a `box_ind` value outside
``[0, batch)``) can only be found when the kernel runs: the call then
raises JAX's runtime error (`jax.errors.JaxRuntimeError`; JAX's fast path
for cached calls raises it as a `ValueError`), whose message is cropgrad's,
prefixed by the op and the exception the NumPy API would raise, e.g.
``cropgrad.jax.crop_and_resize: IndexError: box_ind has values outside
[0, batch_size) = [0, 2): box_ind[1] = 5``.  Under `jax.vmap` the box is
named by the caller's indices (``box_ind[1, 1] = 2``).

Threads: ``num_threads`` is fixed when the call is traced (it is an
attribute of the XLA call, like the method).  The default, None, is
`DEFAULT_THREADS`; see its comment for why.
"""

import functools

import numpy as np

try:
    import jax
    import jax.extend.core
    import jax.numpy as jnp
    from jax.interpreters import ad, batching, mlir
except ImportError as _exc:  # not installed, or hidden
    raise ImportError(
        "cropgrad.jax needs JAX, which could not be imported: "
        'pip install "cropgrad[jax]"'
    ) from _exc

from cropgrad import _core
from cropgrad._api import validation as _v
from cropgrad._jax import handlers as _handlers

__all__ = [
    "DEFAULT_THREADS",
    "FFI_TARGETS",
    "crop_and_resize",
    "crop_and_resize_grad_boxes",
    "crop_and_resize_grad_image",
]

# num_threads=None means this many threads; 0 is the library's default, that
# of the NumPy API: OpenMP's default count on the calling thread, which for
# XLA's threads is OMP_NUM_THREADS or the CPU count (threadpoolctl's limits
# are per thread and do not reach them).
#
# Why not 1: XLA runs the call on one of its threads and, unless it has
# independent work to run beside it, waits for it with the rest of its pool
# idle, so an OpenMP team has the cores to itself, and its threads do not
# spin at XLA's expense once the call returns.  The benchmark row
# detector-train-step-jax (a jitted training step with an independent
# branch XLA may run beside the call) measures the default against one
# thread: benchmarks/README.md has the figures.
DEFAULT_THREADS = 0

_IMAGE_DTYPES = tuple(
    np.dtype(t)
    for t in (
        np.uint8,
        np.int8,
        np.uint16,
        np.int16,
        np.int32,
        np.int64,
        np.float16,
        np.float32,
        np.float64,
        jnp.bfloat16,
    )
)
# The XLA FFI targets the ops lower to, registered for the CPU platform when
# cropgrad.jax is imported.  jax.export refuses custom calls it does not
# know to be stable unless told otherwise: pass
# [jax.export.DisabledSafetyCheck.custom_call(t) for t in FFI_TARGETS] as
# `disabled_checks` (and import cropgrad.jax before calling what it made).
FFI_TARGETS = (
    "cropgrad_crop_and_resize",
    "cropgrad_crop_and_resize_grad_image",
    "cropgrad_crop_and_resize_grad_boxes",
    "cropgrad_crop_and_resize_jvp_boxes",
)


# --------------------------------------------------------------------------
# Registration with XLA


def _register(name, capsule):
    """Register one handler for the CPU platform, explaining a refusal.

    XLA asks the handler which FFI API version it was written for and
    refuses versions it does not support.  When the CPU backend already
    runs, that happens here; otherwise XLA does it when the backend starts
    (its error then names the handler and both versions).
    """
    try:
        jax.ffi.register_ffi_target(name, capsule, platform="cpu")
    except Exception as exc:
        import jaxlib

        major, minor = _handlers.FFI_API_VERSION
        raise ImportError(
            f"cropgrad.jax cannot register its XLA handler {name!r} with "
            f"jaxlib {jaxlib.__version__}: the handlers use XLA FFI API "
            f"{major}.{minor}, which this jaxlib refuses. Install a jax and "
            f'jaxlib that cropgrad supports (pip install "cropgrad[jax]"). '
            f"XLA said: {exc}"
        ) from exc


for _name, _capsule in _handlers.handlers().items():
    _register(_name, _capsule)
del _name, _capsule


# --------------------------------------------------------------------------
# Trace-time checks: everything but the data


def _static(value, name):
    if isinstance(value, jax.core.Tracer):
        raise TypeError(
            f"{name} must be a static Python value, not a traced array: it "
            "is fixed when the call is compiled"
        )
    return value


def _threads(num_threads):
    """The ``num_threads`` attribute: the NumPy API's, or `DEFAULT_THREADS`."""
    num_threads = _v.threads(_static(num_threads, "num_threads"))
    return DEFAULT_THREADS if num_threads == 0 else num_threads


@functools.cache
def _layout_status(layout):
    return _handlers.layout_status(layout)


def _layout(data_format):
    """The layout code of ``data_format``, refusing one this build lacks."""
    layout = _v.data_format(_static(data_format, "data_format"))
    status, message = _layout_status(layout)
    if status == _v.CODES["CG_ERR_UNSUPPORTED"]:
        # The C-level API's message names the layout.
        raise NotImplementedError(message)
    return layout


def _method(method, allowed=_v.METHODS):
    method = _static(method, "method")
    return _v.method(method, allowed)


def _array(value, name):
    """``jnp.asarray(value)``, refusing anything but integers and floats."""
    try:
        arr = jnp.asarray(value)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} cannot be converted to a JAX array: {exc}") from None
    if not (
        jnp.issubdtype(arr.dtype, jnp.integer)
        or jnp.issubdtype(arr.dtype, jnp.floating)
    ):
        raise TypeError(
            f"{name} must hold real numbers (integers or floats), got dtype {arr.dtype}"
        )
    return arr


def _dims(shape, layout):
    """(batch, height, width, depth) of a 4-D shape in `layout`."""
    if layout == _v.LAYOUT_CODES["NHWC"]:
        return shape
    batch, depth, height, width = shape
    return batch, height, width, depth


def _shape(batch, height, width, depth, layout):
    """A 4-D shape in `layout` from its named dimensions."""
    if layout == _v.LAYOUT_CODES["NHWC"]:
        return (batch, height, width, depth)
    return (batch, depth, height, width)


# Dimension names of images and crops in each layout, for messages.
_ORDER = {
    _v.LAYOUT_CODES["NHWC"]: "[batch, height, width, depth]",
    _v.LAYOUT_CODES["NCHW"]: "[batch, depth, height, width]",
}
_CROP_ORDER = {
    _v.LAYOUT_CODES["NHWC"]: "[num_boxes, crop_height, crop_width, depth]",
    _v.LAYOUT_CODES["NCHW"]: "[num_boxes, depth, crop_height, crop_width]",
}


def _image(image, layout):
    image = _array(image, "image")
    if image.dtype not in _IMAGE_DTYPES:
        raise TypeError(
            "image must be uint8, uint16, int8, int16, int32, int64, float16, "
            f"bfloat16, float32 or float64, got {image.dtype}"
        )
    if image.ndim != 4:
        raise ValueError(f"image must be 4-D {_ORDER[layout]}, got shape {image.shape}")
    return image


def _code(image):
    """The C-level API's dtype code of a (checked) image."""
    return _v.dtype_code(np.dtype(image.dtype))


def _grads(grads, layout):
    grads = _array(grads, "grads").astype(jnp.float32)
    if grads.ndim != 4:
        raise ValueError(
            f"grads must be 4-D {_CROP_ORDER[layout]}, got shape {grads.shape}"
        )
    return grads


def _boxes_and_index(boxes, box_ind, grads=None):
    boxes = _array(boxes, "boxes").astype(jnp.float32)
    _v.boxes_shape(boxes.shape)
    box_ind = _array(box_ind, "box_ind")
    if box_ind.dtype.kind not in "iu":
        raise TypeError(f"box_ind must hold integers, got dtype {box_ind.dtype}")
    _v.box_ind_shape(box_ind.shape, boxes.shape[0])
    if box_ind.dtype != np.int64:
        # int32 holds every index XLA can address in the smaller types;
        # uint32 and uint64 only fit int64 (which needs jax_enable_x64).
        box_ind = box_ind.astype(
            jnp.int64
            if box_ind.dtype.itemsize >= 4 and box_ind.dtype.kind == "u"
            else jnp.int32
        )
    if grads is not None:
        _v.same_num_boxes(boxes.shape[0], grads.shape)
    return boxes, box_ind


# --------------------------------------------------------------------------
# The ops as JAX primitives
#
# Each op is a primitive lowered to one FFI call.  Derivatives are defined
# in forward mode only: a JVP rule gives the tangent of each op as other ops
# of this module applied to the tangents, linearly, and each of those has a
# transpose rule.  JAX derives reverse mode (grad, vjp, scan, checkpoint)
# by transposing that linear part, so no rule depends on which inputs are
# being differentiated: what a trace computes is the same for every pattern
# of differentiated inputs, in any order of calls.
#
# The linear maps and their transposes (<, > the dot product; b the boxes,
# t a boxes tangent, c a crops-shaped array):
#
#   crop(x, b) with extrapolation 0, in x   <->  grad_image(c, b), in c
#   jvp_boxes(x, b, t), in t                <->  grad_boxes(c, x, b), in c
#   jvp_boxes(x, b, t), in x                <->  grad_image_jvp_boxes(c, b, t)
#   grad_image_jvp_boxes(c, b, t), in t     <->  grad_boxes(c, x, b), in x
#
# the last two following from <x, d/db grad_image(c, b) t> =
# <c, jvp_boxes(x, b, t)> = <grad_boxes(c, x, b), t>.  grad_image_jvp_boxes
# (the boxes derivative of the image gradient) has no kernel: it is only
# ever transposed, in reverse mode; evaluating it (forward mode through
# crop_and_resize_grad_image along the boxes) raises NotImplementedError.
#
# Under vmap the mapped axis is folded into the op's own batch (more images,
# more boxes): one FFI call.  The `fold` parameter records each fold,
# (size, whether box_ind was shifted), outermost first, for the kernel's
# messages to name the caller's indices.
#
# Under shard_map, JAX types arrays by the mesh axes they vary over, and an
# op needs its operands all of one such type: `_bind` casts those that vary
# over fewer axes (say, boxes closed over) to vary like the others.  The
# cast is JAX's own op, whose transpose sums the cotangent over those axes.

_BILINEAR = _v.METHOD_CODES["bilinear"]


def _varying_axes(x):
    return jax.typeof(x).mat.varying


def _bind(prim, *operands, **params):
    axes = frozenset().union(*(_varying_axes(x) for x in operands))
    if axes:
        operands = [
            x
            if _varying_axes(x) == axes
            else jax.lax.pcast(x, tuple(axes - _varying_axes(x)), to="varying")
            for x in operands
        ]
    return prim.bind(*operands, **params)


def _crop(image, boxes, box_ind, *, crop_size, method, extrapolation, **common):
    return _bind(
        _crop_p,
        image,
        boxes,
        box_ind,
        crop_size=crop_size,
        method=method,
        extrapolation=extrapolation,
        **common,
    )


def _grad_image(grads, boxes, box_ind, *, image_shape, dtype, method, **common):
    return _bind(
        _grad_image_p,
        grads,
        boxes,
        box_ind,
        image_shape=image_shape,
        dtype=dtype,
        method=method,
        **common,
    )


def _grad_boxes(grads, image, boxes, box_ind, **common):
    return _bind(_grad_boxes_p, grads, image, boxes, box_ind, **common)


def _jvp_boxes(image, boxes, box_ind, tangent, *, crop_size, **common):
    return _bind(
        _jvp_boxes_p, image, boxes, box_ind, tangent, crop_size=crop_size, **common
    )


def _grad_image_jvp_boxes(grads, boxes, box_ind, tangent, *, image_shape, dtype, **c):
    return _bind(
        _grad_image_jvp_boxes_p,
        grads,
        boxes,
        box_ind,
        tangent,
        image_shape=image_shape,
        dtype=dtype,
        **c,
    )


def _common(params):
    """The parameters every op has: layout, threads, fold."""
    return {k: params[k] for k in ("layout", "threads", "fold")}


# --------------------------------------------------------------------------
# Abstract evaluation, lowering, eager evaluation


def _aval(prim, shape, dtype, operands):
    """The result's abstract value: `shape`, `dtype`, varying like the operands."""
    # `_bind` made the operands vary over the same mesh axes.
    mat = operands[0].mat
    if mat.empty:
        return jax.core.ShapedArray(shape, dtype)
    sharding = jax.sharding.NamedSharding(
        operands[0].sharding.mesh, jax.sharding.PartitionSpec()
    )
    return jax.core.ShapedArray(shape, dtype, sharding=sharding, manual_axis_type=mat)


def _crops_shape(image_shape, num_boxes, crop_size, layout):
    depth = _dims(image_shape, layout)[3]
    return _shape(num_boxes, *crop_size, depth, layout)


def _crop_shape_rule(image, boxes, box_ind, *, crop_size, layout, **_):
    return _crops_shape(image.shape, boxes.shape[0], crop_size, layout), jnp.float32


def _grad_image_shape_rule(grads, *_, image_shape, dtype, **__):
    return image_shape, dtype


def _grad_boxes_shape_rule(grads, image, boxes, box_ind, **_):
    return (boxes.shape[0], 4), jnp.float32


def _jvp_boxes_shape_rule(image, boxes, box_ind, tangent, *, crop_size, layout, **_):
    return _crops_shape(image.shape, boxes.shape[0], crop_size, layout), jnp.float32


def _attributes(*, layout, threads, fold, method=_BILINEAR, extrapolation=None, **_):
    """The XLA call's attributes from an op's parameters."""
    attrs = dict(
        method=np.int32(method),
        layout=np.int32(layout),
        num_threads=np.int32(threads),
    )
    if extrapolation is not None:
        attrs["extrapolation_value"] = np.float32(extrapolation)
    if fold:
        # For messages: the caller's shape of box_ind's leading axes, and
        # by how many times the batch grew.
        attrs["fold_shape"] = np.array([n for n, _ in fold], np.int64)
        attrs["fold_images"] = np.int64(np.prod([n for n, s in fold if s]))
    return attrs


@functools.cache
def _compiled(prim, params):
    params = dict(params)
    return jax.jit(lambda *operands: prim.bind(*operands, **params))


def _primitive(name, target, shape_rule, roles):
    """A primitive lowered to FFI `target`, or refusing to lower if None.

    `roles` names each operand's part in folding a vmapped axis: "image"
    (its batch grows), "boxes" (more boxes), "index" (box_ind).
    """
    prim = jax.extend.core.Primitive(name)
    prim.def_impl(
        lambda *operands, **params: _compiled(prim, tuple(sorted(params.items())))(
            *operands
        )
    )
    prim.def_abstract_eval(
        lambda *operands, **params: _aval(
            prim, *shape_rule(*operands, **params), operands
        )
    )
    if target is None:

        def lower(ctx, *operands, **params):
            raise NotImplementedError(_NO_KERNEL)
    else:
        rule = jax.ffi.ffi_lowering(target)

        def lower(ctx, *operands, **params):
            return rule(ctx, *operands, **_attributes(**params))

    mlir.register_lowering(prim, lower, platform="cpu")
    batching.primitive_batchers[prim] = functools.partial(_batch, prim, roles)
    return prim


_NO_KERNEL = (
    "cropgrad.jax has no kernel for the derivative of crop_and_resize_grad_image "
    "with respect to the boxes: forward-mode differentiation of "
    "crop_and_resize_grad_image along the boxes (and reverse mode of "
    "crop_and_resize_grad_boxes, or of the boxes JVP, along the image) is not "
    "supported; reverse mode of crop_and_resize_grad_image along the boxes is"
)


# --------------------------------------------------------------------------
# vmap: the mapped axis becomes more images and more boxes, in one call


def _fold_index(box_ind, n, batch):
    """Indices of problem ``k`` shifted by ``k * batch`` into the folded batch.

    An index outside ``[0, batch)`` must stay outside the folded batch, so
    that the kernel still refuses it rather than reading another problem's
    image: negative values are kept, values past the end pushed past the
    folded end (by ``(n - 1) * batch``, which the kernel's message takes
    back off to name the caller's value).
    """
    offset = (jnp.arange(n, dtype=box_ind.dtype) * batch)[:, None]
    valid = (box_ind >= 0) & (box_ind < batch)
    past_end = jnp.where(box_ind < 0, box_ind, box_ind + (n - 1) * batch)
    return jnp.where(valid, box_ind + offset, past_end)


def _unfold(out, n):
    return out.reshape(n, out.shape[0] // n if n else 0, *out.shape[1:])


def _batch(prim, roles, operands, dims, **params):
    (n,) = {x.shape[d] for x, d in zip(operands, dims) if d is not None}
    out_image = "image_shape" in params
    image_batched = any(
        d is not None for role, d in zip(roles, dims) if role == "image"
    )
    if out_image:
        # Every problem scatters into an image gradient of its own: fold
        # them into one of n times the batch.
        batch = params["image_shape"][0]
        params["image_shape"] = (n * batch, *params["image_shape"][1:])
    shift = out_image or image_batched
    folded = []
    for x, d, role in zip(operands, dims, roles):
        if role == "image":
            if d is not None:
                x = jnp.moveaxis(x, d, 0)
                batch = x.shape[1]
                x = x.reshape(n * batch, *x.shape[2:])
            folded.append(x)
            continue
        x = batching.bdim_at_front(x, d, n)
        folded.append(x)
    for i, role in enumerate(roles):
        if role == "index" and shift:
            folded[i] = _fold_index(folded[i], n, batch)
    folded = [
        x if role == "image" else x.reshape(n * x.shape[1], *x.shape[2:])
        for x, role in zip(folded, roles)
    ]
    params["fold"] = ((n, shift), *params["fold"])
    return _unfold(prim.bind(*folded, **params), n), 0


# --------------------------------------------------------------------------
# Derivatives


def _nonzero(t):
    return type(t) is not ad.Zero


def _zero_like(x):
    return ad.Zero(jax.typeof(x).to_tangent_aval())


def _boxes_second_derivative(op):
    return NotImplementedError(
        f"{op} is not differentiable with respect to the boxes: cropgrad.jax "
        "differentiates crop_and_resize once with respect to the boxes (the "
        "sampling's second derivative in the box coordinates has no kernel)"
    )


def _crop_jvp(primals, tangents, **params):
    image, boxes, box_ind = primals
    t_image, t_boxes, _ = tangents
    out = _crop(image, boxes, box_ind, **params)
    t_out = _zero_like(out)
    # The op is linear in the image, but for the fill of samples outside
    # it: the tangent is the op on the image's tangent, filling with 0.
    if _nonzero(t_image):
        t_out = _crop(t_image, boxes, box_ind, **{**params, "extrapolation": 0.0})
    # Nearest sampling is piecewise constant in the boxes: their derivative
    # is zero wherever it exists.
    if _nonzero(t_boxes) and params["method"] == _BILINEAR:
        t_out = ad.add_tangents(
            t_out,
            _jvp_boxes(
                image,
                boxes,
                box_ind,
                t_boxes,
                crop_size=params["crop_size"],
                **_common(params),
            ),
        )
    return out, t_out


def _grad_image_jvp(primals, tangents, **params):
    grads, boxes, box_ind = primals
    t_grads, t_boxes, _ = tangents
    out = _grad_image(grads, boxes, box_ind, **params)
    t_out = _zero_like(out)
    if _nonzero(t_grads):
        t_out = _grad_image(t_grads, boxes, box_ind, **params)
    if _nonzero(t_boxes) and params["method"] == _BILINEAR:
        t_out = ad.add_tangents(
            t_out,
            _grad_image_jvp_boxes(
                grads,
                boxes,
                box_ind,
                t_boxes,
                image_shape=params["image_shape"],
                dtype=params["dtype"],
                **_common(params),
            ),
        )
    return out, t_out


def _replaced(xs, i, x):
    """`xs` with `x` in place of its item `i`."""
    return (*xs[:i], x, *xs[i + 1 :])


def _bilinear_jvp(prim, op, linear, boxes_at, primals, tangents, **params):
    """The JVP of `prim`, linear in each of its operands at `linear`.

    The tangent is the sum of `prim` with each one's tangent in its place;
    `op` names it in the refusal of a derivative in the boxes (`boxes_at`).
    """
    if _nonzero(tangents[boxes_at]):
        raise _boxes_second_derivative(op)
    out = prim(*primals, **params)
    t_out = _zero_like(out)
    first, second = linear
    if _nonzero(tangents[first]):
        t_out = prim(*_replaced(primals, first, tangents[first]), **params)
    if _nonzero(tangents[second]):
        t_out = ad.add_tangents(
            t_out, prim(*_replaced(primals, second, tangents[second]), **params)
        )
    return out, t_out


# Bilinear in grads and the image; in the image and the boxes' tangent; in
# grads and the boxes' tangent.
_grad_boxes_jvp = functools.partial(
    _bilinear_jvp, _grad_boxes, "crop_and_resize_grad_boxes", (0, 1), 2
)
_jvp_boxes_jvp = functools.partial(
    _bilinear_jvp, _jvp_boxes, "the boxes derivative of crop_and_resize", (0, 3), 1
)
_grad_image_jvp_boxes_jvp = functools.partial(
    _bilinear_jvp, _grad_image_jvp_boxes, "crop_and_resize_grad_image", (0, 3), 1
)


def _undefined(*xs):
    return tuple(ad.is_undefined_primal(x) for x in xs)


def _not_linear(op, which):
    return ValueError(f"{op} is not linear in {which}: JAX asked to transpose it there")


def _transposed(op, operands, *linear):
    """Which operand JAX transposes in: the only undefined one, at one of
    the positions `linear`; any other case is refused."""
    undefined = _undefined(*operands)
    for i in linear:
        if undefined == tuple(k == i for k in range(len(operands))):
            return i
    raise _not_linear(op, "the boxes")


def _crop_size_of(grads, layout):
    return tuple(_dims(grads.aval.shape, layout)[1:3])


def _crop_transpose(ct, image, boxes, box_ind, **params):
    _transposed("crop_and_resize", (image, boxes, box_ind), 0)
    if params["extrapolation"] != 0:
        raise _not_linear(
            "crop_and_resize with a nonzero extrapolation_value", "the image"
        )
    if not _nonzero(ct):
        return None, None, None
    d_image = _grad_image(
        ct,
        boxes,
        box_ind,
        image_shape=image.aval.shape,
        dtype=image.aval.dtype,
        method=params["method"],
        **_common(params),
    )
    return d_image, None, None


def _grad_image_transpose(ct, grads, boxes, box_ind, **params):
    _transposed("crop_and_resize_grad_image", (grads, boxes, box_ind), 0)
    if not _nonzero(ct):
        return None, None, None
    d_grads = _crop(
        ct,
        boxes,
        box_ind,
        crop_size=_crop_size_of(grads, params["layout"]),
        method=params["method"],
        extrapolation=0.0,
        **_common(params),
    )
    return d_grads, None, None


def _grad_boxes_transpose(ct, grads, image, boxes, box_ind, **params):
    at = _transposed("crop_and_resize_grad_boxes", (grads, image, boxes, box_ind), 0, 1)
    if not _nonzero(ct):
        return None, None, None, None
    if at == 0:
        crop_size = _crop_size_of(grads, params["layout"])
        d_grads = _jvp_boxes(image, boxes, box_ind, ct, crop_size=crop_size, **params)
        return d_grads, None, None, None
    d_image = _grad_image_jvp_boxes(
        grads,
        boxes,
        box_ind,
        ct,
        image_shape=image.aval.shape,
        dtype=image.aval.dtype,
        **params,
    )
    return None, d_image, None, None


def _jvp_boxes_transpose(ct, image, boxes, box_ind, tangent, **params):
    at = _transposed(
        "the boxes derivative of crop_and_resize",
        (image, boxes, box_ind, tangent),
        0,
        3,
    )
    if not _nonzero(ct):
        return None, None, None, None
    if at == 3:
        return (
            None,
            None,
            None,
            _grad_boxes(ct, image, boxes, box_ind, **_common(params)),
        )
    d_image = _grad_image_jvp_boxes(
        ct,
        boxes,
        box_ind,
        tangent,
        image_shape=image.aval.shape,
        dtype=image.aval.dtype,
        **_common(params),
    )
    return d_image, None, None, None


def _grad_image_jvp_boxes_transpose(ct, grads, boxes, box_ind, tangent, **params):
    at = _transposed(
        "the boxes derivative of crop_and_resize_grad_image",
        (grads, boxes, box_ind, tangent),
        0,
        3,
    )
    if not _nonzero(ct):
        return None, None, None, None
    if at == 0:
        crop_size = _crop_size_of(grads, params["layout"])
        d_grads = _jvp_boxes(
            ct, boxes, box_ind, tangent, crop_size=crop_size, **_common(params)
        )
        return d_grads, None, None, None
    return None, None, None, _grad_boxes(grads, ct, boxes, box_ind, **_common(params))


_crop_p = _primitive(
    "cropgrad_crop_and_resize",
    "cropgrad_crop_and_resize",
    _crop_shape_rule,
    ("image", "boxes", "index"),
)
_grad_image_p = _primitive(
    "cropgrad_crop_and_resize_grad_image",
    "cropgrad_crop_and_resize_grad_image",
    _grad_image_shape_rule,
    ("boxes", "boxes", "index"),
)
_grad_boxes_p = _primitive(
    "cropgrad_crop_and_resize_grad_boxes",
    "cropgrad_crop_and_resize_grad_boxes",
    _grad_boxes_shape_rule,
    ("boxes", "image", "boxes", "index"),
)
_jvp_boxes_p = _primitive(
    "cropgrad_crop_and_resize_jvp_boxes",
    "cropgrad_crop_and_resize_jvp_boxes",
    _jvp_boxes_shape_rule,
    ("image", "boxes", "index", "boxes"),
)
_grad_image_jvp_boxes_p = _primitive(
    "cropgrad_crop_and_resize_grad_image_jvp_boxes",
    None,
    lambda grads, boxes, box_ind, tangent, **params: _grad_image_shape_rule(
        grads, **params
    ),
    ("boxes", "boxes", "index", "boxes"),
)
for _prim, _jvp, _transpose in (
    (_crop_p, _crop_jvp, _crop_transpose),
    (_grad_image_p, _grad_image_jvp, _grad_image_transpose),
    (_grad_boxes_p, _grad_boxes_jvp, _grad_boxes_transpose),
    (_jvp_boxes_p, _jvp_boxes_jvp, _jvp_boxes_transpose),
    (
        _grad_image_jvp_boxes_p,
        _grad_image_jvp_boxes_jvp,
        _grad_image_jvp_boxes_transpose,
    ),
):
    ad.primitive_jvps[_prim] = _jvp
    ad.primitive_transposes[_prim] = _transpose
del _prim, _jvp, _transpose


# --------------------------------------------------------------------------
# Public API


def crop_and_resize(
    image,
    boxes,
    box_ind,
    crop_size,
    method="bilinear",
    extrapolation_value=0.0,
    *,
    data_format="NHWC",
    num_threads=None,
):
    """Crop boxes out of a batch of images and resize them, in JAX.

    TensorFlow's ``CropAndResize`` as an XLA custom call; the same bits as
    `cropgrad.crop_and_resize` (with ``flush_denormals=True``, XLA:CPU's
    arithmetic).  Differentiable in forward and reverse mode with respect to
    `image` (floating dtypes; any number of times: the image tangent is the
    op on it with ``extrapolation_value=0``) and `boxes` (bilinear; once:
    the tangent is `cropgrad.crop_and_resize_jvp_boxes`).

    Parameters
    ----------
    image : array of shape (batch, image_height, image_width, depth)
        uint8, uint16, int8, int16, int32, int64, float16, bfloat16 (read
        exactly as float32), float32 or float64 (shape ``(batch, depth,
        image_height, image_width)`` with ``data_format="NCHW"``).
    boxes : array of shape (num_boxes, 4)
        ``[y1, x1, y2, x2]`` in normalized coordinates, computed in float32
        (other real dtypes are converted); they must be finite.
    box_ind : array of int, shape (num_boxes,)
        Image of each box, in ``[0, batch)``.
    crop_size : sequence of 2 ints
        ``[crop_height, crop_width]``, both positive; static.
    method : {"bilinear", "nearest"}, default "bilinear"
        Static.  The boxes gradient of nearest sampling is zero.
    extrapolation_value : float, default 0.0
        Value of samples outside the image; static.
    data_format : {"NHWC", "NCHW"}, default "NHWC"
        Layout of `image` and of the result.
    num_threads : int, optional
        Threads of the kernel, 1 to 1024; static.  Default:
        `DEFAULT_THREADS`.  The result does not depend on it.

    Returns
    -------
    jax.Array of shape (num_boxes, crop_height, crop_width, depth), float32
        (``(num_boxes, depth, crop_height, crop_width)`` with NCHW.)

    Raises
    ------
    TypeError, ValueError, NotImplementedError
        While tracing: a bad argument, named in the message.
    jax.errors.JaxRuntimeError
        When the call runs: a non-finite box or a `box_ind` value outside
        ``[0, batch)`` (cropgrad's message; JAX's fast path for cached calls
        raises it as a ValueError).

    Examples
    --------
    >>> import jax, jax.numpy as jnp
    >>> import cropgrad.jax as cgj
    >>> image = jnp.arange(9.0).reshape(1, 3, 3, 1)
    >>> boxes = jnp.array([[0.0, 0.0, 1.0, 1.0]])
    >>> crops = jax.jit(cgj.crop_and_resize, static_argnums=3)(
    ...     image, boxes, jnp.array([0]), (2, 2))
    >>> crops[0, :, :, 0]
    Array([[0., 2.],
           [6., 8.]], dtype=float32)
    >>> jax.grad(lambda x: cgj.crop_and_resize(x, boxes, [0], (2, 2)).sum())(
    ...     image)[0, :, :, 0]
    Array([[1., 0., 1.],
           [0., 0., 0.],
           [1., 0., 1.]], dtype=float32)
    """
    method = _method(method)
    layout = _layout(data_format)
    threads = _threads(num_threads)
    crop_h, crop_w = _v.int_vector(
        _static(crop_size, "crop_size"), 2, "crop_size", "[crop_height, crop_width]"
    )
    extrapolation = _v.real_scalar(
        _static(extrapolation_value, "extrapolation_value"), "extrapolation_value"
    )
    image = _image(image, layout)
    boxes, box_ind = _boxes_and_index(boxes, box_ind)
    _core.check_forward(
        image.shape,
        _code(image),
        boxes.shape[0],
        crop_h,
        crop_w,
        method,
        layout,
        threads,
    )
    return _crop(
        image,
        boxes,
        box_ind,
        crop_size=(crop_h, crop_w),
        method=method,
        extrapolation=float(extrapolation),
        layout=layout,
        threads=threads,
        fold=(),
    )


def crop_and_resize_grad_image(
    grads,
    boxes,
    box_ind,
    image_shape,
    dtype=jnp.float32,
    method="bilinear",
    *,
    data_format="NHWC",
    num_threads=None,
):
    """Gradient of crop-and-resize with respect to the image, in JAX.

    TensorFlow's ``CropAndResizeGradImage`` (deterministic, and the same bits
    as `cropgrad.crop_and_resize_grad_image` with ``flush_denormals=True``).
    It is linear in `grads`, and differentiable with respect to `grads` (its
    transpose is the forward op) and, bilinear, in reverse mode, `boxes`
    (forward mode along the boxes has no kernel: NotImplementedError).

    Parameters
    ----------
    grads : array of shape (num_boxes, crop_height, crop_width, depth)
        Gradient flowing into each crop, computed in float32
        (``(num_boxes, depth, crop_height, crop_width)`` with NCHW).
    boxes : array of shape (num_boxes, 4)
        Finite ``[y1, x1, y2, x2]`` in normalized coordinates.
    box_ind : array of int, shape (num_boxes,)
        Image of each box, in ``[0, batch)``.
    image_shape : sequence of 4 ints
        The output's shape, in the layout's order; static.
    dtype : {float32, float16, bfloat16, float64}, default float32
        Output dtype (float64 needs ``jax_enable_x64``, otherwise JAX makes
        it float32); float16 and bfloat16 accumulate in float32 and are
        rounded once.
    method : {"bilinear", "nearest"}, default "bilinear"
    data_format : {"NHWC", "NCHW"}, default "NHWC"
    num_threads : int, optional
        Threads of the kernel, 1 to 1024; static.  Default:
        `DEFAULT_THREADS`.

    Returns
    -------
    jax.Array of shape `image_shape`, dtype `dtype`

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> import cropgrad.jax as cgj
    >>> grads = jnp.ones((1, 2, 2, 1))
    >>> boxes = jnp.array([[0.0, 0.0, 1.0, 1.0]])
    >>> cgj.crop_and_resize_grad_image(grads, boxes, [0], (1, 3, 3, 1))[0, :, :, 0]
    Array([[1., 0., 1.],
           [0., 0., 0.],
           [1., 0., 1.]], dtype=float32)
    """
    method = _method(method)
    layout = _layout(data_format)
    threads = _threads(num_threads)
    out_dtype = jax.dtypes.canonicalize_dtype(
        _v.output_dtype(_static(dtype, "dtype"), "dtype")
    )
    grads = _grads(grads, layout)
    boxes, box_ind = _boxes_and_index(boxes, box_ind, grads)
    shape = tuple(
        _v.int_vector(
            _static(image_shape, "image_shape"), 4, "image_shape", _ORDER[layout]
        )
    )
    _core.check_grad_image(
        grads.shape,
        shape,
        _v.dtype_code(np.dtype(out_dtype)),
        method,
        layout,
        threads,
        "image_shape",
    )
    return _grad_image(
        grads,
        boxes,
        box_ind,
        image_shape=shape,
        dtype=np.dtype(out_dtype),
        method=method,
        layout=layout,
        threads=threads,
        fold=(),
    )


def crop_and_resize_grad_boxes(
    grads,
    image,
    boxes,
    box_ind,
    method="bilinear",
    *,
    data_format="NHWC",
    num_threads=None,
):
    """Gradient of crop-and-resize with respect to the boxes, in JAX.

    TensorFlow's ``CropAndResizeGradBoxes`` (bilinear only, as there); the
    same bits as `cropgrad.crop_and_resize_grad_boxes` with
    ``flush_denormals=True``.  Linear in `grads` (its transpose is the boxes
    JVP) and in `image` (forward mode only: reverse mode along the image has
    no kernel); not differentiable with respect to `boxes`.

    Parameters
    ----------
    grads : array of shape (num_boxes, crop_height, crop_width, depth)
        Gradient flowing into each crop, computed in float32.
    image : array of shape (batch, image_height, image_width, depth)
        The forward op's image, of any dtype `crop_and_resize` accepts.
    boxes : array of shape (num_boxes, 4)
        Finite ``[y1, x1, y2, x2]`` in normalized coordinates.
    box_ind : array of int, shape (num_boxes,)
        Image of each box, in ``[0, batch)``.
    method : {"bilinear"}
    data_format : {"NHWC", "NCHW"}, default "NHWC"
    num_threads : int, optional
        Threads of the kernel, 1 to 1024; static.  Default:
        `DEFAULT_THREADS`.

    Returns
    -------
    jax.Array of shape (num_boxes, 4), float32
        Gradient with respect to ``[y1, x1, y2, x2]`` of each box.

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> import cropgrad.jax as cgj
    >>> image = jnp.arange(9.0).reshape(1, 3, 3, 1)
    >>> grads = jnp.ones((1, 2, 2, 1))
    >>> boxes = jnp.array([[0.25, 0.25, 0.75, 0.75]])
    >>> cgj.crop_and_resize_grad_boxes(grads, image, boxes, [0])
    Array([[12.,  4., 12.,  4.]], dtype=float32)
    """
    _method(method, allowed=("bilinear",))
    layout = _layout(data_format)
    threads = _threads(num_threads)
    grads = _grads(grads, layout)
    image = _image(image, layout)
    boxes, box_ind = _boxes_and_index(boxes, box_ind, grads)
    _core.check_grad_boxes(
        grads.shape,
        image.shape,
        _code(image),
        _v.METHOD_CODES["bilinear"],
        layout,
        threads,
    )
    return _grad_boxes(
        grads, image, boxes, box_ind, layout=layout, threads=threads, fold=()
    )
