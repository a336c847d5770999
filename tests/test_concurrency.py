"""Python threads: calls at once get exact results, and the GIL is released.

- Eight threads call the ops of every family (crop_and_resize's,
  RoIAlign's and grid_sample's) at the same moment with mixed shapes, dtypes, methods,
  layouts, sampling options, thread counts and ``out=`` arrays, many times:
  each result must be the bits of the same call made alone.
- While a call runs, another Python thread keeps running: it sees the
  call's output half-written, which it could not if the call held the GIL.
  Nothing here compares elapsed times (how fast threads run side by side
  is the benchmark's business).
"""

import os
import sys
import threading

import numpy as np
import pytest
from _helpers import run_python, starting_teams

import cropgrad

G = cropgrad.crop_and_resize_grad_image
R = cropgrad.roi_align
RG = cropgrad.roi_align_grad_image
RB = cropgrad.roi_align_grad_boxes
RJ = cropgrad.roi_align_jvp_boxes
GS = cropgrad.grid_sample
GSI = cropgrad.grid_sample_grad_image
GSG = cropgrad.grid_sample_grad_grid
GSJ = cropgrad.grid_sample_jvp_grid


def _problem(rng, batch, size, depth, num_boxes, crop):
    grads = rng.standard_normal((num_boxes, *crop, depth)).astype(np.float32)
    boxes = rng.uniform(-0.2, 1.2, (num_boxes, 4)).astype(np.float32)
    boxes[: num_boxes // 2] = rng.uniform(0.3, 0.7, 4).astype(np.float32)  # overlaps
    box_ind = rng.integers(0, batch, num_boxes)
    image = rng.standard_normal((batch, *size, depth)).astype(np.float32)
    return grads, boxes, box_ind, [batch, *size, depth], image


def _roi_jobs(k, grads, boxes, box_ind, image_size, image):
    """RoIAlign's four ops on the same problem, NHWC: the boxes in pixels
    ([x1, y1, x2, y2], half of them at a scale of 0.5), alternating
    sampling options and thread counts."""
    batch, height, width, depth = image_size
    pixels = boxes[:, [1, 0, 3, 2]] * np.float32([width, height, width, height])
    scale = 0.5 if k % 2 else 1.0
    pixels = pixels / np.float32(scale)
    n, crop_h, crop_w = grads.shape[:3]
    tangent = np.random.default_rng(k).standard_normal((n, 4)).astype(np.float32)
    options = dict(
        spatial_scale=scale,
        sampling_ratio=(-1, 2)[k % 2],
        aligned=k % 3 == 0,
        data_format="NHWC",
    )
    threads = 1 + k % 4
    pooled = (n, crop_h, crop_w, depth)
    return [
        (
            f"roi_align-{k}-{threads}",
            pooled,
            np.float32,
            lambda out, a=(image, pixels, box_ind, (crop_h, crop_w)): R(
                *a, **options, num_threads=threads, out=out
            ),
        ),
        (
            f"roi_align_grad_image-{k}-{threads}",
            image_size,
            np.float64,
            lambda out, a=(grads, pixels, box_ind, image_size): RG(
                *a, **options, dtype=np.float64, num_threads=threads, out=out
            ),
        ),
        (
            f"roi_align_grad_boxes-{k}",
            (n, 4),
            np.float32,
            lambda out, a=(grads, image, pixels, box_ind): RB(
                *a, **options, num_threads=2 + k % 2, out=out
            ),
        ),
        (
            f"roi_align_jvp_boxes-{k}",
            pooled,
            np.float16,
            lambda out, a=(image, pixels, box_ind, tangent, (crop_h, crop_w)): RJ(
                *a, **options, dtype=np.float16, num_threads=1 + k % 3, out=out
            ),
        ),
    ]


def _grid_jobs(k, image_size, image, crop):
    """grid_sample's four ops on the same image, NHWC: a grid of the crop's
    size (points inside and around the image), cycling through the modes
    and padding modes, alternating align_corners and thread counts."""
    batch, _, _, depth = image_size
    rng = np.random.default_rng(100 + k)
    grid = rng.uniform(-1.2, 1.2, (batch, *crop, 2)).astype(np.float32)
    grads = rng.standard_normal((batch, *crop, depth)).astype(np.float32)
    tangent = rng.standard_normal(grid.shape).astype(np.float32)
    options = dict(
        mode=("bilinear", "nearest", "bicubic")[k % 3],
        padding_mode=("zeros", "border", "reflection")[(k + 1) % 3],
        align_corners=k % 2 == 0,
        data_format="NHWC",
    )
    threads = 1 + k % 4
    sampled = (batch, *crop, depth)
    return [
        (
            f"grid_sample-{k}-{threads}",
            sampled,
            np.float32,
            lambda out: GS(image, grid, **options, num_threads=threads, out=out),
        ),
        (
            f"grid_sample_grad_image-{k}-{threads}",
            image_size,
            np.float64,
            lambda out: GSI(
                grads,
                grid,
                image_size,
                **options,
                dtype=np.float64,
                num_threads=threads,
                out=out,
            ),
        ),
        (
            f"grid_sample_grad_grid-{k}",
            grid.shape,
            np.float32,
            lambda out: GSG(
                grads, image, grid, **options, num_threads=2 + k % 2, out=out
            ),
        ),
        (
            f"grid_sample_jvp_grid-{k}",
            sampled,
            np.float16,
            lambda out: GSJ(
                image,
                grid,
                tangent,
                **options,
                dtype=np.float16,
                num_threads=1 + k % 3,
                out=out,
            ),
        ),
    ]


def _jobs():
    """(name, function of out) pairs; out is None or a private output array."""
    rng = np.random.default_rng(5)
    jobs = []
    shapes = [
        (2, (30, 20), 3, 40, (7, 7)),
        (1, (8, 8), 64, 100, (5, 5)),
        (3, (64, 5), 1, 200, (9, 3)),
        (2, (17, 33), 16, 60, (14, 14)),
    ]
    for k, (batch, size, depth, n, crop) in enumerate(shapes):
        grads, boxes, box_ind, image_size, image = _problem(
            rng, batch, size, depth, n, crop
        )
        for dtype in (np.float32, np.float64, np.float16):
            for method in ("bilinear", "nearest"):
                threads = 1 + (k + len(jobs)) % 4
                args = (grads, boxes, box_ind, image_size, dtype, method)
                jobs.append(
                    (
                        f"grad_image-{k}-{np.dtype(dtype).name}-{method}-{threads}",
                        image_size,
                        dtype,
                        lambda out, a=args, t=threads: G(*a, num_threads=t, out=out),
                    )
                )
        jobs.append(
            (
                f"forward-{k}",
                (n, *crop, depth),
                np.float32,
                lambda out, a=(image, boxes, box_ind, list(crop)), t=1 + k % 3: (
                    cropgrad.crop_and_resize(*a, num_threads=t, out=out)
                ),
            )
        )
        jobs.append(
            (
                f"grad_boxes-{k}",
                None,
                None,
                lambda out, a=(grads, image, boxes, box_ind), t=2 + k % 2: (
                    cropgrad.crop_and_resize_grad_boxes(*a, num_threads=t)
                ),
            )
        )
        jobs += _roi_jobs(k, grads, boxes, box_ind, image_size, image)
        jobs += _grid_jobs(k, image_size, image, crop)
    return jobs


def test_eight_threads_at_once_get_exact_results():
    jobs = _jobs()
    expected = {name: call(None) for name, _, _, call in jobs}
    failures = []
    barrier = threading.Barrier(8)

    def worker(w):
        rng = np.random.default_rng(w)
        barrier.wait()
        for _ in range(6):
            for i in rng.permutation(len(jobs)):
                name, shape, dtype, call = jobs[i]
                use_out = shape is not None and rng.random() < 0.5
                out = np.full(shape, 99, dtype) if use_out else None
                try:
                    got = call(out)
                except Exception as exc:  # noqa: BLE001 - report any failure
                    failures.append(f"{name} in thread {w}: {exc!r}")
                    continue
                if use_out and got is not out:
                    failures.append(f"{name} in thread {w}: out= not returned")
                if got.tobytes() != expected[name].tobytes():
                    failures.append(f"{name} in thread {w}: different bits")

    workers = [threading.Thread(target=worker, args=(w,)) for w in range(8)]
    # Every call asking for threads starts its team, small ones too (the
    # threshold is set before the threads start and restored after).
    with starting_teams() as parallel:
        started = parallel.teams_started()
        for t in workers:
            t.start()
        for t in workers:
            t.join(timeout=300)
        assert parallel.teams_started() > started
    assert not any(t.is_alive() for t in workers), "a thread did not finish"
    assert not failures, failures[:10]


# --------------------------------------------------------------------------
# The GIL
#
# What is guaranteed is that the work runs without the GIL, so another Python
# thread makes progress during a call.  The probe proves it without timing
# anything: while a call runs in a worker thread, this thread keeps copying
# the call's output array with the GIL held.  A copy that is neither the
# output before the call nor after it shows the array half-written, which
# this thread can only see if it ran while the call was working, i.e. while
# the call did not hold the GIL.  A call that held the GIL throughout would
# only ever show the two end states (the control below checks the probe on
# one).


def _half_written_copies(call, snapshot, final):
    """Copies of an output taken while `call` ran in another thread that
    were neither its state before the call nor `final`, its state after."""
    before = snapshot()
    assert before != final, "the probe needs a call that changes its output"
    done = threading.Event()
    errors = []

    def worker():
        try:
            call()
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
        finally:
            done.set()

    thread = threading.Thread(target=worker)
    thread.start()
    half_written = 0
    while not done.is_set():
        state = snapshot()
        if state != before and state != final:
            half_written += 1
    thread.join()
    assert not errors, errors
    assert snapshot() == final
    return half_written


def _probe_into_out(op, inputs, size):
    """call, reset, snapshot and final result of single-threaded `op(*inputs,
    size)` writing into `out=`."""
    final = bytes(op(*inputs, size, num_threads=1).data)
    out = np.empty(size, np.float32)

    def call():
        op(*inputs, size, num_threads=1, out=out)

    def reset():
        out.fill(-12345.0)  # a value the result does not hold

    # bytes() of a memoryview copies with the GIL held (NumPy's own copies
    # may release it, and could then run alongside the call).
    return call, reset, lambda: bytes(out.data), final


def _grad_image_probe():
    """A single-threaded image gradient into `out=` (a few ms per call)."""
    rng = np.random.default_rng(7)
    n = 2000
    grads = rng.standard_normal((n, 14, 14, 16), dtype=np.float32)
    boxes = rng.uniform(0, 1, (n, 4)).astype(np.float32)
    box_ind = np.zeros(n, np.int64)
    return _probe_into_out(G, (grads, boxes, box_ind), [1, 64, 64, 16])


def _roi_align_grad_image_probe():
    """The same with RoIAlign's image gradient (a few ms per call)."""
    rng = np.random.default_rng(8)
    n = 2000
    grads = rng.standard_normal((n, 16, 7, 7), dtype=np.float32)
    corners = rng.uniform(0, 64, (n, 2, 2)).astype(np.float32)
    boxes = np.concatenate([corners.min(axis=1), corners.max(axis=1)], axis=1)
    box_ind = np.zeros(n, np.int64)
    return _probe_into_out(RG, (grads, boxes, box_ind), [1, 16, 64, 64])


def _grid_sample_grad_image_probe():
    """The same with grid_sample's image gradient (a few ms per call: a
    call of about a millisecond could end, on a loaded machine, before this
    thread is woken to look)."""
    rng = np.random.default_rng(9)
    grads = rng.standard_normal((1, 16, 320, 320), dtype=np.float32)
    grid = rng.uniform(-1, 1, (1, 320, 320, 2)).astype(np.float32)
    return _probe_into_out(GSI, (grads, grid), [1, 16, 64, 64])


@pytest.mark.parametrize(
    "probe",
    [_grad_image_probe, _roi_align_grad_image_probe, _grid_sample_grad_image_probe],
    ids=["grad_image", "roi_align_grad_image", "grid_sample_grad_image"],
)
def test_other_python_threads_run_during_a_call(probe):
    call, reset, snapshot, final = probe()
    seen = []
    # Each call gives this thread hundreds of chances to look; a few calls
    # allow for this thread not being scheduled at all during one of them.
    for _ in range(20):
        reset()
        seen.append(_half_written_copies(call, snapshot, final))
        if seen[-1] > 0:
            break
    assert seen[-1] > 0, (
        f"this thread never saw the output half-written during {len(seen)} "
        "calls: the call holds the GIL"
    )


@pytest.mark.skipif(
    not getattr(sys, "_is_gil_enabled", lambda: True)(),
    reason="no GIL: nothing holds this thread back",
)
def test_gil_probe_sees_nothing_of_a_call_that_holds_the_gil():
    # The same probe on a C call that keeps the GIL while it writes its
    # output element by element (a NumPy ufunc on Python objects): it must
    # never see the output half-written, or the test above proves nothing.
    values = np.arange(10**6, dtype=object)
    out = np.empty(values.shape, dtype=object)
    final = (values[::997] * 3).tolist()

    def call():
        np.multiply(values, 3, out=out)

    def snapshot():
        return out[::997].tolist()

    for _ in range(3):
        out.fill(-1)
        assert _half_written_copies(call, snapshot, final) == 0


THREAD_LIMIT_CHILD = r"""
import resource
import numpy as np
import cropgrad

rng = np.random.default_rng(0)
grads = rng.standard_normal((500, 14, 14, 64)).astype(np.float32)
boxes = rng.uniform(0, 1, (500, 4)).astype(np.float32)
box_ind = rng.integers(0, 2, 500)
expected = cropgrad.crop_and_resize_grad_image(grads, boxes, box_ind, [2, 256, 256, 64],
                                               num_threads=1)
# 3 GiB of address space: not enough for 512 thread stacks of 8 MiB.
resource.setrlimit(resource.RLIMIT_AS, (3 * 2**30, resource.RLIM_INFINITY))
try:
    out = cropgrad.crop_and_resize_grad_image(grads, boxes, box_ind, [2, 256, 256, 64],
                                              num_threads=1024)
    print("same bits" if out.tobytes() == expected.tobytes() else "different bits")
except Exception as exc:
    print(f"raised {type(exc).__name__}: {exc}")
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="uses RLIMIT_AS")
@pytest.mark.skipif(
    "libasan" in os.environ.get("LD_PRELOAD", ""),
    reason="AddressSanitizer's shadow memory needs more address space",
)
def test_threads_that_cannot_be_created_do_not_end_the_process(tmp_path):
    # GNU OpenMP ends the process (exit 1, "libgomp: Thread creation failed")
    # when it cannot start the team it is asked for, so num_threads=1024 must
    # not become 512 thread stacks in a process with 3 GiB of address space.
    proc = run_python("-c", THREAD_LIMIT_CHILD, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0 and "libgomp" not in proc.stderr, (
        proc.returncode,
        proc.stdout[-500:],
        proc.stderr[-500:],
    )
    # The team is cut to the threads that can start (the same bits), or the
    # scratch memory cannot be had: the documented MemoryError, nothing else.
    assert proc.stdout.strip() == "same bits" or proc.stdout.startswith(
        "raised MemoryError: "
    ), proc.stdout[-500:]
