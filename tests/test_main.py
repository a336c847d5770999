"""python -m cropgrad: the self-check and a quick benchmark run, in a child process."""

import json
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
    assert "python -m cropgrad bench" in out
    # No table, no targets: those are the full benchmark's.
    assert "roofline" not in out and "target" not in out.lower()


def test_quick_bench_writes_json(tmp_path):
    path = tmp_path / "bench.json"
    result = run_cropgrad(
        "bench",
        "--quick",
        "--workloads",
        "tiny",
        "--no-tensorflow",
        "--json",
        str(path),
    )
    assert result.returncode == 0, result.stdout + result.stderr
    # A table on stdout, progress on stderr.
    assert "tiny" in result.stdout and "roofline" in result.stdout
    assert "n/a (disabled with --no-tensorflow)" in result.stdout
    assert "[1/1] tiny" in result.stderr
    # Targets only when asked for; the JSON holds them either way.
    assert "Performance targets" not in result.stdout

    report = json.loads(path.read_text())
    for key in (
        "machine",
        "versions",
        "show_config",
        "tensorflow",
        "settings",
        "workloads",
        "targets",
        "total_seconds",
    ):
        assert key in report, key
    assert report["machine"]["cpu_count"] >= 1
    assert report["versions"]["cropgrad"] == report["show_config"]["version"]
    assert report["versions"]["numpy"]
    assert report["versions"]["tensorflow"] is None
    assert report["tensorflow"]["available"] is False

    (tiny,) = report["workloads"]
    assert tiny["name"] == "tiny"
    assert tiny["image_size"] == [1, 16, 16, 8]
    assert tiny["rounds"] >= 3
    times = tiny["median_s"]
    for column in (
        "cropgrad_1thread",
        "cropgrad_default",
        "cropgrad_default_new_output",
        "roofline",
        "roofline_default_threads",
        "roofline_1thread",
    ):
        # Measured (how fast is the benchmark's business, not a test's).
        assert times[column] > 0, column
        assert len(tiny["samples_s"][column]) == tiny["rounds"]
    assert times["tf_default"] is None and times["tf_deterministic"] is None
    ratios = tiny["ratios"]
    assert ratios["cropgrad_default_over_roofline"] > 0
    assert ratios["scaling_1thread_over_default"] > 0
    assert ratios["new_output_over_default"] > 0
    assert ratios["tf_default_over_cropgrad_default"] is None
    assert ratios["tf_deterministic_over_cropgrad_1thread"] is None
    assert ratios["tf_deterministic_over_cropgrad_default"] is None


def test_repeats_and_bad_workload(tmp_path):
    path = tmp_path / "bench.json"
    result = run_cropgrad(
        "bench",
        "--repeats",
        "2",
        "--workloads",
        "tiny",
        "--no-tensorflow",
        "--quick",
        "--json",
        str(path),
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(path.read_text())["workloads"][0]["rounds"] == 2

    result = run_cropgrad("bench", "--workloads", "tiny,nonsense")
    assert result.returncode == 2
    assert "nonsense" in result.stderr and "detector" in result.stderr


@pytest.mark.parametrize("args", [["--help"], ["bench", "--help"], ["check", "--help"]])
def test_help(args):
    result = run_cropgrad(*args)
    assert result.returncode == 0
    assert "usage: python -m cropgrad" in result.stdout


def test_a_target_missed_on_a_busy_machine_is_not_judged():
    from cropgrad._bench.report import format_targets

    row = {
        "workload": "detector",
        "target": "TF default / cropgrad default >= 2",
        "measured": 1.5,
        "bound": 2.0,
        "sense": ">=",
        "met": False,
        "unit": "ratio",
    }
    quiet = format_targets({"targets": [{**row, "other_cpus": 0.05}]})
    busy = format_targets({"targets": [{**row, "other_cpus": 0.9}]})
    assert quiet.rstrip().endswith("missed")
    assert busy.rstrip().endswith("not judged: other programs used 0.9 CPUs")


def test_explain_says_what_every_column_of_the_tables_means():
    result = run_cropgrad("bench", "--explain")
    assert result.returncode == 0, result.stdout + result.stderr
    # Every abbreviation the tables' headers use is explained.
    for abbreviation in (
        "TFdet/cg1",
        "cg/roof",
        "scaling",
        "other",
        "tv/cg1",
        "ORT2/cg2",
        "NCHW/NHWC",
        "boxes/img",
        "roofline",
        "cg new out",
    ):
        assert abbreviation in result.stdout, abbreviation
