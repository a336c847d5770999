"""NCHW rows of the benchmark: PyTorch's layout beside TensorFlow's (private).

After the ``detector``, ``augment``, ``dense``, ``detector-forward`` and
``detector-grad-boxes`` rows (NHWC) comes a row ``<name>-nchw``: the same
problem with every array in NCHW, ``data_format="NCHW"``, in the main
table's cropgrad columns (``cropgrad_1thread``, ``cropgrad_default`` into
a preallocated output, ``cropgrad_default_new_output``), so that its
TensorFlow, roofline and scaling ratios read like the NHWC row's.  Its
``nhwc_default`` column is the NHWC call with the default threads, timed in
the same rounds: ``nchw_over_nhwc`` compares the layouts side by side, and
the row's target is that NCHW costs at most 1.2 times NHWC.

Not an adapter of another framework, but rows added after a workload's own
through the same registry (`cropgrad_bench.rows`).
"""

import numpy as np

import cropgrad
from cropgrad_bench.workloads import FORWARD, GRAD_BOXES, GRAD_IMAGE

__all__ = ["extra_rows"]

WORKLOADS = ("detector", "augment", "dense", "detector-forward", "detector-grad-boxes")
TO_NCHW = (0, 3, 1, 2)


def _nchw(array):
    return np.ascontiguousarray(array.transpose(TO_NCHW))


def _caller(workload, p, data_format):
    """``call(num_threads, out)``: the workload's op on `p`'s arrays, in
    `data_format` (NCHW: the arrays transposed once, here)."""
    boxes, box_ind = p["boxes"], p["box_ind"]
    size = list(workload.image_size)
    layout = {"data_format": data_format}
    if data_format == "NCHW":
        p = {k: _nchw(v) if k in ("grads", "image") else v for k, v in p.items()}
        size = [size[i] for i in TO_NCHW]
    if workload.op == GRAD_IMAGE:
        return lambda num_threads, out: cropgrad.crop_and_resize_grad_image(
            p["grads"], boxes, box_ind, size, workload.dtype, out=out,
            num_threads=num_threads, **layout
        )  # fmt: skip
    if workload.op == FORWARD:
        return lambda num_threads, out: cropgrad.crop_and_resize(
            p["image"], boxes, box_ind, workload.crop, out=out,
            num_threads=num_threads, **layout
        )  # fmt: skip
    assert workload.op == GRAD_BOXES
    return lambda num_threads, out: cropgrad.crop_and_resize_grad_boxes(
        p["grads"], p["image"], boxes, box_ind, out=out,
        num_threads=num_threads, **layout
    )  # fmt: skip


def extra_rows(workload, quick):
    """The NCHW row that follows `workload` (a list of at most one dict)."""
    if workload.name not in WORKLOADS:
        return []
    p = workload.problem()
    call = _caller(workload, p, "NCHW")
    nhwc_call = _caller(workload, p, "NHWC")
    shape, dtype = workload.output()
    out_nhwc = np.zeros(shape, dtype)
    out = np.zeros([shape[i] for i in TO_NCHW] if len(shape) == 4 else shape, dtype)
    return [
        {
            "name": f"{workload.name}-nchw",
            "about": f"{workload.name} with data_format='NCHW', beside NHWC",
            "columns": {
                "cropgrad_1thread": lambda: call(1, out),
                "cropgrad_default": lambda: call(None, out),
                "cropgrad_default_new_output": lambda: call(None, None),
                "nhwc_default": lambda: nhwc_call(None, out_nhwc),
            },
            "ratios": {"nchw_over_nhwc": ("cropgrad_default", "nhwc_default")},
            "targets": [
                ("NCHW default <= 1.2 x NHWC default", "nchw_over_nhwc", 1.2, "<="),
                *_scaling_target(workload),
            ],
        }
    ]


def _scaling_target(workload):
    """The image gradient's rows scale to two threads as the NHWC ones must
    (cropgrad_bench.targets)."""
    if workload.op != GRAD_IMAGE:
        return []
    what = "scaling 1 thread -> default >= 1.7"
    return [(what, "scaling_1thread_over_default", 1.7, ">=")]
