"""The op model's vocabulary: an argument, an op, a family.

An `Op` lists its arguments once, in order, with each API's spelling,
default and layout; a `Family` groups the ops that sample an image at
computed points and scatter back (a forward op, its image and coordinate
gradients, its coordinate JVP) and names the roles their operands play, so
that the adjoint algebra (`ADJOINTS`) is written once for every family,
whatever its coordinates are (boxes with an image index, a sampling grid).

An API may lack an argument (``out=`` is the NumPy API's, ``flush_denormals``
is not JAX's: XLA computes with flush-to-zero), name it otherwise (JAX's
``image_shape``), or take another default layout (`Op.layouts`).

Examples
--------
>>> from cropgrad._ops import OPS
>>> OPS["crop_and_resize"].names("torch")
('image', 'boxes', 'box_ind', 'crop_size', 'method', 'extrapolation_value', \
'data_format', 'num_threads', 'flush_denormals')
>>> OPS["crop_and_resize"].default("data_format", "numpy")
'NHWC'
>>> OPS["roi_align_grad_boxes"].operand("coords")
'boxes'
"""

import collections
import dataclasses
import inspect
import typing
from collections.abc import Mapping

__all__ = [
    "ADJOINTS",
    "APIS",
    "DTYPES",
    "FIELDS",
    "KINDS",
    "REQUIRED",
    "ROLES",
    "Arg",
    "Attribute",
    "CParam",
    "Family",
    "Op",
]

APIS = ("numpy", "torch", "jax")
REQUIRED = inspect.Parameter.empty

# What an array operand is to its op:
# - image: the sampled image (or the gradient's image shape, as sizes);
# - grads: a cotangent of the forward op's result;
# - coords: where the image is sampled (boxes, a sampling grid);
# - indices: the image each coordinate row samples (crop_and_resize's
#   box_ind; torchvision's boxes hold it in column 0);
# - tangent: a tangent of the coordinates.
ROLES = ("image", "grads", "coords", "indices", "tangent")

# The dtypes an op's C function takes for an array (an operand, or the op's
# result; `Arg.dtypes`), each given its own dtype code but float32 (a C
# ``float`` array) and coords:
# - image: any image dtype (uint8, int8, uint16, int16, int32, int64,
#   float16, float32, float64, bfloat16);
# - float32: float32 alone;
# - float: float16, bfloat16, float32 or float64 (a result rounded once);
# - arithmetic: float32 or float64, the type the op computes in;
# - coords: the coordinates' arithmetic type, whose code it shares;
# - index: int32 or int64 (box_ind).
DTYPES = ("image", "float32", "float", "arithmetic", "coords", "index")

# The ops of a family, by what each computes:
# - forward: the samples of an image at the coordinates;
# - grad_image: the forward op's transpose in the image;
# - grad_coords: the forward op's gradient in the coordinates;
# - jvp_coords: the forward op's derivative along a tangent of the
#   coordinates (grad_coords is its transpose);
# - grad_image_jvp_coords: grad_image's derivative along a tangent of the
#   coordinates, which has no kernel: it is only ever transposed.
KINDS = ("forward", "grad_image", "grad_coords", "jvp_coords", "grad_image_jvp_coords")

# The linear maps of every family and their transposes, by op kind and
# operand role: the transpose of each map, in that operand, is the other,
# with the cotangent as the given operand (<, > the dot product; x the
# image, c a cotangent of the samples, p the coordinates, t a tangent of
# them)::
#
#     forward(x, p) in x                    <->  grad_image(c, p) in c
#     jvp_coords(x, p, t) in t              <->  grad_coords(c, x, p) in c
#     jvp_coords(x, p, t) in x              <->  grad_image_jvp_coords(c, p, t) in c
#     grad_image_jvp_coords(c, p, t) in t   <->  grad_coords(c, x, p) in x
#
# the last two from <x, d/dp grad_image(c, p) t> = <c, jvp_coords(x, p, t)>
# = <grad_coords(c, x, p), t>.  (crop_and_resize's forward op is linear in
# the image only with extrapolation 0.)
ADJOINTS = (
    (("forward", "image"), ("grad_image", "grads")),
    (("jvp_coords", "tangent"), ("grad_coords", "grads")),
    (("jvp_coords", "image"), ("grad_image_jvp_coords", "grads")),
    (("grad_image_jvp_coords", "tangent"), ("grad_coords", "image")),
)

# What a JAX FFI call's attribute fills when its handler decodes it (a field
# of the handlers' `Attributes`, cropgrad/_jax/frames.pxd), and the XLA type
# the attribute has: a scalar (s32, f32, f64), or an array of s64 for the
# fold (``fold_shape``, with the scalar ``fold_images`` when it is there),
# which says how vmap folded mapped axes into the op's own, for messages
# in the caller's indices.  Grid sampling's mode fills ``method`` and its
# align_corners ``aligned``.
FIELDS = {
    "method": "s32",
    "padding_mode": "s32",
    "layout": "s32",
    "num_threads": "s32",
    "extrapolation_value": "f32",
    "spatial_scale": "f64",
    "sampling_ratio": "s32",
    "aligned": "s32",
    "fold": "s64[]",
}

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


class CParam(typing.NamedTuple):
    """A parameter of an op's C function: its C type as Cython spells it
    (``const void*``), its name, and what the headers say of it."""

    type: str
    name: str
    note: str = ""


@dataclasses.dataclass(frozen=True)
class Attribute:
    """An attribute of a family's JAX FFI calls.

    Attributes
    ----------
    name : str
        Its name in the call (XLA's).
    type : str
        Its XLA type, the one its field takes (`FIELDS`).
    param : str
        The primitive's parameter whose value it holds (JAX's name: an
        argument's, or ``fold``, which every primitive has).
    field : str
        What it fills when the handler decodes it (`FIELDS`).
    """

    name: str
    type: str
    param: str
    field: str

    def __post_init__(self):
        # The handlers read a field's value as its type's: a row of another
        # type would be read wrong, not refused.
        if FIELDS.get(self.field) != self.type:
            raise ValueError(f"attribute {self.name}: {self.field} is not {self.type}")


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
    defaults : Mapping[str, object]
        Its default in an API whose own differs (PyTorch's grid_sample takes
        ``align_corners=None``).
    role : str or None
        An array operand's role (`ROLES`).
    rank : int or None
        An array's rank, as the op's C function takes it.
    dtypes : str or None
        The dtypes the op's C function takes for an array (`DTYPES`).
    """

    name: str
    kind: str
    default: object = REQUIRED
    keyword_only: bool = False
    apis: tuple = APIS
    renamed: Mapping = dataclasses.field(default_factory=dict)
    choices: tuple = ()
    positional_in: tuple = ()
    defaults: Mapping = dataclasses.field(default_factory=dict)
    role: str | None = None
    rank: int | None = None
    dtypes: str | None = None


@dataclasses.dataclass(frozen=True)
class Op:
    """An op: its name, its arguments in order, its default layout per API,
    the APIs that have it, its family and kind (`KINDS`), the version of
    the C-level API that added it (None: the C-level API does not have
    it), its C function's parameters (`CParam`, in order), what the C
    headers say before it (`c_doc`), and its result (`result`: an array
    `Arg` that no API takes, named as messages name it, with its rank and
    dtypes)."""

    name: str
    args: tuple
    layouts: Mapping
    apis: tuple = APIS
    family: str = ""
    kind: str = ""
    c_api: tuple | None = (1, 0)
    c_params: tuple = ()
    c_doc: str = ""
    result: Arg | None = None
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

    def operands(self, api):
        """The names of the array operands `api` takes, in order."""
        return tuple(
            a.renamed.get(api, a.name) for a in self.args_of(api) if a.kind == "array"
        )

    def operand(self, role):
        """The name of the operand with `role` (`ROLES`), or None."""
        return next((a.name for a in self.args if a.role == role), None)

    def default(self, name, api, dtypes=None):
        """The default of argument `name` in `api` (`dtypes`: the API's
        dtype for a dtype's name, e.g. ``{"float32": torch.float32}``)."""
        arg = self.arg(name)
        if arg.name == "data_format":
            return self.layouts[api]
        default = arg.defaults.get(api, arg.default)
        if arg.kind == "dtype" and dtypes is not None and default is not None:
            return dtypes[default]
        return default

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
        with the PyTorch API's defaults, one Tensor returned (a default of
        None makes the argument optional)."""
        parts = []
        for arg in self.args_of("torch"):
            default = self.default(arg.name, "torch")
            kind = _SCHEMA_TYPES[arg.kind]
            if default is None and not kind.endswith("?"):
                kind += "?"
            text = f"{kind} {arg.name}"
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


@dataclasses.dataclass(frozen=True)
class Family:
    """A family of ops: its forward op's name, its ops by kind (`KINDS`; a
    kind without a kernel is not among them), what its coordinates are
    called in messages, and the attributes of its JAX FFI calls.

    Attributes
    ----------
    name : str
        The forward op's name, which messages name the family by.
    ops : Mapping[str, Op]
        Its ops with a kernel, by kind.
    coords : str
        The coordinates' name in words ("boxes", "the grid").
    c_doc : str
        What the C headers say before the family's functions.
    attributes : tuple of Attribute
        The attributes of its ops' FFI calls, in the order their handlers
        decode them (a call with more than one missing or wrong gets the
        first's message); an op's are those it has (`attributes_of`).
    """

    name: str
    ops: Mapping
    coords: str
    c_doc: str = ""
    attributes: tuple = ()

    def op_name(self, kind):
        """The name of the op of `kind`; grad_image_jvp_coords, which has no
        kernel and no public function, is named after the image gradient
        and the coordinate tangent."""
        if kind in self.ops:
            return self.ops[kind].name
        if kind == "grad_image_jvp_coords":
            return f"{self.ops['grad_image'].name}_jvp_{self.coords_operand}"
        raise KeyError(kind)

    def attributes_of(self, kind):
        """The attributes of the FFI calls of the op of `kind`, in order:
        those whose parameter it takes in JAX, and the fold."""
        params = {*self.ops[kind].names("jax"), "fold"}
        return tuple(a for a in self.attributes if a.param in params)

    @property
    def coords_operand(self):
        """The coordinates' operand name (``boxes``, ``grid``)."""
        return self.ops["forward"].operand("coords")

    def transposes(self):
        """The family's `ADJOINTS` by op name: ``{(op, operand): (op,
        operand)}``, both ways, with the operands' names."""

        def named(kind, role):
            op = self.op_name(kind)
            if kind == "grad_image_jvp_coords":
                # grad_image's operands, the coordinates' tangent a fourth.
                source = self.ops["grad_image" if role != "tangent" else "jvp_coords"]
            else:
                source = self.ops[kind]
            return op, source.operand(role)

        pairs = {}
        for one, other in ADJOINTS:
            pairs[named(*one)] = named(*other)
            pairs[named(*other)] = named(*one)
        return pairs
