"""The run: every row measured in rounds, with the machine's load beside it."""

import hashlib
import os
import platform
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

import cropgrad

from . import pipeline
from .columns import (
    CG32,
    CGD,
    CGN,
    COLUMNS,
    GRAD_IMAGE_BESIDE,
    NCHW_BESIDE,
    RATIOS,
    ROI_COLUMNS,
    ROI_RATIOS,
    ROOF,
    ROOF1,
    ROOFN,
    TF_MODES,
    columns_of,
    cropgrad_columns,
    roofline_columns,
)
from .machine import (
    NOISY,
    CpuMeter,
    compute_scaling,
    machine_info,
    wait_until_quiet,
)
from .roi_worker import References, write_problem
from .rows import adapter_rows, load_adapters
from .targets import check_targets
from .tf_worker import TensorFlowWorker, WorkerError, tensorflow_status
from .timing import Column, measure_rounds, plan_rounds
from .workloads import CROP_AND_RESIZE, GRAD_BOXES, ROI_ALIGN, WORKLOADS


def _median(values):
    values = [v for v in values if v is not None]
    return float(np.median(values)) if values else None


def _paired_ratio(num, den):
    """Median over rounds of num[r] / den[r]."""
    if not num or not den or len(num) != len(den):
        return None
    return _median([a / b for a, b in zip(num, den) if b > 0])


def _stderr(message):
    print(message, file=sys.stderr, flush=True)


class _Run:
    """The state of one run: settings, TensorFlow and reference workers,
    thread pool."""

    def __init__(self, settings, threads, progress):
        self.settings = settings
        self.threads = threads
        self.progress = progress
        self.workers = {}
        self.tf_info = {}
        self.references = References(threads, progress)
        self.retries = settings.noisy_retries
        self.pool = ThreadPoolExecutor(max_workers=threads) if threads > 1 else None

    def start_tensorflow(self, enabled):
        ok, reason = tensorflow_status(enabled)
        self.tf_info = {"available": False, "reason": reason, "version": None}
        self.tf_info["workers"] = {}
        if not ok:
            return
        self.progress(
            "starting TensorFlow (default and deterministic worker processes)..."
        )
        try:
            for column, mode in TF_MODES.items():
                self.workers[column] = TensorFlowWorker(mode)
            for column, worker in self.workers.items():
                info = worker.start()
                info.pop("ok", None)
                self.tf_info["workers"][TF_MODES[column]] = info
            version = next(iter(self.tf_info["workers"].values()))["tensorflow"]
            self.tf_info.update(available=True, reason="", version=version)
        except WorkerError as exc:
            self.progress(str(exc))
            self.stop_tensorflow(str(exc).splitlines()[0])

    def stop_tensorflow(self, reason):
        for worker in self.workers.values():
            worker.close()
        self.workers = {}
        self.tf_info.update(available=False, reason=reason)

    def close(self):
        if self.pool is not None:
            self.pool.shutdown()
        for worker in self.workers.values():
            worker.close()
        self.references.close()

    def workers_for(self, workload):
        """{column: worker}: the workers that time `workload`'s op."""
        if workload.family == ROI_ALIGN:
            return self.references.for_workload(workload)
        return self.workers

    def worker_failed(self, exc):
        """Go on without the worker that raised `exc` rather than lose the
        cropgrad figures."""
        if self.references.owns(exc.worker):
            self.progress(f"    measuring the rest without {exc.worker.label}")
            self.references.drop(exc.worker, str(exc))
            return
        self.progress(f"    {exc}\n    measuring the rest without TensorFlow")
        self.stop_tensorflow("n/a (TensorFlow worker failed)")

    # ----------------------------------------------------------------------

    def measure(self, name, workload, build, finish, external=True):
        """One row, measured again while other processes disturb it.

        `build(problem)` returns the local columns ({name: callable or
        sampler}); `finish(result, samples)` adds the medians and ratios.
        `external`: with the columns of worker processes (TensorFlow's, or
        the RoIAlign references').
        """
        attempts = []
        while True:
            t0 = time.perf_counter()
            workers = self.workers_for(workload) if external else {}
            try:
                result = self._measure_once(name, workload, build, finish, workers)
            except WorkerError as exc:
                self.worker_failed(exc)
                continue
            result["seconds"] = time.perf_counter() - t0
            attempts.append(result)
            other = result["load"]["other_cpus"]
            noisy = other is not None and other > NOISY
            busy = (
                f"; other processes used {other:.2f} CPUs meanwhile"
                if other is not None
                else ""
            )
            self.progress(
                f"    done in {result['seconds']:.1f} s{busy}"
                + (" (noisy)" if noisy else "")
            )
            if not noisy or self.retries <= 0:
                break
            if not wait_until_quiet(self.settings.quiet_wait):
                self.progress("    the machine stays busy: keeping this measurement")
                break
            self.retries -= 1
            self.progress("    measuring it again")
        # The attempt least disturbed by other processes.
        result = min(attempts, key=lambda r: r["load"]["other_cpus"] or 0.0)
        result["attempts"] = [
            {"load": r["load"], "seconds": r["seconds"]} for r in attempts
        ]
        return result

    def _measure_once(self, name, workload, build, finish, workers):
        settings = self.settings
        meter = CpuMeter([w.proc.pid for w in workers.values()])
        problem = workload.problem()
        path = None
        if any(getattr(w, "needs_problem_file", False) for w in workers.values()):
            path = write_problem(problem, workload, self.references.directory)
        try:
            for worker in workers.values():
                worker.load(workload, path)
            local = build(problem)
            loaded = {column: w.loaded() for column, w in workers.items()}
        finally:
            if path is not None:
                os.remove(path)
        columns = [
            Column(n, sampler=v) if hasattr(v, "sample") else Column(n, fn=v)
            for n, v in local.items()
        ]
        columns += [Column(n, worker=w) for n, w in workers.items()]
        for column in columns:  # one at a time: nothing else runs meanwhile
            column.calibrate(settings)
        rounds = plan_rounds(columns, settings)
        self.progress(
            f"    {rounds} rounds of {len(columns)} columns "
            f"(about {rounds * sum(c.cost(settings) for c in columns):.1f} s)"
        )
        measure_rounds(columns, rounds, settings)
        samples = {c.name: c.samples for c in columns}
        result = workload.as_dict()
        result["name"] = name
        result["kind"] = workload.kind
        result["load"] = meter.stop()
        result["bytes"] = {k: int(v.nbytes) for k, v in problem.items()}
        shape, dtype = workload.output()
        result["bytes"]["output"] = int(np.prod(shape)) * dtype.itemsize
        # What workers said of their first call (the RoIAlign references:
        # the result's hash; `_roi_figures` compares it with cropgrad's).
        replies = {c: r for c, r in loaded.items() if r}
        if replies:
            result["worker_results"] = replies
        result["rounds"] = rounds
        result["calls_per_block"] = {
            c.name: c.inner for c in columns if c.sampler is None
        }
        finish(result, samples)
        result["min_s"] = {
            key: (min(samples[key]) if samples.get(key) else None)
            for key in result["median_s"]
        }
        result["samples_s"] = samples
        return result

    # ----------------------------------------------------------------------

    def op_row(self, workload):
        built = {}

        def build(problem):
            built["columns"] = cropgrad_columns(
                workload, problem, self.pool, self.threads
            )
            return built["columns"]

        def finish(result, samples):
            _op_figures(result, samples, workload)
            if workload.family == ROI_ALIGN:
                self._roi_figures(result, workload, built["columns"])

        return self.measure(workload.name, workload, build, finish)

    def _roi_figures(self, result, workload, columns):
        """A RoIAlign row's reasons for its n/a columns, and whether the
        references computed cropgrad's bits."""
        reasons = self.references.reasons_for(workload)
        if workload.data_format == "NCHW":
            reasons[NCHW_BESIDE] = "n/a (an NHWC row's column)"
        if workload.op != GRAD_BOXES:
            reasons[GRAD_IMAGE_BESIDE] = "n/a (a boxes-gradient row's column)"
        result["not_measured"] = {
            column: reasons.get(column, "n/a")
            for column in ROI_COLUMNS
            if result["median_s"][column] is None
        }
        replies = result.pop("worker_results", {})
        if not replies:
            result["same_bits"] = {}
            return
        ours = np.ascontiguousarray(columns[CGN]())
        digest = hashlib.sha256(ours.tobytes()).hexdigest()
        result["same_bits"] = {
            column: reply.get("sha256") == digest
            and reply.get("shape") == list(ours.shape)
            for column, reply in replies.items()
        }
        for column, same in result["same_bits"].items():
            if not same:
                self.progress(
                    f"    {column}'s result differs from cropgrad's bits: the "
                    "columns may not compute the same problem"
                )

    def pipeline_row(self, workload):
        def build(problem):
            return pipeline.pipeline_columns(workload, problem, self.pool, self.threads)

        def finish(result, samples):
            result["median_s"] = {
                key: _median(samples.get(key, [])) for key in pipeline.COLUMNS
            }
            result["ratios"] = pipeline.pipeline_ratios(samples, _paired_ratio)

        # TensorFlow's workers stay idle: this row is about cropgrad's threads.
        return self.measure(workload.name, workload, build, finish, external=False)

    def adapter_row(self, adapter, row, workload):
        if row.get("reference_op"):
            # The references time the row's own calls (e.g. forward and
            # backward) rather than the workload's op.
            workload = workload.variant(reference_op=row["reference_op"])

        def build(problem):
            columns = dict(row["columns"])
            columns.update(roofline_columns(workload, problem, self.pool, self.threads))
            return columns

        def finish(result, samples):
            _op_figures(result, samples, workload)
            for column in row["columns"]:
                result["median_s"].setdefault(column, _median(samples[column]))
            for key, (num, den) in row.get("ratios", {}).items():
                result["ratios"][key] = _paired_ratio(samples.get(num), samples[den])

        result = self.measure(row["name"], workload, build, finish)
        result.update(
            kind="adapter",
            adapter=adapter,
            workload=workload.name,
            about=row.get("about", ""),
        )
        return result


def _op_figures(result, samples, workload):
    """Medians and ratios of a row of the main table."""
    # The roofline is the faster of the threaded and the one-thread passes
    # in each round: threads do not pay off on arrays that fit in a core's
    # cache, and a bound should not be beaten.
    samples[ROOF] = [min(a, b) for a, b in zip(samples[ROOFN], samples[ROOF1])]
    columns, ratios = columns_of(workload)
    result["median_s"] = {name: _median(samples.get(name, [])) for name in columns}
    result["ratios"] = {
        key: _paired_ratio(samples.get(num), samples.get(den))
        for key, (num, den) in ratios.items()
    }
    if CG32 in samples:
        result["ratios"][f"{workload.dtype.name}_over_float32"] = _paired_ratio(
            samples[CGD], samples[CG32]
        )


def _relative(results):
    """float16 / float32 and float64 / float32 times of the image gradient.

    Measured side by side in the float16 and float64 rows (default threads).
    """
    rel = {}
    for r in results:
        for key, value in r["ratios"].items():
            if key.endswith("_over_float32"):
                rel[f"{r['name']}: {key}"] = value
    return rel


def run(
    names,
    settings,
    tensorflow=True,
    adapters=True,
    progress=None,
    torchvision=None,
    onnxruntime=True,
):
    """Run the benchmark on the workloads `names`; return the results dict.

    Each workload is a row; after an op's row come the rows that installed
    adapters add for it (`cropgrad_bench.rows`).  TensorFlow's workers
    start when a ``crop_and_resize`` op row is to be measured, the RoIAlign
    references' when a RoIAlign row is: `torchvision` is the Python that
    runs torchvision (`cropgrad_bench.roi_worker.torchvision_python`;
    False: none), `onnxruntime` whether to time ONNX Runtime.
    """
    progress = progress or _stderr
    started = time.perf_counter()
    config = cropgrad.show_config("dicts")
    threads = int(config["default_threads"])
    state = _Run(settings, threads, progress)
    modules, adapter_status = load_adapters(adapters)
    results, extra_targets = [], []
    load_start = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    # A virtual machine's two CPUs can be two cores at one moment and one
    # core's two hardware threads the next: the arithmetic's scaling is
    # measured at both ends of the run (machine_info gives the end's).
    scaling_at_start = compute_scaling()
    chosen = [WORKLOADS[name] for name in names]
    try:
        if any(w.family == CROP_AND_RESIZE and w.kind == "op" for w in chosen):
            state.start_tensorflow(tensorflow)
        else:
            state.tf_info = {
                "available": False,
                "reason": "n/a (no crop_and_resize row in this run)",
                "version": None,
                "workers": {},
            }
        if any(w.family == ROI_ALIGN for w in chosen):
            state.references.start(torchvision, onnxruntime)
        if load_start is not None and load_start > 1.0:
            progress(
                f"note: load average {load_start:.2f} before starting; other work "
                "on this machine makes the figures noisy"
            )
        for i, (name, workload) in enumerate(zip(names, chosen), 1):
            if settings.quick and workload.family == ROI_ALIGN:
                workload = workload.quick()
            progress(f"[{i}/{len(names)}] {name}: {workload.describe()}")
            if workload.kind == "pipeline":
                results.append(state.pipeline_row(workload))
                continue
            results.append(state.op_row(workload))
            rows, errors = adapter_rows(modules, workload, settings.quick)
            for adapter, exc in errors:
                progress(f"    {adapter} rows failed: {type(exc).__name__}: {exc}")
                adapter_status[adapter] = f"failed: {type(exc).__name__}: {exc}"
            for adapter, row in rows:
                progress(f"    + {row['name']} ({adapter}): {row.get('about', '')}")
                results.append(state.adapter_row(adapter, row, workload))
                extra_targets += [(row["name"], *t) for t in row.get("targets", ())]
    finally:
        state.close()
    machine = machine_info()
    machine["compute_scaling_at_start"] = scaling_at_start
    # A scaling target is judged if the machine reached it at either end.
    best_scaling = max(
        (s for s in (scaling_at_start, machine["compute_scaling"]) if s),
        default=None,
    )
    return {
        "format": "cropgrad-bench-1",
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "machine": machine,
        "versions": {
            "cropgrad": cropgrad.__version__,
            "numpy": np.__version__,
            "python": platform.python_version(),
            "tensorflow": state.tf_info["version"],
            **{
                backend: info.get("version")
                for backend, info in state.references.info.items()
            },
        },
        "show_config": config,
        "default_threads": threads,
        "tensorflow": state.tf_info,
        "references": state.references.info,
        "adapters": adapter_status,
        "settings": settings.as_dict(),
        "columns": list(COLUMNS),
        "ratios": {k: list(v) for k, v in RATIOS.items()},
        "roi_columns": list(ROI_COLUMNS),
        "roi_ratios": {k: list(v) for k, v in ROI_RATIOS.items()},
        "pipeline": {
            "columns": list(pipeline.COLUMNS),
            "idle_wait_s": pipeline.IDLE_WAIT,
            "window_s": pipeline.WINDOW,
        },
        "load": {
            "loadavg_at_start": load_start,
            "other_cpus_max": max(
                (
                    r["load"]["other_cpus"]
                    for r in results
                    if r["load"]["other_cpus"] is not None
                ),
                default=None,
            ),
        },
        "workloads": results,
        "relative": _relative(results),
        "targets": check_targets(results, extra_targets, best_scaling),
        "total_seconds": time.perf_counter() - started,
    }
