"""grid_sample's family (NCHW, float32; bilinear, zeros, PyTorch's
``align_corners=False``): ``tiny`` (one 8-channel 16 x 16 image, a 7 x 7
grid: the cost of a call), then the full benchmark's ``stn`` (64 images
3 x 64 x 64, affine grids), ``deform-attn`` (image ``[64, 32, 64, 64]``,
grid ``[64, 300, 4, 2]``) and ``warp-flow`` (one 3 x 1024 x 1024 image, a
flow-field grid of its size), smallest first."""

import numpy as np
from cropgrad_bench import grid

import cropgrad

from .common import THREADS, num_threads, require

WORKLOADS = ("tiny", "stn", "deform-attn", "warp-flow")


def _problem(name):
    """``(image, grid, grads, grid_tangent)`` of workload `name`."""
    rng = np.random.default_rng([grid.SEED, 1])
    if name == "tiny":
        image = rng.standard_normal((1, 8, 16, 16), dtype=np.float32)
        points = rng.uniform(-1, 1, (1, 7, 7, 2)).astype(np.float32)
        grads = rng.standard_normal((1, 8, 7, 7), dtype=np.float32)
    else:
        image, points, grads = grid.make_problem(name)
    tangent = rng.standard_normal(points.shape, dtype=np.float32)
    return image, points, grads, tangent


class _Op:
    params = (WORKLOADS, THREADS)
    param_names = ("workload", "threads")
    timeout = 120

    def _setup(self, name, threads, function, out_shape):
        require(function)
        self.image, self.grid, self.grads, self.tangent = _problem(name)
        self.out = np.zeros(out_shape(self), np.float32)
        self.threads = num_threads(threads)


class Forward(_Op):
    def setup(self, name, threads):
        self._setup(name, threads, "grid_sample", lambda s: s.grads.shape)

    def time_forward(self, name, threads):
        cropgrad.grid_sample(
            self.image, self.grid, out=self.out, num_threads=self.threads
        )


class GradImage(_Op):
    def setup(self, name, threads):
        self._setup(name, threads, "grid_sample_grad_image", lambda s: s.image.shape)

    def time_grad_image(self, name, threads):
        cropgrad.grid_sample_grad_image(
            self.grads,
            self.grid,
            self.image.shape,
            out=self.out,
            num_threads=self.threads,
        )


class GradGrid(_Op):
    def setup(self, name, threads):
        self._setup(name, threads, "grid_sample_grad_grid", lambda s: s.grid.shape)

    def time_grad_grid(self, name, threads):
        cropgrad.grid_sample_grad_grid(
            self.grads, self.image, self.grid, out=self.out, num_threads=self.threads
        )


class JvpGrid(_Op):
    def setup(self, name, threads):
        self._setup(name, threads, "grid_sample_jvp_grid", lambda s: s.grads.shape)

    def time_jvp_grid(self, name, threads):
        cropgrad.grid_sample_jvp_grid(
            self.image,
            self.grid,
            self.tangent,
            out=self.out,
            num_threads=self.threads,
        )
