"""Run the test suite against an installed cropgrad, from outside the source tree.

Usage::

    python test_wheel.py TESTS_DIR [PYTEST_ARGS...]

Run it from a directory that holds no ``cropgrad/`` source folder (cibuildwheel
copies ``test-sources`` to a temporary directory; ``verify_local.sh`` does the
same).  Before pytest starts it

- prints ``cropgrad.show_config()``, so every CI log says what was tested;
- fails if the imported cropgrad is not the installed one;
- fails if OpenMP is not active, unless ``CROPGRAD_EXPECT_SERIAL=1`` (then it
  fails if OpenMP *is* active);
- on a free-threaded interpreter, fails if importing cropgrad turned the GIL
  back on (the extension must be marked free-threading compatible).
"""

import os
import sys
import sysconfig


def _fail(message):
    print(f"test_wheel.py: FAIL: {message}", file=sys.stderr)
    sys.exit(1)


def main(argv):
    if len(argv) < 2:
        _fail(f"usage: {argv[0]} TESTS_DIR [PYTEST_ARGS...]")
    tests_dir, pytest_args = argv[1], argv[2:]

    import cropgrad

    print(f"cropgrad {cropgrad.__version__} from {os.path.dirname(cropgrad.__file__)}")
    print(f"Python {sys.version.split()[0]} on {sysconfig.get_platform()}")
    cropgrad.show_config()
    info = cropgrad.show_config(mode="dicts")

    where = os.path.realpath(cropgrad.__file__)
    site_dirs = {
        os.path.realpath(sysconfig.get_paths()[key]) for key in ("platlib", "purelib")
    }
    if not any(where.startswith(d + os.sep) for d in site_dirs):
        _fail(f"cropgrad was imported from {where}, not from {sorted(site_dirs)}")

    expect_serial = os.environ.get("CROPGRAD_EXPECT_SERIAL", "0").strip() not in (
        "",
        "0",
    )
    if expect_serial and info["openmp"]:
        _fail("CROPGRAD_EXPECT_SERIAL=1 but this cropgrad was built with OpenMP")
    if not expect_serial and not info["openmp"]:
        _fail("this cropgrad was built without OpenMP (show_config: openmp False)")

    if sysconfig.get_config_var("Py_GIL_DISABLED") and "PYTHON_GIL" not in os.environ:
        if sys._is_gil_enabled():
            _fail(
                "importing cropgrad turned the GIL back on: the extension is "
                "not marked free-threading compatible"
            )
        print("free-threaded interpreter: the GIL is still off after import")

    import pytest

    return pytest.main([tests_dir, "-p", "no:cacheprovider", *pytest_args])


if __name__ == "__main__":
    sys.exit(main(sys.argv))
