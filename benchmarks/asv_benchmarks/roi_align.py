"""RoIAlign's family (float32) in both layouts: ``tiny`` (one box on a
16 x 16 map of 8 channels: the cost of a call), then the full benchmark's
``roi-fpn`` (torchvision's Faster R-CNN box pooler: 1024 boxes, 7 x 7,
sampling ratio 2) and ``roi-mask`` (a Mask R-CNN mask head: 256 boxes,
14 x 14, aligned), on FPN's stride-8 map of 256 channels."""

import numpy as np
from cropgrad_bench import workloads
from cropgrad_bench.workloads import FORWARD, GRAD_BOXES, GRAD_IMAGE, RoiWorkload

import cropgrad

from .common import THREADS, num_threads, require

WORKLOADS = ("tiny", "roi-fpn", "roi-mask")
LAYOUTS = ("NCHW", "NHWC")

_TINY = RoiWorkload(
    "tiny", FORWARD, nchw=(1, 8, 16, 16), num_boxes=1, output_size=(7, 7),
    spatial_scale=1.0, sampling_ratio=2, aligned=True, box_sides=(4.0, 12.0),
)  # fmt: skip


def _problem(name, op, layout):
    """Workload `name` on `op` in `layout`, and its arrays (those the op
    reads)."""
    w = _TINY if name == "tiny" else workloads.WORKLOADS[f"{name}-forward"]
    w = w.variant(op=op, data_format=layout)
    return w, w.problem()


class _Op:
    params = (WORKLOADS, LAYOUTS, THREADS)
    param_names = ("workload", "layout", "threads")
    timeout = 120

    def _setup(self, name, layout, threads, op, *functions):
        require(*functions)
        self.w, self.p = _problem(name, op, layout)
        self.out = np.zeros(*self.w.output())
        self.kwargs = dict(
            self.w.options(),
            data_format=layout,
            out=self.out,
            num_threads=num_threads(threads),
        )


class Forward(_Op):
    def setup(self, name, layout, threads):
        self._setup(name, layout, threads, FORWARD, "roi_align")

    def time_forward(self, name, layout, threads):
        p = self.p
        cropgrad.roi_align(
            p["image"], p["boxes"], p["box_ind"], self.w.crop, **self.kwargs
        )


class GradImage(_Op):
    def setup(self, name, layout, threads):
        self._setup(name, layout, threads, GRAD_IMAGE, "roi_align_grad_image")

    def time_grad_image(self, name, layout, threads):
        p = self.p
        cropgrad.roi_align_grad_image(
            p["grads"], p["boxes"], p["box_ind"], self.w.image_size, **self.kwargs
        )


class GradBoxes(_Op):
    def setup(self, name, layout, threads):
        self._setup(name, layout, threads, GRAD_BOXES, "roi_align_grad_boxes")

    def time_grad_boxes(self, name, layout, threads):
        p = self.p
        cropgrad.roi_align_grad_boxes(
            p["grads"], p["image"], p["boxes"], p["box_ind"], **self.kwargs
        )


class JvpBoxes(_Op):
    def setup(self, name, layout, threads):
        self._setup(name, layout, threads, FORWARD, "roi_align_jvp_boxes")
        rng = np.random.default_rng([workloads.SEED, 14])
        self.tangent = rng.standard_normal((self.w.num_boxes, 4), dtype=np.float32)

    def time_jvp_boxes(self, name, layout, threads):
        p = self.p
        cropgrad.roi_align_jvp_boxes(
            p["image"],
            p["boxes"],
            p["box_ind"],
            self.tangent,
            self.w.crop,
            **self.kwargs,
        )
