"""The self-check of ``python -m cropgrad``: this install against a reference.

Every op of every family with a reference, each method and output dtype
(`CHECKS`, the one list of what is checked), is compared with cropgrad's
NumPy reference (`cropgrad._reference`: plain NumPy, independent of the
compiled kernels) in the reference's exact arithmetic: the ops' own float32
or float64 roundings in the serial order, which the test suite holds to
TensorFlow's, torchvision's and PyTorch's bits.  (grid_sample's grid JVP
has no reference: the test suite holds it to the grid gradient as its
transpose.)  Every result must have the reference's bits
(`_difference`, the one comparison), on a few small random problems.
Then 1, 2, 3 and 4 threads must give the same bits for every item of the
same list, on problems large enough for a team of threads.

Both sides compute with IEEE arithmetic (``flush_denormals=False``, the
reference's ``flush=False``); float16 image gradients are the float32 sum
rounded once, as the library computes them.
"""

import sys
import time
from typing import Callable, NamedTuple

import numpy as np

import cropgrad
from cropgrad import _ops
from cropgrad import _reference as reference

METHODS = ("bilinear", "nearest")


class _CropProblem(NamedTuple):
    """An NHWC crop_and_resize problem: float32 data, some boxes flipped,
    some partly or wholly outside the image."""

    image: np.ndarray
    pixels: np.ndarray  # the same image as uint8
    grads: np.ndarray
    boxes: np.ndarray
    box_ind: np.ndarray
    tangent: np.ndarray

    @property
    def crop(self):
        return self.grads.shape[1:3]


def _crop_problem(rng, batch, height, width, depth, num_boxes, crop, spread=0.25):
    image = rng.standard_normal((batch, height, width, depth)).astype(np.float32)
    return _CropProblem(
        image=image,
        pixels=(image * 40 + 100).clip(0, 255).astype(np.uint8),
        grads=rng.standard_normal((num_boxes, *crop, depth)).astype(np.float32),
        boxes=rng.uniform(-spread, 1 + spread, (num_boxes, 4)).astype(np.float32),
        box_ind=rng.integers(0, batch, num_boxes).astype(np.int32),
        tangent=rng.standard_normal((num_boxes, 4)).astype(np.float32),
    )


# (batch, height, width, depth, num_boxes, crop): a few shapes, including
# one-row and one-column crops (box centres) and a one-pixel-wide image.
CHECK_SHAPES = (
    (2, 9, 7, 5, 6, (4, 3)),
    (1, 6, 11, 3, 5, (1, 5)),
    (3, 8, 8, 4, 7, (6, 1)),
    (2, 5, 1, 2, 4, (3, 3)),
)


class _RoiProblem(NamedTuple):
    """An NCHW RoIAlign problem in float64, cast to each check's dtype;
    boxes in input pixels, some partly outside the image."""

    image: np.ndarray
    grads: np.ndarray
    boxes: np.ndarray
    box_ind: np.ndarray
    tangent: np.ndarray
    options: dict

    # The arguments by the names the ops give them (`_roi_align_checks`).
    @property
    def output_size(self):
        return self.grads.shape[2:]

    @property
    def image_size(self):
        return self.image.shape

    @property
    def boxes_tangent(self):
        return self.tangent

    def cast(self, dtype):
        """The problem with its floating-point arrays in `dtype`."""
        arrays = ("image", "grads", "boxes", "tangent")
        return self._replace(**{a: getattr(self, a).astype(dtype) for a in arrays})


def _roi_problem(
    rng, batch, channels, height, width, num_boxes, output_size, scale, ratio, aligned
):
    corners = rng.uniform(-2, [width, height, width, height], (num_boxes, 4))
    low = np.minimum(corners[:, :2], corners[:, 2:])
    high = np.maximum(corners[:, :2], corners[:, 2:])
    return _RoiProblem(
        image=rng.standard_normal((batch, channels, height, width)),
        grads=rng.standard_normal((num_boxes, channels, *output_size)),
        boxes=np.concatenate([low, high], axis=1) / scale,
        box_ind=rng.integers(0, batch, num_boxes).astype(np.int32),
        tangent=rng.standard_normal((num_boxes, 4)),
        options=dict(spatial_scale=scale, sampling_ratio=ratio, aligned=aligned),
    )


# RoIAlign's problems: (batch, channels, height, width, num_boxes,
# output_size, spatial_scale, sampling_ratio, aligned).
ROI_SHAPES = (
    (2, 5, 12, 10, 6, (3, 2), 0.5, -1, False),
    (1, 3, 9, 13, 5, (2, 4), 1.0, 0, True),
    (2, 4, 8, 8, 4, (4, 4), 0.25, 2, False),
)


class _GridProblem(NamedTuple):
    """A grid_sample problem (NCHW, float64 data cast for each check): the
    grid spans a little beyond [-1, 1], so every padding mode matters."""

    image: np.ndarray
    grid: np.ndarray
    grads: np.ndarray

    @property
    def image_size(self):
        return self.image.shape

    def cast(self, dtype):
        return _GridProblem(*(a.astype(dtype) for a in self))


def _grid_problem(rng, batch, depth, height, width, out_h, out_w):
    image = rng.standard_normal((batch, depth, height, width))
    grid = rng.uniform(-1.1, 1.1, (batch, out_h, out_w, 2))
    grads = rng.standard_normal((batch, depth, out_h, out_w))
    return _GridProblem(image, grid, grads)


GRID_SHAPES = ((2, 3, 9, 11, 7, 5), (1, 4, 16, 16, 17, 13))


class _Check(NamedTuple):
    """One line of the self-check: an op (with its method or dtype), the
    problems it runs on, the library's call and the reference's bits."""

    name: str
    family: str  # the family whose problems it takes
    run: Callable  # (problem, num_threads) -> the library's result
    expect: Callable  # problem -> the reference's result


def _crop_and_resize_checks():
    checks = []
    for method in METHODS:
        for dtype in (np.float32, np.float64, np.float16):

            def run_grad(p, n, m=method, t=dtype):
                return cropgrad.crop_and_resize_grad_image(
                    p.grads, p.boxes, p.box_ind, p.image.shape, t, m, num_threads=n
                )

            def expect_grad(p, m=method, t=dtype):
                # float16: the float32 sum, rounded once.
                sum_dtype = np.float32 if t == np.float16 else t
                return reference.grad_image(
                    p.grads, p.boxes, p.box_ind, p.image.shape, m, sum_dtype, exact=True
                ).astype(t)

            name = f"crop_and_resize_grad_image {method} {np.dtype(dtype).name}"
            checks.append(_Check(name, "crop_and_resize", run_grad, expect_grad))
    for method in METHODS:
        # A float32 image, and uint8 pixels with an extrapolation value.
        for image, extrapolation in (("image", 0.0), ("pixels", -1.5)):

            def run_forward(p, n, m=method, i=image, e=extrapolation):
                return cropgrad.crop_and_resize(
                    getattr(p, i), p.boxes, p.box_ind, p.crop, m, e, num_threads=n
                )

            def expect_forward(p, m=method, i=image, e=extrapolation):
                return reference.crop_and_resize(
                    getattr(p, i), p.boxes, p.box_ind, p.crop, m, e, exact=True
                )

            kind = "float32" if image == "image" else "uint8"
            name = f"crop_and_resize {method} {kind}"
            checks.append(_Check(name, "crop_and_resize", run_forward, expect_forward))

    def run_boxes(p, n):
        return cropgrad.crop_and_resize_grad_boxes(
            p.grads, p.image, p.boxes, p.box_ind, num_threads=n
        )

    def expect_boxes(p):
        return reference.grad_boxes(p.grads, p.image, p.boxes, p.box_ind, exact=True)

    checks.append(
        _Check(
            "crop_and_resize_grad_boxes bilinear",
            "crop_and_resize",
            run_boxes,
            expect_boxes,
        )
    )

    def run_jvp(p, n):
        return cropgrad.crop_and_resize_jvp_boxes(
            p.image, p.boxes, p.box_ind, p.tangent, p.crop, num_threads=n
        )

    def expect_jvp(p):
        return reference.jvp_boxes(
            p.image, p.boxes, p.box_ind, p.tangent, p.crop, exact=True
        )

    checks.append(
        _Check(
            "crop_and_resize_jvp_boxes bilinear", "crop_and_resize", run_jvp, expect_jvp
        )
    )
    return checks


def _roi_align_checks():
    """Every RoIAlign op of the model, in float32 and float64: its
    arguments before its options (the library's and the reference's alike)
    are the problem's, by name."""
    checks = []
    for dtype in (np.float32, np.float64):
        for op in _ops.FAMILIES["roi_align"].ops.values():
            names = tuple(a.name for a in op.args_of("numpy") if not a.keyword_only)

            def run(p, n, op=op.name, names=names, t=dtype):
                q = p.cast(t)
                call = getattr(cropgrad, op)
                return call(*(getattr(q, a) for a in names), num_threads=n, **q.options)

            def expect(p, op=op.name, names=names, t=dtype):
                q = p.cast(t)
                call = getattr(reference.roi_align, op)
                return call(*(getattr(q, a) for a in names), exact=True, **q.options)

            name = f"{op.name} {np.dtype(dtype).name}"
            checks.append(_Check(name, "roi_align", run, expect))
    return checks


def _grid_sample_checks():
    """grid_sample's ops with a reference (the forward op, the image and
    grid gradients; the grid JVP has none), every mode, reflection padding
    (the longest path), in float32 and float64."""
    checks = []
    family = _ops.FAMILIES["grid_sample"]
    ops = [op for op in family.ops.values() if hasattr(reference.grid_sample, op.name)]
    for dtype in (np.float32, np.float64):
        for mode in ("bilinear", "nearest", "bicubic"):
            options = {"mode": mode, "padding_mode": "reflection"}
            for op in ops:
                names = tuple(a.name for a in op.args_of("numpy") if not a.keyword_only)

                def run(p, n, op=op.name, names=names, t=dtype, o=options):
                    q = p.cast(t)
                    call = getattr(cropgrad, op)
                    return call(*(getattr(q, a) for a in names), num_threads=n, **o)

                def expect(p, op=op.name, names=names, t=dtype, o=options):
                    q = p.cast(t)
                    call = getattr(reference.grid_sample, op)
                    return call(*(getattr(q, a) for a in names), **o)

                name = f"{op.name} {mode} {np.dtype(dtype).name}"
                checks.append(_Check(name, "grid_sample", run, expect))
    return checks


# What the self-check checks: every op, method and dtype, in the order of
# its lines.
CHECKS = tuple(_crop_and_resize_checks() + _roi_align_checks() + _grid_sample_checks())


def _difference(actual, expected):
    """None when `actual` has the dtype, shape and bits of `expected`, else
    what differs.  A NaN only has to meet a NaN: which of two NaNs an
    addition keeps is the compiler's choice (docs/semantics.md)."""
    actual, expected = np.asarray(actual), np.asarray(expected)
    if actual.dtype != expected.dtype:
        return f"dtype {actual.dtype}, expected {expected.dtype}"
    if actual.shape != expected.shape:
        return f"shape {actual.shape}, expected {expected.shape}"
    bits = f"u{actual.itemsize}"
    nan = np.isnan(actual)
    differs = (actual.view(bits) != expected.view(bits)) & ~(nan & np.isnan(expected))
    if not differs.any():
        return None
    first = np.flatnonzero(differs)[0]
    return (
        f"{int(differs.sum())} of {differs.size} elements differ, e.g. "
        f"{actual.flat[first]} where {expected.flat[first]} was expected"
    )


class _Report:
    def __init__(self, out):
        self.out = out
        self.failures = []

    def item(self, what, ok, detail=""):
        text = f"  {what:<50} {'ok' if ok else 'FAIL'}"
        if detail:
            text += f"  ({detail})"
        print(text, file=self.out, flush=True)
        if not ok:
            self.failures.append(what)


def _check_bits(report, check, problems):
    """One line: `check` on each of its problems, against the reference."""
    differences = []
    for problem in problems:
        with np.errstate(all="ignore"):
            expected = check.expect(problem)
        difference = _difference(check.run(problem, None), expected)
        if difference is not None:
            differences.append(difference)
    report.item(
        check.name,
        not differences,
        f"differs on {len(differences)} of {len(problems)} problems: {differences[0]}"
        if differences
        else f"bit for bit on {len(problems)} problems",
    )


def check(out=sys.stdout, seed=12345):
    """Run the self-check, printing a line per item; return True when all pass."""
    started = time.perf_counter()
    config = cropgrad.show_config("dicts")
    print(
        f"cropgrad {cropgrad.__version__} self-check (NumPy {np.__version__}, "
        f"OpenMP {'on' if config['openmp'] else 'off'}, "
        f"{config['default_threads']} default threads)\n"
        "Each op against cropgrad's NumPy reference (cropgrad._reference: "
        "TensorFlow's,\ntorchvision's and PyTorch's arithmetic in plain NumPy, held "
        "to their bits by the\ntest suite), on small random problems:",
        file=out,
    )
    report = _Report(out)
    rng = np.random.default_rng(seed)
    problems = {
        "crop_and_resize": [_crop_problem(rng, *shape) for shape in CHECK_SHAPES],
        "roi_align": [_roi_problem(rng, *shape) for shape in ROI_SHAPES],
        "grid_sample": [_grid_problem(rng, *shape) for shape in GRID_SHAPES],
    }
    for item in CHECKS:
        _check_bits(report, item, problems[item.family])

    # Threads: problems of a few million element updates, far above the
    # size under which the kernels stay on one thread.
    big = {
        "crop_and_resize": _crop_problem(rng, 3, 64, 56, 32, 96, (16, 16), 0.1),
        "roi_align": _roi_problem(rng, 2, 32, 40, 48, 64, (7, 7), 0.5, 2, False),
        "grid_sample": _grid_problem(rng, 2, 8, 48, 40, 64, 56),
    }
    differ = []
    for item in CHECKS:
        problem = big[item.family]
        first = item.run(problem, 1)
        if any(item.run(problem, n).tobytes() != first.tobytes() for n in (2, 3, 4)):
            differ.append(item.name)
    report.item(
        "every op: the same bits on 1, 2, 3 and 4 threads",
        not differ,
        "differ: " + ", ".join(differ)
        if differ
        else f"{len(CHECKS)} op/method/dtype combinations",
    )

    elapsed = time.perf_counter() - started
    if report.failures:
        print(
            f"FAIL: {len(report.failures)} check(s) failed ({elapsed:.1f} s)", file=out
        )
        return False
    print(f"PASS ({elapsed:.1f} s)", file=out)
    return True
