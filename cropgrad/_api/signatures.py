"""Each op's arguments, written once: names, order, defaults, layouts.

The one table every Python-facing layer reads.  The ``torch.library``
schemas, the PyTorch kernels, fake implementations and vmap rules bind
their arguments through it; the JAX primitives take their options by its
names; the public functions of the NumPy API, of `cropgrad.jax` and of
`cropgrad.torch`, and their type stubs, are checked against it by the
tests (``tests/test_signatures.py``), so that an argument added here and
not there fails at once.  The public functions keep their signatures
spelled out, for the people who read them.

An API may lack an argument (``out=`` is the NumPy API's, ``flush_denormals``
is not JAX's: XLA computes with flush-to-zero), name it otherwise (JAX's
``image_shape``), or take another default layout (`LAYOUTS`).

Examples
--------
>>> from cropgrad._api.signatures import OPS
>>> OPS["crop_and_resize"].names("torch")
('image', 'boxes', 'box_ind', 'crop_size', 'method', 'extrapolation_value', \
'data_format', 'num_threads', 'flush_denormals')
>>> OPS["crop_and_resize"].default("data_format", "numpy")
'NHWC'
"""

import collections
import dataclasses
import inspect
from collections.abc import Mapping

__all__ = ["APIS", "OPS", "Arg", "Op"]

APIS = ("numpy", "torch", "jax")
REQUIRED = inspect.Parameter.empty

# What each kind of argument is in a torch.library schema.
_SCHEMA_TYPES = {
    "array": "Tensor",
    "ints": "SymInt[]",
    "str": "str",
    "float": "float",
    "int": "int",
    "bool": "bool",
    "threads": "int?",
    "dtype": "ScalarType",
}


@dataclasses.dataclass(frozen=True)
class Arg:
    """One argument of an op.

    Attributes
    ----------
    name : str
        Its name (the NumPy API's and PyTorch's).
    kind : {"array", "ints", "str", "float", "int", "bool", "threads", \
"dtype", "out"}
        What it is: an array operand, a list of ints (a size), an option.
    default : object
        Its default (`REQUIRED`: none).  ``"float32"`` for a dtype means each
        API's float32; a data format's default is the API's (`Op.layouts`).
    keyword_only : bool
        Whether it follows the ``*``.
    apis : tuple of str
        The APIs that take it.
    renamed : Mapping[str, str]
        Its name in an API that spells it otherwise.
    choices : tuple of str
        The values a string option may take (empty: any), in the order a
        message lists them.
    positional_in : tuple of str
        The APIs in which a keyword-only argument is positional (PyTorch's
        RoIAlign keeps torchvision's signature).
    """

    name: str
    kind: str
    default: object = REQUIRED
    keyword_only: bool = False
    apis: tuple = APIS
    renamed: Mapping = dataclasses.field(default_factory=dict)
    choices: tuple = ()
    positional_in: tuple = ()


@dataclasses.dataclass(frozen=True)
class Op:
    """An op: its name, its arguments in order, its default layout per API,
    the APIs that have it."""

    name: str
    args: tuple
    layouts: Mapping
    apis: tuple = APIS
    # What the methods below compute from `args`, kept: the PyTorch
    # adapter asks for it on every call of an op.
    _memo: dict = dataclasses.field(
        default_factory=dict, init=False, repr=False, compare=False
    )

    def _kept(self, key, compute):
        try:
            return self._memo[key]
        except KeyError:
            value = self._memo[key] = compute()
            return value

    def args_of(self, api):
        """The arguments `api` takes, in order."""
        return self._kept(
            ("args", api), lambda: tuple(a for a in self.args if api in a.apis)
        )

    def names(self, api):
        """The names of the arguments `api` takes, in order, as it spells them."""
        return self._kept(
            ("names", api),
            lambda: tuple(a.renamed.get(api, a.name) for a in self.args_of(api)),
        )

    def arg(self, name):
        return self._kept(
            ("arg", name), lambda: next(a for a in self.args if a.name == name)
        )

    def default(self, name, api, dtypes=None):
        """The default of argument `name` in `api` (`dtypes`: the API's
        dtype for a dtype's name, e.g. ``{"float32": torch.float32}``)."""
        arg = self.arg(name)
        if arg.name == "data_format":
            return self.layouts[api]
        if arg.kind == "dtype" and dtypes is not None and arg.default is not None:
            return dtypes[arg.default]
        return arg.default

    def signature(self, api, dtypes=None):
        """The `inspect.Signature` of the public function of `api`."""
        params = []
        for arg in self.args_of(api):
            kind = (
                inspect.Parameter.KEYWORD_ONLY
                if arg.keyword_only and api not in arg.positional_in
                else inspect.Parameter.POSITIONAL_OR_KEYWORD
            )
            params.append(
                inspect.Parameter(
                    arg.renamed.get(api, arg.name),
                    kind,
                    default=self.default(arg.name, api, dtypes),
                )
            )
        return inspect.Signature(params)

    def schema(self):
        """The ``torch.library`` schema: PyTorch's arguments, all positional,
        with the PyTorch API's defaults, one Tensor returned."""
        parts = []
        for arg in self.args_of("torch"):
            text = f"{_SCHEMA_TYPES[arg.kind]} {arg.name}"
            default = self.default(arg.name, "torch")
            if default is not REQUIRED:
                text += "=" + _schema_value(default)
            parts.append(text)
        return "(" + ", ".join(parts) + ") -> Tensor"

    def call_type(self, api):
        """The named tuple of a call of `api` (see `bind`)."""
        return self._kept(
            ("call", api),
            lambda: _call_type(self.name, [a.name for a in self.args_of(api)]),
        )

    def bind(self, api, args):
        """`args` (every argument `api` takes, positionally, as the
        dispatcher passes them) as a named tuple: ``bound.image``,
        ``bound.replace(image=...)`` a copy with some of them replaced, and
        ``bound._op`` the op's name."""
        call = self.call_type(api)
        if len(args) != len(call._fields):
            raise TypeError(
                f"{self.name} takes {len(call._fields)} arguments, got {len(args)}"
            )
        return call(*args)


def _call_type(name, fields):
    """The named tuple of a call of op `name` (a tuple: it is passed on as
    the positional arguments it holds)."""
    base = collections.namedtuple(name, fields)
    return type(name, (base,), {"__slots__": (), "replace": base._replace, "_op": name})


def _schema_value(value):
    if value is None:
        return "None"
    if isinstance(value, bool):
        return "True" if value else "False"
    if isinstance(value, str):
        # A dtype's default is a ScalarType name; the others are strings.
        return value if value == "float32" else f'"{value}"'
    return repr(value)


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
    return _arg("box_ind", "array", apis=_NOT_TORCH)


OPS = {
    op.name: op
    for op in (
        Op(
            "crop_and_resize",
            (
                _arg("image", "array"),
                _arg("boxes", "array"),
                _arg("box_ind", "array"),
                _arg("crop_size", "ints"),
                _method(_BOTH_METHODS),
                _arg("extrapolation_value", "float", 0.0),
                *_options(),
            ),
            _CROP_AND_RESIZE_LAYOUTS,
        ),
        Op(
            "crop_and_resize_grad_image",
            (
                _arg("grads", "array"),
                _arg("boxes", "array"),
                _arg("box_ind", "array"),
                _arg("image_size", "ints", renamed={"jax": "image_shape"}),
                _arg("dtype", "dtype", "float32"),
                _method(_BOTH_METHODS),
                *_options(),
            ),
            _CROP_AND_RESIZE_LAYOUTS,
        ),
        Op(
            "crop_and_resize_grad_boxes",
            (
                _arg("grads", "array"),
                _arg("image", "array"),
                _arg("boxes", "array"),
                _arg("box_ind", "array"),
                _method(_BILINEAR),
                *_options(),
            ),
            _CROP_AND_RESIZE_LAYOUTS,
        ),
        Op(
            "crop_and_resize_jvp_boxes",
            (
                _arg("image", "array"),
                _arg("boxes", "array"),
                _arg("box_ind", "array"),
                _arg("boxes_tangent", "array"),
                _arg("crop_size", "ints"),
                _method(_BILINEAR),
                *_options(),
            ),
            _CROP_AND_RESIZE_LAYOUTS,
            # JAX and PyTorch run it inside their derivative rules only.
            ("numpy", "torch"),
        ),
        Op(
            "roi_align",
            (
                _arg("image", "array", renamed={"torch": "input"}),
                _arg("boxes", "array"),
                _box_ind(),
                _arg("output_size", "ints"),
                *_roi_options(),
            ),
            _ROI_ALIGN_LAYOUTS,
            ("numpy", "torch", "jax"),
        ),
        Op(
            "roi_align_grad_image",
            (
                _arg("grads", "array"),
                _arg("boxes", "array"),
                _box_ind(),
                _arg("image_size", "ints", renamed={"jax": "image_shape"}),
                *_roi_options(),
            ),
            _ROI_ALIGN_LAYOUTS,
            ("numpy", "torch", "jax"),
        ),
        Op(
            "roi_align_grad_boxes",
            (
                _arg("grads", "array"),
                _arg("image", "array"),
                _arg("boxes", "array"),
                _box_ind(),
                *_roi_options(dtype=False),
            ),
            _ROI_ALIGN_LAYOUTS,
            ("numpy", "torch", "jax"),
        ),
        Op(
            "roi_align_jvp_boxes",
            (
                _arg("image", "array"),
                _arg("boxes", "array"),
                _box_ind(),
                _arg("boxes_tangent", "array"),
                _arg("output_size", "ints"),
                *_roi_options(),
            ),
            _ROI_ALIGN_LAYOUTS,
            ("numpy", "torch", "jax"),
        ),
    )
}
