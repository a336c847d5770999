"""The CPU kernels and fake implementations of the PyTorch ops.

One function an op, ``kernel(a, fake)`` with `a` the call's arguments by
name (`checks.bind`): it runs the op's metadata plan and allocates the
result; as the fake implementation (`fake` true: torch.compile's tracing,
meta tensors) it stops there, and as the CPU kernel it then runs the NumPy
API on views of the tensors, writing into the result.
"""

import torch

import cropgrad as _cg
from cropgrad._torch import checks, tensors

__all__ = []


def _read(t, a, memory):
    """Image, grads or result `t` (in the call's layout) as an array in
    `memory`."""
    return tensors.numpy(tensors.in_layout(t, a.data_format, memory))


def _options(a, memory):
    """The options every op of the NumPy API takes, by name."""
    return {
        "num_threads": a.num_threads,
        "flush_denormals": a.flush_denormals,
        "data_format": memory,
    }


def crop_and_resize(a, fake):
    shape = checks.forward_plan(a)
    memory = tensors.physical(a.image, a.data_format)
    crops = tensors.empty(
        shape, torch.float32, a.data_format, memory, a.image.device, fake
    )
    if fake:
        return crops
    _cg.crop_and_resize(
        _read(a.image, a, memory),
        tensors.numpy(a.boxes),
        tensors.numpy(a.box_ind),
        list(a.crop_size),
        a.method,
        a.extrapolation_value,
        out=_read(crops, a, memory),
        **_options(a, memory),
    )
    return crops


def crop_and_resize_grad_image(a, fake):
    shape = checks.grad_image_plan(a)
    memory = tensors.physical(a.grads, a.data_format)
    result = tensors.empty(shape, a.dtype, a.data_format, memory, a.grads.device, fake)
    if fake:
        return result
    out = _read(result, a, memory)
    _cg.crop_and_resize_grad_image(
        _read(a.grads, a, memory),
        tensors.numpy(a.boxes),
        tensors.numpy(a.box_ind),
        list(out.shape),
        out.dtype,
        a.method,
        out=out,
        **_options(a, memory),
    )
    return result


def crop_and_resize_grad_boxes(a, fake):
    shape = checks.grad_boxes_plan(a)
    memory = tensors.common(a.grads, a.image, a.data_format)
    result = a.boxes.new_empty(shape, dtype=torch.float32)
    if fake:
        return result
    _cg.crop_and_resize_grad_boxes(
        _read(a.grads, a, memory),
        _read(a.image, a, memory),
        tensors.numpy(a.boxes),
        tensors.numpy(a.box_ind),
        a.method,
        out=result.numpy(),
        **_options(a, memory),
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
    _cg.crop_and_resize_jvp_boxes(
        _read(a.image, a, memory),
        tensors.numpy(a.boxes),
        tensors.numpy(a.box_ind),
        tensors.numpy(a.boxes_tangent),
        list(a.crop_size),
        a.method,
        out=_read(result, a, memory),
        **_options(a, memory),
    )
    return result
