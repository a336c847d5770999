"""Fresh outputs: what a call that allocates its result costs beyond the
same call into a reused ``out=``, beside what the machine charges for new
memory.

A result of tens of megabytes is new memory from the system on every call
(NumPy hands blocks that large to ``mmap`` and back to ``munmap`` when the
result dies): each page faults on its first write.  That cost belongs to the
machine, not to cropgrad; the target is that cropgrad adds little to it:

    fresh <= into out= + 1.15 x first touch

where *first touch* is ``np.empty`` of the result's shape and dtype written
once by an OpenMP ``schedule(static)`` loop on the same number of threads
(compiled here with the C compiler), the array dropped after each call as a
result is.  For ``cropgrad.jax`` (when JAX is installed) the yardstick is a
jitted XLA computation that only writes an array of the result's shape,
against the NumPy API into ``out=``.  Calls are back to back (warm), each
situation and thread count interleaved in rotating order, medians reported.
"""

import statistics
import time

import numpy as np

from .columns import cropgrad_call
from .idle import command_line
from .machine import compile_reference
from .workloads import CROP_AND_RESIZE, FORWARD, GRAD_IMAGE, WORKLOADS

THREADS = (1, 2)
DEFAULT_WORKLOADS = (
    "detector-forward",
    "detector",
    "augment",
    "roi-fpn-forward",
    "roi-fpn-grad-image",
)
TARGET = 1.15

_TOUCH_C = r"""
#include <stddef.h>
void cg_bench_touch(unsigned char* y, long n, int threads) {
    #pragma omp parallel for schedule(static) num_threads(threads)
    for (long i = 0; i < n; i++) y[i] = 0;
}
"""


def _first_touch(shape, dtype):
    """``call(num_threads)``: a new array of `shape` written once, dropped."""
    touch = compile_reference(_TOUCH_C, "cg_bench_touch", 3)
    nbytes = int(np.prod(shape)) * np.dtype(dtype).itemsize

    def call(num_threads):
        y = np.empty(shape, dtype)
        touch(y.ctypes.data, nbytes, num_threads)

    return call


def _jax_calls(workload, problem, shape, dtype):
    """The JAX columns of a crop-and-resize forward or image-gradient row,
    or {} where JAX or the row's op is missing."""
    try:
        import jax
        import jax.numpy as jnp

        import cropgrad.jax as cgj
    except ImportError:
        return {}
    if workload.family != CROP_AND_RESIZE or workload.op not in (FORWARD, GRAD_IMAGE):
        return {}
    p = {k: jax.device_put(v) for k, v in problem.items()}
    if workload.op == FORWARD:
        crop = tuple(workload.crop)

        def jax_call(num_threads):
            cgj.crop_and_resize(
                p["image"], p["boxes"], p["box_ind"], crop, num_threads=num_threads
            ).block_until_ready()

    else:
        size = tuple(workload.image_size)

        def jax_call(num_threads):
            cgj.crop_and_resize_grad_image(
                p["grads"], p["boxes"], p["box_ind"], size, num_threads=num_threads
            ).block_until_ready()

    write = jax.jit(lambda: jnp.zeros(shape, dtype))

    def xla_write(num_threads):
        write().block_until_ready()

    return {"jax": jax_call, "xla_write": xla_write}


def measure(calls, rounds):
    """``{name: {threads: median seconds}}``, every call and thread count
    once per round in rotating order, each after one untimed call."""
    keys = [(n, t) for n in calls for t in THREADS]
    samples = {key: [] for key in keys}
    for r in range(rounds):
        shift = r % len(keys)
        for name, threads in keys[shift:] + keys[:shift]:
            call = calls[name]
            call(threads)
            start = time.perf_counter()
            call(threads)
            samples[name, threads].append(time.perf_counter() - start)
    return {
        name: {t: statistics.median(samples[name, t]) for t in THREADS}
        for name in calls
    }


def run(names=DEFAULT_WORKLOADS, rounds=15, progress=print):
    rows = []
    for name in names:
        workload = WORKLOADS[name]
        problem = workload.problem()
        shape, dtype = workload.output()
        calls = {
            "out": cropgrad_call(workload, problem, np.zeros(shape, dtype)),
            "fresh": cropgrad_call(workload, problem, None),
            "first_touch": _first_touch(shape, dtype),
        }
        calls.update(_jax_calls(workload, problem, shape, dtype))
        nbytes = int(np.prod(shape)) * np.dtype(dtype).itemsize
        size = f"{np.dtype(dtype).name}, {nbytes / 1e6:.1f} MB"
        progress(f"{name}: result {shape} {size}")
        rows.append(
            {"workload": name, "bytes": nbytes, "median_s": measure(calls, rounds)}
        )
    return {"rounds": rounds, "target": TARGET, "rows": rows}


def _excess(m, t, over, base, yardstick):
    """(fresh - base) / yardstick, the target's figure."""
    return (m[over][t] - m[base][t]) / m[yardstick][t]


def format_table(report):
    head = (
        f"{'workload':22}{'thr':>4}{'into out=':>11}{'fresh':>10}"
        f"{'1st touch':>11}{'(fresh-out)/touch':>19}"
        f"{'jax':>10}{'xla write':>11}{'(jax-out)/write':>17}"
    )
    lines = [head, "-" * len(head)]
    for row in report["rows"]:
        m = row["median_s"]
        for t in THREADS:
            cells = f"{row['workload'] if t == 1 else '':22}{t:>4}"
            cells += "".join(
                f"{m[k][t] * 1e3:>8.2f} ms" for k in ("out", "fresh", "first_touch")
            )
            cells += f"{_excess(m, t, 'fresh', 'out', 'first_touch'):>17.2f}"
            if "jax" in m:
                jax, write = m["jax"][t] * 1e3, m["xla_write"][t] * 1e3
                cells += f"{jax:>8.2f} ms{write:>8.2f} ms"
                cells += f"{_excess(m, t, 'jax', 'out', 'xla_write'):>15.2f}"
            lines.append(cells)
    lines.append(f"target: (fresh - out) / first touch <= {report['target']}")
    return "\n".join(lines)


def main(argv=None):
    return command_line(
        argv,
        "python benchmarks/fresh.py",
        __doc__,
        DEFAULT_WORKLOADS,
        run,
        format_table,
    )
