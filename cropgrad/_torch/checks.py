"""Argument checks and metadata plans of the PyTorch ops.

Two kinds of check, with the messages of the NumPy API in the caller's
layout:

- `public`: the arguments of a public function of `cropgrad.torch`, before
  the op is dispatched (Python types the schema cannot express: a tensor,
  a sequence of ints, a real number, a str that is one of its choices).
- the plans (`forward_plan` ...): the metadata of a dispatched call,
  shared by the CPU kernel and the fake implementation (so that a bad call
  fails alike under torch.compile, while tracing, and eagerly) and by the
  vmap rules (which check the caller's per-problem shapes).  Where the
  shapes are concrete ints a plan runs the C-level API's metadata checks
  (cropgrad._core's gate); symbolic shapes get only what the output's shape
  needs, and the eager call, whose shapes are concrete, runs the gate.  The
  thread count is the CPU kernel's to check (0 here: the default).

Arguments come by name, as `cropgrad._ops` names them: `bind`
turns the positional arguments the dispatcher passes into that namespace.

RoIAlign's ops take torchvision's arguments: `roi_public` checks those of
`cropgrad.torch.roi_align` (and turns a list of boxes into one
``Tensor[K, 5]``), the `roi_*_plan` functions are their plans.
"""

import numbers
from collections.abc import Sequence

import torch

from cropgrad import _core, _ops
from cropgrad._api import validation as _v

__all__ = []

# The ops PyTorch has, from the table of each op's arguments.
OPS = {name: op for name, op in _ops.OPS.items() if "torch" in op.apis}

# Image dtypes of the forward op and the boxes gradient (the NumPy API's).
IMAGE_DTYPES = (
    torch.uint8,
    torch.int8,
    torch.uint16,
    torch.int16,
    torch.int32,
    torch.int64,
    torch.float16,
    torch.bfloat16,
    torch.float32,
    torch.float64,
)
_GRAD_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
_GRAD_DTYPE_NAMES = "float16, bfloat16, float32 or float64"
# The C-level API's code of each (torch.uint8: CG_UINT8, ...).
CODES = {
    t: _v.CODES["CG_" + str(t).removeprefix("torch.").upper()] for t in IMAGE_DTYPES
}
# What a dtype default of the signature table is in PyTorch.
DTYPES = {"float32": torch.float32}


# The names of each op's arrays (its tensors), in its order.
ARRAYS = {
    name: tuple(arg.name for arg in op.args_of("torch") if arg.kind == "array")
    for name, op in OPS.items()
}
# Each op's call (`bind`) and its defaults, in its order (REQUIRED where
# it has none).
_CALLS = {name: op.call_type("torch") for name, op in OPS.items()}
_DEFAULTS = {
    name: tuple(op.default(a.name, "torch", DTYPES) for a in op.args_of("torch"))
    for name, op in OPS.items()
}


def bind(name, args):
    """The positional arguments the dispatcher passes to op `name`, by name
    (`cropgrad._ops.Op.bind`).

    The dispatcher leaves out trailing arguments equal to their defaults:
    they are filled in from the table.
    """
    return _CALLS[name](*args, *_DEFAULTS[name][len(args) :])


# --------------------------------------------------------------------------
# One argument each


def tensor(value, name):
    if not isinstance(value, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(value).__name__}")
    if value.layout != torch.strided:
        raise TypeError(f"{name} must be a dense (strided) tensor, got {value.layout}")
    # Meta tensors only reach the fake implementation: shapes and dtypes
    # without data, as under torch.compile's fake tensors.
    if value.device.type not in ("cpu", "meta"):
        raise ValueError(
            f"{name} is on {value.device}: cropgrad.torch runs on the CPU only "
            "(move the tensor with .cpu())"
        )
    return value


def _one_device(**tensors):
    """Check that the tensors are all on the CPU or all meta tensors."""
    devices = {t.device.type for t in tensors.values()}
    if len(devices) > 1:
        where = ", ".join(f"{name} on {t.device}" for name, t in tensors.items())
        raise ValueError(
            f"the tensors must all be on the CPU or all be meta tensors, got {where}"
        )


def _real(value, name):
    tensor(value, name)
    if value.dtype == torch.bool or value.dtype.is_complex:
        raise TypeError(f"{name} must hold real numbers, got dtype {value.dtype}")
    return value


def _choice(value, allowed, name):
    # The plain str a subclass holds: every later comparison then agrees
    # with what was checked here, whatever the subclass's == says.
    plain = str.__str__(value) if isinstance(value, str) else None
    if plain not in allowed:
        if name == "data_format":
            _v.data_format(value)  # the NumPy API's message
        choices = ", ".join(repr(m) for m in allowed)
        raise ValueError(f"{name} must be one of {choices}, got {value!r}")
    return plain


# The choices of each string option of each op.
_CHOICES = {
    name: {arg.name: arg.choices for arg in op.args if arg.choices}
    for name, op in OPS.items()
}


def option(name, arg, value):
    """A string option of op `name` checked against its choices."""
    return _choice(value, _CHOICES[name][arg], arg)


def dims(layout):
    """Axis numbers of (depth, height, width) in a 4-D shape of `layout`."""
    return (1, 2, 3) if layout == "NCHW" else (3, 1, 2)


def _image(image, layout, name="image"):
    """Check a 4-D image's dtype and rank; return its depth."""
    _real(image, name)
    if image.dtype not in IMAGE_DTYPES:
        raise TypeError(f"{name} must be {_v.IMAGE_DTYPE_NAMES}, got {image.dtype}")
    if image.dim() != 4:
        raise ValueError(
            f"{name} must be 4-D {_v.IMAGE_AXES[layout]} "
            f"({layout}), got shape {tuple(image.shape)}"
        )
    return image.shape[dims(layout)[0]]


def _grads(grads, layout, axes=_v.GRADS_AXES):
    """Check that grads is 4-D (`axes`: its axes' names by layout, the
    family's); return its number of boxes."""
    _real(grads, "grads")
    if grads.dim() != 4:
        raise ValueError(
            f"grads must be 4-D {axes[layout]} ({layout}), "
            f"got shape {tuple(grads.shape)}"
        )
    return grads.shape[0]


def _boxes(boxes, box_ind):
    """Check boxes and box_ind shapes; return the number of boxes."""
    _real(boxes, "boxes")
    _v.boxes_shape(tuple(boxes.shape))
    tensor(box_ind, "box_ind")
    dtype = box_ind.dtype
    if dtype == torch.bool or dtype.is_floating_point or dtype.is_complex:
        raise TypeError(f"box_ind must hold integers, got dtype {dtype}")
    _v.box_ind_shape(tuple(box_ind.shape), boxes.shape[0])
    return boxes.shape[0]


def _concrete(*shapes):
    """Whether every value of `shapes` is an int (not a symbolic SymInt)."""
    return all(type(v) is int for shape in shapes for v in shape)


def _ints(value, length, name, what):
    """A sequence of `length` ints (Python or symbolic), as a list."""
    if isinstance(value, torch.Tensor) or not isinstance(value, Sequence):
        raise TypeError(
            f"{name} must be a sequence of {length} ints {what}, got "
            f"{type(value).__name__}"
        )
    values = list(value)
    if len(values) != length:
        raise ValueError(
            f"{name} must have {length} elements {what}, got shape ({len(values)},)"
        )
    for i, v in enumerate(values):
        if isinstance(v, bool) or not isinstance(v, (numbers.Integral, torch.SymInt)):
            raise TypeError(f"{name} must hold integers {what}, got {value!r}")
        if not isinstance(v, torch.SymInt):
            values[i] = int(v)
    return values


# Each size argument: its number of ints and their axes in words.
_SIZES = {
    "crop_size": (2, lambda layout: "[crop_height, crop_width]"),
    "image_size": (4, lambda layout: _v.IMAGE_AXES[layout]),
}


def size(arg, value, layout):
    """A size argument (`_SIZES`) as a list of ints."""
    length, axes = _SIZES[arg]
    if (
        type(value) in (list, tuple)
        and len(value) == length
        and all(type(v) is int for v in value)
    ):
        return list(value)  # the common case, without the words of a message
    if (
        arg == "crop_size"
        and isinstance(value, (numbers.Integral, torch.SymInt))
        and not isinstance(value, bool)
    ):
        return [value, value]  # a square, as in the NumPy API
    return _ints(value, length, arg, axes(layout))


def _real_scalar(value, name):
    if isinstance(value, torch.Tensor) and value.dim() == 0:
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(
            f"{name} must be a real number, got {type(value).__name__} {value!r}"
        )
    return float(value)


def _dtype(value, name):
    if not isinstance(value, torch.dtype):
        raise TypeError(
            f"{name} must be torch.float16, torch.bfloat16, torch.float32 or "
            f"torch.float64, got {value!r}"
        )
    return value


def _threads(num_threads, name):
    # The CPU kernel checks the range; only the schema's type is checked here.
    if num_threads is not None and (
        isinstance(num_threads, bool) or not isinstance(num_threads, int)
    ):
        raise _v.threads_type_error(num_threads)
    return num_threads


def _flag(value, name):
    if not isinstance(value, bool):
        raise TypeError(
            f"{name} must be True or False, got {type(value).__name__} {value!r}"
        )
    return value


# The check of each kind of argument (cropgrad._ops.Arg.kind) of a public
# function, ``check(value, arg, values)`` (`values`: the call's arguments
# by name).
_CHECKS = {
    "array": lambda value, arg, values: tensor(value, _spelt(arg)),
    "ints": lambda value, arg, values: size(arg.name, value, values.get("data_format")),
    "str": lambda value, arg, values: _choice(value, arg.choices, arg.name),
    "float": lambda value, arg, values: _real_scalar(value, arg.name),
    "dtype": lambda value, arg, values: _dtype(value, arg.name),
    "threads": lambda value, arg, values: _threads(value, arg.name),
    "bool": lambda value, arg, values: _flag(value, arg.name),
}
# Each op's public arguments with their checks, in the op's order, and the
# scalars among them, which are checked before the others (made at an op's
# first call).
_PUBLIC: dict[str, tuple[list, list]] = {}


def _spelt(arg):
    """The name of `arg` in the public function (``input`` for the image of
    PyTorch's own ops)."""
    return arg.renamed.get("torch", arg.name)


def _public_checks(name):
    if name not in _PUBLIC:
        checks = [(arg, _CHECKS[arg.kind]) for arg in OPS[name].args_of("torch")]
        scalars = [(arg, c) for arg, c in checks if arg.kind in ("float", "dtype")]
        _PUBLIC[name] = scalars, checks
    return _PUBLIC[name]


def public(name, values):
    """The arguments of the public function of op `name`, checked.

    `values` maps each argument's name (as the public function spells it)
    to what the caller gave; returns
    them in the op's order, as the dispatcher takes them.
    """
    scalars, checks = _public_checks(name)
    for arg, check in scalars:
        check(values[_spelt(arg)], arg, values)
    return [check(values[_spelt(arg)], arg, values) for arg, check in checks]


# --------------------------------------------------------------------------
# Metadata plans: each takes a bound call (`bind`) and returns the shape of
# the op's result, in the call's layout.


def forward_plan(a, name="crop_and_resize"):
    """Check the forward op's metadata; return the output's shape."""
    option(name, "method", a.method)
    layout = option(name, "data_format", a.data_format)
    image = a.image
    depth = _image(image, layout)
    n = _boxes(a.boxes, a.box_ind)
    _one_device(image=image, boxes=a.boxes, box_ind=a.box_ind)
    crop_h, crop_w = size("crop_size", a.crop_size, layout)
    if _concrete(image.shape, (n, crop_h, crop_w)):
        _core.check_crop_and_resize(
            tuple(image.shape),
            CODES[image.dtype],
            n,
            crop_h,
            crop_w,
            _v.METHOD_CODES[a.method],
            _v.LAYOUT_CODES[layout],
            0,
        )
    if layout == "NCHW":
        return [n, depth, crop_h, crop_w]
    return [n, crop_h, crop_w, depth]


def grad_image_plan(a):
    """Check the image gradient's metadata; return the output's shape."""
    name = "crop_and_resize_grad_image"
    option(name, "method", a.method)
    layout = option(name, "data_format", a.data_format)
    if a.dtype not in _GRAD_DTYPES:
        raise TypeError(f"dtype must be {_GRAD_DTYPE_NAMES}, got {a.dtype!r}")
    grads = a.grads
    _grads(grads, layout)
    _v.same_num_boxes(_boxes(a.boxes, a.box_ind), tuple(grads.shape))
    _one_device(grads=grads, boxes=a.boxes, box_ind=a.box_ind)
    image_size = size("image_size", a.image_size, layout)
    if _concrete(grads.shape, image_size):
        _core.check_crop_and_resize_grad_image(
            tuple(grads.shape),
            image_size,
            CODES[a.dtype],
            _v.METHOD_CODES[a.method],
            _v.LAYOUT_CODES[layout],
            0,
        )
    return image_size


def grad_boxes_plan(a):
    """Check the boxes gradient's metadata; return the output's shape."""
    name = "crop_and_resize_grad_boxes"
    option(name, "method", a.method)
    layout = option(name, "data_format", a.data_format)
    grads, image = a.grads, a.image
    _grads(grads, layout)
    _image(image, layout)
    n = _boxes(a.boxes, a.box_ind)
    _v.same_num_boxes(n, tuple(grads.shape))
    _one_device(grads=grads, image=image, boxes=a.boxes, box_ind=a.box_ind)
    if _concrete(grads.shape, image.shape):
        _core.check_crop_and_resize_grad_boxes(
            tuple(grads.shape),
            tuple(image.shape),
            CODES[image.dtype],
            _v.METHOD_CODES[a.method],
            _v.LAYOUT_CODES[layout],
            0,
        )
    return [n, 4]


def _boxes_tangent(a, image_name):
    """Check a boxes JVP's tangent: real, of the boxes' shape, on the device
    of the image (which the op calls `image_name`)."""
    _real(a.boxes_tangent, "boxes_tangent")
    if tuple(a.boxes_tangent.shape) != tuple(a.boxes.shape):
        raise ValueError(
            f"boxes_tangent must have the shape of boxes {tuple(a.boxes.shape)}, "
            f"got shape {tuple(a.boxes_tangent.shape)}"
        )
    _one_device(**{image_name: a.image, "boxes_tangent": a.boxes_tangent})


def jvp_boxes_plan(a):
    """Check the boxes JVP's metadata; return the output's shape."""
    name = "crop_and_resize_jvp_boxes"
    option(name, "method", a.method)
    shape = forward_plan(a, name)
    _boxes_tangent(a, "image")
    return shape


# --------------------------------------------------------------------------
# RoIAlign: torchvision's arguments.  Its ops read NCHW tensors (an image in
# ``channels_last`` memory is read where it is) and boxes ``Tensor[K, 5]``,
# the index of each box's image first.

_ROI_COLUMNS = "[image index, x1, y1, x2, y2]"
_ROI_LAYOUT = _v.LAYOUT_CODES["NCHW"]


def _box_list(boxes, image):
    """A list of ``Tensor[L, 4]``, one per image, as one ``Tensor[K, 5]``
    (torchvision's conversion: the image index in the boxes' dtype)."""
    parts = []
    for n, b in enumerate(boxes):
        name = f"boxes[{n}]"
        _real(b, name)
        if b.dim() != 2 or b.shape[1] != 4:
            raise ValueError(
                f"{name} must be 2-D with 4 columns [x1, y1, x2, y2] (a list "
                f"of boxes holds one Tensor[L, 4] per image), got shape "
                f"{tuple(b.shape)}"
            )
        parts.append(b)
    if not parts:  # no image, no boxes: an empty problem
        return image.new_zeros((0, 5))
    coordinates = torch.cat(parts) if len(parts) > 1 else parts[0]
    index = torch.cat([torch.full_like(b[:, :1], n) for n, b in enumerate(parts)])
    return torch.cat([index.to(coordinates.dtype), coordinates], dim=1)


def roi_public(input, boxes, output_size, spatial_scale, sampling_ratio, aligned):
    """torchvision's arguments of `cropgrad.torch.roi_align`, checked, as the
    op `roi_align` takes them (boxes as ``Tensor[K, 5]``, a pair of ints)."""
    spatial_scale = _v.float_scalar(spatial_scale, "spatial_scale")
    sampling_ratio = _v.int_scalar(sampling_ratio, "sampling_ratio")
    aligned = _v.flag(aligned, "aligned")
    tensor(input, "input")
    if isinstance(boxes, (list, tuple)):
        boxes = _box_list(boxes, input)
    elif isinstance(boxes, torch.Tensor):
        tensor(boxes, "boxes")
    else:
        raise TypeError(
            f"boxes must be a torch.Tensor of shape [K, 5] {_ROI_COLUMNS} or a "
            f"list of Tensor[L, 4], one per image, got {type(boxes).__name__}"
        )
    size = list(_v.size_pair(output_size, "output_size", "[height, width]"))
    return [input, boxes, size, spatial_scale, sampling_ratio, aligned]


def _roi_boxes(boxes, name="boxes"):
    """Check torchvision's boxes ``Tensor[K, 5]``; return K."""
    _real(boxes, name)
    if boxes.dim() != 2 or boxes.shape[1] != 5:
        raise ValueError(
            f"{name} must be 2-D with 5 columns {_ROI_COLUMNS} (or a list of "
            f"Tensor[L, 4], one per image), got shape {tuple(boxes.shape)}"
        )
    return boxes.shape[0]


def roi_arithmetic(dtype):
    """The type RoIAlign computes in for data of `dtype`: float64 for
    float64, float32 for everything else (as the NumPy API)."""
    return torch.float64 if dtype == torch.float64 else torch.float32


def roi_result_dtype(dtype):
    """The dtype of a pooled output or image gradient computed from data of
    `dtype`: its own when floating, float32 otherwise."""
    return dtype if dtype in _GRAD_DTYPES else torch.float32


def _roi_scalars(a):
    """The sampling options, as the NumPy API checks them (an op called
    directly gets them from the dispatcher unchecked)."""
    _v.float_scalar(a.spatial_scale, "spatial_scale")
    _v.int_scalar(a.sampling_ratio, "sampling_ratio")
    _v.flag(a.aligned, "aligned")


def _output_size(value):
    return _ints(value, 2, "output_size", "[height, width]")


def roi_forward_plan(a, image_name="input"):
    """Check the metadata of RoIAlign (or of its boxes JVP, whose image is
    `image_name`); return the output's shape and dtype."""
    _roi_scalars(a)
    image = a.image
    channels = _image(image, "NCHW", image_name)
    k = _roi_boxes(a.boxes)
    _one_device(input=image, boxes=a.boxes)
    out_h, out_w = _output_size(a.output_size)
    dtype = roi_result_dtype(image.dtype)
    if _concrete(image.shape, (k, out_h, out_w)):
        _core.check_roi_align(
            tuple(image.shape),
            CODES[image.dtype],
            CODES[roi_arithmetic(image.dtype)],
            k,
            out_h,
            out_w,
            a.spatial_scale,
            a.sampling_ratio,
            _ROI_LAYOUT,
            CODES[dtype],
            0,
        )
    return [k, channels, out_h, out_w], dtype


def roi_grad_image_plan(a):
    """Check the metadata of RoIAlign's image gradient; return the output's
    shape and dtype (the gradient's own, float32 for integers)."""
    _roi_scalars(a)
    grads = a.grads
    _grads(grads, "NCHW", _v.POOLED_AXES)
    _v.same_num_boxes(_roi_boxes(a.boxes), tuple(grads.shape))
    _one_device(grads=grads, boxes=a.boxes)
    image_size = size("image_size", a.image_size, "NCHW")
    dtype = roi_result_dtype(grads.dtype)
    arithmetic = CODES[roi_arithmetic(grads.dtype)]
    if _concrete(grads.shape, image_size):
        _core.check_roi_align_grad_image(
            tuple(grads.shape),
            arithmetic,
            arithmetic,
            image_size,
            a.spatial_scale,
            a.sampling_ratio,
            _ROI_LAYOUT,
            CODES[dtype],
            0,
        )
    return image_size, dtype


def roi_grad_boxes_plan(a):
    """Check the metadata of RoIAlign's boxes gradient; return the output's
    shape ``[K, 4]`` and dtype (the arithmetic type)."""
    _roi_scalars(a)
    grads, image = a.grads, a.image
    _grads(grads, "NCHW", _v.POOLED_AXES)
    _image(image, "NCHW")
    k = _roi_boxes(a.boxes)
    _v.same_num_boxes(k, tuple(grads.shape))
    _one_device(grads=grads, image=image, boxes=a.boxes)
    dtype = roi_arithmetic(image.dtype)
    if _concrete(grads.shape, image.shape):
        _core.check_roi_align_grad_boxes(
            tuple(grads.shape),
            CODES[dtype],
            tuple(image.shape),
            CODES[image.dtype],
            CODES[dtype],
            a.spatial_scale,
            a.sampling_ratio,
            _ROI_LAYOUT,
            0,
        )
    return [k, 4], dtype


def roi_jvp_boxes_plan(a):
    """Check the metadata of RoIAlign's boxes JVP; return the output's shape
    and dtype."""
    plan = roi_forward_plan(a, "image")
    _boxes_tangent(a, "input")
    return plan
