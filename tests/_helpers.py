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
import os

import numpy as np
from hypothesis import HealthCheck, note, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

DATA = os.path.join(os.path.dirname(__file__), "data")


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


def examples(n):
    """Settings of the active profile with `n` examples (times its scale)."""
    return settings(settings.get_profile(PROFILE), max_examples=max(int(n * SCALE), 5))


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


@st.composite
def grad_image_problems(
    draw, max_boxes=5, max_crop=5, max_size=7, max_depth=3, grads_elements=None
):
    # Empty problems (no batch, no depth, no boxes) about one time in six.
    batch = draw(st.sampled_from([1, 2, 3, 0, 1, 2]))
    height = draw(st.integers(1, max_size))
    width = draw(st.integers(1, max_size))
    depth = draw(st.sampled_from([1, 2, 0, max_depth, 1, 2]))
    num_boxes = draw(st.sampled_from([*range(1, max_boxes + 1), 0])) if batch else 0
    crop_h = draw(st.integers(1, max_crop))
    crop_w = draw(st.integers(1, max_crop))
    boxes = np.array(
        [draw(box(height, width)) for _ in range(num_boxes)], dtype=np.float32
    ).reshape(num_boxes, 4)
    box_ind = np.array(
        draw(
            st.lists(
                st.integers(0, max(batch - 1, 0)),
                min_size=num_boxes,
                max_size=num_boxes,
            )
        ),
        dtype=draw(st.sampled_from([np.int32, np.int64])),
    )
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


def _image_elements(dtype):
    dtype = np.dtype(dtype)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return st.integers(int(info.min), int(info.max))
    if dtype == np.float16:
        return st.floats(-1000, 1000, width=16)
    return st.floats(-1e6, 1e6, width=32)


@st.composite
def forward_problems(draw, max_boxes=5, max_crop=5, max_size=7, max_depth=3):
    dtype = draw(st.sampled_from(IMAGE_DTYPES))
    batch = draw(st.sampled_from([1, 2, 3, 0, 1, 2]))
    height = draw(st.integers(1, max_size))
    width = draw(st.integers(1, max_size))
    depth = draw(st.sampled_from([1, 2, 0, max_depth, 1, 2]))
    num_boxes = draw(st.sampled_from([*range(1, max_boxes + 1), 0])) if batch else 0
    crop = [draw(st.integers(1, max_crop)), draw(st.integers(1, max_crop))]
    image = draw(
        hnp.arrays(
            dtype, (batch, height, width, depth), elements=_image_elements(dtype)
        )
    )
    boxes = np.array(
        [draw(box(height, width)) for _ in range(num_boxes)], dtype=np.float32
    ).reshape(num_boxes, 4)
    box_ind = np.array(
        draw(
            st.lists(
                st.integers(0, max(batch - 1, 0)),
                min_size=num_boxes,
                max_size=num_boxes,
            )
        ),
        np.int64,
    )
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
    grads = rng.standard_normal((num_boxes, crop_h, crop_w, depth)).astype(np.float32)
    box_ind = rng.integers(0, batch, num_boxes)
    note(
        f"seed={seed} batch={batch} size=({height}, {width}, {depth}) "
        f"boxes={num_boxes} crop=({crop_h}, {crop_w}) spread={spread}"
    )
    return grads, boxes, box_ind, [batch, height, width, depth]


@contextlib.contextmanager
def starting_teams():
    """Calls start a thread team however small their work (the serial
    threshold lowered to 0; the bits never depend on it).  Yields the
    runtime's parallel module: its ``last_team()`` is the size of the team
    the last call ran."""
    from cropgrad._runtime import parallel

    previous = parallel.use_serial_work(0)
    try:
        yield parallel
    finally:
        parallel.use_serial_work(previous)
