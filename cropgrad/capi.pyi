# Stubs of the Python side of the C-level API module (capi.pyx).  The C-level
# API itself is capi.pxd (and include/cropgrad/capi.h for C and C++); the
# names here are the way in for ctypes, cffi and Numba.  The NumPy API's
# bridge to it is cropgrad._core.

from typing import Final

# A PyCapsule named "cropgrad.capi._C_API" (types.CapsuleType from 3.13).
_C_API: object

def api_version() -> tuple[int, int]: ...
def function_addresses() -> dict[str, int]: ...

_CODES: dict[str, int]

# The codes of capi.pxd and capi.h (docs/capi.md), the same numbers.
# Statuses: the Python exception the NumPy API raises for the same call.
CG_OK: Final = 0
CG_ERR_VALUE: Final = 1
CG_ERR_INDEX: Final = 2
CG_ERR_TYPE: Final = 3
CG_ERR_MEMORY: Final = 4
CG_ERR_UNSUPPORTED: Final = 5
# Data types.
CG_UINT8: Final = 1
CG_INT8: Final = 2
CG_UINT16: Final = 3
CG_INT16: Final = 4
CG_INT32: Final = 5
CG_INT64: Final = 6
CG_FLOAT16: Final = 7
CG_FLOAT32: Final = 8
CG_FLOAT64: Final = 9
CG_BFLOAT16: Final = 10
# Layouts.
CG_NHWC: Final = 0
CG_NCHW: Final = 1
# Sampling methods.
CG_BILINEAR: Final = 0
CG_NEAREST: Final = 1
CG_BICUBIC: Final = 2
# What grid sampling reads outside the image.
CG_ZEROS: Final = 0
CG_BORDER: Final = 1
CG_REFLECTION: Final = 2
# The size of cg_error.message, NUL included.
CG_MESSAGE_SIZE: Final = 512
