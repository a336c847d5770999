"""OpenMP workers do not keep spinning after a call (unless the user asks).

After a parallel region OpenMP's workers spin for a while before they
sleep, taking a core from whatever the caller runs next.  cropgrad shortens
that wait, unless the user set a wait policy of their own.  What is checked
is the runtime's setting (GNU OpenMP displays the spin count it loaded
with); the CPU time idle workers burn is measured only on request
(``CROPGRAD_TIMING_TESTS=1``): on a loaded machine a clock says little.
"""

import os
import time

import numpy as np
import pytest
from _helpers import env_flag, run_python

import cropgrad
from cropgrad._runtime import parallel as _parallel
from cropgrad._runtime import wait_policy as _wait_policy

OPENMP = cropgrad.show_config("dicts")["openmp"]
USER_POLICY = any(
    name in os.environ
    for name in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "KMP_BLOCKTIME")
)


def _threaded_call():
    rng = np.random.default_rng(0)
    grads = rng.standard_normal((64, 14, 14, 64)).astype(np.float32)
    boxes = np.sort(rng.uniform(0, 1, (64, 4)), axis=1).astype(np.float32)
    box_ind = rng.integers(0, 2, 64)
    cropgrad.crop_and_resize_grad_image(
        grads, boxes, box_ind, [2, 40, 40, 64], num_threads=2
    )


THREADED_CALL = """
import numpy as np, cropgrad
rng = np.random.default_rng(0)
grads = rng.standard_normal((64, 14, 14, 64)).astype(np.float32)
boxes = np.sort(rng.uniform(0, 1, (64, 4)), axis=1).astype(np.float32)
cropgrad.crop_and_resize_grad_image(grads, boxes, rng.integers(0, 2, 64),
                                    [2, 40, 40, 64], num_threads=2)
from cropgrad._runtime import parallel
assert parallel.last_team() == 2
"""


@pytest.mark.skipif(not OPENMP, reason="a serial build starts no workers")
@pytest.mark.skipif(USER_POLICY, reason="the user chose an OpenMP wait policy")
def test_the_runtime_loads_with_a_short_spin_count():
    # GNU OpenMP reads GOMP_SPINCOUNT once, when it loads, and shows what it
    # read under OMP_DISPLAY_ENV=verbose.
    env = {k: v for k, v in os.environ.items() if k not in _wait_policy.USER_VARIABLES}
    env["OMP_DISPLAY_ENV"] = "verbose"
    run = run_python("-c", THREADED_CALL, env=env, timeout=120)
    assert run.returncode == 0, run.stderr
    assert "OPENMP DISPLAY ENVIRONMENT BEGIN" in run.stderr, run.stderr
    if "GOMP_SPINCOUNT" not in run.stderr:
        # LLVM's runtime (macOS) gets kmp_set_blocktime(0) before each team.
        pytest.skip("the spin count is GNU OpenMP's")
    assert f"GOMP_SPINCOUNT = '{_wait_policy.SPIN_COUNT}'" in run.stderr, run.stderr


@pytest.mark.skipif(not OPENMP, reason="a serial build starts no workers")
@pytest.mark.skipif(USER_POLICY, reason="the user chose an OpenMP wait policy")
def test_no_cpu_is_burnt_after_a_threaded_call():
    if not env_flag("CROPGRAD_TIMING_TESTS"):
        pytest.skip("a timing check: set CROPGRAD_TIMING_TESTS=1 to run it")
    assert _parallel.shortens_wait()
    burnt = []
    for _ in range(5):
        _threaded_call()
        start = time.process_time()
        time.sleep(0.1)
        burnt.append(time.process_time() - start)
    # Spinning workers burn milliseconds of CPU here (about 3 ms with GNU
    # OpenMP's default spin count); after a short wait about 0.1 ms.
    assert np.median(burnt) < 1e-3, burnt


@pytest.mark.parametrize(
    "variable, value", [("OMP_WAIT_POLICY", "active"), ("GOMP_SPINCOUNT", "10000")]
)
def test_a_users_wait_policy_is_respected(variable, value):
    env = {**os.environ, variable: value}
    code = (
        "import os, cropgrad; from cropgrad._runtime import parallel as _parallel; "
        f"print(_parallel.shortens_wait(), os.environ.get({variable!r}))"
    )
    run = run_python("-c", code, env=env, timeout=120)
    assert run.returncode == 0, run.stderr
    # Not shortened, and the user's variable is still there.
    assert run.stdout.split() == ["False", value]


def test_the_environment_is_left_as_it_was():
    code = "import os, cropgrad; print('GOMP_SPINCOUNT' in os.environ)"
    env = {k: v for k, v in os.environ.items() if k != "GOMP_SPINCOUNT"}
    run = run_python("-c", code, env=env, timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "False"
