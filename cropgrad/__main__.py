"""``python -m cropgrad``: a self-check of this install, then the benchmark.

    python -m cropgrad                 # self-check, then the benchmark
    python -m cropgrad check           # self-check only
    python -m cropgrad bench [...]     # benchmark only (see --help)

The self-check compares the three operations with a small float64 NumPy
reference written here (independent of the compiled kernels) on a few small
random problems, and checks that 1, 2, 3 and 4 threads give the same bits.
"""

import argparse
import sys
import time

import numpy as np

import cropgrad

f32 = np.float32

# --------------------------------------------------------------------------
# A float64 reference, vectorised per box.  The sampling coordinates are
# computed in float32, as the op computes them (they decide which pixels a
# sample touches); interpolation weights and sums are then float64.


def _axis(lo, hi, size, crop, ratio=False):
    """Float32 coordinates of the crop's samples along one axis, and which are inside.

    ``ratio``: the boxes gradient's form of the scale,
    ``(hi - lo) * ((size - 1) / (crop - 1))``, instead of
    ``(hi - lo) * (size - 1) / (crop - 1)``.
    """
    lo, hi, last = f32(lo), f32(hi), f32(size - 1)
    with np.errstate(all="ignore"):
        if crop > 1:
            if ratio:
                scale = f32((hi - lo) * f32(last / f32(crop - 1)))
            else:
                scale = f32(f32((hi - lo) * last) / f32(crop - 1))
            coords = f32(lo * last) + np.arange(crop, dtype=f32) * scale
        else:
            coords = np.array([0.5 * float(f32(lo + hi)) * float(size - 1)], dtype=f32)
        inside = (coords >= 0) & (coords <= last)
    return coords.astype(f32), inside


def _taps(coords):
    """floor, ceil and the float64 lerp of float32 coordinates."""
    low = np.floor(coords)
    lerp = (coords - low).astype(np.float64)  # exact in float32
    return low.astype(np.intp), np.ceil(coords).astype(np.intp), lerp


def _nearest(coords):
    # C's roundf on non-negative values: floor(c + 0.5), exact in float64.
    return np.floor(coords.astype(np.float64) + 0.5).astype(np.intp)


def _box_samples(box, height, width, crop_h, crop_w, ratio=False):
    y1, x1, y2, x2 = (f32(v) for v in box)
    ys, y_in = _axis(y1, y2, height, crop_h, ratio)
    xs, x_in = _axis(x1, x2, width, crop_w, ratio)
    return np.nonzero(y_in)[0], ys[y_in], np.nonzero(x_in)[0], xs[x_in]


def ref_grad_image(grads, boxes, box_ind, image_size, method):
    """(result, bound): the image gradient in float64, and the same with |grads|."""
    grads = np.asarray(grads, dtype=f32)
    batch, height, width, depth = image_size
    out = np.zeros(image_size)
    mag = np.zeros(image_size)
    for b in range(grads.shape[0]):
        rows, ys, cols, xs = _box_samples(boxes[b], height, width, *grads.shape[1:3])
        if rows.size == 0 or cols.size == 0:
            continue
        g = grads[b][np.ix_(rows, cols)].astype(np.float64)
        image, image_mag = out[box_ind[b]], mag[box_ind[b]]
        if method == "nearest":
            index = (_nearest(ys)[:, None], _nearest(xs)[None, :])
            np.add.at(image, index, g)
            np.add.at(image_mag, index, np.abs(g))
            continue
        top, bottom, ly = _taps(ys)
        left, right, lx = _taps(xs)
        for r, wy in ((top, 1 - ly), (bottom, ly)):
            for c, wx in ((left, 1 - lx), (right, lx)):
                weight = (wy[:, None] * wx[None, :])[:, :, None]
                index = (r[:, None], c[None, :])
                np.add.at(image, index, weight * g)
                np.add.at(image_mag, index, weight * np.abs(g))
    return out, mag


def _corners(img, ys, xs):
    """The four neighbours of every sample and the weights between them.

    Returns (top_left, top_right, bottom_left, bottom_right, y_lerp, x_lerp),
    each indexed [crop row, crop column, channel] (the weights broadcast).
    """
    top, bottom, ly = _taps(ys)
    left, right, lx = _taps(xs)
    return (
        img[top[:, None], left[None, :]],
        img[top[:, None], right[None, :]],
        img[bottom[:, None], left[None, :]],
        img[bottom[:, None], right[None, :]],
        ly[:, None, None],
        lx[None, :, None],
    )


def ref_crop_and_resize(image, boxes, box_ind, crop_size, method, extrapolation):
    """The forward op in float64 (pixels read as float32, as the op reads them)."""
    image = np.asarray(image).astype(f32).astype(np.float64)
    _, height, width, depth = image.shape
    crop_h, crop_w = crop_size
    out = np.full((len(boxes), crop_h, crop_w, depth), float(f32(extrapolation)))
    for b in range(len(boxes)):
        rows, ys, cols, xs = _box_samples(boxes[b], height, width, crop_h, crop_w)
        if rows.size == 0 or cols.size == 0:
            continue
        img = image[box_ind[b]]
        if method == "nearest":
            out[b][np.ix_(rows, cols)] = img[
                _nearest(ys)[:, None], _nearest(xs)[None, :]
            ]
            continue
        tl, tr, bl, br, ly, lx = _corners(img, ys, xs)
        upper = tl + (tr - tl) * lx
        lower = bl + (br - bl) * lx
        out[b][np.ix_(rows, cols)] = upper + (lower - upper) * ly
    return out


def _box_derivatives(index, size, crop):
    """d coord / d lo and d coord / d hi of the crop samples `index`.

    In float32, as the op computes them: ``(size - 1) - i * ratio`` is
    exactly 0 for the last sample in float32 but not in float64, and the
    difference would show wherever the image slope there is large.
    """
    if crop > 1:
        ratio = f32(f32(size - 1) / f32(crop - 1))
        hi = index.astype(f32) * ratio
        lo = f32(size - 1) - hi
        return lo.astype(np.float64), hi.astype(np.float64)
    half = np.full(index.size, 0.5 * (size - 1))
    return half, half


def ref_grad_boxes(grads, image, boxes, box_ind):
    """(result, bound): the boxes gradient in float64, and a sum of magnitudes.

    For each sample and channel the image's slope along y and x at the
    sample, times the incoming gradient, times the derivative of the
    sample's coordinate with respect to each box coordinate.
    """
    grads = np.asarray(grads, dtype=f32).astype(np.float64)
    image = np.asarray(image).astype(f32).astype(np.float64)
    _, height, width, _ = image.shape
    n, crop_h, crop_w, _ = grads.shape
    out = np.zeros((n, 4))
    mag = np.zeros((n, 4))
    for b in range(n):
        rows, ys, cols, xs = _box_samples(
            boxes[b], height, width, crop_h, crop_w, ratio=True
        )
        if rows.size == 0 or cols.size == 0:
            continue
        img = image[box_ind[b]]
        tl, tr, bl, br, ly, lx = _corners(img, ys, xs)
        g = grads[b][np.ix_(rows, cols)]
        slope_y = ((1 - lx) * (bl - tl) + lx * (br - tr)) * g
        slope_x = ((1 - ly) * (tr - tl) + ly * (br - bl)) * g
        size_y = ((1 - lx) * (abs(bl) + abs(tl)) + lx * (abs(br) + abs(tr))) * abs(g)
        size_x = ((1 - ly) * (abs(tr) + abs(tl)) + ly * (abs(br) + abs(bl))) * abs(g)
        dy1, dy2 = _box_derivatives(rows, height, crop_h)
        dx1, dx2 = _box_derivatives(cols, width, crop_w)
        for k, (s, m, d) in enumerate(
            (
                (slope_y, size_y, dy1[:, None, None]),
                (slope_x, size_x, dx1[None, :, None]),
                (slope_y, size_y, dy2[:, None, None]),
                (slope_x, size_x, dx2[None, :, None]),
            )
        ):
            out[b, k] = np.sum(s * d)
            mag[b, k] = np.sum(m * np.abs(d))
    return out, mag


# --------------------------------------------------------------------------
# The self-check


def _problem(rng, batch, height, width, depth, num_boxes, crop, spread=0.25):
    """Random grads, boxes (some flipped, some partly or wholly outside), box_ind."""
    grads = rng.standard_normal((num_boxes, *crop, depth)).astype(f32)
    corners = rng.uniform(-spread, 1 + spread, (num_boxes, 4))
    boxes = corners.astype(f32)
    box_ind = rng.integers(0, batch, num_boxes).astype(np.int32)
    image = rng.standard_normal((batch, height, width, depth)).astype(f32)
    return grads, boxes, box_ind, (batch, height, width, depth), image


# (batch, height, width, depth, num_boxes, crop): a few shapes, including
# one-row and one-column crops (box centres) and a one-pixel-wide image.
CHECK_SHAPES = (
    (2, 9, 7, 5, 6, (4, 3)),
    (1, 6, 11, 3, 5, (1, 5)),
    (3, 8, 8, 4, 7, (6, 1)),
    (2, 5, 1, 2, 4, (3, 3)),
)


class _Report:
    def __init__(self, out):
        self.out = out
        self.failures = []

    def item(self, what, ok, detail=""):
        text = f"  {what:<58} {'ok' if ok else 'FAIL'}"
        if detail:
            text += f"  ({detail})"
        print(text, file=self.out, flush=True)
        if not ok:
            self.failures.append(what)


class _Comparison:
    """Collects |actual - expected| <= allowed over several problems."""

    def __init__(self):
        self.ok = True
        self.failure = ""
        self.worst = 0.0

    def add(self, actual, expected, allowed, name):
        if not self.ok:
            return
        actual = np.asarray(actual)
        if actual.shape != expected.shape:
            self.ok = False
            self.failure = f"{name}: shape {actual.shape}, expected {expected.shape}"
            return
        error = np.abs(actual.astype(np.float64) - expected)
        bad = ~(error <= allowed + 1e-30)  # NaN is bad too
        if bad.any():
            first = np.flatnonzero(bad)[0]
            self.ok = False
            self.failure = (
                f"{name}: {int(bad.sum())} of {error.size} elements off, "
                f"e.g. {float(actual.flat[first]):.7g} where "
                f"{expected.flat[first]:.7g} was expected"
            )
            return
        self.worst = max(self.worst, float(np.max(error, initial=0.0)))

    def detail(self):
        return self.failure if not self.ok else f"max error {self.worst:.1e}"


def check(out=sys.stdout, seed=12345):
    """Run the self-check, printing a line per item; return True when all pass."""
    started = time.perf_counter()
    config = cropgrad.show_config("dicts")
    print(
        f"cropgrad {cropgrad.__version__} self-check (NumPy {np.__version__}, "
        f"OpenMP {'on' if config['openmp'] else 'off'}, "
        f"{config['default_threads']} default threads)",
        file=out,
    )
    report = _Report(out)
    rng = np.random.default_rng(seed)
    problems = [_problem(rng, *shape) for shape in CHECK_SHAPES]

    for method in ("bilinear", "nearest"):
        for dtype in (np.float32, np.float64, np.float16):
            comparison = _Comparison()
            for grads, boxes, box_ind, size, _ in problems:
                expected, bound = ref_grad_image(grads, boxes, box_ind, size, method)
                actual = cropgrad.crop_and_resize_grad_image(
                    grads, boxes, box_ind, size, dtype=dtype, method=method
                )
                if actual.dtype != dtype:
                    comparison.ok, comparison.failure = False, f"dtype {actual.dtype}"
                # float32 products and sums: a few float32 ulps of the sum of
                # magnitudes; float16 output adds one rounding (2**-11
                # relative, 2**-25 absolute among subnormals).
                allowed = 1e-5 * bound
                if dtype == np.float16:
                    allowed = allowed + 2.0**-11 * np.abs(expected) + 2.0**-25
                comparison.add(actual, expected, allowed, f"shape {size}")
            report.item(
                f"crop_and_resize_grad_image {method} {np.dtype(dtype).name}",
                comparison.ok,
                comparison.detail(),
            )

    for method in ("bilinear", "nearest"):
        comparison = _Comparison()
        for grads, boxes, box_ind, size, image in problems:
            crop = grads.shape[1:3]
            pixels = (image * 40 + 100).clip(0, 255).astype(np.uint8)
            for img, extrapolation in ((image, 0.0), (pixels, -1.5)):
                expected = ref_crop_and_resize(
                    img, boxes, box_ind, crop, method, extrapolation
                )
                actual = cropgrad.crop_and_resize(
                    img,
                    boxes,
                    box_ind,
                    crop,
                    method=method,
                    extrapolation_value=extrapolation,
                )
                allowed = 1e-5 * float(np.max(np.abs(img.astype(np.float64))))
                comparison.add(actual, expected, allowed, f"shape {size}, {img.dtype}")
        report.item(f"crop_and_resize {method}", comparison.ok, comparison.detail())

    comparison = _Comparison()
    for grads, boxes, box_ind, size, image in problems:
        expected, bound = ref_grad_boxes(grads, image, boxes, box_ind)
        actual = cropgrad.crop_and_resize_grad_boxes(grads, image, boxes, box_ind)
        comparison.add(actual, expected, 1e-4 * bound, f"shape {size}")
    report.item(
        "crop_and_resize_grad_boxes bilinear", comparison.ok, comparison.detail()
    )

    # Threads: a problem of a few million element updates, far above the
    # size under which the kernels stay on one thread.
    crop = (16, 16)
    grads, boxes, box_ind, size, image = _problem(
        rng, 3, 64, 56, 32, 96, crop, spread=0.1
    )
    calls = {}
    for method in ("bilinear", "nearest"):
        for dtype in (np.float32, np.float64, np.float16):
            calls[f"crop_and_resize_grad_image {method} {np.dtype(dtype).name}"] = (
                lambda n, m=method, t=dtype: cropgrad.crop_and_resize_grad_image(
                    grads, boxes, box_ind, size, dtype=t, method=m, num_threads=n
                )
            )
        calls[f"crop_and_resize {method}"] = lambda n, m=method: (
            cropgrad.crop_and_resize(
                image, boxes, box_ind, crop, method=m, num_threads=n
            )
        )
    calls["crop_and_resize_grad_boxes"] = lambda n: cropgrad.crop_and_resize_grad_boxes(
        grads, image, boxes, box_ind, num_threads=n
    )
    differ = []
    for what, call in calls.items():
        first = call(1)
        if any(call(n).tobytes() != first.tobytes() for n in (2, 3, 4)):
            differ.append(what)
    report.item(
        "same bits on 1, 2, 3 and 4 threads",
        not differ,
        "differ: " + ", ".join(differ)
        if differ
        else f"{len(calls)} op/method/dtype combinations",
    )

    elapsed = time.perf_counter() - started
    if report.failures:
        print(
            f"FAIL: {len(report.failures)} check(s) failed ({elapsed:.1f} s)", file=out
        )
        return False
    print(f"PASS ({elapsed:.1f} s)", file=out)
    return True


# --------------------------------------------------------------------------
# Command line


def _workload_list(text):
    from cropgrad import _bench

    names = [n.strip() for n in text.split(",") if n.strip()]
    if names == ["all"]:
        return list(_bench.WORKLOADS)
    unknown = [n for n in names if n not in _bench.WORKLOADS]
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"unknown workload(s) {', '.join(unknown) or '(none given)'}; choose from "
            f"{', '.join(_bench.WORKLOADS)} or all"
        )
    return names


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


def _bench_options(parser, top_level):
    """The benchmark's options; on the subcommand they only override what is given."""
    from cropgrad import _bench

    def default(value):
        return value if top_level else argparse.SUPPRESS

    parser.add_argument(
        "--workloads",
        type=_workload_list,
        default=default(list(_bench.WORKLOADS)),
        metavar="A,B,...",
        help="comma-separated workloads to run, or 'all' (default): "
        + ", ".join(_bench.WORKLOADS),
    )
    parser.add_argument(
        "--repeats",
        type=_positive,
        default=default(None),
        metavar="N",
        help="measure exactly N rounds per workload (default: as many as fit in "
        "the time budget, 7 to 60)",
    )
    parser.add_argument(
        "--budget",
        type=_seconds,
        default=default(None),
        metavar="SECONDS",
        help="seconds of timed rounds per workload when --repeats is not given "
        "(default 9, or 0.3 with --quick)",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        default=default(False),
        help="a fast, rough run: short blocks and few rounds",
    )
    parser.add_argument(
        "--no-tensorflow",
        dest="tensorflow",
        action="store_false",
        default=default(True),
        help="leave TensorFlow out even when it is installed",
    )
    parser.add_argument(
        "--json",
        metavar="FILE",
        default=default(None),
        help="also write all results (medians, samples, ratios, machine) as JSON",
    )
    parser.add_argument(
        "--plot",
        metavar="FILE.png",
        default=default(None),
        help="also draw the times per workload on a log axis (needs matplotlib)",
    )


def _parser():
    description = (
        "Self-check and benchmark of cropgrad. Without a command: the "
        "self-check, then the benchmark (stops if the check fails)."
    )
    epilog = (
        "benchmark columns: cropgrad on 1 thread and on the default threads "
        "(into a preallocated out=); cropgrad allocating its result; a NumPy "
        "roofline (reading the inputs once plus zeroing the output); "
        "TensorFlow's tf.raw_ops in its default mode and with op determinism "
        "(each in a worker process; 'n/a' when TensorFlow is not installed). "
        "Ratios: TF default / cropgrad default, TF deterministic / cropgrad 1 "
        "thread, cropgrad default / roofline, 1 thread / default threads. "
        "Progress goes to stderr, the table to stdout."
    )
    parser = argparse.ArgumentParser(
        prog="python -m cropgrad", description=description, epilog=epilog
    )
    parser.add_argument(
        "--version", action="version", version=f"cropgrad {cropgrad.__version__}"
    )
    _bench_options(parser, top_level=True)
    commands = parser.add_subparsers(dest="command", metavar="{check,bench}")
    commands.add_parser(
        "check",
        help="self-check against a NumPy reference and across thread counts",
        description="Compare the three ops with a float64 NumPy reference on small "
        "random problems (both methods, every output dtype) and check "
        "that 1 to 4 threads give the same bits. Exit status 1 on failure.",
    )
    bench = commands.add_parser(
        "bench",
        help="run the benchmark only",
        description=description.split(".")[0] + ": the benchmark only.",
        epilog=epilog,
    )
    _bench_options(bench, top_level=False)
    return parser


def _bench(args):
    from cropgrad import _bench

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
    settings = _bench.Settings(
        quick=args.quick, repeats=args.repeats, budget=args.budget
    )
    report = _bench.run(args.workloads, settings, tensorflow=args.tensorflow)
    print(_bench.format_table(report))
    targets = _bench.format_targets(report)
    if targets:
        print()
        print(targets)
    if args.json:
        _bench.write_json(report, args.json)
        print(f"results written to {args.json}", file=sys.stderr)
    if args.plot:
        _bench.plot(report, args.plot)
        print(f"plot written to {args.plot}", file=sys.stderr)
    return 0


def main(argv=None):
    args = _parser().parse_args(argv)
    if args.command in (None, "check"):
        if not check():
            return 1
        if args.command == "check":
            return 0
        print()
    return _bench(args)


if __name__ == "__main__":
    sys.exit(main())
