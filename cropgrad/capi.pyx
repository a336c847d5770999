# cython: language_level=3
"""cropgrad's C-level API (see capi.pxd and docs/capi.md).

Each function declared in ``capi.pxd`` runs the gate's metadata checks
(cropgrad/_capi, the one definition of a valid call: its family's module
and gate.pyx), then the op's call (the checks that need the data, such as
finite boxes and ``box_ind`` in range, then the kernel), filling the
caller's error record, all without the GIL.  The NumPy API reaches the same
gate and calls through its bridge, cropgrad/_core.pyx, which turns an error
record into the exception the NumPy API documents.
"""

from cpython.pycapsule cimport PyCapsule_New

from cropgrad._runtime.parallel cimport resolve_threads


# --------------------------------------------------------------------------
# The C-level API.  Its ops' functions (each the gate's metadata check, then
# the op's call) are generated from the op model with the capsule's table,
# in _capi/table.pxi, included below.

cdef int cg_default_threads() noexcept nogil:
    return resolve_threads(0)


cdef int cg_api_version() noexcept nogil:
    return (CG_API_VERSION_MAJOR << 16) | CG_API_VERSION_MINOR


# --------------------------------------------------------------------------
# The codes of capi.pxd, for the Python layer (cropgrad._api.validation) and
# for ctypes, cffi and Numba consumers: by name in this dict, and each as a
# module attribute of its own (cropgrad.capi.CG_FLOAT32, set below; Cython
# cannot assign a Python name that its enums already hold).
_CODES = {
    "CG_OK": CG_OK, "CG_ERR_VALUE": CG_ERR_VALUE, "CG_ERR_INDEX": CG_ERR_INDEX,
    "CG_ERR_TYPE": CG_ERR_TYPE, "CG_ERR_MEMORY": CG_ERR_MEMORY,
    "CG_ERR_UNSUPPORTED": CG_ERR_UNSUPPORTED,
    "CG_UINT8": CG_UINT8, "CG_INT8": CG_INT8, "CG_UINT16": CG_UINT16,
    "CG_INT16": CG_INT16, "CG_INT32": CG_INT32, "CG_INT64": CG_INT64,
    "CG_FLOAT16": CG_FLOAT16, "CG_FLOAT32": CG_FLOAT32, "CG_FLOAT64": CG_FLOAT64,
    "CG_BFLOAT16": CG_BFLOAT16,
    "CG_NHWC": CG_NHWC, "CG_NCHW": CG_NCHW,
    "CG_BILINEAR": CG_BILINEAR, "CG_NEAREST": CG_NEAREST, "CG_BICUBIC": CG_BICUBIC,
    "CG_ZEROS": CG_ZEROS, "CG_BORDER": CG_BORDER, "CG_REFLECTION": CG_REFLECTION,
    "CG_MESSAGE_SIZE": CG_MESSAGE_SIZE,
}
globals().update(_CODES)


# --------------------------------------------------------------------------
# The way in for C, C++, ctypes, cffi and Numba (docs/capi.md)

# The ops' functions, the capsule's table (ApiTable, filled in TABLE) and
# _function_addresses(), generated from the op model.
include "_capi/table.pxi"

# The capsule's name is part of the API: capi.h's CROPGRAD_CAPSULE_NAME.
_C_API = PyCapsule_New(&TABLE, b"cropgrad.capi._C_API", NULL)


def api_version():
    """The C-level API's version of this build, as ``(major, minor)``.

    A consumer built against ``major.minor`` runs with a cropgrad whose
    version has the same major and a minor at least as high.

    Examples
    --------
    >>> import cropgrad.capi
    >>> major, minor = cropgrad.capi.api_version()
    >>> major >= 1
    True
    """
    return (CG_API_VERSION_MAJOR, CG_API_VERSION_MINOR)


def function_addresses():
    """The C-level API's functions by name, as integer addresses.

    For ctypes, cffi and Numba, which need a function's address and its C
    signature (``cropgrad/include/cropgrad/capi.h``, docs/capi.md): e.g.
    ``ctypes.CFUNCTYPE(ctypes.c_int)(function_addresses()["cg_api_version"])``.
    The addresses stay valid while the process runs (the module is never
    unloaded).

    Examples
    --------
    >>> import ctypes
    >>> import cropgrad.capi
    >>> addresses = cropgrad.capi.function_addresses()
    >>> version = ctypes.CFUNCTYPE(ctypes.c_int)(addresses["cg_api_version"])
    >>> divmod(version(), 1 << 16) == cropgrad.capi.api_version()
    True
    """
    return _function_addresses()
