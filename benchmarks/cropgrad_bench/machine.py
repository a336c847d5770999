"""The machine: what it is, and how busy other processes keep it."""

import ctypes
import functools
import os
import platform
import statistics
import subprocess
import tempfile
import time

# Other processes using more CPUs than this during a workload make it noisy.
NOISY = 0.2


def machine_info():
    info = {
        "cpu_count": os.cpu_count(),
        "usable_cpus": len(os.sched_getaffinity(0))
        if hasattr(os, "sched_getaffinity")
        else None,
        "cpu_model": None,
        "platform": platform.platform(),
        "python": platform.python_version(),
        "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS"),
    }
    # The model name alone can be vague under a hypervisor ("AMD EPYC"):
    # the family and model numbers tell the generation (26: Zen 5).
    fields = {
        "model name": "cpu_model",
        "cpu family": "cpu_family",
        "model": "cpu_model_number",
    }
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                name = fields.get(key.strip())
                if name and info.get(name) is None:
                    value = value.strip()
                    info[name] = int(value) if value.isdigit() else value
                if not line.strip():
                    break
    except OSError:
        pass
    if info["cpu_model"] is None:
        info["cpu_model"] = platform.processor() or None
    info.update(cache_info())
    info["compute_scaling"] = compute_scaling()
    return info


def compile_reference(source, name, nargs, optimize="-O2"):
    """The C function `name` of `source` (`nargs` arguments: pointers and
    integers, the last the thread count), compiled with the C compiler and
    ``-fopenmp``: the machine's own loops, yardsticks for cropgrad's."""
    folder = tempfile.mkdtemp(prefix="cropgrad-bench-")
    path = os.path.join(folder, "reference.c")
    library = os.path.join(folder, "reference.so")
    with open(path, "w") as f:
        f.write(source)
    compiler = os.environ.get("CC", "cc")
    subprocess.run(
        [compiler, optimize, "-fopenmp", "-fPIC", "-shared", path, "-o", library],
        check=True,
    )
    function = getattr(ctypes.CDLL(library), name)
    function.argtypes = [ctypes.c_void_p] * (nargs - 2) + [ctypes.c_long, ctypes.c_int]
    function.restype = None
    return function


# Arithmetic without memory traffic: each thread's 96 floats stay in
# registers, every multiply-add independent of the others of its round, so
# the loop runs at the vector units' throughput (compiled with -O3, which
# vectorises it).  Two CPUs that are one core's two hardware threads share
# those units: the loop then takes as long on 2 threads as on 1.
COMPUTE_C = r"""
void cg_bench_compute(float* out, long rounds, int threads) {
    #pragma omp parallel num_threads(threads)
    {
        float a[96], s = 0.0f;
        for (int j = 0; j < 96; j++) a[j] = (float)j;
        #pragma omp for schedule(static)
        for (long i = 0; i < rounds; i++)
            for (int j = 0; j < 96; j++) a[j] = a[j] * 0.999f + 0.5f;
        for (int j = 0; j < 96; j++) s += a[j];
        #pragma omp atomic
        out[0] += s;
    }
}
"""


@functools.cache
def compute_loop():
    """``call(rounds, num_threads)``: `COMPUTE_C`'s loop, compiled here once
    a process."""
    function = compile_reference(COMPUTE_C, "cg_bench_compute", 3, "-O3")
    sink = (ctypes.c_float * 1)()
    return lambda rounds, threads: function(ctypes.addressof(sink), rounds, threads)


def compute_scaling(seconds=0.05, repeats=5):
    """How much faster the compute loop runs on 2 threads than on 1, the
    same rounds split: about 2 where the CPUs are two cores, about 1 where
    they are one core's two hardware threads (a kernel bound by arithmetic
    cannot scale beyond this).  None without a C compiler or 2 CPUs."""
    if (os.cpu_count() or 1) < 2:
        return None
    try:
        loop = compute_loop()
    except (OSError, subprocess.SubprocessError):
        return None

    def timed(rounds, threads):
        start = time.perf_counter()
        loop(rounds, threads)
        return time.perf_counter() - start

    rounds = 1 << 14
    while timed(rounds, 1) < seconds / 4 and rounds < 1 << 34:
        rounds *= 4
    rounds = int(rounds * seconds / max(timed(rounds, 1), 1e-9))
    times = {1: [], 2: []}
    for _ in range(repeats):
        for threads in times:
            times[threads].append(timed(rounds, threads))
    return round(statistics.median(times[1]) / statistics.median(times[2]), 3)


def cache_info():
    """The caches and the sizes the image gradient chose from them, and the
    SIMD target of its scatter (results differ by machine kind)."""
    from cropgrad._kernels.crop_and_resize import grad_image as _grad_image
    from cropgrad._runtime import simd as _simd
    from cropgrad._runtime import tuning as _tuning

    caches = _tuning.read_caches()
    l2, l3_share = _tuning.cache_sizes(caches)
    return {
        "l2_bytes": caches[2][0] if 2 in caches else None,
        "l3_bytes": caches[3][0] if 3 in caches else None,
        "l3_shared_by_cpus": caches[3][1] if 3 in caches else None,
        "l2_per_core_bytes": l2,
        "l3_per_core_bytes": l3_share,
        "simd_target": _simd.simd_target(),
        "tuning": _grad_image.tuning(),
    }


class CpuMeter:
    """How busy the machine was meanwhile, apart from this benchmark (Linux).

    Reads the kernel's CPU counters (``/proc/stat``) and the CPU time of this
    process and of the worker processes; `stop` returns the CPU seconds that
    other processes used per second of wall time (1.0 = one whole CPU) and
    the share of time the hypervisor stole.  None where ``/proc`` is missing.
    """

    def __init__(self, pids=()):
        self.pids = list(pids)
        self.tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
        self.start = self._read()

    def _read(self):
        try:
            with open("/proc/stat") as f:
                fields = [int(v) for v in f.readline().split()[1:]]
            ours = time.process_time()
            for pid in self.pids:
                with open(f"/proc/{pid}/stat") as f:
                    stat = f.read().rsplit(")", 1)[1].split()
                ours += (int(stat[11]) + int(stat[12])) / self.tick
        except (OSError, ValueError, IndexError):
            return None
        # user nice system idle iowait irq softirq steal ...
        busy = sum(fields[i] for i in (0, 1, 2, 5, 6) if i < len(fields)) / self.tick
        steal = (fields[7] if len(fields) > 7 else 0) / self.tick
        return time.monotonic(), busy, steal, ours

    def stop(self):
        end = self._read()
        if self.start is None or end is None:
            return {"other_cpus": None, "steal": None}
        wall = max(end[0] - self.start[0], 1e-9)
        others = (end[1] - self.start[1]) - (end[3] - self.start[3])
        return {
            "other_cpus": round(max(0.0, others / wall), 3),
            "steal": round((end[2] - self.start[2]) / wall, 3),
        }


def wait_until_quiet(limit):
    """Wait up to `limit` seconds for half a second in which others stay idle."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        meter = CpuMeter()
        time.sleep(0.5)
        other = meter.stop()["other_cpus"]
        if other is None or other <= NOISY / 2:
            return True
    return False
