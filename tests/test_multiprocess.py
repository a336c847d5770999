"""Multi-process jobs: docs/scaling.md's recipes run as written, on loopback.

PyTorch DDP (torchrun, gloo, two ranks), JAX (two processes joined by
jax.distributed, shard_map over a global mesh) and Dask (a LocalCluster of
two worker processes, then the same job with one worker killed while it
runs).  The doc's blocks marked ``<!-- test: NAME -->`` are written to a
temporary folder and the commands run with bash: ``python`` and
``torchrun`` are this interpreter.  Each script the commands name is a shim
that runs the doc's code through ``multiprocess/harness.py``, which records
each process's thread counts (and, for DDP, every call of the op with its
gradients) for the checks here.

Each job runs in a session of its own with a hard timeout.  Every process
it starts carries a token in its environment: whatever still runs when the
job ends or times out (torchrun starts its workers in sessions of their
own) is found in /proc and killed, and a job that leaves a process behind
fails.  The temporary folder, which is also the jobs' TMPDIR, is removed.

Skipped without PyTorch, JAX or Dask unless CROPGRAD_REQUIRE_ADAPTERS=1
(CI sets it): then a missing one fails the run.
"""

import contextlib
import json
import os
import pathlib
import re
import runpy
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid

import numpy as np
import pytest
from _helpers import assert_same_bits, required, unrequired

import cropgrad

REQUIRE = required("CROPGRAD_REQUIRE_ADAPTERS")


def _framework(*names):
    """Import `names` (the first is returned); None if one is missing."""
    try:
        modules = [__import__(name) for name in names]
    except ImportError:
        if REQUIRE:
            raise
        return None
    return modules[0]


torch = _framework("torch")
jax = _framework("jax")
distributed = _framework("distributed", "dask")

HERE = pathlib.Path(__file__).resolve().parent
HARNESS = HERE / "multiprocess"
DOC = HERE.parent / "docs" / "scaling.md"

pytestmark = [
    pytest.mark.skipif(os.name != "posix", reason="the jobs run with bash"),
    pytest.mark.skipif(
        not DOC.exists() and not REQUIRE,
        reason="the documentation is not beside the tests",
    ),
]
needs_torch = pytest.mark.skipif(
    torch is None, reason=unrequired("PyTorch is not installed")
)
needs_jax = pytest.mark.skipif(jax is None, reason=unrequired("JAX is not installed"))
needs_dask = pytest.mark.skipif(
    distributed is None, reason=unrequired("Dask is not installed")
)

# Hang guards, not timings: a job that takes longer is killed and fails.
JOB_TIMEOUT = 240
# Two processes (ranks, JAX processes, Dask workers), one cropgrad thread
# each: what the doc's commands (and Dask's default) give on any machine.
PROCESSES = 2
TOKEN = "CROPGRAD_MP_JOB"


def doc_blocks():
    """{name: text} of the doc's fenced blocks marked ``<!-- test: NAME -->``."""
    text = DOC.read_text(encoding="utf-8")
    return dict(re.findall(r"<!-- test: (\S+) -->\n```\w*\n(.*?)```", text, re.S))


def test_doc_marks_every_recipe():
    blocks = doc_blocks()
    for recipe in ("ddp_roi", "jax_grads", "dask_grads"):
        assert f"{recipe}.py" in blocks and f"{recipe}.sh" in blocks, recipe
        assert f"{recipe}.py" in blocks[f"{recipe}.sh"], recipe


# --------------------------------------------------------------------------
# Jobs


def _processes_with(token):
    """Pids of the processes whose environment holds the job's token."""
    if not os.path.isdir("/proc/self"):
        return []  # no /proc: killing the job's process group must do
    needle = b"\0" + f"{TOKEN}={token}".encode() + b"\0"
    pids = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/environ", "rb") as f:
                environ = b"\0" + f.read()
        except OSError:  # gone, or not ours
            continue
        if needle in environ:
            pids.append(int(entry.name))
    return pids


def _describe(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmdline = f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        cmdline = "(gone)"
    return f"{pid}: {cmdline}"


class Job:
    """A command in a session of its own, output to a log, killed at a deadline."""

    def __init__(self, args, cwd, env, timeout=JOB_TIMEOUT):
        self.token = uuid.uuid4().hex
        self.log_path = pathlib.Path(cwd, f"job-{self.token[:8]}.log")
        self.started = time.monotonic()
        self.deadline = self.started + timeout
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(
                args,
                cwd=cwd,
                env={**env, TOKEN: self.token},
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def log(self, lines=60):
        text = self.log_path.read_text(errors="replace").splitlines()
        return "\n".join(text[-lines:])

    def failed_with(self, failures):
        """Whether it failed, or is failing, with one of `failures` (lowercase)."""
        if self.proc.poll() == 0:
            return False
        output = self.log_path.read_text(errors="replace").lower()
        return any(failure in output for failure in failures)

    def processes(self):
        return _processes_with(self.token)

    def kill(self):
        """SIGKILL the job's process group and every process with its token."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        for _ in range(50):  # until none is left (a killed one may linger)
            left = self.processes()
            if not left:
                break
            for pid in left:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.1)
        self.proc.wait()

    def wait(self):
        """The exit status; fails the test when the job outlives its deadline."""
        try:
            return self.proc.wait(timeout=max(self.deadline - time.monotonic(), 0))
        except subprocess.TimeoutExpired:
            self.kill()
            pytest.fail(f"the job timed out and was killed; its output:\n{self.log()}")

    def finish(self):
        """Wait, then fail unless it exited with 0 and left no process behind."""
        status = self.wait()
        assert status == 0, f"the job failed ({status}); its output:\n{self.log()}"
        left = self.processes()
        for _ in range(100):  # a process still exiting is not left behind
            if not left:
                return
            time.sleep(0.1)
            left = self.processes()
        described = [_describe(pid) for pid in left]
        self.kill()
        pytest.fail(f"the job left processes behind: {described}")


@contextlib.contextmanager
def job(args, cwd, env, timeout=JOB_TIMEOUT):
    """A started `Job`; nothing it started survives the with block."""
    started = Job(args, cwd, env, timeout)
    try:
        yield started
    finally:
        if started.proc.poll() is None or started.processes():
            started.kill()


@pytest.fixture
def folder():
    """A temporary folder: recipes, shims, the jobs' TMPDIR and outputs."""
    with tempfile.TemporaryDirectory(prefix="cropgrad-mp-") as path:
        path = pathlib.Path(path)
        for sub in ("bin", "recipes", "run", "out", "tmp"):
            (path / sub).mkdir()
        # `python` and `torchrun` in the doc's commands: this interpreter.
        launchers = {
            "python": f'exec "{sys.executable}" "$@"',
            "torchrun": f'exec "{sys.executable}" -m torch.distributed.run "$@"',
        }
        for name, line in launchers.items():
            launcher = path / "bin" / name
            launcher.write_text(f"#!/bin/sh\n{line}\n")
            launcher.chmod(0o755)
        yield path


SHIM = """\
# Runs docs/scaling.md's {name} through the test's harness.
import sys

sys.path.insert(0, {harness!r})
import harness

harness.run({recipe!r}, {out!r}, record={record!r})
"""


def prepare(folder, name, record=False):
    """The doc's recipe `name` (recipes/) and its shim (run/); its command."""
    blocks = doc_blocks()
    recipe = folder / "recipes" / f"{name}.py"
    recipe.write_text(blocks[f"{name}.py"])
    shim = SHIM.format(
        name=recipe.name,
        harness=str(HARNESS),
        recipe=str(recipe),
        out=str(folder / "out"),
        record=record,
    )
    (folder / "run" / recipe.name).write_text(shim)
    return blocks[f"{name}.sh"]


def environment(folder, **extra):
    """The jobs' environment: the doc's launchers first, TMPDIR in `folder`.

    Without the caller's thread count, Dask settings and proxies (the jobs
    talk over loopback only; gRPC, under JAX, would try a proxy).
    """
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("OMP_NUM_THREADS", "PYTHONSTARTUP")
        and not k.startswith("DASK_")
        and not k.lower().endswith("_proxy")
    }
    env["PATH"] = f"{folder / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env["TMPDIR"] = str(folder / "tmp")
    env.update(extra)
    return env


def run_doc_command(folder, command, env, transient=(), attempts=3):
    """Run the doc's `command` with bash in run/; fails unless it succeeds.

    `command` and `env` may be functions of the attempt's number.  A job
    whose output shows one of the `transient` failures (lowercase text) is
    killed at once and run again on fresh outputs, at most `attempts` times.
    """
    for attempt in range(attempts):
        args = ["bash", "-c", command(attempt) if callable(command) else command]
        with job(args, folder / "run", env(attempt) if callable(env) else env) as run:
            while run.proc.poll() is None and time.monotonic() < run.deadline:
                if run.failed_with(transient):
                    break
                time.sleep(0.1)
            if not run.failed_with(transient):
                run.finish()
                return attempt
            run.kill()
            last = run.log()
        for path in [*(folder / "out").iterdir(), *(folder / "run").iterdir()]:
            if path.parent.name == "out" or path.suffix != ".py":  # not a shim
                path.unlink()
    pytest.fail(f"{attempts} attempts failed; the last one's output:\n{last}")


def processes(folder):
    """The harness's records of the processes that ran a recipe, by pid."""
    records = [json.loads(p.read_text()) for p in (folder / "out").glob("process-*")]
    return sorted(records, key=lambda r: (r.get("rank") or "", r["pid"]))


def recipe_module(path):
    """The recipe at `path` imported as a module (its __main__ part not run)."""
    return runpy.run_path(str(path), run_name="recipe")


def assert_one_thread_each(records, **expected):
    """The processes' team sizes: OMP_NUM_THREADS=1 as the doc sets it."""
    assert len(records) == PROCESSES, records
    for record in records:
        assert record["omp_num_threads"] == "1", record
        assert record["default_threads"] == 1, record
        for key, value in expected.items():
            assert record[key] == value, (key, record)


# --------------------------------------------------------------------------
# PyTorch DDP


def _crop_and_resize_numpy(arrays, options):
    """The NumPy API's result and gradients for a recorded crop_and_resize."""
    image, boxes, box_ind = arrays["image"], arrays["boxes"], arrays["box_ind"]
    method = options["method"]
    common = {
        "data_format": options["data_format"],
        "flush_denormals": options["flush_denormals"],
    }
    grads = arrays["d_result"]
    return {
        "result": cropgrad.crop_and_resize(
            image,
            boxes,
            box_ind,
            options["crop_size"],
            method,
            options["extrapolation_value"],
            **common,
        ),
        "d_image": cropgrad.crop_and_resize_grad_image(
            grads, boxes, box_ind, image.shape, image.dtype, method, **common
        ),
        "d_boxes": cropgrad.crop_and_resize_grad_boxes(
            grads, image, boxes, box_ind, method, **common
        ),
    }


def _roi_align_numpy(arrays, options):
    """The NumPy API's result and gradients for a recorded roi_align (boxes
    ``[K, 5]``: the image's index, whose gradient is zero, then the box)."""
    image, rois, grads = arrays["input"], arrays["boxes"], arrays["d_result"]
    boxes, box_ind = rois[:, 1:], rois[:, 0].astype(np.int64)
    common = {
        "spatial_scale": options["spatial_scale"],
        "sampling_ratio": options["sampling_ratio"],
        "aligned": options["aligned"],
    }
    d_boxes = cropgrad.roi_align_grad_boxes(grads, image, boxes, box_ind, **common)
    return {
        "result": cropgrad.roi_align(
            image, boxes, box_ind, options["output_size"], **common
        ),
        "d_input": cropgrad.roi_align_grad_image(
            grads, boxes, box_ind, image.shape, **common
        ),
        "d_boxes": np.concatenate([np.zeros_like(d_boxes[:, :1]), d_boxes], 1),
    }


# Each recorded op (harness.RECORDED): the NumPy API's result and gradients
# for a call, from its recorded arguments.
NUMPY_GRADIENTS = {
    "crop_and_resize": _crop_and_resize_numpy,
    "roi_align": _roi_align_numpy,
}


@needs_torch
def test_ddp_ranks_have_the_numpy_gradients_and_one_process_parameters(folder):
    command = prepare(folder, "ddp_roi", record=True)
    env = {}
    if os.path.isdir("/sys/class/net/lo"):
        env["GLOO_SOCKET_IFNAME"] = "lo"  # loopback only
    run_doc_command(folder, command, environment(folder, **env))

    ranks = processes(folder)
    assert_one_thread_each(ranks, torch_threads=1)
    assert [r["rank"] for r in ranks] == ["0", "1"]
    for rank in ranks:
        ops = sorted({call["op"] for call in rank["calls"]})
        assert ops == sorted(NUMPY_GRADIENTS), ops
        with np.load(folder / "out" / f"calls-{rank['pid']}.npz") as arrays:
            numbered = {name: arrays[name] for name in arrays.files}
        for i, call in enumerate(rank["calls"]):
            recorded = {
                name.split(".", 1)[1]: array
                for name, array in numbered.items()
                if name.startswith(f"{i}.")
            }
            expected = NUMPY_GRADIENTS[call["op"]](recorded, call["options"])
            # The model differentiates each op with respect to both.
            assert set(expected) <= recorded.keys(), sorted(recorded)
            for key, value in expected.items():
                what = f"rank {rank['rank']}, call {i} ({call['op']}), {key}"
                assert_same_bits(recorded[key], value, what)

    # The same model trained in one process on the whole batch: the ranks'
    # shards accumulated (docs/scaling.md derives the bound, 0 for two ranks).
    reference = folder / "out" / "reference.pt"
    reference_command = [
        sys.executable,
        str(HARNESS / "ddp_reference.py"),
        str(folder / "recipes" / "ddp_roi.py"),
        str(PROCESSES),
        str(reference),
    ]
    env = environment(folder, OMP_NUM_THREADS=ranks[0]["omp_num_threads"])
    with job(reference_command, folder / "run", env) as running:
        running.finish()
    ddp = torch.load(folder / "run" / "roi_head.pt", weights_only=True)
    single = torch.load(reference, weights_only=True)
    assert ddp.keys() == single.keys()
    for name, value in single.items():
        assert_same_bits(ddp[name].numpy(), value.numpy(), name)


# --------------------------------------------------------------------------
# Multi-process JAX

JAX_ADDRESS = "127.0.0.1:23456"  # the doc's coordinator; a free port replaces it


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@needs_jax
def test_jax_processes_gather_the_numpy_gradients(folder):
    command = prepare(folder, "jax_grads")
    assert JAX_ADDRESS in command
    # The port is free when chosen, but another process may take it before
    # the coordinator binds it: then the job runs again on another port.
    ports = {}

    def with_port(attempt):
        ports[attempt] = f"127.0.0.1:{_free_port()}"
        return command.replace(JAX_ADDRESS, ports[attempt])

    def env(attempt):
        # Only on loopback (JAX binds the coordinator to [::] by default).
        return environment(folder, JAX_COORDINATOR_BIND_ADDRESS=ports[attempt])

    run_doc_command(folder, with_port, env, transient=("failed to add port to server",))
    assert_one_thread_each(
        processes(folder), jax_local_devices=1, jax_devices=PROCESSES
    )

    recipe = recipe_module(folder / "recipes" / "jax_grads.py")
    image, boxes, box_ind, targets = recipe["problem"]()
    crops = cropgrad.crop_and_resize(
        image, boxes, box_ind, recipe["CROP"], flush_denormals=True
    )
    d_crops = crops - targets  # the loss's cotangent: 0.5 * 2 * (crops - targets)
    with np.load(folder / "run" / "grads.npz") as gathered:
        assert_same_bits(
            gathered["d_image"],
            cropgrad.crop_and_resize_grad_image(
                d_crops, boxes, box_ind, image.shape, flush_denormals=True
            ),
            "image gradient",
        )
        assert_same_bits(
            gathered["d_boxes"],
            cropgrad.crop_and_resize_grad_boxes(
                d_crops, image, boxes, box_ind, flush_denormals=True
            ),
            "boxes gradient",
        )


# --------------------------------------------------------------------------
# Dask


def _dask_environment(folder, hold):
    gate = folder / "gate"
    gate.mkdir()
    env = environment(
        folder,
        DASK_DISTRIBUTED__WORKER__PRELOAD=repr([str(HARNESS / "dask_gate.py")]),
        CROPGRAD_MP_GATE=str(gate),
        CROPGRAD_MP_HOLD="1" if hold else "0",
    )
    return gate, env


def _check_dask_result(folder, gate):
    """The recipe's d_image has one call's bits; one thread in each worker."""
    (client,) = processes(folder)
    recipe = recipe_module(folder / "recipes" / "dask_grads.py")
    grads, boxes, box_ind, image_size = recipe["problem"]()
    whole = cropgrad.crop_and_resize_grad_image(grads, boxes, box_ind, image_size)
    with np.load(folder / "out" / f"globals-{client['pid']}.npz") as namespace:
        assert_same_bits(namespace["d_image"], whole, "Dask's image gradient")
    workers = [json.loads(p.read_text()) for p in gate.glob("worker-*.json")]
    assert len(workers) >= PROCESSES, workers
    for worker in workers:
        assert worker["omp_num_threads"] == "1", worker  # Dask's pre-spawn-environ
        assert worker["default_threads"] == 1, worker


@needs_dask
def test_dask_workers_split_by_image_have_one_calls_bits(folder):
    command = prepare(folder, "dask_grads")
    gate, env = _dask_environment(folder, hold=False)
    run_doc_command(folder, command, env)
    _check_dask_result(folder, gate)
    assert len(list(gate.glob("worker-*.json"))) == PROCESSES


def _started(gate):
    """{file name: (worker pid, task key)} of the tasks started so far."""
    return {
        p.name: (int(p.name.split("-")[1]), p.read_text())
        for p in gate.glob("started-*")
        if not p.name.endswith(".tmp")
    }


@needs_dask
def test_dask_job_survives_a_killed_worker_with_the_same_bits(folder):
    command = prepare(folder, "dask_grads")
    gate, env = _dask_environment(folder, hold=True)
    with job(["bash", "-c", command], folder / "run", env) as running:
        # Every task waits at its start for `go`: once both workers run one,
        # none has finished, and killing either loses a running task.
        while len({pid for pid, _ in _started(gate).values()}) < PROCESSES:
            if running.proc.poll() is not None:
                pytest.fail(f"the job ended early:\n{running.log()}")
            if time.monotonic() > running.deadline:
                running.kill()
                pytest.fail(f"the tasks did not start:\n{running.log()}")
            time.sleep(0.02)
        started = _started(gate)
        victim, lost = min(started.values())
        assert victim in running.processes()  # a worker of this job
        os.kill(victim, signal.SIGKILL)
        killed_at = time.monotonic() - running.started
        (gate / "go").touch()
        running.finish()
        took = time.monotonic() - running.started

    _check_dask_result(folder, gate)
    runs = list(_started(gate).values())
    # The lost task ran again on another worker; the killed one ran no other.
    assert [pid for pid, key in runs if key == lost and pid != victim], runs
    assert not [key for pid, key in runs if pid == victim and key != lost], runs
    print(
        f"Dask: killed worker {victim} {killed_at:.2f} s into the job, while it "
        f"ran {lost} ({len(started)} tasks started and held, none finished); "
        f"the job finished after {took:.2f} s with the same bits; runs (pid, "
        f"task): {sorted(runs)}"
    )
