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
conversions would do, the kernels do here: float32 contiguous boxes,
grads and tangents, a native int32 or int64 ``box_ind``, the codes of the
dtypes, the method and the layout, the thread count's range.
"""

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


def _arrays(a, memory, result):
    """What the bridge takes: NumPy views of the call's tensors and of its
    `result`, converted as the NumPy API converts them, and the codes.

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
    x["box_ind"], x["box_ind_code"] = _v.native_index(x["box_ind"])
    if "image" in x:
        x["image_code"] = checks.CODES[a.image.dtype]
    x["method"] = _v.METHOD_CODES[a.method]
    x["layout"] = _v.LAYOUT_CODES[memory]
    x["flush"] = bool(a.flush_denormals)
    return x


def crop_and_resize(a, fake):
    shape = checks.forward_plan(a)
    memory = tensors.physical(a.image, a.data_format)
    crops = tensors.empty(
        shape, torch.float32, a.data_format, memory, a.image.device, fake
    )
    if fake:
        return crops
    x = _arrays(a, memory, crops)
    _core.crop_and_resize(
        x["image"],
        x["image_code"],
        x["boxes"],
        x["box_ind"],
        x["box_ind_code"],
        a.crop_size[0],
        a.crop_size[1],
        x["method"],
        a.extrapolation_value,
        x["layout"],
        x["out"],
        x["num_threads"],
        x["flush"],
    )
    return crops


def crop_and_resize_grad_image(a, fake):
    shape = checks.grad_image_plan(a)
    memory = tensors.physical(a.grads, a.data_format)
    result = tensors.empty(shape, a.dtype, a.data_format, memory, a.grads.device, fake)
    if fake:
        return result
    x = _arrays(a, memory, result)
    _core.grad_image(
        x["grads"],
        x["boxes"],
        x["box_ind"],
        x["box_ind_code"],
        x["out"].shape,
        x["out"],
        checks.CODES[a.dtype],
        x["method"],
        x["layout"],
        x["num_threads"],
        x["flush"],
    )
    return result


def crop_and_resize_grad_boxes(a, fake):
    shape = checks.grad_boxes_plan(a)
    memory = tensors.common(a.grads, a.image, a.data_format)
    result = a.boxes.new_empty(shape, dtype=torch.float32)
    if fake:
        return result
    x = _arrays(a, memory, result)
    _core.grad_boxes(
        x["grads"],
        x["image"],
        x["image_code"],
        x["boxes"],
        x["box_ind"],
        x["box_ind_code"],
        x["out"],
        x["method"],
        x["layout"],
        x["num_threads"],
        x["flush"],
    )
    return result


def crop_and_resize_jvp_boxes(a, fake):
    shape = checks.jvp_boxes_plan(a)
    memory = tensors.physical(a.image, a.data_format)
    result = tensors.empty(
        shape, torch.float32, a.data_format, memory, a.image.device, fake
    )
    if fake:
        return result
    x = _arrays(a, memory, result)
    _core.jvp_boxes(
        x["image"],
        x["image_code"],
        x["boxes"],
        x["boxes_tangent"],
        x["box_ind"],
        x["box_ind_code"],
        a.crop_size[0],
        a.crop_size[1],
        x["method"],
        x["layout"],
        x["out"],
        x["num_threads"],
        x["flush"],
    )
    return result
