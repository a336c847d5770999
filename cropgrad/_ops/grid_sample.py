"""The grid-sampling family: PyTorch's ``grid_sample`` (2-D), its image
gradient, its grid gradient, and the grid JVP PyTorch does not have.

The coordinates are the grid ``[N, H_out, W_out, 2]`` of ``(x, y)``
normalised to ``[-1, 1]``.  The NumPy API, PyTorch, JAX and the C-level
API (1.2) have these ops.  JAX's take the NumPy API's arguments but
``out`` and ``flush_denormals`` (XLA computes with flush-to-zero), the
image gradient's ``image_size`` named ``image_shape`` as RoIAlign's is
there.  PyTorch's take
``torch.nn.functional.grid_sample``'s arguments: the sampling options
positional, ``align_corners=None`` (False), the dtype, layout and threads
those of the tensors and of PyTorch."""

from .common import OPTIONS, arg, array, attribute, family, op, options, result, shape
from .model import CParam

__all__ = ["FAMILY"]

# PyTorch's layout everywhere.
_LAYOUTS = {"numpy": "NCHW", "jax": "NCHW", "torch": "NCHW"}
_APIS = ("numpy", "jax", "torch")
# What torch.nn.functional.grid_sample does not take.
_NOT_TORCH = ("numpy", "jax")
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


def _op(name, args, c_params, c_doc=""):
    """An op of the NumPy API, JAX, PyTorch and the C-level API, its result
    of the grid's dtype."""
    return op(name, args, c_params, result("output", 4, "coords"), _APIS, c_doc)


# C parameters.  Every array is of the arithmetic type `dtype` names and
# NCHW: the NumPy API converts other dtypes and layouts before its call.
_IMAGE = (
    CParam("const void*", "image", "IN  [batch, C, H, W]"),
    shape("image_shape", "IN  4 values: [batch, C, H, W]"),
)
_GRADS = (
    CParam("const void*", "grads", "IN  [batch, C, out_h, out_w]"),
    shape("grads_shape", "IN  4 values: [batch, C, out_h, out_w]"),
)
_GRID = CParam("const void*", "grid", "IN  [batch, out_h, out_w, 2]: (x, y)")
_GRID_SHAPE = shape("grid_shape", "IN  4 values: [batch, out_h, out_w, 2]")
_DTYPE = CParam("int", "dtype", "CG_FLOAT32 or CG_FLOAT64: every array's")
_SAMPLING = (
    CParam("int", "mode", "CG_BILINEAR, CG_NEAREST or CG_BICUBIC"),
    CParam("int", "padding_mode", "CG_ZEROS, CG_BORDER or CG_REFLECTION"),
    CParam("int", "align_corners", "non-zero: -1 and 1 are corner pixels' centres"),
    CParam("int", "layout", "CG_NCHW (CG_NHWC: CG_ERR_UNSUPPORTED)"),
)
_SAMPLED = CParam("void*", "output", "OUT [batch, C, out_h, out_w]")


def _grid():
    return array("grid", "coords", 4, "arithmetic")


FAMILY = family(
    "grid_sample",
    "the grid",
    _LAYOUTS,
    (1, 2),
    # The handlers keep the mode as a method and align_corners as RoIAlign's
    # aligned: the C-level API's calls take them in those places.
    (
        attribute("mode", "s32", field="method"),
        attribute("padding_mode", "s32"),
        attribute("align_corners", "s32", field="aligned"),
        *OPTIONS,
    ),
    c_doc=(
        "1.2: grid sampling (PyTorch's grid_sample, 2-D), its image gradient, "
        "its grid gradient and the grid JVP PyTorch does not have, bit for bit "
        "as the NumPy API computes them.  Every array is C-contiguous NCHW "
        "(layout CG_NCHW; CG_NHWC is refused with CG_ERR_UNSUPPORTED) and of "
        "the arithmetic type dtype names, CG_FLOAT32 or CG_FLOAT64.  The grid "
        "holds (x, y) per output point, -1 and 1 the image's outer edges, or "
        "with align_corners non-zero its corner pixels' centres; every grid "
        "value must be finite (CG_ERR_VALUE before any work, position the "
        "point's number, batch-major).  mode: CG_BILINEAR, CG_NEAREST or "
        "CG_BICUBIC; padding_mode: CG_ZEROS, CG_BORDER or CG_REFLECTION.  The "
        "image (or image_size) must be at least 1 pixel high and wide."
    ),
    forward=_op(
        "grid_sample",
        (
            array("image", "image", 4, "coords", renamed={"torch": "input"}),
            _grid(),
            *_options(),
        ),
        (*_IMAGE, _GRID, _GRID_SHAPE, _DTYPE, *_SAMPLING, _SAMPLED),
    ),
    grad_image=_op(
        "grid_sample_grad_image",
        (
            array("grads", "grads", 4, "coords"),
            _grid(),
            arg("image_size", "ints", renamed={"jax": "image_shape"}),
            *_options(),
        ),
        (
            *_GRADS,
            _GRID,
            _GRID_SHAPE,
            _DTYPE,
            shape("image_size", "IN  4 values: the output's shape [batch, C, H, W]"),
            *_SAMPLING,
            CParam("void*", "output", "OUT image_size"),
        ),
    ),
    grad_coords=_op(
        "grid_sample_grad_grid",
        (
            array("grads", "grads", 4, "coords"),
            array("image", "image", 4, "coords"),
            _grid(),
            *_options(dtype=False),
        ),
        (
            *_GRADS,
            *_IMAGE,
            _GRID,
            _GRID_SHAPE,
            _DTYPE,
            *_SAMPLING,
            CParam("void*", "output", "OUT grid_shape: d/d(x, y) per point"),
        ),
    ),
    jvp_coords=_op(
        "grid_sample_jvp_grid",
        (
            array("image", "image", 4, "coords"),
            _grid(),
            array("grid_tangent", "tangent", 4, "coords"),
            *_options(),
        ),
        (
            *_IMAGE,
            _GRID,
            CParam("const void*", "grid_tangent", "IN  grid_shape, any values"),
            _GRID_SHAPE,
            _DTYPE,
            *_SAMPLING,
            _SAMPLED,
        ),
        c_doc=(
            "The derivative of cg_grid_sample along a tangent of the grid, whose "
            "transpose cg_grid_sample_grad_grid is."
        ),
    ),
)
