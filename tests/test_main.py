"""python -m cropgrad: the self-check and the short timing, in a child process.

The full benchmark is not part of the package (tests/test_bench.py runs it
from the source tree).
"""

import subprocess
import sys

import pytest


def run_cropgrad(*args, timeout=60):
    # -P: the installed package, not the source folder.
    return subprocess.run(
        [sys.executable, "-P", "-m", "cropgrad", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def test_check_passes():
    result = run_cropgrad("check")
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.strip().splitlines()
    assert lines[-1].startswith("PASS")
    assert not any(line.rstrip().split("  (")[0].endswith("FAIL") for line in lines)
    assert any("the same bits on 1, 2, 3 and 4 threads" in line for line in lines)
    # Every op of both families, against the reference's bits.
    assert "cropgrad's NumPy reference" in result.stdout
    checked = [line for line in lines if line.startswith(("  roi_align", "  crop_and"))]
    for family in ("crop_and_resize", "roi_align"):
        for op in ("grad_image", "grad_boxes", "jvp_boxes"):
            assert any(line.startswith(f"  {family}_{op} ") for line in checked), op
        assert any(line.startswith(f"  {family} ") for line in checked), family
    for line in checked:
        assert "ok  (bit for bit on " in line, line


def test_the_main_job_checks_then_times_two_ops_in_words():
    # A generous limit: under emulation a call takes a hundred times longer.
    result = run_cropgrad(timeout=900)
    assert result.returncode == 0, result.stdout + result.stderr
    check, out = result.stdout.split("A short benchmark")
    assert "PASS" in check
    # Two workloads, each on 1 thread and the default threads, same bits.
    assert out.count(" on 1 thread, ") == 2, out
    assert out.count("), the same bits") == 2, out
    assert "DIFFERENT BITS" not in out
    # The full benchmark is named, with where it runs.
    assert "source checkout: python benchmarks/bench.py" in out
    # No table, no targets: those are the full benchmark's.
    assert "roofline" not in out and "target" not in out.lower()


@pytest.mark.parametrize("args", [["--help"], ["check", "--help"]])
def test_help(args):
    result = run_cropgrad(*args)
    assert result.returncode == 0
    assert "usage: python -m cropgrad" in result.stdout


@pytest.mark.parametrize("args", [[], ["--quick", "--workloads", "tiny"], ["--help"]])
def test_bench_says_where_the_full_benchmark_runs(args):
    # Whatever its options, the command the benchmark had before it left
    # the package says where it is now, and checks nothing.
    result = run_cropgrad("bench", *args)
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stdout == ""
    words = " ".join(result.stderr.split())
    assert "the full benchmark is not part of the installed package" in words
    assert "It runs from a source checkout" in words
    assert "python benchmarks/bench.py --help" in words


def test_unknown_options_are_refused():
    result = run_cropgrad("--quick")
    assert result.returncode == 2
    assert "unrecognized arguments: --quick" in result.stderr
