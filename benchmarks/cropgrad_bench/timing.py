"""How the benchmark times a column: blocks of calls, warm-up, rounds."""

import gc
import math
import time


class Settings:
    """How long to measure: the full run or ``--quick``."""

    def __init__(self, quick=False, repeats=None, budget=None):
        self.quick = quick
        self.repeats = repeats
        # Seconds of timed rounds per workload, and the bounds on the rounds.
        self.budget = budget if budget is not None else (0.3 if quick else 9.0)
        self.min_rounds = 3 if quick else 7
        self.max_rounds = 10 if quick else 60
        # A block of calls lasts at least this long (short calls repeat).
        self.block = 0.5e-3 if quick else 2e-3
        # Untimed calls before each block, for about this long: the previous
        # column's idle OpenMP threads spin for a few ms, and a CPU that was
        # idle runs slowly for a few ms after waking (so no pauses either).
        self.warm_time = 2e-3 if quick else 10e-3
        # Calls slower than this get no untimed call before their block.
        self.warm_limit = 0.05
        # Workloads measured again when other processes disturbed them
        # (in the whole run; the least disturbed attempt is kept).
        self.noisy_retries = 0 if quick else 2
        # ... once the machine has been quiet for half a second, waiting at
        # most this long for that.
        self.quiet_wait = 2.0

    def as_dict(self):
        return {
            k: getattr(self, k)
            for k in (
                "quick",
                "repeats",
                "budget",
                "min_rounds",
                "max_rounds",
                "block",
                "warm_time",
                "warm_limit",
                "noisy_retries",
                "quiet_wait",
            )
        }


def time_block(fn, inner, warm=0):
    """Seconds per call of `inner` back-to-back calls of `fn`.

    `warm` untimed calls come first; the garbage collector is off while
    timing.
    """
    for _ in range(warm):
        fn()
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


def calibrate(fn, block):
    """Warm `fn` up; return (calls per block, estimated seconds per call).

    The first calls start thread pools, fault pages in and (TensorFlow)
    build the kernel: two untimed calls, then the faster of two timed ones.
    """
    fn()
    fn()
    estimate = min(time_block(fn, 1) for _ in range(2))
    if estimate >= block:
        return 1, estimate
    inner = min(100_000, math.ceil(block / max(estimate, 1e-8)))
    estimate = time_block(fn, inner)
    inner = min(100_000, max(1, math.ceil(block / max(estimate, 1e-8))))
    return inner, estimate


class Column:
    """A timed column of a row: run here, in a worker process, or by a sampler.

    Exactly one of:

    ``fn``
        a no-argument callable doing one complete call; timed in blocks of
        back-to-back calls after untimed warm-up calls (`time_block`);
    ``worker``
        a worker process that times its own callable the same way
        (`cropgrad_bench.tf_worker.TensorFlowWorker`);
    ``sampler``
        an object with ``sample(settings) -> seconds`` (one sample, taking
        care of its own waiting) and ``cost(settings) -> seconds`` (the wall
        time a sample takes): the measurements that must not be warmed up
        like the others (`cropgrad_bench.pipeline`).
    """

    def __init__(self, name, fn=None, worker=None, sampler=None):
        self.name = name
        self.fn = fn
        self.worker = worker
        self.sampler = sampler
        self.inner = 1
        self.estimate = 0.0
        self.samples = []

    def calibrate(self, settings):
        if self.sampler is not None:
            self.sampler.sample(settings)  # first-call costs out of the way
            self.estimate = self.sampler.cost(settings)
        elif self.worker is not None:
            self.inner, self.estimate = self.worker.calibrate(settings.block)
        else:
            self.inner, self.estimate = calibrate(self.fn, settings.block)

    def warm(self, settings):
        """Untimed calls before a block."""
        if self.sampler is not None or self.estimate >= settings.warm_limit:
            return 0
        return min(
            100_000, max(1, math.ceil(settings.warm_time / max(self.estimate, 1e-8)))
        )

    def cost(self, settings):
        """Estimated seconds of one block of this column."""
        if self.sampler is not None:
            return self.estimate
        return (self.inner + self.warm(settings)) * self.estimate

    def measure(self, settings):
        if self.sampler is not None:
            value = self.sampler.sample(settings)
        elif self.worker is not None:
            value = self.worker.time(self.warm(settings))
        else:
            value = time_block(self.fn, self.inner, self.warm(settings))
        self.samples.append(value)


def plan_rounds(columns, settings):
    """How many rounds fit in the time budget (or ``--repeats``)."""
    if settings.repeats is not None:
        return settings.repeats
    per_round = sum(c.cost(settings) for c in columns)
    rounds = int(settings.budget / max(per_round, 1e-9))
    return max(settings.min_rounds, min(settings.max_rounds, rounds))


def measure_rounds(columns, rounds, settings):
    """Time every column once per round, in an order rotating by round."""
    for r in range(rounds):
        shift = r % len(columns)
        for column in columns[shift:] + columns[:shift]:
            column.measure(settings)
