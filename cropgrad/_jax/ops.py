"""The table of cropgrad.jax's primitives: one row an op.

A row says all the adapter's machinery needs of an op: its operands and
parameters (from the signature table, cropgrad/_ops, in JAX's
spelling), the FFI target it lowers to, the kind of its result, the gate it
runs while traced, and how it is differentiated.  The primitives
(primitives.py), the vmap rule (batching.py) and the JVP and transpose
rules (derivatives.py) are written once for every row.  The rows come by
family (`_family`): an op like crop_and_resize (or roi_align,
grid_sample), its image and coordinates gradients, its coordinates JVP,
and the image gradient's derivative along the coordinates, linked by the
same transposes; another family is one
more ``_family`` call here, its handlers in handlers.pyx, its gates in
checks.py and its public functions.

A parameter has the name the public function's argument has, and holds the
converted value: ``method`` and ``data_format`` their codes, ``num_threads``
the count (`DEFAULT_THREADS` for None), ``crop_size``, ``output_size`` and
``image_shape`` tuples of ints, ``dtype`` a NumPy dtype (RoIAlign's: the
result's, never None; grid sampling's: the arithmetic type, which
cropgrad.jax casts from), ``spatial_scale`` a float, ``sampling_ratio`` an
int, ``aligned`` and ``align_corners`` bools, ``mode`` and
``padding_mode`` the C-level API's codes.  Every primitive also has ``fold``:
how vmap folded mapped axes into the op's own, outermost first, as
(size, whether box_ind was shifted) pairs, for the kernel's messages to
name the caller's indices (``()`` when not folded; grid sampling's
folds grow the batch of every operand).

Derivatives are defined in forward mode only, as other rows applied to the
tangents, linearly; JAX derives reverse mode by transposing.  The linear
maps and their transposes (<, > the dot product; b the boxes, t a boxes
tangent, c a crops-shaped array)::

    crop(x, b) with extrapolation 0, in x   <->  grad_image(c, b), in c
    jvp_boxes(x, b, t), in t                <->  grad_boxes(c, x, b), in c
    jvp_boxes(x, b, t), in x                <->  grad_image_jvp_boxes(c, b, t)
    grad_image_jvp_boxes(c, b, t), in t     <->  grad_boxes(c, x, b), in x

(RoIAlign's pooling in place of crop, which has no fill), the last two
following from <x, d/db grad_image(c, b) t> =
<c, jvp_boxes(x, b, t)> = <grad_boxes(c, x, b), t>.  grad_image_jvp_boxes
(the boxes derivative of the image gradient) has no kernel: it is only ever
transposed, in reverse mode; evaluating it (forward mode through
crop_and_resize_grad_image or roi_align_grad_image along the boxes) raises
NotImplementedError.

May import: cropgrad._ops, cropgrad._jax.checks.
"""

import dataclasses
from collections.abc import Callable, Mapping

from cropgrad import _ops
from cropgrad._jax import checks as _checks


@dataclasses.dataclass(frozen=True)
class Op:
    """One primitive.

    Attributes
    ----------
    name : str
        The op's name; the primitive's and its FFI target's are
        ``"cropgrad_" + name``.
    operands : tuple of str
        The array operands, in order.  vmap folds a mapped axis by their
        names (`fold_batch` False): an ``image``'s batch grows, ``box_ind``
        is shifted into it, the others (one row a box) get more boxes.
    params : tuple of str
        The parameters, ``fold`` last.
    attributes : tuple of cropgrad._ops.Attribute
        The attributes of its FFI call, from its parameters: its family's
        that it has (`cropgrad._ops.Family.attributes_of`).
    result : {"crops", "sampled", "image", "coords"}
        What the op returns (`shapes.result`).
    title : str
        How messages name the op.
    has_kernel : bool
        Whether it lowers to an FFI call; if not, lowering it raises.
    gate : callable or None
        The trace-time metadata check, ``gate(avals_by_operand, params)``.
    transposes : Mapping[str, tuple of (str, str)]
        The operands the op is linear in, each to its transpose: the op that
        computes it, and which of that op's operands the cotangent takes.
        The JVP in such an operand is the op applied to its tangent.
    along_coords : str or None
        The op that computes the tangent along the coordinates (bilinear
        sampling; crop_and_resize's nearest sampling's is zero), or None:
        the op is itself a derivative along the coordinates, which cannot
        be taken again.
    second_derivative_of : str
        The op a refused second derivative along the coordinates names.
    coords, tangent : str
        The operand holding the coordinates (``boxes``, ``grid``), and the
        name of their tangent's.
    where : str
        How messages name the coordinates ("the boxes", "the grid").
    grad_coords : str
        The family's gradient in the coordinates, which messages name.
    fold_batch : bool
        How vmap folds a mapped axis (batching.py): into every operand's
        leading batch axis (grid sampling, whose operands all have one),
        or by boxes.
    family : str
        The family's forward op, which messages name.
    size : str
        The parameter holding the crops' (or pooled output's) height and
        width.
    arithmetic : {"float32", "coords"}
        The type the op computes in: float32 (crop_and_resize's family), or
        that of its coordinates (RoIAlign's and grid sampling's: float64 for
        float64 data), which its grads and tangent then have too
        (`primitives.bind` converts what the derivative rules pass).
    """

    name: str
    operands: tuple
    params: tuple
    attributes: tuple
    result: str
    title: str
    transposes: Mapping
    along_coords: str | None = None
    has_kernel: bool = True
    gate: Callable | None = None
    second_derivative_of: str = ""
    family: str = ""
    size: str = "crop_size"
    arithmetic: str = "float32"
    coords: str = "boxes"
    tangent: str = "boxes_tangent"
    where: str = "the boxes"
    grad_coords: str = ""
    fold_batch: bool = False

    @property
    def target(self):
        """The FFI target it lowers to, or None."""
        return f"cropgrad_{self.name}" if self.has_kernel else None


def _row(signature, **columns):
    """A row whose operands, parameters and attributes are those of
    `signature` (an op of the signature table) in JAX's spelling; `columns`
    give the rest."""
    op = _ops.OPS[signature]
    args = op.args_of("jax")
    columns.setdefault("name", signature)
    columns.setdefault("operands", op.operands("jax"))
    columns.setdefault("title", columns["name"])
    columns.setdefault("second_derivative_of", columns["title"])
    columns.setdefault("gate", _checks.GATES.get(columns["name"]))
    params = tuple(a.renamed.get("jax", a.name) for a in args if a.kind != "array")
    attributes = _ops.FAMILIES[op.family].attributes_of(op.kind)
    return Op(params=(*params, "fold"), attributes=attributes, transposes={}, **columns)


def _family(family, sampled="crops", **common):
    """The rows of `family` (a family of the op model): its ops with a
    kernel, and the derivative along the coordinates of the image gradient,
    which has none; `common` are columns every row has, `sampled` the
    result kind of the forward op and its JVP.  The transposes are the
    model's adjoint algebra."""
    name = family.name
    ops = family.ops
    derived = family.op_name("grad_image_jvp_coords")
    where = family.coords
    common.update(
        family=name,
        coords=family.coords_operand,
        tangent=ops["jvp_coords"].operand("tangent"),
        where=where if where.startswith("the ") else f"the {where}",
        grad_coords=ops["grad_coords"].name,
    )
    word = family.coords_operand
    rows = (
        _row(
            ops["forward"].name,
            result=sampled,
            along_coords=ops["jvp_coords"].name,
            **common,
        ),
        _row(ops["grad_image"].name, result="image", along_coords=derived, **common),
        _row(ops["grad_coords"].name, result="coords", **common),
        _row(
            ops["jvp_coords"].name,
            result=sampled,
            title=f"the {word} derivative of {name}",
            **common,
        ),
        # The image gradient's parameters, the coordinates' tangent a fourth
        # operand.
        _row(
            ops["grad_image"].name,
            name=derived,
            operands=(
                *ops["grad_image"].operands("jax"),
                ops["jvp_coords"].operand("tangent"),
            ),
            result="image",
            title=f"the {word} derivative of {ops['grad_image'].name}",
            second_derivative_of=ops["grad_image"].name,
            has_kernel=False,
            **common,
        ),
    )
    rows = {row.name: row for row in rows}
    for (op, operand), transpose in family.transposes().items():
        rows[op].transposes[operand] = transpose
    return rows


OPS = {
    **_family(_ops.FAMILIES["crop_and_resize"]),
    **_family(_ops.FAMILIES["roi_align"], size="output_size", arithmetic="coords"),
    **_family(
        _ops.FAMILIES["grid_sample"],
        sampled="sampled",
        arithmetic="coords",
        fold_batch=True,
    ),
}

# The FFI targets of the ops, in the table's order.
TARGETS = tuple(op.target for op in OPS.values() if op.target)
