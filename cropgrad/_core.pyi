# Generated from cropgrad's op model by cropgrad/_ops/generate.py, from
# cropgrad/_core.pyi.tp: edit those, not this file.
#
# Stubs of the NumPy API's gate and bridge to the C-level API (_core.pyx).
# Shapes are in the layout's order; arrays are C-contiguous, of the dtype
# their code (cropgrad.capi._CODES) names.  RoIAlign's grads, boxes and
# tangents (and its boxes gradient) are of the arithmetic type `boxes_dtype`
# names (float32 or float64; `grads_dtype` the same code).  The bridges
# are generated from the op model (_bridges.pxi), as are their stubs.

from typing import Any, Sequence

import numpy as np
import numpy.typing as npt

_EXCEPTIONS: dict[int, type[Exception]]

def check_forward(
    image_shape: Sequence[int],
    image_dtype: int,
    num_boxes: int,
    crop_height: int,
    crop_width: int,
    method: int,
    layout: int,
    num_threads: int,
) -> None: ...
def check_jvp_boxes(
    image_shape: Sequence[int],
    image_dtype: int,
    num_boxes: int,
    crop_height: int,
    crop_width: int,
    method: int,
    layout: int,
    num_threads: int,
) -> None: ...
def check_grad_image(
    grads_shape: Sequence[int],
    image_size: Sequence[int],
    output_dtype: int,
    method: int,
    layout: int,
    num_threads: int,
    size_name: str = ...,
) -> None: ...
def check_grad_boxes(
    grads_shape: Sequence[int],
    image_shape: Sequence[int],
    image_dtype: int,
    method: int,
    layout: int,
    num_threads: int,
) -> None: ...
def check_roi_align(
    image_shape: Sequence[int],
    image_dtype: int,
    boxes_dtype: int,
    num_boxes: int,
    output_height: int,
    output_width: int,
    spatial_scale: float,
    sampling_ratio: int,
    layout: int,
    output_dtype: int,
    num_threads: int,
) -> None: ...
def check_roi_align_grad_image(
    grads_shape: Sequence[int],
    grads_dtype: int,
    boxes_dtype: int,
    image_size: Sequence[int],
    spatial_scale: float,
    sampling_ratio: int,
    layout: int,
    output_dtype: int,
    num_threads: int,
    size_name: str = ...,
) -> None: ...
def check_roi_align_grad_boxes(
    grads_shape: Sequence[int],
    grads_dtype: int,
    image_shape: Sequence[int],
    image_dtype: int,
    boxes_dtype: int,
    spatial_scale: float,
    sampling_ratio: int,
    layout: int,
    num_threads: int,
) -> None: ...
def crop_and_resize(
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
def crop_and_resize_grad_image(
    grads: npt.NDArray[np.float32],
    boxes: npt.NDArray[np.float32],
    box_ind: npt.NDArray[np.integer[Any]],
    box_ind_dtype: int,
    image_size: Sequence[int],
    out: npt.NDArray[Any],
    output_dtype: int,
    method: int,
    layout: int,
    num_threads: int,
    flush: bool,
) -> None: ...
def crop_and_resize_grad_boxes(
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
def crop_and_resize_jvp_boxes(
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
def roi_align(
    image: npt.NDArray[Any],
    image_dtype: int,
    boxes: npt.NDArray[np.floating[Any]],
    boxes_dtype: int,
    box_ind: npt.NDArray[np.integer[Any]],
    box_ind_dtype: int,
    output_height: int,
    output_width: int,
    spatial_scale: float,
    sampling_ratio: int,
    aligned: int,
    layout: int,
    out: npt.NDArray[Any],
    output_dtype: int,
    num_threads: int,
    flush: bool,
) -> None: ...
def roi_align_grad_image(
    grads: npt.NDArray[np.floating[Any]],
    grads_dtype: int,
    boxes: npt.NDArray[np.floating[Any]],
    boxes_dtype: int,
    box_ind: npt.NDArray[np.integer[Any]],
    box_ind_dtype: int,
    image_size: Sequence[int],
    spatial_scale: float,
    sampling_ratio: int,
    aligned: int,
    layout: int,
    out: npt.NDArray[Any],
    output_dtype: int,
    num_threads: int,
    flush: bool,
) -> None: ...
def roi_align_grad_boxes(
    grads: npt.NDArray[np.floating[Any]],
    grads_dtype: int,
    image: npt.NDArray[Any],
    image_dtype: int,
    boxes: npt.NDArray[np.floating[Any]],
    boxes_dtype: int,
    box_ind: npt.NDArray[np.integer[Any]],
    box_ind_dtype: int,
    spatial_scale: float,
    sampling_ratio: int,
    aligned: int,
    layout: int,
    out: npt.NDArray[Any],
    num_threads: int,
    flush: bool,
) -> None: ...
def roi_align_jvp_boxes(
    image: npt.NDArray[Any],
    image_dtype: int,
    boxes: npt.NDArray[np.floating[Any]],
    boxes_tangent: npt.NDArray[np.floating[Any]],
    boxes_dtype: int,
    box_ind: npt.NDArray[np.integer[Any]],
    box_ind_dtype: int,
    output_height: int,
    output_width: int,
    spatial_scale: float,
    sampling_ratio: int,
    aligned: int,
    layout: int,
    out: npt.NDArray[Any],
    output_dtype: int,
    num_threads: int,
    flush: bool,
) -> None: ...
def grid_sample(
    image: npt.NDArray[Any],
    grid: npt.NDArray[np.floating[Any]],
    dtype: int,
    mode: int,
    padding_mode: int,
    align_corners: int,
    layout: int,
    out: npt.NDArray[Any],
    num_threads: int,
    flush: bool,
) -> None: ...
def grid_sample_grad_image(
    grads: npt.NDArray[np.floating[Any]],
    grid: npt.NDArray[np.floating[Any]],
    dtype: int,
    image_size: Sequence[int],
    mode: int,
    padding_mode: int,
    align_corners: int,
    layout: int,
    out: npt.NDArray[Any],
    num_threads: int,
    flush: bool,
) -> None: ...
def grid_sample_grad_grid(
    grads: npt.NDArray[np.floating[Any]],
    image: npt.NDArray[Any],
    grid: npt.NDArray[np.floating[Any]],
    dtype: int,
    mode: int,
    padding_mode: int,
    align_corners: int,
    layout: int,
    out: npt.NDArray[Any],
    num_threads: int,
    flush: bool,
) -> None: ...
def grid_sample_jvp_grid(
    image: npt.NDArray[Any],
    grid: npt.NDArray[np.floating[Any]],
    grid_tangent: npt.NDArray[np.floating[Any]],
    dtype: int,
    mode: int,
    padding_mode: int,
    align_corners: int,
    layout: int,
    out: npt.NDArray[Any],
    num_threads: int,
    flush: bool,
) -> None: ...
def build_info() -> dict[str, Any]: ...
def advise_huge_pages(address: int, nbytes: int) -> int: ...
