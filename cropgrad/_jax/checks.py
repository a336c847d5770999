"""Argument conversion and the trace-time gate: everything but the data.

Two kinds of check, both while a call is traced:

- conversion (the public functions of cropgrad.jax call these in turn):
  static options through the NumPy API's validation, arrays through
  `jnp.asarray` with checks of their dtypes and ranks, each raising the
  NumPy API's exception and naming the argument;
- the gate (`GATES`): the C-level API's metadata checks of one op call,
  through cropgrad._core, from its operands' shapes and dtypes and the
  primitive's parameters, raising cropgrad's messages.  The primitives run
  it in their abstract evaluation, which JAX caches per shapes and
  parameters, and their batching rule (in the caller's shapes, before the
  fold), so that an eager call runs it when first traced rather than every
  time; the handler runs the gate again on every execution.

Errors in the data (a non-finite box, a box index out of range) are the
kernel's to find, when the call runs.

May import: JAX, NumPy, cropgrad._api.validation, cropgrad._core,
cropgrad._jax.handlers.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np

from cropgrad import _core
from cropgrad._api import validation as _v
from cropgrad._jax import handlers as _handlers

IMAGE_DTYPES = tuple(
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

# Each layout code's name, for the NumPy API's messages.
_LAYOUT_NAMES = {code: name for name, code in _v.LAYOUT_CODES.items()}


# --------------------------------------------------------------------------
# Static options


def static(value, name):
    if isinstance(value, jax.core.Tracer):
        raise TypeError(
            f"{name} must be a static Python value, not a traced array: it "
            "is fixed when the call is compiled"
        )
    return value


def options(method, data_format, num_threads, default_threads, methods=_v.METHODS):
    """The options every op takes, as its primitive's parameters.

    ``method`` (one of `methods`) and ``data_format`` become their codes,
    ``num_threads`` the NumPy API's count, or `default_threads` for None.
    """
    method = _v.method(static(method, "method"), methods)
    layout = _layout(data_format)
    num_threads = _v.threads(static(num_threads, "num_threads"))
    return {
        "method": method,
        "data_format": layout,
        "num_threads": default_threads if num_threads == 0 else num_threads,
    }


@functools.cache
def _layout_status(layout):
    return _handlers.layout_status(layout)


def _layout(data_format):
    """The layout code of ``data_format``, refusing one this build lacks."""
    layout = _v.data_format(static(data_format, "data_format"))
    status, message = _layout_status(layout)
    if status == _v.CODES["CG_ERR_UNSUPPORTED"]:
        # The C-level API's message names the layout.
        raise NotImplementedError(message)
    return layout


def crop_size(value):
    """``crop_size`` as (crop_height, crop_width): an int is a square, as in
    the NumPy API."""
    return _v.size_pair(
        static(value, "crop_size"), "crop_size", "[crop_height, crop_width]"
    )


def extrapolation_value(value):
    name = "extrapolation_value"
    return float(_v.real_scalar(static(value, name), name))


def output_dtype(dtype):
    """The image gradient's dtype, as JAX makes it (float64 needs x64)."""
    return np.dtype(
        jax.dtypes.canonicalize_dtype(_v.output_dtype(static(dtype, "dtype"), "dtype"))
    )


def image_shape(value, layout):
    """``image_shape`` as 4 ints in the layout's order."""
    return tuple(
        _v.int_vector(
            static(value, "image_shape"),
            4,
            "image_shape",
            _v.IMAGE_AXES[_LAYOUT_NAMES[layout]],
        )
    )


# --------------------------------------------------------------------------
# Arrays


def array(value, name):
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


def image(value, layout):
    value = array(value, "image")
    if value.dtype not in IMAGE_DTYPES:
        raise TypeError(f"image must be {_v.IMAGE_DTYPE_NAMES}, got {value.dtype}")
    if value.ndim != 4:
        name = _LAYOUT_NAMES[layout]
        raise ValueError(
            f"image must be 4-D {_v.IMAGE_AXES[name]} ({name}), got shape {value.shape}"
        )
    return value


def grads(value, layout):
    value = array(value, "grads").astype(jnp.float32)
    if value.ndim != 4:
        name = _LAYOUT_NAMES[layout]
        raise ValueError(
            f"grads must be 4-D {_v.GRADS_AXES[name]} ({name}), got shape {value.shape}"
        )
    return value


def boxes_and_index(boxes, box_ind, grads=None):
    boxes = array(boxes, "boxes").astype(jnp.float32)
    _v.boxes_shape(boxes.shape)
    box_ind = array(box_ind, "box_ind")
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
# The gate: each op's metadata checks, from its operands' shapes and dtypes
# (`a`, by operand name) and its primitive's parameters (`p`)


def _code(dtype):
    """The C-level API's dtype code."""
    return _v.dtype_code(np.dtype(dtype))


def _crops(check, a, p):
    """The gate of an op whose result is crops (`check`: which one)."""
    check(
        a["image"].shape,
        _code(a["image"].dtype),
        a["boxes"].shape[0],
        *p["crop_size"],
        p["method"],
        p["data_format"],
        p["num_threads"],
    )


def _crop_and_resize(a, p):
    _crops(_core.check_forward, a, p)


def _jvp_boxes(a, p):
    _crops(_core.check_jvp_boxes, a, p)


def _grad_image(a, p):
    _core.check_grad_image(
        a["grads"].shape,
        p["image_shape"],
        _code(p["dtype"]),
        p["method"],
        p["data_format"],
        p["num_threads"],
        "image_shape",
    )


def _grad_boxes(a, p):
    _core.check_grad_boxes(
        a["grads"].shape,
        a["image"].shape,
        _code(a["image"].dtype),
        p["method"],
        p["data_format"],
        p["num_threads"],
    )


GATES = {
    "crop_and_resize": _crop_and_resize,
    "crop_and_resize_grad_image": _grad_image,
    "crop_and_resize_grad_boxes": _grad_boxes,
    "crop_and_resize_jvp_boxes": _jvp_boxes,
}
