from typing import Any, Literal

import numpy as np
import numpy.typing as npt

__all__ = [
    "crop_and_resize",
    "crop_and_resize_grad_boxes",
    "crop_and_resize_grad_image",
    "crop_and_resize_jvp_boxes",
]

_Method = Literal["bilinear", "nearest"]
_DataFormat = Literal["NHWC", "NCHW"]

def crop_and_resize_grad_image(
    grads: npt.ArrayLike,
    boxes: npt.ArrayLike,
    box_ind: npt.ArrayLike,
    image_size: npt.ArrayLike,
    dtype: npt.DTypeLike | Any = ...,
    method: _Method = ...,
    *,
    out: npt.NDArray[np.floating[Any]] | None = ...,
    data_format: _DataFormat = ...,
    num_threads: int | None = ...,
    flush_denormals: bool = ...,
) -> npt.NDArray[np.floating[Any]]: ...
def crop_and_resize(
    image: npt.ArrayLike,
    boxes: npt.ArrayLike,
    box_ind: npt.ArrayLike,
    crop_size: int | npt.ArrayLike,
    method: _Method = ...,
    extrapolation_value: float = ...,
    *,
    out: npt.NDArray[np.float32] | None = ...,
    data_format: _DataFormat = ...,
    num_threads: int | None = ...,
    flush_denormals: bool = ...,
) -> npt.NDArray[np.float32]: ...
def crop_and_resize_grad_boxes(
    grads: npt.ArrayLike,
    image: npt.ArrayLike,
    boxes: npt.ArrayLike,
    box_ind: npt.ArrayLike,
    method: Literal["bilinear"] = ...,
    *,
    out: npt.NDArray[np.float32] | None = ...,
    data_format: _DataFormat = ...,
    num_threads: int | None = ...,
    flush_denormals: bool = ...,
) -> npt.NDArray[np.float32]: ...
def crop_and_resize_jvp_boxes(
    image: npt.ArrayLike,
    boxes: npt.ArrayLike,
    box_ind: npt.ArrayLike,
    boxes_tangent: npt.ArrayLike,
    crop_size: int | npt.ArrayLike,
    method: Literal["bilinear"] = ...,
    *,
    out: npt.NDArray[np.float32] | None = ...,
    data_format: _DataFormat = ...,
    num_threads: int | None = ...,
    flush_denormals: bool = ...,
) -> npt.NDArray[np.float32]: ...
