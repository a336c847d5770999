"""NCHW rows of the benchmark: PyTorch's layout beside TensorFlow's (private).

After the ``detector``, ``augment`` and ``dense`` rows (the image gradient
in NHWC) comes a row ``<name>-nchw``: the same problem with grads and the
output in NCHW, ``data_format="NCHW"``, in the main table's cropgrad
columns (``cropgrad_1thread``, ``cropgrad_default`` into a preallocated
output, ``cropgrad_default_new_output``), so that its TensorFlow, roofline
and scaling ratios read like the NHWC row's.  Its ``nhwc_default`` column
is the NHWC call with the default threads, timed in the same rounds:
``nchw_over_nhwc`` compares the layouts side by side, and the row's target
is that NCHW costs at most 1.2 times NHWC.

Not an adapter of another framework, but rows added after a workload's own
through the same registry (`cropgrad._bench.rows`).
"""

import numpy as np

import cropgrad

__all__ = ["extra_rows"]

WORKLOADS = ("detector", "augment", "dense")
TO_NCHW = (0, 3, 1, 2)


def extra_rows(workload, quick):
    """The NCHW row that follows `workload` (a list of at most one dict)."""
    if workload.name not in WORKLOADS:
        return []
    p = workload.problem()
    boxes, box_ind = p["boxes"], p["box_ind"]
    grads = np.ascontiguousarray(p["grads"].transpose(TO_NCHW))
    nhwc_size = list(workload.image_size)
    size = [nhwc_size[i] for i in TO_NCHW]
    dtype = workload.dtype
    out = np.zeros(size, dtype)
    out_nhwc = np.zeros(nhwc_size, dtype)

    def call(num_threads, target):
        return cropgrad.crop_and_resize_grad_image(
            grads,
            boxes,
            box_ind,
            size,
            dtype,
            out=target,
            num_threads=num_threads,
            data_format="NCHW",
        )

    def nhwc():
        return cropgrad.crop_and_resize_grad_image(
            p["grads"], boxes, box_ind, nhwc_size, dtype, out=out_nhwc
        )

    return [
        {
            "name": f"{workload.name}-nchw",
            "about": f"{workload.name} with data_format='NCHW', beside NHWC",
            "columns": {
                "cropgrad_1thread": lambda: call(1, out),
                "cropgrad_default": lambda: call(None, out),
                "cropgrad_default_new_output": lambda: call(None, None),
                "nhwc_default": nhwc,
            },
            "ratios": {"nchw_over_nhwc": ("cropgrad_default", "nhwc_default")},
            "targets": [
                ("NCHW default <= 1.2 x NHWC default", "nchw_over_nhwc", 1.2, "<=")
            ],
        }
    ]
