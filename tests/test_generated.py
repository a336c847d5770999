"""The C-level API's declarations are the op model's: capi.h, capi.pxd and
the capsule's table (cropgrad/_ops/generate.py renders them from
cropgrad/_ops through the templates beside them, with the FFI targets, the
bridges and their stub); the public header and capi.pxd are committed as
rendered, the others are build products that the built package agrees
with, and the table only ever grows at its end."""

import os
import re
import subprocess
import sys

import pytest

import cropgrad
import cropgrad.capi
from cropgrad import _ops
from cropgrad._ops import generate

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir)
SCRIPT = os.path.join(ROOT, "cropgrad", "_ops", "generate.py")


@pytest.fixture(autouse=True)
def _source_tree(monkeypatch):
    """The templates are the source tree's (the wheel has none): render
    from there, whichever cropgrad is imported."""
    if not os.path.exists(SCRIPT):
        pytest.skip("the source tree is not beside the tests")
    monkeypatch.setattr(generate, "_PACKAGE", os.path.join(ROOT, "cropgrad"))


def test_committed_files_are_the_rendering():
    # As setup.py runs it: a script, from the source tree, before any build.
    run = subprocess.run(
        [sys.executable, "-P", SCRIPT, "--check"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, (
        "the files below differ from what cropgrad/_ops/generate.py renders: "
        f"run it and commit them\n{run.stdout}{run.stderr}"
    )


def test_the_installed_header_and_pxd_are_the_rendering():
    # The package was built from the model it carries: its public files and
    # the stubs the wheel carries (build products: its bridges', the NumPy
    # API's and JAX's).
    package = os.path.dirname(cropgrad.__file__)
    for path in (*generate.COMMITTED, "_core.pyi", "__init__.pyi", "jax.pyi"):
        with open(os.path.join(package, path), encoding="utf-8") as file:
            assert file.read() == generate.render(path), path


def test_only_the_public_files_are_committed():
    assert set(generate.COMMITTED) == {
        "capi.pxd",
        os.path.join("include", "cropgrad", "capi.h"),
    }
    assert set(generate.FILES) == set(generate.COMMITTED) | set(generate.BUILT)
    assert not set(generate.COMMITTED) & set(generate.BUILT)
    with open(os.path.join(ROOT, ".gitignore"), encoding="utf-8") as file:
        ignored = file.read().splitlines()
    for path in generate.BUILT:
        assert f"cropgrad/{path.replace(os.sep, '/')}" in ignored, path
    for path in generate.COMMITTED:
        assert f"cropgrad/{path.replace(os.sep, '/')}" not in ignored, path


def test_the_built_core_has_every_bridge():
    # The build products render, and the compiled core was built from them.
    from cropgrad import _core

    bridges = generate.render("_bridges.pxi")
    stub = generate.render("_core.pyi")
    for op in _ops.C_OPS.values():
        assert f"\ndef {op.name}(\n" in bridges, op.name
        assert f"\ndef {op.name}(\n" in stub, op.name
        assert callable(getattr(_core, op.name)), op.name


def test_a_stale_file_is_found(tmp_path, monkeypatch):
    package = tmp_path / "cropgrad"
    for path in generate.FILES:
        (package / path).parent.mkdir(parents=True, exist_ok=True)
        (package / path).write_text(generate.render(path))
    monkeypatch.setattr(generate, "_PACKAGE", str(package))
    monkeypatch.setattr(generate, "render", lambda path: "rendered\n")
    assert generate.main(["--check"]) == 1
    assert (package / "capi.pxd").read_text() != "rendered\n"
    assert generate.main([]) == 0
    assert (package / "capi.pxd").read_text() == "rendered\n"
    assert generate.main(["--check"]) == 0


def test_a_missing_build_product_is_written_but_not_stale(tmp_path, monkeypatch):
    # A tree never built has no build products: --check passes there (a
    # fresh clone), a build writes them; a missing committed file is stale.
    package = tmp_path / "cropgrad"
    rendered = {path: generate.render(path) for path in generate.FILES}
    for path in generate.COMMITTED:
        (package / path).parent.mkdir(parents=True, exist_ok=True)
        (package / path).write_text(rendered[path])
    for path in generate.BUILT:
        (package / path).parent.mkdir(parents=True, exist_ok=True)
    monkeypatch.setattr(generate, "_PACKAGE", str(package))
    monkeypatch.setattr(generate, "render", rendered.__getitem__)
    assert generate.main(["--check"]) == 0
    assert generate.main([]) == 0
    for path in generate.BUILT:
        assert (package / path).read_text() == rendered[path], path
    (package / "capi.pxd").unlink()
    assert generate.main(["--check"]) == 1


def _table_members(header):
    struct = header[header.index("typedef struct cropgrad_api_t {") :]
    struct = struct[: struct.index("} cropgrad_api_t;")]
    return re.findall(r"cg_\w+_fn (\w+);", struct)


def test_the_table_is_the_ops_in_order_and_only_grows_at_its_end():
    header = generate.render(os.path.join("include", "cropgrad", "capi.h"))
    members = _table_members(header)
    assert members == ["api_version", "default_threads", *_ops.C_OPS]
    # Append-only: the ops of each version come after every op of the
    # versions before it, and the newest version is the API's.
    versions = [op.c_api for op in _ops.C_OPS.values()]
    assert versions == sorted(versions)
    assert _ops.API_VERSION == versions[-1]
    major, minor = _ops.API_VERSION
    assert f"#define CG_API_VERSION_MINOR {minor}\n" in header
    assert cropgrad.capi.api_version() == (major, minor)
    # The 1.0 table, as released.
    assert members[:6] == [
        "api_version",
        "default_threads",
        "crop_and_resize",
        "crop_and_resize_grad_image",
        "crop_and_resize_grad_boxes",
        "crop_and_resize_jvp_boxes",
    ]


def test_every_op_is_declared_with_its_parameters_in_every_file():
    header = generate.render(os.path.join("include", "cropgrad", "capi.h"))
    pxd = generate.render("capi.pxd")
    table = generate.render(os.path.join("_capi", "table.pxi"))
    addresses = cropgrad.capi.function_addresses()
    for op in _ops.C_OPS.values():
        assert f"typedef int (*cg_{op.name}_fn)(" in header
        assert f"cdef int cg_{op.name}(" in pxd
        assert f"TABLE.{op.name} = cg_{op.name}\n" in table
        assert f"cg_{op.name}" in addresses
        declared = pxd[pxd.index(f"cdef int cg_{op.name}(") :]
        declared = declared[: declared.index(") noexcept nogil")]
        names = re.findall(r"^    .*?(\w+),", declared, re.M)
        assert names == [p.name for p in op.c_params], op.name


def test_ops_the_c_level_api_lacks_are_declared_nowhere(monkeypatch):
    # Every op has its C function now: take grid sampling's away (as before
    # 1.2) and nothing of it may reach the header, the .pxd or the table.
    import dataclasses
    import types

    family = _ops.FAMILIES["grid_sample"]
    lacking = dataclasses.replace(
        family,
        ops={k: dataclasses.replace(op, c_api=None) for k, op in family.ops.items()},
    )
    families = dict(_ops.FAMILIES, grid_sample=lacking)
    c_ops = {n: op for n, op in _ops.C_OPS.items() if op.family != "grid_sample"}
    ops = {op.name: op for f in families.values() for op in f.ops.values()}
    model = types.SimpleNamespace(
        FAMILIES=families, OPS=ops, C_OPS=c_ops, API_VERSION=(1, 1)
    )
    monkeypatch.setattr(generate, "_model", lambda: model)
    texts = [
        generate.render(path)
        for path in (
            os.path.join("include", "cropgrad", "capi.h"),
            "capi.pxd",
            os.path.join("_capi", "table.pxi"),
        )
    ]
    assert "#define CG_API_VERSION_MINOR 1\n" in texts[0]
    for op in family.ops.values():
        for text in texts:
            assert f"cg_{op.name}(" not in text and f"cg_{op.name}_fn" not in text


def test_ops_jax_lacks_get_no_ffi_target():
    targets = generate.render(os.path.join("_jax", "targets.pxi"))
    for op in _ops.C_OPS.values():
        assert (f'"cropgrad_{op.name}"' in targets) == ("jax" in op.apis), op.name


def test_each_ffi_handler_takes_every_operand_once_then_its_result():
    # The rows by which the handlers take an op's buffers from the frame:
    # its operands in JAX's order (the boxes and box_ind, which its family
    # decodes together, left out), then its result, each with the model's
    # rank and dtypes.
    slot = re.compile(r'^([A-Z]+), (\d+), (\d+), "(\w+)", TAKES_([A-Z0-9]+)$')
    for op in _ops.OPS.values():
        if "jax" not in op.apis:
            continue
        row = generate.FfiRow(op, _ops.FAMILIES[op.family])
        arrays = [a for a in op.args_of("jax") if a.kind == "array"]
        taken = [slot.match(text).groups() for text in row.slots]
        *operands, result = taken
        expected = [
            (a.role.upper(), str(i), str(a.rank), a.name, a.dtypes.upper())
            for i, a in enumerate(arrays)
            if row.boxes < 0 or i not in (row.boxes, row.boxes + 1)
        ]
        assert operands == expected, op.name
        assert result == (
            "RESULT",
            "0",
            str(op.result.rank),
            op.result.name,
            op.result.dtypes.upper(),
        ), op.name
        if row.boxes >= 0:
            assert [a.role for a in arrays[row.boxes : row.boxes + 2]] == [
                "coords",
                "indices",
            ], op.name
        for array in (*arrays, op.result):
            assert array.dtypes in _ops.DTYPES, (op.name, array.name)
