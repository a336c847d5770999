"""torchvision's feature-pyramid pooling on cropgrad's RoIAlign
(`cropgrad.torch.MultiScaleRoIAlign`).

The level of each box and the scale of each feature map follow
torchvision's ``MultiScaleRoIAlign`` operation for operation, in the same
dtypes, so that a box goes to the level torchvision sends it to:

- a feature map's scale is ``2 ** round(log2(h / H))`` with ``h`` its
  height and ``H`` the largest image height (the logarithm and the
  rounding, half to even, in float32; the widths do not count);
- a box of area ``A`` goes to level ``floor(canonical_level +
  log2(sqrt(A) / canonical_scale) + 1e-6)`` (in the boxes' dtype), clamped
  to the pyramid's levels.

May import: PyTorch, cropgrad._torch.checks, cropgrad._torch.registration.
"""

import torch

from cropgrad._torch import checks, registration

__all__ = []

_EPS = 1e-6


def infer_scale(feature, image_size):
    """The spatial scale of `feature` (``[..., h, w]``) for images of
    `image_size` (``(H, W)``), a power of two."""
    approx = float(feature.shape[-2]) / float(image_size[0])
    exponent = torch.tensor(approx, dtype=torch.float32).log2().round()
    return 2.0 ** float(exponent)


def setup_scales(features, image_shapes):
    """The scale of each feature map and the pyramid's finest and coarsest
    levels ``(k_min, k_max)``."""
    if not image_shapes:
        raise ValueError(
            "image_shapes is empty: give the (height, width) of each image "
            "before the backbone"
        )
    largest = (
        max(int(s[0]) for s in image_shapes),
        max(int(s[1]) for s in image_shapes),
    )
    scales = [infer_scale(f, largest) for f in features]
    levels = [
        int(-torch.log2(torch.tensor(s, dtype=torch.float32)).item())
        for s in (scales[0], scales[-1])
    ]
    return scales, tuple(levels)


def box_levels(boxes, k_min, k_max, canonical_scale, canonical_level):
    """The index into the feature maps of each box of the list `boxes`."""
    widths_heights = [(b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1]) for b in boxes]
    size = torch.sqrt(torch.cat(widths_heights))
    level = torch.floor(
        canonical_level
        + torch.log2(size / canonical_scale)
        + torch.tensor(_EPS, dtype=size.dtype)
    )
    level = torch.clamp(level, min=k_min, max=k_max)
    return level.to(torch.int64) - k_min


def _rois(boxes):
    """A list of ``Tensor[L, 4]`` as torchvision's ``Tensor[K, 5]``."""
    coordinates = torch.cat(list(boxes), dim=0)
    index = torch.cat(
        [
            torch.full_like(b[:, :1], n, dtype=coordinates.dtype)
            for n, b in enumerate(boxes)
        ],
        dim=0,
    )
    return torch.cat([index, coordinates], dim=1)


def _pool(feature, rois, output_size, scale, sampling_ratio):
    args = checks.roi_public(feature, rois, output_size, scale, sampling_ratio, False)
    return registration.call_checked("roi_align", args)


def pool(features, boxes, output_size, sampling_ratio, scales, levels, canonical):
    """Each box pooled from its level's feature map (`levels`: the
    pyramid's ``(k_min, k_max)``, `canonical`: ``(canonical_scale,
    canonical_level)``); a result in the dtype of the first map."""
    for n, b in enumerate(boxes):
        checks.tensor(b, f"boxes[{n}]")
        if b.dim() != 2 or b.shape[1] != 4:
            raise ValueError(
                f"boxes[{n}] must be 2-D with 4 columns [x1, y1, x2, y2] (one "
                f"Tensor[L, 4] per image), got shape {tuple(b.shape)}"
            )
    rois = _rois(boxes)
    if len(features) == 1:
        return _pool(features[0], rois, output_size, scales[0], sampling_ratio)
    level_of = box_levels(boxes, *levels, *canonical)
    first = features[0]
    result = first.new_zeros((len(rois), first.shape[1], *output_size))
    for level, (feature, scale) in enumerate(zip(features, scales)):
        at = torch.where(level_of == level)[0]
        pooled = _pool(feature, rois[at], output_size, scale, sampling_ratio)
        result[at] = pooled.to(result.dtype)
    return result


def output_pair(output_size):
    """torchvision's module's output size: an int is a square."""
    if isinstance(output_size, int):
        return (output_size, output_size)
    return tuple(output_size)
