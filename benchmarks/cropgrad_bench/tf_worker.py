"""TensorFlow's columns, timed in worker processes of their own.

Op determinism cannot be switched off again in a process, so TensorFlow's
default and deterministic modes each run in a worker process, driven over a
pipe (one JSON object per line); TensorFlow's thread pools never share a
process with cropgrad's.  `WorkerProcess`, the parent's end of that pipe,
drives any program that speaks its protocol (the RoIAlign rows'
references too: `cropgrad_bench.roi_worker`).
"""

import importlib.util
import json
import os
import select
import subprocess
import sys
import tempfile
import time

import cropgrad

from .timing import calibrate, time_block
from .workloads import FORWARD, GRAD_IMAGE, WORKLOADS, make_problem


def tensorflow_status(enabled=True):
    """(available, reason): whether the TensorFlow columns can be measured."""
    if not enabled:
        return False, "n/a (disabled with --no-tensorflow)"
    if importlib.util.find_spec("tensorflow") is None:
        return False, "n/a (TensorFlow not installed)"
    return True, ""


class WorkerError(RuntimeError):
    """A worker process failed, hung or could not be started.

    ``worker`` is the `WorkerProcess` that failed (None if unknown).
    """

    def __init__(self, message, worker=None):
        super().__init__(message)
        self.worker = worker


class WorkerProcess:
    """A child process that times calls on request (the protocol below).

    The protocol is one JSON object per line on the child's stdin and stdout;
    the child's stderr (its libraries' log) goes to a temporary file that is
    shown when the child fails.  Requests: ``hello`` (the reply describes the
    child), ``load`` (build the call of a workload), ``calibrate`` (``block``
    seconds: reply ``inner``, ``estimate``), ``time`` (``warm`` untimed calls,
    then a block: reply ``seconds`` per call) and ``quit``; every reply has
    ``"ok": true``, or ``"ok": false`` and an ``error``.

    `argv` is the child's command line and `label` names it in messages.
    """

    def __init__(self, argv, label, timeout=300.0, env=None):
        self.label = label
        self.timeout = timeout
        self.log = tempfile.TemporaryFile(mode="w+b")
        try:
            self.proc = subprocess.Popen(
                argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=self.log,
                env=env,
            )
        except OSError as exc:
            self.log.close()
            raise WorkerError(
                f"{label} worker: could not start {argv[0]} ({exc})"
            ) from None
        self._buffer = b""
        self.info = None

    def _send(self, message):
        try:
            self.proc.stdin.write((json.dumps(message) + "\n").encode())
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError) as exc:
            raise WorkerError(
                self._failure(f"could not write to it ({exc})"), self
            ) from None

    def _receive(self):
        deadline = time.monotonic() + self.timeout
        fd = self.proc.stdout.fileno()
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                message = self._failure(f"no answer within {self.timeout:.0f} s")
                self.proc.kill()
                self.proc.wait()
                raise WorkerError(message, self)
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                continue
            chunk = os.read(fd, 65536)
            if not chunk:
                raise WorkerError(self._failure("it exited"), self)
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        reply = json.loads(line)
        if not reply.pop("ok", False):
            raise WorkerError(f"{self.label} failed: {reply.get('error')}", self)
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
        return f"{self.label} worker: {what}{status}" + (
            "\n    " + "\n    ".join(tail) if tail else ""
        )

    def start(self):
        self.info = self.request({"cmd": "hello"})
        return self.info

    def load(self, workload, problem_file=None):
        """Ask for the call of `workload` (the reply comes with `loaded`)."""
        self._send({"cmd": "load", "workload": workload.name})

    def loaded(self):
        """The reply to `load`: a dict (empty, or what the worker reports)."""
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
        for pipe in (self.proc.stdin, self.proc.stdout):
            try:
                pipe.close()
            except OSError:  # a broken pipe: nothing left to flush
                pass
        self.log.close()


class TensorFlowWorker(WorkerProcess):
    """A child process that times ``tf.raw_ops`` calls on request.

    It runs this module's `worker_main` in the same Python; `load` sends
    only the workload's name (the child makes the arrays from the seed).
    """

    def __init__(self, mode, timeout=300.0):
        self.mode = mode
        # The child imports the cropgrad this process runs and this package
        # (beside benchmarks/bench.py), wherever they were found.
        paths = os.pathsep.join(
            os.path.dirname(os.path.dirname(os.path.abspath(module.__file__)))
            for module in (cropgrad, sys.modules[__package__])
        )
        code = (
            "import os, sys; sys.path[:0] = sys.argv[1].split(os.pathsep); "
            "from cropgrad_bench.tf_worker import worker_main; "
            "worker_main(sys.argv[2])"
        )
        env = dict(os.environ)
        env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        super().__init__(
            [sys.executable, "-P", "-c", code, paths, mode],
            f"TensorFlow ({mode})",
            timeout,
            env,
        )


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
