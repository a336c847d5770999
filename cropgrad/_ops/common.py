"""What the families' descriptions share: arguments, C parameters and FFI
attributes that several ops of several families take, written once."""

import dataclasses

from .model import APIS, REQUIRED, Arg, Attribute, CParam, Family, Op

__all__ = []


def arg(name, kind, default=REQUIRED, **kw):
    """An argument (`Arg`), its default positional."""
    return Arg(name, kind, default, **kw)


def array(name, role, rank, dtypes, **kw):
    """An array operand: its role (`model.ROLES`), its rank and the dtypes
    its op's C function takes for it (`model.DTYPES`)."""
    return Arg(name, "array", role=role, rank=rank, dtypes=dtypes, **kw)


def result(name, rank, dtypes):
    """An op's result (`Op.result`): its name in messages, its rank, its
    dtypes (`model.DTYPES`)."""
    return Arg(name, "array", apis=(), rank=rank, dtypes=dtypes)


def method(choices):
    """The sampling method, bilinear by default."""
    return arg("method", "str", "bilinear", choices=choices)


BOTH_METHODS = ("bilinear", "nearest")
# The coordinates' derivatives: nearest sampling is piecewise constant.
BILINEAR = ("bilinear",)


def options(apis=APIS, flushing=("numpy", "torch")):
    """The options every op ends with (`apis`: the APIs that take them;
    `flushing`: those that take ``flush_denormals``: XLA computes with
    flush-to-zero)."""
    return (
        arg("out", "out", None, keyword_only=True, apis=("numpy",)),
        arg(
            "data_format", "str", keyword_only=True, choices=("NHWC", "NCHW"), apis=apis
        ),
        arg("num_threads", "threads", None, keyword_only=True, apis=apis),
        arg(
            "flush_denormals",
            "bool",
            False,
            keyword_only=True,
            apis=tuple(a for a in apis if a in flushing),
        ),
    )


def op(name, args, c_params, result, apis=APIS, c_doc=""):
    """An op (its family given by `family`), with its C function's parameters
    before the options every C function ends with (`C_TAIL`), and its
    result."""
    return Op(
        name,
        args,
        layouts={},
        apis=apis,
        c_params=(*c_params, *C_TAIL),
        c_doc=c_doc,
        result=result,
    )


def family(name, coords, layouts, c_api, attributes, c_doc="", **ops):
    """Family `name`: its `ops` by kind (`model.KINDS`), each given its
    family, kind, the family's default layouts and the C-level API version
    that added it (`c_doc`: what the C headers say before its functions),
    and the attributes of its FFI calls in the order they are decoded."""
    ops = {
        kind: dataclasses.replace(
            op, family=name, kind=kind, layouts=layouts, c_api=c_api
        )
        for kind, op in ops.items()
    }
    return Family(name, ops, coords, c_doc, attributes)


def attribute(name, type, param=None, field=None):
    """An FFI attribute (`model.Attribute`) named `name`, of XLA type
    `type`, holding parameter `param` and filling `field` (both `name`
    unless given)."""
    return Attribute(name, type, param or name, field or name)


# The attributes every op's FFI call has, decoded in this order after its
# family's first ones: the layout (an unknown code refused at once), the
# threads, then the fold, which only a call vmap folded has.
OPTIONS = (
    attribute("layout", "s32", "data_format"),
    attribute("num_threads", "s32"),
    attribute("fold_shape", "s64[]", "fold", "fold"),
)


# --------------------------------------------------------------------------
# C parameters: (C type, name, what the header says of it)

IMAGE_DTYPE = CParam("int", "image_dtype", "CG_UINT8 ... CG_BFLOAT16")
BOX_IND = (
    CParam("const void*", "box_ind", "IN  [num_boxes]"),
    CParam("int", "box_ind_dtype", "CG_INT32 or CG_INT64"),
)
LAYOUT = CParam("int", "layout", "CG_NHWC or CG_NCHW")


def shape(name, note="IN  4 values, in the layout's order"):
    """A shape of 4 values."""
    return CParam("const int64_t*", name, note)


# What every C function ends with.
C_TAIL = (
    CParam("int", "num_threads", "0: the default; 1 to 1024"),
    CParam("int", "flush_denormals", "non-zero: flush-to-zero arithmetic"),
    CParam("cg_error*", "error", "may be NULL: the status alone"),
)
