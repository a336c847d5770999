"""The RoIAlign rows' references, torchvision and ONNX Runtime, in workers.

Each reference column is timed in a worker process of its own, driven over
a pipe like TensorFlow's (`cropgrad_bench.tf_worker.WorkerProcess`), so
that no other thread pool shares a process with cropgrad's, and so that
torchvision can run in **another Python**: PyPI's torchvision only imports
beside the PyTorch release it was built for, which need not be the one
installed with cropgrad.  The worker's program is ``roi_child.py``, which
imports nothing from cropgrad.

Columns (NCHW rows only: both references compute in NCHW):

``torchvision``
    ``torchvision.ops.roi_align`` (forward rows) and
    ``torch.ops.torchvision._roi_align_backward`` (input-gradient rows),
    in the Python that `torchvision_python` picks;
``onnxruntime_1thread`` / ``onnxruntime_default``
    ONNX Runtime's ``RoiAlign`` on 1 thread / on cropgrad's default thread
    count (forward rows), in cropgrad's Python.

The arrays go to the workers in an ``.npz`` file written for each row;
each worker answers ``load`` with its result's SHA-256, which the row
compares with cropgrad's (``same_bits`` in the JSON).
"""

import importlib.util
import os
import shutil
import sys
import tempfile

import numpy as np

from .columns import ORT1, ORTD, TV
from .tf_worker import WorkerError, WorkerProcess
from .workloads import FORWARD, FORWARD_BACKWARD, GRAD_IMAGE, to_nchw

TORCHVISION_PYTHON_ENV = "CROPGRAD_BENCH_TORCHVISION_PYTHON"
CHILD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "roi_child.py")

# Column -> backend of roi_child.py.
BACKENDS = {TV: "torchvision", ORT1: "onnxruntime", ORTD: "onnxruntime"}
LABELS = {"torchvision": "torchvision", "onnxruntime": "ONNX Runtime"}


def torchvision_python(given=None):
    """(path or None, reason): the Python that runs torchvision's worker.

    `given` is ``--torchvision-python`` (False: ``--no-torchvision``);
    without it, the environment variable ``CROPGRAD_BENCH_TORCHVISION_PYTHON``,
    else this Python if it has torchvision.
    """
    if given is False:
        return None, "n/a (disabled with --no-torchvision)"
    source = "--torchvision-python"
    if not given:
        given, source = os.environ.get(TORCHVISION_PYTHON_ENV), TORCHVISION_PYTHON_ENV
    if given:
        path = shutil.which(given)
        if path is None:
            return None, f"n/a ({source} {given}: not an executable file)"
        return os.path.abspath(path), ""
    if importlib.util.find_spec("torchvision") is not None:
        return sys.executable, ""
    return None, (
        "n/a (torchvision is not installed here: give --torchvision-python "
        f"PATH or set {TORCHVISION_PYTHON_ENV} to a Python with torch and "
        "torchvision)"
    )


def onnxruntime_status(enabled=True):
    """(available, reason): whether ONNX Runtime's columns can be measured."""
    if not enabled:
        return False, "n/a (disabled with --no-onnxruntime)"
    missing = [
        m for m in ("onnxruntime", "onnx") if importlib.util.find_spec(m) is None
    ]
    if missing:
        return False, f"n/a ({' and '.join(missing)} not installed)"
    return True, ""


def not_measured(workload):
    """{reference column: why it does not time `workload`'s op}."""
    reasons = {}
    if workload.data_format != "NCHW":
        why = "n/a (NCHW only: see the row's NCHW twin)"
        return dict.fromkeys(BACKENDS, why)
    op = workload.reference_op or workload.op
    if op != FORWARD:
        reasons[ORT1] = reasons[ORTD] = "n/a (ONNX Runtime's RoiAlign has no gradient)"
    if op not in (FORWARD, GRAD_IMAGE, FORWARD_BACKWARD):
        reasons[TV] = "n/a (torchvision has no boxes gradient)"
    return reasons


class ReferenceWorker(WorkerProcess):
    """A worker timing torchvision's or ONNX Runtime's RoIAlign.

    Runs ``roi_child.py`` with `python`; `threads` is ONNX Runtime's
    intra-op thread count.
    """

    needs_problem_file = True

    def __init__(self, backend, python, threads=None, timeout=300.0):
        self.backend = backend
        label = LABELS[backend] + (f" ({threads} threads)" if threads else "")
        argv = [python, "-P", CHILD, backend, *([str(threads)] if threads else [])]
        super().__init__(argv, label, timeout)

    def load(self, workload, problem_file=None):
        self._send(
            {
                "cmd": "load",
                "workload": workload.name,
                "file": problem_file,
                **workload.reference_spec(),
            }
        )


def write_problem(problem, workload, directory):
    """The problem's arrays in NCHW, in an ``.npz`` file: its path."""
    if workload.data_format != "NCHW":
        problem = to_nchw(problem)
    fd, path = tempfile.mkstemp(suffix=".npz", dir=directory)
    with os.fdopen(fd, "wb") as f:
        np.savez(f, **problem)
    return path


class References:
    """The reference workers of a run, their status and what they measure."""

    def __init__(self, threads, progress):
        self.threads = threads
        self.progress = progress
        self.workers = {}
        self.reasons = {}  # column -> why it is not measured in any row
        self.info = {
            backend: {"available": False, "reason": "n/a (no RoIAlign row)"}
            for backend in LABELS
        }
        self.directory = None

    def start(self, torchvision=None, onnxruntime=True):
        """Start the workers; `torchvision` as for `torchvision_python`."""
        python, reason = torchvision_python(torchvision)
        self.info["torchvision"] = {
            "available": False,
            "reason": reason,
            "python": python,
            "version": None,
            "workers": {},
        }
        ok, ort_reason = onnxruntime_status(onnxruntime)
        self.info["onnxruntime"] = {
            "available": False,
            "reason": ort_reason,
            "version": None,
            "workers": {},
        }
        wanted = {}
        if python:
            wanted[TV] = (python, None)
        if ok:
            wanted[ORT1] = (sys.executable, 1)
            wanted[ORTD] = (sys.executable, self.threads)
        for column in BACKENDS:
            if column not in wanted:
                self.reasons[column] = self.info[BACKENDS[column]]["reason"]
        if not wanted:
            return
        self.directory = tempfile.mkdtemp(prefix="cropgrad-bench-")
        self.progress(
            "starting the RoIAlign references: "
            + ", ".join(f"{c} ({wanted[c][0]})" for c in wanted)
            + "..."
        )
        # All processes first, so that their imports overlap.
        for column, (python, threads) in wanted.items():
            try:
                self.workers[column] = ReferenceWorker(
                    BACKENDS[column], python, threads
                )
            except WorkerError as exc:
                self._mark(column, str(exc))
        for column, worker in list(self.workers.items()):
            try:
                info = worker.start()
            except WorkerError as exc:
                self.drop(worker, str(exc))
                continue
            backend = self.info[BACKENDS[column]]
            backend["workers"][column] = info
            backend.update(available=True, reason="", version=info.get(worker.backend))

    def _mark(self, column, message):
        """`column` is not measured from now on, because of `message`."""
        self.progress(f"    {message}")
        reason = f"n/a ({message.splitlines()[0]})"
        if message.startswith("n/a") or "failed: n/a" in message:
            # The worker's own reason (e.g. torchvision failed to import).
            reason = message[message.index("n/a") :].splitlines()[0]
        self.reasons[column] = reason
        backend = self.info[BACKENDS[column]]
        backend.get("workers", {}).pop(column, None)
        if not any(BACKENDS[c] == BACKENDS[column] for c in self.workers):
            backend.update(available=False, reason=reason)

    def drop(self, worker, message):
        """Close a failed `worker`; its column reads n/a from now on."""
        column = next((c for c, w in self.workers.items() if w is worker), None)
        if column is None:
            return
        del self.workers[column]
        worker.close()
        self._mark(column, message)

    def owns(self, worker):
        return any(w is worker for w in self.workers.values())

    def for_workload(self, workload):
        """{column: worker} of the references that time `workload`'s op."""
        skipped = not_measured(workload)
        return {c: w for c, w in self.workers.items() if c not in skipped}

    def reasons_for(self, workload):
        """{reference column: reason} for the columns `workload` lacks."""
        reasons = dict(self.reasons)
        reasons.update(not_measured(workload))
        return reasons

    def close(self):
        for worker in self.workers.values():
            worker.close()
        self.workers = {}
        if self.directory is not None:
            shutil.rmtree(self.directory, ignore_errors=True)
            self.directory = None
