"""The main table's times as bars on a log axis (needs matplotlib)."""

from .columns import CG1, CGD, ORTD, ROOF, TFD, TFX, TV
from .workloads import CROP_AND_RESIZE, ROI_ALIGN

PLOT_COLUMNS = (
    (CG1, "cropgrad, 1 thread"),
    (CGD, "cropgrad, default threads"),
    (ROOF, "roofline (NumPy)"),
    (TFD, "TensorFlow default"),
    (TFX, "TensorFlow deterministic"),
    (TV, "torchvision (RoIAlign)"),
    (ORTD, "ONNX Runtime, default threads (RoIAlign)"),
)
COLOURS = (
    *("#9ecae1", "#3182bd", "#bdbdbd", "#fdae6b", "#e6550d"),
    *("#a1d99b", "#31a354"),
)
# The columns of one op family only: drawn when the run has its rows.
FAMILY = {TFD: CROP_AND_RESIZE, TFX: CROP_AND_RESIZE, TV: ROI_ALIGN, ORTD: ROI_ALIGN}


def plot(report, path):
    """Bars per workload of the main columns, on a log time axis."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    results = [r for r in report["workloads"] if r.get("kind") != "pipeline"]
    fig, ax = plt.subplots(figsize=(max(6.0, 1.5 * len(results) + 2), 5.0))
    families = {r.get("family", CROP_AND_RESIZE) for r in results}
    shown = [
        (column, label, colour)
        for (column, label), colour in zip(PLOT_COLUMNS, COLOURS)
        if column not in FAMILY or FAMILY[column] in families
    ]
    width = 0.8 / len(shown)
    for k, (column, label, colour) in enumerate(shown):
        xs, heights = [], []
        for i, r in enumerate(results):
            value = r["median_s"].get(column)
            if value is not None:
                xs.append(i + (k - (len(shown) - 1) / 2) * width)
                heights.append(value * 1e3)
        if column in (TFD, TFX) and not report["tensorflow"]["available"]:
            label += f" ({report['tensorflow']['reason']})"
        ax.bar(
            xs,
            heights,
            width,
            label=label,
            color=colour,
            edgecolor="black",
            linewidth=0.4,
        )
    ax.set_yscale("log")
    tallest = max(
        ((r["median_s"].get(c) or 0) for r in results for c, _, _ in shown),
        default=0,
    )
    if tallest > 0:  # room above the bars for the legend
        ax.set_ylim(top=tallest * 1e3 * 40)
    ax.set_xticks(range(len(results)))
    ax.set_xticklabels([r["name"] for r in results], rotation=20, ha="right")
    ax.set_ylabel("median time per call (ms, log scale)")
    machine = report["machine"]
    ax.set_title(
        f"cropgrad {report['versions']['cropgrad']} on {machine['cpu_count']} CPUs"
        + (
            f", TensorFlow {report['versions']['tensorflow']}"
            if report["versions"]["tensorflow"]
            else ""
        )
    )
    ax.grid(axis="y", which="both", alpha=0.3)
    ax.legend(fontsize="small", loc="upper center", ncol=3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
