"""The op model (private): every op family described once, for every layer.

- `model`: the vocabulary: an argument (`Arg`: its kind, role, default and
  spelling per API), an op (`Op`: its arguments in order, layouts, family,
  kind, the C-level API version that added it), a family (`Family`: its
  ops by kind), the roles an operand plays and the adjoint algebra every
  family shares (`ADJOINTS`);
- `families`: the families themselves (`FAMILIES`) and every op by name
  (`OPS`).

The NumPy API, the PyTorch and JAX adapters and the tests read the ops
from here; a new family is one more `families._family` call, its kernels,
reference, semantic checks and public functions.  Pure Python: it imports
nothing of cropgrad beyond itself.
"""

from cropgrad._ops.families import FAMILIES, OPS
from cropgrad._ops.model import ADJOINTS, APIS, KINDS, REQUIRED, ROLES, Arg, Family, Op

__all__ = [
    "ADJOINTS",
    "APIS",
    "FAMILIES",
    "KINDS",
    "OPS",
    "REQUIRED",
    "ROLES",
    "Arg",
    "Family",
    "Op",
]
