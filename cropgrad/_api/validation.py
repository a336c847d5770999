"""Argument checks shared by the public functions.

Each helper converts one argument and raises the documented exception with a
message that names it.  Nothing here starts any work: the kernels only ever
see arrays that passed these checks.
"""

import operator
import sys

import numpy as np

from cropgrad import capi
from cropgrad._kernels.layout import change_layout
from cropgrad._runtime import parallel as _parallel

__all__ = []

METHODS = ("bilinear", "nearest")
MAX_THREADS = 1024

# TensorFlow's names: "float" and "half" mean float32 and float16 there.
_DTYPE_NAMES = {
    "float16": np.float16,
    "half": np.float16,
    "float32": np.float32,
    "float": np.float32,
    "float64": np.float64,
    "double": np.float64,
}
_OUTPUT_DTYPES = (np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64))
_FLOAT32 = np.dtype(np.float32)
_KIND_NAMES = {
    "b": "boolean",
    "c": "complex",
    "O": "object",
    "U": "string",
    "S": "bytes",
    "M": "datetime",
    "m": "timedelta",
    "V": "structured",
}

# Codes of the C-level API (cropgrad/capi.pxd).
CODES = capi._CODES
METHOD_CODES = {"bilinear": CODES["CG_BILINEAR"], "nearest": CODES["CG_NEAREST"]}
LAYOUT_CODES = {"NHWC": CODES["CG_NHWC"], "NCHW": CODES["CG_NCHW"]}
# The axes of grads and of images in each layout, for messages.
GRADS_AXES = {
    "NHWC": "[num_boxes, crop_height, crop_width, depth]",
    "NCHW": "[num_boxes, depth, crop_height, crop_width]",
}
# RoIAlign's pooled outputs and their gradients.
# The image dtypes every API takes, in the words of every API's message.
IMAGE_DTYPE_NAMES = (
    "uint8, uint16, int8, int16, int32, int64, float16, bfloat16, float32 or float64"
)
POOLED_AXES = {
    "NHWC": "[num_boxes, out_height, out_width, channels]",
    "NCHW": "[num_boxes, channels, out_height, out_width]",
}
IMAGE_AXES = {
    "NHWC": "[batch, image_height, image_width, depth]",
    "NCHW": "[batch, depth, image_height, image_width]",
}
DTYPE_CODES = {
    np.dtype(np.uint8): CODES["CG_UINT8"],
    np.dtype(np.int8): CODES["CG_INT8"],
    np.dtype(np.uint16): CODES["CG_UINT16"],
    np.dtype(np.int16): CODES["CG_INT16"],
    np.dtype(np.int32): CODES["CG_INT32"],
    np.dtype(np.int64): CODES["CG_INT64"],
    np.dtype(np.float16): CODES["CG_FLOAT16"],
    np.dtype(np.float32): CODES["CG_FLOAT32"],
    np.dtype(np.float64): CODES["CG_FLOAT64"],
}


# bfloat16 (ml_dtypes.bfloat16, which JAX and TensorFlow use too): NumPy has
# no such type, so an array of it can only exist once a library defining it
# is loaded.  It is recognised by its name, and ml_dtypes is imported only
# for a dtype given by name.
BFLOAT16_NAME = "bfloat16"


def is_bfloat16(dtype):
    """Whether the NumPy dtype `dtype` is a bfloat16 (2 bytes, that name)."""
    return dtype.name == BFLOAT16_NAME and dtype.itemsize == 2


def bfloat16_dtype():
    """ml_dtypes' bfloat16 dtype, or None when ml_dtypes is not installed."""
    module = sys.modules.get("ml_dtypes")
    if module is None:
        try:
            import ml_dtypes as module
        except ImportError:
            return None
    return np.dtype(module.bfloat16)


def dtype_code(dtype):
    """The C-level API's code of an image or output dtype (None: no code)."""
    code = DTYPE_CODES.get(dtype)
    if code is None and is_bfloat16(dtype) and dtype.isnative:
        code = CODES["CG_BFLOAT16"]
    return code


def default_threads():
    """The thread count used when ``num_threads`` is None."""
    return _parallel.default_threads()


def threads(num_threads):
    """Check ``num_threads``; return the count for the C-level API (0: default).

    The C-level API applies the default and the fork guard.
    """
    if num_threads is None:
        return 0
    if isinstance(num_threads, bool) or not isinstance(num_threads, (int, np.integer)):
        raise threads_type_error(num_threads)
    n = operator.index(num_threads)
    if not 1 <= n <= MAX_THREADS:
        raise ValueError(f"num_threads must be from 1 to {MAX_THREADS}, got {n}")
    return n


def threads_type_error(num_threads):
    """The TypeError of a ``num_threads`` that is neither None nor an int."""
    return TypeError(
        f"num_threads must be None or an int from 1 to {MAX_THREADS}, got "
        f"{type(num_threads).__name__} {num_threads!r}"
    )


def flag(value, name):
    """A yes/no argument: a Python or NumPy bool, or the ints 0 and 1."""
    if value is False or value is True:
        return value
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)) and value in (0, 1):
        return bool(value)
    raise TypeError(
        f"{name} must be True or False, got {type(value).__name__} {value!r}"
    )


def _real_number(value, name):
    """`value`, a real number (int or float, not bool; a 0-d array of one
    is unwrapped), else TypeError: the check of the scalar options."""
    if isinstance(value, np.ndarray) and value.ndim == 0:
        value = value[()]
    if isinstance(value, (bool, np.bool_)) or not isinstance(
        value, (int, float, np.integer, np.floating)
    ):
        raise TypeError(
            f"{name} must be a real number, got {type(value).__name__} {value!r}"
        )
    return value


def real_scalar(value, name):
    """A real number (int or float, a 0-d array of one) as float32."""
    value = _real_number(value, name)
    try:
        # A float beyond float32 becomes an infinity, as in TensorFlow's
        # float attributes: not worth NumPy's overflow warning.
        with np.errstate(over="ignore"):
            return np.float32(value)
    except OverflowError:
        raise ValueError(f"{name} = {value!r} is too large for float32") from None


def method(value, allowed=METHODS):
    """The C-level API's code of the sampling method `value`."""
    if isinstance(value, bytes):
        try:
            value = value.decode("ascii")
        except UnicodeDecodeError:
            pass
    if not isinstance(value, str) or value not in allowed:
        choices = ", ".join(repr(m) for m in allowed)
        raise ValueError(f"method must be one of {choices}, got {value!r}")
    return METHOD_CODES[value]


def data_format(value):
    """The C-level API's layout code of ``data_format`` ("NHWC" or "NCHW")."""
    if isinstance(value, str) and value in LAYOUT_CODES:
        return LAYOUT_CODES[value]
    raise ValueError(f"data_format must be 'NHWC' or 'NCHW', got {value!r}")


_RESOLVED: dict = {}


def output_dtype(dtype, name):
    """Resolve an output dtype given as a NumPy dtype, a name or a TF DType."""
    try:
        return _RESOLVED[dtype]
    except (KeyError, TypeError):  # not seen yet, or unhashable
        pass
    resolved = _output_dtype(dtype, name)
    try:
        _RESOLVED[dtype] = resolved
    except TypeError:
        pass
    return resolved


def _output_dtype(dtype, name):
    original = dtype
    if hasattr(dtype, "as_numpy_dtype"):
        dtype = dtype.as_numpy_dtype
    if type(dtype).__module__ == "torch" and type(dtype).__name__ == "dtype":
        # torch.float64 and the rest: by name (torch.bfloat16 -> "bfloat16").
        dtype = str(dtype).removeprefix("torch.")
    if isinstance(dtype, str) and dtype in _DTYPE_NAMES:
        dtype = _DTYPE_NAMES[dtype]
    if isinstance(dtype, str) and dtype == BFLOAT16_NAME:
        dtype = bfloat16_dtype()
        if dtype is None:
            raise TypeError(
                f"{name} {original!r} needs ml_dtypes, which is not installed "
                "(pip install ml_dtypes)"
            )
    try:
        # np.dtype(None) is float64, which is not what None means here.
        resolved = None if dtype is None else np.dtype(dtype)
    except (TypeError, ValueError):
        resolved = None
    if resolved is not None and resolved.kind == "f":
        resolved = resolved.newbyteorder("=")
    if resolved is not None and is_bfloat16(resolved):
        return resolved if resolved.isnative else resolved.newbyteorder("=")
    # `is None` first: NumPy's ``np.dtype("float64") == None`` is True.
    if resolved is None or resolved not in _OUTPUT_DTYPES:
        raise TypeError(
            f"{name} must be float16, float32 or float64 (or ml_dtypes.bfloat16), "
            f"got {original!r}"
        )
    return resolved


def _framework_hint(value, name):
    """A TypeError for a framework's tensor the NumPy API cannot take as it
    is (a PyTorch tensor: its gradient would be lost, and NumPy cannot read
    bfloat16 ones; a JAX tracer: the call is inside a transformation), with
    the adapter to use; None for anything else."""
    module = type(value).__module__.split(".")[0]
    kind = type(value).__name__
    if module == "torch" and kind in ("Tensor", "Parameter"):
        return TypeError(
            f"{name} is a torch.Tensor: the NumPy API takes arrays.  For tensors "
            "use cropgrad.torch, whose functions take them in place and "
            "differentiate; or pass tensor.detach().cpu().numpy()"
        )
    if module == "jax" and "Tracer" in kind:
        return TypeError(
            f"{name} is a JAX tracer: the NumPy API was called inside a JAX "
            "transformation (jax.jit, jax.grad, jax.vmap, ...), which it cannot "
            "trace.  Use cropgrad.jax, whose functions do"
        )
    return None


def real_array(value, name, bfloat16=False):
    """``numpy.asarray(value)``, refusing anything but integers and floats
    (and, with `bfloat16`, bfloat16 floats)."""
    if isinstance(value, np.ndarray):
        arr = value
    else:
        hint = _framework_hint(value, name)
        if hint is not None:
            raise hint
        try:
            arr = np.asarray(value)
        except (ValueError, TypeError, OverflowError) as exc:
            raise ValueError(f"{name} cannot be converted to an array: {exc}") from None
    kind = arr.dtype.kind
    if kind not in "iuf" and not (bfloat16 and is_bfloat16(arr.dtype)):
        raise TypeError(
            f"{name} must hold real numbers (integers or floats), got "
            f"{_KIND_NAMES.get(kind, kind)} dtype {arr.dtype}"
        )
    return arr


def float32_array(value, name, dtype=_FLOAT32, bfloat16=False):
    """A C-contiguous float32 (or `dtype`) view of `value`, copied only when
    needed (`bfloat16`: bfloat16 arrays are taken too, and converted)."""
    arr = real_array(value, name, bfloat16)
    # `is`: NumPy's native float32 dtype is one object, and comparing a
    # dtype with `==` costs more than the rest of a small call's checks.
    if (arr.dtype is dtype or arr.dtype == dtype) and arr.flags.c_contiguous:
        return arr
    # Values beyond float32 become infinities (the documented conversion):
    # a box is then refused by the C-level API's checks, a gradient propagates as IEEE
    # arithmetic does.  NumPy's overflow warning would only repeat that.
    with np.errstate(over="ignore"):
        return np.ascontiguousarray(arr, dtype=dtype)


def grads_array(grads, data_format="NHWC"):
    """``grads`` as a 4-D C-contiguous float32 array (copied only when needed).

    `data_format` (already checked) only words the message.
    """
    grads = float32_array(grads, "grads")
    if grads.ndim != 4:
        raise ValueError(
            f"grads must be 4-D {GRADS_AXES[data_format]} ({data_format}), "
            f"got shape {grads.shape}"
        )
    return grads


def image_array(image, data_format="NHWC", contiguous=True, num_threads=0):
    """Check the image of the forward op and the boxes gradient.

    Returns the C-contiguous array to pass to the C-level API (native byte
    order, used in place when it already is) and its dtype code; with
    ``contiguous=False``, the checked array as it is (a caller that
    changes its layout itself).  `data_format` (already checked) only words
    the message; a copy is made on `num_threads` (0: the default).
    """
    image = real_array(image, "image", bfloat16=True)
    if image.ndim != 4:
        raise ValueError(
            f"image must be 4-D {IMAGE_AXES[data_format]} ({data_format}), got "
            f"shape {image.shape}"
        )
    native = image.dtype.newbyteorder("=")
    code = dtype_code(native)
    if code is None:
        raise TypeError(f"image must be {IMAGE_DTYPE_NAMES}, got {image.dtype}")
    if contiguous and (image.dtype != native or not image.flags.c_contiguous):
        image = _contiguous(image, native, num_threads)
    return image, code


def _contiguous(image, dtype, num_threads):
    """4-D `image` as a C-contiguous array of `dtype`.  A view of the
    other layout's C-contiguous memory (an NCHW view of NHWC memory, such
    as PyTorch's channels_last, or the other way round) of that dtype is
    copied by the parallel layout change, several times faster than
    NumPy's strided copy."""
    if image.dtype == dtype and dtype.itemsize in (2, 4, 8):
        for axes, to_channels in (((0, 2, 3, 1), True), ((0, 3, 1, 2), False)):
            memory = image.transpose(axes)
            if memory.flags.c_contiguous:
                copy = np.empty(image.shape, dtype)
                change_layout(memory, copy, to_channels, num_threads)
                return copy
    return np.ascontiguousarray(image, dtype=dtype)


def boxes_and_index(boxes, box_ind, dtype=_FLOAT32, columns="[y1, x1, y2, x2]"):
    """Check ``boxes`` and ``box_ind`` shapes; return the boxes as float32
    (or `dtype`) and the index.  `columns` names the boxes' columns."""
    boxes = float32_array(boxes, "boxes", dtype)
    boxes_shape(boxes.shape, columns)
    if boxes.shape == (0,):
        boxes = boxes.reshape(0, 4)  # an empty list is no boxes
    box_ind = real_array(box_ind, "box_ind")
    kind = box_ind.dtype.kind
    if kind == "f" and box_ind.size == 0:
        # An empty list comes out as float64: it holds no non-integer.
        box_ind = box_ind.astype(np.int32)
    elif kind not in "iu":
        raise TypeError(f"box_ind must hold integers, got dtype {box_ind.dtype}")
    box_ind_shape(box_ind.shape, boxes.shape[0])
    return boxes, box_ind


def boxes_shape(shape, columns="[y1, x1, y2, x2]"):
    """Refuse a boxes shape other than ``(num_boxes, 4)`` (any array's)."""
    if len(shape) != 2 or shape[1] != 4:
        if tuple(shape) == (0,):
            return  # an empty list: no boxes (see boxes_and_index)
        raise ValueError(
            f"boxes must be 2-D with 4 columns {columns}, got shape {tuple(shape)}"
        )


def box_ind_shape(shape, num_boxes):
    """Refuse a box_ind shape other than ``(num_boxes,)`` (any array's)."""
    if len(shape) != 1 or shape[0] != num_boxes:
        raise ValueError(
            f"box_ind has incompatible shape {tuple(shape)}: expected "
            f"({num_boxes},), one image index per box"
        )


def same_num_boxes(num_boxes, grads_shape):
    """Refuse grads of another box count than boxes (the C-level API takes
    one count, ``grads_shape[0]``, so the check is the Python layer's)."""
    if grads_shape[0] != num_boxes:
        raise ValueError(
            f"boxes and grads have incompatible shape: {num_boxes} boxes "
            f"but grads has shape {tuple(grads_shape)}"
        )


def boxes_tangent(value, num_boxes, dtype=_FLOAT32):
    """``boxes_tangent`` as C-contiguous float32 (or `dtype`) of the shape of
    boxes.

    Converted as boxes are (a value beyond float32 becomes an infinity) but
    not checked for finiteness: a tangent's NaN or infinity propagates.
    """
    tangent = float32_array(value, "boxes_tangent", dtype)
    if tangent.shape != (num_boxes, 4):
        raise ValueError(
            f"boxes_tangent must have the shape of boxes ({num_boxes}, 4), "
            f"got shape {tangent.shape}"
        )
    return tangent


_INDEX_CODES = {
    np.dtype(np.int32): CODES["CG_INT32"],
    np.dtype(np.int64): CODES["CG_INT64"],
}


def native_index(box_ind):
    """box_ind as C-contiguous int32 or int64 (used in place when it is).

    Returns the array and its dtype code.
    """
    code = _INDEX_CODES.get(box_ind.dtype)
    if code is not None and box_ind.dtype.isnative and box_ind.flags.c_contiguous:
        return box_ind, code
    if not (code is not None and box_ind.dtype.isnative):
        if box_ind.dtype.kind == "u" and box_ind.dtype.itemsize == 8:
            # Values beyond int64 are out of range anyway; keep them so.
            box_ind = np.minimum(box_ind, np.iinfo(np.int64).max)
        box_ind = box_ind.astype(np.int64)
    elif not box_ind.flags.c_contiguous:
        box_ind = np.ascontiguousarray(box_ind)
    return box_ind, DTYPE_CODES[box_ind.dtype]


def int_vector(value, length, name, what):
    """A sequence of `length` Python ints (integers of any size, no floats)."""
    if type(value) in (list, tuple) and len(value) == length:
        values = list(value)  # the common case, without a round trip through NumPy
        if not all(type(v) is int for v in values):
            values = _int_values(value, length, name, what)
    else:
        values = _int_values(value, length, name, what)
    # Checked here, before any C code sees the values as 64-bit integers.
    if min(values) < -sys.maxsize or max(values) > sys.maxsize:
        raise ValueError(
            f"{name} {values} has a value beyond the largest array "
            f"dimension ({sys.maxsize})"
        )
    return values


def _int_values(value, length, name, what):
    """`int_vector` for anything but a list or tuple of Python ints."""
    try:
        arr = np.asarray(value)
    except (ValueError, TypeError, OverflowError) as exc:
        raise ValueError(f"{name} must be {length} integers {what}: {exc}") from None
    if arr.ndim != 1 or arr.shape[0] != length:
        raise ValueError(
            f"{name} must have {length} elements {what}, got shape {arr.shape}"
        )
    if arr.dtype.kind == "f" and not isinstance(value, np.ndarray):
        # NumPy makes float64 of a list holding an int in [2**63, 2**64):
        # look at the items themselves.
        arr = np.asarray(value, dtype=object)
    if arr.dtype.kind in "iu":
        return [int(v) for v in arr]
    if arr.dtype.kind == "O":
        try:
            return [operator.index(v) for v in arr]
        except TypeError:
            pass
    raise TypeError(f"{name} must hold integers {what}, got {value!r}")


def image_size(value, data_format="NHWC"):
    """``image_size`` as 4 ints (the C-level API checks their values)."""
    return tuple(int_vector(value, 4, "image_size", IMAGE_AXES[data_format]))


def crops_shape(layout, image_shape, num_boxes, crop_height, crop_width):
    """The crops' shape (the forward op's and the boxes JVP's) in `layout`.

    From the layout code the kernel gets, not a comparison of
    ``data_format``: a str subclass may compare equal to "NCHW" whatever it
    holds, and a shape of the other layout has the wrong size (the kernel
    would write past its end).
    """
    if layout == LAYOUT_CODES["NCHW"]:
        return (num_boxes, image_shape[1], crop_height, crop_width)
    return (num_boxes, crop_height, crop_width, image_shape[3])


def allocate(shape, dtype, name):
    """``numpy.empty(shape, dtype)``, refusing sizes that cannot be indexed."""
    try:
        return np.empty(shape, dtype=dtype)
    except (MemoryError, ValueError):
        pass
    itemsize = np.dtype(dtype).itemsize
    count = 1
    # NumPy refuses a shape whose non-zero dimensions multiply (times the
    # item size) beyond the index range even when another dimension is 0.
    span = itemsize
    for n in shape:
        count *= n
        if n:
            span *= n
    if max(shape, default=0) > sys.maxsize or span > sys.maxsize:
        raise ValueError(
            f"{name} of shape {tuple(shape)} and dtype {np.dtype(dtype)} spans "
            f"{span} bytes: more than this platform can index"
        )
    raise MemoryError(
        f"could not allocate {name} of shape {tuple(shape)} and dtype "
        f"{np.dtype(dtype)} ({count * itemsize / 2**30:.2f} GiB)"
    )


def output(out, shape, dtype):
    """Check a caller's ``out=`` array, or allocate one.

    That `out` shares no memory with an input is checked by the C-level
    API's bridge (cropgrad/capi.pyx), on the arrays the kernel reads.
    """
    if out is None:
        return allocate(shape, dtype, "the output")
    if not isinstance(out, np.ndarray):
        raise TypeError(f"out must be a numpy.ndarray, got {type(out).__name__}")
    if out.dtype != dtype:
        raise TypeError(f"out must have dtype {dtype}, got {out.dtype}")
    if out.shape != tuple(shape):
        raise ValueError(f"out must have shape {tuple(shape)}, got {out.shape}")
    if not out.flags.c_contiguous:
        raise ValueError("out must be C-contiguous")
    if not out.flags.writeable:
        raise ValueError("out is read-only")
    return out


def size_pair(value, name, what):
    """An int (a square) or 2 ints, as ``(height, width)``."""
    if isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_)):
        n = operator.index(value)
        values = [n, n]
    else:
        values = int_vector(value, 2, name, what)
    if min(values) < -sys.maxsize or max(values) > sys.maxsize:
        raise ValueError(
            f"{name} {values} has a value beyond the largest array "
            f"dimension ({sys.maxsize})"
        )
    return tuple(values)


def int_scalar(value, name, lo=-(2**31), hi=2**31 - 1):
    """An integer (a Python or NumPy int, not a bool) within ``[lo, hi]``."""
    if isinstance(value, np.ndarray) and value.ndim == 0:
        value = value[()]
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an int, got {type(value).__name__} {value!r}")
    n = operator.index(value)
    if not lo <= n <= hi:
        raise ValueError(f"{name} must be from {lo} to {hi}, got {n}")
    return n


def float_scalar(value, name):
    """A real number (a 0-d array of one too) as a Python float."""
    value = _real_number(value, name)
    try:
        return float(value)
    except OverflowError:
        raise ValueError(f"{name} = {value!r} is too large for float64") from None
