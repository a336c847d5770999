"""RoIAlign's boxes derivatives, forward and reverse mode (NumPy model; see
"Arithmetic of the boxes derivative" in the package's docstring)."""

import numpy as np

from .forward import (
    _corners,
    _inside_samples,
    _pooled_problem,
    _read_boxes,
    _read_image,
    arithmetic_type,
    f32,
    f64,
)

# The boxes gradient's sums are kept in this many lanes (channel c in lane
# c % LANES), as the kernels keep them.
LANES = 8


# --------------------------------------------------------------------------
# The boxes derivatives


def _coord_factors(axis, p, i, pooled, spatial_scale, exact, T):
    """``(dc/dlo, dc/dhi)`` of sample `i` of bin `p`; dc/dhi None if held."""
    if exact:
        s = T(spatial_scale)
        if axis.size_held:
            return s, None
        q = T(T(f32(i) + f32(0.5)) / T(axis.grid))
        frac = T(T(T(p) + q) / T(pooled))
        return T(s * T(T(1) - frac)), T(s * frac)
    s = float(T(spatial_scale))
    if axis.size_held:
        return s, None
    frac = (p + (i + 0.5) / axis.grid) / pooled
    return s * (1 - frac), s * frac


def _factor_table(axis, pooled, spatial_scale, exact, T):
    """``table[p][i]``: `_coord_factors` of sample `i` of bin `p`."""
    return [
        [
            _coord_factors(axis, p, i, pooled, spatial_scale, exact, T)
            for i in range(axis.grid)
        ]
        for p in range(pooled)
    ]


def _slopes(img, ty, tx, exact):
    """Per channel ``(slope_y, slope_x)``, each None where a clamp holds."""
    v1, v2, v3, v4 = _corners(img, ty, tx)
    if exact:
        hy, ly, hx, lx = ty.rest, ty.lerp, tx.rest, tx.lerp
    else:
        ly, lx = f64(ty.lerp), f64(tx.lerp)
        hy, hx = 1 - ly, 1 - lx
    slope_y = None if ty.held else hx * (v3 - v1) + lx * (v4 - v2)
    slope_x = None if tx.held else hy * (v2 - v1) + ly * (v4 - v3)
    return slope_y, slope_x


def _rates(axis, t_lo, t_hi, pooled, spatial_scale, exact, T):
    """``rates[p][i]``: how fast sample `i` of bin `p` moves along the tangent."""
    return [
        [
            t_lo * f_lo if f_hi is None else t_lo * f_lo + t_hi * f_hi
            for f_lo, f_hi in row
        ]
        for row in _factor_table(axis, pooled, spatial_scale, exact, T)
    ]


def roi_align_jvp_boxes(
    image,
    boxes,
    box_ind,
    boxes_tangent,
    output_size,
    spatial_scale=1.0,
    sampling_ratio=-1,
    aligned=False,
    exact=False,
):
    """The derivative of `roi_align` along a tangent of the boxes.

    Parameters
    ----------
    image, boxes, box_ind, output_size, spatial_scale, sampling_ratio, aligned
        As for `roi_align`.
    boxes_tangent : array_like of shape (K, 4)
        ``[t_x1, t_y1, t_x2, t_y2]`` per box, read in the arithmetic type.
    exact : bool, default False
        float64 (the definition) or the arithmetic type in the proposed
        order: "Arithmetic of the boxes derivative" in the module
        docstring.

    Returns
    -------
    ndarray of shape (K, C, out_h, out_w)
        float64, or the arithmetic type with ``exact=True``.

    Examples
    --------
    A ramp rising by 1 per column; moving the box right by 1 moves every
    sample right by 1:

    >>> image = np.tile(np.arange(5.0), (1, 1, 5, 1))
    >>> jvp = roi_align_jvp_boxes(image, [[1, 1, 3, 3]], [0], [[1, 0, 1, 0]], 2)
    >>> jvp[0, 0].tolist()
    [[1.0, 1.0], [1.0, 1.0]]
    """
    params = (spatial_scale, sampling_ratio, aligned)
    T, pixels, box_ind, geometries, out = _pooled_problem(
        image, boxes, box_ind, output_size, params, exact
    )
    channels, out_h, out_w = out.shape[1:]
    with np.errstate(all="ignore"):
        tangent = np.asarray(boxes_tangent, dtype=np.float64).reshape(-1, 4)
        tangent = tangent.astype(T) if exact else tangent.astype(T).astype(f64)
        for k, (rows, cols, count) in enumerate(geometries):
            t_x1, t_y1, t_x2, t_y2 = tangent[k]
            img = pixels[box_ind[k]]
            rate_y = _rates(rows, t_y1, t_y2, out_h, spatial_scale, exact, T)
            rate_x = _rates(cols, t_x1, t_x2, out_w, spatial_scale, exact, T)
            for ph in range(out_h):
                for pw in range(out_w):
                    acc = np.zeros(channels, out.dtype)
                    for iy, ty, ix, tx in _inside_samples(rows, cols, ph, pw):
                        slope_y, slope_x = _slopes(img, ty, tx, exact)
                        if slope_y is None and slope_x is None:
                            continue
                        if slope_x is None:
                            term = slope_y * rate_y[ph][iy]
                        elif slope_y is None:
                            term = slope_x * rate_x[pw][ix]
                        else:
                            term = slope_y * rate_y[ph][iy] + slope_x * rate_x[pw][ix]
                        acc = acc + term
                    out[k, :, ph, pw] = acc / (count if exact else f64(count))
    return out


def roi_align_grad_boxes(
    grads,
    image,
    boxes,
    box_ind,
    spatial_scale=1.0,
    sampling_ratio=-1,
    aligned=False,
    exact=False,
):
    """The gradient of `roi_align` with respect to the boxes.

    The transpose of `roi_align_jvp_boxes`: for any ``t`` and ``g``,
    ``sum(jvp(t) * g) == sum(t * grad(g))`` up to rounding.

    Parameters
    ----------
    grads : array_like of shape (K, C, out_h, out_w)
        Read in the arithmetic type of `image`.
    image, boxes, box_ind, spatial_scale, sampling_ratio, aligned
        As for `roi_align`.
    exact : bool, default False
        As for `roi_align_jvp_boxes`.

    Returns
    -------
    ndarray of shape (K, 4)
        ``d/d[x1, y1, x2, y2]``: float64, or the arithmetic type with
        ``exact=True``.

    Examples
    --------
    A ramp rising by 1 per column: moving ``x1`` (or ``x2``) by one moves
    the samples by a half on average, in each of the four bins:

    >>> image = np.tile(np.arange(5.0), (1, 1, 5, 1))
    >>> grads = np.ones((1, 1, 2, 2))
    >>> roi_align_grad_boxes(grads, image, [[1, 1, 3, 3]], [0]).tolist()
    [[2.0, 0.0, 2.0, 0.0]]
    """
    T = arithmetic_type(np.asarray(image).dtype)
    pixels = _read_image(image, T)
    channels = pixels.shape[1]
    with np.errstate(all="ignore"):
        grads = np.asarray(grads).astype(T)
    _, _, out_h, out_w = grads.shape
    params = (spatial_scale, sampling_ratio, aligned)
    box_ind, geometries = _read_boxes(
        boxes, box_ind, pixels.shape, (out_h, out_w), params, T
    )
    if not exact:
        pixels = pixels.astype(f64)
        grads = grads.astype(f64)
    out = np.zeros((len(box_ind), 4), T if exact else f64)
    with np.errstate(all="ignore"):
        for k, (rows, cols, count) in enumerate(geometries):
            img = pixels[box_ind[k]]
            factors_y = _factor_table(rows, out_h, spatial_scale, exact, T)
            factors_x = _factor_table(cols, out_w, spatial_scale, exact, T)
            # Terms of S_x1, S_y1, S_x2, S_y2, in the serial order.
            terms = ([], [], [], [])
            for ph in range(out_h):
                for pw in range(out_w):
                    g = grads[k, :, ph, pw]
                    for iy, ty, ix, tx in _inside_samples(rows, cols, ph, pw):
                        slope_y, slope_x = _slopes(img, ty, tx, exact)
                        for slope, (f_lo, f_hi), lo, hi in (
                            (slope_y, factors_y[ph][iy], 1, 3),
                            (slope_x, factors_x[pw][ix], 0, 2),
                        ):
                            if slope is None:
                                continue
                            gs = slope * g
                            terms[lo].append(gs * f_lo)
                            if f_hi is not None:
                                terms[hi].append(gs * f_hi)
            if exact:
                sums = [_lane_sum(t, T, channels) for t in terms]
                out[k] = [T(s / count) for s in sums]
            else:
                sums = [float(np.sum(t)) if t else 0.0 for t in terms]
                out[k] = [s / float(count) for s in sums]
    return out


def _lane_sum(terms, T, channels):
    """A sum of the per-channel `terms` (one array of `channels` values per
    sample) in T, as the kernels add it: each channel's terms from left to
    right, then the channels' sums in ``LANES`` lanes (channel ``c`` in lane
    ``c % LANES``, each lane from channel to channel), combined as ``((l0 +
    l1) + (l2 + l3)) + ((l4 + l5) + (l6 + l7))``.
    """
    if terms:
        per_sample = np.stack([np.asarray(t, T).reshape(-1) for t in terms])
        leading = np.zeros((1, channels), T)
        channel_sums = np.cumsum(np.concatenate([leading, per_sample]), 0, T)[-1]
    else:
        channel_sums = np.zeros(channels, T)
    lanes = [_serial_sum([channel_sums[lane::LANES]], T) for lane in range(LANES)]
    return T(
        T(T(lanes[0] + lanes[1]) + T(lanes[2] + lanes[3]))
        + T(T(lanes[4] + lanes[5]) + T(lanes[6] + lanes[7]))
    )


def _serial_sum(chunks, T):
    """``((0 + v0) + v1) + ...`` in T over the concatenated chunks.

    ``np.cumsum`` adds strictly from left to right in the given dtype; the
    leading 0 makes an all-negative-zero sum +0, as a loop starting at 0.
    """
    values = np.concatenate([np.zeros(1, T)] + [np.asarray(c, T) for c in chunks])
    return np.cumsum(values, dtype=T)[-1]
