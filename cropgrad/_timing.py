"""The short timing of ``python -m cropgrad``: a few seconds, in words.

Two problems, each timed on one thread and on the default threads in
alternating rounds (so that a change in the machine's speed reaches both),
and checked to give the same bits on both: the image gradient on a
detector's RoIs (the full benchmark's ``detector`` row) and RoIAlign's
forward op on torchvision's Faster R-CNN pooler (its ``roi-fpn-forward``
row).  The full benchmark, which compares with TensorFlow, torchvision and
ONNX Runtime, is not part of the package: it runs from a source checkout
(``benchmarks/README.md``).  This one only says what this install does here.
"""

import gc
import math
import os
import sys
import time

import numpy as np

import cropgrad

# Seconds of timed rounds per problem.
SECONDS = 1.5
# Other processes using more CPUs than this meanwhile make the times noisy.
NOISY = 0.2
# The seed of the arrays (the full benchmark's).
SEED = 20240603


def _detector():
    """The image gradient of 512 RoIs of 14x14 from two 64x64x256 maps."""
    size, n, crop = (2, 64, 64, 256), 512, (14, 14)
    rng = np.random.default_rng([SEED, 0])
    y1, x1 = rng.uniform(-0.1, 0.7, n), rng.uniform(-0.1, 0.7, n)
    h, w = rng.uniform(0.05, 0.5, n), rng.uniform(0.05, 0.5, n)
    boxes = np.stack([y1, x1, y1 + h, x1 + w], axis=1).astype(np.float32)
    box_ind = np.sort(rng.integers(0, size[0], n)).astype(np.int32)
    grads = np.random.default_rng([SEED, 1]).standard_normal(
        (n, *crop, size[3]), dtype=np.float32
    )
    out = np.empty(size, np.float32)

    def call(threads):
        return cropgrad.crop_and_resize_grad_image(
            grads, boxes, box_ind, size, out=out, num_threads=threads
        ).copy()

    batch, height, width, depth = size
    return (
        "the image gradient (crop_and_resize_grad_image)",
        f"{n} boxes of {crop[0]}x{crop[1]} from {batch} images of "
        f"{height}x{width}x{depth}",
        call,
    )


def _roi_fpn():
    """RoIAlign's forward op: 1024 boxes pooled to 7x7 from FPN's P3 level
    (stride 8), boxes of 16 to 400 input pixels a side."""
    nchw, n, crop, scale = (2, 256, 100, 136), 1024, (7, 7), 1 / 8
    batch, channels, height, width = nchw
    lo, hi = 16.0, 400.0
    u = np.random.default_rng([SEED, 10]).random((n, 4))
    side = np.exp(math.log(lo) + u[:, 0] * math.log(hi / lo))
    aspect = np.exp((u[:, 1] - 0.5) * 2 * math.log(2.0))
    w = np.clip(side / np.sqrt(aspect), lo, hi)
    h = np.clip(side * np.sqrt(aspect), lo, hi)
    x1 = u[:, 2] * (width / scale - w)
    y1 = u[:, 3] * (height / scale - h)
    boxes = np.stack([x1, y1, x1 + w, y1 + h], axis=1).astype(np.float32)
    box_ind = np.sort(np.random.default_rng([SEED, 11]).integers(0, batch, n))
    box_ind = box_ind.astype(np.int32)
    image = np.random.default_rng([SEED, 13]).standard_normal(nchw, dtype=np.float32)

    def call(threads):
        return cropgrad.roi_align(
            image,
            boxes,
            box_ind,
            crop,
            spatial_scale=scale,
            sampling_ratio=2,
            aligned=False,
            num_threads=threads,
        )

    return (
        "RoIAlign's forward op (roi_align)",
        f"{n} boxes pooled to {crop[0]}x{crop[1]} from {batch} maps of "
        f"{channels}x{height}x{width}",
        call,
    )


def _block(fn, inner):
    """Seconds per call of `inner` back-to-back calls of `fn` (no collector)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        start = time.perf_counter()
        for _ in range(inner):
            fn()
        elapsed = time.perf_counter() - start
    finally:
        if enabled:
            gc.enable()
    return elapsed / inner


def _times(call, threads, seconds):
    """Median seconds per call on 1 thread and on `threads`, alternating."""
    fns = {n: (lambda n=n: call(n)) for n in (1, threads)}
    fns[1]()
    once = max(_block(fns[1], 1), 1e-6)
    inner = max(1, int(0.1 / once))
    samples = {n: [] for n in fns}
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline or len(samples[1]) < 3:
        for n, fn in fns.items():
            samples[n].append(_block(fn, inner))
    return {n: float(np.median(s)) for n, s in samples.items()}


def _cpu_seconds():
    """(wall, CPU seconds every process used, this process's): Linux's
    ``/proc/stat``; None where it cannot be read."""
    try:
        with open("/proc/stat") as f:
            fields = [int(v) for v in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    # user nice system (idle iowait) irq softirq
    busy = sum(fields[i] for i in (0, 1, 2, 5, 6) if i < len(fields)) / tick
    return time.monotonic(), busy, time.process_time()


def _other_cpus(start, end):
    """CPUs other processes kept busy between two `_cpu_seconds`."""
    if start is None or end is None:
        return None
    wall = max(end[0] - start[0], 1e-9)
    return max(0.0, ((end[1] - start[1]) - (end[2] - start[2])) / wall)


def _ms(seconds):
    return f"{seconds * 1e3:.1f} ms" if seconds >= 1e-3 else f"{seconds * 1e6:.0f} us"


def short_timing(out=sys.stdout, seconds=SECONDS):
    """Time the two problems and print a line each; return the figures."""
    threads = cropgrad.show_config("dicts")["default_threads"]
    print(
        f"A short benchmark (about {2 * seconds + 2:.0f} s): 1 thread against "
        f"the default {threads}, each op's result checked to be the same bits:",
        file=out,
        flush=True,
    )
    start = _cpu_seconds()
    figures = []
    for what, problem, call in (_detector(), _roi_fpn()):
        same = call(1).tobytes() == call(threads).tobytes()
        t = _times(call, threads, seconds)
        speedup = t[1] / t[threads]
        print(
            f"  {what}, {problem}:\n"
            f"    {_ms(t[1])} on 1 thread, {_ms(t[threads])} on {threads} "
            f"({speedup:.1f}x), {'the same bits' if same else 'DIFFERENT BITS'}",
            file=out,
            flush=True,
        )
        figures.append({"op": what, "times": t, "same_bits": same})
    other = _other_cpus(start, _cpu_seconds())
    if other is not None and other > NOISY:
        print(
            f"  (other programs kept {other:.1f} CPUs busy meanwhile: these "
            "times are noisy; on a quiet machine they are lower)",
            file=out,
        )
    print(
        "The full benchmark, against TensorFlow, torchvision and ONNX Runtime "
        "where they are\ninstalled, runs from a source checkout: python "
        "benchmarks/bench.py (about 10 minutes\non 2 cores; --quick: about 2)",
        file=out,
    )
    return figures
