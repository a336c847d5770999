"""The crop_and_resize family: TensorFlow's CropAndResize, its image and
boxes gradients, and its boxes JVP (C-level API 1.0)."""

from .common import (
    BILINEAR,
    BOTH_METHODS,
    BOX_IND,
    IMAGE_DTYPE,
    LAYOUT,
    OPTIONS,
    arg,
    array,
    attribute,
    family,
    method,
    op,
    options,
    result,
    shape,
)
from .model import CParam

__all__ = ["FAMILY"]

# TensorFlow's layout by default, but PyTorch's in cropgrad.torch.
_LAYOUTS = {"numpy": "NHWC", "jax": "NHWC", "torch": "NCHW"}

_IMAGE = CParam("const void*", "image", "IN  [batch, H, W, depth] or NCHW")
_GRADS = CParam(
    "const float*", "grads", "IN  [num_boxes, crop_h, crop_w, depth] or NCHW"
)
_BOXES = CParam("const float*", "boxes", "IN  [num_boxes, 4] y1, x1, y2, x2")
_CROPS = "[num_boxes, crop_h, crop_w, depth] or NCHW"
_SIZES = (
    CParam("int64_t", "num_boxes"),
    CParam("int64_t", "crop_height"),
    CParam("int64_t", "crop_width"),
)

FAMILY = family(
    "crop_and_resize",
    "boxes",
    _LAYOUTS,
    (1, 0),
    # The method first; the forward op's fill, its own, after the fold.
    (
        attribute("method", "s32"),
        *OPTIONS,
        attribute("extrapolation_value", "f32"),
    ),
    forward=op(
        "crop_and_resize",
        (
            array("image", "image", 4, "image"),
            array("boxes", "coords", 2, "float32"),
            array("box_ind", "indices", 1, "index"),
            arg("crop_size", "ints"),
            method(BOTH_METHODS),
            arg("extrapolation_value", "float", 0.0),
            *options(),
        ),
        (
            _IMAGE,
            IMAGE_DTYPE,
            shape("image_shape"),
            _BOXES,
            *BOX_IND,
            *_SIZES,
            CParam("int", "method", "CG_BILINEAR or CG_NEAREST"),
            CParam("float", "extrapolation_value"),
            LAYOUT,
            CParam("float*", "crops", f"OUT {_CROPS}"),
        ),
        result("crops", 4, "float32"),
    ),
    grad_image=op(
        "crop_and_resize_grad_image",
        (
            array("grads", "grads", 4, "float32"),
            array("boxes", "coords", 2, "float32"),
            array("box_ind", "indices", 1, "index"),
            arg("image_size", "ints", renamed={"jax": "image_shape"}),
            arg("dtype", "dtype", "float32"),
            method(BOTH_METHODS),
            *options(),
        ),
        (
            _GRADS,
            shape("grads_shape"),
            _BOXES,
            *BOX_IND,
            shape("image_size", "IN  4 values: the output's shape, layout order"),
            CParam("void*", "output", "OUT image_size, of output_dtype"),
            CParam(
                "int", "output_dtype", "CG_FLOAT16, CG_BFLOAT16, CG_FLOAT32, CG_FLOAT64"
            ),
            CParam("int", "method", "CG_BILINEAR or CG_NEAREST"),
            LAYOUT,
        ),
        result("output", 4, "float"),
    ),
    grad_coords=op(
        "crop_and_resize_grad_boxes",
        (
            array("grads", "grads", 4, "float32"),
            array("image", "image", 4, "image"),
            array("boxes", "coords", 2, "float32"),
            array("box_ind", "indices", 1, "index"),
            method(BILINEAR),
            *options(),
        ),
        (
            _GRADS,
            shape("grads_shape"),
            _IMAGE,
            IMAGE_DTYPE,
            shape("image_shape"),
            _BOXES,
            *BOX_IND,
            CParam("float*", "output", "OUT [num_boxes, 4]"),
            CParam("int", "method", "CG_BILINEAR only"),
            LAYOUT,
        ),
        result("output", 2, "float32"),
    ),
    jvp_coords=op(
        "crop_and_resize_jvp_boxes",
        (
            array("image", "image", 4, "image"),
            array("boxes", "coords", 2, "float32"),
            array("box_ind", "indices", 1, "index"),
            array("boxes_tangent", "tangent", 2, "float32"),
            arg("crop_size", "ints"),
            method(BILINEAR),
            *options(),
        ),
        (
            _IMAGE,
            IMAGE_DTYPE,
            shape("image_shape"),
            _BOXES,
            CParam("const float*", "boxes_tangent", "IN  [num_boxes, 4], any values"),
            *BOX_IND,
            *_SIZES,
            CParam("int", "method", "CG_BILINEAR only"),
            LAYOUT,
            CParam("float*", "output", f"OUT {_CROPS}"),
        ),
        result("output", 4, "float32"),
        c_doc=(
            "The derivative of cg_crop_and_resize (bilinear) along a tangent of "
            "the boxes: per crop element, the image's slopes at the sample times "
            "how fast its coordinates move (the boxes gradient's factors, so that "
            "cg_crop_and_resize_grad_boxes is this map's transpose); 0 where the "
            "sample is outside the image.  Arguments as cg_crop_and_resize's, "
            "with boxes_tangent after boxes, no extrapolation value and "
            "CG_BILINEAR only."
        ),
    ),
)
