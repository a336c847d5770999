"""Helpers shared by the test modules (no test module imports another).

The TensorFlow fixtures, random problems, the bit-for-bit comparison and the
Hypothesis profiles and strategies of the property tests.  The number of
examples is fixed per profile so CI time is bounded:
``CROPGRAD_HYPOTHESIS_PROFILE=ci`` (the default: derandomized, so every run
tries the same examples), ``random`` (new examples each run; a failure
prints the ``@reproduce_failure`` blob and the seed), ``thorough`` (20
times the examples, random) or ``quick`` (a twentieth, for runs under
valgrind).
"""

import contextlib
import importlib
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from hypothesis import HealthCheck, note, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

DATA = os.path.join(os.path.dirname(__file__), "data")

# --------------------------------------------------------------------------
# The environment's switches, each read one way

_TRUE = ("1", "true", "yes")
_FALSE = ("", "0", "false", "no")


def env_flag(name):
    """Whether the environment variable `name` is set to true: ``1``,
    ``true`` or ``yes`` (any case); unset, empty, ``0``, ``false`` and
    ``no`` are false, anything else is an error (a switch misspelt in CI
    must not read as off)."""
    value = os.environ.get(name, "").strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ValueError(
        f"{name}={os.environ[name]!r}: expected 1, true or yes (on), or "
        "0, false, no or empty (off)"
    )


# What a run may lack on purpose, each with the variable that makes its
# absence a failure: the frameworks of the adapters and the second witness
# (JAX, PyTorch, Numba, ONNX Runtime), and the memory of tests/test_huge.py.
REQUIRE_VARIABLES = ("CROPGRAD_REQUIRE_ADAPTERS", "CROPGRAD_REQUIRE_HUGE")


def required(variable):
    """Whether this run requires what `variable` (one of REQUIRE_VARIABLES)
    stands for."""
    assert variable in REQUIRE_VARIABLES, variable
    return env_flag(variable)


def unrequired(what, variable="CROPGRAD_REQUIRE_ADAPTERS"):
    """The reason of a skip for `what`, missing while `variable` does not
    require it (the form conftest.py accepts under CI only then)."""
    return f"{what} (not required: {variable} is not set)"


def missing(what, variable):
    """Skip the calling test (or module) because `what` is missing, or fail
    it when `variable` requires it; the skip's reason names the variable (CI
    accepts such skips only while the variable is unset: conftest.py)."""
    if required(variable):
        pytest.fail(f"{what}, and {variable}=1 requires it", pytrace=False)
    pytest.skip(unrequired(what, variable), allow_module_level=True)


def adapter(*modules):
    """The modules named (an adapter and its framework) imported, or the
    calling test skipped when one cannot be (failed where
    CROPGRAD_REQUIRE_ADAPTERS=1 requires it)."""
    try:
        return tuple(importlib.import_module(m) for m in modules)
    except ImportError as exc:
        missing(f"{exc.name} cannot be imported ({exc})", "CROPGRAD_REQUIRE_ADAPTERS")


def load_cases(filename):
    """The TensorFlow fixture file `filename` as {case name: {key: array}}."""
    with np.load(os.path.join(DATA, filename), allow_pickle=False) as data:
        cases = {}
        for name in data["cases"]:
            prefix = f"{name}/"
            cases[str(name)] = {
                key[len(prefix) :]: data[key]
                for key in data.files
                if key.startswith(prefix)
            }
    return cases


def fixture_comparison(name):
    """How a fixture case's result is compared with TensorFlow's: in cases
    of NaN pixels, gradients or extrapolation values (named "nonfinite" or
    "nan_"), NaN where TensorFlow has NaN, whatever its sign (see
    assert_same_values); bits elsewhere."""
    nan = "nonfinite" in name or "nan_" in name
    return assert_same_values if nan else assert_same_bits


def crop_fixture(case, image, **options):
    """crop_and_resize of a forward.npz case on `image` (the case's image,
    or that image in another layout), flushing denormals as TensorFlow."""
    import cropgrad

    return cropgrad.crop_and_resize(
        image,
        case["boxes"],
        case["box_ind"],
        case["crop_size"],
        method=str(case["method"]),
        extrapolation_value=case["extrapolation_value"],
        flush_denormals=True,
        **options,
    )


def grad_boxes_fixture(case, grads, image, **options):
    """crop_and_resize_grad_boxes of a grad_boxes.npz case on `grads` and
    `image` (the case's, or those in another layout), flushing denormals as
    TensorFlow."""
    import cropgrad

    return cropgrad.crop_and_resize_grad_boxes(
        grads,
        image,
        case["boxes"],
        case["box_ind"],
        flush_denormals=True,
        **options,
    )


# roi_align.npz's cases with non-finite pixels, compared on their own
# (assert_nan_places, assert_pixel0_unread).
ROI_SPECIAL = ("special_values_f32", "nan_pixel0_f32")


def assert_pixel0_unread(out, expected):
    """The "nan_pixel0_f32" check: torchvision adds 0 * pixel 0 (NaN) for a
    sample outside the image, where `out` reads no pixel; NaN in `out` only
    where `expected` has NaN, some of those not NaN, the same bits elsewhere."""
    differ = np.isnan(expected) & ~np.isnan(out)
    # Inside samples that read pixel 0 give NaN in both.
    assert differ.any() and np.all(np.isnan(expected)[np.isnan(out)])
    assert_same_bits(out[~differ], expected[~differ])


def roi_case_names(cases, kind="roi_align", exclude=()):
    """The sorted names of the roi_align.npz `cases` of `kind`, but `exclude`."""
    return sorted(
        n for n, c in cases.items() if str(c["kind"]) == kind and n not in exclude
    )


def roi_case_options(case):
    """A roi_align.npz case's spatial_scale, sampling_ratio and aligned, by
    keyword (in torchvision's order)."""
    return dict(
        spatial_scale=float(case["spatial_scale"]),
        sampling_ratio=int(case["sampling_ratio"]),
        aligned=bool(case["aligned"]),
    )


def assert_nan_places(out, expected):
    """The "special_values_f32" check: inside samples read their four
    corners, so zero weight times an infinite pixel is NaN in torchvision's
    `expected` and in `out` alike; NaN at the same places (payloads may
    differ), the same bits elsewhere."""
    nan = np.isnan(expected)
    assert nan.any()
    np.testing.assert_array_equal(np.isnan(out), nan)
    assert_same_bits(out[~nan], expected[~nan])


def as_image_dtype(values, dtype):
    """Float `values` as an image of `dtype`, the same on every platform.

    Integer dtypes get the values truncated toward zero and wrapped modulo
    2**bits (through int64, a cast NumPy defines): a float-to-unsigned cast
    of a negative value is undefined in C, gives 0 and NumPy's "invalid
    value" warning on aarch64 and a wrapped value on x86-64.
    """
    dtype = np.dtype(dtype)
    if dtype.kind in "iu":
        return np.trunc(values).astype(np.int64).astype(dtype)
    return np.asarray(values).astype(dtype)


def random_problem(
    rng, batch=2, height=9, width=7, depth=5, num_boxes=6, crop=(4, 3), spread=0.3
):
    """Random grads, boxes (some outside, some flipped) and box_ind."""
    grads = rng.standard_normal((num_boxes, *crop, depth)).astype(np.float32)
    y1 = rng.uniform(-spread, 1 + spread, num_boxes)
    x1 = rng.uniform(-spread, 1 + spread, num_boxes)
    y2 = rng.uniform(-spread, 1 + spread, num_boxes)
    x2 = rng.uniform(-spread, 1 + spread, num_boxes)
    boxes = np.stack([y1, x1, y2, x2], axis=1).astype(np.float32)
    box_ind = rng.integers(0, batch, num_boxes).astype(np.int32)
    return grads, boxes, box_ind, [batch, height, width, depth]


def assert_same_bits(actual, expected, what=""):
    """The same dtype, shape and bytes; else say how many elements differ,
    the first one and the largest difference."""
    assert actual.dtype == expected.dtype, (what, actual.dtype, expected.dtype)
    assert actual.shape == expected.shape, (what, actual.shape, expected.shape)
    if actual.tobytes() != expected.tobytes():
        bits = f"u{actual.itemsize}"
        diff = np.argwhere(actual.view(bits) != expected.view(bits))
        first = tuple(diff[0])
        with np.errstate(invalid="ignore"):
            largest = np.nanmax(
                np.abs(actual.astype(np.float64) - expected.astype(np.float64)),
                initial=0.0,
            )
        raise AssertionError(
            f"{what}: {len(diff)} of {actual.size} elements differ, first at "
            f"{first}: {actual[first]!r} != {expected[first]!r}; max abs "
            f"difference {largest:g}"
        )


# --------------------------------------------------------------------------
# Hypothesis: profiles and strategies

_COMMON = dict(
    deadline=None,
    print_blob=True,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.large_base_example,
    ],
)
settings.register_profile("ci", derandomize=True, database=None, **_COMMON)
settings.register_profile("random", database=None, **_COMMON)
settings.register_profile("thorough", database=None, **_COMMON)
settings.register_profile("quick", derandomize=True, database=None, **_COMMON)
PROFILE = os.environ.get("CROPGRAD_HYPOTHESIS_PROFILE", "ci")
SCALE = {"thorough": 20, "quick": 0.05}.get(PROFILE, 1)


# Every settings object examples() made (test_properties.py checks that each
# property test of a session uses one).
EXAMPLE_SETTINGS = []


def examples(n):
    """Settings of the active profile with `n` examples (times its scale)."""
    made = settings(settings.get_profile(PROFILE), max_examples=max(int(n * SCALE), 5))
    EXAMPLE_SETTINGS.append(made)
    return made


U32 = 2.0**-24  # unit roundoff of float32
U64 = 2.0**-53
TINY32 = 2.0**-149  # float32 subnormal spacing: absolute error of an underflow
OUT_DTYPES = (np.float16, np.float32, np.float64)
METHODS = ("bilinear", "nearest")

# --------------------------------------------------------------------------
# Strategies


def f32(lo, hi):
    """Finite float32 values in about [lo, hi] (the bounds rounded to float32)."""
    return st.floats(
        float(np.float32(lo)),
        float(np.float32(hi)),
        width=32,
        allow_nan=False,
        allow_infinity=False,
    )


HUGE = [1e30, -1e30, 3e38, -3e38, 3.4028235e38, -3.4028235e38, 1e20, -1e20, 6e37]
SPECIAL = [
    0.0,
    -0.0,
    1.0,
    0.5,
    1e-40,
    -1e-40,
    1e-45,
    2.0**-24,
    1.0 - 2.0**-24,
    1.0 + 2.0**-23,
]


@st.composite
def box(draw, height, width):
    """One [y1, x1, y2, x2] box from one of several distributions."""
    kind = draw(
        st.sampled_from(
            ["inside", "around", "flipped", "degenerate", "huge", "special", "grid"]
        )
    )
    if kind == "inside":
        coords = [draw(f32(0, 1)) for _ in range(4)]
    elif kind == "around":  # partly (or wholly) outside the image
        coords = [draw(f32(-1.5, 2.5)) for _ in range(4)]
    elif kind == "flipped":  # upside down and/or mirrored
        y = sorted([draw(f32(-0.5, 1.5)), draw(f32(-0.5, 1.5))], reverse=True)
        x = sorted(
            [draw(f32(-0.5, 1.5)), draw(f32(-0.5, 1.5))], reverse=draw(st.booleans())
        )
        coords = [y[0], x[0], y[1], x[1]]
    elif kind == "degenerate":  # a line or a point
        y1, x1 = draw(f32(-0.2, 1.2)), draw(f32(-0.2, 1.2))
        y2 = y1 if draw(st.booleans()) else draw(f32(-0.2, 1.2))
        x2 = x1 if y2 != y1 or draw(st.booleans()) else draw(f32(-0.2, 1.2))
        coords = [y1, x1, y2, x2]
    elif kind == "huge":  # finite, but the arithmetic overflows
        coords = [draw(st.sampled_from(HUGE) | f32(-2, 2)) for _ in range(4)]
    elif kind == "special":
        coords = [draw(st.sampled_from(SPECIAL)) for _ in range(4)]
    else:  # on (or next to) pixel centres: integer coordinates

        def on_grid(size):
            k = draw(st.integers(-2, 2 * max(size - 1, 1) + 2))
            return k / (2 * max(size - 1, 1))

        coords = [on_grid(height), on_grid(width), on_grid(height), on_grid(width)]
    return coords


def _draw_sizes(draw, max_boxes, max_size, max_depth):
    """batch, height, width, depth and number of boxes of a problem."""
    batch = draw(st.sampled_from([1, 2, 3, 0, 1, 2]))
    height = draw(st.integers(1, max_size))
    width = draw(st.integers(1, max_size))
    depth = draw(st.sampled_from([1, 2, 0, max_depth, 1, 2]))
    num_boxes = draw(st.sampled_from([*range(1, max_boxes + 1), 0])) if batch else 0
    return batch, height, width, depth, num_boxes


def _draw_boxes(draw, batch, height, width, num_boxes, index_dtype):
    """`num_boxes` boxes (`box`) and their image indices, as `index_dtype`
    or, for None, int32 or int64 (drawn after the indices)."""
    boxes = np.array(
        [draw(box(height, width)) for _ in range(num_boxes)], dtype=np.float32
    ).reshape(num_boxes, 4)
    indices = draw(
        st.lists(
            st.integers(0, max(batch - 1, 0)),
            min_size=num_boxes,
            max_size=num_boxes,
        )
    )
    if index_dtype is None:
        index_dtype = draw(st.sampled_from([np.int32, np.int64]))
    return boxes, np.array(indices, index_dtype)


@st.composite
def grad_image_problems(
    draw, max_boxes=5, max_crop=5, max_size=7, max_depth=3, grads_elements=None
):
    # Empty problems (no batch, no depth, no boxes) about one time in six.
    batch, height, width, depth, num_boxes = _draw_sizes(
        draw, max_boxes, max_size, max_depth
    )
    crop_h = draw(st.integers(1, max_crop))
    crop_w = draw(st.integers(1, max_crop))
    boxes, box_ind = _draw_boxes(draw, batch, height, width, num_boxes, None)
    elements = f32(-100, 100) if grads_elements is None else grads_elements
    grads = draw(
        hnp.arrays(np.float32, (num_boxes, crop_h, crop_w, depth), elements=elements)
    )
    return grads, boxes, box_ind, [batch, height, width, depth]


# Every image dtype but bfloat16 (which needs ml_dtypes).
IMAGE_DTYPES = [
    np.uint8,
    np.int8,
    np.uint16,
    np.int16,
    np.int32,
    np.int64,
    np.float16,
    np.float32,
    np.float64,
]


NONFINITE = [np.nan, np.inf, -np.inf]


def _image_elements(dtype):
    """Pixels of `dtype`: every integer; floats mostly of moderate size, but
    also anywhere in the dtype's range (float16: up to 65504, float32 and
    float64: up to float32's 3.4e38, beyond which the kernels' float32
    arithmetic starts from infinity anyway), infinities and NaN."""
    dtype = np.dtype(dtype)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return st.integers(int(info.min), int(info.max))
    if dtype == np.float16:
        return (
            st.floats(-1000, 1000, width=16)
            | st.floats(width=16)
            | st.sampled_from(NONFINITE)
        )
    return (
        st.floats(-1e6, 1e6, width=32)
        | st.floats(width=32)
        | st.sampled_from(NONFINITE)
    )


def grads_elements():
    """Gradients (or tangents): moderate values, any float32, infinities
    and NaN."""
    return f32(-100, 100) | st.floats(width=32) | st.sampled_from(NONFINITE)


@st.composite
def forward_problems(draw, max_boxes=5, max_crop=5, max_size=7, max_depth=3):
    dtype = draw(st.sampled_from(IMAGE_DTYPES))
    batch, height, width, depth, num_boxes = _draw_sizes(
        draw, max_boxes, max_size, max_depth
    )
    crop = [draw(st.integers(1, max_crop)), draw(st.integers(1, max_crop))]
    image = draw(
        hnp.arrays(
            dtype, (batch, height, width, depth), elements=_image_elements(dtype)
        )
    )
    boxes, box_ind = _draw_boxes(draw, batch, height, width, num_boxes, np.int64)
    extrapolation = draw(f32(-1e6, 1e6) | st.sampled_from([0.0, -1.0, np.nan]))
    return image, boxes, box_ind, crop, extrapolation


WIDTHS = (1, 2, 5, 31, 64)
DEPTHS = (1, 3, 16, 17, 64, 100)


@st.composite
def big_problems(draw, widths=WIDTHS, depths=DEPTHS):
    """Problems big enough that the kernel starts its thread team, with
    depths and widths drawn from `depths` and `widths` (to reach every
    kernel switch).

    Sizes and arrays come from a NumPy generator seeded by Hypothesis:
    drawing 10**5 elements one by one would be slow, and Hypothesis's
    preference for small values would keep most problems below the size at
    which threads start.
    """
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    batch = int(rng.integers(1, 4))
    height = int(rng.choice([1, 2, 3, 17, 40, 64]))
    width = int(rng.choice(widths))
    depth = int(rng.choice(depths))
    num_boxes = int(rng.integers(1, 201))
    crop_h = int(rng.integers(1, 13))
    crop_w = int(rng.integers(1, 13))
    spread = draw(st.sampled_from([0.0, 0.3, 2.0]))
    lo, hi = -spread, 1 + spread
    boxes = rng.uniform(lo, hi, (num_boxes, 4)).astype(np.float32)
    if draw(st.booleans()):  # many boxes on the same pixels: the race TF has
        boxes[: num_boxes // 2] = rng.uniform(0.4, 0.6, 4).astype(np.float32)
    huge = draw(st.booleans())
    if huge:
        huge_coordinates(rng, boxes)
    grads = rng.standard_normal((num_boxes, crop_h, crop_w, depth)).astype(np.float32)
    box_ind = rng.integers(0, batch, num_boxes)
    note(
        f"seed={seed} batch={batch} size=({height}, {width}, {depth}) "
        f"boxes={num_boxes} crop=({crop_h}, {crop_w}) spread={spread} huge={huge}"
    )
    return grads, boxes, box_ind, [batch, height, width, depth]


def huge_coordinates(rng, boxes):
    """Give about a quarter of `boxes`' coordinates a huge finite value (in
    place): samples whose arithmetic overflows, on the threaded, banded and
    tiled paths too."""
    pick = rng.random(boxes.shape) < 0.25
    boxes[pick] = rng.choice(np.array(HUGE, np.float32), int(pick.sum()))


# --------------------------------------------------------------------------
# RoIAlign's problems: NCHW images, boxes [x1, y1, x2, y2] in the input
# image's pixels (the feature map's divided by spatial_scale)

ROI_SCALES = (1.0, 0.5, 0.25, 2.0, 0.3)
ROI_SAMPLING_RATIOS = (-1, 0, 1, 2, 3)


@st.composite
def roi_box(draw, height, width, spatial_scale, fixed_grid):
    """One [x1, y1, x2, y2] box from one of several distributions, placed
    in feature-map pixels and divided by `spatial_scale`; huge coordinates
    only with a `fixed_grid` (the adaptive grid of a huge box would hold
    more samples than a bin may)."""
    kinds = ["inside", "around", "flipped", "degenerate", "grid", "special"]
    kind = draw(st.sampled_from(kinds + (["huge"] if fixed_grid else [])))
    size = (width, height, width, height)
    if kind == "inside":
        coords = [draw(f32(0, n)) for n in size]
    elif kind == "around":  # partly (or wholly) outside the feature map
        coords = [draw(f32(-3, n + 3)) for n in size]
    elif kind == "flipped":  # x2 < x1 and/or y2 < y1
        x = sorted([draw(f32(-1, width + 1)) for _ in range(2)], reverse=True)
        y = sorted(
            [draw(f32(-1, height + 1)) for _ in range(2)], reverse=draw(st.booleans())
        )
        coords = [x[0], y[0], x[1], y[1]]
    elif kind == "degenerate":  # a line or a point
        x1, y1 = draw(f32(-1, width + 1)), draw(f32(-1, height + 1))
        x2 = x1 if draw(st.booleans()) else draw(f32(-1, width + 1))
        y2 = y1 if x2 != x1 or draw(st.booleans()) else draw(f32(-1, height + 1))
        coords = [x1, y1, x2, y2]
    elif kind == "grid":  # whole and half pixels: samples on pixel rows
        coords = [draw(st.integers(-2, 2 * n + 2)) / 2 for n in size]
    elif kind == "special":
        coords = [draw(st.sampled_from(SPECIAL)) for _ in range(4)]
    else:  # finite, but the arithmetic overflows
        return [draw(st.sampled_from(HUGE) | f32(-2, 2)) for _ in range(4)]
    return [c / spatial_scale for c in coords]


@st.composite
def roi_align_problems(
    draw, max_boxes=4, max_output=3, max_size=6, max_channels=3, dtypes=None
):
    """(image, boxes, box_ind, output_size, options): an NCHW image of one
    of `dtypes` (every image dtype but bfloat16 by default; pixels anywhere
    in the dtype's range, infinities and NaN), boxes in the arithmetic
    type (float64 for float64 images, else float32), and the sampling
    options (`ROI_SCALES`, `ROI_SAMPLING_RATIOS`, aligned or not)."""
    dtype = np.dtype(draw(st.sampled_from(dtypes or IMAGE_DTYPES)))
    batch = draw(st.sampled_from([1, 2, 3, 0, 1, 2]))
    channels = draw(st.sampled_from([1, 2, 0, max_channels, 1, 2]))
    height = draw(st.integers(1, max_size))
    width = draw(st.integers(1, max_size))
    options = dict(
        spatial_scale=draw(st.sampled_from(ROI_SCALES)),
        sampling_ratio=draw(st.sampled_from(ROI_SAMPLING_RATIOS)),
        aligned=draw(st.booleans()),
    )
    num_boxes = draw(st.sampled_from([*range(1, max_boxes + 1), 0])) if batch else 0
    fixed = options["sampling_ratio"] > 0
    arithmetic = np.float64 if dtype == np.float64 else np.float32
    boxes = np.array(
        [
            draw(roi_box(height, width, options["spatial_scale"], fixed))
            for _ in range(num_boxes)
        ],
        arithmetic,
    ).reshape(num_boxes, 4)
    box_ind = np.array(
        draw(
            st.lists(
                st.integers(0, max(batch - 1, 0)),
                min_size=num_boxes,
                max_size=num_boxes,
            )
        ),
        draw(st.sampled_from([np.int32, np.int64])),
    )
    output_size = (
        draw(st.integers(1, max_output)),
        draw(st.integers(1, max_output)),
    )
    image = draw(
        hnp.arrays(
            dtype, (batch, channels, height, width), elements=_image_elements(dtype)
        )
    )
    return image, boxes, box_ind, output_size, options


def roi_arithmetic(image):
    """The type RoIAlign computes in for `image`: float64 or float32."""
    return np.float64 if image.dtype == np.float64 else np.float32


def roi_tasks(image, boxes):
    """How few tasks any of RoIAlign's ops divides a problem into, in
    either layout, for `on_team`: boxes (or parts of them) for the forward
    op, the JVP and the boxes gradient, images (or channel tiles of them)
    for the image gradient, so at least one per box or one per image,
    whichever is fewer; None (not known) without boxes, where an op may
    still zero its output on a team."""
    if not (len(boxes) and image.shape[1]):
        return None
    return min(len(boxes), image.shape[0])


@contextlib.contextmanager
def starting_teams():
    """Calls start a thread team however small their work (the serial
    threshold lowered to 0; the bits never depend on it) and however few
    processors OpenMP reports (teams of up to 8 threads).  Yields the
    runtime's parallel module: its ``last_team()`` is the size of the team
    the last call ran (see also `team_of`)."""
    from cropgrad._runtime import parallel

    previous = parallel.use_serial_work(0)
    previous_limit = parallel.use_team_limit(8)
    try:
        yield parallel
    finally:
        parallel.use_serial_work(previous)
        parallel.use_team_limit(previous_limit)


def check_team(team, num_threads, enough=True):
    """`team` (from `team_of`) of a call asked for `num_threads`: never
    larger, and all of them when `enough` (the caller knows the call has
    that many tasks)."""
    assert team <= num_threads, (team, num_threads)
    if enough:
        assert team == num_threads, (team, num_threads)


# How many tasks each op's work divides into (docs/semantics.md, "Order,
# threads and determinism"), for `on_team`.


def grad_image_rows(grads, size):
    """A team for a shallow image gradient (at most 4 channels) gets bands
    of rows: one task per row at most."""
    batch, height, width, depth = size
    if not (grads.shape[0] and batch * height * width * depth):
        return 0  # zeros without a task
    return batch * height


# The image gradient's fixture cases (grad_image.npz) too small for a team
# of 4, in either layout: a one-pixel image is one task, two images of one
# row two; a call without boxes writes zeros and runs no task.
SMALL_GRAD_IMAGE_TASKS = {
    "image_1x1_bilinear": 1,
    "image_1x1_nearest": 1,
    "image_h1_bilinear": 2,
    "image_h1_nearest": 2,
    "no_boxes_bilinear": 0,
    "no_boxes_nearest": 0,
}


def benchmarks_on_path(inside):
    """The source tree's ``benchmarks/`` folder, put on ``sys.path``; the
    calling module is skipped where `inside` (a path in that folder) is not
    beside the tests (the wheels' runs, a copy of tests/ alone)."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    folder = os.path.join(root, "benchmarks")
    if not os.path.exists(os.path.join(folder, inside)):
        pytest.skip("the source tree is not beside the tests", allow_module_level=True)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    return folder


def crop_rows(boxes, crop, depth):
    """The forward op's and the JVP's tasks: the boxes' crop rows."""
    return boxes.shape[0] * crop[0] if depth and boxes.shape[0] else 0


def box_groups(boxes, crop, image_shape):
    """The boxes gradient's tasks: boxes in groups of four, or one each for
    one-row or one-column crops."""
    batch, depth = image_shape[0], image_shape[3]
    n = boxes.shape[0]
    if not (n and batch and depth):
        return 0
    return n if 1 in crop else -(-n // 4)


def on_team(num_threads, tasks, call):
    """call() with teams started however small its work (`starting_teams`);
    checks that it ran on ``min(num_threads, tasks)`` workers: at most the
    calling thread for ``tasks == 0``, at most `num_threads` for ``tasks is
    None`` (not known to the caller).  Returns call()'s result."""
    with starting_teams():
        out, team = team_of(call)
    if tasks == 0:
        assert team <= 1, team
    else:
        check_team(team, num_threads, enough=tasks is not None and tasks >= num_threads)
    return out


def team_of(call):
    """``(call(), team)``: the size of the last team the call ran its tasks
    on (1: the calling thread), or 0 when it ran no tasks at all (then
    ``last_team()`` would still tell of an earlier call)."""
    from cropgrad._runtime import parallel

    runs = parallel.task_runs()
    result = call()
    return result, (parallel.last_team() if parallel.task_runs() != runs else 0)


def assert_same_values(actual, expected, what=""):
    """`assert_same_bits`, except that a NaN only has to be a NaN: where two
    NaNs meet in one addition, which one the sum keeps (its sign and
    payload) is the compiler's choice of operand order, TensorFlow's and
    cropgrad's alike (docs/semantics.md).  Every other element, infinities
    and signed zeros included, must have the same bits."""
    assert actual.dtype == expected.dtype, (what, actual.dtype, expected.dtype)
    assert actual.shape == expected.shape, (what, actual.shape, expected.shape)
    nan = np.isnan(expected)
    moved = np.argwhere(np.isnan(actual) != nan)
    assert not len(moved), f"{what}: NaN at different elements, first {moved[0]}"
    assert_same_bits(np.where(nan, 0, actual), np.where(nan, 0, expected), what)


def run_exported_in_child(tmp_path, step, **inputs):
    """Export jitted `step` (cropgrad.jax's custom calls allowed), serialize
    it into `tmp_path` and call it on `inputs` (by name, in `step`'s order)
    in a fresh interpreter; return its outputs' bytes as hex strings."""
    import jax

    import cropgrad.jax as cgj

    checks = [jax.export.DisabledSafetyCheck.custom_call(t) for t in cgj.FFI_TARGETS]
    exported = jax.export.export(jax.jit(step), disabled_checks=checks)(
        *inputs.values()
    )
    path = tmp_path / "step.jax"
    path.write_bytes(exported.serialize())
    data = tmp_path / "inputs.npz"
    np.savez(data, **inputs)
    args = ", ".join(f"inputs[{name!r}]" for name in inputs)
    return run_child(
        f"""
        import json
        import numpy as np
        import jax
        import cropgrad.jax  # registers the FFI targets

        exported = jax.export.deserialize(open({str(path)!r}, "rb").read())
        inputs = np.load({str(data)!r})
        outs = exported.call({args})
        print(json.dumps([np.asarray(o).tobytes().hex() for o in outs]))
        """
    )


def run_python(*args, timeout, **kwargs):
    """Run a fresh interpreter on `args` (with -P: the current folder off
    sys.path), its output captured as text; `kwargs` go to subprocess.run.
    Return the CompletedProcess."""
    return subprocess.run(
        [sys.executable, "-P", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        **kwargs,
    )


def json_report(proc):
    """The last stdout line of `proc`, a child that must have succeeded (its
    output's ends in the failure's message), as JSON."""
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def run_child(code, env=None, timeout=300):
    """Run `code` in a fresh interpreter that imports this cropgrad (not one
    from the current folder); return its last stdout line as JSON."""
    import cropgrad

    root = os.path.dirname(os.path.dirname(os.path.abspath(cropgrad.__file__)))
    proc = subprocess.run(
        [sys.executable, "-P", "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "PYTHONPATH": root, **(env or {})},
        cwd=os.path.dirname(root) or "/",
    )
    return json_report(proc)


# What every child run on two (host CPU) JAX devices starts with: the
# imports, the check that there are two devices, a mesh of the two,
# `on_each_device(f, *args)`, f on each device's share (axis 0) of every
# arg, and `two_problems`, random inputs with a leading device axis.
TWO_DEVICES_PREAMBLE = """
import json
import numpy as np
import jax, jax.numpy as jnp
from jax.sharding import Mesh, PartitionSpec as P
import cropgrad, cropgrad.jax as cgj

assert jax.device_count() == 2, jax.devices()
mesh = Mesh(np.array(jax.devices()), ("d",))

def on_each_device(f, *args):
    return jax.jit(jax.shard_map(
        f, mesh=mesh, in_specs=P("d"), out_specs=P("d")))(*args)

def two_problems(image_shape, low, high, grads_shape):
    # One problem a device (seed 0): images, boxes (5 each, coordinates
    # from low to high), box_ind into the device's images, grads.
    rng = np.random.default_rng(0)
    images = rng.standard_normal((2, *image_shape)).astype(np.float32)
    boxes = rng.uniform(low, high, (2, 5, 4)).astype(np.float32)
    box_ind = rng.integers(0, 2, (2, 5)).astype(np.int32)
    grads = rng.standard_normal((2, 5, *grads_shape)).astype(np.float32)
    return images, boxes, box_ind, grads
"""


def run_on_two_devices(code):
    """run_child(code) with JAX on two host CPU devices, after
    `TWO_DEVICES_PREAMBLE`."""
    return run_child(
        TWO_DEVICES_PREAMBLE + textwrap.dedent(code),
        env={"XLA_FLAGS": "--xla_force_host_platform_device_count=2"},
    )


def check_boxes_derivatives(f, boxes):
    """JAX's check_grads of f's first derivatives at `boxes`, forward and
    reverse: the ops compute in float32, so a step of 1e-3 (which float32
    rounding does not swamp, for boxes away from whole pixels where a
    sample's slope changes) and tolerances of 1e-2."""
    from jax.test_util import check_grads

    check_grads(
        f, (boxes,), order=1, modes=["fwd", "rev"], eps=1e-3, atol=1e-2, rtol=1e-2
    )


def assert_compiled_step_gives_eager_bits(op, *inputs):
    """op(*inputs) and the gradients in every input of the sum of its
    squares: the same bits from torch.compile(fullgraph=True) as eager."""
    import torch

    def step(*args):
        out = op(*args)
        return out, (out * out).sum()

    compiled = torch.compile(step, fullgraph=True)
    results = []
    for fn in (step, compiled):
        args = [x.clone().requires_grad_() for x in inputs]
        out, loss = fn(*args)
        loss.backward()
        results.append((out.detach(), *(x.grad for x in args)))
    for eager, traced in zip(*results):
        assert torch.equal(eager, traced)


def assert_opcheck_passes(name, args):
    """torch.library.opcheck of torch.ops.cropgrad.<name> on `args`."""
    import torch

    op = getattr(torch.ops.cropgrad, name).default
    result = torch.library.opcheck(op, args)
    assert set(result.values()) == {"SUCCESS"}, result
