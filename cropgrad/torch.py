"""cropgrad for PyTorch: the three ops as ``torch.library`` custom ops.

::

    import cropgrad.torch as cgt

    crops = cgt.crop_and_resize(image, boxes, box_ind, (7, 7))  # NCHW

`crop_and_resize`, `crop_and_resize_grad_image` and
`crop_and_resize_grad_boxes` compute what the NumPy functions of the same
names compute, bit for bit, on CPU tensors.  They are the custom operators
``torch.ops.cropgrad.crop_and_resize``,
``torch.ops.cropgrad.crop_and_resize_grad_image`` and
``torch.ops.cropgrad.crop_and_resize_grad_boxes``, with fake-tensor
implementations (shapes and dtypes without computing) and autograd
formulas, so they work with ``torch.compile(fullgraph=True)``:

- `crop_and_resize` is differentiable with respect to the image (floating
  dtypes; its gradient is `crop_and_resize_grad_image`) and the boxes (its
  gradient is `crop_and_resize_grad_boxes`; nearest sampling is piecewise
  constant in the boxes, so there the boxes gradient is zero);
- `crop_and_resize_grad_image` is linear in its ``grads``, and its gradient
  with respect to them is `crop_and_resize` of the incoming gradient (so a
  second derivative with respect to the image works);
- every other derivative (of the image gradient with respect to the boxes,
  of the boxes gradient) raises ``NotImplementedError`` when it is needed.

Layout: the default ``data_format="NCHW"`` is PyTorch's: images and image
gradients are ``[batch, depth, height, width]``, crops and grads
``[num_boxes, depth, crop_height, crop_width]``.  ``"NHWC"`` is
TensorFlow's.  Tensors are read where they are: an NCHW tensor in
``torch.channels_last`` memory format is NHWC in memory and goes to the
NHWC kernel without a copy (and the result comes back in the same memory
format); likewise an NHWC-shaped view of NCHW memory goes to the NCHW
kernel.  Outputs are allocated by PyTorch and written in place.

Only CPU tensors are accepted; a tensor on any other device is a
``ValueError``.  Install with ``pip install "cropgrad[torch]"``.
"""

import numbers
from collections.abc import Sequence

import cropgrad as _cg

try:
    import torch
except ImportError:  # the extra is not installed (the cause stays chained)
    raise ImportError(
        'cropgrad.torch needs PyTorch: install it with pip install "cropgrad[torch]"'
    )

__all__ = [
    "crop_and_resize",
    "crop_and_resize_grad_boxes",
    "crop_and_resize_grad_image",
]

_METHODS = ("bilinear", "nearest")
_FORMATS = ("NHWC", "NCHW")
# The permutation that turns a 4-D tensor of one layout into the other.
_TO_OTHER = {"NCHW": (0, 2, 3, 1), "NHWC": (0, 3, 1, 2)}
_OTHER = {"NCHW": "NHWC", "NHWC": "NCHW"}

# Image dtypes of the forward op and the boxes gradient (the NumPy API's).
_IMAGE_DTYPES = (
    torch.uint8,
    torch.int8,
    torch.uint16,
    torch.int16,
    torch.int32,
    torch.int64,
    torch.float16,
    torch.float32,
    torch.float64,
)
_GRAD_DTYPES = (torch.float16, torch.float32, torch.float64)


# --------------------------------------------------------------------------
# Metadata checks, shared by the fake and the real implementations, so that
# a bad call fails alike under torch.compile (while tracing) and eagerly,
# with messages in the caller's layout.


def _tensor(value, name):
    if not isinstance(value, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(value).__name__}")
    if value.layout != torch.strided:
        raise TypeError(f"{name} must be a dense (strided) tensor, got {value.layout}")
    if value.device.type != "cpu":
        raise ValueError(
            f"{name} is on {value.device}: cropgrad.torch runs on the CPU only "
            "(move the tensor with .cpu())"
        )
    return value


def _real(value, name):
    _tensor(value, name)
    if value.dtype == torch.bool or value.dtype.is_complex:
        raise TypeError(f"{name} must hold real numbers, got dtype {value.dtype}")
    return value


def _choice(value, allowed, name):
    # The plain str a subclass holds: every later comparison then agrees
    # with what was checked here, whatever the subclass's == says.
    plain = str.__str__(value) if isinstance(value, str) else None
    if plain not in allowed:
        choices = ", ".join(repr(m) for m in allowed)
        raise ValueError(f"{name} must be one of {choices}, got {value!r}")
    return plain


def _dims(layout):
    """Axis numbers of (depth, height, width) in a 4-D shape of `layout`."""
    return (1, 2, 3) if layout == "NCHW" else (3, 1, 2)


def _describe(layout, first, height="height", width="width"):
    """The axes of a 4-D shape of `layout`, in words."""
    if layout == "NCHW":
        return f"[{first}, depth, {height}, {width}]"
    return f"[{first}, {height}, {width}, depth]"


def _image(image, layout, name="image"):
    """Check a 4-D image; return (depth, height, width)."""
    _real(image, name)
    if image.dtype not in _IMAGE_DTYPES:
        raise TypeError(
            f"{name} must be uint8, uint16, int8, int16, int32, int64, float16, "
            f"float32 or float64, got {image.dtype}"
        )
    if image.dim() != 4:
        raise ValueError(
            f"{name} must be 4-D {_describe(layout, 'batch')} "
            f"({layout}), got shape {tuple(image.shape)}"
        )
    c, h, w = (image.shape[i] for i in _dims(layout))
    if h == 0 or w == 0:
        raise ValueError(
            f"{name} dimensions must be positive, got shape {tuple(image.shape)} "
            f"({layout})"
        )
    return c, h, w


def _grads(grads, layout):
    """Check 4-D grads; return (num_boxes, depth, crop_height, crop_width)."""
    _real(grads, "grads")
    if grads.dim() != 4:
        raise ValueError(
            "grads must be 4-D "
            f"{_describe(layout, 'num_boxes', 'crop_height', 'crop_width')} "
            f"({layout}), "
            f"got shape {tuple(grads.shape)}"
        )
    c, h, w = (grads.shape[i] for i in _dims(layout))
    if h == 0 or w == 0:
        raise ValueError(
            "grads dimensions must be positive: crop_height and crop_width are "
            f"{h} and {w} (grads shape {tuple(grads.shape)}, {layout})"
        )
    return grads.shape[0], c, h, w


def _boxes(boxes, box_ind):
    """Check boxes and box_ind shapes; return the number of boxes."""
    _real(boxes, "boxes")
    if boxes.dim() != 2 or boxes.shape[1] != 4:
        raise ValueError(
            "boxes must be 2-D with 4 columns [y1, x1, y2, x2], got shape "
            f"{tuple(boxes.shape)}"
        )
    _tensor(box_ind, "box_ind")
    dtype = box_ind.dtype
    if dtype == torch.bool or dtype.is_floating_point or dtype.is_complex:
        raise TypeError(f"box_ind must hold integers, got dtype {dtype}")
    if box_ind.dim() != 1 or box_ind.shape[0] != boxes.shape[0]:
        raise ValueError(
            f"box_ind has incompatible shape {tuple(box_ind.shape)}: expected "
            f"({boxes.shape[0]},), one image index per box"
        )
    return boxes.shape[0]


def _same_count(grads_boxes, num_boxes, grads):
    if grads_boxes != num_boxes:
        raise ValueError(
            f"boxes and grads have incompatible shape: {num_boxes} boxes but "
            f"grads has shape {tuple(grads.shape)}"
        )


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
            f"{name} must have {length} elements {what}, got {len(values)}"
        )
    for i, v in enumerate(values):
        if isinstance(v, bool) or not isinstance(v, (numbers.Integral, torch.SymInt)):
            raise TypeError(
                f"{name} must hold ints {what}, got {type(v).__name__} {v!r}"
            )
        if not isinstance(v, torch.SymInt):
            values[i] = int(v)
    return values


def _crop_size(crop_size):
    crop_h, crop_w = _ints(crop_size, 2, "crop_size", "[crop_height, crop_width]")
    if crop_h <= 0 or crop_w <= 0:
        raise ValueError(
            f"crop dimensions must be positive, got crop_size = {[crop_h, crop_w]}"
        )
    return crop_h, crop_w


def _image_size(image_size, layout):
    what = _describe(layout, "batch")
    size = _ints(image_size, 4, "image_size", what)
    c, h, w = (size[i] for i in _dims(layout))
    if h <= 0 or w <= 0:
        raise ValueError(
            f"image dimensions must be positive: image_size = {size} ({layout})"
        )
    if size[0] < 0 or c < 0:
        raise ValueError(
            f"image_size: batch and depth must be non-negative, got {size} ({layout})"
        )
    return size


def _physical(t, layout):
    """The layout `t`'s memory is in: `layout`, or the other one.

    A tensor contiguous in the other layout (an NCHW tensor in
    ``channels_last`` memory format is NHWC in memory) is read where it is,
    by the other layout's kernel.  Anything else is made contiguous.
    """
    if t.is_contiguous():
        return layout
    if t.permute(_TO_OTHER[layout]).is_contiguous():
        return _OTHER[layout]
    return layout


def _in_layout(t, layout, physical):
    """`t` (shaped in `layout`) as a contiguous tensor shaped in `physical`."""
    if physical != layout:
        t = t.permute(_TO_OTHER[layout])
    return t.contiguous()


def _empty(shape, dtype, layout, physical):
    """A new tensor of `shape` (in `layout`) whose memory is in `physical`."""
    if physical == layout:
        return torch.empty(shape, dtype=dtype)
    order = _TO_OTHER[layout]
    inverse = _TO_OTHER[physical]
    return torch.empty([shape[i] for i in order], dtype=dtype).permute(inverse)


def _numpy(t):
    """A NumPy view of `t` (no copy): autograd's bookkeeping set aside."""
    return t.detach().resolve_neg().numpy()


def _threads(num_threads):
    # The NumPy API checks the range; only the schema's type is checked here.
    if num_threads is not None and (
        isinstance(num_threads, bool) or not isinstance(num_threads, int)
    ):
        raise TypeError(
            "num_threads must be None or an int from 1 to 1024, got "
            f"{type(num_threads).__name__} {num_threads!r}"
        )
    return num_threads


def _flag(value, name):
    if not isinstance(value, bool):
        raise TypeError(
            f"{name} must be True or False, got {type(value).__name__} {value!r}"
        )
    return value


# --------------------------------------------------------------------------
# The forward op


def _forward_plan(image, boxes, box_ind, crop_size, method, data_format):
    """Check the forward op's metadata; return (output shape, memory layout)."""
    _choice(method, _METHODS, "method")
    layout = _choice(data_format, _FORMATS, "data_format")
    depth = _image(image, layout)[0]
    n = _boxes(boxes, box_ind)
    crop_h, crop_w = _crop_size(crop_size)
    if layout == "NCHW":
        shape = [n, depth, crop_h, crop_w]
    else:
        shape = [n, crop_h, crop_w, depth]
    return shape, _physical(image, layout)


@torch.library.custom_op(
    "cropgrad::crop_and_resize",
    mutates_args=(),
    device_types="cpu",
    schema="(Tensor image, Tensor boxes, Tensor box_ind, SymInt[] crop_size, "
    "str method, float extrapolation_value, str data_format, int? num_threads, "
    "bool flush_denormals) -> Tensor",
)
def _crop_and_resize_op(
    image,
    boxes,
    box_ind,
    crop_size,
    method,
    extrapolation_value,
    data_format,
    num_threads,
    flush_denormals,
):
    shape, physical = _forward_plan(
        image, boxes, box_ind, crop_size, method, data_format
    )
    crops = _empty(shape, torch.float32, data_format, physical)
    _cg.crop_and_resize(
        _numpy(_in_layout(image, data_format, physical)),
        _numpy(boxes),
        _numpy(box_ind),
        list(crop_size),
        method,
        extrapolation_value,
        out=_numpy(_in_layout(crops, data_format, physical)),
        num_threads=num_threads,
        flush_denormals=flush_denormals,
        data_format=physical,
    )
    return crops


@_crop_and_resize_op.register_fake
def _(
    image,
    boxes,
    box_ind,
    crop_size,
    method,
    extrapolation_value,
    data_format,
    num_threads,
    flush_denormals,
):
    shape, physical = _forward_plan(
        image, boxes, box_ind, crop_size, method, data_format
    )
    return _empty(shape, torch.float32, data_format, physical)


def _forward_setup(ctx, inputs, output):
    image, boxes, box_ind, crop_size, method, _, data_format, threads, flush = inputs
    # The image is only needed for the boxes gradient.
    ctx.save_for_backward(image if ctx.needs_input_grad[1] else None, boxes, box_ind)
    ctx.image_size = list(image.shape)
    ctx.image_dtype = image.dtype
    ctx.options = (method, data_format, threads, flush)


def _forward_backward(ctx, grad):
    image, boxes, box_ind = ctx.saved_tensors
    method, data_format, threads, flush = ctx.options
    d_image = d_boxes = None
    if ctx.needs_input_grad[0]:
        d_image = torch.ops.cropgrad.crop_and_resize_grad_image(
            grad,
            boxes,
            box_ind,
            ctx.image_size,
            ctx.image_dtype,
            method,
            data_format,
            threads,
            flush,
        )
    if ctx.needs_input_grad[1]:
        if method == "bilinear":
            d_boxes = torch.ops.cropgrad.crop_and_resize_grad_boxes(
                grad, image, boxes, box_ind, method, data_format, threads, flush
            ).to(boxes.dtype)
        else:
            # Nearest sampling is piecewise constant in the box coordinates.
            d_boxes = torch.zeros_like(boxes)
    return d_image, d_boxes, None, None, None, None, None, None, None


_crop_and_resize_op.register_autograd(_forward_backward, setup_context=_forward_setup)


def crop_and_resize(
    image,
    boxes,
    box_ind,
    crop_size,
    method="bilinear",
    extrapolation_value=0.0,
    *,
    data_format="NCHW",
    num_threads=None,
    flush_denormals=False,
):
    """Crop boxes out of a batch of images and resize them (differentiable).

    TensorFlow's ``CropAndResize`` bit for bit, as
    `cropgrad.crop_and_resize` computes it, on CPU tensors.

    Parameters
    ----------
    image : Tensor of shape (batch, depth, height, width)
        ``(batch, height, width, depth)`` with ``data_format="NHWC"``.
        uint8, uint16, int8, int16, int32, int64, float16, float32 or
        float64; pixels are converted to float32 as they are read.
        Differentiable when floating.
    boxes : Tensor of shape (num_boxes, 4)
        Finite ``[y1, x1, y2, x2]`` in normalized coordinates (``0`` is the
        first pixel, ``1`` the last), used as float32.  Differentiable
        (bilinear sampling; the gradient of nearest sampling is zero).
    box_ind : Tensor of shape (num_boxes,), int32 or int64
        Image of each box, in ``[0, batch)``.
    crop_size : sequence of 2 ints
        ``[crop_height, crop_width]``, both positive.
    method : {"bilinear", "nearest"}, default "bilinear"
    extrapolation_value : float, default 0.0
        Value of samples that fall outside the image.
    data_format : {"NCHW", "NHWC"}, default "NCHW"
        Layout of `image` and of the result.
    num_threads : int, optional
        Threads to use, 1 to 1024 (default: OpenMP's default).  The result
        does not depend on it.
    flush_denormals : bool, default False
        TensorFlow's flush-to-zero arithmetic (see
        `cropgrad.crop_and_resize_grad_image`).

    Returns
    -------
    Tensor of shape (num_boxes, depth, crop_height, crop_width), float32
        ``(num_boxes, crop_height, crop_width, depth)`` with
        ``data_format="NHWC"``; in ``channels_last`` memory format when
        the image is.

    Examples
    --------
    >>> import torch
    >>> import cropgrad.torch as cgt
    >>> image = torch.arange(9.0).reshape(1, 1, 3, 3)
    >>> boxes = torch.tensor([[0.0, 0.0, 1.0, 1.0]])
    >>> cgt.crop_and_resize(image, boxes, torch.tensor([0]), (2, 2))
    tensor([[[[0., 2.],
              [6., 8.]]]])
    """
    extrapolation = _real_scalar(extrapolation_value, "extrapolation_value")
    return torch.ops.cropgrad.crop_and_resize(
        _tensor(image, "image"),
        _tensor(boxes, "boxes"),
        _tensor(box_ind, "box_ind"),
        _crop_size(crop_size),
        _choice(method, _METHODS, "method"),
        extrapolation,
        _choice(data_format, _FORMATS, "data_format"),
        _threads(num_threads),
        _flag(flush_denormals, "flush_denormals"),
    )


def _real_scalar(value, name):
    if isinstance(value, torch.Tensor) and value.dim() == 0:
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(
            f"{name} must be a real number, got {type(value).__name__} {value!r}"
        )
    return float(value)


# --------------------------------------------------------------------------
# The image gradient


def _grad_image_plan(grads, boxes, box_ind, image_size, dtype, method, data_format):
    """Check the image gradient's metadata; return (shape, memory layout)."""
    _choice(method, _METHODS, "method")
    layout = _choice(data_format, _FORMATS, "data_format")
    if dtype not in _GRAD_DTYPES:
        raise TypeError(f"dtype must be float16, float32 or float64, got {dtype!r}")
    num, depth = _grads(grads, layout)[:2]
    _same_count(num, _boxes(boxes, box_ind), grads)
    size = _image_size(image_size, layout)
    image_depth = size[_dims(layout)[0]]
    if depth != image_depth:
        raise ValueError(
            f"image_size and grads are incompatible: image_size depth is "
            f"{image_depth} but grads depth is {depth} ({layout})"
        )
    return size, _physical(grads, layout)


@torch.library.custom_op(
    "cropgrad::crop_and_resize_grad_image",
    mutates_args=(),
    device_types="cpu",
    schema="(Tensor grads, Tensor boxes, Tensor box_ind, SymInt[] image_size, "
    "ScalarType dtype, str method, str data_format, int? num_threads, "
    "bool flush_denormals) -> Tensor",
)
def _grad_image_op(
    grads,
    boxes,
    box_ind,
    image_size,
    dtype,
    method,
    data_format,
    num_threads,
    flush_denormals,
):
    size, physical = _grad_image_plan(
        grads, boxes, box_ind, image_size, dtype, method, data_format
    )
    result = _empty(size, dtype, data_format, physical)
    out = _in_layout(result, data_format, physical)
    _cg.crop_and_resize_grad_image(
        _numpy(_in_layout(grads, data_format, physical)),
        _numpy(boxes),
        _numpy(box_ind),
        list(out.shape),
        out.numpy().dtype,
        method,
        out=out.numpy(),
        num_threads=num_threads,
        flush_denormals=flush_denormals,
        data_format=physical,
    )
    return result


@_grad_image_op.register_fake
def _(
    grads,
    boxes,
    box_ind,
    image_size,
    dtype,
    method,
    data_format,
    num_threads,
    flush_denormals,
):
    size, physical = _grad_image_plan(
        grads, boxes, box_ind, image_size, dtype, method, data_format
    )
    return _empty(size, dtype, data_format, physical)


def _grad_image_setup(ctx, inputs, output):
    grads, boxes, box_ind, _, _, method, data_format, threads, flush = inputs
    ctx.save_for_backward(boxes, box_ind)
    layout_dims = _dims(data_format)
    ctx.crop_size = [grads.shape[layout_dims[1]], grads.shape[layout_dims[2]]]
    ctx.grads_dtype = grads.dtype
    ctx.options = (method, data_format, threads, flush)


def _grad_image_backward(ctx, grad):
    boxes, box_ind = ctx.saved_tensors
    method, data_format, threads, flush = ctx.options
    if ctx.needs_input_grad[1]:
        raise NotImplementedError(
            "cropgrad.torch: the image gradient is differentiable with respect "
            "to grads only, not to boxes (a second derivative of crop_and_resize "
            "with respect to the boxes is not implemented)"
        )
    d_grads = None
    if ctx.needs_input_grad[0]:
        # The image gradient is the adjoint of the forward op, which samples
        # outside the image as zero.
        d_grads = torch.ops.cropgrad.crop_and_resize(
            grad,
            boxes,
            box_ind,
            ctx.crop_size,
            method,
            0.0,
            data_format,
            threads,
            flush,
        ).to(ctx.grads_dtype)
    return d_grads, None, None, None, None, None, None, None, None


_grad_image_op.register_autograd(_grad_image_backward, setup_context=_grad_image_setup)


def crop_and_resize_grad_image(
    grads,
    boxes,
    box_ind,
    image_size,
    dtype=torch.float32,
    method="bilinear",
    *,
    data_format="NCHW",
    num_threads=None,
    flush_denormals=False,
):
    """Gradient of crop-and-resize with respect to the image.

    TensorFlow's ``CropAndResizeGradImage`` bit for bit, as
    `cropgrad.crop_and_resize_grad_image` computes it, on CPU tensors.
    Differentiable with respect to `grads` (its gradient is
    `crop_and_resize` of the incoming gradient).

    Parameters
    ----------
    grads : Tensor of shape (num_boxes, depth, crop_height, crop_width)
        ``(num_boxes, crop_height, crop_width, depth)`` with
        ``data_format="NHWC"``.  Used as float32 (the op's arithmetic).
    boxes : Tensor of shape (num_boxes, 4)
        Finite ``[y1, x1, y2, x2]`` in normalized coordinates.
    box_ind : Tensor of shape (num_boxes,), int32 or int64
        Image of each box, in ``[0, batch)``.
    image_size : sequence of 4 ints
        The output's shape, ``[batch, depth, height, width]`` (or
        ``[batch, height, width, depth]`` with ``data_format="NHWC"``).
    dtype : {torch.float32, torch.float16, torch.float64}
        Output dtype; float16 accumulates in float32 and is rounded once.
    method : {"bilinear", "nearest"}, default "bilinear"
    data_format : {"NCHW", "NHWC"}, default "NCHW"
    num_threads : int, optional
        Threads to use, 1 to 1024 (default: OpenMP's default).
    flush_denormals : bool, default False
        TensorFlow's flush-to-zero arithmetic.

    Returns
    -------
    Tensor of shape `image_size`, dtype `dtype`
        In ``channels_last`` memory format when `grads` is.

    Examples
    --------
    >>> import torch
    >>> import cropgrad.torch as cgt
    >>> grads = torch.ones(1, 1, 2, 2)
    >>> boxes = torch.tensor([[0.0, 0.0, 1.0, 1.0]])
    >>> cgt.crop_and_resize_grad_image(grads, boxes, torch.tensor([0]), (1, 1, 3, 3))
    tensor([[[[1., 0., 1.],
              [0., 0., 0.],
              [1., 0., 1.]]]])
    """
    if not isinstance(dtype, torch.dtype):
        raise TypeError(
            "dtype must be torch.float16, torch.float32 or torch.float64, got "
            f"{dtype!r}"
        )
    return torch.ops.cropgrad.crop_and_resize_grad_image(
        _tensor(grads, "grads"),
        _tensor(boxes, "boxes"),
        _tensor(box_ind, "box_ind"),
        _ints(image_size, 4, "image_size", _describe(data_format, "batch")),
        dtype,
        _choice(method, _METHODS, "method"),
        _choice(data_format, _FORMATS, "data_format"),
        _threads(num_threads),
        _flag(flush_denormals, "flush_denormals"),
    )


# --------------------------------------------------------------------------
# The boxes gradient


def _grad_boxes_plan(grads, image, boxes, box_ind, method, data_format):
    """Check the boxes gradient's metadata; return the memory layout to use.

    grads and image are read by one kernel, so in one layout: when their
    memory layouts differ, the smaller of the two is converted.
    """
    _choice(method, ("bilinear",), "method")
    layout = _choice(data_format, _FORMATS, "data_format")
    num, depth = _grads(grads, layout)[:2]
    image_depth = _image(image, layout)[0]
    _same_count(num, _boxes(boxes, box_ind), grads)
    if depth != image_depth:
        raise ValueError(
            f"image and grads must have the same depth, got {image_depth} and "
            f"{depth} ({layout})"
        )
    from_grads = _physical(grads, layout)
    from_image = _physical(image, layout)
    if from_grads == from_image:
        return from_grads
    return from_image if grads.numel() <= image.numel() else from_grads


@torch.library.custom_op(
    "cropgrad::crop_and_resize_grad_boxes",
    mutates_args=(),
    device_types="cpu",
    schema="(Tensor grads, Tensor image, Tensor boxes, Tensor box_ind, str method, "
    "str data_format, int? num_threads, bool flush_denormals) -> Tensor",
)
def _grad_boxes_op(
    grads,
    image,
    boxes,
    box_ind,
    method,
    data_format,
    num_threads,
    flush_denormals,
):
    physical = _grad_boxes_plan(grads, image, boxes, box_ind, method, data_format)
    result = torch.empty((boxes.shape[0], 4), dtype=torch.float32)
    _cg.crop_and_resize_grad_boxes(
        _numpy(_in_layout(grads, data_format, physical)),
        _numpy(_in_layout(image, data_format, physical)),
        _numpy(boxes),
        _numpy(box_ind),
        method,
        out=result.numpy(),
        num_threads=num_threads,
        flush_denormals=flush_denormals,
        data_format=physical,
    )
    return result


@_grad_boxes_op.register_fake
def _(grads, image, boxes, box_ind, method, data_format, num_threads, flush_denormals):
    _grad_boxes_plan(grads, image, boxes, box_ind, method, data_format)
    return boxes.new_empty((boxes.shape[0], 4), dtype=torch.float32)


def _grad_boxes_backward(ctx, grad):
    raise NotImplementedError(
        "cropgrad.torch: crop_and_resize_grad_boxes is not differentiable (a "
        "second derivative of crop_and_resize with respect to the boxes is not "
        "implemented)"
    )


_grad_boxes_op.register_autograd(_grad_boxes_backward)


def crop_and_resize_grad_boxes(
    grads,
    image,
    boxes,
    box_ind,
    method="bilinear",
    *,
    data_format="NCHW",
    num_threads=None,
    flush_denormals=False,
):
    """Gradient of crop-and-resize with respect to the boxes.

    TensorFlow's ``CropAndResizeGradBoxes`` bit for bit, as
    `cropgrad.crop_and_resize_grad_boxes` computes it (bilinear only), on
    CPU tensors.  Not differentiable itself.

    Parameters
    ----------
    grads : Tensor of shape (num_boxes, depth, crop_height, crop_width)
        ``(num_boxes, crop_height, crop_width, depth)`` with
        ``data_format="NHWC"``.  Used as float32.
    image : Tensor of shape (batch, depth, height, width)
        The forward op's image (``(batch, height, width, depth)`` with
        ``data_format="NHWC"``), of any dtype `crop_and_resize` accepts.
    boxes : Tensor of shape (num_boxes, 4)
        Finite ``[y1, x1, y2, x2]`` in normalized coordinates.
    box_ind : Tensor of shape (num_boxes,), int32 or int64
        Image of each box, in ``[0, batch)``.
    method : {"bilinear"}
        Only bilinear sampling has a boxes gradient.
    data_format : {"NCHW", "NHWC"}, default "NCHW"
    num_threads : int, optional
        Threads to use, 1 to 1024 (default: OpenMP's default).
    flush_denormals : bool, default False
        TensorFlow's flush-to-zero arithmetic.

    Returns
    -------
    Tensor of shape (num_boxes, 4), float32
        Gradient with respect to ``[y1, x1, y2, x2]`` of each box.

    Examples
    --------
    >>> import torch
    >>> import cropgrad.torch as cgt
    >>> image = torch.arange(9.0).reshape(1, 1, 3, 3)
    >>> grads = torch.ones(1, 1, 2, 2)
    >>> boxes = torch.tensor([[0.25, 0.25, 0.75, 0.75]])
    >>> cgt.crop_and_resize_grad_boxes(grads, image, boxes, torch.tensor([0]))
    tensor([[12.,  4., 12.,  4.]])
    """
    return torch.ops.cropgrad.crop_and_resize_grad_boxes(
        _tensor(grads, "grads"),
        _tensor(image, "image"),
        _tensor(boxes, "boxes"),
        _tensor(box_ind, "box_ind"),
        _choice(method, ("bilinear",), "method"),
        _choice(data_format, _FORMATS, "data_format"),
        _threads(num_threads),
        _flag(flush_denormals, "flush_denormals"),
    )
