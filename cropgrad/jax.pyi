from typing import Any, Literal

import jax
import numpy.typing as npt

__all__ = [
    "DEFAULT_THREADS",
    "FFI_TARGETS",
    "crop_and_resize",
    "crop_and_resize_grad_boxes",
    "crop_and_resize_grad_image",
    "crop_and_resize_jvp_boxes",
    "grid_sample",
    "grid_sample_grad_grid",
    "grid_sample_grad_image",
    "grid_sample_jvp_grid",
    "roi_align",
    "roi_align_grad_boxes",
    "roi_align_grad_image",
    "roi_align_jvp_boxes",
]

DEFAULT_THREADS: int
FFI_TARGETS: tuple[str, ...]

_Method = Literal["bilinear", "nearest"]
_Format = Literal["NHWC", "NCHW"]
_Array = jax.Array | npt.ArrayLike
_Mode = Literal["bilinear", "nearest", "bicubic"]
_Padding = Literal["zeros", "border", "reflection"]

def crop_and_resize(
    image: _Array,
    boxes: _Array,
    box_ind: _Array,
    crop_size: int | tuple[int, int] | list[int],
    method: _Method = ...,
    extrapolation_value: float = ...,
    *,
    data_format: _Format = ...,
    num_threads: int | None = ...,
) -> jax.Array: ...
def crop_and_resize_grad_image(
    grads: _Array,
    boxes: _Array,
    box_ind: _Array,
    image_shape: tuple[int, ...] | list[int],
    dtype: Any = ...,
    method: _Method = ...,
    *,
    data_format: _Format = ...,
    num_threads: int | None = ...,
) -> jax.Array: ...
def crop_and_resize_grad_boxes(
    grads: _Array,
    image: _Array,
    boxes: _Array,
    box_ind: _Array,
    method: Literal["bilinear"] = ...,
    *,
    data_format: _Format = ...,
    num_threads: int | None = ...,
) -> jax.Array: ...
def crop_and_resize_jvp_boxes(
    image: _Array,
    boxes: _Array,
    box_ind: _Array,
    boxes_tangent: _Array,
    crop_size: int | tuple[int, int] | list[int],
    method: Literal["bilinear"] = ...,
    *,
    data_format: _Format = ...,
    num_threads: int | None = ...,
) -> jax.Array: ...
def roi_align(
    image: _Array,
    boxes: _Array,
    box_ind: _Array,
    output_size: int | tuple[int, int] | list[int],
    *,
    spatial_scale: float = ...,
    sampling_ratio: int = ...,
    aligned: bool = ...,
    dtype: Any = ...,
    data_format: _Format = ...,
    num_threads: int | None = ...,
) -> jax.Array: ...
def roi_align_grad_image(
    grads: _Array,
    boxes: _Array,
    box_ind: _Array,
    image_shape: tuple[int, ...] | list[int],
    *,
    spatial_scale: float = ...,
    sampling_ratio: int = ...,
    aligned: bool = ...,
    dtype: Any = ...,
    data_format: _Format = ...,
    num_threads: int | None = ...,
) -> jax.Array: ...
def roi_align_grad_boxes(
    grads: _Array,
    image: _Array,
    boxes: _Array,
    box_ind: _Array,
    *,
    spatial_scale: float = ...,
    sampling_ratio: int = ...,
    aligned: bool = ...,
    data_format: _Format = ...,
    num_threads: int | None = ...,
) -> jax.Array: ...
def roi_align_jvp_boxes(
    image: _Array,
    boxes: _Array,
    box_ind: _Array,
    boxes_tangent: _Array,
    output_size: int | tuple[int, int] | list[int],
    *,
    spatial_scale: float = ...,
    sampling_ratio: int = ...,
    aligned: bool = ...,
    dtype: Any = ...,
    data_format: _Format = ...,
    num_threads: int | None = ...,
) -> jax.Array: ...
def grid_sample(
    image: _Array,
    grid: _Array,
    *,
    mode: _Mode = ...,
    padding_mode: _Padding = ...,
    align_corners: bool = ...,
    dtype: Any = ...,
    data_format: _Format = ...,
    num_threads: int | None = ...,
) -> jax.Array: ...
def grid_sample_grad_image(
    grads: _Array,
    grid: _Array,
    image_shape: tuple[int, ...] | list[int],
    *,
    mode: _Mode = ...,
    padding_mode: _Padding = ...,
    align_corners: bool = ...,
    dtype: Any = ...,
    data_format: _Format = ...,
    num_threads: int | None = ...,
) -> jax.Array: ...
def grid_sample_grad_grid(
    grads: _Array,
    image: _Array,
    grid: _Array,
    *,
    mode: _Mode = ...,
    padding_mode: _Padding = ...,
    align_corners: bool = ...,
    data_format: _Format = ...,
    num_threads: int | None = ...,
) -> jax.Array: ...
def grid_sample_jvp_grid(
    image: _Array,
    grid: _Array,
    grid_tangent: _Array,
    *,
    mode: _Mode = ...,
    padding_mode: _Padding = ...,
    align_corners: bool = ...,
    dtype: Any = ...,
    data_format: _Format = ...,
    num_threads: int | None = ...,
) -> jax.Array: ...
