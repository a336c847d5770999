"""One mistake, one answer: the NumPy API, `cropgrad.jax` and
`cropgrad.torch` raise the same exception type with the same words.

Each row of `MISTAKES` spoils one argument of a valid call; the call is
made through the three APIs on the same arrays (NHWC, which every API
takes), and the exceptions compared.  The only words allowed to differ
are an argument's name where an API spells it otherwise (JAX's
``image_shape`` for ``image_size``).  A mistake in the data's values (a
NaN box, an index out of range) is seen by JAX only when the computation
runs, where XLA raises its own error: that error carries the exception's
name and the same message (docs/adapters.md).
"""

import numpy as np
import pytest
from _helpers import required

import cropgrad

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
}
# How JAX names an argument the others name otherwise.
JAX_NAMES = {"image_size": "image_shape"}

_nan_box = BOXES.copy()
_nan_box[1, 2] = np.nan

# Mistakes in the data's values, which JAX sees only when the call runs.
DATA = ("box index out of range", "NaN box")

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


def _call(api, op, args):
    """Op `op` of `api` on `args` (by the NumPy API's names), NHWC."""
    args = dict(args)
    kwargs = {"data_format": args.pop("data_format", "NHWC")}
    for name in ("method", "extrapolation_value"):
        if name in args:
            kwargs[name] = args.pop(name)
    if api == "numpy":
        return getattr(cropgrad, op)(*args.values(), **kwargs)
    if api == "jax":
        values = [
            jnp.asarray(v) if isinstance(v, np.ndarray) else v for v in args.values()
        ]
        return getattr(cropgrad.jax, op)(*values, **kwargs)
    values = [
        torch.from_numpy(v) if isinstance(v, np.ndarray) else v for v in args.values()
    ]
    return getattr(cropgrad.torch, op)(*values, **kwargs)


@pytest.mark.parametrize(
    "name, op, arg, value, exc", [pytest.param(*row, id=row[0]) for row in MISTAKES]
)
def test_the_same_mistake_gets_the_same_answer(name, op, arg, value, exc):
    args = dict(VALID[op])
    args[arg] = value
    answers = {}
    for api in ("numpy", "jax", "torch"):
        raised = jax.errors.JaxRuntimeError if api == "jax" and name in DATA else exc
        with pytest.raises(raised) as info:
            _call(api, op, args)
        message = str(info.value)
        if api == "jax":
            for ours, theirs in JAX_NAMES.items():
                message = message.replace(theirs, ours)
        answers[api] = message
    assert answers["torch"] == answers["numpy"], answers
    if name in DATA:
        # XLA's error: "<status>: cropgrad.jax.<op>: <exception>: <message>".
        assert answers["jax"].endswith(
            f"cropgrad.jax.{op}: {exc.__name__}: {answers['numpy']}"
        ), answers
    else:
        assert answers["jax"] == answers["numpy"], answers


@pytest.mark.parametrize("api", ["numpy", "jax", "torch"])
def test_the_valid_calls_are_valid(api):
    # The rows above spoil a call that every API takes as it is.
    for op, args in VALID.items():
        _call(api, op, args)


@pytest.mark.parametrize("api", ["numpy", "jax", "torch"])
def test_an_int_crop_size_is_a_square_in_every_api(api):
    args = dict(VALID["crop_and_resize"])
    square = np.asarray(_call(api, "crop_and_resize", {**args, "crop_size": 3}))
    pair = np.asarray(_call(api, "crop_and_resize", {**args, "crop_size": (3, 3)}))
    assert square.shape == (2, 3, 3, 3)
    np.testing.assert_array_equal(square, pair)
