"""How the installed extension was built: OpenMP, floating-point flags, free threading.

A release wheel must run in parallel and round like every other platform.
These tests fail on a build that silently lost OpenMP (the ``auto`` mode of
``setup.py`` falls back to a serial extension with only a warning) unless the
serial build was asked for: set ``CROPGRAD_EXPECT_SERIAL=1`` to test a
``CROPGRAD_OPENMP=0`` build, which must then really be serial.
"""

import os
import sys
import sysconfig

import pytest

import cropgrad

CONFIG = cropgrad.show_config(mode="dicts")
EXPECT_SERIAL = os.environ.get("CROPGRAD_EXPECT_SERIAL", "0").strip() not in ("", "0")


def _usable_cpus():
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


@pytest.mark.skipif(EXPECT_SERIAL, reason="CROPGRAD_EXPECT_SERIAL=1: a serial build")
def test_built_with_openmp():
    assert CONFIG["openmp"] is True, (
        "cropgrad was built without OpenMP and runs on one thread only. Build it "
        "with a compiler that supports OpenMP (on macOS: libomp) and "
        "CROPGRAD_OPENMP=required, or set CROPGRAD_EXPECT_SERIAL=1 to test a "
        "serial build on purpose."
    )


@pytest.mark.skipif(EXPECT_SERIAL, reason="CROPGRAD_EXPECT_SERIAL=1: a serial build")
@pytest.mark.skipif(
    _usable_cpus() < 2 or "OMP_NUM_THREADS" in os.environ,
    reason="one CPU, or OMP_NUM_THREADS sets the default thread count",
)
def test_default_thread_count_uses_the_cpus():
    # Compiled with OpenMP but defaulting to one thread would be a runtime
    # that does not work (or a stray OMP_NUM_THREADS, excluded above).
    assert CONFIG["default_threads"] > 1


@pytest.mark.skipif(not EXPECT_SERIAL, reason="only for CROPGRAD_EXPECT_SERIAL=1")
def test_serial_build_is_serial():
    assert CONFIG["openmp"] is False
    assert CONFIG["default_threads"] == 1
    assert "openmp" not in CONFIG["cflags"]


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
