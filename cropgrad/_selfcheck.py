"""The self-check of ``python -m cropgrad``: this install against a reference.

Every operation is compared with cropgrad's NumPy reference
(`cropgrad._reference`: plain NumPy, independent of the compiled kernels,
held to TensorFlow's and torchvision's bits by the test suite) on a few
small random problems.  crop_and_resize's ops are held to the reference's
float64 result within a rounding bound each line states; RoIAlign's to the
reference's float32 and float64 arithmetic, bit for bit.  Then 1, 2, 3 and
4 threads must give the same bits.
"""

import sys
import time

import numpy as np

import cropgrad
from cropgrad import _reference as reference


def _problem(rng, batch, height, width, depth, num_boxes, crop, spread=0.25):
    """Random grads, boxes (some flipped, some partly or wholly outside), box_ind."""
    grads = rng.standard_normal((num_boxes, *crop, depth)).astype(np.float32)
    corners = rng.uniform(-spread, 1 + spread, (num_boxes, 4))
    boxes = corners.astype(np.float32)
    box_ind = rng.integers(0, batch, num_boxes).astype(np.int32)
    image = rng.standard_normal((batch, height, width, depth)).astype(np.float32)
    return grads, boxes, box_ind, (batch, height, width, depth), image


# (batch, height, width, depth, num_boxes, crop): a few shapes, including
# one-row and one-column crops (box centres) and a one-pixel-wide image.
CHECK_SHAPES = (
    (2, 9, 7, 5, 6, (4, 3)),
    (1, 6, 11, 3, 5, (1, 5)),
    (3, 8, 8, 4, 7, (6, 1)),
    (2, 5, 1, 2, 4, (3, 3)),
)


# RoIAlign's problems: (batch, channels, height, width, num_boxes,
# output_size, spatial_scale, sampling_ratio, aligned).
ROI_SHAPES = (
    (2, 5, 12, 10, 6, (3, 2), 0.5, -1, False),
    (1, 3, 9, 13, 5, (2, 4), 1.0, 0, True),
    (2, 4, 8, 8, 4, (4, 4), 0.25, 2, False),
)


def _roi_problem(rng, batch, channels, height, width, num_boxes, spatial_scale):
    """Random image, grads, boxes (in input pixels, some partly outside) and
    box_ind of a RoIAlign problem."""
    image = rng.standard_normal((batch, channels, height, width))
    corners = rng.uniform(-2, [width, height, width, height], (num_boxes, 4))
    boxes = (
        np.concatenate(
            [
                np.minimum(corners[:, :2], corners[:, 2:]),
                np.maximum(corners[:, :2], corners[:, 2:]),
            ],
            axis=1,
        )
        / spatial_scale
    )
    box_ind = rng.integers(0, batch, num_boxes).astype(np.int32)
    return image, boxes, box_ind


def _check_roi_align(report, rng):
    """RoIAlign's forward op, image gradient and boxes gradient against the
    reference's arithmetic (torchvision's), bit for bit."""
    for dtype in (np.float32, np.float64):
        mismatches = {
            "roi_align": 0,
            "roi_align_grad_image": 0,
            "roi_align_grad_boxes": 0,
        }
        for (
            batch,
            channels,
            height,
            width,
            k,
            size,
            scale,
            ratio,
            aligned,
        ) in ROI_SHAPES:
            image, boxes, box_ind = _roi_problem(
                rng, batch, channels, height, width, k, scale
            )
            image, boxes = image.astype(dtype), boxes.astype(dtype)
            grads = rng.standard_normal((k, channels, *size)).astype(dtype)
            options = dict(spatial_scale=scale, sampling_ratio=ratio, aligned=aligned)
            pairs = {
                "roi_align": (
                    cropgrad.roi_align(image, boxes, box_ind, size, **options),
                    reference.roi_align.roi_align(
                        image, boxes, box_ind, size, exact=True, **options
                    ),
                ),
                "roi_align_grad_image": (
                    cropgrad.roi_align_grad_image(
                        grads, boxes, box_ind, image.shape, **options
                    ),
                    reference.roi_align.roi_align_grad_image(
                        grads, boxes, box_ind, image.shape, exact=True, **options
                    ),
                ),
                "roi_align_grad_boxes": (
                    cropgrad.roi_align_grad_boxes(
                        grads, image, boxes, box_ind, **options
                    ),
                    reference.roi_align.roi_align_grad_boxes(
                        grads, image, boxes, box_ind, exact=True, **options
                    ),
                ),
            }
            for name, (actual, expected) in pairs.items():
                same = (
                    actual.dtype == expected.dtype
                    and actual.shape == expected.shape
                    and actual.tobytes() == np.asarray(expected).tobytes()
                )
                mismatches[name] += not same
        for name, count in mismatches.items():
            report.item(
                f"{name} {np.dtype(dtype).name}",
                count == 0,
                f"bit for bit on {len(ROI_SHAPES)} problems"
                if count == 0
                else f"differs on {count} of {len(ROI_SHAPES)} problems",
            )


def _roi_align_calls(rng):
    """RoIAlign's ops on a problem large enough for a team of threads."""
    image, boxes, box_ind = _roi_problem(rng, 2, 32, 40, 48, 64, 0.5)
    image = image.astype(np.float32)
    grads = rng.standard_normal((64, 32, 7, 7)).astype(np.float32)
    options = dict(spatial_scale=0.5, sampling_ratio=2)
    return {
        "roi_align": lambda n: cropgrad.roi_align(
            image, boxes, box_ind, 7, num_threads=n, **options
        ),
        "roi_align_grad_image": lambda n: cropgrad.roi_align_grad_image(
            grads, boxes, box_ind, image.shape, num_threads=n, **options
        ),
        "roi_align_grad_boxes": lambda n: cropgrad.roi_align_grad_boxes(
            grads, image, boxes, box_ind, num_threads=n, **options
        ),
    }


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

    def detail(self, allowed):
        if not self.ok:
            return self.failure
        return f"max error {self.worst:.1e}, allowed {allowed}"


def check(out=sys.stdout, seed=12345):
    """Run the self-check, printing a line per item; return True when all pass."""
    started = time.perf_counter()
    config = cropgrad.show_config("dicts")
    print(
        f"cropgrad {cropgrad.__version__} self-check (NumPy {np.__version__}, "
        f"OpenMP {'on' if config['openmp'] else 'off'}, "
        f"{config['default_threads']} default threads)\n"
        "Each op against cropgrad's NumPy reference (cropgrad._reference: "
        "TensorFlow's and\ntorchvision's arithmetic in plain NumPy, held to "
        "their bits by the test suite),\non small random problems:",
        file=out,
    )
    report = _Report(out)
    rng = np.random.default_rng(seed)
    problems = [_problem(rng, *shape) for shape in CHECK_SHAPES]

    for method in ("bilinear", "nearest"):
        for dtype in (np.float32, np.float64, np.float16):
            comparison = _Comparison()
            for grads, boxes, box_ind, size, _ in problems:
                expected = reference.grad_image(grads, boxes, box_ind, size, method)
                # Every weight is >= 0: the same sum over |grads| bounds the
                # magnitudes that rounding errors scale with.
                bound = reference.grad_image(
                    np.abs(grads), boxes, box_ind, size, method
                )
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
                comparison.detail(
                    "1e-5 of the sum of |terms|"
                    + (" + float16 rounding" if dtype == np.float16 else "")
                ),
            )

    for method in ("bilinear", "nearest"):
        comparison = _Comparison()
        for grads, boxes, box_ind, size, image in problems:
            crop = grads.shape[1:3]
            pixels = (image * 40 + 100).clip(0, 255).astype(np.uint8)
            for img, extrapolation in ((image, 0.0), (pixels, -1.5)):
                expected = reference.crop_and_resize(
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
        report.item(
            f"crop_and_resize {method}",
            comparison.ok,
            comparison.detail("1e-5 of the largest pixel"),
        )

    comparison = _Comparison()
    for grads, boxes, box_ind, size, image in problems:
        expected = reference.grad_boxes(grads, image, boxes, box_ind)
        bound = reference.grad_boxes_magnitude(grads, image, boxes, box_ind)
        actual = cropgrad.crop_and_resize_grad_boxes(grads, image, boxes, box_ind)
        comparison.add(actual, expected, 1e-4 * bound, f"shape {size}")
    report.item(
        "crop_and_resize_grad_boxes bilinear",
        comparison.ok,
        comparison.detail("1e-4 of the sum of |terms|"),
    )
    _check_roi_align(report, rng)

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
    calls.update(_roi_align_calls(rng))
    differ = []
    for what, call in calls.items():
        first = call(1)
        if any(call(n).tobytes() != first.tobytes() for n in (2, 3, 4)):
            differ.append(what)
    report.item(
        "every op: the same bits on 1, 2, 3 and 4 threads",
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
