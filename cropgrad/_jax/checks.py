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
cropgrad._api.grid_sample, cropgrad._ops, cropgrad._jax.handlers.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np

from cropgrad import _core, _ops
from cropgrad._api import grid_sample as _gs
from cropgrad._api import validation as _v
from cropgrad._jax import handlers as _handlers

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
NCHW = _v.LAYOUT_CODES["NCHW"]


# --------------------------------------------------------------------------
# Static options


def static(value, name):
    if isinstance(value, jax.core.Tracer):
        raise TypeError(
            f"{name} must be a static Python value, not a traced array: it "
            "is fixed when the call is compiled"
        )
    return value


def options(method, data_format, num_threads, methods=_v.METHODS):
    """The options every op takes, as its primitive's parameters.

    ``method`` (one of `methods`) and ``data_format`` become their codes,
    ``num_threads`` the NumPy API's count, or `DEFAULT_THREADS` for None.
    """
    method = _v.method(static(method, "method"), methods)
    layout = _layout(data_format)
    num_threads = _v.threads(static(num_threads, "num_threads"))
    return {
        "method": method,
        "data_format": layout,
        "num_threads": DEFAULT_THREADS if num_threads == 0 else num_threads,
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
        dtype = given_dtype(value, arr)
        raise TypeError(
            f"{name} must hold real numbers (integers or floats), got "
            f"{_v._KIND_NAMES.get(dtype.kind, dtype.kind)} dtype {dtype}"
        )
    return arr


def given_dtype(value, arr):
    """The dtype `value` had before JAX converted it to `arr` (without x64,
    float64 becomes float32), for messages in the caller's words."""
    dtype = getattr(value, "dtype", None)
    try:
        return np.dtype(dtype) if dtype is not None else np.dtype(arr.dtype)
    except TypeError:
        return np.dtype(arr.dtype)


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


def grads(value, layout, dtype=jnp.float32, axes=_v.GRADS_AXES):
    """``grads`` as 4-D `dtype` (`axes`: its axes in each layout, for the
    message)."""
    value = array(value, "grads").astype(dtype)
    if value.ndim != 4:
        name = _LAYOUT_NAMES[layout]
        raise ValueError(
            f"grads must be 4-D {axes[name]} ({name}), got shape {value.shape}"
        )
    return value


def boxes_and_index(
    boxes, box_ind, grads=None, dtype=jnp.float32, columns="[y1, x1, y2, x2]"
):
    """``boxes`` as `dtype` (`columns`: their columns, for the message) and
    ``box_ind`` as int32 or int64; an empty list of boxes is no boxes."""
    boxes = array(boxes, "boxes").astype(dtype)
    _v.boxes_shape(boxes.shape, columns)
    if boxes.shape == (0,):
        boxes = boxes.reshape(0, 4)
    given = box_ind
    box_ind = array(box_ind, "box_ind")
    if box_ind.dtype.kind == "f" and box_ind.size == 0:
        # An empty list comes out as a float array: it holds no non-integer.
        box_ind = box_ind.astype(jnp.int32)
    if box_ind.dtype.kind not in "iu":
        raise TypeError(
            f"box_ind must hold integers, got dtype {given_dtype(given, box_ind)}"
        )
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
# RoIAlign's arguments: torchvision's boxes [x1, y1, x2, y2], computed in
# the arithmetic type (float64 for float64 data, float32 otherwise), as the
# NumPy API computes them


def roi_options(spatial_scale, sampling_ratio, aligned, data_format, num_threads):
    """The options every RoIAlign op takes, as its primitive's parameters, in
    the NumPy API's order of checks."""
    spatial_scale = _v.float_scalar(
        static(spatial_scale, "spatial_scale"), "spatial_scale"
    )
    sampling_ratio = _v.int_scalar(
        static(sampling_ratio, "sampling_ratio"), "sampling_ratio"
    )
    aligned = _v.flag(static(aligned, "aligned"), "aligned")
    layout = _layout(data_format)
    num_threads = _v.threads(static(num_threads, "num_threads"))
    return {
        "spatial_scale": spatial_scale,
        "sampling_ratio": sampling_ratio,
        "aligned": aligned,
        "data_format": layout,
        "num_threads": DEFAULT_THREADS if num_threads == 0 else num_threads,
    }


def roi_boxes(boxes, box_ind, dtype, grads=None):
    """RoIAlign's ``boxes``, in the arithmetic type `dtype`, and
    ``box_ind``, as `boxes_and_index` converts them."""
    return boxes_and_index(boxes, box_ind, grads, dtype, "[x1, y1, x2, y2]")


def output_size(value):
    """``output_size`` as (out_height, out_width): an int is a square."""
    return _v.size_pair(static(value, "output_size"), "output_size", "[height, width]")


def arithmetic(dtype):
    """The type RoIAlign computes data of `dtype` in."""
    return np.dtype(np.float64 if dtype == np.float64 else np.float32)


def result_dtype(dtype, data_dtype):
    """The output dtype: `dtype`, or the data's when it is a floating one
    (float32 for integer data), as JAX makes it."""
    if dtype is None:
        if jnp.issubdtype(data_dtype, jnp.floating):
            return np.dtype(data_dtype)
        return np.dtype(np.float32)
    return output_dtype(dtype)


def roi_grads(value, layout, dtype=None):
    """RoIAlign's ``grads``: 4-D, in `dtype`, or by default in their own
    arithmetic type (float64 kept, anything else as float32)."""
    value = array(value, "grads")
    if dtype is None:
        dtype = arithmetic(value.dtype)
    return grads(value, layout, dtype, _v.POOLED_AXES)


def boxes_tangent(value, num_boxes, dtype):
    """``boxes_tangent`` as `dtype`, of the boxes' shape (any values)."""
    tangent = array(value, "boxes_tangent").astype(dtype)
    if tangent.shape != (num_boxes, 4):
        raise ValueError(
            f"boxes_tangent must have the shape of boxes ({num_boxes}, 4), "
            f"got shape {tangent.shape}"
        )
    return tangent


# --------------------------------------------------------------------------
# Grid sampling's arguments: PyTorch's grid [N, H_out, W_out, 2] of (x, y),
# every array computed in the arithmetic type (float64 for float64 data,
# float32 otherwise), as the NumPy API computes them; its conversions and
# shape checks are the NumPy API's (cropgrad._api.grid_sample)


def grid_options(mode, padding_mode, align_corners, data_format, num_threads):
    """The options every grid-sampling op takes, as its primitive's
    parameters, in the NumPy API's order of checks (``data_format``: the
    caller's layout; the primitives compute in NCHW)."""
    mode = _gs.MODE_CODES[_gs.choice(static(mode, "mode"), "mode", _gs.MODES)]
    padding = static(padding_mode, "padding_mode")
    padding = _gs.PADDING_CODES[_gs.choice(padding, "padding_mode", _gs.PADDING_MODES)]
    aligned = _v.flag(static(align_corners, "align_corners"), "align_corners")
    layout = _layout(data_format)
    num_threads = _v.threads(static(num_threads, "num_threads"))
    return {
        "mode": mode,
        "padding_mode": padding,
        "align_corners": aligned,
        "data_format": layout,
        "num_threads": DEFAULT_THREADS if num_threads == 0 else num_threads,
    }


def grid_image(value, layout):
    """A grid-sampling image: 4-D in `layout` (a 5-D one refused with the
    NumPy API's words), of an image dtype."""
    value = array(value, "image")
    if value.ndim == 5:
        axes = "(N, C, H, W)" if layout == NCHW else "(N, H, W, C)"
        raise ValueError(
            f"image must be 4-D {axes}, got shape {value.shape}: "
            "volumetric (5-D) grid sampling is not provided"
        )
    return image(value, layout)


def grid_grads(value, dtype=None):
    """Grid sampling's ``grads`` in `dtype`, or in their own arithmetic
    type."""
    value = array(value, "grads")
    if dtype is None:
        dtype = arithmetic(value.dtype)
    return value.astype(dtype)


def grid(value, dtype, name="grid"):
    """The grid (or its tangent, `name`) in the arithmetic type `dtype`."""
    return array(value, name).astype(dtype)


def grid_result_dtype(dtype, data_dtype, arith):
    """The output dtype, refusing float16 and bfloat16 from float64
    arithmetic as the NumPy API does (they would be rounded twice)."""
    result = result_dtype(dtype, data_dtype)
    if arith == np.float64 and result.itemsize < 4:
        raise TypeError(
            f"dtype {result} is not computed from float64 data: its result "
            "would be rounded twice; ask for float32 or float64"
        )
    return result


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
    _crops(_core.check_crop_and_resize, a, p)


def _jvp_boxes(a, p):
    _crops(_core.check_crop_and_resize_jvp_boxes, a, p)


def _grad_image(a, p):
    _core.check_crop_and_resize_grad_image(
        a["grads"].shape,
        p["image_shape"],
        _code(p["dtype"]),
        p["method"],
        p["data_format"],
        p["num_threads"],
        "image_shape",
    )


def _grad_boxes(a, p):
    _core.check_crop_and_resize_grad_boxes(
        a["grads"].shape,
        a["image"].shape,
        _code(a["image"].dtype),
        p["method"],
        p["data_format"],
        p["num_threads"],
    )


def _roi_align(a, p):
    """The forward op's gate; also the boxes JVP's."""
    _core.check_roi_align(
        a["image"].shape,
        _code(a["image"].dtype),
        _code(a["boxes"].dtype),
        a["boxes"].shape[0],
        *p["output_size"],
        p["spatial_scale"],
        p["sampling_ratio"],
        p["data_format"],
        _code(p["dtype"]),
        p["num_threads"],
    )


def _roi_grad_image(a, p):
    _core.check_roi_align_grad_image(
        a["grads"].shape,
        _code(a["grads"].dtype),
        _code(a["boxes"].dtype),
        p["image_shape"],
        p["spatial_scale"],
        p["sampling_ratio"],
        p["data_format"],
        _code(p["dtype"]),
        p["num_threads"],
        "image_shape",
    )


def _roi_grad_boxes(a, p):
    _core.check_roi_align_grad_boxes(
        a["grads"].shape,
        _code(a["grads"].dtype),
        a["image"].shape,
        _code(a["image"].dtype),
        _code(a["boxes"].dtype),
        p["spatial_scale"],
        p["sampling_ratio"],
        p["data_format"],
        p["num_threads"],
    )


def _grid_nchw(shape, p):
    """`shape`, in the layout of parameter ``data_format``, as NCHW."""
    if p["data_format"] == NCHW:
        return tuple(shape)
    n, h, w, c = shape
    return n, c, h, w


def _grid_checks(image, a, p, what="image"):
    """The checks of grid sampling's grid against an NCHW `image` shape, and
    of its grads, if any, against the sampled output's shape."""
    n, c, h, w = image
    _gs.grid_shape(tuple(a["grid"].shape), n)
    _gs.spatial(h, w, what)
    out_h, out_w = a["grid"].shape[1:3]
    if "grads" in a:
        nchw = p["data_format"] == NCHW
        _gs.grads_shape(tuple(a["grads"].shape), (n, c, out_h, out_w), nchw)


def _grid_sample(a, p):
    """The forward op's gate; also the grid JVP's (its tangent the grid's
    shape) and the grid gradient's."""
    _grid_checks(_grid_nchw(a["image"].shape, p), a, p)
    if "grid_tangent" in a:
        _gs.tangent_shape(tuple(a["grid_tangent"].shape), tuple(a["grid"].shape))


def _grid_grad_image(a, p):
    size = p["image_shape"]
    if min(size) < 0:
        raise ValueError(f"image_shape must not be negative, got {size}")
    _grid_checks(_grid_nchw(size, p), a, p, "image_shape")


# The gates by family and op kind (cropgrad._ops.KINDS); `GATES` names them
# by op from the model.
_GATES_BY_KIND = {
    "crop_and_resize": {
        "forward": _crop_and_resize,
        "grad_image": _grad_image,
        "grad_coords": _grad_boxes,
        "jvp_coords": _jvp_boxes,
    },
    "roi_align": {
        "forward": _roi_align,
        "grad_image": _roi_grad_image,
        "grad_coords": _roi_grad_boxes,
        "jvp_coords": _roi_align,
    },
    "grid_sample": {
        "forward": _grid_sample,
        "grad_image": _grid_grad_image,
        "grad_coords": _grid_sample,
        "jvp_coords": _grid_sample,
    },
}

GATES = {
    op.name: gates[op.kind]
    for family, gates in _GATES_BY_KIND.items()
    for op in _ops.FAMILIES[family].ops.values()
}
