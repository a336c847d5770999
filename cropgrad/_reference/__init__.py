"""Plain NumPy models of the ops, independent of the kernels (private).
  Written from the semantics (``docs/semantics.md``): one crop
sample at a time, in the serial order (box, crop row, crop column, corner),
vectorised over channels only.  Slow, but every rounding can be checked by
eye.  It is the one reference of the project: the self-check of
``python -m cropgrad``, the test suite, the fuzz oracle
(``tests/fuzz_target.py``) and the fixture script
(``tests/data/make_fixtures.py``) all use it.  The fixture script loads this
package by its path in an environment that has TensorFlow but no compiled
cropgrad, so its modules import nothing but NumPy, the standard library and
each other (relatively).

Two kinds of arithmetic, chosen with ``exact``:

``exact=False`` (default)
    the accuracy yardstick: the sampling coordinates and lerps in float32
    (they decide which pixels a sample touches), everything after them in
    float64.  Results are float64 arrays.
``exact=True``
    the operation's own arithmetic: float32 operations in the serial order,
    each rounded as the semantics say.  Results are the bits the library
    and TensorFlow (with op determinism) compute.

``flush=True`` models flush-to-zero and denormals-are-zero (TensorFlow's
arithmetic, ``flush_denormals=True`` and the ``raw_ops``): every float32
value an arithmetic operation reads or produces that is subnormal counts as
a zero of the same sign.  Without it the arithmetic is IEEE.

Modules and functions
---------------------
``crop_and_resize``: sample_coords, inside, linear_taps, nearest_tap
    where a crop sample falls in the image, along one axis;
``crop_and_resize``: grad_image, crop_and_resize
    the forward op and the image gradient (NHWC);
``crop_and_resize_boxes``: grad_boxes, jvp_boxes
    the boxes gradient and the derivative of the forward op along a
    tangent of the boxes, its transpose (NHWC);
``crop_and_resize_boxes``: grad_boxes_magnitude
    a scale of the rounding errors of the boxes gradient (and of the JVP);
``roi_align``
    the RoIAlign family (torchvision's arithmetic; NCHW), in its own
    namespace: ``_reference.roi_align.roi_align`` and its gradients;
``grid_sample``
    ``torch.nn.functional.grid_sample`` (PyTorch's CPU arithmetic; NCHW),
    in its own namespace: ``_reference.grid_sample.grid_sample`` and its
    image and grid gradients.

The package re-exports each of them, so ``_reference.grad_image`` reads as
before.

Examples
--------
>>> import numpy as np
>>> from cropgrad import _reference
>>> grads = np.ones((1, 2, 2, 1), np.float32)
>>> out = _reference.grad_image(grads, [[0, 0, 1, 1]], [0], (1, 3, 3, 1))
>>> out[0, :, :, 0]
array([[1., 0., 1.],
       [0., 0., 0.],
       [1., 0., 1.]])
"""

from . import grid_sample, roi_align
from .crop_and_resize import (
    TINY32,
    crop_and_resize,
    f32,
    f64,
    grad_image,
    inside,
    linear_taps,
    nearest_tap,
    sample_coords,
)
from .crop_and_resize_boxes import grad_boxes, grad_boxes_magnitude, jvp_boxes

__all__ = [
    "TINY32",
    "crop_and_resize",
    "f32",
    "f64",
    "grad_boxes",
    "grad_boxes_magnitude",
    "grad_image",
    "grid_sample",
    "inside",
    "jvp_boxes",
    "linear_taps",
    "nearest_tap",
    "roi_align",
    "sample_coords",
]
