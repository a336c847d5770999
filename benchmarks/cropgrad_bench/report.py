"""The results as text (the table, the pipeline row, the targets) and JSON."""

import json
import sys
import textwrap

from . import pipeline
from .columns import (
    CG1,
    CGD,
    CGN,
    COLUMNS,
    GRAD_IMAGE_BESIDE,
    NCHW_BESIDE,
    ORT1,
    ORTD,
    ROI_COLUMNS,
    ROOF,
    TFD,
    TFX,
    TV,
)
from .machine import NOISY
from .workloads import ROI_ALIGN


def _micro():
    encoding = getattr(sys.stdout, "encoding", None) or "ascii"
    try:
        "\u00b5".encode(encoding)
        return "\u00b5s"
    except (UnicodeEncodeError, LookupError):
        return "us"


def format_time(seconds, unit_us=None):
    if seconds is None:
        return "n/a"
    if seconds < 1e-3:
        return f"{seconds * 1e6:.1f} {unit_us or _micro()}"
    if seconds < 1.0:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds:.3f} s"


def format_ratio(value):
    return "n/a" if value is None else f"{value:.2f}"


def _aligned(heads, rows):
    """Lines of a table: the first column left-aligned, the others right."""
    widths = [
        max(len(h), *(len(row[i]) for row in rows)) if rows else len(h)
        for i, h in enumerate(heads)
    ]

    def line(cells):
        return "  ".join(
            c.ljust(widths[0]) if i == 0 else c.rjust(widths[i])
            for i, c in enumerate(cells)
        )

    return [line(heads), "  ".join("-" * w for w in widths)] + [
        line(row) for row in rows
    ]


BESIDE = (NCHW_BESIDE, GRAD_IMAGE_BESIDE)


def _is_roi(row):
    return row.get("family") == ROI_ALIGN


def format_table(report):
    """The op rows (and the rows adapters add) as a text table with a legend,
    then the RoIAlign rows' table (`format_roi_table`), then the adapters
    and the machine."""
    threads = report["default_threads"]
    us = _micro()
    heads = [
        "workload",
        "cg 1 thr",
        f"cg {threads} thr",
        "cg new out",
        "roofline",
        "TF default",
        "TF determ",
        "TF/cg",
        "TFdet/cg1",
        "cg/roof",
        "scaling",
        "other",
    ]
    rows, extra = [], []
    for r in report["workloads"]:
        if r.get("kind") == "pipeline" or _is_roi(r):
            continue
        m, q = r["median_s"], r["ratios"]
        rows.append(
            [
                r["name"],
                *(format_time(m[c], us) for c in (CG1, CGD, CGN, ROOF, TFD, TFX)),
                *(
                    format_ratio(q[k])
                    for k in (
                        "tf_default_over_cropgrad_default",
                        "tf_deterministic_over_cropgrad_1thread",
                        "cropgrad_default_over_roofline",
                        "scaling_1thread_over_default",
                    )
                ),
                format_ratio(r["load"]["other_cpus"]),
            ]
        )
        extra += [
            f"  {r['name']}: {column} {format_time(value, us)}"
            for column, value in m.items()
            if column not in COLUMNS
        ]
    out = []
    tf = report["tensorflow"]
    # A run of RoIAlign rows alone has no table here.
    if rows or not any(_is_roi(r) for r in report["workloads"]):
        out += _aligned(heads, rows) + [""]
        out.append(
            f"TensorFlow columns: {tf['reason']}"
            if not tf["available"]
            else f"TensorFlow {tf['version']} (tf.raw_ops, inputs as tensors "
            "made before timing)"
        )
    legend = (
        "Times are medians over rounds of interleaved measurements; ratios are "
        "medians of the per-round ratios. cg: cropgrad into a preallocated out= "
        f"(1 thread / default {threads}); cg new out: default threads, allocating "
        "the result; roofline: NumPy reading the inputs once plus zeroing the "
        f"output (the faster of 1 and {threads} threads); TF/cg: TF default / cg "
        "default; TFdet/cg1: TF with op determinism / cg 1 thread; cg/roof: cg "
        "default / roofline; scaling: cg 1 thread / cg default; other: CPUs that "
        f"other processes kept busy meanwhile (above {NOISY} the row is noisy)."
    )
    if out:
        out += textwrap.wrap(legend, 88)
    if extra:
        out += ["Other columns of the rows adapters add:", *extra]
    roi_table = format_roi_table(report)
    if roi_table:
        if out:
            out.append("")
        out += [roi_table, ""]
    adapters = report.get("adapters", {})
    if adapters:
        out.append(
            "Adapter rows: "
            + "; ".join(f"{name} {status}" for name, status in adapters.items())
        )
    machine = report["machine"]
    out.append(
        f"cropgrad {report['versions']['cropgrad']}, "
        f"NumPy {report['versions']['numpy']}, "
        f"{machine['cpu_count']} CPUs ({machine['cpu_model']}"
        f"{_caches(machine)}), {report['total_seconds']:.0f} s"
    )
    return "\n".join(out)


def format_roi_table(report):
    """The RoIAlign rows, with torchvision's and ONNX Runtime's columns."""
    results = [r for r in report["workloads"] if _is_roi(r)]
    if not results:
        return ""
    threads = report["default_threads"]
    us = _micro()
    heads = [
        "RoIAlign",
        "cg 1 thr",
        f"cg {threads} thr",
        "cg new out",
        "roofline",
        "torchvision",
        "ORT 1 thr",
        f"ORT {threads} thr",
        "tv/cg1",
        f"tv/cg{threads}",
        "ORT1/cg1",
        f"ORT{threads}/cg{threads}",
        "NCHW/NHWC",
        "boxes/img",
        "scaling",
        "other",
    ]
    rows, extra = [], []
    for r in results:
        m, q = r["median_s"], r["ratios"]
        rows.append(
            [
                r["name"],
                *(format_time(m[c], us) for c in (CG1, CGD, CGN, ROOF, TV, ORT1, ORTD)),
                *(
                    format_ratio(q[k])
                    for k in (
                        "torchvision_over_cropgrad_1thread",
                        "torchvision_over_cropgrad_default",
                        "onnxruntime_1thread_over_cropgrad_1thread",
                        "onnxruntime_default_over_cropgrad_default",
                        "nchw_over_nhwc",
                        "grad_boxes_over_grad_image",
                        "scaling_1thread_over_default",
                    )
                ),
                format_ratio(r["load"]["other_cpus"]),
            ]
        )
        extra += [
            f"  {r['name']}: {column} {format_time(value, us)}"
            for column, value in m.items()
            if value is not None and (column in BESIDE or column not in ROI_COLUMNS)
        ]
    out = _aligned(heads, rows) + [""]
    out += _references_lines(report, results)
    legend = (
        "Medians over rounds; ratios are medians of per-round ratios. cg: "
        "cropgrad.roi_align and its gradients (input: roi_align_grad_image, "
        "boxes: roi_align_grad_boxes) into a preallocated out= (1 thread / "
        f"default {threads}); torchvision: torchvision.ops.roi_align or "
        "_roi_align_backward (its CPU kernels are serial); ORT: ONNX Runtime's "
        f"RoiAlign on 1 / {threads} intra-op threads (forward only); both "
        "NCHW, in worker processes, allocating their result. tv/cg1, tv/cg"
        f"{threads}: torchvision / cg on 1 and {threads} threads; ORT1/cg1, "
        f"ORT{threads}/cg{threads}: ONNX Runtime / cg at the same thread count; "
        "NCHW/NHWC (NHWC rows): the NCHW call / the NHWC call, default threads; "
        "boxes/img (boxes-gradient rows): the boxes gradient / the input "
        "gradient of the same problem, default threads; scaling and other as "
        "above."
    )
    out += textwrap.wrap(legend, 88)
    if extra:
        out += ["Calls timed beside cropgrad's:", *extra]
    return "\n".join(out)


def _references_lines(report, results):
    """Which references ran (or why not), and whether they gave cropgrad's
    bits."""
    lines = []
    for backend, label, columns in (
        ("torchvision", "torchvision", (TV,)),
        ("onnxruntime", "ONNX Runtime", (ORT1, ORTD)),
    ):
        info = report.get("references", {}).get(backend, {})
        if not info.get("available"):
            lines.append(f"{label} columns: {info.get('reason', 'n/a')}")
            continue
        workers = info.get("workers", {})
        first = next(iter(workers.values()), {})
        if backend == "torchvision":
            detail = (
                f"torch {first.get('torch')}, {first.get('torch_threads')} PyTorch "
                f"threads, {info.get('python')}"
            )
        else:
            counts = " and ".join(
                str(w.get("intra_op_threads")) for w in workers.values()
            )
            detail = f"{counts} intra-op threads"
        checked = [
            same
            for r in results
            for column, same in r.get("same_bits", {}).items()
            if column in columns
        ]
        bits = (
            f"; cropgrad's bits in {sum(checked)} of {len(checked)} results"
            if checked
            else ""
        )
        lines.append(f"{label} {info.get('version')} ({detail}){bits}")
    return lines


def _caches(machine):
    """``", L2 1 MiB, L3 32 MiB, avx512"`` (what older results lack is left out)."""
    parts = [
        f"{name} {machine[key] / (1 << 20):g} MiB"
        for name, key in (("L2", "l2_bytes"), ("L3", "l3_bytes"))
        if machine.get(key)
    ]
    if machine.get("simd_target"):
        parts.append(machine["simd_target"])
    if machine.get("compute_scaling"):
        parts.append(
            f"arithmetic scales {machine['compute_scaling']:.2f}x to 2 threads"
        )
    return "".join(", " + p for p in parts)


def format_pipeline(report):
    """The pipeline row: what the idle threads cost the work after a call."""
    rows = [r for r in report["workloads"] if r.get("kind") == "pipeline"]
    if not rows:
        return ""
    us = _micro()
    threads = report["default_threads"]
    out = [f"Idle threads ({threads} threads; medians over rounds):"]
    for r in rows:
        m, q = r["median_s"], r["ratios"]
        lines = [
            ("call, back to back", m[CGD], None),
            ("call, after the threads slept", m[pipeline.AFTER_SLEEP], None),
            ("  / back to back", None, q["after_sleep_over_back_to_back"]),
            ("NumPy pass after idle", m[pipeline.PASS_AFTER_IDLE], None),
            ("NumPy pass right after a call", m[pipeline.PASS_AFTER_CALL], None),
            ("  / after idle", None, q["pass_after_call_over_after_idle"]),
            ("call + pass, timed as a whole", m[pipeline.PIPE], None),
            ("  / (call + pass after idle)", None, q["pipeline_over_parts"]),
            ("CPU in the 100 ms after a call", m[pipeline.CPU_AFTER_CALL], None),
        ]
        for label, seconds, ratio in lines:
            value = format_time(seconds, us) if ratio is None else format_ratio(ratio)
            out.append(f"  {label:<32} {value:>9}")
        out.append(f"  (other processes: {format_ratio(r['load']['other_cpus'])} CPUs)")
    return "\n".join(out)


def format_targets(report):
    """Each target with its measured figure and verdict."""
    rows = report["targets"]
    if not rows:
        return ""
    out = ["Performance targets:"]
    us = _micro()
    for row in rows:
        value = row["measured"]
        if row.get("unit") == "s":
            shown = format_time(value, us)
            bound = format_time(row["bound"], us)
        else:
            shown, bound = format_ratio(value), f"{row['bound']:g}"
        verdict = "n/a" if row["met"] is None else ("met" if row["met"] else "missed")
        busy = row.get("other_cpus")
        ceiling = row.get("machine_scaling")
        if row["met"] is False and busy is not None and busy > NOISY:
            verdict = f"not judged: other programs used {busy:.1f} CPUs"
        elif row["met"] is False and ceiling is not None and ceiling < row["bound"]:
            # Two hardware threads of one core: no kernel bound by its
            # arithmetic can scale to the bound here.
            verdict = f"not judged: the machine's arithmetic scales {ceiling:.2f}x"
        out.append(
            f"  {row['workload']:<19} {row['target']:<44} {shown:>9} "
            f"({row['sense']} {bound}) {verdict}"
        )
    return "\n".join(out)


def write_json(report, path):
    with open(path, "w") as f:
        json.dump(report, f, indent=1)
        f.write("\n")
