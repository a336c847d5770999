"""The machine-dependent sizes: read from the caches, and never in the bits."""

import subprocess
import sys
import textwrap

import numpy as np
import pytest
from _helpers import on_team, starting_teams, team_of

import cropgrad
from cropgrad._kernels.crop_and_resize import forward_nchw as _forward_nchw
from cropgrad._kernels.crop_and_resize import grad_image as _grad_image
from cropgrad._runtime import tuning as _tuning


def _fake_cache(root, index, level, kind, size, shared):
    d = root / f"index{index}"
    d.mkdir()
    (d / "level").write_text(f"{level}\n")
    (d / "type").write_text(f"{kind}\n")
    (d / "size").write_text(f"{size}\n")
    (d / "shared_cpu_list").write_text(f"{shared}\n")


def test_read_caches_from_sysfs(tmp_path):
    _fake_cache(tmp_path, 0, 1, "Data", "48K", "0")
    _fake_cache(tmp_path, 1, 1, "Instruction", "32K", "0")
    _fake_cache(tmp_path, 2, 2, "Unified", "1024K", "0")
    _fake_cache(tmp_path, 3, 3, "Unified", "32768K", "0-7,16-23")
    caches = _tuning.read_caches(str(tmp_path))
    assert caches == {1: (48 << 10, 1), 2: (1 << 20, 1), 3: (32 << 20, 16)}
    assert _tuning.cache_sizes(caches) == (1 << 20, 2 << 20)


def test_unknown_caches_give_the_defaults():
    assert _tuning.cache_sizes({}) == (_tuning.DEFAULT_L2, _tuning.DEFAULT_L3_SHARE)
    # The defaults keep the sizes first measured on a 2 MiB-L2 machine.
    assert _tuning.choose(*_tuning.cache_sizes({})) == {
        "band_bytes": 1 << 20,
        "tasks_per_thread": 4,
        "prefetch_bytes": 2048,
        "prefetch_min_depth": 128,
        "tile_bytes": 1 << 20,
    }


def test_small_l2_bands_follow_the_l3_share():
    sizes = _tuning.choose(1 << 20, 16 << 20)
    assert sizes["band_bytes"] == 4 << 20
    assert sizes["tasks_per_thread"] == 1
    assert sizes["prefetch_min_depth"] < 64
    # A tiny L3 share still leaves bands of at least half the L2.
    assert _tuning.choose(1 << 20, 256 << 10)["band_bytes"] == 512 << 10


def test_results_stream_past_the_last_level_cache():
    caches = {1: (48 << 10, 1), 2: (1 << 20, 1), 3: (32 << 20, 16)}
    assert _tuning.stream_bytes(caches) == 32 << 20
    assert _tuning.stream_bytes({2: (2 << 20, 1)}) == 2 << 20
    assert _tuning.stream_bytes({}) == 32 << 20
    assert _tuning.stream_bytes({1: (32 << 10, 1)}) == 32 << 20
    # A virtual machine's report of its host's L3: at most 32 MiB.
    assert _tuning.stream_bytes({3: (480 << 20, 2)}) == 32 << 20
    assert _tuning.stream_bytes({3: (16 << 20, 8)}) == 16 << 20
    saved = _forward_nchw.use_stream_bytes(0)
    assert saved == _tuning.stream_bytes()
    assert _forward_nchw.use_stream_bytes(saved) == 0


def test_in_use_sizes_are_this_machines():
    assert _grad_image.tuning() == {
        k: v for k, v in _tuning.tuning().items() if k not in ("l2", "l3_share")
    }


# The choices of both kinds of machine, and extremes: one-row bands, one band
# for everything, a prefetch for every depth or none.
TUNINGS = [
    _tuning.choose(2 << 20, 2 << 20),
    _tuning.choose(1 << 20, 16 << 20),
    dict(
        band_bytes=1,
        tasks_per_thread=4,
        prefetch_bytes=64,
        prefetch_min_depth=1,
        tile_bytes=1,
    ),
    dict(
        band_bytes=1 << 40,
        tasks_per_thread=1,
        prefetch_bytes=1 << 16,
        prefetch_min_depth=1 << 20,
        tile_bytes=1 << 40,
    ),
]


@pytest.fixture
def restore_tuning():
    saved = _grad_image.tuning()
    yield
    _grad_image.use_tuning(saved)


@pytest.mark.parametrize("depth", [3, 20, 64, 130])
def test_same_bits_for_every_tuning_and_thread_count(depth, restore_tuning):
    # Infinite and NaN gradients make NaNs whose bits depend on the
    # instructions: the bits must not depend on the bands, the prefetch or
    # the threads.
    rng = np.random.default_rng(depth)
    n, crop, size = 30, (9, 8), [2, 24, 13, depth]
    grads = rng.standard_normal((n, *crop, depth)).astype(np.float32)
    pick = rng.random(grads.shape)
    grads[pick < 0.03] = np.inf
    grads[pick > 0.97] = -np.inf
    grads[(pick > 0.5) & (pick < 0.51)] = np.nan
    y1, x1 = rng.uniform(-0.2, 0.8, (2, n))
    h, w = rng.uniform(0.05, 0.6, (2, n))
    boxes = np.stack([y1, x1, y1 + h, x1 + w], axis=1).astype(np.float32)
    box_ind = rng.integers(0, 2, n).astype(np.int32)
    grads_nchw = np.ascontiguousarray(grads.transpose(0, 3, 1, 2))
    size_nchw = [size[0], size[3], size[1], size[2]]
    for dtype in ("float32", "float64", "float16"):
        nhwc, nchw = [], []
        for sizes in TUNINGS:
            _grad_image.use_tuning(sizes)
            for threads in (1, 2, 3):
                # 48 rows: tasks for every team asked for, however small
                # the work.
                nhwc.append(
                    on_team(
                        threads,
                        threads,
                        lambda t=threads: cropgrad.crop_and_resize_grad_image(
                            grads, boxes, box_ind, size, dtype, num_threads=t
                        ),
                    )
                )
                result = on_team(
                    threads,
                    threads,
                    lambda t=threads: cropgrad.crop_and_resize_grad_image(
                        grads_nchw,
                        boxes,
                        box_ind,
                        size_nchw,
                        dtype,
                        num_threads=t,
                        data_format="NCHW",
                    ),
                )
                nchw.append(np.ascontiguousarray(result.transpose(0, 2, 3, 1)))
        assert np.isnan(nhwc[0]).any()
        for results in (nhwc, nchw):
            for other in results[1:]:
                assert other.tobytes() == results[0].tobytes(), dtype
        # Across layouts the same values; which of two NaNs meeting in one
        # addition survives is the compiler's choice of operand order
        # (docs/semantics.md), so NaN bits are compared within a layout.
        np.testing.assert_array_equal(nchw[0], nhwc[0])


def test_float16_scratch_is_per_band_not_per_image():
    # The float32 accumulator of a float16 output is one band per thread:
    # a 32 MiB float16 result needs far less than the 64 MiB of a float32
    # image of scratch (peak resident memory of a child process).
    child = textwrap.dedent("""
        import resource, numpy as np, cropgrad
        from cropgrad._kernels.crop_and_resize import grad_image as _grad_image
        sizes = _grad_image.tuning()
        _grad_image.use_tuning(dict(sizes, band_bytes=1 << 20))
        size = [1, 1024, 1024, 16]
        out = np.ones(size, np.float16)
        grads = np.ones((4, 8, 8, 16), np.float32)
        boxes = np.array([[0, 0, 1, 1], [0.1, 0.2, 0.3, 0.4]] * 2, np.float32)
        box_ind = np.zeros(4, np.int32)
        G = cropgrad.crop_and_resize_grad_image
        G(grads, boxes, box_ind, [1, 8, 8, 16], np.float16, num_threads=2)
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        G(grads, boxes, box_ind, size, np.float16, out=out, num_threads=2)
        after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        assert out.any() and not out[0, 1000].any()
        print((after - before) * 1024)
    """)
    done = subprocess.run(
        [sys.executable, "-P", "-c", child], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    grown = int(done.stdout.split()[-1])
    assert grown < 16 << 20, grown


def test_float16_bands_of_one_row_on_more_threads_than_rows(restore_tuning):
    # One-row bands of a float16 output, more threads than rows and samples
    # on one row only (empty bands in the balanced plan): every band still
    # gets its thread's scratch, and the bits are float32's rounded once.
    _grad_image.use_tuning(dict(_grad_image.tuning(), band_bytes=1))
    rng = np.random.default_rng(5)
    grads = rng.standard_normal((3, 1, 40, 1)).astype(np.float32)
    boxes = np.array([[0.5, 0, 0.5, 1]] * 3, np.float32)
    size = [1, 3, 50000, 1]
    box_ind = np.zeros(3, np.int32)
    exact = cropgrad.crop_and_resize_grad_image(
        grads, boxes, box_ind, size, np.float32, num_threads=1
    )
    assert np.count_nonzero(exact[0, 1]) > 0 and not exact[0, ::2].any()
    for threads in (1, 2, 5, 7):
        # No more workers than the 3 rows' bands: 5 and 7 start 3.
        with starting_teams():
            half, team = team_of(
                lambda t=threads: cropgrad.crop_and_resize_grad_image(
                    grads, boxes, box_ind, size, np.float16, num_threads=t
                )
            )
        assert team == min(threads, 3)
        assert half.tobytes() == exact.astype(np.float16).tobytes(), threads
