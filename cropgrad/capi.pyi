# Stubs of the Python side of the C-level API module (capi.pyx).  The C-level
# API itself is capi.pxd (and include/cropgrad/capi.h for C and C++); the
# public names here are the way in for ctypes, cffi and Numba, the private
# functions the NumPy API's.  Arrays are C-contiguous, of the dtype their
# code names.

from typing import Any

import numpy as np
import numpy.typing as npt

# A PyCapsule named "cropgrad.capi._C_API" (types.CapsuleType from 3.13).
_C_API: object

def api_version() -> tuple[int, int]: ...
def function_addresses() -> dict[str, int]: ...

_CODES: dict[str, int]
_EXCEPTIONS: dict[int, type[Exception]]

def _check_grad_image_call(
    grads_shape: tuple[int, ...],
    image_size: tuple[int, ...],
    output_dtype: int,
    method: int,
    layout: int,
    num_threads: int,
) -> None: ...
def _check_forward_call(
    image_shape: tuple[int, ...],
    image_dtype: int,
    num_boxes: int,
    crop_height: int,
    crop_width: int,
    method: int,
    layout: int,
    num_threads: int,
) -> None: ...
def _check_jvp_boxes_call(
    image_shape: tuple[int, ...],
    image_dtype: int,
    num_boxes: int,
    crop_height: int,
    crop_width: int,
    method: int,
    layout: int,
    num_threads: int,
) -> None: ...
def _grad_image(
    grads: npt.NDArray[np.float32],
    boxes: npt.NDArray[np.float32],
    box_ind: npt.NDArray[np.integer[Any]],
    box_ind_dtype: int,
    image_size: tuple[int, ...],
    out: npt.NDArray[np.floating[Any]],
    output_dtype: int,
    method: int,
    layout: int,
    num_threads: int,
    flush: bool,
) -> None: ...
def _crop_and_resize(
    image: npt.NDArray[Any],
    image_dtype: int,
    boxes: npt.NDArray[np.float32],
    box_ind: npt.NDArray[np.integer[Any]],
    box_ind_dtype: int,
    crop_height: int,
    crop_width: int,
    method: int,
    extrapolation_value: float,
    layout: int,
    out: npt.NDArray[np.float32],
    num_threads: int,
    flush: bool,
) -> None: ...
def _grad_boxes(
    grads: npt.NDArray[np.float32],
    image: npt.NDArray[Any],
    image_dtype: int,
    boxes: npt.NDArray[np.float32],
    box_ind: npt.NDArray[np.integer[Any]],
    box_ind_dtype: int,
    out: npt.NDArray[np.float32],
    method: int,
    layout: int,
    num_threads: int,
    flush: bool,
) -> None: ...
def _jvp_boxes(
    image: npt.NDArray[Any],
    image_dtype: int,
    boxes: npt.NDArray[np.float32],
    boxes_tangent: npt.NDArray[np.float32],
    box_ind: npt.NDArray[np.integer[Any]],
    box_ind_dtype: int,
    crop_height: int,
    crop_width: int,
    method: int,
    layout: int,
    out: npt.NDArray[np.float32],
    num_threads: int,
    flush: bool,
) -> None: ...
def _build_info() -> dict[str, Any]: ...
