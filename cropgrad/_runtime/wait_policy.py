"""How long idle OpenMP workers spin after a call (imported first).

After a parallel region OpenMP's workers spin before they sleep, in case
another region follows.  GNU OpenMP's default (300,000 spins, about 3 ms of
a core here) takes a core from whatever the caller runs next.  GNU OpenMP
reads its spin count once, from ``GOMP_SPINCOUNT``, when the library loads,
and offers no call to change it later.  So, unless the user chose a policy
(``OMP_WAIT_POLICY``, ``GOMP_SPINCOUNT`` or ``KMP_BLOCKTIME`` set), this
module sets ``GOMP_SPINCOUNT`` while cropgrad's compiled modules load and
removes it again (`loading`).  The wheels bundle their own copy of the
runtime, so only cropgrad's workers are affected; where the runtime is
shared (a build against the system's libgomp that another library loaded
first) the setting has no effect, or it applies to that shared runtime.
LLVM's OpenMP (macOS wheels) is set per call instead, in the parallel
driver (``kmp_set_blocktime(0)``).
"""

import contextlib
import os

# Spins before a worker sleeps: about 0.1 ms of a core, yet still long
# enough that back-to-back calls find their workers awake.
SPIN_COUNT = "10000"
USER_VARIABLES = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "KMP_BLOCKTIME")

user_policy = any(name in os.environ for name in USER_VARIABLES)


@contextlib.contextmanager
def loading():
    """Set the spin count while the OpenMP runtime loads, then restore."""
    if user_policy:
        yield
        return
    os.environ["GOMP_SPINCOUNT"] = SPIN_COUNT
    try:
        yield
    finally:
        os.environ.pop("GOMP_SPINCOUNT", None)
