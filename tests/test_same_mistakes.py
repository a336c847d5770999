"""One mistake, one answer: the NumPy API, `cropgrad.jax` and
`cropgrad.torch` raise the same exception type with the same words.

Each row of `MISTAKES` spoils one argument of a valid call; the call is
made through the three APIs on the same arrays, and the exceptions
compared: crop_and_resize's family in NHWC, which every API takes, and
RoIAlign's in NCHW, its default and the only layout of PyTorch's RoIAlign,
as grid sampling's (PyTorch's take torch.nn.functional.grid_sample's arguments,
the forward op through `cropgrad.torch.grid_sample`, the others through
``torch.ops.cropgrad.grid_sample_*``).
PyTorch's RoIAlign takes torchvision's arguments: `cropgrad.torch.roi_align`
(boxes ``Tensor[K, 5]``, each box's image first, or a list of
``Tensor[L, 4]``, one per image) and, for its gradients and JVP, the custom
ops ``torch.ops.cropgrad.roi_align_*`` (boxes and their tangent ``[K, 5]``),
which take no box_ind, data_format or dtype.  A mistake an API cannot make
is listed in `CANNOT` with the reason, and made in the others.

The only words allowed to differ are an argument's name where an API
spells it otherwise (the op model's renames: JAX's ``image_shape`` for
``image_size``, PyTorch's ``input`` for RoIAlign's image) and torchvision's
spelling of the boxes: ``boxes[:, 0]`` for box_ind and 5 columns for 4.
A mistake in the data's values (a NaN box, an index out of range) is seen
by JAX only when the computation runs, where XLA raises its own error: that
error carries the exception's name and the same message (docs/adapters.md).

Where the APIs answer differently, the row is kept and marked
``xfail(strict=True)`` with the difference (`DIFFERENT`): the package's to
fix, after which the mark goes.
"""

import re

import numpy as np
import pytest
from _helpers import required

import cropgrad
from cropgrad._ops import OPS, REQUIRED

try:
    import jax
    import jax.numpy as jnp
    import torch

    import cropgrad.jax
    import cropgrad.torch
except ImportError:
    if required("CROPGRAD_REQUIRE_ADAPTERS"):
        raise
    pytest.skip(
        "JAX or PyTorch is missing (not required: CROPGRAD_REQUIRE_ADAPTERS "
        "is not set)",
        allow_module_level=True,
    )

IMAGE = np.random.default_rng(3).standard_normal((2, 5, 6, 3)).astype(np.float32)
BOXES = np.array([[0, 0, 1, 1], [0.1, 0.2, 0.7, 0.9]], np.float32)
BOX_IND = np.array([0, 1], np.int32)
GRADS = np.ones((2, 2, 2, 3), np.float32)

# RoIAlign's problem, NCHW: boxes [x1, y1, x2, y2] in pixels.
ROI_IMAGE = np.random.default_rng(4).standard_normal((2, 3, 5, 6)).astype(np.float32)
ROI_BOXES = np.array([[0, 0, 2, 3], [1, 0.5, 4.5, 3.5]], np.float32)
ROI_GRADS = np.ones((2, 3, 2, 2), np.float32)
ROI_TANGENT = np.array([[1, -1, 0.5, 2], [0, 1, 1, -0.5]], np.float32)

# Grid sampling's problem, NCHW: a grid of (x, y) in [-1, 1], some outside.
_rng = np.random.default_rng(5)
GRID_IMAGE = _rng.standard_normal((2, 3, 5, 6)).astype(np.float32)
GRID = (_rng.random((2, 4, 3, 2)) * 2.4 - 1.2).astype(np.float32)
GRID_GRADS = np.ones((2, 3, 4, 3), np.float32)
GRID_TANGENT = _rng.standard_normal((2, 4, 3, 2)).astype(np.float32)

# op: its valid call's arguments, by name, in the NumPy API's order.
VALID = {
    "crop_and_resize": {
        "image": IMAGE,
        "boxes": BOXES,
        "box_ind": BOX_IND,
        "crop_size": (2, 2),
    },
    "crop_and_resize_grad_image": {
        "grads": GRADS,
        "boxes": BOXES,
        "box_ind": BOX_IND,
        "image_size": IMAGE.shape,
    },
    "crop_and_resize_grad_boxes": {
        "grads": GRADS,
        "image": IMAGE,
        "boxes": BOXES,
        "box_ind": BOX_IND,
    },
    "roi_align": {
        "image": ROI_IMAGE,
        "boxes": ROI_BOXES,
        "box_ind": BOX_IND,
        "output_size": (2, 2),
    },
    "roi_align_grad_image": {
        "grads": ROI_GRADS,
        "boxes": ROI_BOXES,
        "box_ind": BOX_IND,
        "image_size": ROI_IMAGE.shape,
    },
    "roi_align_grad_boxes": {
        "grads": ROI_GRADS,
        "image": ROI_IMAGE,
        "boxes": ROI_BOXES,
        "box_ind": BOX_IND,
    },
    "roi_align_jvp_boxes": {
        "image": ROI_IMAGE,
        "boxes": ROI_BOXES,
        "box_ind": BOX_IND,
        "boxes_tangent": ROI_TANGENT,
        "output_size": (2, 2),
    },
    "grid_sample": {"image": GRID_IMAGE, "grid": GRID},
    "grid_sample_grad_image": {
        "grads": GRID_GRADS,
        "grid": GRID,
        "image_size": GRID_IMAGE.shape,
    },
    "grid_sample_grad_grid": {"grads": GRID_GRADS, "image": GRID_IMAGE, "grid": GRID},
    "grid_sample_jvp_grid": {
        "image": GRID_IMAGE,
        "grid": GRID,
        "grid_tangent": GRID_TANGENT,
    },
}

APIS = ("numpy", "jax", "torch")


def _spoilt(boxes, row, column, value):
    boxes = boxes.copy()
    boxes[row, column] = value
    return boxes


_nan_box = _spoilt(BOXES, 1, 2, np.nan)
_roi_nan_box = _spoilt(ROI_BOXES, 1, 2, np.nan)
_roi_inf_box = _spoilt(ROI_BOXES, 0, 0, -np.inf)
# An adaptive grid of 5e7 x 5e7 samples per bin, beyond 2**24.
_roi_huge_box = _spoilt(ROI_BOXES, 0, slice(2, 4), 1e8)

# Mistakes in the data's values, which JAX sees only when the call runs.
DATA = (
    "box index out of range",
    "NaN box",
    "roi_align: box index out of range",
    "roi_align: negative box index",
    "roi_align: NaN box",
    "roi_align: infinite box",
    "roi_align: more samples in a bin than 2**24",
    "roi_align_grad_image: box index out of range",
    "roi_align_grad_image: no image for the boxes",
    "roi_align_grad_boxes: NaN box",
    "roi_align_jvp_boxes: NaN box",
    "grid_sample: NaN grid",
    "grid_sample_grad_grid: NaN grid",
)

# (name, op, argument, spoilt value, exception)
MISTAKES = [
    ("zero crop", "crop_and_resize", "crop_size", (0, 2), ValueError),
    ("three crop sizes", "crop_and_resize", "crop_size", (2, 2, 2), ValueError),
    ("negative square", "crop_and_resize", "crop_size", -1, ValueError),
    ("float crop size", "crop_and_resize", "crop_size", (2.5, 2), TypeError),
    ("three box columns", "crop_and_resize", "boxes", BOXES[:, :3], ValueError),
    ("one box index short", "crop_and_resize", "box_ind", BOX_IND[:1], ValueError),
    (
        "box index out of range",
        "crop_and_resize",
        "box_ind",
        np.array([0, 5], np.int32),
        IndexError,
    ),
    ("NaN box", "crop_and_resize", "boxes", _nan_box, ValueError),
    ("unknown method", "crop_and_resize", "method", "bicubic", ValueError),
    ("string extrapolation", "crop_and_resize", "extrapolation_value", "a", TypeError),
    ("3-D image", "crop_and_resize", "image", IMAGE[0], ValueError),
    ("unknown layout", "crop_and_resize", "data_format", "HWC", ValueError),
    (
        "three image sizes",
        "crop_and_resize_grad_image",
        "image_size",
        (2, 5, 6),
        ValueError,
    ),
    (
        "depth mismatch",
        "crop_and_resize_grad_image",
        "image_size",
        (2, 5, 6, 4),
        ValueError,
    ),
    (
        "zero image size",
        "crop_and_resize_grad_image",
        "image_size",
        (2, 0, 6, 3),
        ValueError,
    ),
    ("grads for one box", "crop_and_resize_grad_boxes", "grads", GRADS[:1], ValueError),
    (
        "nearest boxes gradient",
        "crop_and_resize_grad_boxes",
        "method",
        "nearest",
        ValueError,
    ),
]

# RoIAlign's, named after their op.
ROI_MISTAKES = [
    ("three box columns", "roi_align", "boxes", ROI_BOXES[:, :3], ValueError),
    ("one box index short", "roi_align", "box_ind", BOX_IND[:1], ValueError),
    (
        "box index out of range",
        "roi_align",
        "box_ind",
        np.array([0, 5], np.int32),
        IndexError,
    ),
    (
        "negative box index",
        "roi_align",
        "box_ind",
        np.array([0, -1], np.int32),
        IndexError,
    ),
    ("NaN box", "roi_align", "boxes", _roi_nan_box, ValueError),
    ("infinite box", "roi_align", "boxes", _roi_inf_box, ValueError),
    (
        "more samples in a bin than 2**24",
        "roi_align",
        "boxes",
        _roi_huge_box,
        ValueError,
    ),
    ("zero output size", "roi_align", "output_size", (0, 2), ValueError),
    ("three output sizes", "roi_align", "output_size", (2, 2, 2), ValueError),
    ("negative square", "roi_align", "output_size", -1, ValueError),
    ("float output size", "roi_align", "output_size", (2.5, 2), TypeError),
    ("sampling ratio above 4096", "roi_align", "sampling_ratio", 5000, ValueError),
    ("float sampling ratio", "roi_align", "sampling_ratio", 2.5, TypeError),
    ("string spatial scale", "roi_align", "spatial_scale", "a", TypeError),
    ("NaN spatial scale", "roi_align", "spatial_scale", np.nan, ValueError),
    ("string aligned", "roi_align", "aligned", "yes", TypeError),
    ("unknown layout", "roi_align", "data_format", "HWC", ValueError),
    ("integer output dtype", "roi_align", "dtype", "int32", TypeError),
    ("3-D image", "roi_align", "image", ROI_IMAGE[0], ValueError),
    (
        "three image sizes",
        "roi_align_grad_image",
        "image_size",
        (2, 3, 5),
        ValueError,
    ),
    (
        "channel mismatch",
        "roi_align_grad_image",
        "image_size",
        (2, 4, 5, 6),
        ValueError,
    ),
    (
        "zero image size",
        "roi_align_grad_image",
        "image_size",
        (2, 3, 0, 6),
        ValueError,
    ),
    (
        "float image size",
        "roi_align_grad_image",
        "image_size",
        (2, 3, 5, 6.5),
        TypeError,
    ),
    (
        "no image for the boxes",
        "roi_align_grad_image",
        "image_size",
        (0, 3, 5, 6),
        IndexError,
    ),
    (
        "box index out of range",
        "roi_align_grad_image",
        "box_ind",
        np.array([2, 0], np.int32),
        IndexError,
    ),
    ("grads for one box", "roi_align_grad_image", "grads", ROI_GRADS[:1], ValueError),
    ("3-D grads", "roi_align_grad_image", "grads", ROI_GRADS[0], ValueError),
    ("unknown layout", "roi_align_grad_image", "data_format", "NCWH", ValueError),
    ("integer output dtype", "roi_align_grad_image", "dtype", "int32", TypeError),
    ("grads for one box", "roi_align_grad_boxes", "grads", ROI_GRADS[:1], ValueError),
    (
        "channel mismatch",
        "roi_align_grad_boxes",
        "grads",
        ROI_GRADS[:, :2],
        ValueError,
    ),
    ("3-D grads", "roi_align_grad_boxes", "grads", ROI_GRADS[0], ValueError),
    ("NaN box", "roi_align_grad_boxes", "boxes", _roi_nan_box, ValueError),
    (
        "sampling ratio above 4096",
        "roi_align_grad_boxes",
        "sampling_ratio",
        5000,
        ValueError,
    ),
    (
        "tangent for one box",
        "roi_align_jvp_boxes",
        "boxes_tangent",
        ROI_TANGENT[:1],
        ValueError,
    ),
    ("3-D image", "roi_align_jvp_boxes", "image", ROI_IMAGE[0], ValueError),
    ("zero output size", "roi_align_jvp_boxes", "output_size", (0, 2), ValueError),
    ("NaN box", "roi_align_jvp_boxes", "boxes", _roi_nan_box, ValueError),
]
MISTAKES += [(f"{op}: {name}", op, *rest) for name, op, *rest in ROI_MISTAKES]


def _with_nan(a, at):
    a = a.copy()
    a[at] = np.nan
    return a


# Grid sampling's, named after their op.
GRID_MISTAKES = [
    ("unknown mode", "grid_sample", "mode", "linear", ValueError),
    ("unknown padding", "grid_sample", "padding_mode", "wrap", ValueError),
    ("string align_corners", "grid_sample", "align_corners", "yes", TypeError),
    ("3-D image", "grid_sample", "image", GRID_IMAGE[0], ValueError),
    ("5-D image", "grid_sample", "image", GRID_IMAGE[:, :, None], ValueError),
    ("image without rows", "grid_sample", "image", GRID_IMAGE[:, :, :0], ValueError),
    ("three coordinates", "grid_sample", "grid", GRID[..., [0, 1, 0]], ValueError),
    ("grid for one image", "grid_sample", "grid", GRID[:1], ValueError),
    ("NaN grid", "grid_sample", "grid", _with_nan(GRID, (1, 2, 0, 1)), ValueError),
    (
        "three image sizes",
        "grid_sample_grad_image",
        "image_size",
        (2, 3, 5),
        ValueError,
    ),
    (
        "negative image size",
        "grid_sample_grad_image",
        "image_size",
        (2, 3, -1, 6),
        ValueError,
    ),
    (
        "zero image size",
        "grid_sample_grad_image",
        "image_size",
        (2, 3, 5, 0),
        ValueError,
    ),
    (
        "grads for one image",
        "grid_sample_grad_image",
        "grads",
        GRID_GRADS[:1],
        ValueError,
    ),
    ("unknown mode", "grid_sample_grad_image", "mode", "cubic", ValueError),
    (
        "grads for one image",
        "grid_sample_grad_grid",
        "grads",
        GRID_GRADS[:1],
        ValueError,
    ),
    ("3-D image", "grid_sample_grad_grid", "image", GRID_IMAGE[0], ValueError),
    (
        "NaN grid",
        "grid_sample_grad_grid",
        "grid",
        _with_nan(GRID, (0, 0, 0, 0)),
        ValueError,
    ),
    (
        "tangent for one image",
        "grid_sample_jvp_grid",
        "grid_tangent",
        GRID_TANGENT[:1],
        ValueError,
    ),
    ("unknown padding", "grid_sample_jvp_grid", "padding_mode", "zero", ValueError),
]
MISTAKES += [(f"{op}: {name}", op, *rest) for name, op, *rest in GRID_MISTAKES]

# Mistakes an API cannot make, and why: they are made in the others.
_TORCHVISION_BOXES = (
    "PyTorch's boxes are torchvision's Tensor[K, 5], each box's image "
    "first: a shape of their own, with words of their own"
)
_TORCHVISION_INDEX = "PyTorch takes no box_ind: each box's image is boxes[:, 0]"
_NO_LAYOUT = "PyTorch's RoIAlign takes no data_format: NCHW tensors (any memory format)"
_NO_DTYPE = "PyTorch's RoIAlign takes no dtype: the result is in the input's"
CANNOT = {
    "roi_align: three box columns": {"torch": _TORCHVISION_BOXES},
    "roi_align: one box index short": {"torch": _TORCHVISION_INDEX},
    "roi_align: unknown layout": {"torch": _NO_LAYOUT},
    "roi_align: integer output dtype": {"torch": _NO_DTYPE},
    "roi_align_grad_image: unknown layout": {"torch": _NO_LAYOUT},
    "roi_align_grad_image: integer output dtype": {"torch": _NO_DTYPE},
}

# torchvision's other form of boxes, a list of Tensor[L, 4], one per image
# (cropgrad.torch.roi_align's): the mistakes in a box's values it can make.
TORCH_LISTS = ("roi_align: NaN box", "roi_align: infinite box")

# Where the APIs answer differently: (the failure it makes, the difference).
DIFFERENT = {
    "roi_align_grad_image: float image size": (
        RuntimeError,
        "torch.ops.cropgrad.roi_align_grad_image: the dispatcher's schema "
        "(SymInt[] image_size) refuses the float with its own RuntimeError "
        "('Expected a value of type List[int] for argument image_size ...') "
        "where the others raise TypeError: 'image_size must hold integers "
        "[batch, depth, image_height, image_width], got (2, 3, 5, 6.5)'",
    ),
    "roi_align_grad_image: no image for the boxes": (
        pytest.fail.Exception,
        "cropgrad.jax.roi_align_grad_image returns an empty gradient for an "
        "image_size of batch 0 with boxes (XLA does not run a call with an "
        "empty result, so box_ind is never checked) where the NumPy API and "
        "PyTorch raise IndexError: 'box_ind has values outside [0, "
        "batch_size) = [0, 0): box_ind[0] = 0'",
    ),
}


def _renames(op, api):
    """The names `api` gives `op`'s arguments where it spells them
    otherwise, as {its name: the NumPy API's}."""
    return {a.renamed[api]: a.name for a in OPS[op].args if api in a.renamed}


def _in_numpy_words(api, op, message):
    """`message` of `api` with the words it may spell otherwise spelt as
    the NumPy API spells them."""
    for theirs, ours in _renames(op, api.split()[0]).items():
        message = re.sub(rf"\b{theirs}\b", ours, message)
    if api.startswith("torch") and OPS[op].family == "roi_align":
        # torchvision's boxes: the image index in column 0, then 4 columns.
        message = message.replace("boxes[:, 0] (each box's image)", "box_ind")
        message = re.sub(r"\bboxes\[(\d+), 0\]", r"box_ind[\1]", message)
        message = re.sub(r"\((\d+), 5\)", r"(\1, 4)", message)
    return message


def _torchvision(op, args, as_list=False):
    """`args` (by the NumPy API's names) as PyTorch's RoIAlign takes them:
    the boxes as ``Tensor[K, 5]`` with each box's image first (or, with
    `as_list`, one ``Tensor[L, 4]`` per image), the tangent with a zero
    first column."""
    args = dict(args)
    boxes, box_ind = args["boxes"], args.pop("box_ind")
    if as_list:
        batch = args["image"].shape[0]
        args["boxes"] = [boxes[box_ind == i] for i in range(batch)]
    else:
        index = box_ind.astype(boxes.dtype)[:, None]
        args["boxes"] = np.concatenate([index, boxes], axis=1)
    if "boxes_tangent" in args:
        tangent = args["boxes_tangent"]
        zeros = np.zeros((len(tangent), 1), tangent.dtype)
        args["boxes_tangent"] = np.concatenate([zeros, tangent], axis=1)
    return args


def _tensors(value):
    if isinstance(value, list):
        return [_tensors(v) for v in value]
    return torch.from_numpy(value) if isinstance(value, np.ndarray) else value


def _call(api, op, args):
    """Op `op` of `api` on `args` (by the NumPy API's names): the
    crop_and_resize family in NHWC, RoIAlign's in its default, NCHW.  `api`
    is "numpy", "jax", "torch" or "torch list" (RoIAlign's boxes as a list
    of tensors)."""
    model = OPS[op]
    args = dict(args)
    if model.family == "crop_and_resize":
        args.setdefault("data_format", "NHWC")
    if api.startswith("torch") and model.family in ("roi_align", "grid_sample"):
        # PyTorch's own signatures: the public function of the forward op,
        # the custom ops of the others, every argument positional.
        if model.family == "roi_align":
            args = _torchvision(op, args, as_list=api == "torch list")
        names = [a.name for a in model.args_of("torch")]
        values = [
            _tensors(args[n]) if n in args else model.default(n, "torch") for n in names
        ]
        if op == model.family:
            return getattr(cropgrad.torch, op)(*values)
        return getattr(torch.ops.cropgrad, op)(*values)
    required = {n for n in args if model.default(n, "numpy") is REQUIRED}
    positional = [v for n, v in args.items() if n in required]
    kwargs = {n: v for n, v in args.items() if n not in required}
    if api == "numpy":
        return getattr(cropgrad, op)(*positional, **kwargs)
    if api == "jax":
        values = [
            jnp.asarray(v) if isinstance(v, np.ndarray) else v for v in positional
        ]
        return getattr(cropgrad.jax, op)(*values, **kwargs)
    return getattr(cropgrad.torch, op)(*map(_tensors, positional), **kwargs)


def _apis(name, op):
    """The APIs that make mistake `name` in `op` (those that have it)."""
    apis = [
        api for api in APIS if api not in CANNOT.get(name, {}) and api in OPS[op].apis
    ]
    return apis + (["torch list"] if name in TORCH_LISTS else [])


def _param(name, op, arg, value, exc):
    marks = []
    if name in DIFFERENT:
        raises, reason = DIFFERENT[name]
        marks.append(pytest.mark.xfail(strict=True, raises=raises, reason=reason))
    return pytest.param(name, op, arg, value, exc, id=name, marks=marks)


@pytest.mark.parametrize("name, op, arg, value, exc", [_param(*r) for r in MISTAKES])
def test_the_same_mistake_gets_the_same_answer(name, op, arg, value, exc):
    args = dict(VALID[op])
    args[arg] = value
    answers = {}
    for api in _apis(name, op):
        raised = jax.errors.JaxRuntimeError if api == "jax" and name in DATA else exc
        with pytest.raises(raised) as info:
            _call(api, op, args)
        answers[api] = _in_numpy_words(api, op, str(info.value))
    for api in answers.keys() - {"numpy", "jax"}:
        assert answers[api] == answers["numpy"], answers
    if "jax" in answers and name in DATA:
        # XLA's error: "<status>: cropgrad.jax.<op>: <exception>: <message>".
        assert answers["jax"].endswith(
            f"cropgrad.jax.{op}: {exc.__name__}: {answers['numpy']}"
        ), answers
    elif "jax" in answers:
        assert answers["jax"] == answers["numpy"], answers


def test_every_mistake_is_made_in_every_api_that_can_make_it():
    # An API leaves a mistake out only with its reason, and every family
    # has its mistakes.
    names = [row[0] for row in MISTAKES]
    assert len(names) == len(set(names))
    for name, apis in {**CANNOT, **dict.fromkeys(TORCH_LISTS, {})}.items():
        assert name in names, name
        assert set(apis) <= set(APIS) and all(apis.values()), name
    assert set(DIFFERENT) | set(DATA) <= set(names)
    # The ops of more than one API (a mistake of one API alone is no
    # other's).
    shared = {name for name, op in OPS.items() if len(op.apis) > 1}
    families = {OPS[row[1]].family for row in MISTAKES}
    assert families == {OPS[name].family for name in shared}
    assert {row[1] for row in MISTAKES} >= shared - {"crop_and_resize_jvp_boxes"}


@pytest.mark.parametrize("api", [*APIS, "torch list"])
def test_the_valid_calls_are_valid(api):
    # The rows above spoil a call that every API takes as it is.
    for op, args in VALID.items():
        if api == "torch list" and op != "roi_align" or api not in OPS[op].apis:
            continue
        _call(api, op, args)


@pytest.mark.parametrize("api", APIS)
def test_an_int_crop_size_is_a_square_in_every_api(api):
    args = dict(VALID["crop_and_resize"])
    square = np.asarray(_call(api, "crop_and_resize", {**args, "crop_size": 3}))
    pair = np.asarray(_call(api, "crop_and_resize", {**args, "crop_size": (3, 3)}))
    assert square.shape == (2, 3, 3, 3)
    np.testing.assert_array_equal(square, pair)


@pytest.mark.parametrize("api", APIS)
def test_an_int_output_size_is_a_square_in_every_roi_align_api(api):
    args = dict(VALID["roi_align"])
    square = np.asarray(_call(api, "roi_align", {**args, "output_size": 3}))
    pair = np.asarray(_call(api, "roi_align", {**args, "output_size": (3, 3)}))
    assert square.shape == (2, 3, 3, 3)
    np.testing.assert_array_equal(square, pair)
