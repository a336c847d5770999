from typing import Any, Literal

import numpy as np
import numpy.typing as npt

__all__ = [
    "grid_sample",
    "grid_sample_grad_grid",
    "grid_sample_grad_image",
    "grid_sample_jvp_grid",
]

_DataFormat = Literal["NHWC", "NCHW"]
_Mode = Literal["bilinear", "nearest", "bicubic"]
_Padding = Literal["zeros", "border", "reflection"]

def grid_sample(
    image: npt.ArrayLike,
    grid: npt.ArrayLike,
    *,
    mode: _Mode = ...,
    padding_mode: _Padding = ...,
    align_corners: bool = ...,
    dtype: npt.DTypeLike | Any = ...,
    out: npt.NDArray[np.floating[Any]] | None = ...,
    data_format: _DataFormat = ...,
    num_threads: int | None = ...,
    flush_denormals: bool = ...,
) -> npt.NDArray[np.floating[Any]]: ...
def grid_sample_grad_image(
    grads: npt.ArrayLike,
    grid: npt.ArrayLike,
    image_size: npt.ArrayLike,
    *,
    mode: _Mode = ...,
    padding_mode: _Padding = ...,
    align_corners: bool = ...,
    dtype: npt.DTypeLike | Any = ...,
    out: npt.NDArray[np.floating[Any]] | None = ...,
    data_format: _DataFormat = ...,
    num_threads: int | None = ...,
    flush_denormals: bool = ...,
) -> npt.NDArray[np.floating[Any]]: ...
def grid_sample_grad_grid(
    grads: npt.ArrayLike,
    image: npt.ArrayLike,
    grid: npt.ArrayLike,
    *,
    mode: _Mode = ...,
    padding_mode: _Padding = ...,
    align_corners: bool = ...,
    out: npt.NDArray[np.floating[Any]] | None = ...,
    data_format: _DataFormat = ...,
    num_threads: int | None = ...,
    flush_denormals: bool = ...,
) -> npt.NDArray[np.floating[Any]]: ...
def grid_sample_jvp_grid(
    image: npt.ArrayLike,
    grid: npt.ArrayLike,
    grid_tangent: npt.ArrayLike,
    *,
    mode: _Mode = ...,
    padding_mode: _Padding = ...,
    align_corners: bool = ...,
    dtype: npt.DTypeLike | Any = ...,
    out: npt.NDArray[np.floating[Any]] | None = ...,
    data_format: _DataFormat = ...,
    num_threads: int | None = ...,
    flush_denormals: bool = ...,
) -> npt.NDArray[np.floating[Any]]: ...
