"""torchvision's ``MultiScaleRoIAlign`` on the RoIAlign model (see the
package's docstring)."""

import numpy as np

from .forward import _pair, arithmetic_type, f32, f64, roi_align

# --------------------------------------------------------------------------
# MultiScaleRoIAlign


def infer_scale(feature_size, image_size):
    """The spatial scale of a feature map, as torchvision infers it.

    ``2 ** round(log2(float32(feature_h / image_h)))``, rounding halves to
    even: only the heights count.

    Examples
    --------
    >>> infer_scale((32, 40), (128, 160))
    0.25
    """
    approx = f32(float(feature_size[0]) / float(image_size[0]))
    return 2.0 ** float(np.round(np.log2(approx)))


def fpn_levels(boxes, k_min, k_max, canonical_scale=224, canonical_level=4, eps=1e-6):
    """The pyramid level of each box, torchvision's ``LevelMapper``.

    In float32: ``floor(canonical_level + log2(sqrt(area) / canonical_scale)
    + eps)`` clamped to ``[k_min, k_max]``, minus ``k_min``.

    Parameters
    ----------
    boxes : array_like of shape (K, 4)
        ``[x1, y1, x2, y2]``, read as float32.
    k_min, k_max : int
        The finest and coarsest levels (``-log2`` of their scales).

    Returns
    -------
    ndarray of shape (K,), dtype=int64
        Indices into the list of feature maps.

    Examples
    --------
    >>> fpn_levels([[0, 0, 16, 16], [0, 0, 112, 112]], 2, 4).tolist()
    [0, 1]
    """
    boxes = np.asarray(boxes, dtype=f32).reshape(-1, 4)
    with np.errstate(all="ignore"):
        area = (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])
        level = f32(canonical_level) + np.log2(np.sqrt(area) / f32(canonical_scale))
        level = np.floor(level + f32(eps))
    level = np.clip(level, k_min, k_max)
    return level.astype(np.int64) - k_min


def multi_scale_roi_align(
    features,
    boxes,
    image_sizes,
    output_size,
    sampling_ratio,
    canonical_scale=224,
    canonical_level=4,
    exact=True,
):
    """torchvision's ``MultiScaleRoIAlign`` on its feature maps, finest first.

    Parameters
    ----------
    features : sequence of array_like of shape (N, C, H_l, W_l)
        The pyramid's levels, the finest first.
    boxes : sequence of array_like of shape (K_n, 4)
        The boxes of each image, ``[x1, y1, x2, y2]`` in image coordinates.
    image_sizes : sequence of (int, int)
        ``(height, width)`` of each image; their maxima give the scales.
    output_size : int or (int, int)
    sampling_ratio : int
    canonical_scale, canonical_level : int
        Of the level mapping (`fpn_levels`).
    exact : bool, default True
        As for `roi_align`.

    Returns
    -------
    out : ndarray of shape (sum K_n, C, out_h, out_w)
    levels : ndarray of shape (sum K_n,)
        The level of each box.
    scales : list of float
        The spatial scale of each level.
    """
    original = (
        max(int(s[0]) for s in image_sizes),
        max(int(s[1]) for s in image_sizes),
    )
    scales = [infer_scale(np.shape(f)[-2:], original) for f in features]
    k_min = int(-np.log2(f32(scales[0])))
    k_max = int(-np.log2(f32(scales[-1])))
    all_boxes = np.concatenate([np.asarray(b).reshape(-1, 4) for b in boxes])
    box_ind = np.concatenate(
        [np.full(len(np.asarray(b).reshape(-1, 4)), n) for n, b in enumerate(boxes)]
    ).astype(np.int64)
    levels = fpn_levels(all_boxes, k_min, k_max, canonical_scale, canonical_level)
    out_h, out_w = _pair(output_size)
    first = np.asarray(features[0])
    dtype = arithmetic_type(first.dtype) if exact else f64
    out = np.zeros((len(all_boxes), first.shape[1], out_h, out_w), dtype)
    for level, (feature, scale) in enumerate(zip(features, scales)):
        at = np.flatnonzero(levels == level)
        out[at] = roi_align(
            feature,
            all_boxes[at],
            box_ind[at],
            (out_h, out_w),
            scale,
            sampling_ratio,
            False,
            exact,
        )
    return out, levels, scales
