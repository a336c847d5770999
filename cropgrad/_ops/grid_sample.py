"""The grid-sampling family: PyTorch's ``grid_sample`` (2-D), its image
gradient, its grid gradient, and the grid JVP PyTorch does not have.

The coordinates are the grid ``[N, H_out, W_out, 2]`` of ``(x, y)``
normalised to ``[-1, 1]``.  The NumPy API and PyTorch have these ops; the
C-level API (`Op.c_api` None) and JAX do not yet.  PyTorch's take
``torch.nn.functional.grid_sample``'s arguments: the sampling options
positional, ``align_corners=None`` (False), the dtype, layout and threads
those of the tensors and of PyTorch."""

from .common import arg, family, options
from .model import Op

__all__ = ["FAMILY"]

# PyTorch's layout everywhere.
_LAYOUTS = {"numpy": "NCHW", "jax": "NCHW", "torch": "NCHW"}
_APIS = ("numpy", "torch")
# What torch.nn.functional.grid_sample does not take.
_NOT_TORCH = ("numpy",)
_TORCH = ("torch",)
MODES = ("bilinear", "nearest", "bicubic")
PADDING_MODES = ("zeros", "border", "reflection")


def _options(dtype=True):
    """PyTorch's sampling options (positional in PyTorch, as its own; its
    ``align_corners=None`` is False), the output dtype, the usual tail."""
    return (
        arg(
            "mode",
            "str",
            "bilinear",
            keyword_only=True,
            choices=MODES,
            positional_in=_TORCH,
        ),
        arg(
            "padding_mode",
            "str",
            "zeros",
            keyword_only=True,
            choices=PADDING_MODES,
            positional_in=_TORCH,
        ),
        arg(
            "align_corners",
            "bool",
            False,
            keyword_only=True,
            positional_in=_TORCH,
            defaults={"torch": None},
        ),
        *(
            (arg("dtype", "dtype", None, keyword_only=True, apis=_NOT_TORCH),)
            if dtype
            else ()
        ),
        *options(apis=_NOT_TORCH),
    )


def _op(name, args):
    """An op of the NumPy API and PyTorch, without a C function."""
    return Op(name, args, layouts={}, apis=_APIS)


def _grid():
    return arg("grid", "array", role="coords")


FAMILY = family(
    "grid_sample",
    "the grid",
    _LAYOUTS,
    None,
    forward=_op(
        "grid_sample",
        (
            arg("image", "array", role="image", renamed={"torch": "input"}),
            _grid(),
            *_options(),
        ),
    ),
    grad_image=_op(
        "grid_sample_grad_image",
        (
            arg("grads", "array", role="grads"),
            _grid(),
            arg("image_size", "ints"),
            *_options(),
        ),
    ),
    grad_coords=_op(
        "grid_sample_grad_grid",
        (
            arg("grads", "array", role="grads"),
            arg("image", "array", role="image"),
            _grid(),
            *_options(dtype=False),
        ),
    ),
    jvp_coords=_op(
        "grid_sample_jvp_grid",
        (
            arg("image", "array", role="image"),
            _grid(),
            arg("grid_tangent", "array", role="tangent"),
            *_options(),
        ),
    ),
)
