"""Ctrl-C during a long call: KeyboardInterrupt, promptly or at the end.

A child process starts a call of about half a second with a prefilled ``out=``
and sends itself SIGINT a third of the way in.  Acceptable outcomes:

- the call raises KeyboardInterrupt (promptly, or when its work is done):
  it reported no success, so ``out`` may hold anything;
- the call returns and KeyboardInterrupt is raised right after: ``out``
  must then hold the complete, correct result.

Never: the interrupt lost, raised long after the work ended, or a call
that returns with ``out`` half written.  Afterwards the library (and the
floating-point mode: the interrupted call flushes denormals) must be as
before.  A child with Python's default SIGINT handling must die of it
instead of calling again.

No wall clock decides: "raised when the work ended" is the first check of
the interpreter after the call (the loop's first iterations), and the
interrupted call may use at most a few times the CPU time of a whole call;
a child that hangs is stopped by its time limit.
"""

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest
from _helpers import json_report, run_python

CHILD = textwrap.dedent(r"""
    import json, os, signal, sys, threading, time
    import numpy as np
    import cropgrad

    # Python's own SIGINT handling, even when the test runs in a background
    # job, whose children inherit SIGINT ignored.
    signal.signal(signal.SIGINT, signal.default_int_handler)

    op, dtype, threads = sys.argv[1], np.dtype(sys.argv[2]), int(sys.argv[3])
    rng = np.random.default_rng(0)

    def make(n):
        # Compute-bound work on little memory: depth-1 crops of 64 x 64 from
        # a small image.  The image gradient's gradients are zeros (shared
        # zero pages) except for the first boxes.
        boxes = rng.uniform(0, 1, (n, 4)).astype(np.float32)
        box_ind = rng.integers(0, 2, n)
        if op == "grad_image":
            grads = np.zeros((n, 64, 64, 1), np.float32)
            grads[:50] = rng.standard_normal((min(n, 50), 64, 64, 1))
            shape = (2, 32, 32, 1)
            call = lambda out: cropgrad.crop_and_resize_grad_image(
                grads, boxes, box_ind, list(shape), dtype, out=out, num_threads=threads,
                flush_denormals=True)
        else:
            image = rng.standard_normal((2, 32, 32, 1)).astype(np.float32)
            shape = (n, 64, 64, 1)
            call = lambda out: cropgrad.crop_and_resize(
                image, boxes, box_ind, [64, 64], out=out, num_threads=threads,
                flush_denormals=True)
        return call, shape

    # A call of about half a second, measured warm (only to choose its size
    # and when to signal); forward outputs are capped at 640 MiB.
    n = 256
    while True:
        call, shape = make(n)
        expected = call(None)
        start = time.perf_counter()
        cpu = time.process_time()
        call(None)
        full = time.perf_counter() - start
        full_cpu = time.process_time() - cpu
        if full > 0.4 or n >= 40000:
            break
        n = min(int(n * min(0.5 / max(full, 1e-3), 8)) + 1, 40000)

    def attempt():
        # One interrupted call; None when the call ended before the signal.
        out = np.full(shape, 12345, dtype)
        when = {"running": True}

        def interrupt():
            time.sleep(full / 3)
            if when["running"]:       # (a call already over proves nothing)
                when["signal"] = True
                os.kill(os.getpid(), signal.SIGINT)

        timer = threading.Thread(target=interrupt)
        returned = False
        outcome = "not raised"
        spins = None
        cpu = time.process_time()
        timer.start()
        try:
            try:
                call(out)
                returned = True
                when["running"] = False
                # A pending interrupt fires at the interpreter's first check.
                for spins in range(100000):
                    pass
            finally:
                when["running"] = False
                timer.join()
        except KeyboardInterrupt:
            outcome = "raised after return" if returned else "raised in call"
        call_cpu = time.process_time() - cpu
        if "signal" not in when:
            return None
        if np.array_equal(out, expected, equal_nan=True):
            state = "complete"
        elif (out == 12345).all():
            state = "untouched"
        else:
            state = "partial"
        return {"outcome": outcome, "out": state, "full_cpu": full_cpu,
                "call_cpu": call_cpu, "spins_after_return": spins}

    for _ in range(5):
        report = attempt()
        if report is not None:
            break
        full *= 0.5       # the call was quicker than measured: signal earlier
    else:
        raise SystemExit("every call ended before its interrupt")

    # Still works, and the thread's floating-point mode was restored.
    again = call(None)
    tiny = np.array([1e-39], np.float32)
    report["works_after"] = bool(np.array_equal(again, expected, equal_nan=True))
    report["subnormals_after"] = bool((tiny * np.float32(1))[0] != 0)
    print(json.dumps(report))
""")


@pytest.mark.slow
@pytest.mark.parametrize(
    "op, dtype",
    [("grad_image", "float32"), ("grad_image", "float16"), ("forward", "float32")],
)
@pytest.mark.parametrize("threads", [1, 2])
def test_interrupt_during_a_long_call(op, dtype, threads, tmp_path):
    proc = run_python("-c", CHILD, op, dtype, str(threads), timeout=300, cwd=tmp_path)
    report = json_report(proc)
    print(report)
    assert report["outcome"] != "not raised", "the interrupt was lost"
    if report["outcome"] == "raised after return":
        assert report["out"] == "complete", (
            "a call returned with out= not fully written"
        )
    # Raised promptly or when the work ended, not after more work: at the
    # interpreter's first checks after the call, and no more CPU time than a
    # few whole calls (generous: the machine may be loaded, the threads
    # may spin a little).
    if report["outcome"] == "raised after return":
        assert report["spins_after_return"] is not None, report
        assert report["spins_after_return"] < 100, report
    assert report["call_cpu"] <= 3 * report["full_cpu"] + 0.5, report
    assert report["works_after"]
    assert report["subnormals_after"], (
        "flush-to-zero left on after the interrupted call"
    )


DEFAULT_HANDLER = textwrap.dedent(r"""
    import signal, sys, time
    import numpy as np
    import cropgrad

    signal.signal(signal.SIGINT, signal.default_int_handler)  # as above

    rng = np.random.default_rng(0)
    grads = rng.standard_normal((3000, 14, 14, 64)).astype(np.float32)
    boxes = rng.uniform(0, 1, (3000, 4)).astype(np.float32)
    box_ind = np.zeros(3000, np.int64)
    start = time.perf_counter()
    cropgrad.crop_and_resize_grad_image(grads, boxes, box_ind, [1, 64, 64, 64],
                                        num_threads=int(sys.argv[1]))
    print(f"one call: {time.perf_counter() - start:.3f}", flush=True)
    while True:
        cropgrad.crop_and_resize_grad_image(grads, boxes, box_ind, [1, 64, 64, 64],
                                            num_threads=int(sys.argv[1]))
""")


@pytest.mark.parametrize("threads", [1, 2])
def test_default_sigint_ends_the_process(threads, tmp_path):
    # The context manager closes the pipes (an unclosed one is a
    # ResourceWarning, an error in this suite).
    # The child calls again and again: only the signal ends it.  A child
    # that survives it is stopped by the time limit (a generous one, not a
    # measure of speed).
    with subprocess.Popen(
        [sys.executable, "-P", "-c", DEFAULT_HANDLER, str(threads)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
    ) as proc:
        try:
            line = proc.stdout.readline()
            assert line.startswith("one call:"), line + proc.stderr.read()
            call = float(line.split(":")[1])
            time.sleep(min(call / 2, 0.5))
            proc.send_signal(signal.SIGINT)
            proc.wait(timeout=60 + 10 * call)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        stderr = proc.stderr.read()
    assert proc.returncode in (-signal.SIGINT, 1, 130), (
        proc.returncode,
        stderr[-2000:],
    )
    assert "KeyboardInterrupt" in stderr or proc.returncode == -signal.SIGINT
    assert "Segmentation" not in stderr and "Fatal Python error" not in stderr
    assert os.name == "posix"
