"""Shapes in a layout, and each op's result: what abstract evaluation needs.

Shapes are 4-D in the layout's order (a layout code, `LAYOUT_CODES`): NHWC
``[n, height, width, depth]`` or NCHW ``[n, depth, height, width]``.

May import: NumPy, cropgrad._api.validation.
"""

import numpy as np

from cropgrad._api import validation as _v

NHWC = _v.LAYOUT_CODES["NHWC"]
_FLOAT32 = np.dtype(np.float32)


def dims(shape, layout):
    """(batch, height, width, depth) of a 4-D shape in `layout`."""
    if layout == NHWC:
        return tuple(shape)
    batch, depth, height, width = shape
    return batch, height, width, depth


def crop_size(grads_shape, layout):
    """(crop_height, crop_width) of crops (or grads) of `grads_shape`."""
    return tuple(dims(grads_shape, layout)[1:3])


def result(kind, operands, params, size="crop_size", coords="boxes"):
    """The shape and dtype of an op's result, of `kind`.

    `operands` maps the op's operand names to their abstract values;
    `params` are the op's parameters, `size` the name of the one holding
    the crops' height and width, `coords` the coordinates' operand.  The
    kinds: "crops" (shaped as the image's crops, in the ``dtype`` parameter
    if the op has one, else float32), "sampled" (grid sampling's
    ``[N, C, H_out, W_out]``, or NHWC, in the ``dtype`` parameter, else the
    grid's),
    "image" (the ``image_shape`` and ``dtype`` parameters), "coords" (the
    coordinates' shape and dtype).
    """
    if kind == "image":
        return params["image_shape"], params["dtype"]
    points = operands[coords]
    if kind == "coords":
        return tuple(points.shape), np.dtype(points.dtype)
    if kind == "sampled":
        batch, _, _, depth = dims(operands["image"].shape, params["data_format"])
        out_h, out_w = points.shape[1:3]
        nhwc = params["data_format"] == NHWC
        shape = (batch, out_h, out_w, depth) if nhwc else (batch, depth, out_h, out_w)
        return shape, params.get("dtype", np.dtype(points.dtype))
    crop_height, crop_width = params[size]
    shape = _v.crops_shape(
        params["data_format"],
        operands["image"].shape,
        points.shape[0],
        crop_height,
        crop_width,
    )
    return shape, params.get("dtype", _FLOAT32)
