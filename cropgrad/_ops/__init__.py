"""The op model (private): every op family described once, for every layer.

- `model`: the vocabulary: an argument (`Arg`: its kind, role, default and
  spelling per API; an array's rank and the dtypes its C function takes,
  `DTYPES`), an op (`Op`: its arguments in order, its result, layouts,
  family, kind, its C function's parameters and the C-level API version
  that added it), a family (`Family`: its ops by kind, the attributes of
  its JAX FFI calls, `Attribute`), the roles an operand plays and the
  adjoint algebra every family shares (`ADJOINTS`);
- `common`: the arguments, C parameters and FFI attributes several
  families share;
- one module per family (`crop_and_resize`, `roi_align`, `grid_sample`):
  its ops;
- `generate`: the C-level API's declarations (the public header, capi.pxd,
  the capsule's table), its functions' definitions and the JAX adapter's
  FFI targets (with the rows by which their handlers take each op's
  buffers, and each family's attributes), made from the model with
  Cython's Tempita.

Every layer reads its ops from here: the NumPy API's bindings, the
``torch.library`` schemas, kernels, fake implementations and vmap rules,
the JAX primitives and their derivative rules, the C-level API's
declarations; the public functions' signatures and stubs are held to it by
``tests/test_signatures.py``.  A new family is one more module here, its
kernels, reference, semantic checks and public functions.

Pure Python that imports nothing beyond this folder (relative imports), so
that setup.py can read it before the extension is built.

Examples
--------
>>> from cropgrad._ops import FAMILIES, OPS
>>> list(FAMILIES)
['crop_and_resize', 'roi_align', 'grid_sample']
>>> OPS["roi_align_grad_boxes"].kind, OPS["roi_align_grad_boxes"].c_api
('grad_coords', (1, 1))
"""

from .crop_and_resize import FAMILY as _CROP_AND_RESIZE
from .grid_sample import FAMILY as _GRID_SAMPLE
from .model import (
    ADJOINTS,
    APIS,
    DTYPES,
    FIELDS,
    KINDS,
    REQUIRED,
    ROLES,
    Arg,
    Attribute,
    CParam,
    Family,
    Op,
)
from .roi_align import FAMILY as _ROI_ALIGN

__all__ = [
    "ADJOINTS",
    "API_VERSION",
    "APIS",
    "C_OPS",
    "DTYPES",
    "FAMILIES",
    "FIELDS",
    "KINDS",
    "OPS",
    "REQUIRED",
    "ROLES",
    "Arg",
    "Attribute",
    "CParam",
    "Family",
    "Op",
]

# The families in the order the C-level API added them (its table's order).
FAMILIES = {
    family.name: family for family in (_CROP_AND_RESIZE, _ROI_ALIGN, _GRID_SAMPLE)
}

# Every op with a kernel, by name, family by family in the same order.
OPS = {op.name: op for family in FAMILIES.values() for op in family.ops.values()}

# The ops of the C-level API, in its table's order (`Op.c_api` None: an op
# the C-level API does not have yet).
C_OPS = {name: op for name, op in OPS.items() if op.c_api is not None}

# The C-level API's version: that of the newest op it has.
API_VERSION = max(op.c_api for op in C_OPS.values())
