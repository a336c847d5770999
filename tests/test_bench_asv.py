"""The asv suite (``benchmarks/asv_benchmarks``) without asv: every
benchmark's setup and one timed call on its smallest problem, so that a
change to the API or to the full benchmark's problems cannot leave the
suite broken until someone next runs asv.  Skipped where ``benchmarks/``
is not beside the tests."""

import inspect

import numpy as np
import pytest
from _helpers import benchmarks_on_path

benchmarks_on_path("asv_benchmarks")

from asv_benchmarks import crop_and_resize, grid_sample, roi_align  # noqa: E402

FAMILIES = (crop_and_resize, roi_align, grid_sample)


def _benchmarks():
    """(module, class, its time_ method's name), as asv discovers them."""
    found = []
    for module in FAMILIES:
        for name, cls in vars(module).items():
            if name.startswith("_") or not inspect.isclass(cls):
                continue
            for method in sorted(m for m in dir(cls) if m.startswith("time_")):
                found.append(
                    pytest.param(cls, method, id=f"{module.__name__}.{name}.{method}")
                )
    return found


BENCHMARKS_FOUND = _benchmarks()


def test_each_family_times_its_four_op_kinds():
    families = [p.id.rsplit(".", 2)[0] for p in BENCHMARKS_FOUND]
    assert sorted(families) == sorted(m.__name__ for m in FAMILIES for _ in range(4))


@pytest.mark.parametrize(("cls", "method"), BENCHMARKS_FOUND)
def test_benchmark_runs_on_its_smallest_problem(cls, method):
    assert len(cls.params) == len(cls.param_names)
    assert cls.param_names[-1] == "threads" and cls.params[-1] == (1, "default")
    smallest = [values[0] for values in cls.params]
    bench = cls()
    bench.setup(*smallest)
    bench.out.fill(np.nan)
    getattr(bench, method)(*smallest)
    assert np.isfinite(bench.out).all()
