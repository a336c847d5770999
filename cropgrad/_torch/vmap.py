"""The vmap rules of the PyTorch ops: the mapped axis folded into one call.

The problems become more images and more boxes of one call of the op (as
cropgrad.jax folds them).  The caller's per-problem metadata is checked
first, by the op's fake implementation on tensors of one problem's shape,
and an error in the data (a ``box_ind`` value, a non-finite box) is found
again in the problem it belongs to, so that messages speak of the caller's
indices, not of the folded ones.

One rule serves every op.  In the crop_and_resize family, an op that reads
an image folds the images one after another and shifts each problem's
``box_ind`` into its own; the image gradient, which writes an image,
scatters each problem into an image gradient of its own.  Every other
tensor is folded along its first axis.

RoIAlign's ops (`_roi_folded`) do the same with torchvision's boxes
``Tensor[K, 5]``, whose column 0 holds the image indices: they are shifted
there, in float64, which holds every index and every coordinate exactly
(the kernels convert the coordinates to their arithmetic type, which gives
the same values from float64 as from the boxes' own dtype).  Grid
sampling's (`_grid_folded`) fold every tensor along its batch axis.
"""

import torch

from cropgrad._torch import checks

__all__ = []


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


def _shifted(box_ind, n, batch):
    """Indices [n, num_boxes] of problem k shifted by k * batch.

    An index outside [0, batch) stays outside the folded batch, so that the
    kernel still refuses it instead of reading another problem's image:
    negative values are kept, the others pushed past the folded end.
    """
    offset = (torch.arange(n, dtype=box_ind.dtype) * batch)[:, None]
    valid = (box_ind >= 0) & (box_ind < batch)
    outside = torch.where(box_ind < 0, box_ind, box_ind + (n - 1) * batch)
    return torch.where(valid, box_ind + offset, outside)


def _fold_index(box_ind, n, batch):
    """Indices [n, num_boxes] of problem k shifted by k * batch, flattened
    (`_shifted`)."""
    return _shifted(box_ind, n, batch).reshape(-1)


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


def _folded(a, dims, n, shape):
    """The arguments of the one call that computes the `n` problems of `a`
    (`shape`: one problem's result)."""
    folded = {
        name: _fold(getattr(a, name), dim, n)
        for name, dim in dims.items()
        if name not in ("image", "box_ind")
    }
    if "image" in dims:
        folded["image"], folded["box_ind"] = _fold_images(
            n, a.image, dims["image"], a.box_ind, dims["box_ind"]
        )
    else:
        # Every problem scatters into an image gradient of its own: one of n
        # times the batch.
        batch = shape[0]
        box_ind = _stacked(a.box_ind, dims["box_ind"], n)
        folded["box_ind"] = _fold_index(box_ind, n, batch)
        folded["image_size"] = [n * batch, *shape[1:]]
    return a.replace(**folded)


def _in_problems(op, n, a, dims, folded):
    """``op(*folded)``; on an error in the data, the caller's problem's.

    On failure each problem is run alone (only then: the folded call costs
    nothing more when it succeeds), and the first error found is raised with
    the problem's index along the mapped axis.
    """
    try:
        return op(*folded)
    except (ValueError, IndexError):
        for k in range(n):
            one = {
                name: getattr(a, name).select(d, k)
                for name, d in dims.items()
                if d is not None
            }
            try:
                op(*a.replace(**one))
            except (ValueError, IndexError) as exc:
                raise type(exc)(
                    f"{exc} (at index {k} of the axis torch.func.vmap maps)"
                ) from None
        raise


def rule(name, kernel):
    """The vmap rule of op `name`, whose fake implementation is
    ``kernel(a, True)``: one call of the op on the problems folded together
    (RoIAlign's with torchvision's boxes, `_roi_folded`)."""
    fold = _FOLDS.get(checks.OPS[name].family, _folded)

    def vmap(info, in_dims, *args):
        n = info.batch_size
        a = checks.bind(name, args)
        dims = dict(zip(checks.ARRAYS[name], in_dims))
        one = a.replace(**{k: _logical(getattr(a, k), d) for k, d in dims.items()})
        shape = list(kernel(one, True).shape)
        op = getattr(torch.ops.cropgrad, name).default
        out = _in_problems(op, n, a, dims, fold(a, dims, n, shape))
        return out.reshape(n, *shape), 0

    return vmap


def _fold_roi_boxes(boxes, dim, n, batch):
    """torchvision's boxes of every problem one after another, in float64;
    with `batch` (the images folded too), each problem's image indices
    shifted into its own images."""
    boxes = _stacked(boxes, dim, n).to(torch.float64)
    if batch is not None:
        index = _shifted(boxes[..., 0], n, batch)
        boxes = torch.cat([index[..., None], boxes[..., 1:]], dim=-1)
    return boxes.reshape(-1, 5)


def _roi_folded(a, dims, n, shape):
    """The arguments of the one RoIAlign call that computes the `n`
    problems of `a` (`shape`: one problem's result)."""
    folded = {
        name: _fold(getattr(a, name), dim, n)
        for name, dim in dims.items()
        if name not in ("image", "boxes")
    }
    if "image" in dims:
        dim = dims["image"]
        batch = None
        if dim is not None:
            batch = _stacked(a.image, dim, n).shape[1]
            folded["image"] = _fold(a.image, dim, n)
        folded["boxes"] = _fold_roi_boxes(a.boxes, dims["boxes"], n, batch)
    else:
        # Every problem scatters into an image gradient of its own.
        batch = shape[0]
        folded["boxes"] = _fold_roi_boxes(a.boxes, dims["boxes"], n, batch)
        folded["image_size"] = [n * batch, *shape[1:]]
    return a.replace(**folded)


def _grid_folded(a, dims, n, shape):
    """The arguments of the one grid-sampling call that computes the `n`
    problems of `a` (`shape`: one problem's result): every tensor's batch
    axis holds the problems one after another (each batch entry is sampled,
    and its image gradient summed, on its own, so the bits are those of the
    problems apart); the image gradient is one of n times the batch."""
    folded = {name: _fold(getattr(a, name), dim, n) for name, dim in dims.items()}
    if "image_size" in a._fields:
        folded["image_size"] = [n * shape[0], *shape[1:]]
    return a.replace(**folded)


# The folding of each family whose tensors are not crop_and_resize's.
_FOLDS = {"roi_align": _roi_folded, "grid_sample": _grid_folded}
