"""The C-level API's fuzz target (fuzz_capi.py) in a subprocess, for a bounded time.

``CROPGRAD_FUZZ_CAPI_SECONDS`` (default 20) sets the time, and
``CROPGRAD_FUZZ_CAPI_SEED`` repeats a run.  A crash is a test failure that
names the seed of the case that killed the child (``--replay SEED``).  The
floor on executions is modest (a slow emulated machine still makes it);
how many a run makes is printed.
"""

import json
import os
import random
import signal
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
TARGET = os.path.join(HERE, "fuzz_capi.py")
SECONDS = float(os.environ.get("CROPGRAD_FUZZ_CAPI_SECONDS", "20"))


@pytest.mark.slow  # a fuzz run of SECONDS
def test_fuzz_capi(tmp_path):
    seed = int(os.environ.get("CROPGRAD_FUZZ_CAPI_SEED", random.randrange(2**32)))
    crash_file = tmp_path / "seed.txt"
    proc = subprocess.run(
        [sys.executable, "-P", "-X", "faulthandler", TARGET, "--seconds",
         str(SECONDS), "--seed", str(seed), "--crash-file", str(crash_file)],
        capture_output=True,
        text=True,
        timeout=SECONDS * 10 + 120,
        cwd=tmp_path,
    )  # fmt: skip
    if proc.returncode < 0:
        raise AssertionError(
            f"the fuzz target crashed ({signal.Signals(-proc.returncode).name}) on "
            f"seed {crash_file.read_text()} (replay: python -P tests/fuzz_capi.py "
            f"--replay SEED):\n{proc.stderr[-4000:]}"
        )
    assert proc.stdout, proc.stderr[-4000:]
    summary = json.loads(proc.stdout.splitlines()[-1])
    print(f"fuzz_capi: {summary['executions']} executions in {summary['seconds']} s")
    assert proc.returncode == 0 and summary["failure_count"] == 0, summary
    assert summary["executions"] >= 100, summary
