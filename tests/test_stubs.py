"""The type stubs describe the installed package (mypy's stubtest)."""

import importlib.util
import os
import subprocess
import sys
import tempfile


def _private_modules_without_stubs():
    """The installed package's private ``.py`` modules that have no ``.pyi``."""
    root = os.path.dirname(importlib.util.find_spec("cropgrad").origin)
    for folder, _, files in os.walk(root):
        for name in files:
            stem, ext = os.path.splitext(name)
            # A package's __init__ stays checked: its name prefixes modules
            # that have stubs.
            if ext != ".py" or stem == "__init__" or stem + ".pyi" in files:
                continue
            parts = os.path.relpath(os.path.join(folder, stem), root).split(os.sep)
            if any(p.startswith("_") for p in parts):
                yield ".".join(["cropgrad", *parts])


def test_stubtest():
    # From an empty directory, so that the installed package is checked.
    with tempfile.TemporaryDirectory() as tmp:
        # The adapters import JAX and PyTorch, which may be missing here;
        # their stubs are not a test dependency.
        config = os.path.join(tmp, "mypy.ini")
        with open(config, "w") as f:
            f.write("[mypy]\nignore_missing_imports = True\n")
        # The command line has no stub: its module-level names are not part
        # of the typed interface.
        allowlist = os.path.join(tmp, "allowlist.txt")
        with open(allowlist, "w") as f:
            f.write("cropgrad\\.__main__\\..*\n")
            # Cython gives every compiled module __pyx_capi__ (the table
            # cimport reads) and __test__ (for doctest): no module's interface.
            f.write("cropgrad(\\..*)?\\.(__pyx_capi__|__test__)\n")
            # A private module written in Python with no stub of its own is
            # compared only with itself, through decorators (functools.cache,
            # autograd.Function) that mypy and inspect read differently; mypy
            # still type-checks it, and a type error there fails this test.
            for module in _private_modules_without_stubs():
                f.write(module.replace(".", "\\.") + "(\\..*)?\n")
            # The adapters import only with their frameworks.
            if importlib.util.find_spec("jax") is None:
                f.write("cropgrad\\.jax\n")
            if importlib.util.find_spec("torch") is None:
                f.write("cropgrad\\.torch\ncropgrad\\._torch(\\..*)?\n")
        run = subprocess.run(
            [
                sys.executable,
                "-m",
                "mypy.stubtest",
                "cropgrad",
                "--mypy-config-file",
                config,
                "--allowlist",
                allowlist,
                "--ignore-unused-allowlist",
            ],
            cwd=tmp,
            capture_output=True,
            text=True,
            timeout=300,
            env={**os.environ, "MYPY_CACHE_DIR": os.path.join(tmp, "cache")},
        )
    assert run.returncode == 0, run.stdout + run.stderr
