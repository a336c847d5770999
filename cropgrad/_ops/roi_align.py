"""The RoIAlign family: torchvision's roi_align (average pooling) and ONNX's
RoiAlign, its image gradient, and its boxes gradient and JVP, which neither
has (C-level API 1.1)."""

from .common import (
    BOX_IND,
    IMAGE_DTYPE,
    LAYOUT,
    OPTIONS,
    arg,
    array,
    attribute,
    family,
    op,
    options,
    result,
    shape,
)
from .model import CParam

__all__ = ["FAMILY"]

# torchvision's and ONNX's layout everywhere.
_LAYOUTS = {"numpy": "NCHW", "jax": "NCHW", "torch": "NCHW"}

# The APIs whose ops take what torchvision's do not: the index of each
# box's image apart, an output dtype, a layout, threads.  PyTorch's ops keep
# torchvision's arguments (boxes ``Tensor[K, 5]``, the image index first;
# the dtype, layout and threads of the tensors and of PyTorch).
_NOT_TORCH = ("numpy", "jax")


def _options(dtype=True):
    """The sampling options (positional in PyTorch, as torchvision's), the
    output dtype, then the usual tail."""
    torch = ("torch",)
    return (
        arg("spatial_scale", "float", 1.0, keyword_only=True, positional_in=torch),
        arg("sampling_ratio", "int", -1, keyword_only=True, positional_in=torch),
        arg("aligned", "bool", False, keyword_only=True, positional_in=torch),
        *(
            (arg("dtype", "dtype", None, keyword_only=True, apis=_NOT_TORCH),)
            if dtype
            else ()
        ),
        *options(apis=_NOT_TORCH),
    )


def _box_ind():
    """The image of each box: torchvision's boxes hold it in column 0."""
    return array("box_ind", "indices", 1, "index", apis=_NOT_TORCH)


_IMAGE = CParam("const void*", "image", "IN  [batch, C, H, W] (CG_NCHW) or NHWC")
_GRADS = CParam("const void*", "grads", "IN  [num_boxes, C, out_h, out_w] or NHWC")
_BOXES = CParam("const void*", "boxes", "IN  [num_boxes, 4] x1, y1, x2, y2")
_BOXES_DTYPE = CParam("int", "boxes_dtype", "the arithmetic type")
_SIZES = (
    CParam("int64_t", "num_boxes"),
    CParam("int64_t", "output_height"),
    CParam("int64_t", "output_width"),
)
_SAMPLING = (
    CParam("double", "spatial_scale"),
    CParam("int", "sampling_ratio", "<= 0: adaptive, at most 4096"),
    CParam("int", "aligned", "non-zero: the half-pixel shift"),
)
_OUTPUT_DTYPE = CParam(
    "int", "output_dtype", "CG_FLOAT16, CG_BFLOAT16, CG_FLOAT32, CG_FLOAT64"
)

FAMILY = family(
    "roi_align",
    "boxes",
    _LAYOUTS,
    (1, 1),
    (
        attribute("spatial_scale", "f64"),
        attribute("sampling_ratio", "s32"),
        attribute("aligned", "s32"),
        *OPTIONS,
    ),
    c_doc=(
        "1.1: RoIAlign (torchvision's roi_align, average pooling, and ONNX's "
        "RoiAlign), its image gradient, and its boxes gradient and JVP.  The "
        "arithmetic type is double for CG_FLOAT64 data (the image; the "
        "gradient for the image gradient) and float otherwise: boxes, grads, "
        "tangents and the boxes gradient have it, their dtype codes "
        "(CG_FLOAT32 or CG_FLOAT64) saying which.  Boxes are [x1, y1, x2, y2] "
        "in the input image's coordinates, which spatial_scale maps to the "
        "feature map; sampling_ratio <= 0 is adaptive (ceil of the bin's "
        "size), at most 4096; aligned non-zero shifts by half a pixel.  "
        "Outputs: CG_FLOAT16, CG_BFLOAT16 (from float arithmetic only), "
        "CG_FLOAT32 or CG_FLOAT64, rounded once.  A box whose adaptive grid "
        "would put more than 2**24 samples in a bin is refused (CG_ERR_VALUE) "
        "before any work."
    ),
    forward=op(
        "roi_align",
        (
            array("image", "image", 4, "image", renamed={"torch": "input"}),
            array("boxes", "coords", 2, "arithmetic"),
            _box_ind(),
            arg("output_size", "ints"),
            *_options(),
        ),
        (
            _IMAGE,
            IMAGE_DTYPE,
            shape("image_shape"),
            _BOXES,
            _BOXES_DTYPE,
            *BOX_IND,
            *_SIZES,
            *_SAMPLING,
            LAYOUT,
            CParam("void*", "output", "OUT [num_boxes, C, out_h, out_w] or NHWC"),
            _OUTPUT_DTYPE,
        ),
        result("output", 4, "float"),
    ),
    grad_image=op(
        "roi_align_grad_image",
        (
            array("grads", "grads", 4, "arithmetic"),
            array("boxes", "coords", 2, "arithmetic"),
            _box_ind(),
            arg("image_size", "ints", renamed={"jax": "image_shape"}),
            *_options(),
        ),
        (
            _GRADS,
            CParam(
                "int", "grads_dtype", "CG_FLOAT32 or CG_FLOAT64: the arithmetic type"
            ),
            shape("grads_shape"),
            CParam("const void*", "boxes", "IN  [num_boxes, 4], grads_dtype"),
            CParam("int", "boxes_dtype", "grads_dtype"),
            *BOX_IND,
            shape("image_size", "IN  4 values: the output's shape, layout order"),
            *_SAMPLING,
            LAYOUT,
            CParam("void*", "output", "OUT image_size, of output_dtype"),
            _OUTPUT_DTYPE,
        ),
        result("output", 4, "float"),
    ),
    grad_coords=op(
        "roi_align_grad_boxes",
        (
            array("grads", "grads", 4, "arithmetic"),
            array("image", "image", 4, "image"),
            array("boxes", "coords", 2, "arithmetic"),
            _box_ind(),
            *_options(dtype=False),
        ),
        (
            _GRADS,
            CParam("int", "grads_dtype", "the arithmetic type"),
            shape("grads_shape"),
            _IMAGE,
            IMAGE_DTYPE,
            shape("image_shape"),
            _BOXES,
            _BOXES_DTYPE,
            *BOX_IND,
            *_SAMPLING,
            LAYOUT,
            CParam("void*", "output", "OUT [num_boxes, 4], boxes_dtype"),
        ),
        result("output", 2, "coords"),
    ),
    jvp_coords=op(
        "roi_align_jvp_boxes",
        (
            array("image", "image", 4, "image"),
            array("boxes", "coords", 2, "arithmetic"),
            _box_ind(),
            array("boxes_tangent", "tangent", 2, "coords"),
            arg("output_size", "ints"),
            *_options(),
        ),
        (
            _IMAGE,
            IMAGE_DTYPE,
            shape("image_shape"),
            _BOXES,
            CParam("const void*", "boxes_tangent", "IN  [num_boxes, 4], any values"),
            CParam("int", "boxes_dtype", "the arithmetic type, of both"),
            *BOX_IND,
            *_SIZES,
            *_SAMPLING,
            LAYOUT,
            CParam("void*", "output", "OUT as cg_roi_align's"),
            _OUTPUT_DTYPE,
        ),
        result("output", 4, "float"),
        c_doc=(
            "The derivative of cg_roi_align along a tangent of the boxes, whose "
            "transpose cg_roi_align_grad_boxes is."
        ),
    ),
)
