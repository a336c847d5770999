"""The ``torch.library`` definitions of the ops, and the entry the public
functions call.

Each op of `OPS` below is defined in the ``cropgrad`` namespace with its
schema (`cropgrad._ops`: the Python API's arguments and
defaults), its CPU kernel and fake implementation (`kernels`), its
Autograd kernel (the op's Function of `autograd` when a gradient or a
tangent flows), its AutocastCPU kernel and its vmap rule (`vmap`).  The ops
are defined when this module is imported.
"""

import torch

from cropgrad._ops import OPS as _SIGNATURES
from cropgrad._torch import autograd, checks, kernels, vmap

__all__ = ["call", "call_checked"]


def _ops():
    """The ops, name: (CPU kernel and fake implementation, ``kernel(a,
    fake)``; torch.autograd.Function): every op of the op model that
    PyTorch has, its kernel that of `kernels` of its family and kind, its
    Function the one of `autograd` whose ``op`` it is."""
    functions = autograd.functions()
    return {
        name: (kernels.kernel(op), functions[name])
        for name, op in _SIGNATURES.items()
        if "torch" in op.apis
    }


OPS = _ops()


def call(name, values):
    """Op `name` on the arguments of its public function (by name).

    Eagerly, through the op's Function, which is what torch.func's
    transforms need; while being compiled (torch.compile, torch.export),
    the custom op, whose autograd formula is the Function's own
    (TorchDynamo does not trace a custom jvp).
    """
    return call_checked(name, checks.public(name, values))


def call_checked(name, args):
    """Op `name` on arguments already checked, in the op's order (`call`)."""
    if torch.compiler.is_compiling():
        return getattr(torch.ops.cropgrad, name).default(*args)
    return autograd.apply(OPS[name][1], *args)


def _implementation(name, kernel, fake):
    """The CPU kernel (`fake` false) or fake implementation of op `name`."""

    def implementation(*args):
        return kernel(checks.bind(name, args), fake)

    return implementation


def _autograd_kernel(op, name, function):
    """The op's autograd: its Function when a gradient or tangent flows."""

    def kernel(keyset, *args):
        args = checks.bind(name, args)
        tensors = [a for a in args if isinstance(a, torch.Tensor)]
        if (torch.is_grad_enabled() and torch._C._any_requires_grad(*tensors)) or any(
            torch.autograd.forward_ad.unpack_dual(t).tangent is not None
            for t in tensors
        ):
            if torch._C._are_functorch_transforms_active():
                # torch.func reaches a Function only through its apply.
                raise NotImplementedError(
                    f"torch.func transforms of torch.ops.cropgrad.{name} are "
                    f"not supported: call cropgrad.torch.{name} instead"
                )
            return autograd.apply(function, *args)
        with torch._C._AutoDispatchBelowAutograd():
            return op.redispatch(keyset & torch._C._after_autograd_keyset, *args)

    return kernel


def _autocast_kernel(op):
    """CPU autocast: the op runs as it does outside autocast.

    The ops compute in float32 whatever they are given and read every image
    dtype exactly, so no input is cast: a lower-precision image (a bfloat16
    feature map) is read where it is, without a float32 copy, and the boxes
    are never rounded below float32.  The ops' results are float32 (the
    image gradient: the dtype asked for), the NumPy API's bits; the public
    `crop_and_resize` rounds its crops to the image's dtype after the op.
    """
    autocast = torch._C.DispatchKeySet(torch._C.DispatchKey.AutocastCPU)

    def kernel(keyset, *args):
        with torch._C._ExcludeDispatchKeyGuard(autocast):
            return op(*args)

    return kernel


def _define(library, name, kernel, function):
    """Define op `name` in `library`, with its kernels and rules."""
    library.define(
        name + _SIGNATURES[name].schema(), tags=(torch.Tag.pt2_compliant_tag,)
    )
    op = getattr(torch.ops.cropgrad, name).default
    library.impl(name, _implementation(name, kernel, False), "CPU")
    torch.library.register_fake(
        f"cropgrad::{name}", _implementation(name, kernel, True), lib=library
    )
    autograd_kernel = _autograd_kernel(op, name, function)
    library.impl(name, autograd_kernel, "Autograd", with_keyset=True)
    library.impl(name, _autocast_kernel(op), "AutocastCPU", with_keyset=True)
    torch.library.register_vmap(
        f"cropgrad::{name}", vmap.rule(name, kernel), lib=library
    )


_LIBRARY = torch.library.Library("cropgrad", "DEF")
for _name, (_kernel, _function) in OPS.items():
    _define(_LIBRARY, _name, _kernel, _function)
del _name, _kernel, _function
