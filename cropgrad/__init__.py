"""cropgrad: exact, parallel box sampling and its gradients for NumPy.

Three families of ops, without their frameworks, each a forward op, its
gradients and the forward-mode derivative along its coordinates (the
coordinates' gradient is its transpose), named after the forward op
(``<op>``, ``<op>_grad_image``, ``<op>_grad_boxes`` or ``<op>_grad_grid``,
``<op>_jvp_boxes`` or ``<op>_jvp_grid``):

- TensorFlow's ``crop_and_resize`` family, bit for bit (``CropAndResize``,
  ``CropAndResizeGradImage``, ``CropAndResizeGradBoxes``), and the boxes
  JVP;
- torchvision's and ONNX's RoIAlign (average pooling), bit for bit:
  `roi_align` and its image gradient (torchvision's backward), and the
  boxes derivatives neither has;
- PyTorch's ``grid_sample`` (2-D), bit for bit: `grid_sample` and its
  image and grid gradients, and the grid JVP PyTorch does not have.

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

import importlib as _importlib  # noqa: E402

from cropgrad import _ops, raw_ops  # noqa: E402
from cropgrad._api.config import show_config  # noqa: E402
from cropgrad._version import __version__  # noqa: E402, F401  (public)

__all__ = ["get_include", "raw_ops", "show_config"]

# Every op of the model is a function of the NumPy API, defined in its
# family's module, cropgrad._api.<family>, and exported here by its name.
for _family in _ops.FAMILIES.values():
    _module = _importlib.import_module(f"cropgrad._api.{_family.name}")
    for _op in _family.ops.values():
        if "numpy" in _op.apis:
            globals()[_op.name] = getattr(_module, _op.name)
            __all__ += [_op.name]
__all__.sort()
del _family, _module, _op


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
