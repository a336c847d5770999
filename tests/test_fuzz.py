"""Fuzzing in a subprocess, so that a crash is a test failure, not the end.

`fuzz_target.py` decodes random bytes into calls of every operation with
valid and broken arguments of every kind and checks each outcome (see its
docstring).  Here it runs in a child process for a bounded time
(``CROPGRAD_FUZZ_SECONDS``, default 45; ``CROPGRAD_FUZZ_SEED`` to repeat a
run), after replaying the corpus of inputs that once broke something; the
number of executions it must reach scales with the machine's measured
speed (REFERENCE_RATE below).  If
the child dies, the input it was running is read back from its crash file
and shown with the signal and the child's stderr (faulthandler's traceback).
"""

import json
import os
import random
import signal
import subprocess
import sys
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
TARGET = os.path.join(HERE, "fuzz_target.py")
CORPUS = os.path.join(HERE, "fuzz_corpus")
SECONDS = float(os.environ.get("CROPGRAD_FUZZ_SECONDS", "45"))

# The executions floor is stated for a machine that runs REFERENCE_RATE of
# _calibration_calls() per second (the x86-64 CI machine, 2 cores shared by
# other work, measured about 7,300); a slower one (aarch64 under QEMU) gets
# the floor scaled by its measured speed, never above the stated one.
REFERENCE_RATE = 5000.0
FLOOR_PER_SECOND = 1000


def _calibration_calls():
    """A fixed mix of what the fuzzer calls: small successful calls of the
    three ops and two rejected ones."""
    import numpy as np

    import cropgrad

    image = np.arange(2 * 5 * 4 * 3, dtype=np.float32).reshape(2, 5, 4, 3)
    boxes = np.array([[0.1, 0.2, 0.9, 0.7], [-0.2, 0.0, 1.1, 0.5]], np.float32)
    box_ind = np.array([0, 1], np.int32)
    grads = np.ones((2, 3, 2, 3), np.float32)
    cropgrad.crop_and_resize(image, boxes, box_ind, [3, 2])
    cropgrad.crop_and_resize_grad_image(grads, boxes, box_ind, [2, 5, 4, 3])
    cropgrad.crop_and_resize_grad_boxes(grads, image, boxes, box_ind)
    for bad in ([3, -2], "no"):
        try:
            cropgrad.crop_and_resize(image, boxes, box_ind, bad)
        except (TypeError, ValueError):
            pass


def _measured_rate(seconds=1.0):
    """_calibration_calls() per second in this process (the best of 3)."""
    best = 0.0
    for _ in range(3):
        count, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds / 3:
            _calibration_calls()
            count += 1
        best = max(best, count / (time.perf_counter() - start))
    return best


def _corpus_files():
    return sorted(
        os.path.join(CORPUS, f) for f in os.listdir(CORPUS) if f.endswith(".bin")
    )


def _run(args, tmp_path, timeout):
    crash_file = tmp_path / "crash.bin"
    proc = subprocess.run(
        [
            sys.executable,
            "-P",
            "-X",
            "faulthandler",
            TARGET,
            "--crash-file",
            str(crash_file),
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=tmp_path,
    )
    return proc, crash_file


def _explain(proc, crash_file):
    lines = [f"fuzz target exited with {proc.returncode}"]
    if proc.returncode < 0:
        lines[0] += f" ({signal.Signals(-proc.returncode).name}: the process crashed)"
    elif "ERROR: AddressSanitizer" in proc.stderr:
        lines[0] += " (AddressSanitizer: the process crashed)"
    if crash_file.exists():
        data = crash_file.read_bytes()
        lines.append(f"input it was running ({len(data)} bytes): {data.hex()}")
        lines.append(
            "save it to tests/fuzz_corpus/ and describe it with "
            "`python -P tests/fuzz_target.py --describe FILE`"
        )
    lines.append("stdout (tail):\n" + proc.stdout[-6000:])
    lines.append("stderr (tail):\n" + proc.stderr[-6000:])
    return "\n".join(lines)


def test_corpus_replays_cleanly(tmp_path):
    files = _corpus_files()
    assert len(files) >= 10
    proc, crash_file = _run(["--run", *files], tmp_path, timeout=120)
    assert proc.returncode == 0, _explain(proc, crash_file)
    assert len(proc.stdout.splitlines()) == len(files)


@pytest.mark.slow
def test_fuzz_for_a_bounded_time(tmp_path):
    seed = int(
        os.environ.get("CROPGRAD_FUZZ_SEED", random.SystemRandom().randrange(2**32))
    )
    stats_file = tmp_path / "stats.json"
    proc, crash_file = _run(
        [
            "--seconds",
            str(SECONDS),
            "--seed",
            str(seed),
            "--corpus",
            CORPUS,
            "--stats",
            str(stats_file),
            "--save-failures",
            str(tmp_path / "failures"),
        ],
        tmp_path,
        timeout=SECONDS + 180,
    )
    assert proc.returncode == 0, f"--seed {seed}\n" + _explain(proc, crash_file)
    stats = json.loads(stats_file.read_text())
    print(
        f"fuzz --seed {seed}: {stats['executions']} executions, {stats['ok']} "
        f"successful calls, outcomes {stats['outcomes']}"
    )
    # Not a trivial run: many calls, and both successes and every kind of
    # rejection.  The floor scales with this machine's speed (measured
    # after the run, not to compete with it for a core).
    speed = min(1.0, _measured_rate() / REFERENCE_RATE)
    floor = int(FLOOR_PER_SECOND * min(SECONDS, 10) * speed)
    print(f"executions floor {floor} (machine speed {speed:.2f} of the reference)")
    assert stats["executions"] >= floor, (stats["executions"], floor)
    assert stats["ok"] >= stats["executions"] // 20
    for kind in ("TypeError", "ValueError", "IndexError"):
        assert stats["outcomes"].get(f"rejected:{kind}", 0) > 0, kind
    # The public functions' NCHW layout too, with calls that succeed.
    assert stats["nchw"].get("ok", 0) > 0, stats["nchw"]
    assert set(stats["ops"]) == {
        "grad_image",
        "forward",
        "grad_boxes",
        "raw_grad_image",
        "raw_forward",
        "raw_grad_boxes",
    }


def test_a_crash_is_reported_with_its_input(tmp_path):
    # The harness itself: a child that dies mid-input must be reported as a
    # crash with that input, not pass silently.
    proc, crash_file = _run(["--self-test-crash"], tmp_path, timeout=60)
    # Killed by the signal, or (in a build with AddressSanitizer) stopped by it.
    assert proc.returncode < 0 or "ERROR: AddressSanitizer" in proc.stderr
    report = _explain(proc, crash_file)
    assert "crashed" in report and "input it was running" in report
    assert crash_file.read_bytes() == b"self-test crash input"
