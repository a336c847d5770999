"""Derivatives: one JVP rule and one transpose rule for every op of the table.

Each op is linear in some of its operands (the row's ``transposes``) and
has a derivative along its coordinates (``along_coords``).  The JVP rule gives the
tangent as other ops applied to the tangents, linearly: the op itself on
the tangent of an operand it is linear in (with no fill outside the image),
plus the derivative along the coordinates on their tangent.  The transpose
rule of an op, in the one operand JAX transposes it in, is the op the row
names with the cotangent as the operand it names (ops.py draws the four
pairs).  JAX derives reverse mode (grad, vjp, scan, checkpoint) by
transposing the linear part, so no rule depends on which inputs are being
differentiated: what a trace computes is the same for every pattern of
differentiated inputs, in any order of calls.

May import: JAX, NumPy, cropgrad._api.validation, cropgrad._jax.ops,
cropgrad._jax.primitives, cropgrad._jax.shapes.
"""

import functools

import jax
import numpy as np
from jax.interpreters import ad

from cropgrad._api import validation as _v
from cropgrad._jax import ops as _ops
from cropgrad._jax import shapes as _shapes
from cropgrad._jax.primitives import PRIMITIVES, bind

_BILINEAR = _v.METHOD_CODES["bilinear"]


def install():
    """Give JAX the rules of every primitive."""
    for name, prim in PRIMITIVES.items():
        ad.primitive_jvps[prim] = functools.partial(_jvp, name)
        ad.primitive_transposes[prim] = functools.partial(_transpose, name)


def _nonzero(t):
    return type(t) is not ad.Zero


def _zero_like(x):
    return ad.Zero(jax.typeof(x).to_tangent_aval())


def _replaced(xs, i, x):
    """`xs` with `x` in place of its item `i`."""
    return (*xs[:i], x, *xs[i + 1 :])


def _second_derivative(op):
    where = op.where
    return NotImplementedError(
        f"{op.second_derivative_of} is not differentiable with respect to "
        f"{where}: cropgrad.jax differentiates {op.family} once with respect to "
        f"{where} (the sampling's second derivative in "
        f"{'the box coordinates' if op.coords == 'boxes' else where} has no kernel)"
    )


def _jvp(name, primals, tangents, **params):
    op = _ops.OPS[name]
    t_coords = tangents[op.operands.index(op.coords)]
    if _nonzero(t_coords) and op.along_coords is None:
        raise _second_derivative(op)
    out = bind(name, *primals, **params)
    t_out = _zero_like(out)
    # Linear in these operands, but for the fill of samples outside the
    # image: the tangent is the op on theirs, filling with 0.
    linear = {**params, "extrapolation_value": 0.0}
    for i, operand in enumerate(op.operands):
        if operand in op.transposes and _nonzero(tangents[i]):
            t_out = ad.add_tangents(
                t_out, bind(name, *_replaced(primals, i, tangents[i]), **linear)
            )
    # Nearest sampling is piecewise constant in the boxes: their derivative
    # is zero wherever it exists (RoIAlign samples bilinearly; grid
    # sampling's JVP kernel has every mode's, PyTorch's).
    if _nonzero(t_coords) and params.get("method", _BILINEAR) == _BILINEAR:
        along = _ops.OPS[op.along_coords]
        values = {**dict(zip(op.operands, primals)), op.tangent: t_coords}
        t_out = ad.add_tangents(
            t_out, bind(along.name, *(values[k] for k in along.operands), **params)
        )
    return out, t_out


def _not_linear(op, which):
    return ValueError(f"{op} is not linear in {which}: JAX asked to transpose it there")


def _aval(x):
    return x.aval if ad.is_undefined_primal(x) else jax.typeof(x)


def _derived(op, values, undefined, params):
    """The parameters a transpose's op (`op`) takes from the operands'
    shapes: an image's shape, crops' size, no fill, and the dtype of the
    operand transposed in (`undefined`)."""
    derived = {"extrapolation_value": 0.0, "dtype": np.dtype(_aval(undefined).dtype)}
    if "image" in values:
        derived["image_shape"] = _aval(values["image"]).shape
    if "grads" in values:
        grads = _aval(values["grads"]).shape
        derived[op.size] = _shapes.crop_size(grads, params["data_format"])
    return derived


def _transpose(name, ct, *operands, **params):
    op = _ops.OPS[name]
    undefined = tuple(ad.is_undefined_primal(x) for x in operands)
    # JAX transposes in the only undefined operand, one the op is linear in;
    # any other case is refused.
    if sum(undefined) != 1 or op.operands[undefined.index(True)] not in op.transposes:
        raise _not_linear(op.title, op.where)
    at = undefined.index(True)
    if params.get("extrapolation_value", 0) != 0:
        raise _not_linear(f"{op.title} with a nonzero extrapolation_value", "the image")
    cotangents = [None] * len(operands)
    if not _nonzero(ct):
        return tuple(cotangents)
    target, slot = op.transposes[op.operands[at]]
    target = _ops.OPS[target]
    values = dict(zip(op.operands, operands))
    derived = _derived(target, values, operands[at], params)
    values[slot] = ct
    cotangents[at] = bind(
        target.name, *(values[k] for k in target.operands), **{**params, **derived}
    )
    return tuple(cotangents)
