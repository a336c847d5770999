"""The C-level API's declarations, made from the op model.

Each op's C function is declared three times for three readers: in the
public header ``cropgrad/include/cropgrad/capi.h`` (C and C++), in
``cropgrad/capi.pxd`` (Cython consumers, and cropgrad's own modules), and
in the capsule's table ``cropgrad/_capi/table.pxi`` (the struct the
header's ``cropgrad_api_t`` mirrors, which ``capi.pyx`` includes, with the
functions' definitions: the shape pointers checked, then the family's call
of the op's kind, which each family's ``cropgrad/_capi/<family>.pxd``
declares from its template); and each op
is an XLA FFI target of cropgrad.jax (``cropgrad/_jax/targets.pxi``, with
the row by which its handler takes its buffers from the call frame, and
its family's attributes) and
a bridge of cropgrad._core from NumPy arrays (``cropgrad/_bridges.pxi``,
its stub in ``cropgrad/_core.pyi``); and each op's public functions are
typed in the stubs of cropgrad and cropgrad.jax (``cropgrad/__init__.pyi``,
``cropgrad/jax.pyi``, with their ``__all__``).  All are rendered here from the
model (`Op.c_params` for the declarations) through Cython's Tempita
templates beside them (``*.tp``), so that they cannot drift apart or miss
an op.  Only the public files (`COMMITTED`: the header and capi.pxd, which
C and Cython consumers read) are committed; ``tests/test_generated.py``
fails when one differs from its rendering.  The others (`BUILT`: the
families' calls, the table, the FFI targets, the bridges and the stubs)
are build products,
ignored by git: setup.py renders every file before compiling (so an sdist
or a clone builds as it is), and writes only those that differ.

The table is append-only: an op's place is its family's, in the order of
`FAMILIES`, which is the order the C-level API added them.

Run from the repository's root (no build needed)::

    python cropgrad/_ops/generate.py          # write the files
    python cropgrad/_ops/generate.py --check  # exit 1 if one is stale

``--check`` renders every file; a committed file that differs (or is
missing) is stale, and so is a build product that differs from its
rendering (a build from an older model: build again); a missing build
product is not (a tree never built).
"""

import importlib
import importlib.util
import inspect
import os
import sys
import textwrap

__all__ = ["BUILT", "COMMITTED", "FILES", "render", "main"]

_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# What is rendered: the output, relative to the package, and its template
# (the output's path with ".tp" appended).  The public files are committed;
# the internal ones are build products (listed in .gitignore).
COMMITTED = (
    os.path.join("include", "cropgrad", "capi.h"),
    "capi.pxd",
)
BUILT = (
    os.path.join("_capi", "crop_and_resize.pxd"),
    os.path.join("_capi", "roi_align.pxd"),
    os.path.join("_capi", "grid_sample.pxd"),
    os.path.join("_capi", "table.pxi"),
    os.path.join("_jax", "targets.pxi"),
    "_bridges.pxi",
    "_core.pyi",
    "__init__.pyi",
    "jax.pyi",
)
FILES = COMMITTED + BUILT


def _model():
    """The op model: this package, or, when this file runs as a script
    (setup.py, before the extension exists), the same folder loaded alone."""
    if __package__:
        return importlib.import_module(__package__)
    here = os.path.dirname(os.path.abspath(__file__))
    spec = importlib.util.spec_from_file_location(
        "_cropgrad_ops",
        os.path.join(here, "__init__.py"),
        submodule_search_locations=[here],
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


# --------------------------------------------------------------------------
# How each reader spells a declaration


def _c_declarator(param):
    """``const void *image``: C's spelling (the star with the name)."""
    if param.type.endswith("*"):
        return f"{param.type[:-1].rstrip()} *{param.name}"
    return f"{param.type} {param.name}"


def _cython_declarator(param):
    """``const void* image``: Cython's spelling."""
    return f"{param.type} {param.name}"


def _c_comment(text, width=76):
    """`text` as a C comment block (``/* ... */``), or nothing."""
    lines = textwrap.wrap(text, width - 3)
    if not lines:
        return ""
    return "/* " + "\n * ".join(lines) + " */\n"


def _cython_comment(text, width=76):
    """`text` as Cython comment lines, or nothing."""
    return "".join(f"# {line}\n" for line in textwrap.wrap(text, width - 2))


def _params(op, spell, comment, column, last):
    """`op`'s parameters, one a line as `spell` spells them, each note as
    `comment` formats it from `column` on; `last` ends the final line."""
    lines = []
    for i, param in enumerate(op.c_params):
        text = f"    {spell(param)}{last if i == len(op.c_params) - 1 else ','}"
        if param.note:
            text = f"{text:<{column}}{comment(param.note)}"
        lines.append(text)
    return "\n".join(lines)


def _functions(families, comment, declare):
    """Every op's declaration (`declare(op)`), family by family, each after
    its comment, the family's before its first op, blank lines between."""
    parts = []
    for family in families:
        if family.c_doc:
            parts.append(comment(family.c_doc))
        parts.extend(comment(op.c_doc) + declare(op) for op in family.ops.values())
    return "\n\n".join(part.rstrip("\n") for part in parts)


def _h_function(op):
    params = _params(op, _c_declarator, lambda n: f"/* {n} */", 34, ");")
    return f"typedef int (*cg_{op.name}_fn)(\n{params}"


def _pxd_function(op):
    params = _params(op, _cython_declarator, lambda n: f"# {n}", 33, ",")
    return f"cdef int cg_{op.name}(\n{params}\n) noexcept nogil"


def h_functions(families):
    """The function pointer types of capi.h."""
    return _functions(families, _c_comment, _h_function)


def pxd_functions(families):
    """The function declarations of capi.pxd."""
    return _functions(families, _cython_comment, _pxd_function)


def pyx_types(op):
    """The C types of `op`'s parameters, wrapped for a Cython ctypedef (the
    closing ``) noexcept nogil`` kept on one line: a line break outside the
    parentheses would end the statement; a type is never split)."""
    types = [p.type.replace(" ", "\0") for p in op.c_params]
    tail = ") noexcept nogil".replace(" ", "\0")
    text = textwrap.fill(
        ", ".join(types) + tail,
        84,
        initial_indent="    ",
        subsequent_indent="    ",
    )
    return text.replace("\0", " ")


def pyx_params(op):
    """`op`'s parameters as capi.pyx defines them, one a line."""
    return "\n".join(f"    {_cython_declarator(p)}," for p in op.c_params)


def run_declarations(ops, family):
    """The declarations of `family`'s calls, one per op kind (``run_<kind>``,
    which its module of cropgrad._capi defines): the op's name for
    messages, whether to run its metadata check, then its C parameters."""
    return "\n\n".join(
        f"cdef int run_{op.kind}(\n    const char* op, bint check,\n"
        f"{pyx_params(op)}\n) noexcept nogil"
        for op in ops
        if op.family == family
    )


def pyx_args(op):
    """`op`'s parameters' names, the arguments of its call, wrapped."""
    return textwrap.fill(
        ", ".join(p.name for p in op.c_params),
        84,
        initial_indent="        ",
        subsequent_indent="        ",
    )


class Bridge:
    """How cropgrad._core's bridge of `op` passes each C parameter: its
    Python parameters (`params`, as Cython declares them), the arrays whose
    buffers it holds (`arrays`, the output last), the shapes it reads from
    arrays or sizes (`shapes`: name, source; ``num_boxes`` the count) and
    the call's arguments
    (`args`).  A pointer is an array's buffer (the one output is ``out``),
    a ``*_shape`` the shape of that array, another shape (``image_size``)
    a sequence of ints, ``num_boxes`` the boxes' rows; ``flush_denormals``
    is ``flush``, and the error record the bridge's own."""

    def __init__(self, op):
        self.params, self.arrays, self.shapes, self.args = [], [], [], []
        pointers = [
            p.name
            for p in op.c_params
            if p.type.endswith("*") and p.type not in ("const int64_t*", "cg_error*")
        ]
        for param in op.c_params:
            if param.type == "cg_error*":
                self.args.append("&err")
            elif param.type == "const int64_t*":
                # (The C array is named apart from a Python parameter.)
                array = param.name.removesuffix("_shape")
                if array in pointers:
                    self.shapes.append((f"_{param.name}", f"{array}.shape"))
                else:
                    self.params.append(param.name)
                    self.shapes.append((f"_{param.name}", param.name))
                self.args.append(f"_{param.name}")
            elif param.name in pointers:
                name = param.name if param.type.startswith("const ") else "out"
                self.params.append(name)
                index = len(self.arrays)
                self.arrays.append(name)
                self.args.append(f"<{param.type}>views[{index}].buf")
            elif param.name == "num_boxes":
                self.shapes.append(("num_boxes", "boxes.shape[0]"))
                self.args.append("num_boxes")
            elif param.name == "flush_denormals":
                self.params.append("bint flush")
                self.args.append("flush")
            else:
                self.params.append(f"{param.type} {param.name}")
                self.args.append(param.name)
        if self.arrays[-1] != "out" or self.arrays.count("out") != 1:
            raise ValueError(f"{op.name}: one output, the last pointer")

    def stub(self, op):
        """The bridge's parameters as its stub annotates them, one a line:
        float pointers float32 arrays, box_ind integers, the other arrays
        any dtype (images, outputs) or the arithmetic type's (RoIAlign's
        grads, boxes and tangents); sizes ints, options their C types'."""
        types = {p.name: p.type for p in op.c_params}
        scalars = {"bint": "bool", "int": "int", "int64_t": "int"}
        scalars.update(float="float", double="float")
        lines = []
        for param in self.params:
            kind, _, name = param.rpartition(" ")
            if kind:
                annotation = scalars[kind]
            elif name not in self.arrays:
                annotation = "Sequence[int]"
            else:
                c_type = types[name] if name != "out" else self._out_type(op)
                if "float" in c_type:
                    dtype = "np.float32"
                elif name == "box_ind":
                    dtype = "np.integer[Any]"
                elif name in ("image", "out"):
                    dtype = "Any"
                else:
                    dtype = "np.floating[Any]"
                annotation = f"npt.NDArray[{dtype}]"
            lines.append(f"    {name}: {annotation},")
        return "\n".join(lines)

    @staticmethod
    def _out_type(op):
        return next(
            p.type
            for p in op.c_params
            if p.type.endswith("*") and not p.type.startswith(("const ", "cg_error"))
        )

    @staticmethod
    def wrap(items, indent, width=84):
        """`items` joined by commas, wrapped, none split."""
        text = textwrap.fill(
            ", ".join(item.replace(" ", "\0") for item in items),
            width,
            initial_indent=indent,
            subsequent_indent=indent,
        )
        return text.replace("\0", " ")


class FfiRow:
    """How cropgrad.jax's FFI handler of `op` (of `family`) takes its
    buffers from the call frame: the `Row` of cropgrad/_jax/handlers.pyx.

    `slots` are the buffers it takes, in order: its array operands but the
    boxes and box_ind, which its family's call decodes together
    (frames.boxes_and_index) once the others' dtypes are checked, then its
    result; each is a `Slot` as the handlers spell it: role, place (among
    the operands, or the results), rank, name in messages, the dtypes the
    op takes.  `boxes` is the boxes' place (-1: none), box_ind's the next;
    `wide` whether the boxes may be float64 too; `coords` what messages
    call the coordinates; `decode` the function that decodes the dtypes,
    which the families whose coordinates have one name share
    (``_decode_boxes``, ``_decode_grid``); `nattrs` the number of its
    family's attributes (`ffi_attributes`), whose table its row points at.
    """

    def __init__(self, op, family):
        arrays = [a for a in op.args_of("jax") if a.kind == "array"]
        names = [a.name for a in arrays]
        together = op.operand("indices") is not None
        self.slots = [
            self._slot(a.role, place, a.renamed.get("jax", a.name), a)
            for place, a in enumerate(arrays)
            if not (together and a.role in ("coords", "indices"))
        ]
        self.slots.append(self._slot("result", 0, op.result.name, op.result))
        self.boxes, self.wide, self.coords = -1, False, family.coords
        self.decode = f"_decode_{family.coords_operand}"
        self.nattrs = len(family.attributes)
        if together:
            self.boxes = names.index(op.operand("coords"))
            boxes, index = arrays[self.boxes], arrays[self.boxes + 1 :][:1]
            if (
                [a.role for a in index] != ["indices"]
                or (boxes.rank, index[0].rank) != (2, 1)
                or boxes.dtypes not in ("float32", "arithmetic")
            ):
                raise ValueError(f"{op.name}: boxes [n, 4], then box_ind [n]")
            self.wide = boxes.dtypes == "arithmetic"

    @staticmethod
    def _slot(role, place, name, array):
        dtypes = f"TAKES_{array.dtypes.upper()}"
        return f'{role.upper()}, {place}, {array.rank}, "{name}", {dtypes}'


# The XLA types of the model's attributes (`model.FIELDS`) as ffi.pxd names
# them: a scalar's, or an array's elements' (the fold's shape).
_XLA_TYPES = {
    "s32": "CG_FFI_S32",
    "f32": "CG_FFI_F32",
    "f64": "CG_FFI_F64",
    "s64[]": "CG_FFI_S64",
}


def ffi_attributes(family):
    """`family`'s attributes (`Family.attributes`, in order) as the rows of
    the handlers' table (frames.Attr): XLA name, XLA type, the field it
    fills, and the op kinds whose calls have it, a bit each (EVERY_KIND:
    all of them)."""
    rows = []
    for attr in family.attributes:
        kinds = [k for k in family.ops if attr in family.attributes_of(k)]
        if len(kinds) == len(family.ops):
            mask = "EVERY_KIND"
        else:
            mask = " | ".join(f"1 << {kind.upper()}" for kind in kinds)
        code = _XLA_TYPES[attr.type]
        rows.append(f'"{attr.name}", {code}, frames.{attr.field.upper()}, {mask}')
    return rows


# How each API's stub annotates an argument, by kind (`model.Arg.kind`); a
# size is the image's (an image gradient's) or the result's, a string option
# the `Literal` of its choices, ``out=`` an array of the result's type.
_STUB_TYPES = {
    "numpy": {
        "array": "npt.ArrayLike",
        "image size": "npt.ArrayLike",
        "result size": "int | npt.ArrayLike",
        "dtype": "npt.DTypeLike | Any",
    },
    "jax": {
        "array": "jax.Array | npt.ArrayLike",
        "image size": "tuple[int, ...] | list[int]",
        "result size": "int | tuple[int, int] | list[int]",
        "dtype": "Any",
    },
}
for _types in _STUB_TYPES.values():
    _types.update(float="float", int="int", bool="bool", threads="int | None")


def stub_result(op, api):
    """What `op`'s public function of `api` returns: a NumPy array of
    float32 where its C function writes ``float`` (crop_and_resize's
    results but the image gradient), of the arithmetic type otherwise."""
    if api == "jax":
        return "jax.Array"
    if any(p.type == "float*" for p in op.c_params):
        return "npt.NDArray[np.float32]"
    return "npt.NDArray[np.floating[Any]]"


def stub(op, api):
    """The stub of `op`'s public function of `api`: its arguments as the
    model orders, spells and splits them (``*`` before the first keyword-only
    one), each annotated for its kind, ``...`` for a default."""
    types = _STUB_TYPES[api]
    lines = [f"def {op.name}("]
    keywords = False
    for arg in op.args_of(api):
        if arg.keyword_only and not keywords:
            lines.append("    *,")
            keywords = True
        if arg.kind == "ints":
            size = "image" if op.kind == "grad_image" else "result"
            annotation = types[f"{size} size"]
        elif arg.kind == "str":
            annotation = "Literal[" + ", ".join(f'"{c}"' for c in arg.choices) + "]"
        elif arg.kind == "out":
            annotation = f"{stub_result(op, api)} | None"
        else:
            annotation = types[arg.kind]
        required = op.default(arg.name, api) is inspect.Parameter.empty
        default = "" if required else " = ..."
        lines.append(f"    {arg.renamed.get(api, arg.name)}: {annotation}{default},")
    lines.append(f") -> {stub_result(op, api)}: ...")
    return "\n".join(lines)


def stub_all(ops, api, names):
    """The ``__all__`` of a stub: `names` and the ops `api` has, sorted, one
    a line."""
    names = sorted([*names, *(op.name for op in ops if api in op.apis)])
    return "\n".join(f'    "{name}",' for name in names)


def _versions(ops):
    """`ops` grouped by the C-level API version that added them, in order."""
    groups = {}
    for op in ops:
        groups.setdefault(op.c_api, []).append(op)
    return sorted(groups.items())


# --------------------------------------------------------------------------
# Rendering


def render(path):
    """The text of generated file `path` (one of `FILES`)."""
    from Cython.Tempita import Template

    model = _model()
    with open(os.path.join(_PACKAGE, path + ".tp"), encoding="utf-8") as file:
        template = Template(file.read(), name=path + ".tp")
    # Only what the C-level API has: an op without a version is not in it.
    ops = list(model.C_OPS.values())
    text = template.substitute(
        families=[
            f
            for f in model.FAMILIES.values()
            if any(op.c_api is not None for op in f.ops.values())
        ],
        ops=ops,
        versions=_versions(ops),
        major=model.API_VERSION[0],
        minor=model.API_VERSION[1],
        h_functions=h_functions,
        pxd_functions=pxd_functions,
        pyx_types=pyx_types,
        pyx_params=pyx_params,
        pyx_args=pyx_args,
        run_declarations=lambda family: run_declarations(ops, family),
        Bridge=Bridge,
        ffi_row=lambda op: FfiRow(op, model.FAMILIES[op.family]),
        ffi_attributes=ffi_attributes,
        stub=stub,
        stub_all=stub_all,
        all_ops=list(model.OPS.values()),
        source=f"cropgrad/{path.replace(os.sep, '/')}.tp",
    )
    return text.rstrip("\n") + "\n"


def main(argv=None):
    """Write every generated file that differs from its rendering, or, with
    ``--check``, list the stale ones (every file rendered; a build product
    not yet written is not stale) and return 1 if there is one."""
    check = "--check" in (sys.argv[1:] if argv is None else argv)
    stale = []
    for path in FILES:
        target = os.path.join(_PACKAGE, path)
        text = render(path)
        try:
            with open(target, encoding="utf-8") as file:
                current = file.read()
        except FileNotFoundError:
            current = None
        if current == text or (check and current is None and path in BUILT):
            continue
        stale.append(path)
        if not check:
            with open(target, "w", encoding="utf-8") as file:
                file.write(text)
    for path in stale:
        if not check:
            verb = "written"
        elif path in BUILT:
            verb = "is stale (a build product: build again)"
        else:
            verb = "is stale"
        print(f"cropgrad/{path}: {verb}", file=sys.stderr)
    return 1 if check and stale else 0


if __name__ == "__main__":
    sys.exit(main())
