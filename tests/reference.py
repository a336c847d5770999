"""Independent NumPy references for the three operations.

Plain Python loops over samples, written from SPEC.md: slow, but easy to
check by eye.  Sampling coordinates use NumPy float32 scalars so every
rounding is float32.  Two accumulation modes for the image gradient:

- ``exact=True``: float32 products added in the serial order into the
  output dtype (float32 or float64): TensorFlow's bits under IEEE
  arithmetic (no flushing of subnormals).
- ``exact=False``: everything in float64, as the accuracy yardstick.
"""

import math

import numpy as np

f32 = np.float32


def sample_coords(lo, hi, size, crop, ratio=False):
    """Float32 image coordinates of every crop index along one axis."""
    with np.errstate(all="ignore"):  # huge boxes overflow, as in the kernel
        return _sample_coords(f32(lo), f32(hi), size, crop, ratio)


def _sample_coords(lo, hi, size, crop, ratio):
    if crop > 1:
        if ratio:
            scale = f32((hi - lo) * f32(f32(size - 1) / f32(crop - 1)))
        else:
            scale = f32(f32((hi - lo) * f32(size - 1)) / f32(crop - 1))
        return [f32(lo * f32(size - 1) + f32(f32(i) * scale)) for i in range(crop)]
    return [f32(0.5 * float(f32(lo + hi)) * float(size - 1))]


def _inside(c, size):
    return bool(c >= 0) and bool(c <= f32(size - 1))


def _taps(c):
    lo = math.floor(float(c))
    hi = math.ceil(float(c))
    return lo, hi, f32(c - f32(lo))


def _nearest(c):
    # C's roundf: halves away from zero (c >= 0 here).
    # float(c) + 0.5 is exact in double for any float32 c, so floor() of it
    # is roundf.
    return int(math.floor(float(c) + 0.5))


def grad_image(
    grads, boxes, box_ind, image_size, method="bilinear", dtype=np.float64, exact=False
):
    """Image gradient of crop-and-resize (see module docstring)."""
    grads = np.asarray(grads, dtype=np.float32)
    boxes = np.asarray(boxes, dtype=np.float32)
    batch, H, W, D = (int(v) for v in image_size)
    acc_dtype = np.dtype(dtype) if exact else np.dtype(np.float64)
    out = np.zeros((batch, H, W, D), dtype=acc_dtype)
    N, ch, cw, _ = grads.shape
    for b in range(N):
        y1, x1, y2, x2 = boxes[b]
        bi = int(box_ind[b])
        ys = sample_coords(y1, y2, H, ch)
        xs = sample_coords(x1, x2, W, cw)
        for y, cy in enumerate(ys):
            if not _inside(cy, H):
                continue
            for x, cx in enumerate(xs):
                if not _inside(cx, W):
                    continue
                g = grads[b, y, x]
                if method == "nearest":
                    out[bi, _nearest(cy), _nearest(cx)] += g.astype(acc_dtype)
                    continue
                top, bottom, yl = _taps(cy)
                left, right, xl = _taps(cx)
                if exact:
                    one = f32(1)
                    dtop = (one - yl) * g  # float32 arrays
                    dbottom = yl * g
                    out[bi, top, left] += ((one - xl) * dtop).astype(acc_dtype)
                    out[bi, top, right] += (xl * dtop).astype(acc_dtype)
                    out[bi, bottom, left] += ((one - xl) * dbottom).astype(acc_dtype)
                    out[bi, bottom, right] += (xl * dbottom).astype(acc_dtype)
                else:
                    g64 = g.astype(np.float64)
                    wy, wx = float(yl), float(xl)
                    out[bi, top, left] += (1 - wy) * (1 - wx) * g64
                    out[bi, top, right] += (1 - wy) * wx * g64
                    out[bi, bottom, left] += wy * (1 - wx) * g64
                    out[bi, bottom, right] += wy * wx * g64
    return out


def crop_and_resize(
    image, boxes, box_ind, crop_size, method="bilinear", extrapolation_value=0.0
):
    """Forward op in float64 (pixels read as float32, as the op does)."""
    image = np.asarray(image).astype(np.float32).astype(np.float64)
    boxes = np.asarray(boxes, dtype=np.float32)
    _, H, W, D = image.shape
    ch, cw = crop_size
    N = boxes.shape[0]
    out = np.full((N, ch, cw, D), float(f32(extrapolation_value)))
    for b in range(N):
        y1, x1, y2, x2 = boxes[b]
        img = image[int(box_ind[b])]
        ys = sample_coords(y1, y2, H, ch)
        xs = sample_coords(x1, x2, W, cw)
        for y, cy in enumerate(ys):
            if not _inside(cy, H):
                continue
            for x, cx in enumerate(xs):
                if not _inside(cx, W):
                    continue
                if method == "nearest":
                    out[b, y, x] = img[_nearest(cy), _nearest(cx)]
                    continue
                top, bottom, yl = _taps(cy)
                left, right, xl = _taps(cx)
                wy, wx = float(yl), float(xl)
                upper = img[top, left] + (img[top, right] - img[top, left]) * wx
                lower = (
                    img[bottom, left] + (img[bottom, right] - img[bottom, left]) * wx
                )
                out[b, y, x] = upper + (lower - upper) * wy
    return out
