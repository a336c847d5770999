"""crop_and_resize's family (NHWC, float32) on the full benchmark's
workloads: ``tiny`` (one box: the cost of a call), ``dense`` (2000 small
overlapping boxes, 64 channels), ``augment`` (one 224 x 224 crop per RGB
image) and ``detector`` (512 RoIs of 256-channel maps), smallest first."""

import numpy as np
from cropgrad_bench import workloads
from cropgrad_bench.workloads import FORWARD, GRAD_BOXES, GRAD_IMAGE

import cropgrad

from .common import THREADS, num_threads, require

WORKLOADS = ("tiny", "dense", "augment", "detector")


def _problem(name, op):
    """The arrays workload `name` gives `op` (those it reads), and the
    workload on that op."""
    w = workloads.WORKLOADS[name]
    w = workloads.Workload(name, op, *w.image_size, w.num_boxes, w.crop)
    return w, w.problem()


class _Op:
    params = (WORKLOADS, THREADS)
    param_names = ("workload", "threads")
    timeout = 120


class Forward(_Op):
    def setup(self, name, threads):
        require("crop_and_resize")
        w, self.p = _problem(name, FORWARD)
        self.crop = list(w.crop)
        self.out = np.zeros(*w.output())
        self.threads = num_threads(threads)

    def time_forward(self, name, threads):
        p = self.p
        cropgrad.crop_and_resize(
            p["image"],
            p["boxes"],
            p["box_ind"],
            self.crop,
            out=self.out,
            num_threads=self.threads,
        )


class GradImage(_Op):
    def setup(self, name, threads):
        require("crop_and_resize_grad_image")
        w, self.p = _problem(name, GRAD_IMAGE)
        self.size = list(w.image_size)
        self.out = np.zeros(*w.output())
        self.threads = num_threads(threads)

    def time_grad_image(self, name, threads):
        p = self.p
        cropgrad.crop_and_resize_grad_image(
            p["grads"],
            p["boxes"],
            p["box_ind"],
            self.size,
            out=self.out,
            num_threads=self.threads,
        )


class GradBoxes(_Op):
    def setup(self, name, threads):
        require("crop_and_resize_grad_boxes")
        w, self.p = _problem(name, GRAD_BOXES)
        self.out = np.zeros(*w.output())
        self.threads = num_threads(threads)

    def time_grad_boxes(self, name, threads):
        p = self.p
        cropgrad.crop_and_resize_grad_boxes(
            p["grads"],
            p["image"],
            p["boxes"],
            p["box_ind"],
            out=self.out,
            num_threads=self.threads,
        )


class JvpBoxes(_Op):
    def setup(self, name, threads):
        require("crop_and_resize_jvp_boxes")
        w, self.p = _problem(name, FORWARD)
        rng = np.random.default_rng([workloads.SEED, 3])
        self.tangent = rng.standard_normal((w.num_boxes, 4), dtype=np.float32)
        self.crop = list(w.crop)
        self.out = np.zeros(*w.output())
        self.threads = num_threads(threads)

    def time_jvp_boxes(self, name, threads):
        p = self.p
        cropgrad.crop_and_resize_jvp_boxes(
            p["image"],
            p["boxes"],
            p["box_ind"],
            self.tangent,
            self.crop,
            out=self.out,
            num_threads=self.threads,
        )
