# Stubs of the Python side of the C-level API module (capi.pyx).  The C-level
# API itself is capi.pxd (and include/cropgrad/capi.h for C and C++); the
# names here are the way in for ctypes, cffi and Numba.  The NumPy API's
# bridge to it is cropgrad._core.

# A PyCapsule named "cropgrad.capi._C_API" (types.CapsuleType from 3.13).
_C_API: object

def api_version() -> tuple[int, int]: ...
def function_addresses() -> dict[str, int]: ...

_CODES: dict[str, int]
