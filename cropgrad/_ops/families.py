"""The op families: each op of each family, its arguments written once.

Every layer reads its ops from here: the NumPy API's bindings, the
``torch.library`` schemas, kernels, fake implementations and vmap rules,
the JAX primitives and their derivative rules, the public functions'
signatures and stubs (``tests/test_signatures.py`` holds them to it).  A
family is its ops by kind (`model.KINDS`) and the roles of their operands
(`model.ROLES`), so that every layer's rules are written once for all.
"""

import dataclasses

from cropgrad._ops.model import APIS, REQUIRED, Arg, Family, Op

__all__ = ["FAMILIES", "OPS"]


def _arg(name, kind, default=REQUIRED, **kw):
    return Arg(name, kind, default, **kw)


_BOTH_METHODS = ("bilinear", "nearest")
# The boxes derivatives: nearest sampling is piecewise constant in the boxes.
_BILINEAR = ("bilinear",)


def _method(choices):
    return _arg("method", "str", "bilinear", choices=choices)


# The options every op of the crop_and_resize family ends with (`apis`:
# the APIs that take them).
def _options(flush=True, apis=APIS):
    flushing = ("numpy", "torch") if flush else ("numpy",)
    return (
        _arg("out", "out", None, keyword_only=True, apis=("numpy",)),
        _arg(
            "data_format",
            "str",
            keyword_only=True,
            choices=("NHWC", "NCHW"),
            apis=apis,
        ),
        _arg("num_threads", "threads", None, keyword_only=True, apis=apis),
        _arg(
            "flush_denormals",
            "bool",
            False,
            keyword_only=True,
            apis=tuple(a for a in apis if a in flushing),
        ),
    )


# TensorFlow's layout by default, but PyTorch's in cropgrad.torch.
_CROP_AND_RESIZE_LAYOUTS = {"numpy": "NHWC", "jax": "NHWC", "torch": "NCHW"}
# torchvision's and ONNX's everywhere.
_ROI_ALIGN_LAYOUTS = {"numpy": "NCHW", "jax": "NCHW", "torch": "NCHW"}


# The APIs whose RoIAlign ops take what torchvision's do not: the index of
# each box's image apart, an output dtype, a layout, threads.  PyTorch's
# ops keep torchvision's arguments (boxes ``Tensor[K, 5]``, the image index
# first; the dtype, layout and threads of the tensors and of PyTorch).
_NOT_TORCH = ("numpy", "jax")


def _roi_options(dtype=True):
    """RoIAlign's sampling options (positional in PyTorch, as torchvision's),
    the output dtype, then the usual tail."""
    torch = ("torch",)
    return (
        _arg("spatial_scale", "float", 1.0, keyword_only=True, positional_in=torch),
        _arg("sampling_ratio", "int", -1, keyword_only=True, positional_in=torch),
        _arg("aligned", "bool", False, keyword_only=True, positional_in=torch),
        *(
            (_arg("dtype", "dtype", None, keyword_only=True, apis=_NOT_TORCH),)
            if dtype
            else ()
        ),
        *_options(apis=_NOT_TORCH),
    )


def _box_ind():
    """The image of each box: torchvision's boxes hold it in column 0."""
    return _arg("box_ind", "array", role="indices", apis=_NOT_TORCH)


def _op(name, args, apis=APIS):
    return Op(name, args, layouts={}, apis=apis)


def _family(name, coords, layouts, c_api, **ops):
    """Family `name`: its `ops` by kind, each given its family, kind, the
    family's default layouts and the C-level API version that added it."""
    ops = {
        kind: dataclasses.replace(
            op, family=name, kind=kind, layouts=layouts, c_api=c_api
        )
        for kind, op in ops.items()
    }
    return Family(name, ops, coords)


FAMILIES = {
    family.name: family
    for family in (
        _family(
            "crop_and_resize",
            "boxes",
            _CROP_AND_RESIZE_LAYOUTS,
            (1, 0),
            forward=_op(
                "crop_and_resize",
                (
                    _arg("image", "array", role="image"),
                    _arg("boxes", "array", role="coords"),
                    _arg("box_ind", "array", role="indices"),
                    _arg("crop_size", "ints"),
                    _method(_BOTH_METHODS),
                    _arg("extrapolation_value", "float", 0.0),
                    *_options(),
                ),
            ),
            grad_image=_op(
                "crop_and_resize_grad_image",
                (
                    _arg("grads", "array", role="grads"),
                    _arg("boxes", "array", role="coords"),
                    _arg("box_ind", "array", role="indices"),
                    _arg("image_size", "ints", renamed={"jax": "image_shape"}),
                    _arg("dtype", "dtype", "float32"),
                    _method(_BOTH_METHODS),
                    *_options(),
                ),
            ),
            grad_coords=_op(
                "crop_and_resize_grad_boxes",
                (
                    _arg("grads", "array", role="grads"),
                    _arg("image", "array", role="image"),
                    _arg("boxes", "array", role="coords"),
                    _arg("box_ind", "array", role="indices"),
                    _method(_BILINEAR),
                    *_options(),
                ),
            ),
            jvp_coords=_op(
                "crop_and_resize_jvp_boxes",
                (
                    _arg("image", "array", role="image"),
                    _arg("boxes", "array", role="coords"),
                    _arg("box_ind", "array", role="indices"),
                    _arg("boxes_tangent", "array", role="tangent"),
                    _arg("crop_size", "ints"),
                    _method(_BILINEAR),
                    *_options(),
                ),
            ),
        ),
        _family(
            "roi_align",
            "boxes",
            _ROI_ALIGN_LAYOUTS,
            (1, 1),
            forward=_op(
                "roi_align",
                (
                    _arg("image", "array", role="image", renamed={"torch": "input"}),
                    _arg("boxes", "array", role="coords"),
                    _box_ind(),
                    _arg("output_size", "ints"),
                    *_roi_options(),
                ),
            ),
            grad_image=_op(
                "roi_align_grad_image",
                (
                    _arg("grads", "array", role="grads"),
                    _arg("boxes", "array", role="coords"),
                    _box_ind(),
                    _arg("image_size", "ints", renamed={"jax": "image_shape"}),
                    *_roi_options(),
                ),
            ),
            grad_coords=_op(
                "roi_align_grad_boxes",
                (
                    _arg("grads", "array", role="grads"),
                    _arg("image", "array", role="image"),
                    _arg("boxes", "array", role="coords"),
                    _box_ind(),
                    *_roi_options(dtype=False),
                ),
            ),
            jvp_coords=_op(
                "roi_align_jvp_boxes",
                (
                    _arg("image", "array", role="image"),
                    _arg("boxes", "array", role="coords"),
                    _box_ind(),
                    _arg("boxes_tangent", "array", role="tangent"),
                    _arg("output_size", "ints"),
                    *_roi_options(),
                ),
            ),
        ),
    )
}

# Every op with a kernel, by name, family by family in the C-level API's
# order.
OPS = {op.name: op for family in FAMILIES.values() for op in family.ops.values()}
