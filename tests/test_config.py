"""show_config, __version__ and the default thread count."""

import os
import subprocess
import sys

import numpy as np
import pytest
from threadpoolctl import threadpool_info, threadpool_limits

import cropgrad


def test_version_and_config():
    assert cropgrad.__version__.count(".") >= 2
    info = cropgrad.show_config(mode="dicts")
    for key in (
        "version",
        "openmp",
        "compiler",
        "cflags",
        "default_threads",
        "flush_denormals_supported",
        "simd",
    ):
        assert key in info
    assert "-ffp-contract=off" in info["cflags"] or info["compiler"] == "msvc"
    assert "fast-math" not in info["cflags"].replace("-fno-fast-math", "")
    assert info["default_threads"] >= 1
    with pytest.raises(ValueError, match="mode"):
        cropgrad.show_config(mode="yaml")


def test_show_config_prints(capsys):
    assert cropgrad.show_config() is None
    assert "openmp" in capsys.readouterr().out


def test_omp_num_threads_sets_the_default():
    code = (
        "import cropgrad; print(cropgrad.show_config(mode='dicts')['default_threads'])"
    )
    env = {**os.environ, "OMP_NUM_THREADS": "3"}
    out = subprocess.run(
        [sys.executable, "-P", "-c", code],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    expected = 3 if cropgrad.show_config(mode="dicts")["openmp"] else 1
    assert int(out.stdout) == expected


def test_threadpoolctl_limits_the_default():
    if not cropgrad.show_config(mode="dicts")["openmp"]:
        pytest.skip("serial build: there is no OpenMP runtime to limit")
    cropgrad.crop_and_resize_grad_image(
        np.ones((1, 1, 1, 1)), [[0, 0, 1, 1]], [0], [1, 2, 2, 1]
    )
    assert any(lib["user_api"] == "openmp" for lib in threadpool_info())
    with threadpool_limits(limits=1, user_api="openmp"):
        assert cropgrad.show_config(mode="dicts")["default_threads"] == 1
