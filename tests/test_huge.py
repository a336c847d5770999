"""Arrays beyond 2**31 elements: 64-bit indexing everywhere.

Each test runs in a child process (an out-of-memory kill or a crash is then
a failure of that test, not of the session) and checks values at positions
past element 2**31 (byte offset 2**33), where a 32-bit index would wrap.
The outputs are float32 (float16 would add a float32 accumulator) so peak
memory stays near 8 GiB; inputs that are mostly zero come from
``numpy.zeros``, whose untouched pages cost no memory.

Sizes that cannot be allocated must fail with MemoryError or ValueError
before any work: without touching memory.

Without 11 GiB of available memory the big tests skip, unless
``CROPGRAD_REQUIRE_HUGE=1`` (CI on a machine that has it) makes that a
failure.
"""

import json
import subprocess
import sys
import textwrap

import psutil
import pytest
from _helpers import missing

GIB = 2**30


@pytest.fixture
def big():
    """Skip (or fail, under CROPGRAD_REQUIRE_HUGE=1) without the memory."""
    available = psutil.virtual_memory().available
    if sys.maxsize < 2**62:
        missing("needs a 64-bit build", "CROPGRAD_REQUIRE_HUGE")
    if available < 11 * GIB:
        missing(
            f"needs 11 GiB of available memory, has {available / GIB:.1f} GiB",
            "CROPGRAD_REQUIRE_HUGE",
        )


BIG = pytest.mark.usefixtures("big")


def run_child(body, timeout=240):
    """Run `body` (which sets `result`) in a child; return result and peak RSS.

    The time limit only stops a child that hangs: how fast the work runs is
    the benchmark's business, and a loaded machine may take several times
    longer.
    """
    script = (
        textwrap.dedent("""
        import json, resource, sys, time
        import numpy as np
        import cropgrad
        from cropgrad import _reference as reference
        start = time.perf_counter()
        result = {}
    """)
        + textwrap.dedent(body)
        + textwrap.dedent("""
        result["seconds"] = round(time.perf_counter() - start, 2)
        # The child's own peak: Linux's VmHWM is the high-water mark of this
        # program's memory since exec, where ru_maxrss also holds the RSS
        # the parent had when it forked (a test run with PyTorch and JAX
        # loaded passes 1 GiB).
        try:
            with open("/proc/self/status") as status:
                hwm = next(l for l in status if l.startswith("VmHWM:"))
            peak_kib = int(hwm.split()[1])
        except OSError:
            peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
            if sys.platform == "darwin":
                peak_kib //= 1024  # bytes there
        result["peak_rss_gib"] = round(peak_kib / 2**20, 2)
        print(json.dumps(result))
    """)
    )
    proc = subprocess.run(
        [sys.executable, "-P", "-X", "faulthandler", "-c", script],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert proc.returncode == 0, (
        f"child exited with {proc.returncode}\n"
        f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    )
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    print(result)
    return result


@BIG
@pytest.mark.slow
def test_grad_image_output_beyond_2_31_elements():
    # image_size [2, H, 2, 2] with H - 1 = 2**28 + 64 exact in float32: 2**31 + 520
    # elements.  Boxes at y = 1 land on the last row of image 1, past element
    # 2**31; others in the middle of image 1 and at the top of image 0.
    result = run_child("""
        H = 2**28 + 65
        size = [2, H, 2, 2]
        assert 2 * H * 4 > 2**31
        boxes = np.array([[1.0, 0.0, 1.0, 1.0],     # last row of its image
                          [0.5, 0.0, 1.0, 1.0],     # rows from the middle to the end
                          [0.0, 0.0, 0.0, 1.0]],    # first row
                         np.float32)
        box_ind = np.array([1, 1, 0])
        grads = np.arange(1, 3 * 5 * 2 * 2 + 1, dtype=np.float32).reshape(3, 5, 2, 2)

        def expected(method):
            # Sparse scatter with the reference's float32 coordinates; grads are
            # small integers and the weights dyadic, so float64 sums are exact.
            acc = {}
            for b in range(3):
                ys = reference.sample_coords(boxes[b, 0], boxes[b, 2], H, 5)
                xs = reference.sample_coords(boxes[b, 1], boxes[b, 3], 2, 2)
                for y, cy in enumerate(ys):
                    for x, cx in enumerate(xs):
                        g = grads[b, y, x].astype(np.float64)
                        if method == "nearest":
                            taps = [(int(np.floor(float(cy) + 0.5)),
                                     int(np.floor(float(cx) + 0.5)), 1.0)]
                        else:
                            t, btm, wy = reference.linear_taps(cy, H)
                            l, r, wx = reference.linear_taps(cx, 2)
                            wy, wx = float(wy), float(wx)
                            taps = [(t, l, (1 - wy) * (1 - wx)), (t, r, (1 - wy) * wx),
                                    (btm, l, wy * (1 - wx)), (btm, r, wy * wx)]
                        for row, col, w in taps:
                            key = (int(box_ind[b]), row, col)
                            acc[key] = acc.get(key, 0.0) + w * g
            return acc

        out = None
        checked = 0
        for method, threads in (("bilinear", 2), ("nearest", 1)):
            # The second call overwrites the first call's out= entirely.
            out = cropgrad.crop_and_resize_grad_image(
                grads, boxes, box_ind, size, method=method, num_threads=threads,
                out=out)
            assert out.shape == tuple(size) and out.size > 2**31
            want = expected(method)
            beyond = 0
            for (bi, row, col), value in want.items():
                got = out[bi, row, col].astype(np.float64)
                assert np.array_equal(got, value), (method, bi, row, col, got, value)
                offset = ((bi * H + row) * 2 + col) * 2
                beyond += offset >= 2**31
                checked += 1
            assert beyond >= 2, "no contribution past element 2**31"
            nonzero = sum(int(np.count_nonzero(v)) for v in want.values())
            assert np.count_nonzero(out) == nonzero, method
        # The very last element was written by the box at y = 1 (bilinear is
        # overwritten by nearest: only the last call counts).
        assert out[1, H - 1, 1, 1] != 0
        result["elements"] = int(out.size)
        result["checked_pixels"] = checked
    """)
    assert result["peak_rss_gib"] < 10


@BIG
@pytest.mark.slow
def test_grad_image_gradient_input_beyond_2_31_elements():
    # grads of 2**31 + 2**16 elements (zeros: no memory) with only the last
    # crop row non-zero, scattered into a small image.
    result = run_child("""
        crop_h, depth = 2**15 + 1, 2**16
        grads = np.zeros((1, crop_h, 1, depth), np.float32)
        assert grads.size > 2**31
        g = np.arange(depth, dtype=np.float32) % 251 + 1
        grads[0, -1, 0] = g
        boxes = np.array([[0.0, 0.0, 1.0, 1.0]], np.float32)
        out = cropgrad.crop_and_resize_grad_image(grads, boxes, [0], [1, 2, 2, depth],
                                                  num_threads=2)
        # Last crop row: y = 1 exactly (scale 2**-15); the single column samples
        # x = 0.5, half to each pixel of the bottom row.
        np.testing.assert_array_equal(out[0, 1, 0], g / 2)
        np.testing.assert_array_equal(out[0, 1, 1], g / 2)
        assert not out[0, 0].any()
        result["grads_elements"] = int(grads.size)
    """)
    assert result["peak_rss_gib"] < 10


@BIG
@pytest.mark.slow
def test_forward_output_beyond_2_31_elements():
    result = run_child("""
        crop_h, depth = 2**15 + 1, 2**16
        image = np.empty((1, 2, 2, depth), np.float32)
        image[0, 0, 0] = 1
        image[0, 0, 1] = 3
        image[0, 1, 0] = np.arange(depth) % 7
        image[0, 1, 1] = 5
        boxes = np.array([[0.0, 0.0, 1.0, 1.0]], np.float32)
        crops = cropgrad.crop_and_resize(image, boxes, [0], [crop_h, 1], num_threads=2)
        assert crops.size > 2**31
        ref = reference.crop_and_resize(image, boxes, [0], [3, 1])  # rows y = 0, 0.5, 1
        # Crop row y samples image row y / 2**15: rows 0, 2**14 and 2**15 are
        # image rows 0, 0.5 and 1 exactly.
        for crop_row, ref_row in ((0, 0), (2**14, 1), (2**15, 2)):
            np.testing.assert_allclose(crops[0, crop_row, 0], ref[0, ref_row, 0],
                                       rtol=0, atol=1e-6)
        # Row 2**15 - 1 is past element 2**31 as well: y_lerp = 1 - 2**-15.
        wy = 1 - 2.0**-15
        top = 0.5 * (image[0, 0, 0] + image[0, 0, 1]).astype(np.float64)
        bottom = 0.5 * (image[0, 1, 0] + image[0, 1, 1]).astype(np.float64)
        np.testing.assert_allclose(crops[0, 2**15 - 1, 0], top + (bottom - top) * wy,
                                   rtol=1e-6, atol=1e-6)
        result["elements"] = int(crops.size)
    """)
    assert result["peak_rss_gib"] < 10


@BIG
@pytest.mark.slow
def test_grad_boxes_gradient_input_beyond_2_31_elements():
    run_child("""
        crop_h, depth = 2**15 + 1, 2**16
        grads = np.zeros((1, crop_h, 1, depth), np.float32)
        grads[0, -1, 0] = 1
        image = np.zeros((1, 2, 2, depth), np.float32)
        image[0, 1, 1] = 1   # a gradient along x (and y) at the bottom row only
        image[0, 1, 0] = -1
        boxes = np.array([[0.0, 0.0, 1.0, 1.0]], np.float32)
        out = cropgrad.crop_and_resize_grad_boxes(grads, image, boxes, [0])
        # Only the last crop row counts (the others have zero gradients): it
        # samples y = 1 (y_lerp 0) and x = 0.5, so per channel the x
        # derivative is br - bl = 2, given to x1 and x2 with the weight
        # 0.5 * (W - 1) of a one-column crop, and the y derivative
        # 0.5 * (bl - tl) + 0.5 * (br - tr) is 0.
        expected_dx = 2.0 * 0.5 * depth
        np.testing.assert_allclose(
            out[0], [0.0, expected_dx, 0.0, expected_dx], rtol=1e-6)
        result["grads_elements"] = int(grads.size)
    """)


def test_sizes_that_cannot_be_allocated_fail_before_any_work():
    # Refused before any work: no memory touched.
    result = run_child(
        """
        errors = []
        g = np.ones((1, 2, 2, 1), np.float32)
        img = np.ones((1, 3, 3, 1), np.float32)
        calls = [
            lambda: cropgrad.crop_and_resize_grad_image(g, [[0, 0, 1, 1]], [0],
                                                        [2**40, 2**20, 1, 1]),
            lambda: cropgrad.crop_and_resize_grad_image(
                g, [[0, 0, 1, 1]], [0], [1, 2**40, 2**20, 1], "float16"),
            lambda: cropgrad.crop_and_resize_grad_image(
                g, [[0, 0, 1, 1]], [0], [1, 2**36, 2**10, 1], "float64"),
            lambda: cropgrad.crop_and_resize_grad_image(g, [[0, 0, 1, 1]], [0],
                                                        [2**62, 2**62, 1, 1]),
            lambda: cropgrad.crop_and_resize(img, [[0, 0, 1, 1]], [0], [2**31, 2**31]),
            lambda: cropgrad.crop_and_resize(img, [[0, 0, 1, 1]], [0], [2**62, 2**10]),
        ]
        for call in calls:
            try:
                call()
            except (MemoryError, ValueError) as exc:
                assert str(exc).strip()
                errors.append(type(exc).__name__)
        result["errors"] = errors
    """,
        timeout=60,
    )
    # No work: no memory touched (and the child's time limit above).
    assert len(result["errors"]) == 6
    assert result["peak_rss_gib"] < 1
