"""Drop-ins for code written against ``tf.raw_ops``.

Same names, keyword-only arguments and semantics as TensorFlow's raw ops;
``name`` is accepted and ignored.  These always compute with flush-to-zero
and denormals-are-zero, as TensorFlow's CPU kernels do, so float32 and
float64 results are TensorFlow's bits on every input.

Examples
--------
>>> import numpy as np
>>> from cropgrad import raw_ops
>>> out = raw_ops.CropAndResizeGradImage(
...     grads=np.ones((1, 1, 1, 1), np.float32), boxes=[[0.5, 0.5, 0.5, 0.5]],
...     box_ind=[0], image_size=[1, 3, 3, 1], T="float32")
>>> float(out[0, 1, 1, 0])
1.0
"""

import cropgrad
from cropgrad import _validation as _v

__all__ = ["CropAndResize", "CropAndResizeGradBoxes", "CropAndResizeGradImage"]


def CropAndResizeGradImage(
    *, grads, boxes, box_ind, image_size, T, method="bilinear", name=None
):  # noqa: N802
    """``tf.raw_ops.CropAndResizeGradImage``: see `cropgrad.crop_and_resize_grad_image`."""
    # Resolved here so that a bad T is reported as T, not as dtype.
    dtype = _v.output_dtype(T, "T")
    return cropgrad.crop_and_resize_grad_image(
        grads,
        boxes,
        box_ind,
        image_size,
        dtype=dtype,
        method=method,
        flush_denormals=True,
    )


def CropAndResize(
    *,
    image,
    boxes,
    box_ind,
    crop_size,
    method="bilinear",
    extrapolation_value=0.0,
    name=None,
):  # noqa: N802
    """``tf.raw_ops.CropAndResize``: see `cropgrad.crop_and_resize`."""
    return cropgrad.crop_and_resize(
        image,
        boxes,
        box_ind,
        crop_size,
        method=method,
        extrapolation_value=extrapolation_value,
        flush_denormals=True,
    )


def CropAndResizeGradBoxes(
    *, grads, image, boxes, box_ind, method="bilinear", name=None
):  # noqa: N802
    """``tf.raw_ops.CropAndResizeGradBoxes``: see `cropgrad.crop_and_resize_grad_boxes`."""
    return cropgrad.crop_and_resize_grad_boxes(
        grads, image, boxes, box_ind, method=method, flush_denormals=True
    )
