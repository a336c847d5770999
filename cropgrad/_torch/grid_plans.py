"""Grid sampling's metadata plans for the PyTorch ops (private): the
checks of ``torch.nn.functional.grid_sample``'s arguments on shapes alone,
and the shape and dtype of each op's result.

The arguments: torch.nn.functional.grid_sample's, NCHW tensors
(any memory format) and a grid ``[N, H_out, W_out, 2]``.  The shape checks
are the NumPy API's own (cropgrad._api.grid_sample), made on the shapes,
so that tensors without data (fake, meta) get them too; the values (a
non-finite grid) are the NumPy API's to check when the kernel runs.
The checks every family shares (a real tensor, an option's value, one
device) are `checks`' own.
"""

import torch

from cropgrad._api import grid_sample as _grid_api
from cropgrad._torch import checks

__all__ = []


def arithmetic(dtype):
    """The type grid sampling computes in for data of `dtype`: float64 for
    float64, float32 for everything else (as the NumPy API)."""
    return torch.float64 if dtype == torch.float64 else torch.float32


def _grid_options(name, a):
    checks.option(name, "mode", a.mode)
    checks.option(name, "padding_mode", a.padding_mode)
    if a.align_corners is not None:  # None: False, as in PyTorch
        checks._flag(a.align_corners, "align_corners")


def _grid_image(image, name):
    """Check the sampled image (a 5-D one is refused in the NumPy API's
    words); return its NCHW shape."""
    checks._real(image, name)
    if image.dim() == 5:
        raise ValueError(
            f"{name} must be 4-D (N, C, H, W), got shape {tuple(image.shape)}: "
            "volumetric (5-D) grid sampling is not provided"
        )
    checks._image(image, "NCHW", name)
    return tuple(image.shape)


def _grid(grid, batch):
    checks._real(grid, "grid")
    _grid_api.grid_shape(tuple(grid.shape), batch)
    return tuple(grid.shape)


def _grid_grads(grads, expected):
    checks._real(grads, "grads")
    if grads.dtype not in checks.IMAGE_DTYPES:
        raise TypeError(
            "grads must be float16, float32, float64, bfloat16 or integers, "
            f"got {grads.dtype}"
        )
    _grid_api.grads_shape(tuple(grads.shape), tuple(expected), True)


def _sampled_dtype(dtype):
    """The dtype of samples (or an image gradient) computed from data of
    `dtype`: its own when floating, float32 otherwise."""
    return dtype if dtype in checks._GRAD_DTYPES else torch.float32


def forward_plan(a, name="grid_sample", image_name="input"):
    """Check the metadata of grid_sample (or of its grid JVP, whose image is
    `image_name`); return the output's shape and dtype."""
    _grid_options(name, a)
    n, c, h, w = _grid_image(a.image, image_name)
    grid = _grid(a.grid, n)
    checks._one_device(**{image_name: a.image, "grid": a.grid})
    _grid_api.spatial(h, w, "image")
    return [n, c, grid[1], grid[2]], _sampled_dtype(a.image.dtype)


def grad_image_plan(a):
    """Check the metadata of grid_sample's image gradient; return the
    output's shape and dtype (the gradient's own, float32 for integers)."""
    _grid_options("grid_sample_grad_image", a)
    checks._real(a.grads, "grads")
    image_size = checks.size("image_size", a.image_size, "NCHW")
    if checks._concrete(image_size) and min(image_size) < 0:
        raise ValueError(f"image_size must not be negative, got {tuple(image_size)}")
    n, c, h, w = image_size
    grid = _grid(a.grid, n)
    _grid_api.spatial(h, w, "image_size")
    _grid_grads(a.grads, (n, c, grid[1], grid[2]))
    checks._one_device(grads=a.grads, grid=a.grid)
    return image_size, _sampled_dtype(a.grads.dtype)


def grad_grid_plan(a):
    """Check the metadata of grid_sample's grid gradient; return the output's
    shape (the grid's) and dtype (the arithmetic type)."""
    _grid_options("grid_sample_grad_grid", a)
    n, c, h, w = _grid_image(a.image, "image")
    grid = _grid(a.grid, n)
    _grid_api.spatial(h, w, "image")
    _grid_grads(a.grads, (n, c, grid[1], grid[2]))
    checks._one_device(grads=a.grads, image=a.image, grid=a.grid)
    return list(grid), arithmetic(a.image.dtype)


def jvp_grid_plan(a):
    """Check the metadata of grid_sample's grid JVP; return the output's
    shape and dtype (grid_sample's)."""
    plan = forward_plan(a, "grid_sample_jvp_grid", "image")
    checks._real(a.grid_tangent, "grid_tangent")
    _grid_api.tangent_shape(tuple(a.grid_tangent.shape), tuple(a.grid.shape))
    checks._one_device(image=a.image, grid_tangent=a.grid_tangent)
    return plan
