"""PyTorch rows of the benchmark: `cropgrad.torch` in NCHW (private).

Two rows, on the detector's problem in PyTorch's layout (NCHW float32
tensors), each timing side by side:

- the custom op: ``cgt.crop_and_resize`` (``cropgrad_1thread`` /
  ``cropgrad_default``; the op allocates its output, as PyTorch ops do),
  and for forward + backward ``torch.autograd.grad`` of it with respect to
  the image and the boxes (``torch_op``);
- ``numpy_api``: the NumPy API on the same memory (``data_format="NCHW"``,
  allocating its results): ``torch_op_over_numpy_api`` is the cost of the
  PyTorch wrapper;
- ``grid_sample``: what PyTorch code does today, ``F.affine_grid`` from the
  boxes and ``F.grid_sample(align_corners=True)``, one call per image, the
  crops in box order; the same autograd call for forward + backward
  (``grid_sample_over_torch_op``).

``grid_sample`` is close to TensorFlow's op (so to cropgrad's bits) but not
equal: rounding differs, and near the border it blends in zeros where
TensorFlow samples a box inside the image and extrapolates outside.  The
largest absolute differences (all elements, and the samples inside the
image only) are measured once while the rows are built: in each row's
``figures`` and its ``about`` line.

The forward row follows ``detector-forward``, the forward + backward row
``detector`` (see `cropgrad_bench` for the contract of adapter rows).

RoIAlign: two rows on torchvision's Faster R-CNN box pooler (``roi-fpn``,
NCHW float32 tensors), beside the references' columns of the RoIAlign
rows (``torchvision`` in its worker process):

- ``roi-fpn-forward-torch`` (after ``roi-fpn-forward``):
  ``cgt.roi_align`` (``cropgrad_default``) against the NumPy API on the
  same memory (``numpy_api``) and ``torchvision.ops.roi_align``;
- ``roi-fpn-torch-forward-backward`` (after ``roi-fpn-grad-boxes``, whose
  problem has the feature map and ``grads``): ``cgt.roi_align`` then
  ``torch.autograd.grad`` with respect to the feature map
  (``cropgrad_default``), as torchvision's autograd computes it (the
  ``torchvision`` column: its forward op and ``_roi_align_backward``); the
  boxes as well (``torch_op_input_and_boxes``), which torchvision cannot;
  the NumPy API's forward op and input gradient (``numpy_api``).

Targets on these rows: the PyTorch op within 1.15x of the NumPy API, and
forward + backward at least 1.8x torchvision's speed.
"""

import math

import numpy as np
import torch
import torch.nn.functional as F

import cropgrad
import cropgrad.torch as cgt

from .workloads import FORWARD_BACKWARD

__all__ = ["extra_rows", "grid_sample_crops"]

SEED = 20240603
TO_NCHW = (0, 3, 1, 2)


def extra_rows(workload, quick):
    """The PyTorch rows that follow `workload` (a list of row dicts)."""
    if workload.name == "detector-forward":
        return [_forward_row(workload)]
    if workload.name == "detector":
        return [_backward_row(workload)]
    if workload.name == "roi-fpn-forward":
        return [_roi_forward_row(workload)]
    if workload.name == "roi-fpn-grad-boxes":
        return [_roi_backward_row(workload)]
    return []


def grid_sample_crops(image, boxes, box_ind, crop):
    """crop_and_resize as PyTorch code writes it with ``grid_sample``.

    ``align_corners=True`` maps -1 and 1 to the centres of the first and
    last pixels, so the box ``[y1, x1, y2, x2]`` (normalized the same way)
    is the affine map ``u -> (x2 - x1) * u + (x1 + x2 - 1)`` along x (and
    likewise along y) of the crop's ``linspace(-1, 1)``.
    """
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


def _tensors(workload):
    """NCHW tensors of the detector's problem: image, boxes, box_ind, grads."""
    p = workload.problem()
    batch, height, width, depth = workload.image_size
    n = p["boxes"].shape[0]
    if "image" in p:
        image = np.ascontiguousarray(p["image"].transpose(TO_NCHW))
    else:
        image = np.random.default_rng([SEED, 2]).standard_normal(
            (batch, depth, height, width), dtype=np.float32
        )
    if "grads" in p:
        grads = np.ascontiguousarray(p["grads"].transpose(TO_NCHW))
    else:
        grads = np.random.default_rng([SEED, 1]).standard_normal(
            (n, depth, *workload.crop), dtype=np.float32
        )
    return (
        torch.from_numpy(image),
        torch.from_numpy(p["boxes"]),
        torch.from_numpy(p["box_ind"]),
        torch.from_numpy(grads),
    )


def _inside(image, boxes, box_ind, crop):
    """Which crop elements sample inside the image (NaN extrapolation)."""
    return ~torch.isnan(
        cgt.crop_and_resize(image, boxes, box_ind, crop, "bilinear", math.nan)
    )


def _forward_row(workload):
    image, boxes, box_ind, _ = _tensors(workload)
    crop = tuple(workload.crop)
    np_args = (image.numpy(), boxes.numpy(), box_ind.numpy())
    diff = (
        cgt.crop_and_resize(image, boxes, box_ind, crop)
        - grid_sample_crops(image, boxes, box_ind, crop)
    ).abs()
    figures = {
        "max_abs_diff_grid_sample": float(diff.max()),
        "max_abs_diff_grid_sample_inside": float(
            diff[_inside(image, boxes, box_ind, crop)].max()
        ),
    }
    return {
        "name": "detector-forward-torch",
        "about": (
            "cropgrad.torch.crop_and_resize, NCHW tensors; grid_sample differs "
            f"from TensorFlow's bits by up to {figures['max_abs_diff_grid_sample']:.3g}"
            f" ({figures['max_abs_diff_grid_sample_inside']:.3g} inside the image)"
        ),
        "columns": {
            "cropgrad_1thread": lambda: cgt.crop_and_resize(
                image, boxes, box_ind, crop, num_threads=1
            ),
            "cropgrad_default": lambda: cgt.crop_and_resize(
                image, boxes, box_ind, crop
            ),
            "numpy_api": lambda: cropgrad.crop_and_resize(
                *np_args, crop, data_format="NCHW"
            ),
            "grid_sample": lambda: grid_sample_crops(image, boxes, box_ind, crop),
        },
        "ratios": {
            "torch_op_over_numpy_api": ("cropgrad_default", "numpy_api"),
            "grid_sample_over_torch_op": ("grid_sample", "cropgrad_default"),
        },
        "figures": figures,
    }


def _backward_row(workload):
    image, boxes, box_ind, grads = _tensors(workload)
    crop = tuple(workload.crop)
    image_g = image.clone().requires_grad_()
    boxes_g = boxes.clone().requires_grad_()
    np_image, np_boxes = image.numpy(), boxes.numpy()
    np_index, np_grads = box_ind.numpy(), grads.numpy()

    def torch_op():
        crops = cgt.crop_and_resize(image_g, boxes_g, box_ind, crop)
        return torch.autograd.grad(crops, (image_g, boxes_g), grads)

    def numpy_api():
        cropgrad.crop_and_resize(np_image, np_boxes, np_index, crop, data_format="NCHW")
        cropgrad.crop_and_resize_grad_image(
            np_grads, np_boxes, np_index, np_image.shape, data_format="NCHW"
        )
        cropgrad.crop_and_resize_grad_boxes(
            np_grads, np_image, np_boxes, np_index, data_format="NCHW"
        )

    def grid_sample():
        crops = grid_sample_crops(image_g, boxes_g, box_ind, crop)
        return torch.autograd.grad(crops, (image_g, boxes_g), grads)

    figures = {}
    # The gradients from every sample, and from the samples inside the image
    # only (grads zeroed elsewhere), where the two differ by rounding alone.
    outside = ~_inside(image, boxes, box_ind, crop)
    for suffix, g in (("", grads), ("_inside", grads.masked_fill(outside, 0))):
        ours = torch.autograd.grad(
            cgt.crop_and_resize(image_g, boxes_g, box_ind, crop), (image_g, boxes_g), g
        )
        theirs = torch.autograd.grad(
            grid_sample_crops(image_g, boxes_g, box_ind, crop), (image_g, boxes_g), g
        )
        for what, a, b in zip(("d_image", "d_boxes"), ours, theirs):
            figures[f"max_abs_diff_grid_sample_{what}{suffix}"] = float(
                (a - b).abs().max()
            )
        figures[f"max_rel_diff_grid_sample_d_boxes{suffix}"] = float(
            (ours[1] - theirs[1]).abs().max() / ours[1].abs().max()
        )
    return {
        "name": "detector-torch-forward-backward",
        "about": (
            "crop_and_resize and its gradients w.r.t. image and boxes "
            "(torch.autograd.grad), NCHW tensors; grid_sample's d_image "
            "differs from TensorFlow's bits by up to "
            f"{figures['max_abs_diff_grid_sample_d_image']:.3g} "
            f"({figures['max_abs_diff_grid_sample_d_image_inside']:.3g} from "
            "samples inside the image)"
        ),
        "columns": {
            "torch_op": torch_op,
            "numpy_api": numpy_api,
            "grid_sample": grid_sample,
        },
        "ratios": {
            "torch_op_over_numpy_api": ("torch_op", "numpy_api"),
            "grid_sample_over_torch_op": ("grid_sample", "torch_op"),
        },
        "figures": figures,
    }


def _rois(problem):
    """torchvision's ``[K, 5]`` boxes: the image's index, then the box."""
    index = problem["box_ind"].astype(np.float32)[:, None]
    return torch.from_numpy(np.concatenate([index, problem["boxes"]], axis=1))


def _roi_forward_row(workload):
    p = workload.problem()  # NCHW arrays
    image, rois = torch.from_numpy(p["image"]), _rois(p)
    size, options = tuple(workload.crop), workload.options()
    args = (size, *options.values())  # torchvision's positional order
    return {
        "name": "roi-fpn-forward-torch",
        "about": "cropgrad.torch.roi_align, NCHW tensors, vs the NumPy API on "
        "the same memory and torchvision.ops.roi_align",
        "columns": {
            "cropgrad_default": lambda: cgt.roi_align(image, rois, *args),
            "numpy_api": lambda: cropgrad.roi_align(
                p["image"], p["boxes"], p["box_ind"], size, **options
            ),
        },
        "ratios": {"torch_op_over_numpy_api": ("cropgrad_default", "numpy_api")},
        "targets": [
            (
                "roi-fpn-forward-torch: within 1.15x of the NumPy API",
                "torch_op_over_numpy_api",
                1.15,
                "<=",
            )
        ],
    }


def _roi_backward_row(workload):
    p = workload.problem()  # NCHW arrays, the feature map and grads
    image = torch.from_numpy(p["image"]).requires_grad_()
    rois = _rois(p)
    rois_g = rois.clone().requires_grad_()
    grads = torch.from_numpy(p["grads"])
    size, options = tuple(workload.crop), workload.options()
    args = (size, *options.values())

    def torch_op():
        crops = cgt.roi_align(image, rois, *args)
        return torch.autograd.grad(crops, image, grads)

    def input_and_boxes():
        crops = cgt.roi_align(image, rois_g, *args)
        return torch.autograd.grad(crops, (image, rois_g), grads)

    def numpy_api():
        cropgrad.roi_align(p["image"], p["boxes"], p["box_ind"], size, **options)
        cropgrad.roi_align_grad_image(
            p["grads"], p["boxes"], p["box_ind"], p["image"].shape, **options
        )

    name = "roi-fpn-torch-forward-backward"
    return {
        "name": name,
        "about": "cropgrad.torch.roi_align and torch.autograd.grad w.r.t. the "
        "feature map (and the boxes, torch_op_input_and_boxes), NCHW tensors, "
        "vs torchvision's forward and backward",
        "columns": {
            "cropgrad_default": torch_op,
            "torch_op_input_and_boxes": input_and_boxes,
            "numpy_api": numpy_api,
        },
        "ratios": {"torch_op_over_numpy_api": ("cropgrad_default", "numpy_api")},
        "reference_op": FORWARD_BACKWARD,
        "targets": [
            (
                f"{name}: within 1.15x of the NumPy API",
                "torch_op_over_numpy_api",
                1.15,
                "<=",
            ),
            (
                f"{name}: at least 1.8x torchvision's speed",
                "torchvision_over_cropgrad_default",
                1.8,
                ">=",
            ),
        ],
    }
