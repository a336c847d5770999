"""The benchmark's command line: ``python benchmarks/bench.py [options]``."""

import argparse
import sys

import cropgrad

from .report import format_pipeline, format_table, format_targets, write_json
from .roi_worker import TORCHVISION_PYTHON_ENV
from .run import run
from .timing import Settings
from .workloads import GROUPS, WORKLOADS

# How the command line is run (its usage line).
PROG = "python benchmarks/bench.py"


def _workload_list(text):
    """The row names `text` selects: names, groups (``roi-fpn``) or all."""
    names = [n.strip() for n in text.split(",") if n.strip()]
    if names == ["all"]:
        return list(WORKLOADS)
    unknown = [n for n in names if n not in WORKLOADS and n not in GROUPS]
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"unknown workload(s) {', '.join(unknown) or '(none given)'}; choose from "
            f"{', '.join(WORKLOADS)}, the groups {', '.join(GROUPS)}, or all"
        )
    chosen = []
    for name in names:
        for row in GROUPS.get(name, [name]):
            if row not in chosen:
                chosen.append(row)
    return chosen


def _positive_parser(convert, unparsed, nonpositive):
    """An argparse type: `convert` the text, then require a value above 0."""

    def parse(text):
        try:
            value = convert(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"expected {unparsed}, got {text!r}"
            ) from None
        if not value > 0:
            raise argparse.ArgumentTypeError(f"expected {nonpositive}, got {value}")
        return value

    return parse


_positive = _positive_parser(int, "a positive integer", "a positive integer")
_seconds = _positive_parser(float, "seconds", "a positive number of seconds")


def _bench_options(parser):
    """The benchmark's options."""
    parser.add_argument(
        "--workloads",
        type=_workload_list,
        default=list(WORKLOADS),
        metavar="A,B,...",
        help="comma-separated workloads or groups of them to run, or 'all' "
        "(default): "
        + ", ".join(WORKLOADS)
        + "; groups: "
        + "; ".join(f"{g} ({len(rows)} rows)" for g, rows in GROUPS.items()),
    )
    parser.add_argument(
        "--repeats",
        type=_positive,
        default=None,
        metavar="N",
        help="measure exactly N rounds per workload (default: as many as fit in "
        "the time budget, 7 to 60)",
    )
    parser.add_argument(
        "--budget",
        type=_seconds,
        default=None,
        metavar="SECONDS",
        help="seconds of timed rounds per workload when --repeats is not given "
        "(default 9, or 0.3 with --quick)",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        default=False,
        help="a fast, rough run: short blocks and few rounds",
    )
    parser.add_argument(
        "--no-tensorflow",
        dest="tensorflow",
        action="store_false",
        default=True,
        help="leave TensorFlow out even when it is installed",
    )
    parser.add_argument(
        "--torchvision-python",
        dest="torchvision",
        metavar="PATH",
        default=None,
        help="the Python that runs torchvision's columns of the RoIAlign rows, "
        "in a worker process (it needs torch and torchvision, not cropgrad); "
        f"default: ${TORCHVISION_PYTHON_ENV}, else this Python if it has "
        "torchvision",
    )
    parser.add_argument(
        "--no-torchvision",
        dest="torchvision",
        action="store_const",
        const=False,
        default=argparse.SUPPRESS,
        help="leave torchvision out even when a Python for it is known",
    )
    parser.add_argument(
        "--no-onnxruntime",
        dest="onnxruntime",
        action="store_false",
        default=True,
        help="leave ONNX Runtime out of the RoIAlign rows even when it is installed",
    )
    parser.add_argument(
        "--no-adapters",
        dest="adapters",
        action="store_false",
        default=True,
        help="leave out the rows that installed adapters (JAX, PyTorch) add",
    )
    parser.add_argument(
        "--explain",
        action="store_true",
        default=False,
        help="print what each column of the tables means, in words, and exit",
    )
    parser.add_argument(
        "--targets",
        action="store_true",
        default=False,
        help="also print the performance targets and each one's measured figure "
        "(the JSON holds them either way)",
    )
    parser.add_argument(
        "--json",
        metavar="FILE",
        default=None,
        help="also write all results (medians, samples, ratios, machine) as JSON",
    )
    parser.add_argument(
        "--plot",
        metavar="FILE.png",
        default=None,
        help="also draw the times per workload on a log axis (needs matplotlib)",
    )


def _parser():
    description = (
        "Benchmark of the installed cropgrad (python -m cropgrad runs its "
        "self-check and a short timing)."
    )
    epilog = (
        "benchmark columns: cropgrad on 1 thread and on the default threads "
        "(into a preallocated out=); cropgrad allocating its result; a NumPy "
        "roofline (reading the inputs once plus zeroing the output); "
        "TensorFlow's tf.raw_ops in its default mode and with op determinism "
        "(each in a worker process; 'n/a' when TensorFlow is not installed). "
        "The RoIAlign rows (roi-*) have torchvision's and ONNX Runtime's "
        "columns instead, in worker processes: torchvision in the Python that "
        "--torchvision-python names, ONNX Runtime when it is installed here. "
        "Ratios: TF default / cropgrad default, TF deterministic / cropgrad 1 "
        "thread, cropgrad default / roofline, 1 thread / default threads. "
        "The 'pipeline' workload times a call followed by NumPy work, and the "
        "CPU time the idle OpenMP threads take after a call; installed "
        "adapters (JAX, PyTorch) add rows of their own. "
        "Progress goes to stderr, the table to stdout."
    )
    parser = argparse.ArgumentParser(prog=PROG, description=description, epilog=epilog)
    parser.add_argument(
        "--version", action="version", version=f"cropgrad {cropgrad.__version__}"
    )
    _bench_options(parser)
    return parser


# Each column of the tables, in words (``--explain``).
COLUMNS = (
    ("cg 1 thr", "cropgrad on one thread, writing into an array made beforehand"),
    ("cg 2 thr", "the same on the default number of threads (all cores)"),
    ("cg new out", "the default threads, cropgrad allocating its result each call"),
    (
        "roofline",
        "NumPy reading the inputs once and zeroing the output: about "
        "the least time any program moving that memory needs",
    ),
    (
        "TF default, TF determ",
        "TensorFlow's op in its default mode and with "
        "op determinism (its exact mode, which cropgrad's bits match)",
    ),
    ("TF/cg", "how many times faster cropgrad is than TensorFlow's default mode"),
    (
        "TFdet/cg1",
        "how many times faster cropgrad on one thread is than "
        "TensorFlow with op determinism",
    ),
    ("cg/roof", "cropgrad's time over the roofline (1 is the floor)"),
    (
        "scaling",
        "one thread's time over the default threads' (2 on 2 cores would be perfect)",
    ),
    (
        "torchvision, ORT 1/2 thr",
        "RoIAlign rows: torchvision's serial CPU "
        "kernel, ONNX Runtime on 1 and 2 threads",
    ),
    (
        "tv/cg1, tv/cg2, ORT1/cg1, ORT2/cg2",
        "how many times faster cropgrad is "
        "than torchvision or ONNX Runtime, on 1 thread or the default threads",
    ),
    ("NCHW/NHWC", "NHWC rows: the NCHW call's time over the NHWC call's"),
    (
        "boxes/img",
        "boxes-gradient rows: the boxes gradient's time over the "
        "input gradient's on the same problem",
    ),
    (
        "other",
        "CPUs other programs kept busy during the row; above 0.2 the "
        "row's times are noisy",
    ),
)


def _explain():
    print("What the benchmark's columns mean (times are medians over rounds):")
    for name, words in COLUMNS:
        print(f"  {name}: {words}")
    return 0


def _run_bench(args):
    """Run the benchmark as `args` say; return the exit status."""
    if args.plot:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            print(
                "error: --plot needs matplotlib, which is not installed "
                "(pip install matplotlib)",
                file=sys.stderr,
            )
            return 2
    settings = Settings(quick=args.quick, repeats=args.repeats, budget=args.budget)
    report = run(
        args.workloads,
        settings,
        tensorflow=args.tensorflow,
        adapters=args.adapters,
        torchvision=args.torchvision,
        onnxruntime=args.onnxruntime,
    )
    print(format_table(report))
    sections = [format_pipeline(report)]
    if args.targets:
        sections.append(format_targets(report))
    for section in sections:
        if section:
            print()
            print(section)
    if args.json:
        write_json(report, args.json)
        print(f"results written to {args.json}", file=sys.stderr)
    if args.plot:
        from .plot import plot

        plot(report, args.plot)
        print(f"plot written to {args.plot}", file=sys.stderr)
    return 0


def main(argv=None):
    """``python benchmarks/bench.py [options]``; returns the exit status."""
    args = _parser().parse_args(argv)
    if args.explain:
        return _explain()
    return _run_bench(args)
