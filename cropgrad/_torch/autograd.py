"""The derivatives of the PyTorch ops: one ``torch.autograd.Function`` an op,
every one made from the op model's rows by one class, `_OpFunction`.

Each Function has a backward (reverse mode), a jvp (forward mode) and a
vmap rule generated from the ops' own, so that torch.func's transforms
compose.  Each rule is made of the ops themselves, through these Functions,
so that it can be differentiated in turn.  The rules are those of the
family's adjoint algebra (`cropgrad._ops.ADJOINTS`, by op and operand:
`Family.transposes`), as cropgrad.jax derives its own:

- jvp: the op on the tangent of each operand it is linear in (the forward
  op filling samples outside the image with 0), plus the derivative along
  the coordinates (`_ALONG`: forward's is the coordinate JVP, grad_image's
  is grad_image_jvp_coords) applied to the coordinates' tangent;
- backward: in each operand the op is linear in, its transpose applied to
  the cotangent; in the coordinates, the transpose of the derivative along
  them, in its tangent (grad_coords, the cotangent as the operand the
  algebra names).

What the algebra leads to and no kernel computes (grad_image_jvp_coords,
the derivative along the coordinates of an op that is itself one) raises
NotImplementedError when it is needed.  Nearest sampling is piecewise
constant: its coordinate derivatives are zero.

What a family does its own way is a hook of `_Hooks`: RoIAlign's boxes
are torchvision's ``Tensor[K, 5]``, the image index in column 0, whose
derivatives are ``[K, 4]`` in the kernels (`_with_index`: a zero column,
the boxes' dtype); crop_and_resize's boxes gradient is float32, converted
to the boxes' dtype.

The Functions take the custom ops' arguments, positionally; the rules name
them through the signature table (`call`, `_saved`, `_gradients`).
"""

import functools
import inspect
import operator
import typing

import torch

from cropgrad import _ops
from cropgrad._torch import checks

__all__ = []

# What replaces each op's tensors in the call a Function keeps on its ctx.
_WITHOUT_TENSORS = {name: dict.fromkeys(names) for name, names in checks.ARRAYS.items()}
# The op kind computing each kind's derivative along the coordinates (the
# others are such derivatives already, which are not differentiated there).
_ALONG = {"forward": "jvp_coords", "grad_image": "grad_image_jvp_coords"}
# How messages name an operand.
_WORDS = {"image": "the image"}


def functions():
    """Each op's Function, by the op's name (a Function's ``op``)."""
    return dict(_FUNCTIONS)


def _flows(tangent):
    """Whether a tangent the jvp rule gets carries anything.

    Forward-mode AD gives a Function zeros for the floating inputs that have
    no tangent (not None), so a derivative cropgrad lacks is refused only
    for a tangent that is not all zero.  The values are read below
    torch.func's wrappers; a tangent mapped by vmap cannot be read and
    counts as one that flows.
    """
    if tangent is None:
        return False
    functorch = torch._C._functorch
    while functorch.is_functorch_wrapped_tensor(tangent):
        if functorch.is_batchedtensor(tangent):
            return True
        tangent = functorch.get_unwrapped(tangent)
    return bool(tangent.any())


def _missing(op, operand, mode):
    return NotImplementedError(
        f"cropgrad.torch: the {mode} derivative of {op} with respect to "
        f"{_WORDS.get(operand, operand)} is not implemented (cropgrad has no "
        "kernel for it)"
    )


class _Shape(tuple):
    """A crop or image size, which the Functions take as one argument.

    torch.func flattens a Function's arguments as pytrees and, in forward
    mode under vmap, then pairs its tangents with the leaves: a list of ints
    would count as several inputs.  A subclass of tuple is a single leaf.
    """

    __slots__ = ()


def apply(function, *args):
    """``function.apply(*args)``, sizes as `_Shape`."""
    return function.apply(
        *(_Shape(a) if isinstance(a, (list, tuple)) else a for a in args)
    )


def call(function, **values):
    """`function` applied to its op's arguments given by name (more may be
    given: those the op does not take are left out)."""
    names = checks.OPS[function.op].call_type("torch")._fields
    return apply(function, *(values[n] for n in names))


def _gradients(ctx, **grads):
    """The backward's result: `grads` by name, None for the other inputs."""
    return tuple(grads.get(n) for n in ctx.call._fields)


def _op_forward(name):
    """A Function's forward: custom op `name`, below autograd."""

    def forward(*args):
        args = [list(a) if isinstance(a, _Shape) else a for a in args]
        with torch._C._AutoDispatchBelowAutograd():
            return getattr(torch.ops.cropgrad, name).default(*args)

    # Function.apply binds its arguments to forward's signature on every
    # call; inspect reads a signature kept on the function instead of
    # working it out each time (some 5 us of a tiny call).
    forward.__signature__ = inspect.signature(forward)
    return staticmethod(forward)


def _saved(ctx):
    """The call `_OpFunction.setup_context` kept, its tensors as saved."""
    call = ctx.call
    return call.replace(**dict(zip(checks.ARRAYS[call._op], ctx.saved_tensors)))


def _needs(ctx, name):
    """Whether the backward must return a gradient for input `name`."""
    return ctx.needs_input_grad[ctx.call._fields.index(name)]


def _nearest(a):
    """Whether call `a` samples the nearest pixel, which is piecewise
    constant in the coordinates (crop_and_resize's ``method``, grid_sample's
    ``mode``; RoIAlign's ops have neither: bilinear)."""
    return "nearest" in (getattr(a, "method", None), getattr(a, "mode", None))


# --------------------------------------------------------------------------
# What a family does its own way


def _with_index(gradient, like):
    """A boxes derivative ``[K, 4]`` as one of torchvision's boxes ``[K, 5]``
    (zero for the image index), in the dtype of `like`."""
    return torch.nn.functional.pad(gradient, (1, 0)).to(like.dtype)


def _in_dtype_of(gradient, like):
    return gradient.to(like.dtype)


def _as_is(cotangent, boxes):
    return cotangent


class _Hooks(typing.NamedTuple):
    """A family's quirks.

    Attributes
    ----------
    coords_gradient : callable
        ``(gradient, like)``: a result of grad_coords as the derivative in a
        coordinate-shaped operand `like` (the boxes, their tangent).
    coords_tangent : callable
        ``(cotangent, boxes)``: a cotangent shaped as grad_coords' result
        as the coordinates' tangent of jvp_coords.
    """

    coords_gradient: typing.Callable
    coords_tangent: typing.Callable


_HOOKS = {
    # float32 boxes derivatives, which the kernels read in any dtype.
    "crop_and_resize": _Hooks(_in_dtype_of, _as_is),
    # torchvision's boxes: the index column, the boxes' dtype.
    "roi_align": _Hooks(_with_index, _with_index),
    # The grid gradient is in the arithmetic type, the grid in any dtype.
    "grid_sample": _Hooks(_in_dtype_of, _as_is),
}


# --------------------------------------------------------------------------
# The Functions


class _OpFunction(torch.autograd.Function):
    """The Function of custom op `op` (a subclass's): its forward is the op,
    below autograd; setup_context keeps the call for the backward and the
    jvp alike.

    Its tensors are saved as autograd saves them; ctx keeps the rest
    (`_saved` puts them together again), the Function and the output's
    shape and dtype.

    A subclass (`_function`) says, from the op model: its op's ``family``
    and ``kind``, the ``transposes`` of the operands the op is linear in
    (``{operand: (op, operand)}``: the op computing the transpose and which
    of its operands takes the cotangent), ``reverse`` the same for every
    operand the backward can differentiate in (the coordinates: the
    transpose of the derivative along them), ``along`` the op of the
    derivative along the coordinates (None: none), the names of the
    ``coords`` and of their ``tangent`` (jvp_coords' operand), and the
    ``size`` of the samples (crop_size, output_size; None: the
    coordinates give it).
    """

    generate_vmap_rule = True

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        cls.forward = _op_forward(cls.op)

    @classmethod
    def setup_context(cls, ctx, inputs, output):
        a = checks.bind(cls.op, inputs)
        tensors = [getattr(a, n) for n in checks.ARRAYS[cls.op]]
        ctx.save_for_backward(*tensors)
        ctx.save_for_forward(*tensors)
        ctx.call = a.replace(**_WITHOUT_TENSORS[cls.op])
        ctx.function = cls
        ctx.out_shape = output.shape
        ctx.out_dtype = output.dtype

    @staticmethod
    def backward(ctx, ct):
        f = ctx.function
        a = _saved(ctx)
        ct = ct.to(ctx.out_dtype)
        wanted = [n for n in checks.ARRAYS[f.op] if _needs(ctx, n)]
        # Every missing derivative is refused before anything is computed.
        for name in wanted:
            if f.reverse.get(name, (None,))[0] not in _FUNCTIONS:
                raise _missing(f.op, name, "reverse-mode")
        return _gradients(ctx, **{n: _transposed(f, a, n, ct) for n in wanted})

    @staticmethod
    def jvp(ctx, *tangents):
        f = ctx.function
        a = _saved(ctx)
        t = dict(zip(a._fields, tangents))
        coords = f.coords
        along = _FUNCTIONS.get(f.along)
        smooth = not _nearest(a)
        if along is None and smooth and _flows(t[coords]):
            raise _missing(f.op, coords, "forward-mode")
        # Linear in these operands, but for the fill of samples outside the
        # image: the op on their tangents, filling with 0.
        parts = [
            apply(f, *a.replace(**_zero_fill(a), **{n: t[n]}))
            for n in f.transposes
            if t[n] is not None
        ]
        if along is not None and smooth and t[coords] is not None:
            parts.append(call(along, **a._asdict(), **{f.tangent: t[coords]}))
        if not parts:  # nearest sampling, coordinates only: zero
            return torch.zeros(ctx.out_shape, dtype=ctx.out_dtype)
        return functools.reduce(operator.add, parts).to(ctx.out_dtype)


def _zero_fill(a):
    """The fill of samples outside the image, 0, for a call that has one."""
    return {"extrapolation_value": 0.0} if "extrapolation_value" in a._fields else {}


def _transposed(f, a, operand, ct):
    """The backward of Function `f` in `operand`, for cotangent `ct` of call
    `a`: the op the row names, the cotangent as its operand it names, the
    rest from `a` or from the shapes (`_derived`), in the operand's dtype."""
    like = getattr(a, operand)
    if operand == f.coords and _nearest(a):
        return torch.zeros_like(like)
    name, slot = f.reverse[operand]
    target = _FUNCTIONS[name]
    hooks = _HOOKS[f.family.name]
    if slot == f.tangent:
        ct = hooks.coords_tangent(ct, getattr(a, f.coords))
    values = {**a._asdict(), **_derived(f, a, like), slot: ct}
    result = call(target, **values)
    if target.kind == "grad_coords":
        return hooks.coords_gradient(result, like)
    return result.to(like.dtype)


def _derived(f, a, like):
    """What a transpose takes from the shapes of call `a` (of Function `f`),
    as cropgrad.jax derives it: the image's size, the samples' (crops' or
    pooled output's) size from grads where an op takes it, no fill, the
    dtype of the operand transposed in (`like`)."""
    derived = {"extrapolation_value": 0.0, "dtype": like.dtype}
    if "image" in a._fields:
        derived["image_size"] = list(a.image.shape)
    if "grads" in a._fields and f.size is not None:
        layout = getattr(a, "data_format", f.family.ops["forward"].layouts["torch"])
        height, width = checks.dims(layout)[1:]
        derived[f.size] = [a.grads.shape[height], a.grads.shape[width]]
    return derived


def _function(family, kind):
    """The Function of `family`'s op of `kind`, its rules from the family's
    adjoint rows."""
    op = family.ops[kind]
    pairs = family.transposes()
    transposes = {
        n: pairs[op.name, n] for n in checks.ARRAYS[op.name] if (op.name, n) in pairs
    }
    along = family.op_name(_ALONG[kind]) if kind in _ALONG else None
    tangent = family.ops["jvp_coords"].operand("tangent")
    reverse = dict(transposes)
    if along is not None:
        reverse[family.coords_operand] = pairs[along, tangent]
    # (grid_sample's samples take their size from the grid: none.)
    size = next((a.name for a in family.ops["forward"].args if a.kind == "ints"), None)
    body = {
        "op": op.name,
        "family": family,
        "kind": kind,
        "transposes": transposes,
        "reverse": reverse,
        "along": along,
        "coords": family.coords_operand,
        "tangent": tangent,
        "size": size,
        "__module__": __name__,
    }
    name = "".join(part.title() for part in op.name.split("_"))
    return type(name, (_OpFunction,), body)


_FUNCTIONS = {
    op.name: _function(family, kind)
    for family in _ops.FAMILIES.values()
    for kind, op in family.ops.items()
    if "torch" in op.apis
}
