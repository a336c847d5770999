"""Tensors as the kernels read and write them: memory layouts, NumPy views,
allocation.

Tensors are read where they are: a tensor contiguous in the other layout
than the call's (an NCHW tensor in ``channels_last`` memory format is NHWC
in memory) goes to the other layout's kernel without a copy, and the result
is allocated in the memory layout of what it is computed from.
"""

import torch

from cropgrad import _core

__all__ = []

# The permutation that turns a 4-D tensor of one layout into the other.
_TO_OTHER = {"NCHW": (0, 2, 3, 1), "NHWC": (0, 3, 1, 2)}
_OTHER = {"NCHW": "NHWC", "NHWC": "NCHW"}


def physical(t, layout):
    """The layout `t`'s memory is in: `layout`, or the other one.

    A tensor contiguous in the other layout is read where it is, by the
    other layout's kernel.  Anything else is made contiguous.
    """
    if t.is_contiguous():
        return layout
    if t.permute(_TO_OTHER[layout]).is_contiguous():
        return _OTHER[layout]
    return layout


def common(first, second, layout):
    """The memory layout in which to read two tensors one kernel reads.

    When their memory layouts differ, the smaller of the two is converted.
    """
    from_first = physical(first, layout)
    from_second = physical(second, layout)
    if from_first == from_second:
        return from_first
    return from_second if first.numel() <= second.numel() else from_first


def in_layout(t, layout, memory):
    """`t` (shaped in `layout`) as a contiguous tensor shaped in `memory`."""
    if memory != layout:
        t = t.permute(_TO_OTHER[layout])
    return t.contiguous()


def in_memory(shape, layout, memory):
    """A 4-D `shape` of `layout` in the order of the axes of `memory`."""
    if memory == layout:
        return shape
    return [shape[i] for i in _TO_OTHER[layout]]


def empty(shape, dtype, layout, memory, device, fake):
    """A new tensor of `shape` (in `layout`) whose memory is in `memory`
    (`fake`: the fake implementation's, which has no memory)."""
    tensor = _new_tensor(in_memory(shape, layout, memory), dtype, device, fake)
    return tensor if memory == layout else tensor.permute(_TO_OTHER[memory])


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
    if not fake and tensor.device.type == "cpu" and nbytes >= _core.HUGE_PAGES_FROM:
        _core.advise_huge_pages(tensor.data_ptr(), nbytes)
    return tensor


def numpy(t):
    """A NumPy view of `t` (no copy): autograd's bookkeeping set aside.

    NumPy has no bfloat16: such a tensor is read through `buffer`.
    """
    if t.requires_grad:
        t = t.detach()
    if t.is_neg():
        t = t.resolve_neg()
    return t.numpy()


def buffer(t):
    """A NumPy view of `t`'s memory for a bridge that is told its dtype by
    code: bfloat16 as uint16 (its bits), so that ml_dtypes is not needed."""
    if t.dtype == torch.bfloat16:
        t = t.view(torch.uint16)
    return numpy(t)
