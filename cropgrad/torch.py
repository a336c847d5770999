"""cropgrad for PyTorch: the three ops as ``torch.library`` custom ops.

::

    import cropgrad.torch as cgt

    crops = cgt.crop_and_resize(image, boxes, box_ind, (7, 7))  # NCHW

`crop_and_resize`, `crop_and_resize_grad_image` and
`crop_and_resize_grad_boxes` compute what the NumPy functions of the same
names compute, bit for bit, on CPU tensors.  They are the custom operators
``torch.ops.cropgrad.crop_and_resize``,
``torch.ops.cropgrad.crop_and_resize_grad_image`` and
``torch.ops.cropgrad.crop_and_resize_grad_boxes`` (with the Python
functions' defaults in their schemas), plus
``torch.ops.cropgrad.crop_and_resize_jvp_boxes``, the forward-mode
derivative in the boxes (`cropgrad.crop_and_resize_jvp_boxes`).  They have
fake implementations (shapes and dtypes without computing, which meta
tensors get too), so they work with ``torch.compile(fullgraph=True)`` and
``torch.export``.

Derivatives, in reverse mode (autograd, ``torch.func.grad``, ``vjp``,
``jacrev``) and forward mode (``torch.func.jvp``, ``jacfwd``,
``torch.autograd.forward_ad``), composed with ``torch.func.vmap`` (whose
mapped axis is folded into one call: more images and more boxes):

- `crop_and_resize`, with respect to the image (floating dtypes; linear)
  and the boxes (bilinear sampling; nearest sampling is piecewise constant
  in the boxes, so there the derivative is zero);
- `crop_and_resize_grad_image`, with respect to ``grads`` (linear) and, in
  reverse mode, the boxes;
- `crop_and_resize_grad_boxes`, with respect to ``grads`` and, in forward
  mode, the image (it is linear in both).

The derivatives cropgrad has no kernel for (of the boxes gradient with
respect to the boxes, in reverse mode to the image; of the image gradient
with respect to the boxes in forward mode) raise ``NotImplementedError``
when they are needed; none is ever returned as zeros.  ``torch.func``'s
transforms go through the Python functions of this module: the
``torch.ops.cropgrad`` operators raise ``NotImplementedError`` under them
(they support autograd, ``forward_ad`` and ``vmap`` on their own).  Under
``vmap``, an error in one problem's data names that problem's indices.

float64: the ops compute in float32, TensorFlow's arithmetic, whatever the
input dtype.  ``torch.autograd.gradcheck`` at its default ``eps=1e-6``
therefore fails (the step is lost in the float32 rounding); steps float32
resolves check the derivatives, e.g. ``gradcheck(fn, inputs, eps=1e-3,
atol=1e-3, rtol=1e-3)`` with samples farther than a step from a pixel
boundary (where the op has a kink in the boxes).

Layout: the default ``data_format="NCHW"`` is PyTorch's: images and image
gradients are ``[batch, depth, height, width]``, crops and grads
``[num_boxes, depth, crop_height, crop_width]``.  ``"NHWC"`` is
TensorFlow's.  Tensors are read where they are: an NCHW tensor in
``torch.channels_last`` memory format is NHWC in memory and goes to the
NHWC kernel without a copy (and the result comes back in the same memory
format); likewise an NHWC-shaped view of NCHW memory goes to the NCHW
kernel.  Outputs are allocated by PyTorch and written in place.

bfloat16 images are read exactly as float32 and the image gradient can be
bfloat16 (rounded once); both need ``ml_dtypes``.  Under CPU autocast the
ops run as they do outside it: nothing is cast (they read every image dtype
exactly and compute in float32), so an autocast bfloat16 feature map is
read without a float32 copy and the boxes are never rounded below float32;
results are float32.

Only CPU (and meta) tensors are accepted; a tensor on any other device is
a ``ValueError``.  Install with ``pip install "cropgrad[torch]"``.
"""

import functools
import numbers
from collections.abc import Callable, Sequence
from typing import Any

import cropgrad as _cg
from cropgrad import _core
from cropgrad._api import validation as _v

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
    torch.bfloat16,
    torch.float32,
    torch.float64,
)
_GRAD_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
# The C-level API's code of each (torch.uint8: CG_UINT8, ...).
_CODES = {
    t: _v.CODES["CG_" + str(t).removeprefix("torch.").upper()] for t in _IMAGE_DTYPES
}
_GRAD_DTYPE_NAMES = "float16, bfloat16, float32 or float64"


# --------------------------------------------------------------------------
# Metadata checks, shared by the fake and the real implementations, so that
# a bad call fails alike under torch.compile (while tracing) and eagerly,
# with messages in the caller's layout.


def _tensor(value, name):
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
    """Check a 4-D image's dtype and rank; return its depth."""
    _real(image, name)
    if image.dtype not in _IMAGE_DTYPES:
        raise TypeError(
            f"{name} must be uint8, uint16, int8, int16, int32, int64, float16, "
            f"bfloat16, float32 or float64, got {image.dtype}"
        )
    if image.dim() != 4:
        raise ValueError(
            f"{name} must be 4-D {_describe(layout, 'batch')} "
            f"({layout}), got shape {tuple(image.shape)}"
        )
    return image.shape[_dims(layout)[0]]


def _grads(grads, layout):
    """Check that grads is 4-D; return its number of boxes."""
    _real(grads, "grads")
    if grads.dim() != 4:
        raise ValueError(
            "grads must be 4-D "
            f"{_describe(layout, 'num_boxes', 'crop_height', 'crop_width')} "
            f"({layout}), "
            f"got shape {tuple(grads.shape)}"
        )
    return grads.shape[0]


def _boxes(boxes, box_ind):
    """Check boxes and box_ind shapes; return the number of boxes."""
    _real(boxes, "boxes")
    _v.boxes_shape(tuple(boxes.shape))
    _tensor(box_ind, "box_ind")
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
    return _ints(crop_size, 2, "crop_size", "[crop_height, crop_width]")


def _image_size(image_size, layout):
    return _ints(image_size, 4, "image_size", _describe(layout, "batch"))


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


def _empty(shape, dtype, layout, physical, device, fake):
    """A new tensor of `shape` (in `layout`) whose memory is in `physical`
    (`fake`: the fake implementation's, which has no memory)."""
    if physical == layout:
        return _new_tensor(shape, dtype, device, fake)
    order = _TO_OTHER[layout]
    inverse = _TO_OTHER[physical]
    shape = [shape[i] for i in order]
    return _new_tensor(shape, dtype, device, fake).permute(inverse)


# Results from this size on get huge pages (the size NumPy uses).
_HUGE_PAGES_FROM = 4 << 20


def _new_tensor(shape, dtype, device, fake):
    """An uninitialised tensor; a large one on the CPU with huge pages.

    PyTorch's CPU allocator takes large blocks from the kernel in 4 KiB
    pages: a fresh 100 MB result costs some 25,000 page faults as the op
    first writes it, more than the op's arithmetic.  NumPy asks for huge
    pages on such blocks (madvise); so does this, before the first write.
    A fake tensor (torch.compile's tracing) has no memory to advise.
    """
    tensor = torch.empty(shape, dtype=dtype, device=device)
    nbytes = tensor.numel() * tensor.element_size()
    if not fake and tensor.device.type == "cpu" and nbytes >= _HUGE_PAGES_FROM:
        _core.advise_huge_pages(tensor.data_ptr(), nbytes)
    return tensor


def _numpy(t):
    """A NumPy view of `t` (no copy): autograd's bookkeeping set aside."""
    t = t.detach().resolve_neg()
    if t.dtype == torch.bfloat16:
        # NumPy has no bfloat16 of its own: the bits, as ml_dtypes' type.
        bfloat16 = _v.bfloat16_dtype()
        if bfloat16 is None:
            raise TypeError(
                "a bfloat16 tensor needs ml_dtypes, which is not installed "
                "(pip install ml_dtypes)"
            )
        return t.view(torch.uint16).numpy().view(bfloat16)
    return t.numpy()


def _threads(num_threads):
    # The NumPy API checks the range; only the schema's type is checked here.
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


# --------------------------------------------------------------------------
# Metadata plans: shared by the fake and the real implementations (so that
# a bad call fails alike under torch.compile, while tracing, and eagerly)
# and by the vmap rules (which check the caller's per-problem shapes).
# Where the shapes are concrete ints they run the C-level API's metadata
# checks (cropgrad._core's gate: the NumPy API's messages, in the caller's
# layout); symbolic shapes get only what the output's shape needs, and the
# eager call checks the rest through the NumPy API.  The thread count is
# the NumPy API's to check (0 here: the default).


def _forward_plan(image, boxes, box_ind, crop_size, method, data_format):
    """Check the forward op's metadata; return (output shape, memory layout)."""
    _choice(method, _METHODS, "method")
    layout = _choice(data_format, _FORMATS, "data_format")
    depth = _image(image, layout)
    n = _boxes(boxes, box_ind)
    _one_device(image=image, boxes=boxes, box_ind=box_ind)
    crop_h, crop_w = _crop_size(crop_size)
    if _concrete(image.shape, (n, crop_h, crop_w)):
        _core.check_forward(
            tuple(image.shape),
            _CODES[image.dtype],
            n,
            crop_h,
            crop_w,
            _v.METHOD_CODES[method],
            _v.LAYOUT_CODES[layout],
            0,
        )
    if layout == "NCHW":
        shape = [n, depth, crop_h, crop_w]
    else:
        shape = [n, crop_h, crop_w, depth]
    return shape, _physical(image, layout)


def _grad_image_plan(grads, boxes, box_ind, image_size, dtype, method, data_format):
    """Check the image gradient's metadata; return (shape, memory layout)."""
    _choice(method, _METHODS, "method")
    layout = _choice(data_format, _FORMATS, "data_format")
    if dtype not in _GRAD_DTYPES:
        raise TypeError(f"dtype must be {_GRAD_DTYPE_NAMES}, got {dtype!r}")
    _grads(grads, layout)
    _v.same_num_boxes(_boxes(boxes, box_ind), tuple(grads.shape))
    _one_device(grads=grads, boxes=boxes, box_ind=box_ind)
    size = _image_size(image_size, layout)
    if _concrete(grads.shape, size):
        _core.check_grad_image(
            tuple(grads.shape),
            size,
            _CODES[dtype],
            _v.METHOD_CODES[method],
            _v.LAYOUT_CODES[layout],
            0,
        )
    return size, _physical(grads, layout)


def _grad_boxes_plan(grads, image, boxes, box_ind, method, data_format):
    """Check the boxes gradient's metadata; return the memory layout to use.

    grads and image are read by one kernel, so in one layout: when their
    memory layouts differ, the smaller of the two is converted.
    """
    _choice(method, ("bilinear",), "method")
    layout = _choice(data_format, _FORMATS, "data_format")
    _grads(grads, layout)
    _image(image, layout)
    _v.same_num_boxes(_boxes(boxes, box_ind), tuple(grads.shape))
    _one_device(grads=grads, image=image, boxes=boxes, box_ind=box_ind)
    if _concrete(grads.shape, image.shape):
        _core.check_grad_boxes(
            tuple(grads.shape),
            tuple(image.shape),
            _CODES[image.dtype],
            _v.METHOD_CODES[method],
            _v.LAYOUT_CODES[layout],
            0,
        )
    from_grads = _physical(grads, layout)
    from_image = _physical(image, layout)
    if from_grads == from_image:
        return from_grads
    return from_image if grads.numel() <= image.numel() else from_grads


def _jvp_boxes_plan(image, boxes, box_ind, boxes_tangent, crop_size, method, layout):
    """Check the boxes JVP's metadata; return (output shape, memory layout)."""
    _choice(method, ("bilinear",), "method")
    shape, physical = _forward_plan(image, boxes, box_ind, crop_size, method, layout)
    _real(boxes_tangent, "boxes_tangent")
    if tuple(boxes_tangent.shape) != tuple(boxes.shape):
        raise ValueError(
            f"boxes_tangent must have the shape of boxes {tuple(boxes.shape)}, "
            f"got {tuple(boxes_tangent.shape)}"
        )
    _one_device(image=image, boxes_tangent=boxes_tangent)
    return shape, physical


# --------------------------------------------------------------------------
# The kernels: one function an op, which checks the metadata and allocates
# the result; as the CPU kernel (`fake` false) it then runs the NumPy API on
# views of the tensors, writing into the result, and as the fake
# implementation (`fake` true) it stops there.


def _forward_kernel(
    fake,
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
    crops = _empty(shape, torch.float32, data_format, physical, image.device, fake)
    if fake:
        return crops
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


def _grad_image_kernel(
    fake,
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
    result = _empty(size, dtype, data_format, physical, grads.device, fake)
    if fake:
        return result
    out = _numpy(_in_layout(result, data_format, physical))
    _cg.crop_and_resize_grad_image(
        _numpy(_in_layout(grads, data_format, physical)),
        _numpy(boxes),
        _numpy(box_ind),
        list(out.shape),
        out.dtype,
        method,
        out=out,
        num_threads=num_threads,
        flush_denormals=flush_denormals,
        data_format=physical,
    )
    return result


def _grad_boxes_kernel(
    fake,
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
    result = boxes.new_empty((boxes.shape[0], 4), dtype=torch.float32)
    if fake:
        return result
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


def _jvp_boxes_kernel(
    fake,
    image,
    boxes,
    box_ind,
    boxes_tangent,
    crop_size,
    method,
    data_format,
    num_threads,
    flush_denormals,
):
    shape, physical = _jvp_boxes_plan(
        image, boxes, box_ind, boxes_tangent, crop_size, method, data_format
    )
    result = _empty(shape, torch.float32, data_format, physical, image.device, fake)
    if fake:
        return result
    _cg.crop_and_resize_jvp_boxes(
        _numpy(_in_layout(image, data_format, physical)),
        _numpy(boxes),
        _numpy(box_ind),
        _numpy(boxes_tangent),
        list(crop_size),
        method,
        out=_numpy(_in_layout(result, data_format, physical)),
        num_threads=num_threads,
        flush_denormals=flush_denormals,
        data_format=physical,
    )
    return result


# --------------------------------------------------------------------------
# vmap: the mapped axis folded into one call, as more images and more boxes
# (as cropgrad.jax folds it).  The caller's per-problem metadata is checked
# first, and an error in the data (a box_ind value, a non-finite box) is
# found again in the problem it belongs to, so that messages speak of the
# caller's indices, not of the folded ones.


def _logical(t, dim):
    """A meta tensor with the shape one problem of `t` has under vmap.

    (The folded call checks the devices.)
    """
    shape = [s for i, s in enumerate(t.shape) if i != dim]
    return torch.empty(shape, dtype=t.dtype, device="meta")


def _stacked(t, dim, n):
    """`t` with the mapped axis first (broadcast when `t` is not mapped)."""
    if dim is None:
        return t.expand(n, *t.shape)
    return t.movedim(dim, 0)


def _fold_index(box_ind, n, batch):
    """Indices [n, num_boxes] of problem k shifted by k * batch, flattened.

    An index outside [0, batch) stays outside the folded batch, so that the
    kernel still refuses it instead of reading another problem's image:
    negative values are kept, the others pushed past the folded end.
    """
    offset = (torch.arange(n, dtype=box_ind.dtype) * batch)[:, None]
    valid = (box_ind >= 0) & (box_ind < batch)
    outside = torch.where(box_ind < 0, box_ind, box_ind + (n - 1) * batch)
    return torch.where(valid, box_ind + offset, outside).reshape(-1)


def _fold_images(n, image, image_dim, box_ind, index_dim):
    """The images of every problem one after another, and indices into them."""
    box_ind = _stacked(box_ind, index_dim, n)
    if image_dim is None:
        return image, box_ind.reshape(-1)
    image = _stacked(image, image_dim, n)
    folded = image.reshape(n * image.shape[1], *image.shape[2:])
    return folded, _fold_index(box_ind, n, image.shape[1])


def _fold(t, dim, n):
    """`t`'s problems one after another along its first axis."""
    t = _stacked(t, dim, n)
    return t.reshape(n * t.shape[1], *t.shape[2:])


def _in_problems(call, n, tensors, in_dims, folded, call_one=None):
    """``call(*folded)``; on an error in the data, the caller's problem's.

    On failure each problem is run alone (only then: the folded call costs
    nothing more when it succeeds), and the first error found is raised with
    the problem's index along the mapped axis.
    """
    try:
        return call(*folded)
    except (ValueError, IndexError):
        for k in range(n):
            one = [t if d is None else t.select(d, k) for t, d in zip(tensors, in_dims)]
            try:
                (call_one or call)(*one)
            except (ValueError, IndexError) as exc:
                raise type(exc)(
                    f"{exc} (at index {k} of the axis torch.func.vmap maps)"
                ) from None
        raise


def _logicals(tensors, in_dims):
    """`_logical` of each of `tensors`."""
    return [_logical(t, d) for t, d in zip(tensors, in_dims)]


def _fold_all(n, tensors, in_dims, image_at, index_at):
    """The tensors of an op that reads an image, folded into one call's.

    The images one after another with the indices into them (tensors
    `image_at` and `index_at`), the others along their first axis.
    """
    folded = [
        None if i in (image_at, index_at) else _fold(t, d, n)
        for i, (t, d) in enumerate(zip(tensors, in_dims))
    ]
    folded[image_at], folded[index_at] = _fold_images(
        n, tensors[image_at], in_dims[image_at], tensors[index_at], in_dims[index_at]
    )
    return folded


def _folded_call(name, n, tensors, in_dims, folded, options, one_options=None):
    """Op `name` on the folded tensors, then `options`, under `_in_problems`.

    A problem run alone takes `one_options` when they differ.
    """
    op = getattr(torch.ops.cropgrad, name).default

    def call(*args, options=options):
        return op(*args, *options)

    def call_one(*one):
        return call(*one, options=one_options)

    return _in_problems(
        call,
        n,
        tensors,
        in_dims[: len(tensors)],
        folded,
        None if one_options is None else call_one,
    )


def _forward_vmap(
    info,
    in_dims,
    image,
    boxes,
    box_ind,
    crop_size,
    method="bilinear",
    extrapolation_value=0.0,
    data_format="NCHW",
    num_threads=None,
    flush_denormals=False,
):
    n = info.batch_size
    tensors = (image, boxes, box_ind)
    shape, _ = _forward_plan(
        *_logicals(tensors, in_dims), crop_size, method, data_format
    )
    options = (crop_size, method, extrapolation_value, data_format)
    options += (num_threads, flush_denormals)
    folded = _fold_all(n, tensors, in_dims, 0, 2)
    out = _folded_call("crop_and_resize", n, tensors, in_dims, folded, options)
    return out.reshape(n, *shape), 0


def _grad_image_vmap(
    info,
    in_dims,
    grads,
    boxes,
    box_ind,
    image_size,
    dtype=torch.float32,
    method="bilinear",
    data_format="NCHW",
    num_threads=None,
    flush_denormals=False,
):
    n = info.batch_size
    tensors = (grads, boxes, box_ind)
    size, _ = _grad_image_plan(
        *_logicals(tensors, in_dims), image_size, dtype, method, data_format
    )
    # Every problem scatters into an image gradient of its own: one of n
    # times the batch.
    folded_size = [n * size[0], *size[1:]]
    options = (dtype, method, data_format, num_threads, flush_denormals)
    folded = (
        _fold(grads, in_dims[0], n),
        _fold(boxes, in_dims[1], n),
        _fold_index(_stacked(box_ind, in_dims[2], n), n, size[0]),
    )
    out = _folded_call(
        "crop_and_resize_grad_image",
        n,
        tensors,
        in_dims,
        folded,
        (folded_size, *options),
        (size, *options),
    )
    return out.reshape(n, *size), 0


def _grad_boxes_vmap(
    info,
    in_dims,
    grads,
    image,
    boxes,
    box_ind,
    method="bilinear",
    data_format="NCHW",
    num_threads=None,
    flush_denormals=False,
):
    n = info.batch_size
    tensors = (grads, image, boxes, box_ind)
    _grad_boxes_plan(*_logicals(tensors, in_dims), method, data_format)
    options = (method, data_format, num_threads, flush_denormals)
    folded = _fold_all(n, tensors, in_dims, 1, 3)
    out = _folded_call(
        "crop_and_resize_grad_boxes", n, tensors, in_dims, folded, options
    )
    return out.reshape(n, -1, 4), 0


def _jvp_boxes_vmap(
    info,
    in_dims,
    image,
    boxes,
    box_ind,
    boxes_tangent,
    crop_size,
    method="bilinear",
    data_format="NCHW",
    num_threads=None,
    flush_denormals=False,
):
    n = info.batch_size
    tensors = (image, boxes, box_ind, boxes_tangent)
    shape, _ = _jvp_boxes_plan(
        *_logicals(tensors, in_dims), crop_size, method, data_format
    )
    options = (crop_size, method, data_format, num_threads, flush_denormals)
    folded = _fold_all(n, tensors, in_dims, 0, 2)
    out = _folded_call(
        "crop_and_resize_jvp_boxes", n, tensors, in_dims, folded, options
    )
    return out.reshape(n, *shape), 0


# --------------------------------------------------------------------------
# Derivatives: one torch.autograd.Function per op, with a backward (reverse
# mode), a jvp (forward mode) and a vmap rule generated from the ops' own,
# so that torch.func's transforms compose.  Each rule is made of the ops
# themselves, through these Functions, so that it can be differentiated in
# turn.  The derivatives are:
#
# - crop_and_resize(image, boxes): linear in the image (its JVP is the op on
#   the tangent with extrapolation 0, its transpose the image gradient); its
#   boxes JVP is crop_and_resize_jvp_boxes, whose transpose is the boxes
#   gradient.
# - crop_and_resize_grad_image(grads, boxes) = the transpose of the forward
#   op: linear in grads (JVP: itself on the tangent; transpose: the forward
#   op); since <ct, grad_image(g, b)> = <g, crop(ct, b)>, its boxes
#   gradient is grad_boxes(g, ct, b).  Its boxes JVP would need a kernel
#   cropgrad does not have.
# - crop_and_resize_grad_boxes(grads, image, boxes): linear in grads and in
#   the image (JVP: itself on either tangent); its transpose in grads is
#   crop_and_resize_jvp_boxes.
# - crop_and_resize_jvp_boxes(image, boxes, tangent): linear in the image
#   and in the tangent; its transpose in the tangent is the boxes gradient.
#
# What is missing (second derivatives in the boxes, the transposes in the
# image of the last two) raises NotImplementedError when it is needed.


def _flows(tangent):
    """Whether a tangent the jvp rule gets carries anything.

    Forward-mode AD gives a Function zeros for the floating inputs that have
    no tangent (not None), so a derivative cropgrad lacks is refused only
    for a tangent that is not all zero.  The values are read below
    torch.func's wrappers; a tangent mapped by vmap cannot be read and
    counts as one that flows.
    """
    if tangent is None:
        return False
    functorch = torch._C._functorch
    while functorch.is_functorch_wrapped_tensor(tangent):
        if functorch.is_batchedtensor(tangent):
            return True
        tangent = functorch.get_unwrapped(tangent)
    return bool(tangent.any())


def _missing(op, wrt, mode):
    return NotImplementedError(
        f"cropgrad.torch: the {mode} derivative of {op} with respect to {wrt} "
        "is not implemented (cropgrad has no kernel for it)"
    )


def _no_reverse(ctx, op, image_at, boxes_at):
    """Refuse the reverse-mode derivatives of `op` in its image and boxes."""
    if ctx.needs_input_grad[image_at]:
        raise _missing(op, "the image", "reverse-mode")
    if ctx.needs_input_grad[boxes_at]:
        raise _missing(op, "boxes", "reverse-mode")


def _apply(name, *args):
    """The Function of op `name` (eager), or the custom op (being compiled).

    torch.compile and torch.export trace the custom op, whose autograd
    formula is the Function's own; the Function itself is what torch.func's
    transforms need (TorchDynamo does not trace a custom jvp).
    """
    if torch.compiler.is_compiling():
        return getattr(torch.ops.cropgrad, name).default(*args)
    return _call(_OPS[name][-1], *args)


class _Shape(tuple):
    """A crop or image size, which the Functions take as one argument.

    torch.func flattens a Function's arguments as pytrees and, in forward
    mode under vmap, then pairs its tangents with the leaves: a list of ints
    would count as several inputs.  A subclass of tuple is a single leaf.
    """

    __slots__ = ()


def _call(function, *args):
    """``function.apply(*args)``, sizes as `_Shape`."""
    return function.apply(
        *(_Shape(a) if isinstance(a, (list, tuple)) else a for a in args)
    )


def _op_args(args):
    """The arguments of a Function as its custom op takes them."""
    return [list(a) if isinstance(a, _Shape) else a for a in args]


def _op_forward(name):
    """A Function's forward: custom op `name`, below autograd."""

    def forward(*args):
        with torch._C._AutoDispatchBelowAutograd():
            return getattr(torch.ops.cropgrad, name).default(*_op_args(args))

    return staticmethod(forward)


def _save(ctx, *tensors):
    """Keep `tensors` for the backward and the jvp alike."""
    ctx.save_for_backward(*tensors)
    ctx.save_for_forward(*tensors)


def _sampled(image, boxes, box_ind, crop_size, options):
    """The forward op, linear in `image`: samples outside it are zero."""
    method, layout, threads, flush = options
    return _call(
        _Forward, image, boxes, box_ind, crop_size, method, 0.0, layout, threads, flush
    )


def _boxes_gradient(grads, image, boxes, box_ind, options):
    """The boxes gradient in the boxes' dtype (`options`: method first)."""
    if options[0] != "bilinear":
        # Nearest sampling is piecewise constant in the boxes.
        return torch.zeros_like(boxes)
    return _call(_GradBoxes, grads, image, boxes, box_ind, *options).to(boxes.dtype)


def _linear_parts(function, args, tangents):
    """The JVP's terms of a `function` linear in each of several arguments.

    `tangents` pairs each such argument's position with its tangent (or
    None): each term is `function` with a tangent in place of its primal.
    """
    return [
        _call(function, *args[:i], t, *args[i + 1 :])
        for i, t in tangents
        if t is not None
    ]


def _total(parts):
    """The sum of one or two tangents."""
    return parts[0] if len(parts) == 1 else parts[0] + parts[1]


class _Forward(torch.autograd.Function):
    generate_vmap_rule = True
    forward = _op_forward("crop_and_resize")

    @staticmethod
    def setup_context(ctx, inputs, output):
        image, boxes, box_ind, crop_size, method, _, layout, threads, flush = inputs
        _save(ctx, image, boxes, box_ind)
        ctx.image_size = list(image.shape)
        ctx.image_dtype = image.dtype
        ctx.crop_size = list(crop_size)
        ctx.out_shape = list(output.shape)
        ctx.options = (method, layout, threads, flush)

    @staticmethod
    def backward(ctx, grad):
        image, boxes, box_ind = ctx.saved_tensors
        d_image = d_boxes = None
        if ctx.needs_input_grad[0]:
            d_image = _call(
                _GradImage,
                grad,
                boxes,
                box_ind,
                ctx.image_size,
                ctx.image_dtype,
                *ctx.options,
            )
        if ctx.needs_input_grad[1]:
            d_boxes = _boxes_gradient(grad, image, boxes, box_ind, ctx.options)
        return d_image, d_boxes, None, None, None, None, None, None, None

    @staticmethod
    def jvp(ctx, image_t, boxes_t, *_):
        image, boxes, box_ind = ctx.saved_tensors
        parts = []
        if image_t is not None:
            parts.append(_sampled(image_t, boxes, box_ind, ctx.crop_size, ctx.options))
        if boxes_t is not None and ctx.options[0] == "bilinear":
            parts.append(
                _call(
                    _JvpBoxes,
                    image,
                    boxes,
                    box_ind,
                    boxes_t,
                    ctx.crop_size,
                    *ctx.options,
                )
            )
        if not parts:  # nearest sampling, boxes only: piecewise constant
            return torch.zeros(ctx.out_shape, dtype=torch.float32)
        return _total(parts)


class _GradImage(torch.autograd.Function):
    generate_vmap_rule = True
    forward = _op_forward("crop_and_resize_grad_image")

    @staticmethod
    def setup_context(ctx, inputs, output):
        grads, boxes, box_ind, _, _, method, layout, threads, flush = inputs
        _save(ctx, grads, boxes, box_ind)
        height, width = _dims(layout)[1:]
        ctx.crop_size = [grads.shape[height], grads.shape[width]]
        ctx.grads_dtype = grads.dtype
        ctx.forward_args = inputs[3:]
        ctx.options = (method, layout, threads, flush)

    @staticmethod
    def backward(ctx, ct):
        grads, boxes, box_ind = ctx.saved_tensors
        d_grads = d_boxes = None
        if ctx.needs_input_grad[0]:
            # The transpose samples outside the image as zero.
            d_grads = _sampled(ct, boxes, box_ind, ctx.crop_size, ctx.options).to(
                ctx.grads_dtype
            )
        if ctx.needs_input_grad[1]:
            d_boxes = _boxes_gradient(grads, ct, boxes, box_ind, ctx.options)
        return d_grads, d_boxes, None, None, None, None, None, None, None

    @staticmethod
    def jvp(ctx, grads_t, boxes_t, *_):
        if ctx.options[0] == "bilinear" and _flows(boxes_t):
            raise _missing("crop_and_resize_grad_image", "boxes", "forward-mode")
        grads, boxes, box_ind = ctx.saved_tensors
        if grads_t is None:
            return torch.zeros(ctx.forward_args[0], dtype=ctx.forward_args[1])
        return _call(_GradImage, grads_t, boxes, box_ind, *ctx.forward_args)


class _GradBoxes(torch.autograd.Function):
    generate_vmap_rule = True
    forward = _op_forward("crop_and_resize_grad_boxes")

    @staticmethod
    def setup_context(ctx, inputs, output):
        grads, image, boxes, box_ind = inputs[:4]
        _save(ctx, grads, image, boxes, box_ind)
        ctx.num_boxes = boxes.shape[0]
        height, width = _dims(inputs[5])[1:]
        ctx.crop_size = [grads.shape[height], grads.shape[width]]
        ctx.grads_dtype = grads.dtype
        ctx.options = inputs[4:]

    @staticmethod
    def backward(ctx, ct):
        _no_reverse(ctx, "crop_and_resize_grad_boxes", 1, 2)
        grads, image, boxes, box_ind = ctx.saved_tensors
        d_grads = None
        if ctx.needs_input_grad[0]:
            d_grads = _call(
                _JvpBoxes, image, boxes, box_ind, ct, ctx.crop_size, *ctx.options
            ).to(ctx.grads_dtype)
        return d_grads, None, None, None, None, None, None, None

    @staticmethod
    def jvp(ctx, grads_t, image_t, boxes_t, *_):
        if _flows(boxes_t):
            raise _missing("crop_and_resize_grad_boxes", "boxes", "forward-mode")
        args = (*ctx.saved_tensors, *ctx.options)
        parts = _linear_parts(_GradBoxes, args, ((0, grads_t), (1, image_t)))
        if not parts:
            return torch.zeros(ctx.num_boxes, 4)
        return _total(parts)


class _JvpBoxes(torch.autograd.Function):
    generate_vmap_rule = True
    forward = _op_forward("crop_and_resize_jvp_boxes")

    @staticmethod
    def setup_context(ctx, inputs, output):
        image, boxes, box_ind, tangent = inputs[:4]
        _save(ctx, image, boxes, box_ind, tangent)
        ctx.tangent_dtype = tangent.dtype
        ctx.options = inputs[5:]
        ctx.forward_args = inputs[4:]

    @staticmethod
    def backward(ctx, ct):
        _no_reverse(ctx, "crop_and_resize_jvp_boxes", 0, 1)
        image, boxes, box_ind, _ = ctx.saved_tensors
        d_tangent = None
        if ctx.needs_input_grad[3]:
            d_tangent = _call(_GradBoxes, ct, image, boxes, box_ind, *ctx.options).to(
                ctx.tangent_dtype
            )
        return None, None, None, d_tangent, None, None, None, None, None

    @staticmethod
    def jvp(ctx, image_t, boxes_t, _, tangent_t, *__):
        if _flows(boxes_t):
            raise _missing("crop_and_resize_jvp_boxes", "boxes", "forward-mode")
        args = (*ctx.saved_tensors, *ctx.forward_args)
        return _total(_linear_parts(_JvpBoxes, args, ((0, image_t), (3, tangent_t))))


# --------------------------------------------------------------------------
# Registration: the custom ops' schemas (with the Python API's defaults),
# kernels, fake implementations, autograd, vmap and autocast rules.

_LIB = torch.library.Library("cropgrad", "DEF")

# name: (schema, kernel (see above), vmap rule, autograd.Function)
_OPS: dict[str, tuple[str, Callable[..., Any], Callable[..., Any], type]] = {
    "crop_and_resize": (
        "(Tensor image, Tensor boxes, Tensor box_ind, SymInt[] crop_size, "
        'str method="bilinear", float extrapolation_value=0.0, '
        'str data_format="NCHW", int? num_threads=None, '
        "bool flush_denormals=False) -> Tensor",
        _forward_kernel,
        _forward_vmap,
        _Forward,
    ),
    "crop_and_resize_grad_image": (
        "(Tensor grads, Tensor boxes, Tensor box_ind, SymInt[] image_size, "
        'ScalarType dtype=float32, str method="bilinear", '
        'str data_format="NCHW", int? num_threads=None, '
        "bool flush_denormals=False) -> Tensor",
        _grad_image_kernel,
        _grad_image_vmap,
        _GradImage,
    ),
    "crop_and_resize_grad_boxes": (
        "(Tensor grads, Tensor image, Tensor boxes, Tensor box_ind, "
        'str method="bilinear", str data_format="NCHW", int? num_threads=None, '
        "bool flush_denormals=False) -> Tensor",
        _grad_boxes_kernel,
        _grad_boxes_vmap,
        _GradBoxes,
    ),
    "crop_and_resize_jvp_boxes": (
        "(Tensor image, Tensor boxes, Tensor box_ind, Tensor boxes_tangent, "
        'SymInt[] crop_size, str method="bilinear", str data_format="NCHW", '
        "int? num_threads=None, bool flush_denormals=False) -> Tensor",
        _jvp_boxes_kernel,
        _jvp_boxes_vmap,
        _JvpBoxes,
    ),
}


def _with_defaults(op, fn, keyset=False):
    """`fn` called with every argument: the dispatcher leaves out trailing
    arguments equal to their defaults."""
    # The ScalarType default (of the image gradient's dtype, float32) comes
    # as its number.
    defaults = [
        torch.float32 if a.name == "dtype" else a.default_value
        for a in op._schema.arguments
    ]
    if keyset:
        return lambda keys, *args: fn(keys, *args, *defaults[len(args) :])
    return lambda *args: fn(*args, *defaults[len(args) :])


def _autograd_kernel(op, name, function):
    """The op's autograd: its Function when a gradient or tangent flows."""

    def kernel(keyset, *args):
        tensors = [a for a in args if isinstance(a, torch.Tensor)]
        if (torch.is_grad_enabled() and torch._C._any_requires_grad(*tensors)) or any(
            torch.autograd.forward_ad.unpack_dual(t).tangent is not None
            for t in tensors
        ):
            if torch._C._are_functorch_transforms_active():
                # torch.func reaches a Function only through its apply.
                raise NotImplementedError(
                    f"torch.func transforms of torch.ops.cropgrad.{name} are "
                    f"not supported: call cropgrad.torch.{name} instead"
                )
            return _call(function, *args)
        with torch._C._AutoDispatchBelowAutograd():
            return op.redispatch(keyset & torch._C._after_autograd_keyset, *args)

    return _with_defaults(op, kernel, keyset=True)


def _autocast_kernel(op):
    """CPU autocast: the op runs as it does outside autocast.

    The ops compute in float32 whatever they are given and read every image
    dtype exactly, so no input is cast: a lower-precision image (a bfloat16
    feature map) is read where it is, without a float32 copy, and the boxes
    are never rounded below float32.  Results are float32 (the image
    gradient: the dtype asked for), the NumPy API's bits.
    """
    autocast = torch._C.DispatchKeySet(torch._C.DispatchKey.AutocastCPU)

    def kernel(keyset, *args):
        with torch._C._ExcludeDispatchKeyGuard(autocast):
            return op(*args)

    return kernel


for _name, (_schema, _kernel, _vmap, _function) in _OPS.items():
    _LIB.define(_name + _schema, tags=(torch.Tag.pt2_compliant_tag,))
    _op = getattr(torch.ops.cropgrad, _name).default
    _LIB.impl(_name, _with_defaults(_op, functools.partial(_kernel, False)), "CPU")
    torch.library.register_fake(
        f"cropgrad::{_name}",
        _with_defaults(_op, functools.partial(_kernel, True)),
        lib=_LIB,
    )
    _autograd = _autograd_kernel(_op, _name, _function)
    _LIB.impl(_name, _autograd, "Autograd", with_keyset=True)
    _LIB.impl(_name, _autocast_kernel(_op), "AutocastCPU", with_keyset=True)
    torch.library.register_vmap(f"cropgrad::{_name}", _vmap, lib=_LIB)
del _name, _schema, _kernel, _vmap, _function, _op, _autograd


# --------------------------------------------------------------------------
# Public API


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
        uint8, uint16, int8, int16, int32, int64, float16, bfloat16,
        float32 or float64; pixels are converted to float32 as they are
        read.  Differentiable when floating.
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
    return _apply(
        "crop_and_resize",
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
    `crop_and_resize` of the incoming gradient, its JVP itself on the
    tangent) and, in reverse mode, the boxes.

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
    dtype : {torch.float32, torch.float16, torch.bfloat16, torch.float64}
        Output dtype; float16 and bfloat16 accumulate in float32 and are
        rounded once.
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
            "dtype must be torch.float16, torch.bfloat16, torch.float32 or "
            "torch.float64, got "
            f"{dtype!r}"
        )
    return _apply(
        "crop_and_resize_grad_image",
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
    CPU tensors.  Differentiable with respect to `grads` (its gradient is
    the boxes JVP of the incoming gradient) and, in forward mode, `image`.

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
    return _apply(
        "crop_and_resize_grad_boxes",
        _tensor(grads, "grads"),
        _tensor(image, "image"),
        _tensor(boxes, "boxes"),
        _tensor(box_ind, "box_ind"),
        _choice(method, ("bilinear",), "method"),
        _choice(data_format, _FORMATS, "data_format"),
        _threads(num_threads),
        _flag(flush_denormals, "flush_denormals"),
    )
