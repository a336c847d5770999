"""Python threads: calls at once get exact results, and the GIL is released.

- Eight threads call the three operations at the same moment with mixed
  shapes, dtypes, methods, thread counts and ``out=`` arrays, many times:
  each result must be the bits of the same call made alone.
- While one long call runs, another Python thread keeps running (the work
  holds no GIL), and two long single-threaded calls in two threads take
  about the time of one on two cores (skipped when even GIL-free hashing
  cannot overlap: no second core is free at the moment).
"""

import os
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import cropgrad

G = cropgrad.crop_and_resize_grad_image


def _problem(rng, batch, size, depth, num_boxes, crop):
    grads = rng.standard_normal((num_boxes, *crop, depth)).astype(np.float32)
    boxes = rng.uniform(-0.2, 1.2, (num_boxes, 4)).astype(np.float32)
    boxes[: num_boxes // 2] = rng.uniform(0.3, 0.7, 4).astype(np.float32)  # overlaps
    box_ind = rng.integers(0, batch, num_boxes)
    image = rng.standard_normal((batch, *size, depth)).astype(np.float32)
    return grads, boxes, box_ind, [batch, *size, depth], image


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
                jobs.append(
                    (
                        f"grad_image-{k}-{np.dtype(dtype).name}-{method}-{threads}",
                        image_size,
                        dtype,
                        lambda out, a=(grads, boxes, box_ind, image_size, dtype, method), t=threads: (
                            G(*a, num_threads=t, out=out)
                        ),
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
    for t in workers:
        t.start()
    for t in workers:
        t.join(timeout=300)
    assert not any(t.is_alive() for t in workers), "a thread did not finish"
    assert not failures, failures[:10]


# --------------------------------------------------------------------------
# The GIL


def _long_call(seconds=0.25):
    """A single-threaded call of about `seconds` that is compute-bound.

    The boxes gradient over a big all-zero gradient: its pages are the
    kernel's shared zero page, so the work is arithmetic, not memory
    traffic (two such calls can run side by side without sharing a memory
    bus).  Calibrated to this machine's speed.
    """
    image = np.random.default_rng(0).standard_normal((1, 16, 16, 8)).astype(np.float32)
    boxes = np.tile(np.array([[0.1, 0.1, 0.9, 0.9]], np.float32), (1, 1))

    def make(n):
        grads = np.zeros((n, 64, 64, 8), np.float32)
        b = np.repeat(boxes, n, axis=0)
        ind = np.zeros(n, np.int64)
        return lambda: cropgrad.crop_and_resize_grad_boxes(
            grads, image, b, ind, num_threads=1
        )

    n = 8
    while True:
        call = make(n)
        call()
        start = time.perf_counter()
        call()
        took = time.perf_counter() - start
        if took >= seconds or n >= 2**14:
            return call, took
        n = int(n * min(max(seconds / max(took, 1e-4), 1.5), 16)) + 1


def _ticks_during(call):
    """Main-thread loop iterations while `call` runs in another thread."""
    window = {}

    def worker():
        window["start"] = time.perf_counter()
        call()
        window["end"] = time.perf_counter()

    ticks = []
    t = threading.Thread(target=worker)
    t.start()
    while t.is_alive():
        ticks.append(time.perf_counter())
    t.join()
    span = window["end"] - window["start"]
    # Only the middle of the call counts: at its start and end the threads
    # may trade the GIL (every 5 ms) while Python code runs.
    margin = max(0.2 * span, 0.02)
    inside = [x for x in ticks if window["start"] + margin < x < window["end"] - margin]
    return len(inside), span


def test_other_python_threads_run_during_a_call():
    # Holds on one core too: if the call kept the GIL, the main thread could
    # not execute a single bytecode between the call's start and end.
    call, _ = _long_call(0.3)
    ticks, span = _ticks_during(call)
    assert ticks > 1000, (
        f"the main thread ran {ticks} loop iterations during a {span:.3f} s call: "
        "the GIL is held"
    )


def test_gil_probe_detects_a_call_that_holds_the_gil():
    # The same probe on a C call that keeps the GIL (a big factorial): it
    # must see (almost) no progress, or the test above proves nothing.
    import math

    n = 20000
    while True:
        start = time.perf_counter()
        math.factorial(n)
        if time.perf_counter() - start > 0.15 or n > 10**7:
            break
        n *= 2
    ticks, span = _ticks_during(lambda: math.factorial(n))
    assert ticks < 50, f"{ticks} iterations during a GIL-holding {span:.3f} s call"


def _cores():
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def _overlap_ratio(call):
    """Wall time of two concurrent `call`s over one `call`."""
    start = time.perf_counter()
    call()
    one = time.perf_counter() - start
    threads = [threading.Thread(target=call) for _ in range(2)]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return (time.perf_counter() - start) / one


def _gil_free_reference(seconds):
    """A call of about `seconds` that releases the GIL: hashing a big buffer."""
    import hashlib

    size = 2**20
    while True:
        data = bytes(size)
        start = time.perf_counter()
        hashlib.sha256(data).digest()
        took = time.perf_counter() - start
        if took >= seconds or size >= 2**31:
            return lambda: hashlib.sha256(data).digest()
        size = int(size * min(max(seconds / max(took, 1e-4), 1.5), 16))


@pytest.mark.skipif(_cores() < 2, reason="needs two cores")
def test_two_calls_in_two_threads_overlap():
    call, took = _long_call(0.2)
    reference = _gil_free_reference(took)
    ratios, reference_ratios = [], []
    for _ in range(7):
        ratios.append(_overlap_ratio(call))
        reference_ratios.append(_overlap_ratio(reference))
        # Best of several tries: other processes may take a core for a while.
        if min(ratios) < 1.6:
            break
    if min(ratios) >= 1.6 and min(reference_ratios) >= 1.6:
        pytest.skip(
            f"no second core free now: two concurrent GIL-free hashes took "
            f"{min(reference_ratios):.2f} times one"
        )
    assert min(ratios) < 1.6, (
        f"two concurrent calls took {[round(r, 2) for r in ratios]} times one call "
        f"(GIL-free hashing: {[round(r, 2) for r in reference_ratios]}): they do not "
        "run in parallel"
    )


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
    proc = subprocess.run(
        [sys.executable, "-P", "-c", THREAD_LIMIT_CHILD],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert proc.returncode == 0 and "libgomp" not in proc.stderr, (
        proc.returncode,
        proc.stdout[-500:],
        proc.stderr[-500:],
    )
    assert proc.stdout.strip() == "same bits" or proc.stdout.startswith("raised ")
