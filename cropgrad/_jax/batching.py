"""vmap: the mapped axis becomes more images and more boxes, in one call.

One rule for every op of the table (ops.py), by its operands' names: an
``image`` mapped along an axis becomes one image batch n times as large,
operands with a row a box (``boxes``, ``grads``, ``boxes_tangent``, and
``box_ind``) n times as many boxes, ``box_ind`` shifted so that each box
still indexes its own problem's image; an image gradient (``image_shape``)
grows n times as well.  The op's ``fold`` parameter records each fold for
the kernel's messages.

Grid sampling (a row's ``fold_batch``) has a leading batch axis in every
operand, the image's, grid's, grads' and tangent's alike: the mapped axis
folds into it for each of them (an unmapped operand repeated n times), and
``image_shape``'s batch grows n times.

The rule runs the op's gate on the call it was given, in the caller's
shapes, before folding: the folded call's abstract evaluation does not.

May import: JAX, cropgrad._jax.ops, cropgrad._jax.primitives.
"""

import functools

import jax
import jax.numpy as jnp
from jax.interpreters import batching

from cropgrad._jax import ops as _ops
from cropgrad._jax import primitives as _primitives


def install():
    """Give JAX the rule of every primitive."""
    for name, prim in _primitives.PRIMITIVES.items():
        batching.primitive_batchers[prim] = functools.partial(_rule, name)


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


def _unmapped(x, d):
    """The shape and dtype of `x` without its mapped axis `d` (if any)."""
    aval = jax.typeof(x)
    shape = aval.shape if d is None else aval.shape[:d] + aval.shape[d + 1 :]
    return jax.ShapeDtypeStruct(shape, aval.dtype)


def _rule(name, operands, dims, **params):
    op = _ops.OPS[name]
    if op.gate is not None and not params["fold"]:
        op.gate(
            {k: _unmapped(x, d) for k, x, d in zip(op.operands, operands, dims)},
            params,
        )
    (n,) = {x.shape[d] for x, d in zip(operands, dims) if d is not None}
    if op.fold_batch:
        return _fold_batch(name, operands, dims, n, params)
    out_image = "image_shape" in params
    image_batched = any(
        d is not None for k, d in zip(op.operands, dims) if k == "image"
    )
    if out_image:
        # Every problem scatters into an image gradient of its own: fold
        # them into one of n times the batch.
        batch = params["image_shape"][0]
        params["image_shape"] = (n * batch, *params["image_shape"][1:])
    shift = out_image or image_batched
    folded = {}
    for k, x, d in zip(op.operands, operands, dims):
        if k == "image":
            if d is not None:
                x = jnp.moveaxis(x, d, 0)
                batch = x.shape[1]
                x = x.reshape(n * batch, *x.shape[2:])
        else:
            x = batching.bdim_at_front(x, d, n)
        folded[k] = x
    if shift:
        folded["box_ind"] = _fold_index(folded["box_ind"], n, batch)
    for k, x in folded.items():
        if k != "image":
            folded[k] = x.reshape(n * x.shape[1], *x.shape[2:])
    params["fold"] = ((n, shift), *params["fold"])
    out = _primitives.PRIMITIVES[name].bind(*(folded[k] for k in op.operands), **params)
    return _unfold(out, n), 0


def _fold_batch(name, operands, dims, n, params):
    """The rule of an op whose every operand has a leading batch axis."""
    if "image_shape" in params:
        batch = params["image_shape"][0]
        params["image_shape"] = (n * batch, *params["image_shape"][1:])
    folded = []
    for x, d in zip(operands, dims):
        x = batching.bdim_at_front(x, d, n)
        folded.append(x.reshape(n * x.shape[1], *x.shape[2:]))
    params["fold"] = ((n, True), *params["fold"])
    out = _primitives.PRIMITIVES[name].bind(*folded, **params)
    return _unfold(out, n), 0
