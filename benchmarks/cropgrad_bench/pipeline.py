"""The pipeline row: what cropgrad's idle OpenMP threads cost the next work.

After a parallel region, an OpenMP runtime keeps its worker threads
spinning for a while, so that the next region starts at once.  Inside a
benchmark loop that is free; in a program that does other work after the
call, the spinning threads take a core from it.  This row measures that on
the detector's problem, with the default thread count:

``cropgrad_default``
    the call alone, back to back (as in the main table);
``pipeline``
    the call followed at once by a NumPy pass over its ``grads`` (a
    ``np.maximum.reduce`` split between the default number of Python
    threads, as the roofline's), the two timed as a whole, repeated back to
    back: no warm-up or pause between the call and the pass;
``numpy_pass_after_call``
    the pass alone, timed right after an untimed call;
``numpy_pass_after_idle``
    the pass alone, after `IDLE_WAIT` seconds without a call (the team's
    threads are asleep by then) and 10 ms of untimed passes (so the CPUs
    are awake, as in every other column);
``cropgrad_after_threads_slept``
    one call after `IDLE_WAIT` seconds of single-threaded Python work (the
    team is asleep, the calling core busy): the most a sleeping team can
    cost a call.  If it stays within 5% of the back-to-back call, letting
    the threads sleep sooner cannot cost back-to-back calls more than that;
``cpu_100ms_after_call``
    the CPU time the whole process uses during ``time.sleep(0.1)`` right
    after a call (the calling thread sleeps: it is the team's spinning).
"""

import math
import time

import numpy as np

from .columns import CGD, RooflinePasses, cropgrad_call
from .timing import time_block
from .workloads import output_shape

PIPE = "pipeline"
PASS_AFTER_CALL = "numpy_pass_after_call"
PASS_AFTER_IDLE = "numpy_pass_after_idle"
AFTER_SLEEP = "cropgrad_after_threads_slept"
CPU_AFTER_CALL = "cpu_100ms_after_call"
COLUMNS = (CGD, PIPE, PASS_AFTER_CALL, PASS_AFTER_IDLE, AFTER_SLEEP, CPU_AFTER_CALL)

# Ratios: name -> (numerator column, denominator column); "pipeline_over_parts"
# divides by the sum of the call and the pass after idle.
RATIOS = {
    "pass_after_call_over_after_idle": (PASS_AFTER_CALL, PASS_AFTER_IDLE),
    "after_sleep_over_back_to_back": (AFTER_SLEEP, CGD),
}

# Longer than any OpenMP runtime waits by default before its idle threads
# sleep (LLVM's libomp: KMP_BLOCKTIME = 200 ms; GNU libgomp: a spin count
# of a few ms).
IDLE_WAIT = 0.3
# The window after a call in which the process's CPU time is measured.
WINDOW = 0.1


class _Sampler:
    """Common parts: the call, the pass, and how many passes fill a block."""

    def __init__(self, call, numpy_pass):
        self.call = call
        self.numpy_pass = numpy_pass
        self.pass_time = None

    def _passes(self, settings):
        """Passes per sample: about one block's worth, at least one."""
        if self.pass_time is None:
            self.numpy_pass()
            self.pass_time = time_block(self.numpy_pass, 1)
        return max(1, math.ceil(settings.block / max(self.pass_time, 1e-8)))

    def _warm_passes(self, settings):
        return max(1, math.ceil(settings.warm_time / max(self.pass_time, 1e-8)))


class PassAfterCall(_Sampler):
    """The pass timed right after an untimed call (mean over a block)."""

    def sample(self, settings):
        n = self._passes(settings)
        for _ in range(self._warm_passes(settings)):
            self.call()
            self.numpy_pass()
        total = 0.0
        for _ in range(n):
            self.call()
            start = time.perf_counter()
            self.numpy_pass()
            total += time.perf_counter() - start
        return total / n

    def cost(self, settings):
        per = (self.pass_time or 0.0) * 3  # a call costs about two passes
        return (self._passes(settings) + self._warm_passes(settings)) * per


class PassAfterIdle(_Sampler):
    """The pass after the team's threads went to sleep and the CPUs woke up."""

    def sample(self, settings):
        n = self._passes(settings)
        time.sleep(IDLE_WAIT)
        return time_block(self.numpy_pass, n, self._warm_passes(settings))

    def cost(self, settings):
        passes = self._passes(settings) + self._warm_passes(settings)
        return IDLE_WAIT + passes * (self.pass_time or 0.0)


class CallAfterSleep(_Sampler):
    """One call after `IDLE_WAIT` s of single-threaded work."""

    def sample(self, settings):
        end = time.perf_counter() + IDLE_WAIT
        while time.perf_counter() < end:  # busy: this core stays awake
            pass
        start = time.perf_counter()
        self.call()
        return time.perf_counter() - start

    def cost(self, settings):
        return IDLE_WAIT + 3 * (self.pass_time or 0.0)


class CpuAfterCall(_Sampler):
    """Process CPU seconds in the `WINDOW` after a call."""

    def sample(self, settings):
        self.call()
        start = time.process_time()
        time.sleep(WINDOW)
        return time.process_time() - start

    def cost(self, settings):
        return WINDOW + 3 * (self.pass_time or 0.0)


def pipeline_columns(workload, problem, pool, threads):
    """{name: callable or sampler} of the pipeline row."""
    shape, dtype = output_shape(workload)
    run = cropgrad_call(workload, problem, np.zeros(shape, dtype))

    def call():
        run(None)

    numpy_pass = RooflinePasses([problem["grads"]], [], pool, threads)

    def whole():
        run(None)
        numpy_pass()

    return {
        CGD: call,
        PIPE: whole,
        PASS_AFTER_CALL: PassAfterCall(call, numpy_pass),
        PASS_AFTER_IDLE: PassAfterIdle(call, numpy_pass),
        AFTER_SLEEP: CallAfterSleep(call, numpy_pass),
        CPU_AFTER_CALL: CpuAfterCall(call, numpy_pass),
    }


def pipeline_ratios(samples, paired_ratio):
    """The row's ratios from its per-round samples."""
    ratios = {
        key: paired_ratio(samples.get(num), samples.get(den))
        for key, (num, den) in RATIOS.items()
    }
    parts = [a + b for a, b in zip(samples[CGD], samples[PASS_AFTER_IDLE])]
    ratios["pipeline_over_parts"] = paired_ratio(samples[PIPE], parts)
    return ratios
