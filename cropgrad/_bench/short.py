"""The short benchmark of ``python -m cropgrad``: a few seconds, in words.

Two workloads of the full benchmark, each timed on one thread and on the
default threads in alternating rounds (so that a change in the machine's
speed reaches both), and checked to give the same bits on both: the
image gradient of the ``detector`` row and RoIAlign's forward op on the
``roi-fpn-forward`` row (torchvision's Faster R-CNN pooler).  The full
benchmark (`cropgrad._bench.run`) compares with TensorFlow, torchvision
and ONNX Runtime; this one only says what this install does here.
"""

import sys
import time

import numpy as np

import cropgrad

from .machine import NOISY, CpuMeter
from .timing import time_block
from .workloads import WORKLOADS, make_problem, make_roi_problem

# Seconds of timed rounds per workload.
SECONDS = 1.5


def _detector():
    w = WORKLOADS["detector"]
    p = make_problem(w)
    out = np.empty(w.image_size, np.float32)

    def call(threads):
        return cropgrad.crop_and_resize_grad_image(
            p["grads"],
            p["boxes"],
            p["box_ind"],
            w.image_size,
            out=out,
            num_threads=threads,
        ).copy()

    boxes, crop = w.num_boxes, "x".join(map(str, w.crop))
    batch, height, width, depth = w.image_size
    return (
        "the image gradient (crop_and_resize_grad_image)",
        f"{boxes} boxes of {crop} from {batch} images of {height}x{width}x{depth}",
        call,
    )


def _roi_fpn():
    w = WORKLOADS["roi-fpn-forward"]
    p = make_roi_problem(w)

    def call(threads):
        return cropgrad.roi_align(
            p["image"],
            p["boxes"],
            p["box_ind"],
            w.crop,
            spatial_scale=w.spatial_scale,
            sampling_ratio=w.sampling_ratio,
            aligned=w.aligned,
            num_threads=threads,
        )

    batch, channels, height, width = w.nchw
    out_h, out_w = w.crop
    return (
        "RoIAlign's forward op (roi_align)",
        f"{w.num_boxes} boxes pooled to {out_h}x{out_w} from {batch} maps of "
        f"{channels}x{height}x{width}",
        call,
    )


def _times(call, threads, seconds):
    """Median seconds per call on 1 thread and on `threads`, alternating."""
    fns = {n: (lambda n=n: call(n)) for n in (1, threads)}
    once = max(time_block(fns[1], 1, warm=1), 1e-6)
    inner = max(1, int(0.1 / once))
    samples = {n: [] for n in fns}
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline or len(samples[1]) < 3:
        for n, fn in fns.items():
            samples[n].append(time_block(fn, inner))
    return {n: float(np.median(s)) for n, s in samples.items()}


def _ms(seconds):
    return f"{seconds * 1e3:.1f} ms" if seconds >= 1e-3 else f"{seconds * 1e6:.0f} us"


def short_benchmark(out=sys.stdout, seconds=SECONDS):
    """Time the two workloads and print a line each; return the figures."""
    threads = cropgrad.show_config("dicts")["default_threads"]
    print(
        f"A short benchmark (about {2 * seconds + 2:.0f} s): 1 thread against "
        f"the default {threads}, each op's result checked to be the same bits:",
        file=out,
        flush=True,
    )
    meter = CpuMeter()
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
    other = meter.stop()["other_cpus"]
    if other is not None and other > NOISY:
        print(
            f"  (other programs kept {other:.1f} CPUs busy meanwhile: these "
            "times are noisy; on a quiet machine they are lower)",
            file=out,
        )
    print(
        "The full benchmark, against TensorFlow, torchvision and ONNX Runtime "
        "where they are\ninstalled: python -m cropgrad bench (about 10 minutes "
        "on 2 cores; --quick: about 2)",
        file=out,
    )
    return figures
