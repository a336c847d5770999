# Stubs of the test wrappers (testing.pyx).  The memoryview type of each
# array argument is in the comment beside it.

from collections.abc import Callable
from typing import TypeVar

import numpy as np
import numpy.typing as npt

def pages_resident(array: npt.NDArray[np.generic]) -> int: ...
def sample_coords(
    boxes: npt.NDArray[np.float32],  # const float[:, ::1]
    size: int,
    crop: int,
    axis: int,
    boxes_gradient: bool = ...,
) -> npt.NDArray[np.float32]: ...
def float_to_half_bits(
    values: npt.NDArray[np.float32],  # const float[::1]
    f16c: bool = ...,
) -> npt.NDArray[np.uint16]: ...
def round_half_mismatches(start: int, stop: int) -> int | None: ...
def half_bits_to_float(
    bits: npt.NDArray[np.uint16],  # const uint16_t[::1]
) -> npt.NDArray[np.float32]: ...
def roi_tiles(
    boxes: npt.NDArray[np.float32],  # const float[:, ::1]
    box_ind: npt.NDArray[np.int64],  # const int64_t[::1]
    shape: tuple[int, int, int, int],
    out_size: tuple[int, int],
    spatial_scale: float,
    sampling_ratio: int,
    aligned: bool,
    tile_bytes: int,
    nthreads: int,
    read_only: bool,
) -> tuple[int, int, int] | None: ...

_T = TypeVar("_T")

def with_flush_to_zero(fn: Callable[[], _T]) -> _T | None: ...
