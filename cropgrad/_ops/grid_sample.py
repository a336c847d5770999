"""The grid-sampling family: PyTorch's ``grid_sample`` (2-D), its image
gradient, its grid gradient, and the grid JVP PyTorch does not have.

The coordinates are the grid ``[N, H_out, W_out, 2]`` of ``(x, y)``
normalised to ``[-1, 1]``; the NumPy API alone has these ops so far: the
C-level API (`Op.c_api` None), PyTorch and JAX do not."""

from .common import arg, family, options
from .model import Op

__all__ = ["FAMILY"]

# PyTorch's layout everywhere.
_LAYOUTS = {"numpy": "NCHW", "jax": "NCHW", "torch": "NCHW"}
_APIS = ("numpy",)
MODES = ("bilinear", "nearest", "bicubic")
PADDING_MODES = ("zeros", "border", "reflection")


def _options(dtype=True):
    """PyTorch's sampling options, the output dtype, the usual tail."""
    return (
        arg("mode", "str", "bilinear", keyword_only=True, choices=MODES, apis=_APIS),
        arg(
            "padding_mode",
            "str",
            "zeros",
            keyword_only=True,
            choices=PADDING_MODES,
            apis=_APIS,
        ),
        arg("align_corners", "bool", False, keyword_only=True, apis=_APIS),
        *(
            (arg("dtype", "dtype", None, keyword_only=True, apis=_APIS),)
            if dtype
            else ()
        ),
        *options(apis=_APIS),
    )


def _op(name, args):
    """An op of the NumPy API only, without a C function."""
    return Op(name, args, layouts={}, apis=_APIS)


def _grid():
    return arg("grid", "array", role="coords", apis=_APIS)


FAMILY = family(
    "grid_sample",
    "the grid",
    _LAYOUTS,
    None,
    forward=_op(
        "grid_sample",
        (arg("image", "array", role="image", apis=_APIS), _grid(), *_options()),
    ),
    grad_image=_op(
        "grid_sample_grad_image",
        (
            arg("grads", "array", role="grads", apis=_APIS),
            _grid(),
            arg("image_size", "ints", apis=_APIS),
            *_options(),
        ),
    ),
    grad_coords=_op(
        "grid_sample_grad_grid",
        (
            arg("grads", "array", role="grads", apis=_APIS),
            arg("image", "array", role="image", apis=_APIS),
            _grid(),
            *_options(dtype=False),
        ),
    ),
    jvp_coords=_op(
        "grid_sample_jvp_grid",
        (
            arg("image", "array", role="image", apis=_APIS),
            _grid(),
            arg("grid_tangent", "array", role="tangent", apis=_APIS),
            *_options(),
        ),
    ),
)
