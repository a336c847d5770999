"""The registry of rows that optional adapters add (see the package docstring).

Each adapter has a module in this package with a function
``extra_rows(workload, quick)``; the module imports its framework at the
top, so it imports only where that framework is installed.  This module
imports the adapters, asks them for rows and checks what they return.
"""

import importlib

from .columns import COLUMNS, ROI_COLUMNS

# Adapter name -> module.  A module that does not import (its framework is
# missing, or it is not part of this version) adds no rows.  "nchw" is
# cropgrad's own NCHW layout beside the NHWC rows (no framework needed).
ADAPTERS = {
    "jax": "cropgrad_bench.jax_rows",
    "torch": "cropgrad_bench.torch_rows",
    "nchw": "cropgrad_bench.nchw_rows",
}

# Columns of an adapter row that land in the main table's cropgrad columns.
TABLE_COLUMNS = (
    "cropgrad_1thread",
    "cropgrad_default",
    "cropgrad_default_new_output",
)


class AdapterError(ValueError):
    """An adapter returned something that is not a list of row dicts."""


def load_adapters(enabled=True):
    """Import the adapters: ({name: module}, {name: status text})."""
    modules, status = {}, {}
    for name, module_name in ADAPTERS.items():
        if not enabled:
            status[name] = "n/a (disabled with --no-adapters)"
            continue
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            if getattr(exc, "name", None) == module_name:
                status[name] = "n/a (not in this version of cropgrad)"
            else:
                status[name] = f"n/a ({type(exc).__name__}: {exc})"
            continue
        if not callable(getattr(module, "extra_rows", None)):
            status[name] = f"n/a ({module_name} has no extra_rows function)"
            continue
        modules[name] = module
        status[name] = "available"
    return modules, status


def adapter_rows(modules, workload, quick):
    """[(adapter name, row dict)] that the adapters add after `workload`.

    An adapter that raises or returns a malformed row adds nothing; the
    error comes back as ``(name, exception)`` in the second list.
    """
    rows, errors = [], []
    for name, module in modules.items():
        try:
            returned = module.extra_rows(workload, quick)
            for row in _checked(returned, name):
                rows.append((name, row))
        except Exception as exc:  # noqa: BLE001 - an adapter's bug ends its rows
            errors.append((name, exc))
    return rows, errors


def _checked(rows, adapter):
    if rows is None:
        return []
    if not isinstance(rows, (list, tuple)):
        raise AdapterError(
            f"{adapter}: extra_rows must return a list of dicts, "
            f"got {type(rows).__name__}"
        )
    for row in rows:
        if not isinstance(row, dict):
            raise AdapterError(f"{adapter}: a row must be a dict, got {row!r}")
        name, columns = row.get("name"), row.get("columns")
        if not isinstance(name, str) or not name:
            raise AdapterError(f"{adapter}: a row needs a non-empty 'name' string")
        if not isinstance(columns, dict) or not columns:
            raise AdapterError(f"{adapter}: row {name!r} needs a 'columns' dict")
        for column, fn in columns.items():
            if not isinstance(column, str) or not callable(fn):
                raise AdapterError(
                    f"{adapter}: row {name!r}: column {column!r} must map a "
                    "name to a callable"
                )
        for target in row.get("targets", ()):
            if len(target) != 4 or target[3] not in ("<=", ">="):
                raise AdapterError(
                    f"{adapter}: row {name!r}: a target is (what, ratio or "
                    f"column, bound, '<=' or '>='), got {target!r}"
                )
        for ratio, pair in row.get("ratios", {}).items():
            known = set(columns) | set(COLUMNS) | set(ROI_COLUMNS)
            if len(pair) != 2 or any(c not in known for c in pair):
                raise AdapterError(
                    f"{adapter}: row {name!r}: ratio {ratio!r} must name two "
                    "columns of the row"
                )
    return list(rows)
