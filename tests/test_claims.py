"""The threads of a team claim tasks one at a time, so none holds a call.

Every op cuts its work into tasks; on a team each thread takes the next
free task when it is done with the last (``run_tasks``), instead of a share
fixed when the call starts.  Checked here through the runtime's test hooks,
by counts and bits (never by a clock):

- every task runs exactly once, whatever the task and thread counts;
- a worker made late (it sleeps before it claims anything) leaves the
  tasks to the others: they take what came free, and the call ends;
- every op of every family gives the bits of one thread with a late
  worker, the calling thread or another one.
"""

import contextlib

import numpy as np
import pytest
from _helpers import starting_teams

import cropgrad
from cropgrad._runtime import parallel

OPENMP = cropgrad.show_config("dicts")["openmp"]


@contextlib.contextmanager
def recording(late_thread=-1, late_ms=0):
    """Teams however small the work (`starting_teams`), the claims of the
    last run of tasks recorded (``parallel.recorded()``), and thread
    `late_thread` of every team late by `late_ms` milliseconds."""
    with starting_teams():
        previous = parallel.record_claims(True)
        previous_late = parallel.make_late(late_thread, late_ms)
        try:
            yield
        finally:
            parallel.make_late(*previous_late)
            parallel.record_claims(previous)


def claims():
    """``(counts, threads)`` of the last run of tasks, as arrays."""
    record = parallel.recorded()
    assert record is not None, "the record could not be allocated"
    counts, threads = record
    return np.array(counts, dtype=np.int64), np.array(threads, dtype=np.int64)


@pytest.mark.parametrize("num_threads", range(1, 8))
@pytest.mark.parametrize("num_tasks", [1, 2, 3, 7, 64, 1001])
@pytest.mark.parametrize("equal_cost", [False, True], ids=["one-by-one", "runs"])
def test_every_task_runs_exactly_once(num_threads, num_tasks, equal_cost):
    with recording():
        team = parallel.run_empty_tasks(num_tasks, num_threads, equal_cost)
        counts, threads = claims()
    # The team's size is the one asked for, capped by the tasks; a serial
    # build runs that team's body on the calling thread alone.
    assert team == min(num_threads, num_tasks)
    assert counts.tolist() == [1] * num_tasks
    assert ((threads >= 0) & (threads < (team if OPENMP else 1))).all(), threads


@pytest.mark.skipif(not OPENMP, reason="a serial build starts no workers")
@pytest.mark.parametrize("num_threads", [2, 3])
@pytest.mark.parametrize("late_thread", [0, 1])
@pytest.mark.parametrize("equal_cost", [False, True], ids=["one-by-one", "runs"])
def test_the_others_take_the_tasks_of_a_late_worker(
    num_threads, late_thread, equal_cost
):
    num_tasks = 640
    with recording(late_thread, 200):
        team = parallel.run_empty_tasks(num_tasks, num_threads, equal_cost)
        counts, threads = claims()
    assert team == num_threads
    assert counts.tolist() == [1] * num_tasks
    # The tasks take microseconds: by the time the late thread wakes, 200
    # ms on, the others have claimed (nearly) all of them, in runs of at
    # most a sixteenth of a share.  A fixed share would have left it half
    # of them, or a third.
    late = int((threads == late_thread).sum())
    assert late <= num_tasks // 8, threads.tolist()


# --------------------------------------------------------------------------
# The ops, with a late worker: the bits of one thread


def _crop_problem(rng, nchw):
    batch, height, width, depth = 2, 9, 11, 5
    n, crop = 12, (4, 3)
    image = rng.standard_normal((batch, height, width, depth)).astype(np.float32)
    boxes = np.sort(rng.uniform(-0.2, 1.2, (n, 4)), axis=1).astype(np.float32)
    boxes[::3] = boxes[::3, [2, 3, 0, 1]]  # some flipped boxes
    box_ind = rng.integers(0, batch, n)
    grads = rng.standard_normal((n, *crop, depth)).astype(np.float32)
    tangent = rng.standard_normal((n, 4)).astype(np.float32)
    size = [batch, height, width, depth]
    fmt = "NHWC"
    if nchw:
        image = np.ascontiguousarray(image.transpose(0, 3, 1, 2))
        grads = np.ascontiguousarray(grads.transpose(0, 3, 1, 2))
        size = [batch, depth, height, width]
        fmt = "NCHW"
    return image, boxes, box_ind, grads, tangent, size, list(crop), fmt


def _crop_ops(rng, nchw):
    image, boxes, box_ind, grads, tangent, size, crop, fmt = _crop_problem(rng, nchw)
    f = dict(data_format=fmt)
    ops = {}
    for method in ("bilinear", "nearest"):
        m = dict(f, method=method)
        ops[f"crop_and_resize-{method}"] = lambda t, m=m: cropgrad.crop_and_resize(
            image, boxes, box_ind, crop, **m, num_threads=t
        )
        for dtype in (np.float32, np.float64, np.float16):
            ops[f"grad_image-{method}-{np.dtype(dtype).name}"] = (
                lambda t, m=m, d=dtype: cropgrad.crop_and_resize_grad_image(
                    grads, boxes, box_ind, size, d, **m, num_threads=t
                )
            )
    ops["grad_boxes"] = lambda t: cropgrad.crop_and_resize_grad_boxes(
        grads, image, boxes, box_ind, **f, num_threads=t
    )
    ops["jvp_boxes"] = lambda t: cropgrad.crop_and_resize_jvp_boxes(
        image, boxes, box_ind, tangent, crop, **f, num_threads=t
    )
    return ops


def _roi_ops(rng, nchw):
    batch, height, width, depth = 2, 10, 12, 6
    n, pooled = 10, (3, 4)
    shape = (batch, depth, height, width) if nchw else (batch, height, width, depth)
    image = rng.standard_normal(shape).astype(np.float32)
    x = np.sort(rng.uniform(-1, width + 1, (n, 2)), axis=1)
    y = np.sort(rng.uniform(-1, height + 1, (n, 2)), axis=1)
    boxes = np.stack([x[:, 0], y[:, 0], x[:, 1], y[:, 1]], axis=1).astype(np.float32)
    box_ind = rng.integers(0, batch, n)
    grads_shape = (n, depth, *pooled) if nchw else (n, *pooled, depth)
    grads = rng.standard_normal(grads_shape).astype(np.float32)
    tangent = rng.standard_normal((n, 4)).astype(np.float32)
    ops = {}
    for ratio, aligned in ((-1, False), (2, True)):
        o = dict(
            sampling_ratio=ratio,
            aligned=aligned,
            data_format="NCHW" if nchw else "NHWC",
        )
        k = f"{ratio}-{aligned}"
        ops[f"roi_align-{k}"] = lambda t, o=o: cropgrad.roi_align(
            image, boxes, box_ind, pooled, **o, num_threads=t
        )
        ops[f"roi_align_grad_image-{k}"] = lambda t, o=o: cropgrad.roi_align_grad_image(
            grads, boxes, box_ind, shape, **o, num_threads=t
        )
        ops[f"roi_align_grad_boxes-{k}"] = lambda t, o=o: cropgrad.roi_align_grad_boxes(
            grads, image, boxes, box_ind, **o, num_threads=t
        )
        ops[f"roi_align_jvp_boxes-{k}"] = lambda t, o=o: cropgrad.roi_align_jvp_boxes(
            image, boxes, box_ind, tangent, pooled, **o, num_threads=t
        )
    return ops


def _grid_ops(rng, nchw):
    batch, depth, height, width = 2, 3, 9, 11
    image = rng.standard_normal((batch, depth, height, width)).astype(np.float32)
    grid = rng.uniform(-1.2, 1.2, (batch, 7, 5, 2)).astype(np.float32)
    tangent = rng.standard_normal(grid.shape).astype(np.float32)
    grads = rng.standard_normal((batch, depth, 7, 5)).astype(np.float32)
    size = list(image.shape)
    if not nchw:
        image = np.ascontiguousarray(image.transpose(0, 2, 3, 1))
        grads = np.ascontiguousarray(grads.transpose(0, 2, 3, 1))
        size = list(image.shape)
    ops = {}
    for mode in ("bilinear", "nearest", "bicubic"):
        o = dict(
            mode=mode, padding_mode="reflection", data_format="NCHW" if nchw else "NHWC"
        )
        ops[f"grid_sample-{mode}"] = lambda t, o=o: cropgrad.grid_sample(
            image, grid, **o, num_threads=t
        )
        ops[f"grid_sample_grad_image-{mode}"] = lambda t, o=o: (
            cropgrad.grid_sample_grad_image(grads, grid, size, **o, num_threads=t)
        )
        ops[f"grid_sample_grad_grid-{mode}"] = lambda t, o=o: (
            cropgrad.grid_sample_grad_grid(grads, image, grid, **o, num_threads=t)
        )
        ops[f"grid_sample_jvp_grid-{mode}"] = lambda t, o=o: (
            cropgrad.grid_sample_jvp_grid(image, grid, tangent, **o, num_threads=t)
        )
    return ops


def _staged_grid_ops(rng):
    # NCHW batches that run a batch a task through the NHWC clone (on a
    # SIMD-capable CPU): 12 batches, enough for teams of 3; 32 channels of
    # 32 x 32 pixels and 17 x 16 points, so that all three ops are staged.
    image = rng.standard_normal((12, 32, 32, 32)).astype(np.float32)
    grid = rng.uniform(-1.2, 1.2, (12, 17, 16, 2)).astype(np.float32)
    grads = rng.standard_normal((12, 32, 17, 16)).astype(np.float32)
    return {
        "grid_sample-staged": lambda t: cropgrad.grid_sample(
            image, grid, num_threads=t
        ),
        "grid_sample_grad_image-staged": lambda t: cropgrad.grid_sample_grad_image(
            grads, grid, image.shape, num_threads=t
        ),
        "grid_sample_grad_grid-staged": lambda t: cropgrad.grid_sample_grad_grid(
            grads, image, grid, num_threads=t
        ),
    }


def _all_ops(nchw):
    rng = np.random.default_rng(11 + nchw)
    ops = {**_crop_ops(rng, nchw), **_roi_ops(rng, nchw), **_grid_ops(rng, nchw)}
    return {**ops, **_staged_grid_ops(rng)} if nchw else ops


@pytest.mark.skipif(not OPENMP, reason="a serial build starts no workers")
@pytest.mark.parametrize("nchw", [False, True], ids=["NHWC", "NCHW"])
@pytest.mark.parametrize("late_thread, late_ms", [(1, 30), (0, 30), (1, 1)])
def test_every_op_gives_the_bits_of_one_thread_with_a_late_worker(
    nchw, late_thread, late_ms
):
    ops = _all_ops(nchw)
    expected = {name: op(1) for name, op in ops.items()}
    failures = []
    with recording(late_thread, late_ms):
        for name, op in ops.items():
            for threads in (2, 3):
                got = op(threads)
                counts, _ = claims()
                if not (counts == 1).all():
                    failures.append(f"{name}, {threads} threads: runs {counts}")
                if got.dtype != expected[name].dtype or (
                    got.tobytes() != expected[name].tobytes()
                ):
                    failures.append(f"{name}, {threads} threads: other bits")
    assert not failures, failures
