"""Fixtures of the test suite, and the rule on skips; its helpers are in
tests/_helpers.py.

Under ``CI=true`` a skipped test is a failure unless its reason matches one
of ``ACCEPTED_SKIPS``: a skip nobody reads is a check that silently stopped
running.  The list is printed at the end of such a run, with the skips it
accepted.

``CROPGRAD_UNREQUIRED_SKIPS=FILE`` writes the ids of the test functions (or
modules) skipped because something this run does not require is missing,
one a line, so that a second run with the frameworks installed runs them
(``.ci/run``: the README's test command first, as written, then the rest).
"""

import os
import re

import numpy as np
import pytest
from _helpers import REQUIRE_VARIABLES, env_flag, required

CI = env_flag("CI")

# The reason of every skip for something a run does not require
# (_helpers.unrequired).
NOT_REQUIRED = r".*\(not required: (?P<variable>CROPGRAD_REQUIRE_[A-Z]+) is not set\)"

# (why CI accepts it, the reasons it covers).  A skip for something a run
# may lack on purpose goes through _helpers.missing(), whose reason names
# the CROPGRAD_REQUIRE_* variable that turns it into a failure.
ACCEPTED_SKIPS = (
    ("an instruction set this CPU does not run", r"this CPU lacks \S+"),
    (
        "a mode this platform cannot set",
        r"no flush-to-zero control on this architecture"
        r"|the flush-to-zero mode cannot be set here",
    ),
    (
        "a clone this CPU or platform does not have",
        r"no F16C clone here \(not x86-64, or a CPU without F16C\)",
    ),
    ("Linux-only facilities", r"uses RLIMIT_AS|MADV_HUGEPAGE is Linux's"),
    ("a type this platform does not have", r"longdouble is float64 on this platform"),
    ("a setting only GNU OpenMP shows", r"the spin count is GNU OpenMP's"),
    (
        "the other kind of interpreter",
        r"not a free-threaded interpreter|no GIL: nothing holds this thread back",
    ),
    (
        "the other kind of build (CROPGRAD_EXPECT_SERIAL)",
        r"CROPGRAD_EXPECT_SERIAL=1: a serial build"
        r"|only for CROPGRAD_EXPECT_SERIAL=1"
        r"|a serial build starts no workers"
        r"|serial build: there is no OpenMP runtime to limit",
    ),
    (
        "a sanitizer's address space",
        r"AddressSanitizer's shadow memory needs more address space",
    ),
    (
        "the wheels' tests run from a copy of tests/ only",
        r"the (documentation|source tree) is not beside the tests",
    ),
    (
        "not required in this run (" + ", ".join(REQUIRE_VARIABLES) + " unset)",
        NOT_REQUIRED,
    ),
    (
        "timing checks are opt-in (CROPGRAD_TIMING_TESTS=1)",
        r"a timing check: set CROPGRAD_TIMING_TESTS=1 to run it",
    ),
)
_ACCEPTED = [(why, re.compile(pattern)) for why, pattern in ACCEPTED_SKIPS]


def accepted_skip(reason):
    """Why CI accepts a skip with `reason` (None: it does not)."""
    reason = reason.removeprefix("Skipped: ")
    for why, pattern in _ACCEPTED:
        match = pattern.fullmatch(reason)
        if match is None:
            continue
        # "Not required" only while the variable it names is not set.
        variable = match.groupdict().get("variable")
        if variable and (variable not in REQUIRE_VARIABLES or required(variable)):
            return None
        return why
    return None


def _skip_reason(report):
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2])
    return str(longrepr)


_accepted_seen = []
_unrequired_seen = []
_NOT_REQUIRED = re.compile(NOT_REQUIRED)


def _judge(report):
    """Turn an unaccepted skip of a CI run into a failure."""
    if not report.skipped or hasattr(report, "wasxfail"):
        return
    reason = _skip_reason(report)
    if _NOT_REQUIRED.fullmatch(reason.removeprefix("Skipped: ")):
        # Without its parameters: they may differ once the framework is there
        # (a test parameterised over PyTorch's dtypes has none without it).
        _unrequired_seen.append(report.nodeid.split("[", 1)[0])
    if not CI:
        return
    why = accepted_skip(reason)
    if why is not None:
        _accepted_seen.append((report.nodeid, reason, why))
        return
    report.outcome = "failed"
    report.longrepr = (
        f"skipped under CI=true, and the reason is not in conftest.py's "
        f"ACCEPTED_SKIPS: {reason}"
    )


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    _judge(outcome.get_result())


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    outcome = yield
    _judge(outcome.get_result())


def pytest_sessionfinish(session):
    path = os.environ.get("CROPGRAD_UNREQUIRED_SKIPS")
    if path:
        with open(path, "w", encoding="utf-8") as file:
            file.writelines(f"{nodeid}\n" for nodeid in dict.fromkeys(_unrequired_seen))


def pytest_terminal_summary(terminalreporter):
    if not CI:
        return
    write = terminalreporter.write_line
    terminalreporter.section("skips CI accepts (CI=true; tests/conftest.py)")
    for why, pattern in ACCEPTED_SKIPS:
        write(f"- {why}: {pattern}")
    write(f"accepted in this run: {len(_accepted_seen)}")
    for nodeid, reason, why in _accepted_seen:
        write(f"  {nodeid}: {reason.removeprefix('Skipped: ')} [{why}]")


@pytest.fixture(
    params=[np.float32, np.float64, np.float16], ids=lambda t: np.dtype(t).name
)
def out_dtype(request):
    """Every output dtype of the image gradient."""
    return np.dtype(request.param)


@pytest.fixture
def x64():
    """JAX's float64 and int64 arrays for the test's duration."""
    import jax

    with jax.enable_x64(True):
        yield
