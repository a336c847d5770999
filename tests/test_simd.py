"""Every instruction set of the inner loops gives the same bits.

The image gradient's loops over deep and shallow pixels, the boxes
gradient's terms, the NCHW kernels' plane transposes and RoIAlign's
channel loops have clones for wider vectors (x86-64: AVX2 and AVX-512F
beside the SSE2 baseline; AArch64: NEON beside the scalar portable code),
chosen at import by what the CPU runs, or by ``CROPGRAD_SIMD``.
Each lane does the scalar arithmetic of one channel, without contraction,
and the transposes only move floats, so the TensorFlow fixtures and the
thread-count checks must pass unchanged on every target this CPU runs.
"""

import os
import platform
import subprocess
import sys

import pytest
from _helpers import run_python

from cropgrad._runtime import simd as _simd

HERE = os.path.dirname(os.path.abspath(__file__))
# The targets this CPU runs, and every target of its architecture: one the
# CPU lacks is a skip that says so (CI accepts it: conftest.py).
TARGETS = _simd.simd_targets()
MACHINE = platform.machine().lower()
ARCH_TARGETS = {
    "x86_64": ["sse2", "avx2", "avx512"],
    "amd64": ["sse2", "avx2", "avx512"],
    "aarch64": ["baseline", "neon"],
    "arm64": ["baseline", "neon"],
}.get(MACHINE, TARGETS[:1])

# The image-gradient tests that exercise the deep scatter's bits.
SELECTION = (
    "tensorflow_bits or matches_numpy_reference or same_bits_for_any_thread_count "
    "or non_finite_gradients or large_overlapping or grad_image_big_problems "
    "or out_at_any_offset_in_a_cache_line "
    "or tall_boxes or forward_and_boxes_gradient_big_problems "
    # Pixels of 1 to 4 channels (cg_shallow.h).
    "or enlarging_crops_of_shallow_images "
    "or image_dtypes_are_read_as_float32 "
    # RoIAlign: torchvision's bits, and the tiles against the planes.
    "or torchvision_bits or every_thread_count_gives_the_same_bits "
    "or references_bits or jvps_transpose or tiles"
)


def test_baseline_is_always_there():
    assert TARGETS and TARGETS[0] in ("sse2", "baseline")
    assert _simd.simd_target() in TARGETS
    # What the CPU runs is a prefix of its architecture's targets.
    assert TARGETS == ARCH_TARGETS[: len(TARGETS)], (TARGETS, ARCH_TARGETS)


def test_neon_exactly_on_aarch64():
    # Every AArch64 CPU has NEON, the default there; "baseline" is the
    # portable (scalar) code.  No other CPU offers it.
    if platform.machine().lower() in ("aarch64", "arm64"):
        assert TARGETS == ["baseline", "neon"]
        if os.environ.get("CROPGRAD_SIMD", "auto") in ("", "auto"):
            assert _simd.simd_target() == "neon"
    else:
        assert "neon" not in TARGETS


@pytest.mark.slow  # a fresh interpreter and the fixture suite per target
@pytest.mark.parametrize("target", ARCH_TARGETS)
def test_fixtures_on_every_target(target):
    if target not in TARGETS:
        pytest.skip(f"this CPU lacks {target}")
    env = {**os.environ, "CROPGRAD_SIMD": target}
    probe = subprocess.run(
        [
            sys.executable,
            "-P",
            "-c",
            "from cropgrad._runtime import simd as s; print(s.simd_target())",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert probe.stdout.strip() == target, probe.stderr
    run = subprocess.run(
        [
            sys.executable,
            "-P",
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            os.path.join(HERE, "test_grad_image.py"),
            # The boxes gradient's terms.
            os.path.join(HERE, "test_forward_and_boxes.py"),
            # NCHW: the tiles' corner loop, and the transposes of all three ops.
            os.path.join(HERE, "test_nchw.py"),
            os.path.join(HERE, "test_roi_align.py"),
            os.path.join(HERE, "test_roi_align_boxes.py"),
            os.path.join(HERE, "test_roi_align_tiles.py"),
            "-k",
            SELECTION,
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=1200,
        cwd=HERE,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    assert " passed" in run.stdout.splitlines()[-1]


@pytest.mark.parametrize(
    "first",
    [
        "_kernels.crop_and_resize.forward_nchw",
        "_kernels.crop_and_resize.grad_boxes",
        "_kernels.crop_and_resize.grad_image",
        "_kernels.roi_align.grad_boxes",
        "capi",
    ],
)
def test_chosen_whichever_module_is_imported_first(first):
    # The choice is the runtime's, read by each kernel module when it is
    # imported, whichever module a program imports first.
    env = {**os.environ, "CROPGRAD_SIMD": TARGETS[0]}
    run = subprocess.run(
        [
            sys.executable,
            "-P",
            "-c",
            f"import sys, cropgrad.{first}; print(sys.modules['cropgrad._runtime.simd']"
            ".simd_target())",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert run.stdout.strip() == TARGETS[0], run.stderr


def test_unknown_target_is_refused_at_import():
    env = {**os.environ, "CROPGRAD_SIMD": "no-such-isa"}
    run = run_python("-c", "import cropgrad", env=env, timeout=120)
    assert run.returncode != 0
    assert "CROPGRAD_SIMD" in run.stderr
