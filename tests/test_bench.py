"""The benchmark's plumbing: rows from adapters, the pipeline row, targets,
the RoIAlign rows and their reference workers, and its command line.

The benchmark is not part of the package: it is ``benchmarks/`` of the
source tree, and times the installed cropgrad.  These tests import it from
the tree beside them (the wheels' tests, a copy of tests/ alone, skip) and
run its command line, ``benchmarks/bench.py``, with ``python -P``.  Quick
runs (the figures themselves are not judged: only that every column is
measured and reported).
"""

import importlib.util
import json
import os
import subprocess
import sys
import types

import numpy as np
import pytest
from _helpers import assert_same_bits, benchmarks_on_path, missing, required

import cropgrad

BENCHMARKS = benchmarks_on_path("bench.py")
BENCH = os.path.join(BENCHMARKS, "bench.py")

from cropgrad_bench import (  # noqa: E402
    cli,
    nchw_rows,
    report,
    roi_worker,
    rows,
    targets,
    workloads,
)
from cropgrad_bench.columns import RATIOS, cropgrad_columns  # noqa: E402
from cropgrad_bench.run import run  # noqa: E402
from cropgrad_bench.timing import Settings  # noqa: E402
from cropgrad_bench.workloads import WORKLOADS  # noqa: E402


def run_bench(*args, timeout=60):
    """The benchmark's command line in a child process (-P: the installed
    cropgrad, as a user runs it)."""
    return subprocess.run(
        [sys.executable, "-P", BENCH, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def _fake_adapter():
    """An adapter module adding one row after the tiny workload."""
    module = types.ModuleType("cropgrad_fake_rows")

    def extra_rows(workload, quick):
        assert quick is True
        if workload.name != "tiny":
            return []
        p = workload.problem()
        size = list(workload.image_size)
        out = np.zeros(*workload.output())

        def call():
            cropgrad.crop_and_resize_grad_image(
                p["grads"], p["boxes"], p["box_ind"], size, out=out
            )

        return [
            {
                "name": "tiny-fake",
                "about": "the NumPy API again, as an adapter would call it",
                "columns": {"cropgrad_default": call, "fake_native": call},
                "ratios": {"native_over_cg": ("fake_native", "cropgrad_default")},
                "targets": [("native / cg >= 0", "native_over_cg", 0.0, ">=")],
            }
        ]

    module.extra_rows = extra_rows
    return module


def _broken_adapter():
    module = types.ModuleType("cropgrad_broken_rows")
    module.extra_rows = lambda workload, quick: [{"name": "no-columns"}]
    return module


@pytest.fixture
def adapters(monkeypatch):
    monkeypatch.setitem(sys.modules, "cropgrad_fake_rows", _fake_adapter())
    monkeypatch.setitem(sys.modules, "cropgrad_broken_rows", _broken_adapter())
    monkeypatch.setattr(
        rows,
        "ADAPTERS",
        {
            "fake": "cropgrad_fake_rows",
            "broken": "cropgrad_broken_rows",
            "absent": "cropgrad_bench.no_such_rows",
        },
    )


def test_adapter_rows(adapters):
    messages = []
    result = run(
        ["tiny"], Settings(quick=True, repeats=2), tensorflow=False,
        progress=messages.append,
    )  # fmt: skip
    status = result["adapters"]
    assert status["fake"] == "available"
    assert status["absent"] == "n/a (not in this version of cropgrad)"
    assert status["broken"].startswith("failed: AdapterError")
    assert any("broken rows failed" in m for m in messages)

    tiny, fake = result["workloads"]
    assert (tiny["name"], tiny["kind"]) == ("tiny", "op")
    assert fake["name"] == "tiny-fake" and fake["kind"] == "adapter"
    assert fake["adapter"] == "fake" and fake["workload"] == "tiny"
    assert fake["rounds"] == 2
    times = fake["median_s"]
    for column in ("cropgrad_default", "fake_native", "roofline"):
        assert 0 < times[column] < 0.1, column
    assert times["cropgrad_1thread"] is None and times["tf_default"] is None
    assert fake["ratios"]["native_over_cg"] > 0
    assert fake["ratios"]["cropgrad_default_over_roofline"] > 0
    (target,) = [t for t in result["targets"] if t["workload"] == "tiny-fake"]
    assert target["met"] is True and target["unit"] == "ratio"

    table = report.format_table(result)
    assert "tiny-fake" in table and "fake_native" in table
    json.dumps(result)  # what --json writes


def test_adapters_left_out(adapters):
    result = run(
        ["tiny"], Settings(quick=True, repeats=1), tensorflow=False, adapters=False
    )
    assert [r["name"] for r in result["workloads"]] == ["tiny"]
    assert set(result["adapters"].values()) == {"n/a (disabled with --no-adapters)"}


_COLUMNS = {"a": print}


@pytest.mark.parametrize(
    "returned, message",
    [
        ({"name": "x"}, "list of dicts"),
        ([{"columns": _COLUMNS}], "'name'"),
        ([{"name": "x", "columns": {"a": 1}}], "callable"),
        ([{"name": "x", "columns": _COLUMNS, "ratios": {"r": ("a", "b")}}], "ratio"),
        ([{"name": "x", "columns": _COLUMNS, "targets": [("t", "a", 1)]}], "target"),
    ],
)
def test_malformed_rows_are_refused(returned, message):
    module = types.SimpleNamespace(extra_rows=lambda workload, quick: returned)
    found, errors = rows.adapter_rows({"m": module}, None, True)
    assert found == []
    ((name, exc),) = errors
    assert name == "m" and isinstance(exc, rows.AdapterError)
    assert message in str(exc)


def test_pipeline_row():
    result = run(
        ["pipeline"], Settings(quick=True, repeats=1), tensorflow=False, adapters=False
    )
    (row,) = result["workloads"]
    assert row["kind"] == "pipeline" and row["rounds"] == 1
    times = row["median_s"]
    for column in (
        "cropgrad_default",
        "pipeline",
        "numpy_pass_after_call",
        "numpy_pass_after_idle",
        "cropgrad_after_threads_slept",
    ):
        assert 0 < times[column] < 5, column
    # The whole process, at most every CPU, in a 0.1 s window.
    assert 0 <= times["cpu_100ms_after_call"] <= 0.1 * result["machine"]["cpu_count"]
    for key in (
        "pass_after_call_over_after_idle",
        "after_sleep_over_back_to_back",
        "pipeline_over_parts",
    ):
        assert row["ratios"][key] > 0, key
    targets = [t for t in result["targets"] if t["workload"] == "pipeline"]
    assert len(targets) == 3 and all(t["measured"] is not None for t in targets)
    text = report.format_pipeline(result)
    assert "CPU in the 100 ms after a call" in text
    assert "pipeline" not in report.format_table(result).split("\n-")[1]


def test_command_line_leaves_adapters_out(tmp_path):
    path = tmp_path / "bench.json"
    options = ["--quick", "--workloads", "tiny", "--no-tensorflow", "--no-adapters"]
    result = run_bench(*options, "--repeats", "1", "--json", str(path))
    assert result.returncode == 0, result.stderr
    assert "Adapter rows: jax n/a (disabled with --no-adapters)" in result.stdout
    assert json.loads(path.read_text())["adapters"]["torch"].startswith("n/a")


def test_machine_info_names_the_caches_and_simd_target():
    from cropgrad_bench.machine import machine_info

    info = machine_info()
    assert info["simd_target"] == cropgrad._runtime.simd.simd_target()
    assert info["tuning"] == cropgrad._kernels.crop_and_resize.grad_image.tuning()
    assert info["l2_per_core_bytes"] > 0 and info["l3_per_core_bytes"] > 0
    for key in ("l2_bytes", "l3_bytes"):
        assert info[key] is None or info[key] > 0
    json.dumps(info)
    line = report._caches(
        dict(info, l2_bytes=1 << 20, l3_bytes=32 << 20, compute_scaling=1.08)
    )
    assert line == (
        f", L2 1 MiB, L3 32 MiB, {info['simd_target']}, "
        "arithmetic scales 1.08x to 2 threads"
    )


def test_machine_arithmetic_loop_computes_and_its_scaling_is_measured():
    from cropgrad_bench import machine

    # The loop's result: each of the 96 floats after `rounds` of
    # a <- 0.999 a + 0.5 (a float32 recurrence), summed, added to out.
    function = machine.compile_reference(
        machine.COMPUTE_C, "cg_bench_compute", 3, "-O3"
    )
    sink = np.zeros(1, np.float32)
    function(sink.ctypes.data, 10, 1)
    a = np.arange(96, dtype=np.float32)
    for _ in range(10):
        a = a * np.float32(0.999) + np.float32(0.5)
    np.testing.assert_allclose(sink[0], a.sum(dtype=np.float32), rtol=1e-5)
    # On two threads each thread adds its own floats: with no rounds,
    # twice 0 + 1 + ... + 95.
    sink[0] = 0
    function(sink.ctypes.data, 0, 2)
    assert sink[0] == 2 * 4560
    scaling = machine.compute_scaling(seconds=0.005, repeats=1)
    # Between one core's two hardware threads (about 1) and two cores
    # (about 2), with room for a noisy machine.
    assert scaling is None or 0.3 < scaling < 3


@pytest.mark.parametrize("name", nchw_rows.WORKLOADS)
def test_nchw_rows_time_the_same_problem_in_both_layouts(name):
    # Each NCHW row's columns run its workload's op on the transposed
    # arrays: the NCHW result is the NHWC one, transposed.
    workload = WORKLOADS[name]
    (row,) = nchw_rows.extra_rows(workload, quick=True)
    assert set(row["columns"]) == {
        "cropgrad_1thread",
        "cropgrad_default",
        "cropgrad_default_new_output",
        "nhwc_default",
    }
    nchw = row["columns"]["cropgrad_default_new_output"]()
    nhwc = row["columns"]["nhwc_default"]()
    if nhwc.ndim == 4:
        nhwc = nhwc.transpose(0, 3, 1, 2)
    assert nchw.tobytes() == np.ascontiguousarray(nhwc).tobytes()
    assert row["columns"]["cropgrad_1thread"]().tobytes() == nchw.tobytes()
    # The image gradient's NCHW rows must scale as the NHWC ones.
    keys = {key for _, key, _, _ in row["targets"]}
    assert keys == {"nchw_over_nhwc"} | (
        {"scaling_1thread_over_default"}
        if workload.op == workloads.GRAD_IMAGE
        else set()
    )


# --------------------------------------------------------------------------
# The RoIAlign rows: torchvision's and ONNX Runtime's columns in workers


def _roi(name):
    return WORKLOADS[name]


@pytest.mark.parametrize(
    "group, boxes, output_size, sampling_ratio, aligned",
    [
        ("roi-fpn", 1024, (7, 7), 2, False),
        ("roi-mask", 256, (14, 14), 2, True),
        ("roi-adaptive", 1024, (7, 7), 0, True),
    ],
)
def test_roi_rows_exist(group, boxes, output_size, sampling_ratio, aligned):
    names = workloads.GROUPS[group]
    assert names == [
        f"{group}-{op}{layout}"
        for op in ("forward", "grad-image", "grad-boxes")
        for layout in ("", "-nhwc")
    ]
    assert cli._workload_list(group) == names
    assert set(names) <= set(workloads.GROUPS["roi"])
    targeted = {t[0] for t in targets.TARGETS}
    for name in names:
        w = _roi(name)
        assert w.family == workloads.ROI_ALIGN and w.kind == "op"
        assert w.nchw == (2, 256, 100, 136) and w.num_boxes == boxes
        assert w.crop == output_size and w.spatial_scale == 1 / 8
        assert (w.sampling_ratio, w.aligned) == (sampling_ratio, aligned)
        assert w.data_format == ("NHWC" if name.endswith("-nhwc") else "NCHW")
        assert name in targeted, name
    p = _roi(names[0]).problem()
    x1, y1, x2, y2 = p["boxes"].T
    for side in (x2 - x1, y2 - y1):
        assert side.min() >= 16 - 1e-3 and side.max() <= 400 + 1e-3
    assert x1.min() >= 0 and x2.max() <= 136 * 8
    assert y1.min() >= 0 and y2.max() <= 100 * 8
    assert np.all(np.diff(p["box_ind"]) >= 0) and set(p["box_ind"]) == {0, 1}


def test_roi_quick_pools_a_sixteenth_of_the_boxes():
    w = _roi("roi-fpn-grad-image")
    quick = w.quick()
    assert quick.num_boxes == 64 and quick.name == w.name
    assert "64 of its 1024 boxes" in quick.about
    # The same boxes, the first ones.
    np.testing.assert_array_equal(quick.problem()["boxes"], w.problem()["boxes"][:64])


def _small(name, **changes):
    """A RoIAlign row of the real name on a small map (fast to measure)."""
    changes = {"nchw": (2, 8, 12, 10), "num_boxes": 48, "box_sides": (8, 60), **changes}
    return _roi(name).variant(**changes)


@pytest.mark.parametrize("name", ["roi-mask-forward-nhwc", "roi-fpn-grad-boxes-nhwc"])
def test_roi_columns_time_the_same_problem(name):
    # The NHWC row's NCHW call and the boxes-gradient row's input gradient
    # run on the row's arrays.
    w = _small(name)
    p = w.problem()
    columns = cropgrad_columns(w, p, None, 1)
    assert {"cropgrad_1thread", "cropgrad_default", "nchw_default"} <= set(columns)
    ours = columns["cropgrad_default_new_output"]()
    assert columns["cropgrad_1thread"]() is not ours
    nchw = columns["nchw_default"]()
    if ours.ndim == 4:
        ours = ours.transpose(0, 3, 1, 2)
    assert nchw.tobytes() == np.ascontiguousarray(ours).tobytes()
    if w.op == workloads.GRAD_BOXES:
        expected = cropgrad.roi_align_grad_image(
            p["grads"], p["boxes"], p["box_ind"], w.image_size,
            data_format="NHWC", **w.options(),
        )  # fmt: skip
        assert columns["grad_image_default"]().tobytes() == expected.tobytes()


_FAKE_TORCHVISION = """#!{python}
# A stand-in for a Python with torchvision: roi_child.py's loop, with
# cropgrad computing what torchvision would.
import importlib.util
import sys

import cropgrad

spec = importlib.util.spec_from_file_location("roi_child", sys.argv[2])
child = importlib.util.module_from_spec(spec)
spec.loader.exec_module(child)


def fake(threads=None):
    def build(problem, spec):
        if {fail!r}:
            raise ValueError("the stand-in refuses")
        args = (problem["boxes"], problem["box_ind"])
        options = dict(
            spatial_scale=spec["spatial_scale"],
            sampling_ratio=spec["sampling_ratio"],
            aligned=spec["aligned"],
        )
        if spec["op"] == "forward":
            def call():
                return cropgrad.roi_align(
                    problem["image"], *args, spec["output_size"], **options
                )
        else:
            def call():
                return cropgrad.roi_align_grad_image(
                    problem["grads"], *args, spec["nchw"], **options
                )
        return call, lambda result: result

    return {{"torchvision": "stand-in", "torch": "none", "torch_threads": 1}}, build


child.main(sys.argv[3:], backends={{"torchvision": fake}})
"""


def _fake_torchvision(tmp_path, fail=False):
    path = tmp_path / ("failing_python" if fail else "python")
    path.write_text(_FAKE_TORCHVISION.format(python=sys.executable, fail=fail))
    path.chmod(0o755)
    return str(path)


def _onnxruntime_installed():
    found = all(importlib.util.find_spec(m) for m in ("onnxruntime", "onnx"))
    if not found and required("CROPGRAD_REQUIRE_ADAPTERS"):
        pytest.fail("CROPGRAD_REQUIRE_ADAPTERS=1 but ONNX Runtime is not installed")
    return found


@pytest.fixture
def small_roi_fpn(monkeypatch):
    names = workloads.GROUPS["roi-fpn"]
    for name in names:
        monkeypatch.setitem(WORKLOADS, name, _small(name))
    return names


def test_roi_rows_report_every_column(small_roi_fpn, tmp_path):
    messages = []
    result = run(
        small_roi_fpn, Settings(quick=True, repeats=1), adapters=False,
        progress=messages.append, torchvision=_fake_torchvision(tmp_path),
    )  # fmt: skip
    ort = _onnxruntime_installed()
    assert result["tensorflow"]["reason"] == "n/a (no crop_and_resize row in this run)"
    tv = result["references"]["torchvision"]
    assert tv["available"] and tv["version"] == "stand-in"
    assert result["references"]["onnxruntime"]["available"] is ort
    assert [r["name"] for r in result["workloads"]] == small_roi_fpn
    onnxruntime = {"onnxruntime_1thread", "onnxruntime_default"} if ort else set()
    measured = {
        "roi-fpn-forward": {"torchvision", *onnxruntime},
        "roi-fpn-grad-image": {"torchvision"},
    }
    for row in result["workloads"]:
        name, times = row["name"], row["median_s"]
        assert row["family"] == "roi_align" and row["num_boxes"] == 3  # 48 / 16
        assert set(times) == set(result["roi_columns"])
        for column in result["roi_columns"]:
            assert (times[column] is None) == (column in row["not_measured"]), column
            reason = row["not_measured"].get(column, "n/a")
            assert reason.startswith("n/a"), (column, reason)
        for column in ("cropgrad_1thread", "cropgrad_default", "roofline"):
            assert 0 < times[column] < 1, (name, column)
        # The references computed cropgrad's bits where they ran.
        assert row["same_bits"] == dict.fromkeys(measured.get(name, ()), True)
        for column in measured.get(name, ()):
            assert times[column] > 0
        if name.endswith("-nhwc"):
            assert row["ratios"]["nchw_over_nhwc"] > 0
        if "grad-boxes" in name:
            assert row["ratios"]["grad_boxes_over_grad_image"] > 0
    forward, nhwc, grad_boxes = (result["workloads"][i] for i in (0, 1, 4))
    assert forward["ratios"]["torchvision_over_cropgrad_1thread"] > 0
    assert "NCHW only" in nhwc["not_measured"]["torchvision"]
    assert "no boxes gradient" in grad_boxes["not_measured"]["torchvision"]
    if not ort:
        why = forward["not_measured"]["onnxruntime_default"]
        assert "not installed" in why

    rows = [t for t in result["targets"] if t["workload"].startswith("roi-fpn")]
    assert len(rows) == 11
    assert all(t["measured"] is not None for t in rows if "ONNX" not in t["target"])
    table = report.format_roi_table(result)
    for name in small_roi_fpn:
        assert name in table
    assert "torchvision stand-in" in table and "bits in 2 of 2 results" in table
    # Without crop_and_resize rows, the RoIAlign table and then the footer.
    text = report.format_table(result)
    assert text.startswith(table) and text.count("roi-fpn-forward ") == 1
    assert "cg/roof" not in text and text.splitlines()[-1].startswith("cropgrad ")
    json.dumps(result)


def test_a_failing_reference_leaves_its_column_na(small_roi_fpn, tmp_path):
    names = small_roi_fpn[:3]  # forward, forward NHWC, input gradient
    messages = []
    result = run(
        names, Settings(quick=True, repeats=1), adapters=False, onnxruntime=False,
        progress=messages.append, torchvision=_fake_torchvision(tmp_path, True),
    )  # fmt: skip
    assert any("measuring the rest without torchvision" in m for m in messages)
    tv = result["references"]["torchvision"]
    assert not tv["available"] and "the stand-in refuses" in tv["reason"]
    for row in result["workloads"]:
        assert row["median_s"]["torchvision"] is None
        assert row["median_s"]["cropgrad_default"] > 0
    forward, _, grad_image = result["workloads"]
    for row in (forward, grad_image):
        assert "the stand-in refuses" in row["not_measured"]["torchvision"]
    assert forward["not_measured"]["onnxruntime_1thread"] == (
        "n/a (disabled with --no-onnxruntime)"
    )


def test_torchvision_python(monkeypatch, tmp_path):
    monkeypatch.delenv(roi_worker.TORCHVISION_PYTHON_ENV, raising=False)
    assert roi_worker.torchvision_python(False) == (
        None,
        "n/a (disabled with --no-torchvision)",
    )
    python, reason = roi_worker.torchvision_python(str(tmp_path / "nowhere"))
    assert python is None and "not an executable file" in reason
    monkeypatch.setenv(roi_worker.TORCHVISION_PYTHON_ENV, sys.executable)
    assert roi_worker.torchvision_python() == (os.path.abspath(sys.executable), "")
    monkeypatch.delenv(roi_worker.TORCHVISION_PYTHON_ENV)
    python, reason = roi_worker.torchvision_python()
    if importlib.util.find_spec("torchvision") is None:
        assert python is None and "--torchvision-python" in reason
    else:
        assert python == sys.executable


@pytest.mark.skipif(
    importlib.util.find_spec("torchvision") is not None,
    reason="torchvision is installed here",
)
def test_a_python_without_torchvision_says_why():
    references = roi_worker.References(2, lambda message: None)
    try:
        references.start(sys.executable, onnxruntime=False)
    finally:
        references.close()
    info = references.info["torchvision"]
    assert not info["available"]
    assert info["reason"].startswith("n/a (torchvision failed to import:")
    assert references.reasons[roi_worker.TV] == info["reason"]


def test_command_line_roi_rows_without_references(tmp_path):
    path = tmp_path / "bench.json"
    options = ["--quick", "--workloads", "roi-mask-forward-nhwc", "--repeats", "1"]
    options += ["--no-torchvision", "--no-onnxruntime", "--no-adapters"]
    result = run_bench(*options, "--json", str(path), timeout=120)
    assert result.returncode == 0, result.stderr
    assert "roi-mask-forward-nhwc" in result.stdout
    assert "torchvision columns: n/a (disabled with --no-torchvision)" in result.stdout
    assert "ONNX Runtime columns: n/a (disabled with --no-onnxruntime)" in result.stdout
    (row,) = json.loads(path.read_text())["workloads"]
    assert row["median_s"]["nchw_default"] > 0
    assert row["not_measured"]["torchvision"].startswith("n/a (NCHW only")


def test_every_main_table_target_reads_a_figure_its_row_has():
    # A target naming a ratio no row computes would print "n/a" forever.
    figures = {*RATIOS, "float16_over_float32", "float64_over_float32"}
    figures.add("cropgrad_default")
    for name, what, key, _, sense in targets.TARGETS:
        w = WORKLOADS[name]
        if w.family == workloads.ROI_ALIGN or w.kind == "pipeline":
            continue
        assert key in figures, (name, what)
        assert sense in ("<=", ">=")
    fourth = [t for t in targets.TARGETS if t[2] == "new_output_over_default"]
    assert [t[0] for t in fourth] == ["detector-forward"]
    scaling = {t[0] for t in targets.TARGETS if t[3] == 1.7 and "scaling" in t[1]}
    assert {"detector", "augment", "dense"} <= scaling


# --------------------------------------------------------------------------
# The command line: python benchmarks/bench.py


def test_quick_bench_writes_json(tmp_path):
    path = tmp_path / "bench.json"
    result = run_bench(
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
    result = run_bench(
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

    result = run_bench("--workloads", "tiny,nonsense")
    assert result.returncode == 2
    assert "nonsense" in result.stderr and "detector" in result.stderr


def test_a_target_missed_on_a_busy_machine_is_not_judged():
    row = {
        "workload": "detector",
        "target": "TF default / cropgrad default >= 2",
        "measured": 1.5,
        "bound": 2.0,
        "sense": ">=",
        "met": False,
        "unit": "ratio",
    }
    quiet = report.format_targets({"targets": [{**row, "other_cpus": 0.05}]})
    busy = report.format_targets({"targets": [{**row, "other_cpus": 0.9}]})
    assert quiet.rstrip().endswith("missed")
    assert busy.rstrip().endswith("not judged: other programs used 0.9 CPUs")


def test_a_scaling_target_beyond_the_machines_arithmetic_is_not_judged():
    row = {
        "workload": "augment",
        "target": "scaling 1 thread -> default >= 1.6",
        "measured": 1.3,
        "bound": 1.6,
        "sense": ">=",
        "met": False,
        "unit": "ratio",
        "other_cpus": 0.0,
    }

    def verdict(**changes):
        return report.format_targets({"targets": [{**row, **changes}]}).rstrip()

    assert verdict(machine_scaling=None).endswith("missed")
    assert verdict(machine_scaling=1.95).endswith("missed")
    assert verdict(machine_scaling=1.08).endswith(
        "not judged: the machine's arithmetic scales 1.08x"
    )
    assert verdict(machine_scaling=1.08, measured=1.7, met=True).endswith("met")
    # check_targets gives the figure to the scaling targets only.
    results = [
        {
            "name": "augment",
            "ratios": {
                "scaling_1thread_over_default": 1.3,
                "tf_default_over_cropgrad_default": 5.0,
            },
            "median_s": {},
            "load": {"other_cpus": 0.0},
        }
    ]
    rows = targets.check_targets(results, machine_scaling=1.08)
    scaling = {r["target"]: r["machine_scaling"] for r in rows}
    assert scaling["scaling 1 thread -> default >= 1.6"] == 1.08
    assert scaling["TF default / cropgrad default >= 4"] is None


def test_explain_says_what_every_column_of_the_tables_means():
    result = run_bench("--explain")
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


def test_help_lists_the_options():
    result = run_bench("--help")
    assert result.returncode == 0, result.stderr
    assert "usage: python benchmarks/bench.py" in result.stdout
    for option in ("--quick", "--workloads", "--explain", "--json", "--targets"):
        assert option in result.stdout, option


# --------------------------------------------------------------------------
# The rows of the adapters (JAX, PyTorch) and of cropgrad's NCHW layout


def _adapter_rows(module, framework, name):
    """The benchmark's rows module of an adapter; the test is skipped (or,
    under CROPGRAD_REQUIRE_ADAPTERS=1, fails) without its framework."""
    try:
        importlib.import_module(framework)
    except ImportError as exc:
        missing(f"{name} cannot be imported ({exc})", "CROPGRAD_REQUIRE_ADAPTERS")
    return importlib.import_module(f"cropgrad_bench.{module}")


def test_nchw_rows_through_the_registry():
    small = workloads.Workload("dense", workloads.GRAD_IMAGE, 1, 12, 10, 8, 9, (3, 4))
    made, errors = rows.adapter_rows({"nchw": nchw_rows}, small, True)
    assert not errors
    ((_, row),) = made
    assert row["name"] == "dense-nchw"
    out = row["columns"]["cropgrad_default_new_output"]()
    nhwc = row["columns"]["nhwc_default"]()
    assert out.tobytes() == np.ascontiguousarray(nhwc.transpose(0, 3, 1, 2)).tobytes()
    assert row["targets"][0][1] == "nchw_over_nhwc"
    tiny = workloads.Workload("tiny", workloads.GRAD_IMAGE, 1, 8, 8, 2, 1, (2, 2))
    assert nchw_rows.extra_rows(tiny, True) == []


def test_jax_rows_on_a_small_pooler():
    jax_rows = _adapter_rows("jax_rows", "jax", "JAX")
    from cropgrad_bench.workloads import ROI_ROWS

    (forward,) = [w for w in ROI_ROWS if w.name == "roi-fpn-forward"]
    small = forward.quick().variant(nchw=(2, 8, 20, 24), num_boxes=9)
    made, errors = rows.adapter_rows({"jax": jax_rows}, small, True)
    assert not errors
    names = [row["name"] for _, row in made]
    assert names == ["roi-fpn-forward-jax", "roi-fpn-forward-backward-jax"]
    for _, row in made:
        for call in row["columns"].values():
            call()  # every column runs
        assert any(t[1] == "pure_jax_over_cropgrad_jax" for t in row["targets"])
    # The pure-JAX op the rows compare with computes RoIAlign: torchvision's
    # result (the NumPy API's bits) up to its own rounding.
    p = small.problem()
    options = small.options()
    expected = cropgrad.roi_align(
        p["image"], p["boxes"], p["box_ind"], small.crop, **options
    )
    ours = jax_rows.pure_jax_roi_align(
        p["image"], p["boxes"], p["box_ind"], small.crop, **options
    )
    assert np.abs(np.asarray(ours) - expected).max() < 1e-5
    assert np.abs(expected).max() > 0.1
    assert jax_rows.extra_rows(small.variant(name="roi-mask-forward"), True) == []


def test_torch_rows_on_a_small_detector():
    torch_rows = _adapter_rows("torch_rows", "torch", "PyTorch")
    from cropgrad_bench.workloads import FORWARD, GRAD_IMAGE, Workload

    assert rows.ADAPTERS["torch"] == "cropgrad_bench.torch_rows"
    found = []
    for name, op in (("detector-forward", FORWARD), ("detector", GRAD_IMAGE)):
        small = Workload(name, op, 2, 12, 10, 8, 9, (3, 4))
        made, errors = rows.adapter_rows({"torch": torch_rows}, small, True)
        assert not errors
        found += [row for _, row in made]
    forward, both = found
    assert forward["name"] == "detector-forward-torch"
    assert both["name"] == "detector-torch-forward-backward"
    for row in found:
        for column, call in row["columns"].items():
            call()  # every column runs
        for num, den in row["ratios"].values():
            assert num in row["columns"] and den in row["columns"]
    # grid_sample agrees with TensorFlow's op up to rounding where a sample
    # lies inside the image (which shows the affine grid is the right one);
    # near the border, where it blends in zeros, it does not.
    f, b = forward["figures"], both["figures"]
    assert f["max_abs_diff_grid_sample_inside"] < 1e-5
    assert f["max_abs_diff_grid_sample"] > 1e-2
    assert b["max_abs_diff_grid_sample_d_image_inside"] < 1e-5
    assert b["max_rel_diff_grid_sample_d_boxes_inside"] < 1e-5
    assert b["max_abs_diff_grid_sample_d_image"] > 1e-2
    assert (
        torch_rows.extra_rows(
            Workload("dense", GRAD_IMAGE, 1, 8, 8, 2, 3, (2, 2)), True
        )
        == []
    )


def test_torch_roi_rows_on_a_small_pooler():
    torch_rows = _adapter_rows("torch_rows", "torch", "PyTorch")
    torch = sys.modules["torch"]
    from cropgrad_bench.workloads import FORWARD_BACKWARD, ROI_ROWS

    by_name = {w.name: w for w in ROI_ROWS}
    found = []
    for name in ("roi-fpn-forward", "roi-fpn-grad-boxes"):
        small = by_name[name].variant(nchw=(2, 8, 20, 24), num_boxes=9)
        made, errors = rows.adapter_rows({"torch": torch_rows}, small, True)
        assert not errors
        found += [(small, row) for _, row in made]
    (w_forward, forward), (w_both, both) = found
    assert forward["name"] == "roi-fpn-forward-torch"
    assert both["name"] == "roi-fpn-torch-forward-backward"
    p = w_both.problem()
    options = w_both.options()
    expected_crops = cropgrad.roi_align(
        p["image"], p["boxes"], p["box_ind"], w_both.crop, **options
    )
    expected_d_image = cropgrad.roi_align_grad_image(
        p["grads"], p["boxes"], p["box_ind"], p["image"].shape, **options
    )
    # The torch columns compute what the NumPy API and torchvision do.
    crops = forward["columns"]["cropgrad_default"]()
    assert_same_bits(
        crops.numpy(),
        cropgrad.roi_align(
            *(w_forward.problem()[k] for k in ("image", "boxes", "box_ind")),
            w_forward.crop,
            **options,
        ),
    )
    (d_image,) = both["columns"]["cropgrad_default"]()
    assert_same_bits(d_image.numpy(), expected_d_image)
    d_image, d_boxes = both["columns"]["torch_op_input_and_boxes"]()
    assert_same_bits(d_image.numpy(), expected_d_image)
    assert torch.count_nonzero(d_boxes[:, 1:]) > 0
    both["columns"]["numpy_api"]()
    assert expected_crops.shape == (9, 8, *w_both.crop)
    # torchvision times its forward op and input gradient beside the
    # training-step row; ONNX Runtime, which has no gradient, does not.
    assert both["reference_op"] == FORWARD_BACKWARD
    reasons = roi_worker.not_measured(w_both.variant(reference_op=FORWARD_BACKWARD))
    assert "torchvision" not in reasons
    assert "no gradient" in reasons["onnxruntime_default"]
    spec = w_both.variant(reference_op=FORWARD_BACKWARD).reference_spec()
    assert spec["op"] == "forward_backward"


def _tiny_row(script, tmp_path):
    """`script` of benchmarks/ run on the tiny workload for one round: its
    table and its JSON row."""
    out = tmp_path / "row.json"
    done = subprocess.run(
        [sys.executable, "-P", os.path.join(BENCHMARKS, script)]
        + ["--workloads", "tiny", "--rounds", "1", "--json", str(out)],
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout, json.loads(out.read_text())["rows"][0]


def test_idle_table_times_every_situation_and_thread_count(tmp_path):
    from cropgrad_bench import idle

    threads_seen = []

    def call(num_threads):
        threads_seen.append(num_threads)

    medians = idle.measure({"fake": call}, rounds=2)
    assert set(medians["fake"]) == set(idle.SITUATIONS)
    assert all(set(m) == set(idle.THREADS) for m in medians["fake"].values())
    # Warm samples make 2 * WARM_CALLS calls, the others one, per round.
    per_round = len(idle.THREADS) * (2 * idle.WARM_CALLS + 2)
    assert len(threads_seen) == 2 * per_round
    assert sorted(set(threads_seen)) == list(idle.THREADS)


def test_idle_reference_loop_computes_and_command_line_reports(tmp_path):
    from cropgrad_bench import idle
    from cropgrad_bench.machine import compile_reference

    scale = compile_reference(idle._REFERENCE_C, "cg_bench_scale", 4)
    ref = idle.Reference(scale, 1000)
    ref.x[:] = np.arange(1000, dtype=np.float32)
    ref(2)
    np.testing.assert_array_equal(ref.y, 2 * ref.x)
    stdout, row = _tiny_row("idle.py", tmp_path)
    assert "OpenMP static loop" in stdout and "OpenMP arithmetic" in stdout
    assert "tiny" in stdout and row["workload"] == "tiny"
    assert row["compute_rounds"] > 0
    for who in ("cropgrad", "reference", "compute"):
        for situation in idle.SITUATIONS:
            assert all(v > 0 for v in row["median_s"][who][situation].values())


def test_fresh_first_touch_writes_every_byte_and_command_line_reports(tmp_path):
    from cropgrad_bench import fresh

    seen = []
    real_empty = np.empty

    def spy(shape, dtype):
        seen.append(real_empty(shape, dtype))
        seen[-1].fill(7)
        return seen[-1]

    call = fresh._first_touch((3, 5, 7), np.float32)
    fresh.np.empty = spy
    try:
        call(2)
    finally:
        fresh.np.empty = real_empty
    assert not seen[0].any()
    stdout, row = _tiny_row("fresh.py", tmp_path)
    assert "(fresh-out)/touch" in stdout and "tiny" in stdout
    assert row["workload"] == "tiny"
    for who in ("out", "fresh", "first_touch"):
        assert all(v > 0 for v in row["median_s"][who].values())


@pytest.mark.parametrize("name", ["warp-flow", "stn", "deform-attn"])
def test_grid_workloads_are_the_issue_sizes(name):
    from cropgrad_bench import grid

    image, coords, grads = grid.make_problem(name)
    expected = {
        "warp-flow": ((1, 3, 1024, 1024), (1, 1024, 1024, 2)),
        "stn": ((64, 3, 64, 64), (64, 64, 64, 2)),
        "deform-attn": ((64, 32, 64, 64), (64, 300, 4, 2)),
    }[name]
    assert (image.shape, coords.shape) == expected
    assert grads.shape == image.shape[:2] + coords.shape[1:3]
    assert np.isfinite(coords).all() and np.abs(coords).max() <= 2


def test_grid_op_calls_compute_their_op_and_idle_takes_their_names():
    from cropgrad_bench import grid, idle

    image, coords, grads = grid.make_problem("stn")
    expected = {
        "forward": cropgrad.grid_sample(image, coords),
        "grad-image": cropgrad.grid_sample_grad_image(grads, coords, image.shape),
        "grad-grid": cropgrad.grid_sample_grad_grid(grads, image, coords),
    }
    assert set(expected) == set(grid.OPS)
    for op, want in expected.items():
        assert f"stn-{op}" in idle.KNOWN
        np.testing.assert_array_equal(grid.op_call(f"stn-{op}")(2), want)


def test_grid_columns_sample_with_the_options_given(tmp_path):
    from cropgrad_bench import grid

    options = {"mode": "nearest", "padding_mode": "border"}
    image, coords, grads = grid.make_problem("stn")
    columns = grid.cropgrad_columns("stn", 2, options)
    np.testing.assert_array_equal(
        columns["cropgrad forward 1 thr"](),
        cropgrad.grid_sample(image, coords, **options),
    )
    assert not np.array_equal(
        columns["cropgrad forward 1 thr"](), cropgrad.grid_sample(image, coords)
    )
    # The command line names them, in the table and the JSON.
    out = tmp_path / "grid.json"
    done = subprocess.run(
        [sys.executable, "-P", os.path.join(BENCHMARKS, "grid.py")]
        + ["--workloads", "stn", "--rounds", "1", "--json", str(out)]
        + ["--mode", "nearest", "--padding-mode", "border"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "stn (nearest, border; default threads" in done.stdout
    assert json.loads(out.read_text())["options"] == options


def test_the_pure_jax_grid_sample_is_cropgrads_up_to_rounding():
    # The benchmark's pure-JAX rival computes the same thing, gradients too.
    try:
        import jax
        import jax.numpy as jnp

        import cropgrad.jax as cgj
    except ImportError as exc:
        missing(f"JAX cannot be imported ({exc})", "CROPGRAD_REQUIRE_ADAPTERS")
    from cropgrad_bench import grid

    rng = np.random.default_rng(0)
    image = jnp.asarray(rng.standard_normal((2, 3, 7, 9)).astype(np.float32))
    coords = jnp.asarray(rng.uniform(-1.3, 1.3, (2, 4, 5, 2)).astype(np.float32))
    grads = jnp.asarray(rng.standard_normal((2, 3, 4, 5)).astype(np.float32))
    ours, ours_vjp = jax.vjp(cgj.grid_sample, image, coords)
    theirs, theirs_vjp = jax.vjp(grid.jax_gather_grid_sample, image, coords)
    np.testing.assert_allclose(theirs, ours, atol=1e-5)
    for a, b in zip(theirs_vjp(grads), ours_vjp(grads), strict=True):
        np.testing.assert_allclose(a, b, atol=1e-4)


def test_grid_command_line_reports_every_column(tmp_path):
    from cropgrad_bench import grid

    out = tmp_path / "grid.json"
    done = subprocess.run(
        [
            sys.executable,
            "-P",
            os.path.join(BENCHMARKS, "grid.py"),
            "--workloads",
            "stn",
            "--rounds",
            "1",
            "--json",
            str(out),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    row = json.loads(out.read_text())["rows"][0]
    columns = grid.cropgrad_columns("stn", 2)
    assert set(columns) <= set(row["median_s"])
    assert "cropgrad fwd+bwd NCHW / NHWC" in done.stdout
    # PyTorch, ONNX Runtime and JAX give their columns or say why not.
    for backend, column in (
        ("torch", "torch fwd+bwd"),
        ("onnxruntime", "onnxruntime forward"),
        ("jax", "cropgrad.jax fwd+bwd"),
        ("jax", "pure jax fwd+bwd"),
    ):
        assert (column in row["median_s"]) != (backend in row["errors"])


def test_idle_default_workloads_each_run_once_into_their_output():
    from cropgrad_bench import idle

    for name in idle.DEFAULT_WORKLOADS:
        out = idle.workload_call(name)(1)
        assert np.any(out != 0), name
