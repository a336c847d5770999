"""The primitives: binding, abstract evaluation, eager evaluation, lowering.

Each row of the op table (ops.py) becomes a JAX primitive lowered to one
XLA FFI call whose attributes are the parameters, as the op model lists
its family's (`_attributes`).  Its abstract evaluation runs the op's gate
(checks.py) before giving the result's shape; JAX caches it per shapes and
parameters, so the gate runs once per traced signature.  Eager evaluation
compiles the primitive alone with `jax.jit` (cached per parameters), so
that it runs the same XLA call.

The vmap, JVP and transpose rules are batching.py's and derivatives.py's.

May import: JAX, NumPy, cropgrad._jax.ops, cropgrad._jax.shapes.
"""

import functools

import jax
import jax.extend.core
import numpy as np
from jax.interpreters import mlir

from cropgrad._jax import ops as _ops
from cropgrad._jax import shapes as _shapes


def bind(name, *operands, **params):
    """Apply op `name` to `operands`, with the parameters it takes among
    `params` (the rules pass those of the op they come from, and what they
    derive); ``fold`` is ``()`` unless given.

    An op that computes in its coordinates' type (`ops.Op.arithmetic`) gets
    its grads and coordinates' tangent in that type, and a floating image computed in
    it: the public functions pass them so, the derivative rules pass
    cotangents and tangents of the dtypes the results had (`_conform`).

    Under shard_map, JAX types arrays by the mesh axes they vary over, and an
    op needs its operands all of one such type: those that vary over fewer
    axes (say, boxes closed over) are cast to vary like the others.  The
    cast is JAX's own op, whose transpose sums the cotangent over those axes.
    """
    op = _ops.OPS[name]
    params = {"fold": (), **params}
    if op.arithmetic == "coords":
        operands = _conform(op, operands)
    axes = frozenset().union(*(_varying_axes(x) for x in operands))
    if axes:
        operands = [
            x
            if _varying_axes(x) == axes
            else jax.lax.pcast(x, tuple(axes - _varying_axes(x)), to="varying")
            for x in operands
        ]
    return PRIMITIVES[name].bind(*operands, **{k: params[k] for k in op.params})


_FLOAT64 = np.dtype(np.float64)


def _conform(op, operands):
    """`operands` of `op` in its coordinates' type: grads and their tangent
    converted to it, a floating image to it where one of them is float64
    and the other not (float16 and bfloat16 images are read exactly in
    float32 arithmetic)."""
    values = dict(zip(op.operands, operands))
    arith = np.dtype(values[op.coords].dtype)
    for k in ("grads", op.tangent):
        if k in values and values[k].dtype != arith:
            values[k] = values[k].astype(arith)
    image = values.get("image")
    if (
        image is not None
        and jax.numpy.issubdtype(image.dtype, jax.numpy.floating)
        and (image.dtype == _FLOAT64) != (arith == _FLOAT64)
    ):
        values["image"] = image.astype(arith)
    return [values[k] for k in op.operands]


def _varying_axes(x):
    return jax.typeof(x).mat.varying


def _abstract_eval(op, *avals, **params):
    operands = dict(zip(op.operands, avals))
    # A folded call was checked in the caller's shapes, by the vmap rule.
    if op.gate is not None and not params["fold"]:
        op.gate(operands, params)
    shape, dtype = _shapes.result(op.result, operands, params, op.size, op.coords)
    # `bind` made the operands vary over the same mesh axes.
    mat = avals[0].mat
    if mat.empty:
        return jax.core.ShapedArray(shape, dtype)
    sharding = jax.sharding.NamedSharding(
        avals[0].sharding.mesh, jax.sharding.PartitionSpec()
    )
    return jax.core.ShapedArray(shape, dtype, sharding=sharding, manual_axis_type=mat)


@functools.cache
def _compiled(prim, params):
    params = dict(params)
    return jax.jit(lambda *operands: prim.bind(*operands, **params))


# The NumPy type of each XLA scalar type of the op model's attributes.
_SCALARS = {"s32": np.int32, "f32": np.float32, "f64": np.float64}


def _attributes(op, *, fold, **params):
    """The XLA call's attributes from `op`'s parameters: its family's that
    it has, each of its XLA type (`ops.Op.attributes`), and the fold."""
    attrs = {
        a.name: _SCALARS[a.type](params[a.param])
        for a in op.attributes
        if a.field != "fold"
    }
    if fold:
        # For messages: the sizes of the mapped axes folded into the op's
        # (box_ind's leading axes, or the grid's batch), and by how many
        # times the batch grew.
        attrs["fold_shape"] = np.array([n for n, _ in fold], np.int64)
        attrs["fold_images"] = np.int64(np.prod([n for n, s in fold if s]))
    return attrs


def _no_kernel(op):
    """The error of evaluating `op`, a derivative without a kernel."""
    image_gradient = op.second_derivative_of
    where = op.where
    return NotImplementedError(
        f"cropgrad.jax has no kernel for the derivative of {image_gradient} "
        f"with respect to {where}: forward-mode differentiation of "
        f"{image_gradient} along {where} (and reverse mode of "
        f"{op.grad_coords}, or of the {op.coords} JVP, along the image) is not "
        f"supported; reverse mode of {image_gradient} along {where} is"
    )


def _primitive(op):
    """The primitive of row `op`, lowered to its FFI target (if it has one)."""
    prim = jax.extend.core.Primitive(f"cropgrad_{op.name}")
    prim.def_impl(
        lambda *operands, **params: _compiled(prim, tuple(sorted(params.items())))(
            *operands
        )
    )
    prim.def_abstract_eval(functools.partial(_abstract_eval, op))
    if op.target is None:

        def lower(ctx, *operands, **params):
            raise _no_kernel(op)
    else:
        rule = jax.ffi.ffi_lowering(op.target)

        def lower(ctx, *operands, **params):
            return rule(ctx, *operands, **_attributes(op, **params))

    mlir.register_lowering(prim, lower, platform="cpu")
    return prim


PRIMITIVES = {name: _primitive(op) for name, op in _ops.OPS.items()}
