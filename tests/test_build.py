"""How the installed extension was built: OpenMP, floating-point flags, free threading.

A release wheel must run in parallel and round like every other platform.
These tests fail on a build that silently lost OpenMP (the ``auto`` mode of
``setup.py`` falls back to a serial extension with only a warning) unless the
serial build was asked for: set ``CROPGRAD_EXPECT_SERIAL=1`` to test a
``CROPGRAD_OPENMP=0`` build, which must then really be serial.
"""

import os
import subprocess
import sys
import sysconfig

import pytest

import cropgrad

CONFIG = cropgrad.show_config(mode="dicts")
EXPECT_SERIAL = os.environ.get("CROPGRAD_EXPECT_SERIAL", "0").strip() not in ("", "0")


def _default_threads_in_child(omp_num_threads):
    """``default_threads`` of this same cropgrad in a fresh process."""
    env = dict(os.environ, OMP_NUM_THREADS=str(omp_num_threads))
    package_parent = os.path.dirname(os.path.dirname(os.path.abspath(cropgrad.__file__)))
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (package_parent, env.get("PYTHONPATH")) if p
    )
    code = "import cropgrad; print(cropgrad.show_config(mode='dicts')['default_threads'])"
    # -P: the working directory may hold the cropgrad source folder.
    result = subprocess.run(
        [sys.executable, "-P", "-c", code], env=env,
        capture_output=True, text=True, timeout=120, check=True,
    )
    return int(result.stdout.strip())


@pytest.mark.skipif(EXPECT_SERIAL, reason="CROPGRAD_EXPECT_SERIAL=1: a serial build")
def test_built_with_openmp():
    assert CONFIG["openmp"] is True, (
        "cropgrad was built without OpenMP and runs on one thread only. Build it "
        "with a compiler that supports OpenMP (on macOS: libomp) and "
        "CROPGRAD_OPENMP=required, or set CROPGRAD_EXPECT_SERIAL=1 to test a "
        "serial build on purpose."
    )


@pytest.mark.skipif(EXPECT_SERIAL, reason="CROPGRAD_EXPECT_SERIAL=1: a serial build")
def test_openmp_runtime_sizes_the_default_team():
    # Compiled with OpenMP is not enough: the runtime must load and follow
    # OMP_NUM_THREADS (a fresh process, so no thread limit of this one applies).
    assert _default_threads_in_child(3) == 3


@pytest.mark.skipif(not EXPECT_SERIAL, reason="only for CROPGRAD_EXPECT_SERIAL=1")
def test_serial_build_is_serial():
    assert CONFIG["openmp"] is False
    assert "openmp" not in CONFIG["cflags"]
    assert _default_threads_in_child(3) == 1


def test_no_contraction_and_no_fast_math():
    # TensorFlow's bits need every float32 product rounded on its own: no
    # fused multiply-add, no fast-math, no CPU-specific code in a wheel.
    cflags = CONFIG["cflags"].split()
    if cflags == ["unknown"]:
        pytest.skip("built without setup.py's flags record")
    if any(flag.startswith("/") for flag in cflags):  # MSVC
        assert "/fp:precise" in cflags
        assert "/fp:fast" not in cflags
        return
    assert "-ffp-contract=off" in cflags
    for bad in ("-ffast-math", "-Ofast", "-march=native", "-mfma", "-mavx2"):
        assert bad not in cflags


@pytest.mark.skipif(
    not sysconfig.get_config_var("Py_GIL_DISABLED"),
    reason="not a free-threaded interpreter",
)
@pytest.mark.skipif("PYTHON_GIL" in os.environ, reason="PYTHON_GIL set by hand")
def test_free_threaded_interpreter_keeps_the_gil_off():
    # Importing an extension that is not marked free-threading compatible
    # turns the GIL back on for the whole process.
    assert not sys._is_gil_enabled()
