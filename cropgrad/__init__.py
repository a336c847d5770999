"""cropgrad: exact, parallel box sampling and its gradients for NumPy.

Two families of ops, without their frameworks:

- TensorFlow's ``crop_and_resize`` family, bit for bit: `crop_and_resize`
  (``CropAndResize``), `crop_and_resize_grad_image`
  (``CropAndResizeGradImage``), `crop_and_resize_grad_boxes`
  (``CropAndResizeGradBoxes``) and `crop_and_resize_jvp_boxes`, the
  forward-mode derivative in the boxes (the boxes gradient is its
  transpose);
- torchvision's and ONNX's RoIAlign (average pooling), bit for bit:
  `roi_align`, `roi_align_grad_image` (torchvision's backward), and the
  boxes derivatives neither has, `roi_align_grad_boxes` and
  `roi_align_jvp_boxes`.

Every call checks its arguments before any work and raises a Python
exception for bad input (TensorFlow and torchvision crash on non-finite
boxes), runs with the GIL released on OpenMP threads, and returns the same
bits for any number of threads.  `raw_ops` holds keyword-only drop-ins for
code written against ``tf.raw_ops``.
"""

from cropgrad._runtime import wait_policy as _wait_policy

# The first import of a compiled module loads the OpenMP runtime.
with _wait_policy.loading():
    from cropgrad._runtime import parallel  # noqa: F401

from cropgrad._api.config import show_config  # noqa: E402
from cropgrad._api.crop_and_resize import (  # noqa: E402
    crop_and_resize,
    crop_and_resize_grad_boxes,
    crop_and_resize_grad_image,
    crop_and_resize_jvp_boxes,
)
from cropgrad._api.roi_align import (  # noqa: E402
    roi_align,
    roi_align_grad_boxes,
    roi_align_grad_image,
    roi_align_jvp_boxes,
)
from cropgrad._version import __version__  # noqa: E402, F401  (public)

__all__ = [
    "crop_and_resize",
    "crop_and_resize_grad_boxes",
    "crop_and_resize_grad_image",
    "crop_and_resize_jvp_boxes",
    "get_include",
    "raw_ops",
    "roi_align",
    "roi_align_grad_boxes",
    "roi_align_grad_image",
    "roi_align_jvp_boxes",
    "show_config",
]


def get_include():
    """The directory of the C-level API's header, for compilers' ``-I``.

    ``#include <cropgrad/capi.h>`` then declares the C-level API for C and
    C++ (docs/capi.md); Cython consumers ``cimport cropgrad.capi`` instead.

    Examples
    --------
    >>> import os
    >>> import cropgrad
    >>> os.path.isfile(os.path.join(cropgrad.get_include(), "cropgrad", "capi.h"))
    True
    """
    import os

    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "include")


from cropgrad import raw_ops  # noqa: E402  (needs the functions above)
