from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from cropgrad import raw_ops as raw_ops

__version__: str
__all__ = [
    "crop_and_resize",
    "crop_and_resize_grad_boxes",
    "crop_and_resize_grad_image",
    "raw_ops",
    "show_config",
]

_Method = Literal["bilinear", "nearest"]

def crop_and_resize_grad_image(
    grads: npt.ArrayLike,
    boxes: npt.ArrayLike,
    box_ind: npt.ArrayLike,
    image_size: npt.ArrayLike,
    dtype: npt.DTypeLike | Any = ...,
    method: _Method = ...,
    *,
    out: npt.NDArray[np.floating[Any]] | None = ...,
    num_threads: int | None = ...,
    flush_denormals: bool = ...,
) -> npt.NDArray[np.floating[Any]]: ...
def crop_and_resize(
    image: npt.ArrayLike,
    boxes: npt.ArrayLike,
    box_ind: npt.ArrayLike,
    crop_size: npt.ArrayLike,
    method: _Method = ...,
    extrapolation_value: float = ...,
    *,
    out: npt.NDArray[np.float32] | None = ...,
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
    num_threads: int | None = ...,
    flush_denormals: bool = ...,
) -> npt.NDArray[np.float32]: ...
def show_config(mode: Literal["stdout", "dicts"] = ...) -> dict[str, Any] | None: ...
