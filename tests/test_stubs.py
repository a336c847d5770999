"""The type stubs describe the installed package (mypy's stubtest)."""

import os
import subprocess
import sys
import tempfile


def test_stubtest():
    # From an empty directory, so that the installed package is checked.
    with tempfile.TemporaryDirectory() as tmp:
        run = subprocess.run(
            [sys.executable, "-m", "mypy.stubtest", "cropgrad", "--ignore-missing-stub"],
            cwd=tmp, capture_output=True, text=True, timeout=300,
            env={**os.environ, "MYPY_CACHE_DIR": os.path.join(tmp, "cache")},
        )
    assert run.returncode == 0, run.stdout + run.stderr
