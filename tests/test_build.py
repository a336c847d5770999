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


@pytest.mark.skipif(EXPECT_SERIAL, reason="CROPGRAD_EXPECT_SERIAL=1: a serial build")
def test_built_with_openmp():
    assert CONFIG["openmp"] is True, (
        "cropgrad was built without OpenMP and runs on one thread only. Build it "
        "with a compiler that supports OpenMP (on macOS: libomp) and "
        "CROPGRAD_OPENMP=required, or set CROPGRAD_EXPECT_SERIAL=1 to test a "
        "serial build on purpose."
    )


@pytest.mark.skipif(not EXPECT_SERIAL, reason="only for CROPGRAD_EXPECT_SERIAL=1")
def test_serial_build_is_serial():
    # test_config.py checks that OMP_NUM_THREADS is then ignored.
    assert CONFIG["openmp"] is False
    assert "openmp" not in CONFIG["cflags"]
    assert CONFIG["default_threads"] == 1


def test_no_fast_math_and_no_cpu_specific_code():
    # A wheel runs on any CPU of its architecture and must round like every
    # other wheel (test_config.py checks -ffp-contract=off).
    cflags = CONFIG["cflags"].split()
    for bad in (
        "-ffast-math",
        "-Ofast",
        "-march=native",
        "-mtune=native",
        "-mfma",
        "-mavx",
        "-mavx2",
        "-mavx512f",
        "/fp:fast",
        "/arch:AVX2",
    ):
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
