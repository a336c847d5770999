"""The CPU kernels and fake implementations of the PyTorch ops.

One function an op, ``kernel(a, fake)`` with `a` the call's arguments by
name (`checks.bind`), named after its family and kind and found by `kernel`
from the op model: it runs the op's metadata plan and allocates the
result; as the fake implementation (`fake` true: torch.compile's tracing,
meta tensors) it stops there, and as the CPU kernel it then calls the
NumPy bridge of cropgrad._core on views of the tensors, writing into the
result.  The plan ran the gate (the C-level API's metadata checks) on the
call's concrete shapes, so the bridge, which checks only the data (finite
boxes, ``box_ind`` in range) before the kernel, is called directly: the
metadata of an eager call is checked once.  What the NumPy API's
conversions would do, the kernels do here (`_arguments`): float32
contiguous boxes, grads and tangents, a native int32 or int64 ``box_ind``,
the codes of the dtypes, the method and the layout, the thread count's
range (RoIAlign's: `_roi_arguments`).  Every bridge is passed its
arguments by the names its signature gives them (cropgrad/_core.pyi).
"""

import functools
import inspect

import numpy as np
import torch

from cropgrad import _core
from cropgrad._api import grid_sample as _grid_api
from cropgrad._api import validation as _v
from cropgrad._torch import checks, grid_plans, tensors

__all__ = []


# The tensors read in the call's memory layout (the others have one layout).
_LAID_OUT = ("image", "grads")
# The tensors the kernels read as float32, in the order the NumPy API
# converts them.
_FLOAT32 = ("grads", "boxes", "boxes_tangent")


def _arguments(a, memory, result):
    """What the bridges take, by their names: NumPy views of the call's
    tensors and of its `result`, converted as the NumPy API converts them,
    and the codes.  A bfloat16 image or result is viewed as its bits (the
    bridge reads the dtype's code), bfloat16 grads are converted by PyTorch:
    ml_dtypes is not needed.

    The thread count's range is checked here, once the metadata has passed
    (its type was checked before dispatch).
    """
    x = {}
    for name in checks.ARRAYS[a._op]:
        t = getattr(a, name)
        if name in _FLOAT32 and t.dtype == torch.bfloat16:
            # Exactly, by PyTorch: NumPy has no bfloat16 of its own.
            t = t.to(torch.float32)
        if name in _LAID_OUT:
            t = tensors.in_layout(t, a.data_format, memory)
        x[name] = tensors.buffer(t)
    if result.dim() == 4:  # (the boxes gradient, [num_boxes, 4], has no layout)
        result = tensors.in_layout(result, a.data_format, memory)
    x["out"] = tensors.buffer(result)
    x["num_threads"] = _v.threads(a.num_threads)
    for name in _FLOAT32:
        if name in x:
            x[name] = _v.float32_array(x[name], name)
    x["box_ind"], x["box_ind_dtype"] = _v.native_index(x["box_ind"])
    if "image" in x:
        x["image_dtype"] = checks.CODES[a.image.dtype]
    x["method"] = _v.METHOD_CODES[a.method]
    x["layout"] = _v.LAYOUT_CODES[memory]
    x["flush"] = bool(a.flush_denormals)
    return x


_PARAMETERS: dict[object, tuple[str, ...]] = {}


def _run(a, fake, result, memory, bridge, **more):
    """`result` (fake: as it is) computed by `bridge`, a function of
    cropgrad._core, from the tensors of call `a` read in layout `memory`
    (`more`: the bridge's arguments that are not those its family's
    `_ARGUMENTS` give), each passed as the bridge's parameter of its name."""
    if fake:
        return result
    x = _ARGUMENTS[checks.OPS[a._op].family](a, memory, result)
    x.update(more)
    names = _PARAMETERS.get(bridge)
    if names is None:
        names = _PARAMETERS[bridge] = tuple(inspect.signature(bridge).parameters)
    bridge(*[x[n] for n in names])
    return result


def _bridge(a):
    """The bridge of call `a`: cropgrad._core names each after its op."""
    return getattr(_core, a._op)


def _crops(a, fake, shape, bridge, **more):
    """The crops of the forward op or of the boxes JVP (`shape`: the plan's),
    float32 in the memory layout of the image."""
    memory = tensors.physical(a.image, a.data_format)
    crops = tensors.empty(
        shape, torch.float32, a.data_format, memory, a.image.device, fake
    )
    crop_height, crop_width = a.crop_size
    return _run(
        a,
        fake,
        crops,
        memory,
        bridge,
        crop_height=crop_height,
        crop_width=crop_width,
        **more,
    )


def _crop_forward(a, fake):
    return _crops(
        a,
        fake,
        checks.forward_plan(a),
        _bridge(a),
        extrapolation_value=a.extrapolation_value,
    )


def _crop_jvp_coords(a, fake):
    return _crops(a, fake, checks.jvp_boxes_plan(a), _bridge(a))


def _crop_grad_image(a, fake):
    shape = checks.grad_image_plan(a)
    memory = tensors.physical(a.grads, a.data_format)
    result = tensors.empty(shape, a.dtype, a.data_format, memory, a.grads.device, fake)
    return _run(
        a,
        fake,
        result,
        memory,
        _bridge(a),
        image_size=tensors.in_memory(shape, a.data_format, memory),
        output_dtype=checks.CODES[a.dtype],
    )


def _crop_grad_coords(a, fake):
    shape = checks.grad_boxes_plan(a)
    memory = tensors.common(a.grads, a.image, a.data_format)
    result = a.boxes.new_empty(shape, dtype=torch.float32)
    return _run(a, fake, result, memory, _bridge(a))


# --------------------------------------------------------------------------
# RoIAlign: NCHW tensors (read where they are: ``channels_last`` memory goes
# to the NHWC kernel) and torchvision's boxes ``Tensor[K, 5]``, whose first
# column is split off here into the image indices.  Boxes, grads and
# tangents are converted to the arithmetic type by PyTorch (no ml_dtypes
# for bfloat16); images and results are read and written as they are.


def _image_indices(boxes, batch):
    """Column 0 of torchvision's boxes as int64 image indices, checked: whole
    numbers in ``[0, batch)``."""
    # float64 holds every value of every dtype exactly (NaN as NaN).
    column = tensors.numpy(boxes[:, 0].to(torch.float64))
    with np.errstate(invalid="ignore"):
        index = column.astype(np.int64)
    whole = index == column
    if whole.all() and (not len(index) or (index.min() >= 0 and index.max() < batch)):
        return index
    bad = ~whole | (index < 0) | (index >= batch)
    k = int(np.flatnonzero(bad)[0])
    if np.trunc(column[k]) != column[k]:  # (an integer beyond int64 is whole)
        raise ValueError(
            "boxes[:, 0] must hold the index of each box's image, a whole "
            f"number: boxes[{k}, 0] = {column[k]}"
        )
    raise IndexError(
        "boxes[:, 0] (each box's image) has values outside [0, batch_size) "
        f"= [0, {batch}): boxes[{k}, 0] = {column[k]:g}"
    )


def _coordinates(boxes, arithmetic):
    """Columns 1 to 4 of torchvision's boxes (or of a tangent of them),
    contiguous in the arithmetic type."""
    return tensors.numpy(boxes[:, 1:].to(arithmetic).contiguous())


_INT64 = _v.CODES["CG_INT64"]


def _roi_arguments(a, memory, out):
    """What RoIAlign's bridges take, by their names: NumPy views of the
    call's tensors and of `out` in layout `memory`, the image indices split
    off the boxes, the codes; the arithmetic type is that of the image
    (of grads for the image gradient)."""
    data = a.image if "image" in a._fields else a.grads
    arithmetic = checks.roi_arithmetic(data.dtype)
    # The indices are checked first: they are the only data refused here.
    batch = a.image.shape[0] if "image" in a._fields else out.shape[0]
    x = {
        "box_ind": _image_indices(a.boxes, batch),
        "box_ind_dtype": _INT64,
        "boxes": _coordinates(a.boxes, arithmetic),
        "boxes_dtype": checks.CODES[arithmetic],
        "spatial_scale": float(a.spatial_scale),
        "sampling_ratio": int(a.sampling_ratio),
        "aligned": bool(a.aligned),
        "layout": _v.LAYOUT_CODES[memory],
        "output_dtype": checks.CODES[out.dtype],
        "num_threads": 0,
        "flush": False,
    }
    if "image" in a._fields:
        x["image"] = tensors.buffer(tensors.in_layout(a.image, "NCHW", memory))
        x["image_dtype"] = checks.CODES[a.image.dtype]
    if "grads" in a._fields:
        x["grads_dtype"] = checks.CODES[arithmetic]
        grads = a.grads.to(arithmetic)
        x["grads"] = tensors.numpy(tensors.in_layout(grads, "NCHW", memory))
    if "boxes_tangent" in a._fields:
        x["boxes_tangent"] = _coordinates(a.boxes_tangent, arithmetic)
    if out.dim() == 4:  # (the boxes gradient, [num_boxes, 4], has no layout)
        x["out"] = tensors.buffer(tensors.in_layout(out, "NCHW", memory))
    else:
        x["out"] = tensors.numpy(out)
    return x


def _pooled(a, fake, plan, bridge):
    """The pooled output of RoIAlign or of its boxes JVP, in the image's
    memory layout."""
    shape, dtype = plan(a)
    memory = tensors.physical(a.image, "NCHW")
    out = tensors.empty(shape, dtype, "NCHW", memory, a.image.device, fake)
    height, width = shape[2:]
    return _run(a, fake, out, memory, bridge, output_height=height, output_width=width)


def _roi_forward(a, fake):
    return _pooled(a, fake, checks.roi_forward_plan, _bridge(a))


def _roi_jvp_coords(a, fake):
    return _pooled(a, fake, checks.roi_jvp_boxes_plan, _bridge(a))


def _roi_grad_image(a, fake):
    shape, dtype = checks.roi_grad_image_plan(a)
    memory = tensors.physical(a.grads, "NCHW")
    out = tensors.empty(shape, dtype, "NCHW", memory, a.grads.device, fake)
    image_size = tensors.in_memory(shape, "NCHW", memory)
    bridge = _bridge(a)
    return _run(a, fake, out, memory, bridge, image_size=image_size)


def _roi_grad_coords(a, fake):
    shape, dtype = checks.roi_grad_boxes_plan(a)
    out = a.boxes.new_empty(shape, dtype=dtype)
    if fake:
        return out
    memory = tensors.common(a.grads, a.image, "NCHW")
    return _run(a, fake, out, memory, _bridge(a))


# What each family's bridges take, by their names.
_ARGUMENTS = {"crop_and_resize": _arguments, "roi_align": _roi_arguments}

# --------------------------------------------------------------------------
# Grid sampling: the NumPy API's functions (cropgrad._api.grid_sample) on
# NumPy views of the tensors, writing into the result.  They check the data
# (a non-finite grid) and convert what their kernels need (other dtypes
# to the arithmetic type; an image in ``channels_last`` memory is read in
# place by the NHWC kernels, or changed to NCHW where those are slower),
# nothing more; bfloat16 is converted by PyTorch instead
# (NumPy has none without ml_dtypes), exactly, which is the conversion the
# NumPy API makes.


def _grid_view(t):
    """A NumPy view of `t` as the NumPy API reads it: bfloat16 as float32."""
    return tensors.numpy(t.to(torch.float32) if t.dtype == torch.bfloat16 else t)


def _grid_run(a, fake, plan, function, *operands, dtype_argument=True):
    """The result of `plan` for call `a` computed by `function` of the NumPy
    API from `operands` (tensors), in contiguous NCHW memory (PyTorch's
    grid_sample returns its samples so too)."""
    shape, dtype = plan(a)
    like = operands[0]
    result = tensors.empty(shape, dtype, "NCHW", "NCHW", like.device, fake)
    if fake:
        return result
    options = {
        "mode": a.mode,
        "padding_mode": a.padding_mode,
        "align_corners": bool(a.align_corners),  # None: False
    }
    views = [_grid_view(t) for t in operands]
    if dtype == torch.bfloat16:
        # The samples in float32, rounded once to bfloat16 by PyTorch.
        if dtype_argument:
            options["dtype"] = "float32"
        result.copy_(torch.from_numpy(function(*views, **options)))
        return result
    function(*views, out=tensors.numpy(result), **options)
    return result


def _grid_forward(a, fake):
    plan = grid_plans.forward_plan
    return _grid_run(a, fake, plan, _grid_api.grid_sample, a.image, a.grid)


def _grid_jvp_coords(a, fake):
    plan = grid_plans.jvp_grid_plan
    function = _grid_api.grid_sample_jvp_grid
    return _grid_run(a, fake, plan, function, a.image, a.grid, a.grid_tangent)


def _grid_grad_image(a, fake):
    function = functools.partial(
        _grid_api.grid_sample_grad_image, image_size=tuple(a.image_size)
    )
    plan = grid_plans.grad_image_plan
    return _grid_run(a, fake, plan, function, a.grads, a.grid)


def _grid_grad_coords(a, fake):
    plan = grid_plans.grad_grid_plan
    function = _grid_api.grid_sample_grad_grid
    return _grid_run(
        a, fake, plan, function, a.grads, a.image, a.grid, dtype_argument=False
    )


# Each family's kernels by op kind (cropgrad._ops.KINDS): an op's kernel is
# that of its family and kind (`kernel`).
_KERNELS = {
    "crop_and_resize": {
        "forward": _crop_forward,
        "grad_image": _crop_grad_image,
        "grad_coords": _crop_grad_coords,
        "jvp_coords": _crop_jvp_coords,
    },
    "roi_align": {
        "forward": _roi_forward,
        "grad_image": _roi_grad_image,
        "grad_coords": _roi_grad_coords,
        "jvp_coords": _roi_jvp_coords,
    },
    "grid_sample": {
        "forward": _grid_forward,
        "grad_image": _grid_grad_image,
        "grad_coords": _grid_grad_coords,
        "jvp_coords": _grid_jvp_coords,
    },
}


def kernel(op):
    """The CPU kernel and fake implementation of `op` (an op of the model)."""
    return _KERNELS[op.family][op.kind]
