"""Warm and after-idle timing: does a second thread pay when it starts late?

A call on a team of threads costs what its slowest thread costs.  Back to
back (*warm*), the team's threads are awake and start together.  After the
process has been idle (*after sleep*: 50 ms of ``time.sleep`` before each
call) or busy on one core (*after work*: 5 ms of single-threaded NumPy work
before each call), the workers have gone to sleep and wake up late, up to
several milliseconds after the calling thread; a kernel that deals each
thread a fixed share then waits for the late share.

Each workload is timed in the three situations on 1 and 2 threads, the
calls of one round interleaved, with the medians and the 2-thread /
1-thread ratio side by side.  Below each, the machine's own references,
compiled here with the C compiler, each sized to take about as long as the
workload's 1-thread call, in the same situations and the same rounds: an
OpenMP ``schedule(static)`` loop over memory (``y = 2 x`` over float32, as
an elementwise op of PyTorch or NumPy built with OpenMP would be), and one
of arithmetic alone (`machine.COMPUTE_C`), which tells whether the two
CPUs are two cores or one core's two hardware threads.
"""

import collections
import statistics
import sys
import time

import numpy as np

from . import grid
from .columns import cropgrad_call
from .machine import compile_reference, compute_loop
from .workloads import WORKLOADS

SITUATIONS = ("warm", "after_sleep", "after_work")
THREADS = (1, 2)
DEFAULT_WORKLOADS = (
    "detector",
    "augment",
    "dense",
    "detector-forward",
    "roi-fpn-grad-image",
    "roi-fpn-forward",
    "warp-flow-grad-image",
    "warp-flow-forward",
)
# Every name --workloads takes: the full benchmark's, and grid sampling's
# ops (benchmarks/grid.py's workloads, one op each).
KNOWN = tuple(WORKLOADS) + grid.OP_NAMES
# What comes before each timed call in each situation (seconds).
SLEEP = 0.05
WORK = 0.005
# Back-to-back calls timed per warm sample, after as many untimed ones.
WARM_CALLS = 5

_REFERENCE_C = r"""
#include <stddef.h>
void cg_bench_scale(const float* x, float* y, long n, int threads) {
    #pragma omp parallel for schedule(static) num_threads(threads)
    for (long i = 0; i < n; i++) y[i] = 2.0f * x[i];
}
"""


class Reference:
    """``call(num_threads)``: the OpenMP loop over `n` floats."""

    def __init__(self, scale, n):
        self.x = np.ones(n, np.float32)
        self.y = np.empty(n, np.float32)
        self.n = n
        self._scale = scale

    def __call__(self, num_threads):
        # ctypes lets the GIL go for the call, as cropgrad does.
        self._scale(self.x.ctypes.data, self.y.ctypes.data, self.n, num_threads)

    @classmethod
    def lasting(cls, loop, seconds):
        """The loop sized to take about `seconds` on one thread."""
        n = 1 << 16
        while True:
            ref = cls(loop, n)
            ref(1)
            took = min(_timed(ref, 1) for _ in range(3))
            if took >= seconds or n >= 1 << 30:
                return cls(loop, max(1 << 12, int(n * seconds / max(took, 1e-9))))
            n *= 4


class ComputeReference(Reference):
    """``call(num_threads)``: `n` rounds of the machine's arithmetic loop."""

    def __init__(self, loop, n):
        self.n = n
        self._loop = loop

    def __call__(self, num_threads):
        self._loop(self.n, num_threads)


def _timed(call, threads):
    start = time.perf_counter()
    call(threads)
    return time.perf_counter() - start


def _single_threaded_work(seconds, scratch):
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        np.sqrt(scratch, out=scratch)


def _sample(call, threads, situation, scratch):
    if situation == "warm":
        for _ in range(WARM_CALLS):
            call(threads)
        start = time.perf_counter()
        for _ in range(WARM_CALLS):
            call(threads)
        return (time.perf_counter() - start) / WARM_CALLS
    if situation == "after_sleep":
        time.sleep(SLEEP)
    else:
        _single_threaded_work(WORK, scratch)
    return _timed(call, threads)


def measure(calls, rounds):
    """``{name: {situation: {threads: median seconds}}}`` of `calls` (``{name:
    call(num_threads)}``), every call of every situation and thread count
    once per round, in a rotating order."""
    keys = [(n, s, t) for n in calls for s in SITUATIONS for t in THREADS]
    samples = {key: [] for key in keys}
    scratch = np.ones(4096)
    for r in range(rounds):
        shift = r % len(keys)
        for name, situation, threads in keys[shift:] + keys[:shift]:
            samples[name, situation, threads].append(
                _sample(calls[name], threads, situation, scratch)
            )
    return {
        name: {
            s: {t: statistics.median(samples[name, s, t]) for t in THREADS}
            for s in SITUATIONS
        }
        for name in calls
    }


def workload_call(name):
    """``call(num_threads)``: workload `name` (one of `KNOWN`) into a reused
    output, which the call returns."""
    if name in grid.OP_NAMES:
        return grid.op_call(name)
    workload = WORKLOADS[name]
    shape, dtype = workload.output()
    out = np.zeros(shape, dtype)
    call = cropgrad_call(workload, workload.problem(), out)
    return lambda num_threads: (call(num_threads), out)[1]


def run(names=DEFAULT_WORKLOADS, rounds=15, progress=print):
    """Each workload beside its reference loop: ``{"rows": [...]}``."""
    scale = compile_reference(_REFERENCE_C, "cg_bench_scale", 4)
    arithmetic = compute_loop()
    rows = []
    for name in names:
        call = workload_call(name)
        call(1)
        one = statistics.median(_timed(call, 1) for _ in range(5))
        reference = Reference.lasting(scale, one)
        compute = ComputeReference.lasting(arithmetic, one)
        progress(
            f"{name}: about {one * 1e3:.2f} ms on 1 thread; reference loops over "
            f"{reference.n} floats and of {compute.n} rounds"
        )
        calls = {"cropgrad": call, "reference": reference, "compute": compute}
        rows.append(
            {
                "workload": name,
                "reference_floats": reference.n,
                "compute_rounds": compute.n,
                "median_s": measure(calls, rounds),
            }
        )
    return {
        "situations": {
            "warm": f"back to back, {WARM_CALLS} untimed calls then {WARM_CALLS} timed",
            "after_sleep": f"time.sleep({SLEEP}) before each call",
            "after_work": f"{WORK * 1e3:g} ms of one-thread NumPy work before each",
        },
        "rounds": rounds,
        "rows": rows,
    }


def format_table(report):
    """The rows as text: per situation, 1 and 2 threads and their ratio."""
    head = f"{'workload':24}" + "".join(
        f"{s + ' 1 / 2 thr':>24}{'2/1':>6}" for s in SITUATIONS
    )
    lines = [head, "-" * len(head)]
    labels = {"reference": "  OpenMP static loop", "compute": "  OpenMP arithmetic"}
    for row in report["rows"]:
        for who in ("cropgrad", "reference", "compute"):
            if who not in row["median_s"]:
                continue  # a report from before the arithmetic loop
            label = labels.get(who, row["workload"])
            cells = []
            for s in SITUATIONS:
                m = row["median_s"][who][s]
                cells.append(
                    f"{m[1] * 1e3:>11.2f} /{m[2] * 1e3:>7.2f} ms{m[2] / m[1]:>6.2f}"
                )
            lines.append(f"{label:24}" + "".join(f"{c:>30}" for c in cells))
    return "\n".join(lines)


def command_line(
    argv, prog, doc, default_workloads, run, format_table, known=tuple(WORKLOADS)
):
    """The command line these timing scripts share: ``--workloads`` (of
    `known`), ``--rounds``, ``--json``; the CPU to stderr, `run`'s report
    formatted to stdout (and whole, with the machine, to the JSON file)."""
    import argparse
    import json

    from .machine import machine_info

    parser = argparse.ArgumentParser(prog=prog, description=doc.split("\n\n")[0])
    parser.add_argument("--workloads", default=",".join(default_workloads))
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--json", metavar="FILE")
    args = parser.parse_args(argv)
    names = [n for n in args.workloads.split(",") if n]
    unknown = [n for n in names if n not in known]
    if unknown:
        parser.error(f"unknown workloads {unknown}; known: {', '.join(known)}")
    machine = machine_info()
    print(
        "machine: {cpu_model} (family {cpu_family}, model {cpu_model_number}), "
        "{usable_cpus} CPUs; arithmetic scales {compute_scaling}x to 2 "
        "threads".format_map(collections.defaultdict(str, machine)),
        file=sys.stderr,
    )
    report = run(names, args.rounds, lambda m: print(m, file=sys.stderr))
    report["machine"] = machine
    print(format_table(report))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)
    return 0


def main(argv=None):
    return command_line(
        argv,
        "python benchmarks/idle.py",
        __doc__,
        DEFAULT_WORKLOADS,
        run,
        format_table,
        KNOWN,
    )
