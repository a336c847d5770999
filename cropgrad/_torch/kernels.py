"""The CPU kernels and fake implementations of the PyTorch ops.

One function an op, ``kernel(a, fake)`` with `a` the call's arguments by
name (`checks.bind`): it runs the op's metadata plan and allocates the
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
range.  The bridge takes its arguments by the names its signature gives
them (cropgrad/_core.pyi).
"""

import inspect

import torch

from cropgrad import _core
from cropgrad._api import validation as _v
from cropgrad._torch import checks, tensors

__all__ = []


# The tensors read in the call's memory layout (the others have one layout).
_LAID_OUT = ("image", "grads")
# The tensors the kernels read as float32, in the order the NumPy API
# converts them.
_FLOAT32 = ("grads", "boxes", "boxes_tangent")


def _arguments(a, memory, result):
    """What the bridges take, by their names: NumPy views of the call's
    tensors and of its `result`, converted as the NumPy API converts them,
    and the codes.

    The thread count's range is checked here, once the metadata has passed
    (its type was checked before dispatch).
    """
    x = {}
    for name in checks.ARRAYS[a._op]:
        t = getattr(a, name)
        if name in _LAID_OUT:
            t = tensors.in_layout(t, a.data_format, memory)
        x[name] = tensors.numpy(t)
    if result.dim() == 4:  # (the boxes gradient, [num_boxes, 4], has no layout)
        result = tensors.in_layout(result, a.data_format, memory)
    x["out"] = tensors.numpy(result)
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
    (`more`: the bridge's arguments that are not `_arguments`')."""
    if fake:
        return result
    x = _arguments(a, memory, result)
    x.update(more)
    names = _PARAMETERS.get(bridge)
    if names is None:
        names = _PARAMETERS[bridge] = tuple(inspect.signature(bridge).parameters)
    bridge(*[x[n] for n in names])
    return result


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


def crop_and_resize(a, fake):
    return _crops(
        a,
        fake,
        checks.forward_plan(a),
        _core.crop_and_resize,
        extrapolation_value=a.extrapolation_value,
    )


def crop_and_resize_jvp_boxes(a, fake):
    return _crops(a, fake, checks.jvp_boxes_plan(a), _core.jvp_boxes)


def crop_and_resize_grad_image(a, fake):
    shape = checks.grad_image_plan(a)
    memory = tensors.physical(a.grads, a.data_format)
    result = tensors.empty(shape, a.dtype, a.data_format, memory, a.grads.device, fake)
    return _run(
        a,
        fake,
        result,
        memory,
        _core.grad_image,
        image_size=tensors.in_memory(shape, a.data_format, memory),
        output_dtype=checks.CODES[a.dtype],
    )


def crop_and_resize_grad_boxes(a, fake):
    shape = checks.grad_boxes_plan(a)
    memory = tensors.common(a.grads, a.image, a.data_format)
    result = a.boxes.new_empty(shape, dtype=torch.float32)
    return _run(a, fake, result, memory, _core.grad_boxes)
