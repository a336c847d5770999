"""``python -m cropgrad``: a self-check of this install, then a short timing.

    python -m cropgrad                 # self-check, then a few seconds of timing
    python -m cropgrad check           # self-check only

The self-check (`cropgrad._selfcheck`) compares every operation with the
NumPy reference (`cropgrad._reference`, independent of the compiled
kernels) on a few small random problems, and checks that 1, 2, 3 and 4
threads give the same bits.  The short timing (`cropgrad._timing`) times
two ops on 1 thread and on the default threads.  The full benchmark is not
part of the package: it runs from a source checkout (``bench`` says how).
"""

import argparse
import sys

import cropgrad
from cropgrad._selfcheck import check
from cropgrad._timing import short_timing

# What ``python -m cropgrad bench`` prints, with exit status 2.
BENCH_MOVED = """\
python -m cropgrad bench: the full benchmark is not part of the installed
package. It runs from a source checkout of cropgrad (a clone of its
repository, or its sdist unpacked), against the installed cropgrad, from
the checkout's root:

    python benchmarks/bench.py --help      # the options
    python benchmarks/bench.py --quick     # about 2 minutes (the full run: 10)

benchmarks/README.md there says what it compares with and what each
column means. Here, python -m cropgrad times two ops in a few seconds."""


def _parser():
    parser = argparse.ArgumentParser(
        prog="python -m cropgrad",
        description="Self-check of cropgrad. Without a command: the self-check, "
        "then a short timing of a few seconds (stops if the check fails).",
        epilog="The full benchmark, against TensorFlow, torchvision and ONNX "
        "Runtime, runs from a source checkout: python benchmarks/bench.py.",
    )
    parser.add_argument(
        "--version", action="version", version=f"cropgrad {cropgrad.__version__}"
    )
    commands = parser.add_subparsers(dest="command", metavar="{check,bench}")
    commands.add_parser(
        "check",
        help="self-check against a NumPy reference and across thread counts",
        description="Compare every op with the bits of cropgrad's NumPy reference "
        "on small random problems (every method and output dtype) and check "
        "that 1 to 4 threads give the same bits. Exit status 1 on failure.",
    )
    # Whatever follows it, ``bench`` only says where the benchmark is.
    commands.add_parser(
        "bench",
        help="say where the full benchmark is (a source checkout)",
        add_help=False,
    )
    return parser


def main(argv=None):
    """``python -m cropgrad [check]``; returns the exit status."""
    parser = _parser()
    args, unknown = parser.parse_known_args(argv)
    if args.command == "bench":
        print(BENCH_MOVED, file=sys.stderr)
        return 2
    if unknown:
        parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    if not check():
        return 1
    if args.command is None:
        print()
        short_timing()
    return 0


if __name__ == "__main__":
    sys.exit(main())
