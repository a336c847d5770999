# Stubs of the compiled kernels (cropgrad/_core.pyx).  The memoryview type of
# each array argument is in the comment beside it; the kernels trust their
# arguments, which the public functions in cropgrad/__init__.py check.

from typing import Any

import numpy as np
import numpy.typing as npt

__test__: dict[str, str]

def build_info() -> dict[str, Any]: ...
def max_threads() -> int: ...
def first_nonfinite_box(
    boxes: npt.NDArray[np.float32],  # const float[:, ::1]
) -> int: ...
def first_bad_index(
    box_ind: npt.NDArray[np.int32]
    | npt.NDArray[np.int64],  # const int32_t|int64_t[::1]
    batch: int,
) -> int: ...
def sample_coords(
    boxes: npt.NDArray[np.float32],  # const float[:, ::1]
    size: int,
    crop: int,
    axis: int,
    boxes_gradient: bool = ...,
) -> npt.NDArray[np.float32]: ...
def float_to_half_bits(
    values: npt.NDArray[np.float32],  # const float[::1]
) -> npt.NDArray[np.uint16]: ...
def half_bits_to_float(
    bits: npt.NDArray[np.uint16],  # const uint16_t[::1]
) -> npt.NDArray[np.float32]: ...
def group_boxes(
    box_ind: npt.NDArray[np.int32]
    | npt.NDArray[np.int64],  # const int32_t|int64_t[::1]
    batch: int,
    order: npt.NDArray[np.int64],  # int64_t[::1]
    starts: npt.NDArray[np.int64],  # int64_t[::1]
) -> None: ...
def grad_image(
    grads: npt.NDArray[np.float32],  # const float[:, :, :, ::1]
    boxes: npt.NDArray[np.float32],  # const float[:, ::1]
    order: npt.NDArray[np.int64],  # const int64_t[::1]
    starts: npt.NDArray[np.int64],  # const int64_t[::1]
    out: npt.NDArray[np.float32]
    | npt.NDArray[np.float64],  # float|double[:, :, :, ::1]
    nearest: bool,
    num_threads: int,
    flush: bool,
    half_out: npt.NDArray[np.uint16] | None = ...,  # uint16_t[:, :, :, ::1]
) -> None: ...
def crop_and_resize(
    image: npt.NDArray[Any],  # const image_t[:, :, :, ::1]
    boxes: npt.NDArray[np.float32],  # const float[:, ::1]
    box_ind: npt.NDArray[np.int64],  # const int64_t[::1]
    crops: npt.NDArray[np.float32],  # float[:, :, :, ::1]
    nearest: bool,
    extrapolation: float,
    half: bool,
    num_threads: int,
    flush: bool,
) -> None: ...
def grad_boxes(
    grads: npt.NDArray[np.float32],  # const float[:, :, :, ::1]
    image: npt.NDArray[Any],  # const image_t[:, :, :, ::1]
    boxes: npt.NDArray[np.float32],  # const float[:, ::1]
    box_ind: npt.NDArray[np.int64],  # const int64_t[::1]
    out: npt.NDArray[np.float32],  # float[:, ::1]
    half: bool,
    num_threads: int,
    flush: bool,
) -> None: ...
def _set_band_bytes(n: int) -> None: ...
