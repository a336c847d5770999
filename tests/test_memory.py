"""No leaks: resident memory stops growing over tens of thousands of calls.

A child process (so that nothing else the test session allocates gets in
the way) runs every operation of every family (crop_and_resize's,
RoIAlign's and grid_sample's) and every kind of error path in a loop and
reports its resident set size at checkpoints.  After a warm-up (NumPy's
caches, the OpenMP thread pool, first-touch of the allocator's arenas), the
RSS must stay flat: a leak of one small array per iteration would add
megabytes.
"""

import json
import os
import subprocess
import sys
import textwrap

import pytest

from cropgrad._ops import OPS

ITERATIONS = 5000
WARMUP = 1000
CHECKPOINT = 500

CHILD = textwrap.dedent(r"""
    import json, os, sys, warnings
    import numpy as np
    import cropgrad
    from cropgrad import raw_ops
    from cropgrad._runtime import parallel

    # Teams for the small calls too (a call asking for 2 threads gets 2):
    # the team's scratch and plans are allocated and freed on that path.
    parallel.use_serial_work(0)

    # No call may let a warning escape: one would end the child here.
    warnings.simplefilter("error")

    def rss():
        try:
            import psutil
            return psutil.Process().memory_info().rss
        except ImportError:
            with open("/proc/self/statm") as f:
                return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

    rng = np.random.default_rng(0)
    grads = rng.standard_normal((6, 5, 4, 3)).astype(np.float32)
    boxes = rng.uniform(-0.2, 1.2, (6, 4)).astype(np.float32)
    box_ind = np.array([0, 1, 0, 1, 1, 0], np.int32)
    size = [2, 9, 7, 3]
    image = rng.standard_normal((2, 9, 7, 3)).astype(np.float32)
    image16 = image.astype(np.float16)
    out32 = np.empty(size, np.float32)
    out16 = np.empty(size, np.float16)
    crops_out = np.empty((6, 5, 4, 3), np.float32)
    # Big enough for the kernel to start its threads by itself.
    big_grads = rng.standard_normal((64, 7, 7, 64)).astype(np.float32)
    big_boxes = rng.uniform(0, 1, (64, 4)).astype(np.float32)
    big_ind = np.zeros(64, np.int64)
    bad_boxes = boxes.copy()
    bad_boxes[3, 2] = np.nan
    readonly = np.zeros(size, np.float32)
    readonly.flags.writeable = False

    G = cropgrad.crop_and_resize_grad_image
    F = cropgrad.crop_and_resize
    B = cropgrad.crop_and_resize_grad_boxes
    J = cropgrad.crop_and_resize_jvp_boxes
    R = cropgrad.roi_align
    RG = cropgrad.roi_align_grad_image
    RB = cropgrad.roi_align_grad_boxes
    RJ = cropgrad.roi_align_jvp_boxes
    # RoIAlign: NCHW, boxes in pixels
    image_nchw = np.ascontiguousarray(image.transpose(0, 3, 1, 2))
    grads_nchw = np.ascontiguousarray(grads.transpose(0, 3, 1, 2))
    pixels = boxes[:, [1, 0, 3, 2]] * np.float32([7, 9, 7, 9])
    size_nchw = [2, 3, 9, 7]
    pooled_out = np.empty((6, 3, 5, 4), np.float16)
    GS = cropgrad.grid_sample
    GSI = cropgrad.grid_sample_grad_image
    GSG = cropgrad.grid_sample_grad_grid
    GSJ = cropgrad.grid_sample_jvp_grid
    # grid_sample: NCHW, a grid [N, H_out, W_out, 2] in [-1, 1]
    grid = rng.uniform(-1.2, 1.2, (2, 5, 4, 2)).astype(np.float32)
    grid_grads = rng.standard_normal((2, 3, 5, 4)).astype(np.float32)
    bad_grid = grid.copy()
    bad_grid[1, 2, 3, 0] = np.inf
    sampled_out = np.empty((2, 5, 4, 3), np.float16)
    ok_calls = [
        lambda: G(grads, boxes, box_ind, size),
        lambda: G(grads, boxes, box_ind, size, np.float16, "nearest", num_threads=2),
        lambda: G(grads, boxes, box_ind, size, np.float64, num_threads=1),
        lambda: G(grads, boxes, box_ind, size, out=out32, flush_denormals=True),
        lambda: G(grads, boxes, box_ind, size, "half", out=out16),
        lambda: G(grads.tolist(), boxes.astype(">f8"), box_ind.astype(np.uint8),
                  tuple(size)),
        lambda: G(big_grads, big_boxes, big_ind, [1, 16, 16, 64], num_threads=2),
        lambda: G(np.zeros((0, 2, 2, 3)), np.zeros((0, 4)), [], size),
        lambda: F(image, boxes, box_ind, [5, 4], num_threads=2),
        lambda: F(image16, boxes, box_ind, [5, 4], "nearest", 1.5, out=crops_out),
        # Whole numbers in 0..255 (a negative float cast to uint8 is
        # undefined: NumPy warns on aarch64).
        lambda: F(np.abs(image * 40).astype(np.uint8), boxes, box_ind, [1, 1]),
        lambda: B(grads, image, boxes, box_ind, num_threads=2),
        lambda: B(grads, image16, boxes, box_ind, flush_denormals=True),
        lambda: J(image, boxes, box_ind, boxes, [5, 4], num_threads=2),
        lambda: R(image_nchw, pixels, box_ind, (5, 4), sampling_ratio=2,
                  num_threads=2),
        lambda: R(image, pixels, box_ind, 3, aligned=True, data_format="NHWC",
                  dtype=np.float64),
        lambda: RG(grads_nchw, pixels, box_ind, size_nchw, dtype=np.float16,
                   num_threads=2),
        lambda: RB(grads_nchw, image_nchw.astype(np.float64), pixels * 2, box_ind,
                   spatial_scale=0.5, flush_denormals=True),
        lambda: RJ(image_nchw, pixels, box_ind, boxes, (5, 4), dtype=np.float16,
                   out=pooled_out),
        lambda: GS(image_nchw, grid, mode="bicubic", padding_mode="reflection",
                   num_threads=2),
        lambda: GSI(grid_grads, grid, size_nchw, mode="nearest",
                    align_corners=True, dtype=np.float16, num_threads=2),
        lambda: GSG(grid_grads.astype(np.float64), image_nchw.astype(np.float64),
                    grid, padding_mode="border", num_threads=2),
        lambda: GSJ(image, grid, grid, data_format="NHWC", dtype=np.float16,
                    out=sampled_out, flush_denormals=True),
        lambda: raw_ops.CropAndResizeGradImage(grads=grads, boxes=boxes,
                                               box_ind=box_ind, image_size=size,
                                               T="float32"),
        lambda: raw_ops.CropAndResize(image=image, boxes=boxes, box_ind=box_ind,
                                      crop_size=[3, 3]),
        lambda: raw_ops.CropAndResizeGradBoxes(grads=grads, image=image, boxes=boxes,
                                               box_ind=box_ind),
        lambda: raw_ops.CropAndResize(image=image, boxes=boxes.astype(object),
                                      box_ind=box_ind + 0.5,
                                      crop_size=np.array([3.0, 3.0])),
    ]
    error_calls = [
        lambda: G(grads, boxes, [0, 1, 0, 1, 1, 5], size),  # IndexError
        lambda: G(grads, bad_boxes, box_ind, size),  # non-finite box
        lambda: G(grads, boxes * [1, 1, 1e40, 1], box_ind, size),  # inf in float32
        lambda: G(grads, boxes, box_ind, size, "int32"),                # TypeError
        lambda: G(grads, boxes, box_ind, size, method="area"),
        lambda: G(grads, boxes, box_ind, size, out=readonly),
        lambda: G(grads, boxes, box_ind, size, out=np.empty(size, np.float64)),
        lambda: G(grads, boxes, box_ind, [2**40, 2**20, 1, 3]),         # MemoryError
        lambda: G(np.zeros((0, 1, 1, 3)), np.zeros((0, 4)), [], [0, 2**62, 5, 3]),
        lambda: G(grads.astype(complex), boxes, box_ind, size),
        lambda: G([[1, 2], [3]], boxes, box_ind, size),
        lambda: G(grads, boxes, box_ind, [2**70, 9, 7, 3]),
        lambda: G(grads, boxes, box_ind, size, num_threads=0),
        lambda: F(image, boxes, box_ind, [2**31, 2**31]),               # MemoryError
        lambda: F(image, boxes, box_ind, [5, 4], extrapolation_value=None),
        lambda: F(image.astype(np.uint32), boxes, box_ind, [5, 4]),
        lambda: B(grads, image, boxes, box_ind, method="nearest"),
        lambda: B(grads, image[..., :2], boxes, box_ind),
        lambda: J(image, boxes, box_ind, boxes[:2], [5, 4]),
        lambda: R(image_nchw, pixels, [0, 1, 0, 1, 1, 5], 2),           # IndexError
        lambda: R(image_nchw, bad_boxes, box_ind, 2),   # non-finite box
        lambda: R(image_nchw, pixels * [1, 1, 1e9, 1], box_ind, 2),  # adaptive grid
        lambda: R(image_nchw, pixels, box_ind, 2, spatial_scale=np.nan),
        lambda: RG(grads_nchw, pixels, box_ind, [2**40, 3, 2**20, 1]),  # MemoryError
        lambda: RG(grads_nchw, pixels, box_ind, size_nchw, sampling_ratio=4097),
        lambda: RB(grads_nchw, image_nchw, pixels, box_ind, out=readonly),
        lambda: RJ(image_nchw, pixels, box_ind, None, 2),
        lambda: GS(image_nchw, bad_grid),  # non-finite grid
        lambda: GS(image_nchw[None], grid),  # volumetric
        lambda: GS(image_nchw, grid, mode="area"),
        lambda: GSI(grid_grads, grid, [2, 3, 2**40, 2**20]),  # MemoryError
        lambda: GSI(grid_grads, grid[:1], size_nchw),  # batch mismatch
        lambda: GSG(grid_grads, image_nchw, grid, out=readonly),
        lambda: GSJ(image_nchw, grid, grid[..., :1]),
        lambda: raw_ops.CropAndResizeGradImage(grads=grads, boxes=boxes,
                                               box_ind=box_ind, image_size=size,
                                               T=None),
        lambda: raw_ops.CropAndResize(image=image, boxes=boxes,
                                      box_ind=np.full(6, np.nan), crop_size=[3, 3]),
    ]

    def one_iteration():
        for call in ok_calls:
            call()
        for call in error_calls:
            try:
                call()
            except (ValueError, TypeError, IndexError, MemoryError):
                pass
            else:
                raise SystemExit(f"error path did not raise: {call}")

    iterations, warmup, checkpoint = (int(v) for v in sys.argv[1:4])
    for _ in range(warmup):
        one_iteration()
    samples = [rss()]
    for i in range(1, iterations + 1):
        one_iteration()
        if i % checkpoint == 0:
            samples.append(rss())
    calls = (warmup + iterations) * (len(ok_calls) + len(error_calls))
    print(json.dumps({"rss": samples, "calls": calls,
                      "teams": parallel.teams_started(),
                      "default_threads": parallel.default_threads()}))
""")


@pytest.mark.slow
def test_resident_memory_stops_growing(tmp_path):
    proc = subprocess.run(
        [
            sys.executable,
            "-P",
            "-c",
            CHILD,
            str(ITERATIONS),
            str(WARMUP),
            str(CHECKPOINT),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
        # The calls with the default thread count ask for two threads
        # whatever the machine's processor count.
        env={**os.environ, "OMP_NUM_THREADS": "2"},
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    rss = report["rss"]
    mib = [round(r / 2**20, 2) for r in rss]
    growth = rss[-1] - rss[0]
    late_growth = rss[-1] - rss[len(rss) // 2]
    print(
        f"{report['calls']} calls; RSS after warm-up and every {CHECKPOINT} "
        f"iterations (MiB): {mib}; growth {growth / 2**20:.2f} MiB"
    )
    # 300 000 calls: one leaked 16-byte block per call would be 5 MiB (2.5
    # in the second half), one leaked output array per iteration hundreds.
    assert growth < 2 * 2**20, mib
    assert late_growth < 1 * 2**20, mib
    # Every iteration started teams: ten calls ask for two threads, and the
    # calls with the default thread count do too unless the build is serial
    # (its default is one thread).
    per_iteration = 10 if report["default_threads"] == 1 else 11
    assert report["teams"] >= per_iteration * (ITERATIONS + WARMUP), report


@pytest.mark.parametrize("op", OPS)
def test_every_op_of_the_op_model_is_in_the_loop(op):
    # A new family is in the loop above as soon as it is in cropgrad._ops.
    assert f"cropgrad.{op}\n" in CHILD
