"""The benchmark behind ``python -m cropgrad bench`` (private).

Each workload is timed in several columns, all in the same run:

``cropgrad_1thread`` / ``cropgrad_default``
    the cropgrad call with ``num_threads=1`` / with the default thread count,
    writing into a preallocated ``out=`` array (so no allocation is timed);
``cropgrad_default_new_output``
    the same call with the default threads, allocating its result;
``roofline``
    NumPy on the same arrays: one read pass over every input array that is
    read in full (``np.maximum.reduce``, the fastest vectorised reduction),
    then writing the output once (``ndarray.fill(0)`` on a preallocated
    array).  Timed with each pass split between as many Python threads as
    cropgrad's default thread count (``roofline_default_threads``; NumPy
    releases the GIL) and on one thread (``roofline_1thread``); the roofline
    of a round is the faster of the two.  No kernel that reads its inputs
    and writes its output once can be faster;
``tf_default`` / ``tf_deterministic``
    ``tf.raw_ops`` in TensorFlow's default mode / with op determinism
    enabled, each in a worker process of its own (determinism cannot be
    switched off again in a process, and TensorFlow's threads stay out of
    the process that times cropgrad).  The inputs are TensorFlow tensors made
    once before timing; TensorFlow allocates its output on every call.

Noise: the columns are measured in rounds.  A round times each column once
(a block of calls), in an order that rotates from round to round, after
about 10 ms of untimed calls of the same column (while the previous
column's idle OpenMP threads stop spinning; a pause instead would let the
CPUs idle, and they run slowly for a few ms after waking).  A column's time is the median over rounds; a ratio is the
median of the per-round ratios, i.e. of measurements taken side by side.
Calls faster than the block time are repeated within a block and the
per-call time is reported.
"""

import gc
import importlib.util
import json
import math
import os
import platform
import select
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

import cropgrad

SEED = 20240603

CG1, CGD, CGN = "cropgrad_1thread", "cropgrad_default", "cropgrad_default_new_output"
CG32 = "cropgrad_default_float32"
ROOF, ROOFN, ROOF1 = "roofline", "roofline_default_threads", "roofline_1thread"
TFD, TFX = "tf_default", "tf_deterministic"
COLUMNS = (CG1, CGD, CGN, CG32, ROOF, ROOFN, ROOF1, TFD, TFX)
TF_MODES = {TFD: "default", TFX: "deterministic"}

# Ratios: name -> (numerator column, denominator column).
RATIOS = {
    "tf_default_over_cropgrad_default": (TFD, CGD),
    "tf_deterministic_over_cropgrad_1thread": (TFX, CG1),
    "cropgrad_default_over_roofline": (CGD, ROOF),
    "scaling_1thread_over_default": (CG1, CGD),
    "tf_default_over_cropgrad_new_output": (TFD, CGN),
}

GRAD_IMAGE, FORWARD, GRAD_BOXES = "grad_image", "forward", "grad_boxes"

# Other processes using more CPUs than this during a workload make it noisy.
NOISY = 0.2


class Workload:
    """One benchmark problem: an op, its shapes and its output dtype."""

    def __init__(
        self,
        name,
        op,
        batch,
        height,
        width,
        depth,
        num_boxes,
        crop,
        dtype="float32",
        about="",
    ):
        self.name = name
        self.op = op
        self.image_size = (batch, height, width, depth)
        self.num_boxes = num_boxes
        self.crop = tuple(crop)
        self.dtype = np.dtype(dtype)
        self.about = about

    def describe(self):
        b, h, w, d = self.image_size
        return (
            f"{self.op} image ({b},{h},{w},{d}), {self.num_boxes} boxes "
            f"{self.crop[0]}x{self.crop[1]}, {self.dtype.name}"
        )

    def as_dict(self):
        return {
            "name": self.name,
            "op": self.op,
            "image_size": list(self.image_size),
            "num_boxes": self.num_boxes,
            "crop_size": list(self.crop),
            "output_dtype": self.dtype.name if self.op == GRAD_IMAGE else "float32",
            "about": self.about,
        }


WORKLOADS = {
    w.name: w
    for w in (
        Workload(
            "detector",
            GRAD_IMAGE,
            2,
            64,
            64,
            256,
            512,
            (14, 14),
            about="RoI gradients of a detector's feature maps",
        ),
        Workload(
            "augment",
            GRAD_IMAGE,
            16,
            224,
            224,
            3,
            16,
            (224, 224),
            about="one large crop per RGB image (depth 3)",
        ),
        Workload(
            "dense",
            GRAD_IMAGE,
            1,
            128,
            128,
            64,
            2000,
            (7, 7),
            about="many small, heavily overlapping boxes",
        ),
        Workload(
            "tiny",
            GRAD_IMAGE,
            1,
            16,
            16,
            8,
            1,
            (7, 7),
            about="one tiny box: the cost of a call",
        ),
        Workload(
            "detector-float16",
            GRAD_IMAGE,
            2,
            64,
            64,
            256,
            512,
            (14, 14),
            dtype="float16",
            about="detector, float16 output",
        ),
        Workload(
            "detector-float64",
            GRAD_IMAGE,
            2,
            64,
            64,
            256,
            512,
            (14, 14),
            dtype="float64",
            about="detector, float64 output",
        ),
        Workload(
            "detector-forward",
            FORWARD,
            2,
            64,
            64,
            256,
            512,
            (14, 14),
            about="crop_and_resize on the detector's float32 image",
        ),
        Workload(
            "detector-grad-boxes",
            GRAD_BOXES,
            2,
            64,
            64,
            256,
            512,
            (14, 14),
            about="crop_and_resize_grad_boxes on the detector's problem",
        ),
    )
}

# Performance targets: (workload, what, ratio or column, bound, "<=" or ">=").
TARGETS = (
    (
        "detector",
        "cropgrad default <= 1.4 x roofline",
        "cropgrad_default_over_roofline",
        1.4,
        "<=",
    ),
    (
        "detector",
        "TF default / cropgrad default >= 2.5",
        "tf_default_over_cropgrad_default",
        2.5,
        ">=",
    ),
    (
        "augment",
        "TF default / cropgrad default >= 4",
        "tf_default_over_cropgrad_default",
        4.0,
        ">=",
    ),
    (
        "augment",
        "scaling 1 thread -> default >= 1.6",
        "scaling_1thread_over_default",
        1.6,
        ">=",
    ),
    (
        "dense",
        "TF default / cropgrad default >= 3",
        "tf_default_over_cropgrad_default",
        3.0,
        ">=",
    ),
    (
        "dense",
        "scaling 1 thread -> default >= 1.6",
        "scaling_1thread_over_default",
        1.6,
        ">=",
    ),
    *(
        (
            name,
            "TF deterministic / cropgrad 1 thread >= 2",
            "tf_deterministic_over_cropgrad_1thread",
            2.0,
            ">=",
        )
        for name in (
            "detector",
            "augment",
            "dense",
            "tiny",
            "detector-float16",
            "detector-float64",
        )
    ),
    ("tiny", "cropgrad default median call <= 10 us", CGD, 10e-6, "<="),
    (
        "tiny",
        "TF default / cropgrad default >= 4",
        "tf_default_over_cropgrad_default",
        4.0,
        ">=",
    ),
    (
        "detector-float16",
        "float16 time <= 1.3 x float32 time",
        "float16_over_float32",
        1.3,
        "<=",
    ),
    (
        "detector-float64",
        "float64 time <= 1.6 x float32 time",
        "float64_over_float32",
        1.6,
        "<=",
    ),
)


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


# --------------------------------------------------------------------------
# Data


def make_problem(workload, seed=SEED):
    """The arrays of a workload: the same for every process and column.

    Boxes ``[y1, x1, y1 + h, x1 + w]`` with ``y1, x1 ~ U(-0.1, 0.7)`` and
    ``h, w ~ U(0.05, 0.5)``, sorted random ``box_ind``, standard-normal
    float32 ``grads`` (and ``image`` for the ops that read one).  Each array
    has its own random stream, so workloads of the same geometry share
    boxes, grads and image.
    """
    batch, height, width, depth = workload.image_size
    n = workload.num_boxes
    rng = np.random.default_rng([seed, 0])
    y1 = rng.uniform(-0.1, 0.7, n)
    x1 = rng.uniform(-0.1, 0.7, n)
    h = rng.uniform(0.05, 0.5, n)
    w = rng.uniform(0.05, 0.5, n)
    boxes = np.stack([y1, x1, y1 + h, x1 + w], axis=1).astype(np.float32)
    box_ind = np.sort(rng.integers(0, batch, n)).astype(np.int32)
    problem = {"boxes": boxes, "box_ind": box_ind}
    if workload.op in (GRAD_IMAGE, GRAD_BOXES):
        problem["grads"] = np.random.default_rng([seed, 1]).standard_normal(
            (n, *workload.crop, depth), dtype=np.float32
        )
    if workload.op in (FORWARD, GRAD_BOXES):
        problem["image"] = np.random.default_rng([seed, 2]).standard_normal(
            workload.image_size, dtype=np.float32
        )
    return problem


def output_shape(workload):
    if workload.op == GRAD_IMAGE:
        return workload.image_size, workload.dtype
    if workload.op == FORWARD:
        return (workload.num_boxes, *workload.crop, workload.image_size[3]), np.dtype(
            np.float32
        )
    return (workload.num_boxes, 4), np.dtype(np.float32)


# --------------------------------------------------------------------------
# Timing


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
    """A timed column of a workload, run here or in a TensorFlow worker."""

    def __init__(self, name, fn=None, worker=None):
        self.name = name
        self.fn = fn
        self.worker = worker
        self.inner = 1
        self.estimate = 0.0
        self.samples = []

    def calibrate(self, settings):
        if self.worker is not None:
            self.inner, self.estimate = self.worker.calibrate(settings.block)
        else:
            self.inner, self.estimate = calibrate(self.fn, settings.block)

    def warm(self, settings):
        """Untimed calls before a block."""
        if self.estimate >= settings.warm_limit:
            return 0
        return min(
            100_000, max(1, math.ceil(settings.warm_time / max(self.estimate, 1e-8)))
        )

    def cost(self, settings):
        """Estimated seconds of one block of this column."""
        return (self.inner + self.warm(settings)) * self.estimate

    def measure(self, settings):
        warm = self.warm(settings)
        if self.worker is not None:
            value = self.worker.time(warm)
        else:
            value = time_block(self.fn, self.inner, warm)
        self.samples.append(value)


class RooflinePasses:
    """One read pass over `reads` and one zeroing pass over `writes`.

    With ``pool``, each array is cut into contiguous pieces, one per thread,
    and the pieces are handled at once; the calling thread takes the first.
    Arrays under 256 KiB per thread stay whole on the calling thread.
    """

    def __init__(self, reads, writes, pool=None, threads=1):
        self.pool = pool
        self.reads = [self._split(a, threads) for a in reads]
        self.writes = [self._split(a, threads) for a in writes]

    @staticmethod
    def _split(array, threads):
        flat = array.reshape(-1)
        pieces = max(1, min(threads, flat.nbytes // (256 * 1024)))
        return np.array_split(flat, pieces)

    def _run(self, fn, pieces):
        if len(pieces) == 1 or self.pool is None:
            for piece in pieces:
                fn(piece)
            return
        futures = [self.pool.submit(fn, piece) for piece in pieces[1:]]
        fn(pieces[0])
        for future in futures:
            future.result()

    def __call__(self):
        for pieces in self.reads:
            self._run(np.maximum.reduce, pieces)
        for pieces in self.writes:
            self._run(_zero, pieces)


def _zero(piece):
    piece.fill(0)


def cropgrad_columns(workload, problem, pool, threads):
    """The cropgrad and roofline columns of a workload: {name: callable}."""
    shape, dtype = output_shape(workload)
    out = np.zeros(shape, dtype)
    p = problem
    if workload.op == GRAD_IMAGE:
        size = list(workload.image_size)

        def run(num_threads, target):
            return cropgrad.crop_and_resize_grad_image(
                p["grads"],
                p["boxes"],
                p["box_ind"],
                size,
                dtype=dtype,
                out=target,
                num_threads=num_threads,
            )

        reads = [p["grads"]]
    elif workload.op == FORWARD:
        crop = list(workload.crop)

        def run(num_threads, target):
            return cropgrad.crop_and_resize(
                p["image"],
                p["boxes"],
                p["box_ind"],
                crop,
                out=target,
                num_threads=num_threads,
            )

        reads = [p["image"]]
    else:

        def run(num_threads, target):
            return cropgrad.crop_and_resize_grad_boxes(
                p["grads"],
                p["image"],
                p["boxes"],
                p["box_ind"],
                num_threads=num_threads,
            )

        reads = [p["grads"], p["image"]]
    columns = {
        CG1: lambda: run(1, out),
        CGD: lambda: run(None, out),
        ROOFN: RooflinePasses(reads, [out], pool, threads),
        ROOF1: RooflinePasses(reads, [out]),
    }
    if workload.op != GRAD_BOXES:  # the boxes gradient has no out= argument
        columns[CGN] = lambda: run(None, None)
    if workload.op == GRAD_IMAGE and dtype != np.float32:
        # The float32 call beside it, for the cost of the output dtype.
        out32 = np.zeros(shape, np.float32)
        columns[CG32] = lambda: cropgrad.crop_and_resize_grad_image(
            p["grads"], p["boxes"], p["box_ind"], size, out=out32
        )
    return columns


# --------------------------------------------------------------------------
# TensorFlow, in worker processes


def tensorflow_status(enabled=True):
    """(available, reason): whether the TensorFlow columns can be measured."""
    if not enabled:
        return False, "n/a (disabled with --no-tensorflow)"
    if importlib.util.find_spec("tensorflow") is None:
        return False, "n/a (TensorFlow not installed)"
    return True, ""


class WorkerError(RuntimeError):
    pass


class TensorFlowWorker:
    """A child process that times ``tf.raw_ops`` calls on request.

    The protocol is one JSON object per line on the child's stdin and stdout;
    the child's stderr (TensorFlow's log) goes to a temporary file that is
    shown when the child fails.
    """

    def __init__(self, mode, timeout=300.0):
        import tempfile

        self.mode = mode
        self.timeout = timeout
        self.log = tempfile.TemporaryFile(mode="w+b")
        package_parent = os.path.dirname(
            os.path.dirname(os.path.abspath(cropgrad.__file__))
        )
        code = (
            "import sys; sys.path.insert(0, sys.argv[1]); "
            "from cropgrad._bench import worker_main; worker_main(sys.argv[2])"
        )
        env = dict(os.environ)
        env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        self.proc = subprocess.Popen(
            [sys.executable, "-P", "-c", code, package_parent, mode],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.log,
            env=env,
        )
        self._buffer = b""
        self.info = None

    def _send(self, message):
        try:
            self.proc.stdin.write((json.dumps(message) + "\n").encode())
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError) as exc:
            raise WorkerError(self._failure(f"could not write to it ({exc})")) from None

    def _receive(self):
        deadline = time.monotonic() + self.timeout
        fd = self.proc.stdout.fileno()
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                message = self._failure(f"no answer within {self.timeout:.0f} s")
                self.proc.kill()
                self.proc.wait()
                raise WorkerError(message)
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                continue
            chunk = os.read(fd, 65536)
            if not chunk:
                raise WorkerError(self._failure("it exited"))
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        reply = json.loads(line)
        if not reply.get("ok"):
            raise WorkerError(f"TensorFlow ({self.mode}) failed: {reply.get('error')}")
        return reply

    def request(self, message):
        self._send(message)
        return self._receive()

    def _failure(self, what):
        self.proc.poll()
        self.log.seek(0)
        tail = self.log.read().decode(errors="replace").strip().splitlines()[-8:]
        code = self.proc.returncode
        status = f", exit status {code}" if code is not None else ""
        return f"TensorFlow worker ({self.mode}): {what}{status}" + (
            "\n    " + "\n    ".join(tail) if tail else ""
        )

    def start(self):
        self.info = self.request({"cmd": "hello"})
        return self.info

    def load(self, name):
        self._send({"cmd": "load", "workload": name})

    def loaded(self):
        return self._receive()

    def calibrate(self, block):
        reply = self.request({"cmd": "calibrate", "block": block})
        return reply["inner"], reply["estimate"]

    def time(self, warm):
        return self.request({"cmd": "time", "warm": warm})["seconds"]

    def close(self):
        if self.log.closed:
            return
        if self.proc.poll() is None:
            try:
                self._send({"cmd": "quit"})
                self.proc.wait(timeout=10)
            except (WorkerError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()
        self.log.close()


def _tensorflow_call(tf, workload, problem):
    """A no-argument callable running the workload's op in TensorFlow."""
    tensors = {k: tf.constant(v) for k, v in problem.items()}
    if workload.op == GRAD_IMAGE:
        size = tf.constant(list(workload.image_size), dtype=tf.int32)
        dtype = tf.as_dtype(workload.dtype)
        return lambda: tf.raw_ops.CropAndResizeGradImage(
            grads=tensors["grads"],
            boxes=tensors["boxes"],
            box_ind=tensors["box_ind"],
            image_size=size,
            T=dtype,
            method="bilinear",
        )
    if workload.op == FORWARD:
        crop = tf.constant(list(workload.crop), dtype=tf.int32)
        return lambda: tf.raw_ops.CropAndResize(
            image=tensors["image"],
            boxes=tensors["boxes"],
            box_ind=tensors["box_ind"],
            crop_size=crop,
            method="bilinear",
            extrapolation_value=0.0,
        )
    return lambda: tf.raw_ops.CropAndResizeGradBoxes(
        grads=tensors["grads"],
        image=tensors["image"],
        boxes=tensors["boxes"],
        box_ind=tensors["box_ind"],
        method="bilinear",
    )


def _determinism_enabled():
    """Whether TensorFlow's op determinism is on (None if it cannot say)."""
    try:  # not in the public API of every version
        from tensorflow.python.framework import config

        return bool(config.is_op_determinism_enabled())
    except (ImportError, AttributeError):
        return None


def worker_main(mode):
    """Body of a TensorFlow worker process (see `TensorFlowWorker`)."""
    # Keep the protocol's stdout to ourselves: anything a library prints
    # goes to stderr.
    channel = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)

    def reply(**message):
        channel.write(json.dumps({"ok": True, **message}) + "\n")
        channel.flush()

    def fail(error):
        channel.write(json.dumps({"ok": False, "error": error}) + "\n")
        channel.flush()

    try:
        import tensorflow as tf

        if mode == "deterministic":
            tf.config.experimental.enable_op_determinism()
    except Exception as exc:  # a broken TensorFlow install is not ours to fix
        tf = None
        error = f"n/a (TensorFlow failed to import: {type(exc).__name__}: {exc})"
    fn = None
    inner, estimate = 1, 0.0
    for line in sys.stdin:
        request = json.loads(line)
        cmd = request["cmd"]
        if cmd == "quit":
            break
        if tf is None:
            fail(error)
            continue
        try:
            if cmd == "hello":
                reply(
                    tensorflow=tf.__version__,
                    deterministic=_determinism_enabled(),
                    intra_op_threads=tf.config.threading.get_intra_op_parallelism_threads(),
                    inter_op_threads=tf.config.threading.get_inter_op_parallelism_threads(),
                )
            elif cmd == "load":
                fn = None
                workload = WORKLOADS[request["workload"]]
                fn = _tensorflow_call(tf, workload, make_problem(workload))
                reply()
            elif cmd == "calibrate":
                inner, estimate = calibrate(fn, request["block"])
                reply(inner=inner, estimate=estimate)
            elif cmd == "time":
                reply(seconds=time_block(fn, inner, int(request["warm"])))
            else:
                fail(f"unknown command {cmd!r}")
        except Exception as exc:
            fail(f"{type(exc).__name__}: {exc}")


# --------------------------------------------------------------------------
# The run


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
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    info["cpu_model"] = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    if info["cpu_model"] is None:
        info["cpu_model"] = platform.processor() or None
    return info


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


def _wait_until_quiet(limit):
    """Wait up to `limit` seconds for half a second in which others stay idle."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        meter = CpuMeter()
        time.sleep(0.5)
        other = meter.stop()["other_cpus"]
        if other is None or other <= NOISY / 2:
            return True
    return False


def _median(values):
    values = [v for v in values if v is not None]
    return float(np.median(values)) if values else None


def _paired_ratio(num, den):
    """Median over rounds of num[r] / den[r]."""
    if not num or not den or len(num) != len(den):
        return None
    return _median([a / b for a, b in zip(num, den) if b > 0])


def _plan_rounds(columns, settings):
    if settings.repeats is not None:
        return settings.repeats
    per_round = sum(c.cost(settings) for c in columns)
    rounds = int(settings.budget / max(per_round, 1e-9))
    return max(settings.min_rounds, min(settings.max_rounds, rounds))


def run_workload(workload, settings, workers, pool, threads, progress):
    """Measure one workload; return its result dict."""
    meter = CpuMeter([w.proc.pid for w in workers.values()])
    for worker in workers.values():
        worker.load(workload.name)
    problem = make_problem(workload)
    for worker in workers.values():
        worker.loaded()
    local = cropgrad_columns(workload, problem, pool, threads)
    columns = [Column(name, fn=fn) for name, fn in local.items()]
    columns += [Column(name, worker=w) for name, w in workers.items()]
    for column in columns:  # one at a time: nothing else runs meanwhile
        column.calibrate(settings)
    rounds = _plan_rounds(columns, settings)
    progress(
        f"    {rounds} rounds of {len(columns)} columns "
        f"(about {rounds * sum(c.cost(settings) for c in columns):.1f} s)"
    )
    for r in range(rounds):
        shift = r % len(columns)
        for column in columns[shift:] + columns[:shift]:
            column.measure(settings)
    samples = {c.name: c.samples for c in columns}
    # The roofline is the faster of the threaded and the one-thread passes
    # in each round: threads do not pay off on arrays that fit in a core's
    # cache, and a bound should not be beaten.
    samples[ROOF] = [min(a, b) for a, b in zip(samples[ROOFN], samples[ROOF1])]
    result = workload.as_dict()
    result["load"] = meter.stop()
    result["bytes"] = {k: int(v.nbytes) for k, v in problem.items()}
    shape, dtype = output_shape(workload)
    result["bytes"]["output"] = int(np.prod(shape)) * dtype.itemsize
    result["rounds"] = rounds
    result["calls_per_block"] = {c.name: c.inner for c in columns}
    result["median_s"] = {name: _median(samples.get(name, [])) for name in COLUMNS}
    result["min_s"] = {
        name: (min(samples[name]) if samples.get(name) else None) for name in COLUMNS
    }
    result["ratios"] = {
        key: _paired_ratio(samples.get(num), samples.get(den))
        for key, (num, den) in RATIOS.items()
    }
    if CG32 in samples:
        result["ratios"][f"{workload.dtype.name}_over_float32"] = _paired_ratio(
            samples[CGD], samples[CG32]
        )
    result["samples_s"] = samples
    return result


def _relative(results):
    """float16 / float32 and float64 / float32 times of the image gradient.

    Measured side by side in the float16 and float64 rows (default threads).
    """
    rel = {}
    for r in results:
        for key, value in r["ratios"].items():
            if key.endswith("_over_float32"):
                rel[f"{r['name']}: {key}"] = value
    return rel


def check_targets(results):
    """Each performance target with its measured figure: a list of dicts."""
    by_name = {r["name"]: r for r in results}
    position = {r["name"]: i for i, r in enumerate(results)}
    rows = []
    for name, what, key, bound, sense in sorted(
        TARGETS, key=lambda t: position.get(t[0], 0)
    ):
        if name not in by_name:
            continue
        r = by_name[name]
        value = r["ratios"].get(key) if key in r["ratios"] else r["median_s"].get(key)
        met = (
            None
            if value is None
            else (value <= bound if sense == "<=" else value >= bound)
        )
        rows.append(
            {
                "workload": name,
                "target": what,
                "measured": value,
                "bound": bound,
                "sense": sense,
                "met": met,
            }
        )
    return rows


def run(names, settings, tensorflow=True, progress=None):
    """Run the benchmark on the workloads `names`; return the results dict."""
    if progress is None:

        def progress(message):
            print(message, file=sys.stderr, flush=True)

    started = time.perf_counter()
    config = cropgrad.show_config("dicts")
    threads = int(config["default_threads"])
    tf_ok, tf_reason = tensorflow_status(tensorflow)
    tf_info = {"available": False, "reason": tf_reason, "version": None, "workers": {}}
    workers = {}
    if tf_ok:
        progress("starting TensorFlow (default and deterministic worker processes)...")
        try:
            for column, mode in TF_MODES.items():
                workers[column] = TensorFlowWorker(mode)
            for column, worker in workers.items():
                info = worker.start()
                info.pop("ok", None)
                tf_info["workers"][TF_MODES[column]] = info
            tf_info.update(
                available=True,
                reason="",
                version=next(iter(tf_info["workers"].values()))["tensorflow"],
            )
        except WorkerError as exc:
            progress(str(exc))
            for worker in workers.values():
                worker.close()
            workers = {}
            tf_info.update(available=False, reason=str(exc).splitlines()[0])
    results = []
    load_start = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    if load_start is not None and load_start > 1.0:
        progress(
            f"note: load average {load_start:.2f} before starting; other work "
            "on this machine makes the figures noisy"
        )
    pool = ThreadPoolExecutor(max_workers=threads) if threads > 1 else None
    retries = settings.noisy_retries
    try:
        for i, name in enumerate(names, 1):
            workload = WORKLOADS[name]
            progress(f"[{i}/{len(names)}] {name}: {workload.describe()}")
            attempts = []
            while True:
                t0 = time.perf_counter()
                try:
                    result = run_workload(
                        workload, settings, workers, pool, threads, progress
                    )
                except WorkerError as exc:
                    # Go on without TensorFlow rather than lose the cropgrad figures.
                    progress(f"    {exc}\n    measuring the rest without TensorFlow")
                    for worker in workers.values():
                        worker.close()
                    workers = {}
                    tf_info.update(
                        available=False, reason="n/a (TensorFlow worker failed)"
                    )
                    continue
                result["seconds"] = time.perf_counter() - t0
                attempts.append(result)
                other = result["load"]["other_cpus"]
                noisy = other is not None and other > NOISY
                busy = (
                    f"; other processes used {other:.2f} CPUs meanwhile"
                    if other is not None
                    else ""
                )
                progress(
                    f"    done in {result['seconds']:.1f} s{busy}"
                    + (" (noisy)" if noisy else "")
                )
                if not noisy or retries <= 0:
                    break
                if not _wait_until_quiet(settings.quiet_wait):
                    progress("    the machine stays busy: keeping this measurement")
                    break
                retries -= 1
                progress("    measuring it again")
            # The attempt least disturbed by other processes.
            result = min(attempts, key=lambda r: r["load"]["other_cpus"] or 0.0)
            result["attempts"] = [
                {"load": r["load"], "seconds": r["seconds"]} for r in attempts
            ]
            results.append(result)
    finally:
        if pool is not None:
            pool.shutdown()
        for worker in workers.values():
            worker.close()
    relative = _relative(results)
    return {
        "format": "cropgrad-bench-1",
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "machine": machine_info(),
        "versions": {
            "cropgrad": cropgrad.__version__,
            "numpy": np.__version__,
            "python": platform.python_version(),
            "tensorflow": tf_info["version"],
        },
        "show_config": config,
        "default_threads": threads,
        "tensorflow": tf_info,
        "settings": settings.as_dict(),
        "columns": list(COLUMNS),
        "ratios": {k: list(v) for k, v in RATIOS.items()},
        "load": {
            "loadavg_at_start": load_start,
            "other_cpus_max": max(
                (
                    r["load"]["other_cpus"]
                    for r in results
                    if r["load"]["other_cpus"] is not None
                ),
                default=None,
            ),
        },
        "workloads": results,
        "relative": relative,
        "targets": check_targets(results),
        "total_seconds": time.perf_counter() - started,
    }


# --------------------------------------------------------------------------
# Output


def _micro():
    encoding = getattr(sys.stdout, "encoding", None) or "ascii"
    try:
        "\u00b5".encode(encoding)
        return "\u00b5s"
    except (UnicodeEncodeError, LookupError):
        return "us"


def format_time(seconds, unit_us=None):
    if seconds is None:
        return "n/a"
    if seconds < 1e-3:
        return f"{seconds * 1e6:.1f} {unit_us or _micro()}"
    if seconds < 1.0:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds:.3f} s"


def format_ratio(value):
    return "n/a" if value is None else f"{value:.2f}"


def format_table(report):
    """The results as an aligned text table with a legend."""
    threads = report["default_threads"]
    us = _micro()
    heads = [
        "workload",
        "cg 1 thr",
        f"cg {threads} thr",
        "cg new out",
        "roofline",
        "TF default",
        "TF determ",
        "TF/cg",
        "TFdet/cg1",
        "cg/roof",
        "scaling",
        "other",
    ]
    rows = []
    for r in report["workloads"]:
        m, q = r["median_s"], r["ratios"]
        rows.append(
            [
                r["name"],
                *(format_time(m[c], us) for c in (CG1, CGD, CGN, ROOF, TFD, TFX)),
                *(
                    format_ratio(q[k])
                    for k in (
                        "tf_default_over_cropgrad_default",
                        "tf_deterministic_over_cropgrad_1thread",
                        "cropgrad_default_over_roofline",
                        "scaling_1thread_over_default",
                    )
                ),
                format_ratio(r["load"]["other_cpus"]),
            ]
        )
    widths = [
        max(len(h), *(len(row[i]) for row in rows)) if rows else len(h)
        for i, h in enumerate(heads)
    ]

    def line(cells):
        return "  ".join(
            c.ljust(widths[0]) if i == 0 else c.rjust(widths[i])
            for i, c in enumerate(cells)
        )

    out = [line(heads), "  ".join("-" * w for w in widths)]
    out += [line(row) for row in rows]
    tf = report["tensorflow"]
    out.append("")
    if not tf["available"]:
        out.append(f"TensorFlow columns: {tf['reason']}")
    else:
        out.append(
            f"TensorFlow {tf['version']} (tf.raw_ops, inputs as tensors made before timing)"
        )
    out += [
        "Times are medians over rounds of interleaved measurements; ratios are medians of the",
        f"per-round ratios. cg: cropgrad into a preallocated out= (1 thread / default {threads});",
        "cg new out: default threads, allocating the result; roofline: NumPy reading the inputs",
        f"once plus zeroing the output (the faster of 1 and {threads} threads); TF/cg: TF default / cg",
        "default;"
        " TFdet/cg1: TF with op determinism / cg 1 thread; cg/roof: cg default / roofline;",
        "scaling: cg 1 thread / cg default; other: CPUs that other processes kept busy meanwhile",
        f"(above {NOISY} the row is noisy).",
    ]
    machine = report["machine"]
    out.append(
        f"cropgrad {report['versions']['cropgrad']}, NumPy {report['versions']['numpy']}, "
        f"{machine['cpu_count']} CPUs ({machine['cpu_model']}), "
        f"{report['total_seconds']:.0f} s"
    )
    return "\n".join(out)


def format_targets(report):
    rows = report["targets"]
    if not rows:
        return ""
    out = ["Performance targets:"]
    us = _micro()
    for row in rows:
        value = row["measured"]
        if row["target"].endswith(" us"):
            shown = format_time(value, us)
            bound = format_time(row["bound"], us)
        else:
            shown, bound = format_ratio(value), f"{row['bound']:g}"
        verdict = "n/a" if row["met"] is None else ("met" if row["met"] else "MISSED")
        out.append(
            f"  {row['workload']:<17} {row['target']:<40} {shown:>9} "
            f"({row['sense']} {bound}) {verdict}"
        )
    return "\n".join(out)


def write_json(report, path):
    with open(path, "w") as f:
        json.dump(report, f, indent=1)
        f.write("\n")


PLOT_COLUMNS = (
    (CG1, "cropgrad, 1 thread"),
    (CGD, "cropgrad, default threads"),
    (ROOF, "roofline (NumPy)"),
    (TFD, "TensorFlow default"),
    (TFX, "TensorFlow deterministic"),
)


def plot(report, path):
    """Bars per workload of the main columns, on a log time axis."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    results = report["workloads"]
    fig, ax = plt.subplots(figsize=(max(6.0, 1.5 * len(results) + 2), 5.0))
    width = 0.8 / len(PLOT_COLUMNS)
    colours = ("#9ecae1", "#3182bd", "#bdbdbd", "#fdae6b", "#e6550d")
    for k, ((column, label), colour) in enumerate(zip(PLOT_COLUMNS, colours)):
        xs, heights = [], []
        for i, r in enumerate(results):
            value = r["median_s"].get(column)
            if value is not None:
                xs.append(i + (k - (len(PLOT_COLUMNS) - 1) / 2) * width)
                heights.append(value * 1e3)
        if column in (TFD, TFX) and not report["tensorflow"]["available"]:
            label += f" ({report['tensorflow']['reason']})"
        ax.bar(
            xs,
            heights,
            width,
            label=label,
            color=colour,
            edgecolor="black",
            linewidth=0.4,
        )
    ax.set_yscale("log")
    tallest = max((r["median_s"][c] or 0) for r in results for c, _ in PLOT_COLUMNS)
    if tallest > 0:  # room above the bars for the legend
        ax.set_ylim(top=tallest * 1e3 * 40)
    ax.set_xticks(range(len(results)))
    ax.set_xticklabels([r["name"] for r in results], rotation=20, ha="right")
    ax.set_ylabel("median time per call (ms, log scale)")
    machine = report["machine"]
    ax.set_title(
        f"cropgrad {report['versions']['cropgrad']} on {machine['cpu_count']} CPUs"
        + (
            f", TensorFlow {report['versions']['tensorflow']}"
            if report["versions"]["tensorflow"]
            else ""
        )
    )
    ax.grid(axis="y", which="both", alpha=0.3)
    ax.legend(fontsize="small", loc="upper center", ncol=3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
