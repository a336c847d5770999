from typing import Any, Literal

import numpy as np
import numpy.typing as npt

__all__ = ["CropAndResize", "CropAndResizeGradBoxes", "CropAndResizeGradImage"]

def CropAndResizeGradImage(  # noqa: N802
    *,
    grads: npt.ArrayLike,
    boxes: npt.ArrayLike,
    box_ind: npt.ArrayLike,
    image_size: npt.ArrayLike,
    T: npt.DTypeLike | Any,
    method: Literal["bilinear", "nearest"] = ...,
    name: str | None = ...,
) -> npt.NDArray[np.floating[Any]]: ...
def CropAndResize(  # noqa: N802
    *,
    image: npt.ArrayLike,
    boxes: npt.ArrayLike,
    box_ind: npt.ArrayLike,
    crop_size: npt.ArrayLike,
    method: Literal["bilinear", "nearest"] = ...,
    extrapolation_value: float = ...,
    name: str | None = ...,
) -> npt.NDArray[np.float32]: ...
def CropAndResizeGradBoxes(  # noqa: N802
    *,
    grads: npt.ArrayLike,
    image: npt.ArrayLike,
    boxes: npt.ArrayLike,
    box_ind: npt.ArrayLike,
    method: Literal["bilinear"] = ...,
    name: str | None = ...,
) -> npt.NDArray[np.float32]: ...
