"""cropgrad's C-level API through ctypes, written from docs/capi.md.

The functions come from ``cropgrad.capi.function_addresses()`` and their C
signatures from ``cropgrad/include/cropgrad/capi.h``; the error record is
the header's ``cg_error``.  ``ctypes.CFUNCTYPE`` releases the GIL around
each call.

`CtypesConsumer` has the calling convention of the C consumer
(tests/capi_c_consumer/c_consumer.c): arrays as NumPy arrays or None (NULL),
shapes as 4-tuples, codes as numbers, and ``record=False`` to pass a NULL
error record; each op returns ``(status, position, message)``, or
``(status,)`` without a record.  The Numba consumer and the C API's fuzz
target use the same convention.
"""

import ctypes
import inspect

import numpy as np

import cropgrad.capi

MESSAGE_SIZE = 512


class CgError(ctypes.Structure):
    """The header's ``cg_error``: 528 bytes, members at 0, 8 and 16."""

    _fields_ = [
        ("status", ctypes.c_int),
        ("position", ctypes.c_int64),
        ("message", ctypes.c_char * MESSAGE_SIZE),
    ]


# The NumPy form of the same record (Numba passes its address).
ERROR_DTYPE = np.dtype(
    [("status", np.int32), ("position", np.int64), ("message", f"S{MESSAGE_SIZE}")],
    align=True,
)

_P = ctypes.c_void_p
_I = ctypes.c_int
_L = ctypes.c_int64
_F = ctypes.c_float
_D = ctypes.c_double

# The header's argument names, the error record aside (which comes last).
ARGUMENTS = {
    "cg_crop_and_resize": (
        "image", "image_dtype", "image_shape", "boxes", "box_ind",
        "box_ind_dtype", "num_boxes", "crop_height", "crop_width", "method",
        "extrapolation_value", "layout", "crops", "num_threads",
        "flush_denormals",
    ),
    "cg_crop_and_resize_grad_image": (
        "grads", "grads_shape", "boxes", "box_ind", "box_ind_dtype",
        "image_size", "output", "output_dtype", "method", "layout",
        "num_threads", "flush_denormals",
    ),
    "cg_crop_and_resize_grad_boxes": (
        "grads", "grads_shape", "image", "image_dtype", "image_shape", "boxes",
        "box_ind", "box_ind_dtype", "output", "method", "layout",
        "num_threads", "flush_denormals",
    ),
    "cg_crop_and_resize_jvp_boxes": (
        "image", "image_dtype", "image_shape", "boxes", "boxes_tangent",
        "box_ind", "box_ind_dtype", "num_boxes", "crop_height", "crop_width",
        "method", "layout", "output", "num_threads", "flush_denormals",
    ),
    # 1.1
    "cg_roi_align": (
        "image", "image_dtype", "image_shape", "boxes", "boxes_dtype", "box_ind",
        "box_ind_dtype", "num_boxes", "output_height", "output_width",
        "spatial_scale", "sampling_ratio", "aligned", "layout", "output",
        "output_dtype", "num_threads", "flush_denormals",
    ),
    "cg_roi_align_grad_image": (
        "grads", "grads_dtype", "grads_shape", "boxes", "boxes_dtype", "box_ind",
        "box_ind_dtype", "image_size", "spatial_scale", "sampling_ratio",
        "aligned", "layout", "output", "output_dtype", "num_threads",
        "flush_denormals",
    ),
    "cg_roi_align_grad_boxes": (
        "grads", "grads_dtype", "grads_shape", "image", "image_dtype",
        "image_shape", "boxes", "boxes_dtype", "box_ind", "box_ind_dtype",
        "spatial_scale", "sampling_ratio", "aligned", "layout", "output",
        "num_threads", "flush_denormals",
    ),
    "cg_roi_align_jvp_boxes": (
        "image", "image_dtype", "image_shape", "boxes", "boxes_tangent",
        "boxes_dtype", "box_ind", "box_ind_dtype", "num_boxes", "output_height",
        "output_width", "spatial_scale", "sampling_ratio", "aligned", "layout",
        "output", "output_dtype", "num_threads", "flush_denormals",
    ),
    # 1.2
    "cg_grid_sample": (
        "image", "image_shape", "grid", "grid_shape", "dtype", "mode",
        "padding_mode", "align_corners", "layout", "output", "num_threads",
        "flush_denormals",
    ),
    "cg_grid_sample_grad_image": (
        "grads", "grads_shape", "grid", "grid_shape", "dtype", "image_size",
        "mode", "padding_mode", "align_corners", "layout", "output",
        "num_threads", "flush_denormals",
    ),
    "cg_grid_sample_grad_grid": (
        "grads", "grads_shape", "image", "image_shape", "grid", "grid_shape",
        "dtype", "mode", "padding_mode", "align_corners", "layout", "output",
        "num_threads", "flush_denormals",
    ),
    "cg_grid_sample_jvp_grid": (
        "image", "image_shape", "grid", "grid_tangent", "grid_shape", "dtype",
        "mode", "padding_mode", "align_corners", "layout", "output",
        "num_threads", "flush_denormals",
    ),
}  # fmt: skip
# The arguments passed as an array's data address (None: NULL) and as an
# int64[4] shape; the others (codes, sizes, values) go as they are.
_ARRAYS = {
    "image", "boxes", "boxes_tangent", "box_ind", "grads", "crops", "output",
    "grid", "grid_tangent",
}  # fmt: skip
_SHAPES = {"image_shape", "grads_shape", "image_size", "grid_shape"}

# The header's function pointer types, argument for argument (ARGUMENTS,
# then the error record).
PROTOTYPES = {
    "cg_api_version": ctypes.CFUNCTYPE(_I),
    "cg_default_threads": ctypes.CFUNCTYPE(_I),
    "cg_crop_and_resize": ctypes.CFUNCTYPE(
        _I, _P, _I, _P, _P, _P, _I, _L, _L, _L, _I, _F, _I, _P, _I, _I, _P
    ),
    "cg_crop_and_resize_grad_image": ctypes.CFUNCTYPE(
        _I, _P, _P, _P, _P, _I, _P, _P, _I, _I, _I, _I, _I, _P
    ),
    "cg_crop_and_resize_grad_boxes": ctypes.CFUNCTYPE(
        _I, _P, _P, _P, _I, _P, _P, _P, _I, _P, _I, _I, _I, _I, _P
    ),
    "cg_crop_and_resize_jvp_boxes": ctypes.CFUNCTYPE(
        _I, _P, _I, _P, _P, _P, _P, _I, _L, _L, _L, _I, _I, _P, _I, _I, _P
    ),
    # 1.1
    "cg_roi_align": ctypes.CFUNCTYPE(
        _I, _P, _I, _P, _P, _I, _P, _I, _L, _L, _L, _D, _I, _I, _I, _P, _I, _I, _I,
        _P
    ),
    "cg_roi_align_grad_image": ctypes.CFUNCTYPE(
        _I, _P, _I, _P, _P, _I, _P, _I, _P, _D, _I, _I, _I, _P, _I, _I, _I, _P
    ),
    "cg_roi_align_grad_boxes": ctypes.CFUNCTYPE(
        _I, _P, _I, _P, _P, _I, _P, _P, _I, _P, _I, _D, _I, _I, _I, _P, _I, _I, _P
    ),
    "cg_roi_align_jvp_boxes": ctypes.CFUNCTYPE(
        _I, _P, _I, _P, _P, _P, _I, _P, _I, _L, _L, _L, _D, _I, _I, _I, _P, _I, _I,
        _I, _P
    ),
    # 1.2
    "cg_grid_sample": ctypes.CFUNCTYPE(
        _I, _P, _P, _P, _P, _I, _I, _I, _I, _I, _P, _I, _I, _P
    ),
    "cg_grid_sample_grad_image": ctypes.CFUNCTYPE(
        _I, _P, _P, _P, _P, _I, _P, _I, _I, _I, _I, _P, _I, _I, _P
    ),
    "cg_grid_sample_grad_grid": ctypes.CFUNCTYPE(
        _I, _P, _P, _P, _P, _P, _P, _I, _I, _I, _I, _I, _P, _I, _I, _P
    ),
    "cg_grid_sample_jvp_grid": ctypes.CFUNCTYPE(
        _I, _P, _P, _P, _P, _P, _I, _I, _I, _I, _I, _P, _I, _I, _P
    ),
}  # fmt: skip


def functions():
    """The C-level API's functions as ctypes callables, by name."""
    addresses = cropgrad.capi.function_addresses()
    return {name: proto(addresses[name]) for name, proto in PROTOTYPES.items()}


def _ptr(a):
    """The address of an array's data, or None (NULL; also for an object
    that is no array, which stands for NULL with a shape)."""
    return None if not isinstance(a, np.ndarray) else a.ctypes.data


def _shape(shape):
    return (ctypes.c_int64 * 4)(*shape)


def _argument(name, value):
    """Argument `name` as the C function takes it."""
    if name in _ARRAYS:
        return _ptr(value)
    if name in _SHAPES:
        return _shape(value)
    return value


def _result(status, err):
    if err is None:
        return (status,)
    return status, err.position, err.message.decode("utf-8", "replace")


def _op(function):
    """A `CtypesConsumer` method calling C function `function`.

    It takes the function's arguments by their header names (ARGUMENTS),
    then `record`, and passes them converted, with the error record.
    """
    names = ARGUMENTS[function]
    kind = inspect.Parameter.POSITIONAL_OR_KEYWORD
    signature = inspect.Signature(
        [inspect.Parameter(n, kind) for n in ("self", *names)]
        + [inspect.Parameter("record", kind, default=True)]
    )

    def method(*args, **kwargs):
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        self, *values, record = bound.arguments.values()
        err = CgError() if record else None
        status = self.fn[function](
            *(_argument(n, v) for n, v in zip(names, values)),
            None if err is None else ctypes.byref(err),
        )
        return _result(status, err)

    method.__name__ = function.removeprefix("cg_")
    method.__signature__ = signature
    return method


class CtypesConsumer:
    """Every op through ctypes, in the C consumer's convention."""

    def __init__(self):
        self.fn = functions()

    crop_and_resize = _op("cg_crop_and_resize")
    crop_and_resize_grad_image = _op("cg_crop_and_resize_grad_image")
    crop_and_resize_grad_boxes = _op("cg_crop_and_resize_grad_boxes")
    crop_and_resize_jvp_boxes = _op("cg_crop_and_resize_jvp_boxes")
    roi_align = _op("cg_roi_align")
    roi_align_grad_image = _op("cg_roi_align_grad_image")
    roi_align_grad_boxes = _op("cg_roi_align_grad_boxes")
    roi_align_jvp_boxes = _op("cg_roi_align_jvp_boxes")
    grid_sample = _op("cg_grid_sample")
    grid_sample_grad_image = _op("cg_grid_sample_grad_image")
    grid_sample_grad_grid = _op("cg_grid_sample_grad_grid")
    grid_sample_jvp_grid = _op("cg_grid_sample_jvp_grid")

    def default_threads(self):
        return self.fn["cg_default_threads"]()
