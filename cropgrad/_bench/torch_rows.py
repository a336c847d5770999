"""PyTorch rows of the benchmark (private): ``extra_rows(workload, quick)``.

For the detector workload, in PyTorch's NCHW layout, three ways to compute
the same crops are timed side by side, in rounds:

``torch_op``
    `cropgrad.torch.crop_and_resize` (the custom op; it allocates its
    output), and for forward + backward ``torch.autograd.grad`` of it with
    respect to the image and the boxes;
``numpy_api``
    the NumPy API on the same memory (``data_format="NCHW"``, allocating
    its results): `cropgrad.crop_and_resize`, plus
    `cropgrad.crop_and_resize_grad_image` and
    `cropgrad.crop_and_resize_grad_boxes` for forward + backward.  The
    ratio ``torch_op_over_numpy_api`` is the cost of the PyTorch wrapper;
``grid_sample``
    what PyTorch code does today: ``F.affine_grid`` from the boxes (the
    affine map of each box onto ``[-1, 1]``) and
    ``F.grid_sample(align_corners=True)``, one call per image of the
    batch, then the crops in box order; the same ``torch.autograd.grad``
    for forward + backward.  It differs from TensorFlow's op (so from
    cropgrad's bits) in its rounding, and near the image border, where
    ``grid_sample`` blends in zeros while TensorFlow samples a box inside
    the image and extrapolates outside: both are reported, as the largest
    absolute difference over all elements and over the samples inside the
    image.

A round times each column once (a block of back-to-back calls lasting at
least ``block`` seconds) in an order that rotates from round to round; a
column's time is the median over rounds, a ratio the median of the
per-round ratios.  Each row is a dict::

    {"name", "workload", "data_format", "about", "rounds", "threads",
     "median_s": {column: seconds}, "ratios": {name: value},
     "max_abs_diff": {what: value}}
"""

import math
import time

import numpy as np

import cropgrad

__all__ = ["extra_rows"]

SEED = 20240603
TORCH_OP, NUMPY_API, GRID_SAMPLE = "torch_op", "numpy_api", "grid_sample"
COLUMNS = (TORCH_OP, NUMPY_API, GRID_SAMPLE)


def extra_rows(workload, quick=False):
    """The PyTorch rows of `workload` (a list of dicts; empty without torch).

    Parameters
    ----------
    workload : object
        A benchmark workload with ``name``, ``image_size`` (NHWC),
        ``num_boxes`` and ``crop``.  Only the ``"detector"`` workload has
        PyTorch rows.
    quick : bool
        Fewer and shorter rounds.
    """
    if getattr(workload, "name", None) != "detector":
        return []
    try:
        import torch
    except ImportError:
        return []
    import cropgrad.torch  # noqa: F401  (registers the custom ops)

    problem = _problem(torch, workload)
    rounds, block = (5, 0.02) if quick else (15, 0.2)
    rows = []
    for backward in (False, True):
        fns = _columns(torch, problem, backward)
        samples = _measure(fns, rounds, block)
        medians = {k: float(np.median(v)) for k, v in samples.items()}
        kind = "forward_backward" if backward else "forward"
        rows.append(
            {
                "name": f"{workload.name}-torch-{kind}",
                "workload": workload.name,
                "data_format": "NCHW",
                "about": (
                    "crop_and_resize, then its gradients with respect to the "
                    "image and the boxes"
                    if backward
                    else "crop_and_resize"
                )
                + " of the detector's feature maps, float32 NCHW tensors",
                "rounds": rounds,
                "threads": {
                    "cropgrad": cropgrad.show_config("dicts")["default_threads"],
                    "torch": torch.get_num_threads(),
                },
                "median_s": medians,
                "ratios": {
                    "torch_op_over_numpy_api": _paired(
                        samples[TORCH_OP], samples[NUMPY_API]
                    ),
                    "grid_sample_over_torch_op": _paired(
                        samples[GRID_SAMPLE], samples[TORCH_OP]
                    ),
                },
                "max_abs_diff": _differences(torch, problem, backward),
            }
        )
    return rows


def _problem(torch, workload):
    """NCHW tensors of the workload's geometry.

    Boxes ``[y1, x1, y1 + h, x1 + w]`` with ``y1, x1 ~ U(-0.1, 0.7)`` and
    ``h, w ~ U(0.05, 0.5)`` (so some reach past the image border), sorted
    random ``box_ind``, a standard-normal image and gradient.
    """
    batch, height, width, depth = workload.image_size
    n = workload.num_boxes
    rng = np.random.default_rng(SEED)
    y1, x1 = rng.uniform(-0.1, 0.7, n), rng.uniform(-0.1, 0.7, n)
    h, w = rng.uniform(0.05, 0.5, n), rng.uniform(0.05, 0.5, n)
    boxes = np.stack([y1, x1, y1 + h, x1 + w], axis=1).astype(np.float32)
    box_ind = np.sort(rng.integers(0, batch, n)).astype(np.int32)
    image = rng.standard_normal((batch, depth, height, width), dtype=np.float32)
    grads = rng.standard_normal((n, depth, *workload.crop), dtype=np.float32)
    return {
        "image": torch.from_numpy(image),
        "boxes": torch.from_numpy(boxes),
        "box_ind": torch.from_numpy(box_ind),
        "grads": torch.from_numpy(grads),
        "crop": tuple(workload.crop),
    }


def grid_sample_crops(torch, image, boxes, box_ind, crop):
    """crop_and_resize as PyTorch code writes it with ``grid_sample``.

    ``align_corners=True`` maps -1 and 1 to the centres of the first and
    last pixels, so the box ``[y1, x1, y2, x2]`` (normalized the same way)
    is the affine map ``u -> (x2 - x1) * u + (x1 + x2 - 1)`` along x (and
    likewise along y) of the crop's ``linspace(-1, 1)``.
    """
    import torch.nn.functional as F

    y1, x1, y2, x2 = boxes.unbind(1)
    zero = torch.zeros_like(y1)
    theta = torch.stack(
        [
            torch.stack([x2 - x1, zero, x1 + x2 - 1], dim=1),
            torch.stack([zero, y2 - y1, y1 + y2 - 1], dim=1),
        ],
        dim=1,
    )
    n, depth = boxes.shape[0], image.shape[1]
    grid = F.affine_grid(theta, [n, depth, *crop], align_corners=True)
    # One grid_sample per image: the boxes of an image as one tall grid.
    order = torch.argsort(box_ind, stable=True)
    counts = torch.bincount(box_ind, minlength=image.shape[0]).tolist()
    pieces = []
    start = 0
    for i, count in enumerate(counts):
        if count == 0:
            continue
        g = grid[order[start : start + count]].reshape(1, count * crop[0], crop[1], 2)
        out = F.grid_sample(
            image[i : i + 1],
            g,
            mode="bilinear",
            padding_mode="zeros",
            align_corners=True,
        )
        pieces.append(out.reshape(depth, count, *crop).transpose(0, 1))
        start += count
    crops = torch.cat(pieces)
    if not torch.equal(order, torch.arange(n)):
        crops = crops[torch.argsort(order)]
    return crops


def _columns(torch, p, backward):
    """The three columns: {name: no-argument callable}."""
    import cropgrad.torch as cgt

    image, boxes, box_ind, grads, crop = (
        p["image"],
        p["boxes"],
        p["box_ind"],
        p["grads"],
        p["crop"],
    )
    np_image, np_boxes = image.numpy(), boxes.numpy()
    np_index, np_grads = box_ind.numpy(), grads.numpy()
    image_g = image.clone().requires_grad_()
    boxes_g = boxes.clone().requires_grad_()

    def numpy_forward():
        return cropgrad.crop_and_resize(
            np_image, np_boxes, np_index, crop, data_format="NCHW"
        )

    if not backward:
        return {
            TORCH_OP: lambda: cgt.crop_and_resize(image, boxes, box_ind, crop),
            NUMPY_API: numpy_forward,
            GRID_SAMPLE: lambda: grid_sample_crops(torch, image, boxes, box_ind, crop),
        }

    def torch_op():
        crops = cgt.crop_and_resize(image_g, boxes_g, box_ind, crop)
        return torch.autograd.grad(crops, (image_g, boxes_g), grads)

    def numpy_api():
        numpy_forward()
        d_image = cropgrad.crop_and_resize_grad_image(
            np_grads, np_boxes, np_index, np_image.shape, data_format="NCHW"
        )
        d_boxes = cropgrad.crop_and_resize_grad_boxes(
            np_grads, np_image, np_boxes, np_index, data_format="NCHW"
        )
        return d_image, d_boxes

    def grid_sample():
        crops = grid_sample_crops(torch, image_g, boxes_g, box_ind, crop)
        return torch.autograd.grad(crops, (image_g, boxes_g), grads)

    return {TORCH_OP: torch_op, NUMPY_API: numpy_api, GRID_SAMPLE: grid_sample}


def _differences(torch, p, backward):
    """Largest absolute differences of grid_sample from cropgrad's bits."""
    import cropgrad.torch as cgt

    image, boxes, box_ind, grads, crop = (
        p["image"],
        p["boxes"],
        p["box_ind"],
        p["grads"],
        p["crop"],
    )
    if not backward:
        ours = cgt.crop_and_resize(image, boxes, box_ind, crop)
        theirs = grid_sample_crops(torch, image, boxes, box_ind, crop)
        # Samples outside the image come out as NaN here: the others are
        # the samples inside it.
        inside = ~torch.isnan(
            cgt.crop_and_resize(image, boxes, box_ind, crop, "bilinear", math.nan)
        )
        diff = (ours - theirs).abs()
        return {
            "crops": float(diff.max()),
            "crops_inside_samples": float(diff[inside].max()),
        }
    # The gradients again from the samples inside the image only (grads
    # zeroed elsewhere), where the two differ by rounding alone.
    outside = torch.isnan(
        cgt.crop_and_resize(image, boxes, box_ind, crop, "bilinear", math.nan)
    )
    found = {}
    for suffix, g in (("", grads), ("_inside_samples", grads.masked_fill(outside, 0))):
        results = []
        for fn in (cgt.crop_and_resize, None):
            x = image.clone().requires_grad_()
            b = boxes.clone().requires_grad_()
            if fn is None:
                crops = grid_sample_crops(torch, x, b, box_ind, crop)
            else:
                crops = fn(x, b, box_ind, crop)
            results.append(torch.autograd.grad(crops, (x, b), g))
        (d_image, d_boxes), (gs_image, gs_boxes) = results
        found[f"d_image{suffix}"] = float((d_image - gs_image).abs().max())
        found[f"d_boxes{suffix}"] = float((d_boxes - gs_boxes).abs().max())
        found[f"d_boxes{suffix}_relative"] = float(
            (d_boxes - gs_boxes).abs().max() / d_boxes.abs().max()
        )
    return found


def _time_block(fn, calls):
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - start) / calls


def _measure(fns, rounds, block):
    """Per-call seconds of each column in each round: {name: [seconds]}."""
    calls = {}
    for name, fn in fns.items():
        fn()  # thread pools, page faults, first-call caches
        estimate = _time_block(fn, 1)
        calls[name] = max(1, math.ceil(block / max(estimate, 1e-7)))
    samples = {name: [] for name in fns}
    names = list(fns)
    for r in range(rounds):
        shift = r % len(names)
        for name in names[shift:] + names[:shift]:
            fn = fns[name]
            fn()  # untimed: the previous column's threads settle
            samples[name].append(_time_block(fn, calls[name]))
    return samples


def _paired(num, den):
    """Median over rounds of num[r] / den[r]."""
    return float(np.median([a / b for a, b in zip(num, den)]))
