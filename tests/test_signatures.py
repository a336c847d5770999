"""Every public function and stub against the one table of each op's
arguments (cropgrad/_ops), and the torch.library schemas made
from it.

The adapters' rows run when their framework is installed (always in CI,
where CROPGRAD_REQUIRE_ADAPTERS=1 makes a missing one a failure).
"""

import ast
import inspect
import os

import numpy as np
import pytest
from _helpers import missing

import cropgrad
from cropgrad._ops import APIS, OPS

PACKAGE = os.path.dirname(os.path.abspath(cropgrad.__file__))


def _adapter(name):
    """cropgrad.jax or cropgrad.torch, or a skip when its framework is
    missing (a failure under CROPGRAD_REQUIRE_ADAPTERS=1)."""
    try:
        return __import__(f"cropgrad.{name}", fromlist=["_"])
    except ImportError as exc:
        missing(
            f"cropgrad.{name} needs its framework ({exc})", "CROPGRAD_REQUIRE_ADAPTERS"
        )


def _dtypes(api):
    """What a dtype default ``"float32"`` is in `api`."""
    if api == "numpy":
        return {"float32": np.float32}
    _adapter(api)
    if api == "torch":
        import torch

        return {"float32": torch.float32}
    import jax.numpy as jnp

    return {"float32": jnp.float32}


def _public(api):
    """The public functions of `api` by op name (ops it exposes only)."""
    module = cropgrad if api == "numpy" else _adapter(api)
    return {
        name: getattr(module, name)
        for name, op in OPS.items()
        if api in op.apis and hasattr(module, name)
    }


def test_every_op_has_a_public_numpy_function():
    assert set(_public("numpy")) == set(OPS)


@pytest.mark.parametrize("api", APIS)
def test_public_functions_follow_the_table(api):
    functions = _public(api)
    assert functions, api
    for name, function in functions.items():
        expected = OPS[name].signature(api, _dtypes(api))
        assert inspect.signature(function) == expected, name


def _stub_signatures(path):
    """Each function of a stub file: [(name, keyword-only, has default)]."""
    with open(path) as f:
        tree = ast.parse(f.read())
    out = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            a = node.args
            positional = a.posonlyargs + a.args
            padded = [None] * (len(positional) - len(a.defaults)) + a.defaults
            out[node.name] = [
                (p.arg, False, d is not None) for p, d in zip(positional, padded)
            ] + [
                (p.arg, True, d is not None)
                for p, d in zip(a.kwonlyargs, a.kw_defaults)
            ]
    return out


@pytest.mark.parametrize(
    "api, stubs",
    [
        ("numpy", ["__init__.pyi"]),
        ("jax", ["jax.pyi"]),
    ],
)
def test_stubs_follow_the_table(api, stubs):
    # (cropgrad.torch is typed inline: its functions are checked above.)
    stub = ", ".join(stubs)
    stubs = {
        name: signature
        for path in stubs
        for name, signature in _stub_signatures(os.path.join(PACKAGE, path)).items()
    }
    checked = 0
    for name, op in OPS.items():
        if api not in op.apis:
            continue
        assert name in stubs, (stub, name)
        expected = [
            (
                a.renamed.get(api, a.name),
                a.keyword_only,
                op.default(a.name, api) is not inspect.Parameter.empty,
            )
            for a in op.args_of(api)
        ]
        assert stubs[name] == expected, (stub, name)
        checked += 1
    assert checked >= 3, stub


def test_the_schemas_are_the_tables():
    _adapter("torch")
    import torch

    for name, op in OPS.items():
        if "torch" not in op.apis:
            continue
        registered = getattr(torch.ops.cropgrad, name).default._schema
        expected = torch._C.parse_schema(f"cropgrad::{name}{op.schema()}")
        assert str(registered) == str(expected)


def test_binding_names_every_argument():
    op = OPS["crop_and_resize"]
    bound = op.bind("torch", tuple(range(len(op.names("torch")))))
    assert bound.crop_size == 3 and bound.flush_denormals == 8
    with pytest.raises(TypeError, match="takes 9 arguments, got 2"):
        op.bind("torch", (1, 2))


def test_a_binding_is_replaced_in_the_ops_order():
    op = OPS["crop_and_resize"]
    bound = op.bind("torch", tuple(range(len(op.names("torch")))))
    moved = bound.replace(flush_denormals="last", image="first")
    assert moved._fields == op.names("torch")
    assert list(moved) == ["first", *range(1, 8), "last"]
    assert bound.image == 0  # a copy
    with pytest.raises(ValueError, match="colour"):
        bound.replace(colour=1)


def test_string_options_list_their_choices():
    for op in OPS.values():
        assert op.arg("data_format").choices == ("NHWC", "NCHW")
        if op.name.startswith("crop_and_resize"):
            assert "bilinear" in op.arg("method").choices
    # Nearest sampling is piecewise constant in the boxes: no boxes derivative.
    for name in ("crop_and_resize_grad_boxes", "crop_and_resize_jvp_boxes"):
        assert OPS[name].arg("method").choices == ("bilinear",)
