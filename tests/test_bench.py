"""The benchmark's plumbing: rows from adapters, the pipeline row, targets.

Quick runs in this process (the figures themselves are not judged: only
that every column is measured and reported).
"""

import json
import subprocess
import sys
import types

import numpy as np
import pytest

import cropgrad
from cropgrad._bench import nchw_rows, report, rows
from cropgrad._bench.run import run
from cropgrad._bench.timing import Settings
from cropgrad._bench.workloads import WORKLOADS


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
            "absent": "cropgrad._bench.no_such_rows",
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
    command = [sys.executable, "-P", "-m", "cropgrad", "bench", "--quick"]
    options = ["--workloads", "tiny", "--no-tensorflow", "--no-adapters"]
    result = subprocess.run(
        [*command, *options, "--repeats", "1", "--json", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert "Adapter rows: jax n/a (disabled with --no-adapters)" in result.stdout
    assert json.loads(path.read_text())["adapters"]["torch"].startswith("n/a")


def test_machine_info_names_the_caches_and_simd_target():
    from cropgrad._bench.machine import machine_info

    info = machine_info()
    assert info["simd_target"] == cropgrad._runtime.simd.simd_target()
    assert info["tuning"] == cropgrad._kernels.crop_and_resize.grad_image.tuning()
    assert info["l2_per_core_bytes"] > 0 and info["l3_per_core_bytes"] > 0
    for key in ("l2_bytes", "l3_bytes"):
        assert info[key] is None or info[key] > 0
    json.dumps(info)
    line = report._caches(dict(info, l2_bytes=1 << 20, l3_bytes=32 << 20))
    assert line == f", L2 1 MiB, L3 32 MiB, {info['simd_target']}"


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
