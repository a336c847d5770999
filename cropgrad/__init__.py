"""cropgrad: exact, parallel box sampling and its gradients for NumPy.

Three families of ops, without their frameworks:

- TensorFlow's ``crop_and_resize`` family, bit for bit: `crop_and_resize`
  (``CropAndResize``), `crop_and_resize_grad_image`
  (``CropAndResizeGradImage``), `crop_and_resize_grad_boxes`
  (``CropAndResizeGradBoxes``) and `crop_and_resize_jvp_boxes`, the
  forward-mode derivative in the boxes (the boxes gradient is its
  transpose);
- torchvision's and ONNX's RoIAlign (average pooling), bit for bit:
  `roi_align`, `roi_align_grad_image` (torchvision's backward), and the
  boxes derivatives neither has, `roi_align_grad_boxes` and
  `roi_align_jvp_boxes`;
- PyTorch's ``grid_sample`` (2-D), bit for bit: `grid_sample`, its image
  and grid gradients `grid_sample_grad_image` and `grid_sample_grad_grid`,
  and the grid JVP PyTorch does not have, `grid_sample_jvp_grid`.

Every call checks its arguments before any work and raises a Python
exception for bad input (TensorFlow and torchvision crash on non-finite
boxes), runs with the GIL released on OpenMP threads, and returns the same
bits for any number of threads.  `raw_ops` holds keyword-only drop-ins for
code written against ``tf.raw_ops``.
"""

from cropgrad._runtime import wait_policy as _wait_policy


def _unbuilt(exc):
    """The ImportError of a source tree whose compiled modules are not built
    (`exc`'s own for anything else)."""
    import importlib.machinery
    import os

    here = os.path.dirname(os.path.abspath(__file__))
    module = os.path.join(here, "_runtime", "parallel")
    if any(
        os.path.exists(module + suffix)
        for suffix in importlib.machinery.EXTENSION_SUFFIXES
    ):
        return exc  # built: another cause
    return ImportError(
        f"cropgrad was imported from its source tree ({os.path.dirname(here)}), "
        "whose compiled modules are not built.  Build them in place "
        "(pip install -e . or python setup.py build_ext --inplace), or run "
        "from another folder, or with python -P (which keeps the current "
        "folder off sys.path), to import the installed cropgrad."
    )


# The first import of a compiled module loads the OpenMP runtime.
with _wait_policy.loading():
    try:
        from cropgrad._runtime import parallel as _parallel  # noqa: F401
    except ImportError as _exc:
        raise _unbuilt(_exc) from _exc

from cropgrad import raw_ops  # noqa: E402
from cropgrad._api.config import show_config  # noqa: E402
from cropgrad._api.crop_and_resize import (  # noqa: E402
    crop_and_resize,
    crop_and_resize_grad_boxes,
    crop_and_resize_grad_image,
    crop_and_resize_jvp_boxes,
)
from cropgrad._api.grid_sample import (  # noqa: E402
    grid_sample,
    grid_sample_grad_grid,
    grid_sample_grad_image,
    grid_sample_jvp_grid,
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
    "grid_sample",
    "grid_sample_grad_grid",
    "grid_sample_grad_image",
    "grid_sample_jvp_grid",
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
