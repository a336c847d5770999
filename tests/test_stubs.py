"""The type stubs describe the installed package (mypy's stubtest)."""

import importlib.util
import os
import subprocess
import sys
import tempfile


def test_stubtest():
    # From an empty directory, so that the installed package is checked.
    with tempfile.TemporaryDirectory() as tmp:
        # The benchmark imports TensorFlow and matplotlib lazily, when they
        # are installed; their stubs are not a test dependency.
        config = os.path.join(tmp, "mypy.ini")
        with open(config, "w") as f:
            f.write("[mypy]\nignore_missing_imports = True\n")
        # The command line has no stub: its module-level names are not part
        # of the typed interface.
        allowlist = os.path.join(tmp, "allowlist.txt")
        with open(allowlist, "w") as f:
            f.write("cropgrad\\.__main__\\..*\n")
            # The adapters and their benchmark rows import only with their
            # frameworks.
            if importlib.util.find_spec("jax") is None:
                f.write("cropgrad\\.jax\ncropgrad\\._bench\\.jax_rows\n")
            if importlib.util.find_spec("torch") is None:
                f.write(
                    "cropgrad\\.torch\ncropgrad\\._torch(\\..*)?\n"
                    "cropgrad\\._bench\\.torch_rows\n"
                )
        run = subprocess.run(
            [
                sys.executable,
                "-m",
                "mypy.stubtest",
                "cropgrad",
                "--ignore-missing-stub",
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
