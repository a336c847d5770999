from typing import Any, Literal

import numpy as np
import numpy.typing as npt

__all__ = [
    "roi_align",
    "roi_align_grad_boxes",
    "roi_align_grad_image",
    "roi_align_jvp_boxes",
]

_DataFormat = Literal["NHWC", "NCHW"]
_Size = int | tuple[int, int] | list[int]

def roi_align(
    image: npt.ArrayLike,
    boxes: npt.ArrayLike,
    box_ind: npt.ArrayLike,
    output_size: _Size,
    *,
    spatial_scale: float = ...,
    sampling_ratio: int = ...,
    aligned: bool = ...,
    dtype: npt.DTypeLike | Any = ...,
    out: npt.NDArray[np.floating[Any]] | None = ...,
    data_format: _DataFormat = ...,
    num_threads: int | None = ...,
    flush_denormals: bool = ...,
) -> npt.NDArray[np.floating[Any]]: ...
def roi_align_grad_image(
    grads: npt.ArrayLike,
    boxes: npt.ArrayLike,
    box_ind: npt.ArrayLike,
    image_size: npt.ArrayLike,
    *,
    spatial_scale: float = ...,
    sampling_ratio: int = ...,
    aligned: bool = ...,
    dtype: npt.DTypeLike | Any = ...,
    out: npt.NDArray[np.floating[Any]] | None = ...,
    data_format: _DataFormat = ...,
    num_threads: int | None = ...,
    flush_denormals: bool = ...,
) -> npt.NDArray[np.floating[Any]]: ...
def roi_align_grad_boxes(
    grads: npt.ArrayLike,
    image: npt.ArrayLike,
    boxes: npt.ArrayLike,
    box_ind: npt.ArrayLike,
    *,
    spatial_scale: float = ...,
    sampling_ratio: int = ...,
    aligned: bool = ...,
    out: npt.NDArray[np.floating[Any]] | None = ...,
    data_format: _DataFormat = ...,
    num_threads: int | None = ...,
    flush_denormals: bool = ...,
) -> npt.NDArray[np.floating[Any]]: ...
def roi_align_jvp_boxes(
    image: npt.ArrayLike,
    boxes: npt.ArrayLike,
    box_ind: npt.ArrayLike,
    boxes_tangent: npt.ArrayLike,
    output_size: _Size,
    *,
    spatial_scale: float = ...,
    sampling_ratio: int = ...,
    aligned: bool = ...,
    dtype: npt.DTypeLike | Any = ...,
    out: npt.NDArray[np.floating[Any]] | None = ...,
    data_format: _DataFormat = ...,
    num_threads: int | None = ...,
    flush_denormals: bool = ...,
) -> npt.NDArray[np.floating[Any]]: ...
