"""Fuzz target: random bytes -> a call of one of cropgrad's operations.

The bytes are decoded into an operation (the three crop_and_resize
functions, the three ``raw_ops`` and the four ``roi_align`` functions) and
every one of its arguments, each either valid or broken in one of many
ways: wrong types, dtypes, ranks and shapes, memory layouts, NaN/inf and
huge-but-finite boxes, negative and enormous sizes, bad ``out=`` arrays,
unknown keywords; for RoIAlign also its options (``spatial_scale``,
``sampling_ratio``, ``aligned``, ``dtype``, an int ``output_size``) and
boxes whose adaptive grid passes the sample bound.  The public functions'
arrays are laid out in either layout: ``data_format`` is left out (NHWC;
RoIAlign's: NCHW), "NHWC" or "NCHW" (also as str subclasses), or an
invalid value (another case, another string, not a string).
In NCHW, images and image gradients are ``[batch, depth, height, width]``,
grads ``[num_boxes, depth, crop_height, crop_width]``, and ``image_size``
and the shapes the oracle expects are in that order too; an array broken
in one dimension is broken in its NCHW axis.  The raw ops are NHWC only
(``data_format`` is an unknown keyword there).  The generator knows which
arguments it broke, which gives an oracle:

- all arguments valid: the call must succeed (a ``MemoryError`` is only
  allowed for a big output), return the right shape and dtype (and `out`
  itself when given), the bits of the NumPy reference
  (``cropgrad._reference`` in its exact arithmetic, flushing subnormals as
  the call asks; for outputs and ``grads`` small enough to compute it in
  milliseconds; in NHWC, so an NCHW call's inputs are transposed for it and
  its result back; RoIAlign's: ``cropgrad._reference.roi_align`` in NCHW
  with ``exact=True`` for all four functions, for calls of at most
  ROI_REFERENCE_SAMPLES samples without ``flush_denormals``) and the same
  bits with one thread;
- some argument broken: the call must raise ``ValueError``, ``TypeError``,
  ``IndexError`` or ``MemoryError`` with a non-empty message naming one of
  the broken arguments;
- some argument of unknown validity: any of the above.

Anything else (another exception, a wrong message, a crash) is a failure.

Usage (from the repository root; ``-P`` keeps the source tree off the path)::

    python -P tests/fuzz_target.py --seconds 60 [--seed N] [--corpus DIR]
        [--crash-file PATH] [--save-failures DIR]
    python -P tests/fuzz_target.py --run FILE...      # replay inputs
    python -P tests/fuzz_target.py --describe FILE    # show the decoded call
    python -P tests/fuzz_target.py --atheris [libFuzzer options]

Before each execution the input is written to ``--crash-file``, so a
process that dies (a segfault) leaves the input that killed it there.
Sizes are drawn so that valid outputs stay small and invalid ones are far
beyond any machine's memory: a fuzz run never allocates gigabytes.
"""

import argparse
import datetime
import json
import math
import os
import random
import sys
import time
import warnings

import numpy as np

import cropgrad
from cropgrad import _reference as reference
from cropgrad import raw_ops
from cropgrad._api import validation as _validation

# ml_dtypes' bfloat16 (None without ml_dtypes): an output dtype of the NumPy
# API's image gradient, refused by the raw op as by TensorFlow.
BFLOAT16 = _validation.bfloat16_dtype()

ALLOWED = (ValueError, TypeError, IndexError, MemoryError)
MAXSIZE = sys.maxsize

# --------------------------------------------------------------------------
# Reading the bytes


class Source:
    """Draws choices from a byte string; zeros once it is exhausted."""

    def __init__(self, data):
        self.data = data
        self.pos = 0

    def byte(self):
        if self.pos < len(self.data):
            b = self.data[self.pos]
            self.pos += 1
            return b
        return 0

    def below(self, n):
        """An int in [0, n)."""
        if n <= 1:
            return 0
        if n <= 256:
            return self.byte() % n
        return (self.byte() << 8 | self.byte()) % n

    def pick(self, seq):
        return seq[self.below(len(seq))]

    def chance(self, k):
        """True about once in `k` draws."""
        return self.below(k) == 0

    def u32(self):
        return self.byte() | self.byte() << 8 | self.byte() << 16 | self.byte() << 24

    # In strict mode (half the inputs) every argument is drawn valid, so that
    # the kernels run often; otherwise any argument may be broken.
    strict = False

    def choose(self, choices, n_valid):
        """One of `choices`, whose first `n_valid` are valid values."""
        return self.pick(choices[:n_valid] if self.strict else choices)


# A value whose validity is known: True, False or None (unknown).
class Arg:
    __slots__ = ("value", "valid", "info")

    def __init__(self, value, valid, **info):
        self.value = value
        self.valid = valid
        self.info = info


SMALL_DIMS = [1, 2, 3, 1, 2, 5, 8, 17]
# Far beyond any memory when multiplied by anything but 0, or invalid.
HUGE = [
    2**40,
    2**47,
    2**62,
    2**63 - 1,
    2**63,
    2**64,
    2**70,
    -1,
    -2,
    -(2**31),
    -(2**63),
    -(2**70),
]
FLOATS = [
    0.0,
    -0.0,
    1.0,
    0.5,
    -0.5,
    0.25,
    1.5,
    -1.0,
    2.0,
    0.999,
    1e-40,
    -1e-45,
    1e30,
    -1e30,
    3e38,
    -3e38,
    3.4028235e38,
    7.0,
    0.1,
    1e300,
    -1e300,
    float("nan"),
    float("inf"),
    float("-inf"),
]
FINITE_FLOATS = 19  # the first 19 are finite in float32
REAL_DTYPES = [
    np.float32,
    np.float32,
    np.float64,
    np.float16,
    np.int32,
    np.int64,
    np.uint8,
    np.int8,
    np.int16,
    np.uint16,
    np.uint32,
    np.uint64,
    np.dtype(">f4"),
    np.dtype(">f8"),
    np.dtype(">i8"),
    np.longdouble,
]
INT_DTYPES = [
    np.int32,
    np.int64,
    np.int64,
    np.uint8,
    np.int8,
    np.uint16,
    np.uint32,
    np.uint64,
    np.dtype(">i4"),
    np.dtype(">i8"),
]
BAD_DTYPES = [
    np.complex64,
    np.complex128,
    bool,
    object,
    "U3",
    "S3",
    "datetime64[s]",
    "timedelta64[ms]",
    [("a", "f4")],
]


def _fill_values(src, size, dtype, menu):
    dtype = np.dtype(dtype)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        raw = [
            src.pick([0, 1, 2, 3, -1, int(info.max), int(info.min), 7, 2**40])
            for _ in range(min(size, 64))
        ]
        vals = [min(max(v, int(info.min)), int(info.max)) for v in raw]
    else:
        vals = [src.pick(menu) for _ in range(min(size, 64))]
    vals = (vals or [0]) * (size // max(len(vals), 1) + 1)
    with np.errstate(all="ignore"):
        return np.array(
            vals[:size], dtype=dtype if dtype.kind != "f" else np.float64
        ).astype(dtype)


def _layout(src, arr):
    """The same values in another memory layout or container."""
    return _relayout(src.below(10), arr)


def _relayout(mode, arr):
    """`arr` in the memory layout or container number `mode` (0-9) stands for."""
    if mode == 1 and arr.ndim >= 2:
        return np.asfortranarray(arr)
    if mode == 2 and arr.ndim >= 1:  # every other element of a wider array
        wide = np.zeros(arr.shape[:-1] + (2 * arr.shape[-1],), arr.dtype)
        wide[..., ::2] = arr
        return wide[..., ::2]
    if mode == 3 and arr.ndim >= 1:  # negative strides
        return arr[::-1].copy()[::-1]
    if mode == 4:
        arr = arr.copy()
        arr.flags.writeable = False
        return arr
    if mode == 5 and arr.size:  # (an empty list would lose the shape)
        return arr.tolist()
    return arr


def real_array(src, shape, menu, ints=False, finite=False):
    """An array argument: valid, or broken in dtype, shape or type.

    With `finite`, values that are not finite in float32 make it invalid.
    """
    mode = src.below(10 if src.strict else 16)
    if mode <= 9:
        dtype = src.pick(INT_DTYPES if ints else REAL_DTYPES)
        size = int(np.prod(shape))
        arr = _fill_values(src, size, dtype, menu).reshape(shape)
        valid = True
        if finite:
            with np.errstate(all="ignore"):
                valid = bool(np.isfinite(arr.astype(np.float32)).all())
        # The memory layout is kept, to lay out the values again once their
        # axes are moved to NCHW (see _nchw_array).
        mode = src.below(10)
        return Arg(
            _relayout(mode, arr), valid, shape=tuple(shape), values=arr, mode=mode
        )
    if mode == 10:  # wrong dtype
        dtype = src.pick(BAD_DTYPES)
        return Arg(np.zeros(shape, dtype), False)
    if mode == 11:  # wrong shape (rank or one dimension)
        shape = list(shape)
        how = src.below(4)
        if how == 0 and shape:
            shape.pop(src.below(len(shape)))
        elif how == 1:
            shape.insert(src.below(len(shape) + 1), src.pick([1, 2, 0]))
        elif shape:
            i = src.below(len(shape))
            shape[i] = src.pick([0, 1, 2, 3, 4, 5, 9])
        dtype = src.pick(INT_DTYPES if ints else REAL_DTYPES[:4])
        arr = _fill_values(src, int(np.prod(shape)), dtype, menu).reshape(shape)
        return Arg(arr, None, shape=tuple(shape), values=arr)
    if mode == 12:  # ragged nested lists
        return Arg([[[[1.0]]], [[[1.0, 2.0]]], 3], False)
    if mode == 13:  # 0-d
        return Arg(np.array(1, np.int32 if ints else np.float32), False)
    junk = [
        None,
        "abc",
        b"xyz",
        {},
        set(),
        object(),
        1j,
        [None],
        [["a"]],
        np.array([1, "x"], object),
    ]
    return Arg(src.pick(junk), False)


def _dims_valid(values, positive, nonneg):
    """True, False, or None for values NumPy may or may not take (bools)."""
    for v in values:
        if isinstance(v, (bool, np.bool_)):
            return None  # [1, 3, True, 1] becomes an int array
        if not isinstance(v, (int, np.integer)):
            return False
    for i, v in enumerate(values):
        if abs(int(v)) > MAXSIZE:
            return False
        if i in positive and v <= 0 or i in nonneg and v < 0:
            return False
    return True


def _depth_mismatch(grads, depth, axis):
    """False if `grads` is 4-D with another depth; None if that is unknown.

    `axis` is the depth's axis in the call's layout: 3 in NHWC, 1 in NCHW.
    """
    try:
        shape = np.shape(grads.value)
    except (ValueError, TypeError):
        return None
    return False if len(shape) == 4 and shape[axis] != depth else None


def size_arg(src, values, positive, nonneg, square=False):
    """image_size or crop_size: valid ints, or broken entries, length, type
    (with `square`, a positive int is valid: the NumPy API's square crop)."""
    values = list(values)
    mode = src.below(6 if src.strict else 12)
    if mode <= 5:
        container = src.below(5)
        if container == 1:
            return Arg(tuple(values), True, ints=values)
        if container == 2:
            dtype = src.pick([np.int32, np.int64, np.uint64, ">i8"])
            return Arg(np.array(values, dtype), True, ints=values)
        if container == 3:
            return Arg([np.int64(v) for v in values], True, ints=values)
        return Arg(values, True, ints=values)
    if mode <= 8:  # one entry changed
        values[src.below(len(values))] = src.pick(
            HUGE + [0, -1, 2.0, 2.5, None, "3", True]
        )
        valid = _dims_valid(values, positive, nonneg)
        return Arg(values, valid, ints=values if valid else None)
    if mode == 9:  # wrong length
        return Arg(values[:-1] if src.chance(2) else values + [1], False)
    if mode == 10:  # wrong kind of array
        return Arg(
            src.pick(
                [
                    np.array(values, np.float64),
                    np.array(values, complex),
                    np.array([values]),
                    np.array(values, bool),
                ]
            ),
            False,
        )
    value = src.pick([None, 4, "1234", b"12", np.int64(3), [[1, 2], 3, 4, 5]])
    if square and isinstance(value, (int, np.integer)):
        return Arg(value, True, ints=[int(value)] * 2)
    return Arg(value, False)


def box_values(src, n):
    rows = []
    for _ in range(n):
        rows.append(
            [
                src.choose(FLOATS, FINITE_FLOATS)
                if src.chance(3)
                else (src.u32() % 2001 - 500) / 1000
                for _ in range(4)
            ]
        )
    return np.array(rows, np.float64).reshape(n, 4)


# --------------------------------------------------------------------------
# One call


VALID_DTYPES = {
    "float16": np.float16,
    "half": np.float16,
    "float32": np.float32,
    "float": np.float32,
    "float64": np.float64,
    "double": np.float64,
    "f4": np.float32,
    "f8": np.float64,
    "f2": np.float16,
    ">f4": np.float32,
}
DTYPE_CHOICES = (
    list(VALID_DTYPES)
    + [np.float32, np.float64, np.float16] * 3
    + [
        "foo",
        None,
        np.int32,
        "int64",
        complex,
        bool,
        object,
        3,
        "datetime64[s]",
        "bfloat16",
        np.longdouble,
    ]
)
N_VALID_DTYPES = len(VALID_DTYPES) + 9
METHOD_CHOICES = [
    "bilinear",
    "nearest",
    "bilinear",
    "nearest",
    np.str_("nearest"),
    "Bilinear",
    "",
    None,
    0,
    ["bilinear"],
    b"\xff",
    "area",
    "bicubic",
    b"bilinear",
]
THREAD_CHOICES = [
    None,
    1,
    2,
    3,
    4,
    None,
    2,
    np.int64(2),
    0,
    -1,
    1025,
    10**6,
    2**70,
    True,
    1.5,
    "2",
    [2],
]
FLUSH_CHOICES = [
    False,
    True,
    False,
    0,
    1,
    np.bool_(True),
    "yes",
    None,
    2,
    0.5,
    np.ones(2, bool),
]
EXTRAP_CHOICES = [
    0.0,
    1.5,
    -3,
    np.float32(2),
    np.array(4.0),
    float("nan"),
    float("inf"),
    1e300,
    2**1000,
    None,
    "0",
    b"0",
    1j,
    True,
    [0.0],
    np.zeros(2),
    np.datetime64(1, "s"),
    2**2000,
]


class _EqualsAll(str):
    """A str whose ``==`` says True to anything (its hash is the str's).

    Valid as data_format (it is a str, found among the layouts by what it
    holds), but comparing it with "NCHW" says nothing: the layout the call
    computes in and the shape of its output must both come from its value.
    """

    __hash__ = str.__hash__

    def __eq__(self, other):
        return True

    def __ne__(self, other):
        return False

    def __repr__(self):
        return f"_EqualsAll({str(self)!r})"


# data_format of the public functions, each with the layout its arrays are
# drawn in.  The first valid one is the keyword left out (NHWC, the
# default): an input that runs out of bytes before this last draw, as every
# input written before it existed does, keeps its NHWC call.  The invalid
# ones lay the arrays out as they look meant, so that the layout argument
# is what is wrong with the call.
OMITTED = object()
VALID_LAYOUTS = [
    (OMITTED, "NHWC"),
    ("NCHW", "NCHW"),
    ("NHWC", "NHWC"),
    ("NCHW", "NCHW"),
    (np.str_("NCHW"), "NCHW"),  # a str subclass is a str
    ("NCHW", "NCHW"),
    (_EqualsAll("NHWC"), "NHWC"),
    (_EqualsAll("NCHW"), "NCHW"),
]
INVALID_LAYOUTS = [
    ("nchw", "NCHW"),  # the case matters
    ("nhwc", "NHWC"),
    ("NCHW ", "NCHW"),
    ("CHW", "NCHW"),
    ("NCDHW", "NCHW"),
    ("channels_first", "NCHW"),
    ("", "NHWC"),
    (None, "NHWC"),
    (b"NCHW", "NCHW"),  # not a str (unlike method, bytes are not decoded)
    (1, "NCHW"),
    (["NCHW"], "NCHW"),
]
NCHW_ORDER = (0, 3, 1, 2)  # NCHW's axes as positions of NHWC's


def _nchw_array(arg):
    """An array argument drawn in NHWC, with its axes moved to NCHW.

    The arrays are drawn in NHWC whatever the layout, so that the layout can
    be the last draw; a dimension that was changed to break the argument
    moves with its axis and breaks it in NCHW.  Arrays of another rank (or
    not arrays at all) are broken in either layout and stay as they are.
    """
    values = arg.info.get("values")
    if values is not None and values.ndim == 4:
        moved = np.ascontiguousarray(values.transpose(NCHW_ORDER))
        info = dict(arg.info, shape=moved.shape, values=moved)
        return Arg(_relayout(arg.info.get("mode", 0), moved), arg.valid, **info)
    if isinstance(arg.value, np.ndarray) and arg.value.ndim == 4:  # bad dtype
        moved = np.ascontiguousarray(arg.value.transpose(NCHW_ORDER))
        return Arg(moved, arg.valid, **arg.info)
    return arg


def _nchw_size(arg):
    """image_size drawn as [batch, height, width, depth], in NCHW order.

    Only 4 entries have an order; a size of another length or rank is
    broken in either layout and stays as it is.
    """
    value = arg.value
    if isinstance(value, (list, tuple)) and len(value) == 4:
        moved = type(value)(value[i] for i in NCHW_ORDER)
    elif isinstance(value, np.ndarray) and value.shape == (4,):
        moved = value[list(NCHW_ORDER)]
    else:
        return arg
    info = dict(arg.info)
    if info.get("ints") is not None:
        info["ints"] = [info["ints"][i] for i in NCHW_ORDER]
    return Arg(moved, arg.valid, **info)


def _dtype_valid(value, raw):
    if isinstance(value, str) and value == "bfloat16":
        return BFLOAT16 is not None and not raw
    if isinstance(value, str):
        return value in VALID_DTYPES
    if value is None or value is np.longdouble and np.dtype(np.longdouble).itemsize > 8:
        return False
    try:
        return np.dtype(value) in (np.float16, np.float32, np.float64)
    except TypeError:
        return False


def _flag_valid(value):
    if isinstance(value, (bool, np.bool_)):
        return True
    return isinstance(value, int) and value in (0, 1)


def _real_scalar_valid(value):
    if isinstance(value, np.ndarray):
        if value.ndim != 0:
            return False
        value = value[()]
    if isinstance(value, (bool, np.bool_)):
        return False
    if isinstance(value, int) and abs(value) > 2**1023:
        return False
    return isinstance(value, (int, float, np.integer, np.floating))


def _threads_valid(value):
    if value is None:
        return True
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        return False
    return bool(1 <= value <= 1024)


def _method_valid(value, allowed):
    if isinstance(value, bytes):
        return None if value in (b"bilinear", b"nearest") else False
    return isinstance(value, str) and value in allowed


class Call:
    """A decoded call: the function, its keyword arguments and the oracle's facts."""

    def __init__(
        self,
        op,
        func,
        kwargs,
        checks,
        expect_shape,
        expect_dtype,
        out,
        layout,
        samples=None,
    ):
        self.op = op
        self.layout = layout  # "NHWC" or "NCHW": the axes of the arrays
        self.func = func
        self.kwargs = kwargs
        self.checks = checks  # argument name -> True/False/None
        self.expect_shape = expect_shape
        self.expect_dtype = expect_dtype
        self.out = out
        # RoIAlign: the samples the reference would visit (None: unknown).
        self.samples = samples

    @property
    def valid(self):
        values = list(self.checks.values())
        if any(v is False for v in values):
            return False
        if all(v is True for v in values):
            return True
        return None

    def describe(self):
        def short(v):
            if isinstance(v, np.ndarray):
                return (
                    f"ndarray(shape={v.shape}, dtype={v.dtype}, "
                    f"c={v.flags.c_contiguous}, writeable={v.flags.writeable})"
                )
            text = repr(v)
            return text if len(text) < 120 else text[:117] + "..."

        args = ", ".join(f"{k}={short(v)}" for k, v in self.kwargs.items())
        return f"{self.op}({args})  layout={self.layout} checks={self.checks}"


SHAPED = [
    "grads",
    "image",
    "boxes",
    "box_ind",
    "image_size",
    "crop_size",
    "out",
    "output_size",
    "boxes_tangent",
]
ROI_OPS = ["roi_forward", "roi_grad_image", "roi_grad_boxes", "roi_jvp_boxes"]
# The op is the second byte's draw: the RoIAlign ops came last, and the
# corpus files written before them had that byte rewritten to keep their op.
OPS = [
    "grad_image",
    "forward",
    "grad_boxes",
    "raw_grad_image",
    "raw_forward",
    "raw_grad_boxes",
    *ROI_OPS,
]


def _output_refused(shape, itemsize):
    """Whether an output of `shape` must be refused (ValueError or MemoryError).

    NumPy cannot make it when its non-zero dimensions multiply beyond the
    index range; no machine has the memory for more than 2**40 bytes (and
    this generator never asks for outputs between 1 MiB and that).
    """
    span = itemsize
    count = itemsize
    for n in shape:
        span *= n if n else 1
        count *= n
    return span > MAXSIZE or count > 2**40


def _image_depth(image, depth, depth_axis):
    """The depth of the image passed, which the result takes: an image drawn
    with a mangled shape may have another depth than `depth`, the one drawn,
    and still be valid."""
    shape = image.info.get("shape", ())
    return shape[depth_axis] if len(shape) == 4 else depth


def out_arg(how, expect_shape, expect_dtype):
    """The out= array number `how` (0-7) stands for: right, or of the wrong
    dtype, shape, writeability or memory layout."""
    shape = expect_shape
    known = shape is not None and all(0 <= v <= 64 for v in shape)
    if not known:
        shape = (1, 1, 1, 1)
    if how <= 3:
        out, valid = np.full(shape, 7, expect_dtype), True
    elif how == 4:
        wrong = np.float64 if expect_dtype != np.float64 else np.float32
        out, valid = np.zeros(shape, wrong), False
    elif how == 5:
        out, valid = (
            np.zeros(tuple(shape[:-1]) + (shape[-1] + 1,), expect_dtype),
            False,
        )
    elif how == 6:
        out, valid = np.zeros(shape, expect_dtype), False
        out.flags.writeable = False
    else:
        out = np.zeros(tuple(shape[:-1]) + (2 * shape[-1],), expect_dtype)[..., ::2]
        valid = None if shape[-1] <= 1 or 0 in shape else False
    if how == 4 and expect_dtype is None:
        valid = None  # no dtype is known to be the wrong one
    elif not known or expect_dtype is None:
        # Sure only of what is wrong whatever the dtype (unknown stays unknown).
        valid = False if valid is False else None
    return Arg(out, valid)


def decode(data):
    """The call that `data` stands for (deterministic)."""
    src = Source(data)
    src.strict = src.chance(2)
    op = src.pick(OPS)
    if op in ROI_OPS:
        return decode_roi(src, op)
    raw = op.startswith("raw_")
    batch = src.pick([1, 2, 3, 0, 1, 2])
    height, width = src.pick(SMALL_DIMS), src.pick(SMALL_DIMS)
    depth = src.pick([1, 2, 3, 0, 4, 16])
    num_boxes = src.pick([1, 2, 3, 0, 5, 8])
    crop_h, crop_w = src.pick([1, 2, 3, 4, 7]), src.pick([1, 2, 3, 4, 7])
    kwargs, checks, args = {}, {}, {}

    def add(name, arg):
        kwargs[name] = arg.value
        checks[name] = arg.valid
        args[name] = arg
        return arg

    if op.endswith("grad_image") or op.endswith("grad_boxes"):
        add("grads", real_array(src, (num_boxes, crop_h, crop_w, depth), FLOATS))
    if op.endswith("forward") or op.endswith("grad_boxes"):
        image = add("image", real_array(src, (batch, height, width, depth), FLOATS))
        if image.valid:
            dtype = np.asarray(image.value).dtype  # a list gets NumPy's choice
            if dtype.kind == "u" and dtype.itemsize > 2 or dtype.itemsize > 8:
                checks["image"] = False  # uint32/uint64/longdouble: not TensorFlow's

    # boxes: mostly well-formed, with coordinates from a menu that holds NaN,
    # infinities and values that overflow float32.
    if src.chance(4):
        add("boxes", real_array(src, (num_boxes, 4), FLOATS, finite=True))
    else:
        values = box_values(src, num_boxes)
        with np.errstate(all="ignore"):
            finite = bool(np.isfinite(values.astype(np.float32)).all())
        dtype = src.pick([np.float32, np.float64, np.float32])
        add(
            "boxes",
            Arg(_layout(src, values.astype(dtype)), finite, shape=(num_boxes, 4)),
        )

    # box_ind: its range is judged below, once the batch is known.
    if src.chance(5):
        add("box_ind", real_array(src, (num_boxes,), FLOATS, ints=True))
    else:
        top = batch if not src.chance(6) else batch + src.pick([1, 2**40])
        vals = [
            src.below(max(top, 1)) if not src.chance(10) else -1
            for _ in range(num_boxes)
        ]
        value = (
            np.array(vals, src.pick([np.int32, np.int64])) if src.chance(2) else vals
        )
        add(
            "box_ind",
            Arg(value, True, shape=(num_boxes,), values=np.array(vals, np.int64)),
        )

    effective_batch = None
    if op.endswith("grad_image"):
        size = add(
            "image_size",
            size_arg(
                src, (batch, height, width, depth), positive=(1, 2), nonneg=(0, 3)
            ),
        )
        if size.valid:
            effective_batch = int(size.info["ints"][0])
    else:
        image = args["image"]
        if image.valid and image.info.get("shape"):
            effective_batch = image.info["shape"][0]
    if op.endswith("forward"):
        add(
            "crop_size",
            size_arg(
                src,
                (crop_h, crop_w),
                positive=(0, 1),
                nonneg=(),
                square=not op.startswith("raw"),
            ),
        )

    box_ind = args["box_ind"]
    if box_ind.valid and "values" in box_ind.info:
        vals = box_ind.info["values"].astype(np.int64)
        if vals.size and effective_batch is None:
            checks["box_ind"] = None
        elif vals.size:
            checks["box_ind"] = bool(
                (vals >= 0).all() and (vals < effective_batch).all()
            )

    expect_dtype = np.dtype(np.float32)
    dtype_name = {"grad_image": "dtype", "raw_grad_image": "T"}.get(op)
    if dtype_name and (dtype_name == "dtype" or src.strict or not src.chance(20)):
        dtype = src.choose(DTYPE_CHOICES, N_VALID_DTYPES)
        add(dtype_name, Arg(dtype, _dtype_valid(dtype, raw)))
        if checks[dtype_name]:
            resolved = (
                VALID_DTYPES.get(dtype, dtype) if isinstance(dtype, str) else dtype
            )
            if isinstance(resolved, str) and resolved == "bfloat16":
                resolved = BFLOAT16
            expect_dtype = np.dtype(resolved).newbyteorder("=")
    elif dtype_name and not src.strict:
        checks["T"] = False  # left out: a TypeError naming T
    elif dtype_name:
        kwargs["T"], checks["T"] = np.float32, True

    if not src.chance(3):
        method = src.choose(METHOD_CHOICES, 1 if op.endswith("grad_boxes") else 5)
        allowed = (
            ("bilinear",) if op.endswith("grad_boxes") else ("bilinear", "nearest")
        )
        add("method", Arg(method, _method_valid(method, allowed)))
    if op.endswith("forward") and src.chance(2):
        value = src.choose(EXTRAP_CHOICES, 9)
        add("extrapolation_value", Arg(value, _real_scalar_valid(value)))
    if raw:
        if src.chance(4):
            kwargs["name"] = src.pick([None, "op", 3])  # accepted and ignored
    else:
        if src.chance(2):
            value = src.choose(THREAD_CHOICES, 8)
            add("num_threads", Arg(value, _threads_valid(value)))
        if src.chance(3):
            value = src.choose(FLUSH_CHOICES, 6)
            add("flush_denormals", Arg(value, _flag_valid(value)))
    if not src.strict and src.chance(25):  # a keyword the op does not have
        unknown = ["bogus"]
        unknown += ["out", "num_threads", "dtype"] if raw else ["T"]
        if op == "grad_boxes":
            unknown += ["out", "extrapolation_value"]
        add(src.pick(unknown), Arg(1, False))
    out_how = None
    if op in ("grad_image", "forward") and src.chance(4):
        out_how = src.below(8)  # the out= array, made below in the layout

    # The layout is the last draw (see VALID_LAYOUTS).  Everything above was
    # drawn in NHWC; from here on the arrays, image_size and the judgments
    # that depend on axes are in the call's layout.  An invalid data_format
    # in about one of five inputs that are not strict: the functions check
    # it before most other arguments, which still get their turn most of
    # the time.
    i = src.below(len(VALID_LAYOUTS) + (0 if src.strict else 2))
    valid = i < len(VALID_LAYOUTS)
    format_value, layout = VALID_LAYOUTS[i] if valid else src.pick(INVALID_LAYOUTS)
    if raw:
        # The raw ops are NHWC only, as TensorFlow's, and have no data_format
        # keyword: passing one, even "NHWC", is an unknown keyword.
        layout = "NHWC"
        if not src.strict and type(format_value) is str and format_value == "NHWC":
            add("data_format", Arg(format_value, False))
    elif format_value is not OMITTED:
        add("data_format", Arg(format_value, valid))
    if layout == "NCHW":
        # New values only: the judgments made so far do not depend on axes.
        moves = {"grads": _nchw_array, "image": _nchw_array, "image_size": _nchw_size}
        for name, move in moves.items():
            if name in args:
                args[name] = move(args[name])
                kwargs[name] = args[name].value
    depth_axis = 1 if layout == "NCHW" else 3

    expect_shape = None
    if op.endswith("grad_image"):
        size = args["image_size"]
        if size.valid:
            ints = [int(v) for v in size.info["ints"]]
            expect_shape = tuple(ints)
            if ints[depth_axis] != depth:
                # The depth must be grads' depth.  A mangled grads may have
                # taken another depth too: judge against the grads passed.
                checks["image_size"] = _depth_mismatch(
                    args["grads"], ints[depth_axis], depth_axis
                )
    if op.endswith("forward"):
        crop = args["crop_size"]
        if crop.valid:
            crop_hw = [int(v) for v in crop.info["ints"]]
            crops_depth = _image_depth(args["image"], depth, depth_axis)
            if layout == "NCHW":
                expect_shape = (num_boxes, crops_depth, *crop_hw)
            else:
                expect_shape = (num_boxes, *crop_hw, crops_depth)
    if op.endswith("grad_boxes"):
        expect_shape = (num_boxes, 4)
    if expect_shape is not None and (
        checks.get("image_size") or checks.get("crop_size")
    ):
        # Valid dimensions, but an output no machine can hold: the op must
        # refuse it (ValueError or MemoryError), never try.
        itemsize = 4 if expect_dtype == np.float16 else expect_dtype.itemsize
        if _output_refused(expect_shape, itemsize):
            size_name = "image_size" if "image_size" in checks else "crop_size"
            # The forward op's output also takes its depth from the image and
            # its length from the boxes: if either may have another shape,
            # the output may be empty after all.
            sure = size_name == "image_size" or (
                checks.get("image") is True and checks.get("boxes") is True
            )
            checks[size_name] = False if sure else None

    if raw:
        # raw_ops convert, as TensorFlow does, some forms the NumPy API
        # refuses (docs/semantics.md, "The raw_ops drop-ins"): booleans,
        # object arrays, float arrays as integer arguments, None as method or
        # extrapolation_value, a Python bool as extrapolation_value.  Either
        # outcome is allowed for those; a rejection must still name them.
        for name in ("grads", "boxes", "box_ind", "image_size", "crop_size"):
            value = kwargs.get(name)
            if checks.get(name) is not False:
                continue
            if isinstance(value, np.ndarray) and value.dtype.kind in "bOf":
                checks[name] = None
            elif isinstance(value, (list, tuple)):
                try:
                    if np.asarray(value).dtype.kind == "b":
                        checks[name] = None
                except (ValueError, TypeError, OverflowError):
                    pass
        for name in ("method", "extrapolation_value"):
            if name in kwargs and (kwargs[name] is None or kwargs[name] is True):
                checks[name] = None
        # Sizes are int32 there: one beyond int32 is refused, not wrapped.
        for name in ("image_size", "crop_size"):
            ints = args[name].info.get("ints") if name in args else None
            if ints and any(not -(2**31) <= int(v) < 2**31 for v in ints):
                checks[name] = False

    out = None
    if out_how is not None:
        out = add("out", out_arg(out_how, expect_shape, expect_dtype)).value
    return Call(op, _FUNCS[op], kwargs, checks, expect_shape, expect_dtype, out, layout)


_FUNCS = {
    "grad_image": cropgrad.crop_and_resize_grad_image,
    "forward": cropgrad.crop_and_resize,
    "grad_boxes": cropgrad.crop_and_resize_grad_boxes,
    "raw_grad_image": raw_ops.CropAndResizeGradImage,
    "raw_forward": raw_ops.CropAndResize,
    "raw_grad_boxes": raw_ops.CropAndResizeGradBoxes,
    "roi_forward": cropgrad.roi_align,
    "roi_grad_image": cropgrad.roi_align_grad_image,
    "roi_grad_boxes": cropgrad.roi_align_grad_boxes,
    "roi_jvp_boxes": cropgrad.roi_align_jvp_boxes,
}


# --------------------------------------------------------------------------
# RoIAlign calls
#
# The same kinds of argument as above, with RoIAlign's: boxes in pixels,
# output_size (an int is a square), spatial_scale, sampling_ratio, aligned,
# dtype (None is the default), boxes_tangent, and NCHW the default layout.
# Whether the boxes are valid depends on the arithmetic type (a float64
# image or gradient: float64) and, with the adaptive grid, on the options:
# judged once everything is drawn.

# RoIAlign's layouts: left out, data_format is "NCHW".
ROI_LAYOUTS = [
    (OMITTED, "NCHW"),
    ("NHWC", "NHWC"),
    ("NCHW", "NCHW"),
    ("NHWC", "NHWC"),
    (np.str_("NHWC"), "NHWC"),
    (_EqualsAll("NCHW"), "NCHW"),
    (_EqualsAll("NHWC"), "NHWC"),
]
SCALE_CHOICES = [
    1.0,
    0.5,
    0.25,
    2,
    0.125,
    np.float32(1 / 3),
    np.float64(0.0625),
    np.array(0.5),
    -1.0,
    0.0,
    1e300,
    float("nan"),
    float("inf"),
    -float("inf"),
    None,
    "1",
    True,
    [0.5],
    1j,
    2**2000,
]
N_VALID_SCALES = 11
# 4096 is valid, but 4096 x 4096 samples per bin is minutes of work.
RATIO_CHOICES = [
    -1,
    0,
    2,
    1,
    3,
    -1,
    np.int32(2),
    17,
    -(2**31),
    4097,
    2**31,
    2**70,
    None,
    2.0,
    True,
    "2",
    [2],
]
N_VALID_RATIOS = 9
ALIGNED_CHOICES = [False, True, np.bool_(True), 0, 1, None, "yes", 2, 0.5, [True]]
N_VALID_ALIGNED = 5
# At most this many samples (boxes x bins x samples per bin) for the
# reference's loops to be compared with, a few milliseconds.
ROI_REFERENCE_SAMPLES = 1000


def _scale_valid(value):
    if not _real_scalar_valid(value):
        return False
    return bool(np.isfinite(float(np.asarray(value)[()])))


def _ratio_valid(value):
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        return False
    return bool(-(2**31) <= value <= 4096)


def _square_or_pair(arg):
    """output_size: a size_arg pair, or an int for a square (valid if > 0)."""
    value = arg.value
    if isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_)):
        n = int(value)
        return Arg(value, 0 < n <= MAXSIZE, ints=[n, n])
    return arg


def roi_box_values(src, n):
    """``[x1, y1, x2, y2]`` per box in pixels, mostly a few pixels around a
    small feature map, some from the FLOATS menu (huge, NaN, infinite)."""
    rows = []
    for _ in range(n):
        rows.append(
            [
                src.choose(FLOATS, FINITE_FLOATS)
                if src.chance(4)
                else (src.u32() % 2001 - 500) / 100
                for _ in range(4)
            ]
        )
    return np.array(rows, np.float64).reshape(n, 4)


def roi_grid(lo, hi, pooled, scale, ratio, aligned, T):
    """Samples per bin along one axis, as the gate counts them
    (docs/semantics.md, "Where a sample falls"): the ratio, else
    ``ceil(bin)`` in `T`, 0 for none, capped just past the bound."""
    if ratio > 0:
        return ratio
    with np.errstate(all="ignore"):
        s = T(scale)
        off = T(0.5) if aligned else T(0)
        start = T(T(T(lo) * s) - off)
        end = T(T(T(hi) * s) - off)
        length = T(end - start)
        if not aligned and length < 1:
            length = T(1)
        bin_size = T(length / T(pooled))
    if not np.isfinite(bin_size):
        return 0
    limit = reference.roi_align.MAX_SAMPLES_PER_BIN
    return min(max(math.ceil(float(bin_size)), 0), limit + 1)


def _roi_boxes_valid(values, T, options, pooled):
    """(valid, samples) of boxes `values` in arithmetic `T`: finite, and no
    bin past the sample bound; `options` (scale, ratio, aligned) and
    `pooled` (out_h, out_w) are None when not valid (the bound then
    unjudged, the samples unknown)."""
    with np.errstate(all="ignore"):
        boxes = np.asarray(values).astype(T)
    if not np.isfinite(boxes).all():
        return False, None
    if options is None or pooled is None:
        return True, None
    scale, ratio, aligned = options
    (out_h, out_w), limit = pooled, reference.roi_align.MAX_SAMPLES_PER_BIN
    samples = 0
    for x1, y1, x2, y2 in boxes:
        rows = roi_grid(y1, y2, out_h, scale, ratio, aligned, T)
        cols = roi_grid(x1, x2, out_w, scale, ratio, aligned, T)
        if rows > limit or cols > limit or rows * cols > limit:
            return False, None
        samples += out_h * out_w * rows * cols
    return True, samples


def _native(dtype):
    return np.dtype(dtype).newbyteorder("=")


def decode_roi(src, op):
    """The RoIAlign call `src` stands for (its op already drawn)."""
    batch = src.pick([1, 2, 3, 0, 1, 2])
    height, width = src.pick(SMALL_DIMS), src.pick(SMALL_DIMS)
    depth = src.pick([1, 2, 3, 0, 4, 16])
    num_boxes = src.pick([1, 2, 3, 0, 5, 8])
    out_h, out_w = src.pick([1, 2, 3, 4, 7]), src.pick([1, 2, 3, 4, 7])
    kwargs, checks, args = {}, {}, {}

    def add(name, arg):
        kwargs[name] = arg.value
        checks[name] = arg.valid
        args[name] = arg
        return arg

    # Arrays drawn in NHWC, moved to NCHW below (as in `decode`).
    if op in ("roi_grad_image", "roi_grad_boxes"):
        add("grads", real_array(src, (num_boxes, out_h, out_w, depth), FLOATS))
    if op != "roi_grad_image":
        image = add("image", real_array(src, (batch, height, width, depth), FLOATS))
        if image.valid:
            dtype = np.asarray(image.value).dtype
            if dtype.kind == "u" and dtype.itemsize > 2 or dtype.itemsize > 8:
                checks["image"] = False  # uint32, uint64, longdouble
    if src.chance(4):
        add("boxes", real_array(src, (num_boxes, 4), FLOATS))
    else:
        dtype = src.pick([np.float32, np.float64, np.float32])
        with np.errstate(all="ignore"):
            values = roi_box_values(src, num_boxes).astype(dtype)
        add(
            "boxes",
            Arg(_layout(src, values), True, shape=(num_boxes, 4), values=values),
        )
    if src.chance(5):
        add("box_ind", real_array(src, (num_boxes,), FLOATS, ints=True))
    else:
        top = batch if not src.chance(6) else batch + src.pick([1, 2**40])
        vals = [
            src.below(max(top, 1)) if not src.chance(10) else -1
            for _ in range(num_boxes)
        ]
        value = (
            np.array(vals, src.pick([np.int32, np.int64])) if src.chance(2) else vals
        )
        add(
            "box_ind",
            Arg(value, True, shape=(num_boxes,), values=np.array(vals, np.int64)),
        )

    effective_batch = None
    if op == "roi_grad_image":
        size = add(
            "image_size",
            size_arg(
                src, (batch, height, width, depth), positive=(1, 2), nonneg=(0, 3)
            ),
        )
        if size.valid:
            effective_batch = int(size.info["ints"][0])
    elif args["image"].valid and args["image"].info.get("shape"):
        effective_batch = args["image"].info["shape"][0]
    box_ind = args["box_ind"]
    if box_ind.valid and "values" in box_ind.info:
        vals = box_ind.info["values"].astype(np.int64)
        if vals.size and effective_batch is None:
            checks["box_ind"] = None
        elif vals.size:
            checks["box_ind"] = bool(
                (vals >= 0).all() and (vals < effective_batch).all()
            )
    if op in ("roi_forward", "roi_jvp_boxes"):
        pair = size_arg(src, (out_h, out_w), positive=(0, 1), nonneg=())
        if src.chance(4):  # an int: a square (not a bool)
            pair = Arg(
                src.choose([out_h, np.int64(out_w), 0, -2, 2**70, True], 2), False
            )
        add("output_size", _square_or_pair(pair))
    if op == "roi_jvp_boxes":
        add("boxes_tangent", real_array(src, (num_boxes, 4), FLOATS))

    if not src.chance(4):
        value = src.choose(SCALE_CHOICES, N_VALID_SCALES)
        add("spatial_scale", Arg(value, _scale_valid(value)))
    if not src.chance(4):
        value = src.choose(RATIO_CHOICES, N_VALID_RATIOS)
        add("sampling_ratio", Arg(value, _ratio_valid(value)))
    if src.chance(2):
        value = src.choose(ALIGNED_CHOICES, N_VALID_ALIGNED)
        add("aligned", Arg(value, _flag_valid(value)))
    if op != "roi_grad_boxes" and src.chance(2):
        value = src.choose(DTYPE_CHOICES, N_VALID_DTYPES)
        add("dtype", Arg(value, value is None or _dtype_valid(value, False)))
    if src.chance(2):
        value = src.choose(THREAD_CHOICES, 8)
        add("num_threads", Arg(value, _threads_valid(value)))
    if src.chance(3):
        value = src.choose(FLUSH_CHOICES, 6)
        add("flush_denormals", Arg(value, _flag_valid(value)))
    # A keyword the op does not have, in about one of 25 inputs that are not
    # strict (not in every input that runs out of bytes).
    if not src.strict and src.below(25) == 1:
        unknown = ["bogus", "method", "extrapolation_value", "T", "crop_size"]
        add(
            src.pick(unknown + (["dtype"] if op == "roi_grad_boxes" else [])),
            Arg(1, False),
        )
    out_how = src.below(8) if src.chance(4) else None

    i = src.below(len(ROI_LAYOUTS) + (0 if src.strict else 2))
    valid = i < len(ROI_LAYOUTS)
    format_value, layout = ROI_LAYOUTS[i] if valid else src.pick(INVALID_LAYOUTS)
    if format_value is not OMITTED:
        add("data_format", Arg(format_value, valid))
    if layout == "NCHW":
        moves = {"grads": _nchw_array, "image": _nchw_array, "image_size": _nchw_size}
        for name, move in moves.items():
            if name in args:
                args[name] = move(args[name])
                kwargs[name] = args[name].value
    pooled = (out_h, out_w)
    return _judge_roi(
        op, layout, kwargs, checks, args, (num_boxes, depth, pooled), out_how
    )


def _roi_arithmetic(op, args):
    """The arithmetic type the call's data gives (float64 for float64, float32
    for every other dtype), or None when that data may not be valid."""
    data = args["grads" if op == "roi_grad_image" else "image"]
    if data.valid is not True:
        return None
    dtype = _native(np.asarray(data.value).dtype)
    return np.dtype(np.float64 if dtype == np.float64 else np.float32)


def _judge_roi(op, layout, kwargs, checks, args, sizes, out_how):
    """The Call of a decoded RoIAlign call: the validity of what depends on
    several arguments, the result's shape and dtype, the out= array."""
    num_boxes, depth, pooled = sizes
    arith = _roi_arithmetic(op, args)
    if op == "roi_grad_image" and args["grads"].valid is True:
        # A float wider than float64 has no arithmetic type: refused.
        grads_dtype = np.asarray(args["grads"].value).dtype
        if grads_dtype.kind == "f" and grads_dtype.itemsize > 8:
            checks["grads"] = False

    # The result's dtype: dtype=, else the data's float dtype, else float32
    # (the boxes gradient: the arithmetic type).
    expect_dtype = None
    if op == "roi_grad_boxes":
        expect_dtype = arith
    elif kwargs.get("dtype") is not None and checks["dtype"]:
        dtype = kwargs["dtype"]
        resolved = VALID_DTYPES.get(dtype, dtype) if isinstance(dtype, str) else dtype
        if isinstance(resolved, str) and resolved == "bfloat16":
            resolved = BFLOAT16
        expect_dtype = _native(resolved)
        if expect_dtype.itemsize == 2 and arith != np.float32:
            # float16 and bfloat16 round float32 arithmetic only.
            checks["dtype"] = False if arith == np.float64 else None
    elif arith is not None:
        data = args["grads" if op == "roi_grad_image" else "image"]
        dtype = _native(np.asarray(data.value).dtype)
        if dtype.kind != "f" or dtype.itemsize > 8:
            dtype = np.dtype(np.float32)
        expect_dtype = dtype

    depth_axis = 1 if layout == "NCHW" else 3
    expect_shape = None
    size_name = None
    if op == "roi_grad_image" and checks["image_size"]:
        expect_shape = tuple(int(v) for v in args["image_size"].info["ints"])
        size_name = "image_size"
        if expect_shape[depth_axis] != depth:
            checks["image_size"] = _depth_mismatch(
                args["grads"], expect_shape[depth_axis], depth_axis
            )
    if op in ("roi_forward", "roi_jvp_boxes") and checks["output_size"]:
        out_h, out_w = (int(v) for v in args["output_size"].info["ints"])
        channels = _image_depth(args["image"], depth, depth_axis)
        if layout == "NCHW":
            expect_shape = (num_boxes, channels, out_h, out_w)
        else:
            expect_shape = (num_boxes, out_h, out_w, channels)
        size_name = "output_size"
        pooled = (out_h, out_w)
    if op == "roi_grad_boxes":
        expect_shape = (num_boxes, 4)
    if size_name and checks[size_name] and expect_dtype is not None:
        # The sums are kept in the arithmetic type's width at least.
        itemsize = max(expect_dtype.itemsize, 4 if arith is None else arith.itemsize)
        if _output_refused(expect_shape, itemsize):
            sure = size_name == "image_size" or (
                checks.get("image") is True and checks.get("boxes") is True
            )
            checks[size_name] = False if sure else None

    # The boxes: finite in the arithmetic type, and (with valid options) no
    # bin past the sample bound.  Either arithmetic when it is not known.
    samples = None
    boxes = args["boxes"]
    if boxes.valid and "values" in boxes.info:
        options = None
        if all(checks.get(k, True) for k in ("spatial_scale", "sampling_ratio")):
            scale = kwargs.get("spatial_scale", 1.0)
            options = (
                float(np.asarray(scale)[()]),
                int(kwargs.get("sampling_ratio", -1)),
                bool(kwargs.get("aligned", False))
                if checks.get("aligned", True)
                else False,
            )
        if size_name == "output_size" and not checks[size_name]:
            pooled = None
        judged = [
            _roi_boxes_valid(boxes.info["values"], T, options, pooled)
            for T in ([arith.type] if arith is not None else [np.float32, np.float64])
        ]
        verdicts = {v for v, _ in judged}
        checks["boxes"] = verdicts.pop() if len(verdicts) == 1 else None
        if arith is not None:
            samples = judged[0][1]

    out = None
    if out_how is not None:
        arg = out_arg(out_how, expect_shape, expect_dtype)
        out, kwargs["out"], checks["out"] = arg.value, arg.value, arg.valid
    return Call(
        op,
        _FUNCS[op],
        kwargs,
        checks,
        expect_shape,
        expect_dtype,
        out,
        layout,
        samples=samples,
    )


# --------------------------------------------------------------------------
# The oracle


class Finding(Exception):
    """The library did something the oracle does not allow."""


def _bits(arr):
    return np.ascontiguousarray(arr).tobytes()


def _differing(actual, expected):
    """Where the bits differ, NaN matching any NaN (payloads may differ)."""
    if actual.shape != expected.shape or actual.dtype != expected.dtype:
        return np.ones(actual.shape, bool)
    bits = f"u{actual.itemsize}"
    same = actual.view(bits) == expected.view(bits)
    return ~(same | (np.isnan(actual) & np.isnan(expected)))


def _array(value):
    # As the library reads it: NumPy's own conversion of lists first.
    return np.asarray(value)


def expected_result(call):
    """The NumPy reference's result of a valid call (cropgrad._reference).

    Exact arithmetic in the serial order, flush-to-zero as the call asks
    (the raw ops always flush); float16 output is the float32 result rounded
    once.  The reference computes in NHWC: an NCHW call's arrays and
    image_size are moved to NHWC for it, and its image or crops back.
    """
    if call.op in ROI_OPS:
        return expected_roi(call)
    kw, op = call.kwargs, call.op
    flush = True if op.startswith("raw_") else bool(kw.get("flush_denormals", False))
    method = str(kw.get("method", "bilinear"))
    common = dict(method=method, exact=True, flush=flush)
    boxes, box_ind = _array(kw["boxes"]), _array(kw["box_ind"])
    nchw = call.layout == "NCHW"
    nhwc_order = (0, 2, 3, 1)  # NHWC's axes as positions of NCHW's

    def nhwc(name):
        arr = _array(kw[name])
        return arr.transpose(nhwc_order) if nchw else arr

    def in_layout(result):
        return np.ascontiguousarray(result.transpose(NCHW_ORDER)) if nchw else result

    with np.errstate(all="ignore"):
        if op.endswith("grad_image"):
            dtype = call.expect_dtype
            size = [int(v) for v in _array(kw["image_size"]).tolist()]
            if nchw:
                size = [size[i] for i in nhwc_order]
            # float16 and bfloat16: the float32 result rounded once.
            acc = np.float32 if dtype.itemsize == 2 else dtype
            out = reference.grad_image(
                nhwc("grads"), boxes, box_ind, size, dtype=acc, **common
            )
            return in_layout(out.astype(dtype))
        if op.endswith("forward"):
            fill = kw.get("extrapolation_value", 0.0)
            if isinstance(fill, np.ndarray):
                fill = fill[()]
            crop = np.broadcast_to(_array(kw["crop_size"]), (2,)).tolist()
            crops = reference.crop_and_resize(
                nhwc("image"),
                boxes,
                box_ind,
                crop,
                extrapolation_value=np.float32(fill),
                **common,
            )
            return in_layout(crops)
        return reference.grad_boxes(
            nhwc("grads"), nhwc("image"), boxes, box_ind, **common
        )


def expected_roi(call):
    """The NumPy reference's result of a valid RoIAlign call
    (cropgrad._reference.roi_align, exact arithmetic, IEEE: compared only
    without flush_denormals), rounded once to the call's dtype.  The
    reference computes in NCHW; the data are read in native byte order, as
    the library reads an image, and the boxes and tangent converted to the
    arithmetic type first, as the library converts them."""
    kw, op = call.kwargs, call.op
    ref = reference.roi_align
    nchw = call.layout == "NCHW"
    options = dict(
        spatial_scale=float(np.asarray(kw.get("spatial_scale", 1.0))[()]),
        sampling_ratio=int(kw.get("sampling_ratio", -1)),
        aligned=bool(kw.get("aligned", False)),
        exact=True,
    )

    def array(name):
        arr = _array(kw[name])
        arr = arr.astype(_native(arr.dtype))
        return arr if nchw or arr.ndim != 4 else arr.transpose(0, 3, 1, 2)

    def in_layout(result):
        if not nchw:
            result = np.ascontiguousarray(result.transpose(0, 2, 3, 1))
        return result.astype(call.expect_dtype)

    T = ref.arithmetic_type(array("grads" if op == "roi_grad_image" else "image").dtype)
    with np.errstate(all="ignore"):
        boxes = _array(kw["boxes"]).astype(T)
        box_ind = _array(kw["box_ind"])
        if op == "roi_grad_image":
            size = [int(v) for v in _array(kw["image_size"]).tolist()]
            if not nchw:
                size = [size[i] for i in NCHW_ORDER]
            return in_layout(
                ref.roi_align_grad_image(
                    array("grads"), boxes, box_ind, size, **options
                )
            )
        if op == "roi_grad_boxes":
            return ref.roi_align_grad_boxes(
                array("grads"), array("image"), boxes, box_ind, **options
            )
        output_size = [int(v) for v in np.broadcast_to(_array(kw["output_size"]), 2)]
        if op == "roi_forward":
            return in_layout(
                ref.roi_align(array("image"), boxes, box_ind, output_size, **options)
            )
        tangent = _array(kw["boxes_tangent"]).astype(T)
        return in_layout(
            ref.roi_align_jvp_boxes(
                array("image"), boxes, box_ind, tangent, output_size, **options
            )
        )


def _compare_with_reference(call, result):
    """Whether the reference has this call's result to give in a few
    milliseconds (crop_and_resize: a small output and grads; RoIAlign: few
    samples, IEEE arithmetic)."""
    if result.size == 0:
        return False
    if call.op not in ROI_OPS:
        work = np.size(call.kwargs.get("grads", result))
        return result.size <= 1 << 16 and work <= 1 << 14
    return (
        call.samples is not None
        and call.samples <= ROI_REFERENCE_SAMPLES
        and not call.kwargs.get("flush_denormals", False)
    )


def execute(data):
    """Run the call `data` decodes to; return an outcome label or raise Finding."""
    call = decode(data)
    valid = call.valid
    try:
        result = call.func(**call.kwargs)
    except ALLOWED as exc:
        message = str(exc)
        if not message.strip():
            raise Finding(
                f"{type(exc).__name__} with an empty message: {call.describe()}"
            )
        if valid is True and not isinstance(exc, MemoryError):
            raise Finding(
                f"valid call rejected: {type(exc).__name__}: {message}\n"
                f"  {call.describe()}"
            )
        if valid is False:
            # The message names an argument that is broken (or may be: the
            # check that fires first may be one of unknown outcome), or the
            # output a size argument describes.
            suspects = [k for k, v in call.checks.items() if v is not True]
            if isinstance(exc, MemoryError) or {
                "image_size",
                "crop_size",
                "output_size",
            } & set(suspects):
                suspects.append("output")
            if set(suspects) & set(SHAPED):
                # A shape that may not match: the mismatch may be reported on
                # the argument it is compared with.
                suspects += SHAPED
            if not any(name in message for name in suspects):
                raise Finding(
                    f"{type(exc).__name__} message names none of {suspects}: "
                    f"{message!r}\n  {call.describe()}"
                )
        return f"rejected:{type(exc).__name__}"
    except Exception as exc:  # noqa: BLE001 - every other type is a finding
        raise Finding(
            f"{type(exc).__name__} is not a documented exception: {exc}\n"
            f"  {call.describe()}"
        ) from exc
    if valid is False:
        raise Finding(f"invalid call accepted: {call.describe()}")
    if not isinstance(result, np.ndarray):
        raise Finding(f"result is a {type(result).__name__}: {call.describe()}")
    if call.expect_shape is not None and valid and result.shape != call.expect_shape:
        raise Finding(
            f"shape {result.shape}, expected {call.expect_shape}: {call.describe()}"
        )
    if valid and result.dtype != call.expect_dtype:
        raise Finding(
            f"dtype {result.dtype}, expected {call.expect_dtype}: {call.describe()}"
        )
    if call.out is not None and "out" in call.kwargs and result is not call.out:
        raise Finding(f"out= given but another array returned: {call.describe()}")
    # The NumPy reference's bits (NaN for NaN), where it has work to check
    # that it can do in a few milliseconds.
    if valid and _compare_with_reference(call, result):
        expected = expected_result(call)
        differ = _differing(result, expected)
        if differ.any():
            first = tuple(np.argwhere(differ)[0])
            raise Finding(
                f"{int(differ.sum())} elements differ from the NumPy reference, "
                f"first at {first}: {result[first]!r} != {expected[first]!r}: "
                f"{call.describe()}"
            )
    # The same bits on one thread (public ops only: raw ops have no num_threads).
    if not call.op.startswith("raw_") and result.size <= 1 << 16:
        kwargs = dict(call.kwargs, num_threads=1)
        if "out" in kwargs:
            kwargs["out"] = None
        again = call.func(**kwargs)
        if _bits(again) != _bits(result):
            raise Finding(f"different bits on one thread: {call.describe()}")
    return "ok"


# --------------------------------------------------------------------------
# Driving it


def _mutate(rng, data):
    data = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        what = rng.randrange(4)
        if what == 0 and data:
            data[rng.randrange(len(data))] = rng.randrange(256)
        elif what == 1:
            data.insert(rng.randrange(len(data) + 1), rng.randrange(256))
        elif what == 2 and data:
            del data[rng.randrange(len(data))]
        elif data:
            i = rng.randrange(len(data))
            data[i] ^= 1 << rng.randrange(8)
    return bytes(data)


class CrashFile:
    """Holds the input being executed, so a crash leaves it behind."""

    def __init__(self, path):
        self.fd = (
            os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644) if path else None
        )
        self.path = path

    def write(self, data):
        if self.fd is not None:
            os.ftruncate(self.fd, 0)
            os.pwrite(self.fd, data, 0)

    def close(self):
        if self.fd is not None:
            os.close(self.fd)
            os.unlink(self.path)


def _load_corpus(path):
    if not path or not os.path.isdir(path):
        return []
    corpus = []
    for name in sorted(os.listdir(path)):
        full = os.path.join(path, name)
        if (
            os.path.isfile(full)
            and not name.startswith(".")
            and not name.endswith(".md")
        ):
            with open(full, "rb") as f:
                corpus.append(f.read())
    return corpus


def fuzz(seconds, seed, corpus, crash, save_dir, max_failures=20):
    rng = random.Random(seed)
    stats = {
        "seed": seed,
        "executions": 0,
        "ok": 0,
        "failures": 0,
        "outcomes": {},
        "ops": {},
        "nchw": {},  # the outcomes of the calls with NCHW arrays
    }
    failures = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if corpus and rng.random() < 0.3:
            data = _mutate(rng, rng.choice(corpus))
        else:
            data = bytes(rng.randrange(256) for _ in range(rng.randint(8, 400)))
        crash.write(data)
        stats["executions"] += 1
        try:
            outcome = execute(data)
        except Finding as exc:
            stats["failures"] += 1
            failures.append((data, str(exc)))
            if save_dir:
                os.makedirs(save_dir, exist_ok=True)
                with open(
                    os.path.join(save_dir, f"failure-{len(failures)}.bin"), "wb"
                ) as f:
                    f.write(data)
            if len(failures) >= max_failures:
                break
            continue
        stats["outcomes"][outcome] = stats["outcomes"].get(outcome, 0) + 1
        call = decode(data)
        stats["ops"][call.op] = stats["ops"].get(call.op, 0) + 1
        if call.layout == "NCHW":
            stats["nchw"][outcome] = stats["nchw"].get(outcome, 0) + 1
        if outcome == "ok":
            stats["ok"] += 1
    return stats, failures


def _atheris(argv):
    import atheris  # optional: coverage-guided fuzzing of the Python layer

    def one(data):
        try:
            execute(bytes(data))
        except Finding as exc:
            raise AssertionError(str(exc)) from None

    atheris.instrument_all()
    atheris.Setup([sys.argv[0], *argv], one)
    atheris.Fuzz()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--corpus", help="directory of inputs to start from")
    parser.add_argument("--crash-file", help="where the running input is kept")
    parser.add_argument("--save-failures", help="directory for inputs that fail")
    parser.add_argument("--stats", help="write the run's figures here as JSON")
    parser.add_argument("--run", nargs="+", metavar="FILE", help="replay these inputs")
    parser.add_argument(
        "--describe",
        nargs="+",
        metavar="FILE",
        help="print the calls these inputs decode to",
    )
    parser.add_argument(
        "--atheris",
        action="store_true",
        help="fuzz with atheris (remaining arguments go to libFuzzer)",
    )
    parser.add_argument(
        "--self-test-crash",
        action="store_true",
        help="crash on purpose (tests that a crash is reported)",
    )
    args, rest = parser.parse_known_args(argv)
    if args.self_test_crash:
        crash = CrashFile(args.crash_file)
        crash.write(b"self-test crash input")
        import ctypes

        ctypes.string_at(0)  # reads address 0: SIGSEGV
    warnings.simplefilter("ignore")  # overflowing casts warn; not what is tested
    if args.atheris:
        _atheris(rest)
        return 0
    if args.describe:
        for path in args.describe:
            with open(path, "rb") as f:
                print(f"{path}: {decode(f.read()).describe()}")
        return 0
    crash = CrashFile(args.crash_file)
    if args.run:
        bad = 0
        for path in args.run:
            with open(path, "rb") as f:
                data = f.read()
            crash.write(data)
            try:
                print(f"{os.path.basename(path)}: {execute(data)}")
            except Finding as exc:
                bad += 1
                print(f"{os.path.basename(path)}: FAILED {exc}")
        crash.close()
        return 1 if bad else 0
    seed = (
        args.seed if args.seed is not None else random.SystemRandom().randrange(2**32)
    )
    print(f"fuzzing for {args.seconds:g} s with --seed {seed}", flush=True)
    corpus = _load_corpus(args.corpus)
    for data in corpus:  # the regression inputs first
        crash.write(data)
        execute(data)
    stats, failures = fuzz(args.seconds, seed, corpus, crash, args.save_failures)
    crash.close()
    stats["corpus"] = len(corpus)
    stats["finished"] = datetime.datetime.now().isoformat(timespec="seconds")
    if args.stats:
        with open(args.stats, "w") as f:
            json.dump(stats, f, indent=1)
    print(json.dumps(stats))
    for data, message in failures:
        print(f"FAILURE input={data.hex()}\n  {message}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
