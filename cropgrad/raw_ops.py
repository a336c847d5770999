"""Drop-ins for code written against ``tf.raw_ops``.

Same names, keyword-only arguments and semantics as TensorFlow's raw ops;
``name`` is accepted and ignored.  These always compute with flush-to-zero
and denormals-are-zero, as TensorFlow's CPU kernels do, so float32 and
float64 results are TensorFlow's bits on every input.

Arguments are converted the way TensorFlow converts them before the op
runs, where that differs from the NumPy API:

- a NumPy array of floats passed as ``box_ind``, ``image_size`` or
  ``crop_size`` is truncated toward zero to int32 (``[1.7, 0.2]`` is
  ``[1, 0]``); a value with no int32 truncation (NaN, infinite, beyond
  int32) is refused.  Python lists of floats are refused, as TensorFlow
  refuses them;
- booleans (NumPy arrays and Python lists) count as 0 and 1, NumPy object
  arrays of numbers are converted number by number, and ``grads`` and
  ``boxes`` of a dtype NumPy widens to float32 without loss (such as
  ``ml_dtypes.bfloat16``) are widened;
- a bfloat16 image and ``T=bfloat16`` are refused, as TensorFlow refuses
  them (the NumPy API takes both);
- ``method=None`` and ``extrapolation_value=None`` mean the defaults, a
  Python bool is a number as ``extrapolation_value``, and ``T=float`` (the
  Python type) is float32.

Where TensorFlow's conversion changes a value silently (integers beyond
int32 wrap around, complex numbers lose their imaginary part, strings are
parsed as numbers) these refuse the argument instead: an `IndexError` for
``box_ind``, a `ValueError` for a size beyond int32, a `TypeError` for
complex numbers and strings.  docs/semantics.md lists every difference.

Examples
--------
>>> import numpy as np
>>> from cropgrad import raw_ops
>>> out = raw_ops.CropAndResizeGradImage(
...     grads=np.ones((1, 1, 1, 1), np.float32), boxes=[[0.5, 0.5, 0.5, 0.5]],
...     box_ind=[0], image_size=[1, 3, 3, 1], T="float32")
>>> float(out[0, 1, 1, 0])
1.0
>>> crops = raw_ops.CropAndResize(
...     image=np.arange(9.0).reshape(1, 3, 3, 1), boxes=[[0, 0, 1, 1]],
...     box_ind=np.array([0.9]), crop_size=[2, 2])
>>> crops[0, :, :, 0]
array([[0., 2.],
       [6., 8.]], dtype=float32)
"""

import numpy as np

# The NumPy API's layer, not the package face: cropgrad/__init__.py imports
# this module, so it must not need the face to be initialised first.
from cropgrad._api import crop_and_resize as _cr
from cropgrad._api import validation as _v

__all__ = ["CropAndResize", "CropAndResizeGradBoxes", "CropAndResizeGradImage"]

_INT32_MIN, _INT32_END = -(2**31), 2**31


def _as_tf_array(value):
    """`value` as an array if TensorFlow would convert it like one, else None.

    NumPy arrays are converted by TensorFlow with NumPy's casts; of a Python
    list only booleans need converting here (the NumPy API refuses them).
    """
    if isinstance(value, np.ndarray):
        return value
    if isinstance(value, (list, tuple)):
        try:
            arr = np.asarray(value)
        except (ValueError, TypeError, OverflowError):
            return None  # the NumPy API reports it
        if arr.dtype.kind == "b":
            return arr
    return None


def _cast(arr, dtype, name):
    """``arr.astype(dtype)`` for booleans and object arrays, or an error."""
    try:
        with np.errstate(all="ignore"):
            return arr.astype(dtype)
    except (ValueError, TypeError, OverflowError) as exc:
        raise TypeError(
            f"{name} cannot be converted to {np.dtype(dtype)} as TensorFlow "
            f"converts it: {exc}"
        ) from None


def _float_input(value, name):
    """A float32 input (grads, boxes) converted as TensorFlow converts it."""
    arr = _as_tf_array(value)
    if arr is None:
        return value
    kind = arr.dtype.kind
    if kind in "bO" or (
        kind == "V" and arr.dtype.fields is None and np.can_cast(arr.dtype, np.float32)
    ):
        return _cast(arr, np.float32, name)
    return value


def _truncate(arr, name, error):
    """A float array truncated toward zero to int32, as NumPy's cast does."""
    with np.errstate(all="ignore"):
        truncated = np.trunc(arr.astype(np.float64))
    # NaN fails both comparisons: refused with the infinities.
    fits = (truncated >= _INT32_MIN) & (truncated < _INT32_END)
    if not fits.all():
        where = np.unravel_index(int(np.argmin(fits)), arr.shape)
        position = ", ".join(str(int(i)) for i in where)
        bad = arr[where].item()
        raise error(
            f"{name}[{position}] = {bad!r} has no int32 value (TensorFlow "
            f"converts {name} to int32 by truncation)"
        )
    return truncated.astype(np.int32)


def _int_input(value, name, error):
    """An int32 input (box_ind, image_size, crop_size) converted as TensorFlow."""
    arr = _as_tf_array(value)
    if arr is None:
        return value
    kind = arr.dtype.kind
    if kind == "f":
        return _truncate(arr, name, error)
    if kind == "b":
        return arr.astype(np.int32)
    if kind == "O":
        return _object_ints(arr, name, error)
    return value


def _size_input(value, name):
    """image_size or crop_size, converted as TensorFlow converts it to int32.

    TensorFlow wraps a size beyond int32 around (2**32 + 3 becomes 3):
    refused here instead, before any allocation is tried.  A bare int (which
    the NumPy API takes for a square crop) is refused, as TensorFlow
    refuses a scalar.
    """
    if isinstance(value, (int, np.integer)) or (
        isinstance(value, np.ndarray) and value.ndim == 0
    ):
        raise ValueError(
            f"{name} must be a 1-D sequence of integers, as in TensorFlow, got "
            f"the scalar {value!r}"
        )
    value = _int_input(value, name, ValueError)
    if not isinstance(value, (list, tuple, np.ndarray)):
        return value
    try:
        values = np.asarray(value)
    except (ValueError, TypeError, OverflowError):
        return value  # the NumPy API reports it
    if values.dtype.kind in "iuO":
        for v in values.ravel().tolist():
            if isinstance(v, int) and not _INT32_MIN <= v < _INT32_END:
                raise ValueError(
                    f"{name} = {values.tolist()} has a value beyond int32, the "
                    f"dtype TensorFlow takes {name} in (it would wrap {v} around)"
                )
    return value


def _object_ints(arr, name, error):
    """An object array of numbers as TensorFlow takes it: floats truncated."""
    if all(isinstance(v, (int, np.integer)) for v in arr.flat):
        # Integers go to the NumPy API as they are, so that one beyond int32
        # is reported rather than wrapped around.
        return arr.tolist()
    return _truncate(_cast(arr, np.float64, name), name, error)


def _output_dtype(T):
    # TensorFlow maps the Python type float to float32 (NumPy: float64).
    dtype = _v.output_dtype(np.float32 if T is float else T, "T")
    if _v.is_bfloat16(dtype):
        raise TypeError(
            "T must be float16, float32 or float64, got bfloat16: TensorFlow's "
            "CropAndResizeGradImage does not take it (the NumPy API's "
            "crop_and_resize_grad_image does)"
        )
    return dtype


def _image_input(image, op):
    """The image, unless it is bfloat16, which TensorFlow's `op` refuses."""
    dtype = getattr(image, "dtype", None)
    if isinstance(dtype, np.dtype) and _v.is_bfloat16(dtype):
        raise TypeError(
            f"image of dtype bfloat16: TensorFlow's {op} does not take it (the "
            "NumPy API does, reading it exactly as float32)"
        )
    return image


def CropAndResizeGradImage(  # noqa: N802
    *, grads, boxes, box_ind, image_size, T, method="bilinear", name=None
):
    """``tf.raw_ops.CropAndResizeGradImage``.

    See `cropgrad.crop_and_resize_grad_image`; arguments are converted as
    described in the module's docstring.
    """
    # Resolved here so that a bad T is reported as T, not as dtype.
    dtype = _output_dtype(T)
    return _cr.crop_and_resize_grad_image(
        _float_input(grads, "grads"),
        _float_input(boxes, "boxes"),
        _int_input(box_ind, "box_ind", IndexError),
        _size_input(image_size, "image_size"),
        dtype=dtype,
        method="bilinear" if method is None else method,
        flush_denormals=True,
    )


def CropAndResize(  # noqa: N802
    *,
    image,
    boxes,
    box_ind,
    crop_size,
    method="bilinear",
    extrapolation_value=0.0,
    name=None,
):
    """``tf.raw_ops.CropAndResize``.

    See `cropgrad.crop_and_resize`; arguments are converted as described in
    the module's docstring.
    """
    if extrapolation_value is None:
        extrapolation_value = 0.0
    elif isinstance(extrapolation_value, bool):
        # A Python bool is a number to TensorFlow (np.bool_ is not).
        extrapolation_value = float(extrapolation_value)
    return _cr.crop_and_resize(
        _image_input(image, "CropAndResize"),
        _float_input(boxes, "boxes"),
        _int_input(box_ind, "box_ind", IndexError),
        _size_input(crop_size, "crop_size"),
        method="bilinear" if method is None else method,
        extrapolation_value=extrapolation_value,
        flush_denormals=True,
    )


def CropAndResizeGradBoxes(  # noqa: N802
    *, grads, image, boxes, box_ind, method="bilinear", name=None
):
    """``tf.raw_ops.CropAndResizeGradBoxes``.

    See `cropgrad.crop_and_resize_grad_boxes`; arguments are converted as
    described in the module's docstring.
    """
    return _cr.crop_and_resize_grad_boxes(
        _float_input(grads, "grads"),
        _image_input(image, "CropAndResizeGradBoxes"),
        _float_input(boxes, "boxes"),
        _int_input(box_ind, "box_ind", IndexError),
        method="bilinear" if method is None else method,
        flush_denormals=True,
    )
