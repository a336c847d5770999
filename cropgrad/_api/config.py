"""`show_config`: how this cropgrad was built and how it will run."""

import numpy as np

from cropgrad import _core
from cropgrad._api import validation as _v
from cropgrad._runtime import simd as _simd
from cropgrad._version import __version__

__all__ = ["show_config"]


def show_config(mode="stdout"):
    """Show how this cropgrad was built and how it will run.

    Parameters
    ----------
    mode : {"stdout", "dicts"}, default "stdout"
        Print a readable summary, or return it as a dict.

    Returns
    -------
    dict or None
        With ``mode="dicts"``: ``version``, ``openmp`` (compiled with
        OpenMP), ``compiler``, ``cflags``, ``flush_denormals_supported``,
        ``default_threads``, ``simd`` (the instruction set of the deep
        scatter: the widest the CPU runs, or ``CROPGRAD_SIMD``) and
        ``numpy``.
    """
    info = {"version": __version__}
    info.update(_core.build_info())
    info["default_threads"] = _v.default_threads()
    info["simd"] = _simd.simd_target()
    info["numpy"] = np.__version__
    if mode == "dicts":
        return info
    if mode != "stdout":
        raise ValueError(f"mode must be 'stdout' or 'dicts', got {mode!r}")
    width = max(len(k) for k in info)
    for key, value in info.items():
        print(f"{key:>{width}}: {value}")
    return None
