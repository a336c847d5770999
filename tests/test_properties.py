"""Property-based tests: random problems against the independent reference.

For random shapes (1-pixel images, crops of 1, depth 0, no boxes), boxes from
several distributions (inside, partly outside, flipped, degenerate, huge but
finite), pixels of every dtype (float ones anywhere in their range, infinite
and NaN too), both methods, every output dtype and 1 to 4 threads (on teams
that start however small the work: starting_teams, each team checked):

- the image gradient equals the reference's serial float32/float64 sum bit
  for bit, and the float64 reference within a float32 rounding bound derived
  below;
- the forward op, the boxes gradient and the boxes JVP equal the
  reference's float32 arithmetic bit for bit (a NaN only has to be a NaN:
  which of two NaNs an addition keeps is the compiler's choice);
- every operation gives the same bits for every thread count, NaN bits
  included;
- RoIAlign's four ops (NCHW images of every dtype but bfloat16, boxes
  inside, around, flipped, degenerate, on whole and half pixels and huge,
  every sampling option, output dtypes) equal the reference's exact
  arithmetic (cropgrad/_reference/roi_align) bit for bit, a NaN only
  having to be a NaN, and one thread's bits on teams of 1 to 4;
- grid_sample's forward op, image gradient and grid gradient (NCHW images
  of every dtype but bfloat16, grids inside, around and far outside, every
  mode, padding mode and alignment) equal the reference's exact arithmetic
  (cropgrad/_reference/grid_sample) likewise, and the grid JVP along unit
  tangents is the reference's grid gradient.

The number of examples is fixed per profile so CI time is bounded:
``CROPGRAD_HYPOTHESIS_PROFILE=ci`` (the default: derandomized, so every run
tries the same examples), ``random`` (new examples each run; a failure
prints the ``@reproduce_failure`` blob and the seed), ``thorough`` (20
times the examples, random) or ``quick`` (a twentieth, for runs under
valgrind).
"""

import numpy as np
import pytest
from _helpers import (
    EXAMPLE_SETTINGS,
    HUGE,
    IMAGE_DTYPES,
    METHODS,
    OUT_DTYPES,
    PROFILE,
    SCALE,
    TINY32,
    U32,
    U64,
    _image_elements,
    as_image_dtype,
    assert_same_bits,
    assert_same_values,
    big_problems,
    box_groups,
    crop_rows,
    examples,
    f32,
    forward_problems,
    grad_image_problems,
    grad_image_rows,
    grads_elements,
    huge_coordinates,
    on_team,
    roi_align_problems,
    roi_arithmetic,
    roi_tasks,
)
from hypothesis import HealthCheck, given, note
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import cropgrad
from cropgrad import _reference as reference
from cropgrad._kernels.grid_sample import kernels as grid_kernels
from cropgrad._reference import grid_sample as grid_reference
from cropgrad._reference import roi_align as roi_reference

# Thousands of examples: minutes in all (CI runs them; -m "not slow" skips).
pytestmark = pytest.mark.slow

# --------------------------------------------------------------------------
# The rounding bound of the image gradient
#
# Bilinear: each term is fl(fl(1 - x_lerp) * fl(fl(1 - y_lerp) * g)) (or with
# the lerps themselves, which are exact): at most 4 roundings, relative error
# <= (1 + u)**4 - 1 < 4.01 u, plus an absolute 2**-149 per rounding that
# underflows.  Nearest: the term is g itself.  A float32 sum of n terms adds at
# most (n - 1) u * sum(|term|) (the classic gamma_{n-1} bound); a float64 sum
# at most (n - 1) * 2**-53 * sum(|term|).  sum(|term|) per element is the
# reference applied to |grads|, since every weight is >= 0.  float16 output:
# the float32 result is rounded once more, 2**-11 relative or 2**-25 absolute.


def rounding_bound(out_dtype, method, grads, boxes, box_ind, size):
    n = max(4 * grads.shape[0] * grads.shape[1] * grads.shape[2], 1)
    product = 4.01 * U32 if method == "bilinear" else 0.0
    sum_u = U64 if out_dtype == np.float64 else U32
    abs_terms = reference.grad_image(np.abs(grads), boxes, box_ind, size, method)
    bound = (product + n * sum_u) * abs_terms + 4 * n * TINY32
    return bound


def assert_within_rounding(out, grads, boxes, box_ind, size, method):
    exact = reference.grad_image(grads, boxes, box_ind, size, method)
    bound = rounding_bound(out.dtype, method, grads, boxes, box_ind, size)
    if out.dtype == np.float16:
        bound = bound + 2.0**-11 * (np.abs(exact) + bound) + 2.0**-25
    err = np.abs(out.astype(np.float64) - exact)
    bad = ~(err <= bound)
    if bad.any():
        i = tuple(np.argwhere(bad)[0])
        raise AssertionError(
            f"{int(bad.sum())} elements beyond the rounding bound; first at {i}: "
            f"got {out[i]!r}, float64 reference {exact[i]!r}, bound {bound[i]!r}"
        )


# --------------------------------------------------------------------------
# Image gradient
#
# Every call below runs on a team however small its work (on_team), which
# is checked against the tasks the work divides into.


def on_team_as_alone(num_threads, tasks, call):
    """call(num_threads) on a team (checked against `tasks`), and the same
    bits on one thread; returns the team's result."""
    out = on_team(num_threads, tasks, lambda: call(num_threads))
    assert_same_bits(out, call(1), "one thread")
    return out


@examples(1500)
@given(
    problem=grad_image_problems(),
    method=st.sampled_from(METHODS),
    num_threads=st.integers(1, 4),
    use_out=st.booleans(),
)
def test_grad_image_matches_reference(problem, method, num_threads, use_out):
    grads, boxes, box_ind, size = problem
    note(f"boxes={boxes.tolist()} box_ind={box_ind.tolist()} size={size}")
    with np.errstate(all="ignore"):
        exact32 = reference.grad_image(
            grads, boxes, box_ind, size, method, dtype=np.float32, exact=True
        ).astype(np.float32)
        exact64 = reference.grad_image(
            grads, boxes, box_ind, size, method, dtype=np.float64, exact=True
        )
    for dtype in OUT_DTYPES:
        kwargs = dict(num_threads=num_threads)
        if use_out:
            kwargs["out"] = np.full(size, np.nan, dtype)
        out = on_team(
            num_threads,
            grad_image_rows(grads, size),
            lambda: cropgrad.crop_and_resize_grad_image(
                grads, boxes, box_ind, size, dtype, method, **kwargs
            ),
        )
        assert out.shape == tuple(size) and out.dtype == dtype
        if use_out:
            assert out is kwargs["out"]
        # Bit for bit: the serial sum in float32 or float64; float16 is the
        # float32 sum rounded once.
        expected = {
            np.float16: exact32.astype(np.float16),
            np.float32: exact32,
            np.float64: exact64,
        }[dtype]
        assert_same_bits(
            out, expected, f"{np.dtype(dtype).name}, {num_threads} threads"
        )
        assert_within_rounding(out, grads, boxes, box_ind, size, method)


@examples(300)
@given(
    problem=grad_image_problems(
        max_boxes=3,
        max_crop=3,
        max_size=4,
        max_depth=2,
        grads_elements=st.floats(width=32)
        | st.sampled_from([np.nan, np.inf, -np.inf, 3e38, -3e38, 1e-45]),
    ),
    method=st.sampled_from(METHODS),
    num_threads=st.integers(1, 4),
)
def test_grad_image_nonfinite_gradients_follow_ieee(problem, method, num_threads):
    # NaN, inf and overflowing gradients are not errors: IEEE arithmetic in
    # the serial order, as TensorFlow.
    grads, boxes, box_ind, size = problem
    with np.errstate(all="ignore"):
        expected = reference.grad_image(
            grads, boxes, box_ind, size, method, dtype=np.float32, exact=True
        ).astype(np.float32)
    # NaN bits included, the same on one thread.
    out = on_team_as_alone(
        num_threads,
        grad_image_rows(grads, size),
        lambda n: cropgrad.crop_and_resize_grad_image(
            grads, boxes, box_ind, size, np.float32, method, num_threads=n
        ),
    )
    assert_same_values(out, expected)


@examples(150)
@given(
    problem=big_problems(),
    method=st.sampled_from(METHODS),
    dtype=st.sampled_from(OUT_DTYPES),
    threads=st.lists(st.integers(2, 4), min_size=1, max_size=3, unique=True),
)
def test_grad_image_same_bits_for_every_thread_count(problem, method, dtype, threads):
    grads, boxes, box_ind, size = problem
    one = cropgrad.crop_and_resize_grad_image(
        grads, boxes, box_ind, size, dtype, method, num_threads=1
    )
    for n in threads:
        # Bands of rows; deep pixels of few rows are split by channels too.
        many = on_team(
            n,
            grad_image_rows(grads, size) if size[3] <= 4 else None,
            lambda n=n: cropgrad.crop_and_resize_grad_image(
                grads, boxes, box_ind, size, dtype, method, num_threads=n
            ),
        )
        assert_same_bits(many, one, f"{n} threads")
    if dtype == np.float32 and grads.shape[0] * grads.shape[1] * grads.shape[2] <= 1500:
        expected = reference.grad_image(
            grads, boxes, box_ind, size, method, dtype=np.float32, exact=True
        ).astype(np.float32)
        assert_same_bits(one, expected, "reference")


# --------------------------------------------------------------------------
# Forward op, boxes gradient and boxes JVP: the reference's bits


@examples(1500)
@given(
    problem=forward_problems(),
    method=st.sampled_from(METHODS),
    num_threads=st.integers(1, 4),
    use_out=st.booleans(),
)
def test_forward_matches_reference(problem, method, num_threads, use_out):
    image, boxes, box_ind, crop, extrapolation = problem
    note(f"boxes={boxes.tolist()} crop={crop} extrapolation={extrapolation}")
    kwargs = dict(num_threads=num_threads)
    if use_out:
        kwargs["out"] = np.full(
            (boxes.shape[0], *crop, image.shape[3]), 123.0, np.float32
        )
    out = on_team(
        num_threads,
        crop_rows(boxes, crop, image.shape[3]),
        lambda: cropgrad.crop_and_resize(
            image, boxes, box_ind, crop, method, extrapolation, **kwargs
        ),
    )
    assert out.dtype == np.float32
    assert out.shape == (boxes.shape[0], *crop, image.shape[3])
    with np.errstate(all="ignore"):
        expected = reference.crop_and_resize(
            image, boxes, box_ind, crop, method, extrapolation, exact=True
        )
    assert_same_values(out, expected)
    one = cropgrad.crop_and_resize(
        image, boxes, box_ind, crop, method, extrapolation, num_threads=1
    )
    assert_same_bits(out, one, "one thread")


@examples(400)
@given(
    problem=forward_problems(),
    num_threads=st.integers(1, 4),
    data=st.data(),
)
def test_boxes_gradient_matches_reference(problem, num_threads, data):
    image, boxes, box_ind, crop, _ = problem
    grads = data.draw(
        hnp.arrays(
            np.float32,
            (boxes.shape[0], *crop, image.shape[3]),
            elements=grads_elements(),
        )
    )
    out = on_team_as_alone(
        num_threads,
        box_groups(boxes, crop, image.shape),
        lambda n: cropgrad.crop_and_resize_grad_boxes(
            grads, image, boxes, box_ind, num_threads=n
        ),
    )
    assert out.shape == (boxes.shape[0], 4) and out.dtype == np.float32
    with np.errstate(all="ignore"):
        expected = reference.grad_boxes(grads, image, boxes, box_ind, exact=True)
    assert_same_values(out, expected)


@examples(400)
@given(
    problem=forward_problems(),
    num_threads=st.integers(1, 4),
    data=st.data(),
)
def test_boxes_jvp_matches_reference(problem, num_threads, data):
    image, boxes, box_ind, crop, _ = problem
    tangent = data.draw(hnp.arrays(np.float32, boxes.shape, elements=grads_elements()))
    out = on_team_as_alone(
        num_threads,
        crop_rows(boxes, crop, image.shape[3]),
        lambda n: cropgrad.crop_and_resize_jvp_boxes(
            image, boxes, box_ind, tangent, crop, num_threads=n
        ),
    )
    assert out.shape == (boxes.shape[0], *crop, image.shape[3])
    with np.errstate(all="ignore"):
        expected = reference.jvp_boxes(image, boxes, box_ind, tangent, crop, exact=True)
    assert_same_values(out, expected)


@st.composite
def big_forward_problems(draw):
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    dtype = draw(st.sampled_from(IMAGE_DTYPES))
    batch = int(rng.integers(1, 4))
    height, width = (int(v) for v in rng.integers(1, 51, 2))
    depth = int(rng.choice([1, 3, 16, 64]))
    num_boxes = int(rng.integers(1, 101))
    crop = [int(v) for v in rng.integers(1, 17, 2)]
    image = as_image_dtype(
        rng.standard_normal((batch, height, width, depth)) * 50, dtype
    )
    boxes = rng.uniform(-0.3, 1.3, (num_boxes, 4)).astype(np.float32)
    huge = draw(st.booleans())
    if huge:
        huge_coordinates(rng, boxes)
    box_ind = rng.integers(0, batch, num_boxes)
    grads = rng.standard_normal((num_boxes, *crop, depth)).astype(np.float32)
    tangent = rng.standard_normal((num_boxes, 4)).astype(np.float32)
    note(
        f"seed={seed} dtype={np.dtype(dtype).name} image={image.shape} "
        f"boxes={num_boxes} crop={crop} huge={huge}"
    )
    return image, boxes, box_ind, crop, grads, tangent


@examples(100)
@given(
    problem=big_forward_problems(),
    method=st.sampled_from(METHODS),
    threads=st.lists(st.integers(2, 4), min_size=1, max_size=3, unique=True),
)
def test_forward_and_boxes_gradient_same_bits_for_every_thread_count(
    problem, method, threads
):
    image, boxes, box_ind, crop, grads, tangent = problem
    one = cropgrad.crop_and_resize(image, boxes, box_ind, crop, method, num_threads=1)
    gb_one = cropgrad.crop_and_resize_grad_boxes(
        grads, image, boxes, box_ind, num_threads=1
    )
    jvp_one = cropgrad.crop_and_resize_jvp_boxes(
        image, boxes, box_ind, tangent, crop, num_threads=1
    )
    for n in threads:
        rows = crop_rows(boxes, crop, image.shape[3])
        assert_same_bits(
            on_team(
                n,
                rows,
                lambda n=n: cropgrad.crop_and_resize(
                    image, boxes, box_ind, crop, method, num_threads=n
                ),
            ),
            one,
            f"forward, {n}",
        )
        assert_same_bits(
            on_team(
                n,
                box_groups(boxes, crop, image.shape),
                lambda n=n: cropgrad.crop_and_resize_grad_boxes(
                    grads, image, boxes, box_ind, num_threads=n
                ),
            ),
            gb_one,
            f"boxes gradient, {n}",
        )
        assert_same_bits(
            on_team(
                n,
                rows,
                lambda n=n: cropgrad.crop_and_resize_jvp_boxes(
                    image, boxes, box_ind, tangent, crop, num_threads=n
                ),
            ),
            jvp_one,
            f"boxes JVP, {n}",
        )
    # The reference's bits where it is quick enough.
    if boxes.shape[0] * crop[0] * crop[1] <= 1500:
        expected = reference.crop_and_resize(
            image, boxes, box_ind, crop, method, exact=True
        )
        assert_same_bits(one, expected, "forward, reference")
        expected = reference.grad_boxes(grads, image, boxes, box_ind, exact=True)
        assert_same_bits(gb_one, expected, "boxes gradient, reference")


# --------------------------------------------------------------------------
# RoIAlign: the reference's exact arithmetic, bit for bit
#
# Every call runs on a team however small its work, checked against the
# fewest tasks any of its ops makes of the problem (roi_tasks); NaN only
# has to be NaN against the reference (which of two NaNs an addition keeps
# is the compiler's choice), every bit against one thread.


def roi_data(data, problem):
    """grads (in the arithmetic type: the image gradient's is the grads'
    dtype) and a boxes tangent for `problem`: moderate values, any float32,
    infinities and NaN."""
    image, boxes, _, output_size, _ = problem
    arithmetic = roi_arithmetic(image)
    shape = (len(boxes), image.shape[1], *output_size)
    grads = data.draw(hnp.arrays(arithmetic, shape, elements=grads_elements()))
    tangent = data.draw(hnp.arrays(arithmetic, boxes.shape, elements=grads_elements()))
    return grads, tangent


def roi_on_team(num_threads, problem, call):
    """call(num_threads) on a team (checked), and the same bits on one
    thread; returns the team's result."""
    image, boxes = problem[:2]
    return on_team_as_alone(num_threads, roi_tasks(image, boxes), call)


@examples(250)
@given(
    problem=roi_align_problems(),
    num_threads=st.integers(1, 4),
    out_dtype=st.sampled_from([None, np.float16, np.float32, np.float64]),
)
def test_roi_align_matches_reference(problem, num_threads, out_dtype):
    image, boxes, box_ind, output_size, options = problem
    note(f"boxes={boxes.tolist()} box_ind={box_ind.tolist()} {options}")
    if out_dtype == np.float16 and image.dtype == np.float64:
        out_dtype = None  # float16 results from float32 arithmetic only
    out = roi_on_team(
        num_threads,
        problem,
        lambda n: cropgrad.roi_align(
            image,
            boxes,
            box_ind,
            output_size,
            dtype=out_dtype,
            num_threads=n,
            **options,
        ),
    )
    # The image's floating dtype by default, float32 for integers; the
    # arithmetic type's result rounded once.
    default = image.dtype if image.dtype.kind == "f" else np.float32
    assert out.dtype == (default if out_dtype is None else out_dtype)
    assert out.shape == (len(boxes), image.shape[1], *output_size)
    expected = roi_reference.roi_align(image, boxes, box_ind, output_size, **options)
    with np.errstate(all="ignore"):
        assert_same_values(out, expected.astype(out.dtype))


@examples(250)
@given(
    problem=roi_align_problems(),
    num_threads=st.integers(1, 4),
    out_dtype=st.sampled_from([None, np.float16, np.float32, np.float64]),
    data=st.data(),
)
def test_roi_align_grad_image_matches_reference(problem, num_threads, out_dtype, data):
    image, boxes, box_ind, output_size, options = problem
    grads, _ = roi_data(data, problem)
    if out_dtype == np.float16 and grads.dtype == np.float64:
        out_dtype = None
    out = roi_on_team(
        num_threads,
        problem,
        lambda n: cropgrad.roi_align_grad_image(
            grads,
            boxes,
            box_ind,
            image.shape,
            dtype=out_dtype,
            num_threads=n,
            **options,
        ),
    )
    assert out.dtype == (grads.dtype if out_dtype is None else out_dtype)
    assert out.shape == image.shape
    expected = roi_reference.roi_align_grad_image(
        grads, boxes, box_ind, image.shape, **options
    )
    with np.errstate(all="ignore"):
        assert_same_values(out, expected.astype(out.dtype))


@examples(200)
@given(problem=roi_align_problems(), num_threads=st.integers(1, 4), data=st.data())
def test_roi_align_grad_boxes_matches_reference(problem, num_threads, data):
    image, boxes, box_ind, _, options = problem
    grads, _ = roi_data(data, problem)
    out = roi_on_team(
        num_threads,
        problem,
        lambda n: cropgrad.roi_align_grad_boxes(
            grads, image, boxes, box_ind, num_threads=n, **options
        ),
    )
    assert out.shape == boxes.shape and out.dtype == roi_arithmetic(image)
    expected = roi_reference.roi_align_grad_boxes(
        grads, image, boxes, box_ind, exact=True, **options
    )
    assert_same_values(out, expected)


@examples(200)
@given(problem=roi_align_problems(), num_threads=st.integers(1, 4), data=st.data())
def test_roi_align_jvp_boxes_matches_reference(problem, num_threads, data):
    image, boxes, box_ind, output_size, options = problem
    _, tangent = roi_data(data, problem)
    out = roi_on_team(
        num_threads,
        problem,
        lambda n: cropgrad.roi_align_jvp_boxes(
            image, boxes, box_ind, tangent, output_size, num_threads=n, **options
        ),
    )
    # In the forward op's dtype: the arithmetic type's result rounded once.
    assert out.dtype == (image.dtype if image.dtype.kind == "f" else np.float32)
    expected = roi_reference.roi_align_jvp_boxes(
        image, boxes, box_ind, tangent, output_size, exact=True, **options
    )
    with np.errstate(all="ignore"):
        assert_same_values(out, expected.astype(out.dtype))


# --------------------------------------------------------------------------
# grid_sample: the reference's exact arithmetic (PyTorch's), bit for bit
#
# NCHW images of every dtype but bfloat16 (pixels anywhere in their range,
# infinities and NaN), grids inside, around and far outside the image (on
# pixel centres and edges, huge but finite), every mode, padding mode and
# alignment; every call on a team however small its work (checked against
# the rows of points, or the image gradient's bands of planes), and one thread's
# bits.  (The fixtures, the layouts and the derivatives:
# test_grid_sample.py.)


def _grid_elements(overflowing):
    """Normalised coordinates: inside and around the image, on its edges
    and centre, huge; `overflowing`: with values whose unnormalised
    coordinate overflows to infinity (the reference's bilinear backward
    does not model their reflection: test_grid_sample.py checks them)."""
    huge = (
        st.sampled_from(HUGE)
        | st.floats(width=32, allow_nan=False, allow_infinity=False)
        if overflowing
        else st.sampled_from([1e30, -1e30, 1e20, -1e20]) | f32(-1e30, 1e30)
    )
    return f32(-1.5, 1.5) | st.sampled_from([-1.0, 1.0, 0.0, -0.0, 0.5]) | huge


@st.composite
def grid_problems(draw):
    """(image, grid, grads, tangent, options): grads and tangent in the
    arithmetic type, moderate values, any float32, infinities and NaN."""
    dtype = draw(st.sampled_from(IMAGE_DTYPES))
    n, c = draw(st.integers(1, 3)), draw(st.sampled_from([1, 2, 3, 5]))
    h, w = draw(st.integers(1, 6)), draw(st.integers(1, 6))
    ho, wo = draw(st.integers(1, 4)), draw(st.integers(1, 5))
    image = draw(hnp.arrays(dtype, (n, c, h, w), elements=_image_elements(dtype)))
    arithmetic = np.float64 if image.dtype == np.float64 else np.float32
    options = dict(
        mode=draw(st.sampled_from(grid_reference.MODES)),
        padding_mode=draw(st.sampled_from(grid_reference.PADDING_MODES)),
        align_corners=draw(st.booleans()),
    )
    overflowing = (options["mode"], options["padding_mode"]) != (
        "bilinear",
        "reflection",
    )
    elements = _grid_elements(overflowing)
    grid = draw(hnp.arrays(arithmetic, (n, ho, wo, 2), elements=elements))
    grads = draw(hnp.arrays(arithmetic, (n, c, ho, wo), elements=grads_elements()))
    tangent = draw(hnp.arrays(arithmetic, grid.shape, elements=grads_elements()))
    return image, grid, grads, tangent, options


# The modes grid sampling's SIMD clone has: the forward op and the image
# gradient in all three, the grid gradient in bilinear and bicubic (nearest's
# is zero).
GRID_SIMD_MODES = {
    "forward": ("bilinear", "nearest", "bicubic"),
    "grad_grid": ("bilinear", "bicubic"),
    "grad_image": ("bilinear", "nearest", "bicubic"),
}


def _grid_simd(grid, options, op):
    """Whether grid sampling's SIMD clone takes op `op`'s problem: float32
    sampling in one of its modes, on a CPU that has the clone."""
    on = grid_kernels.use_simd(True)
    grid_kernels.use_simd(on)
    return on and grid.dtype == np.float32 and options["mode"] in GRID_SIMD_MODES[op]


def grid_point_tasks(grid, options, op="forward"):
    """The tasks of the forward op or the grid gradient: a row of output
    points each, or in the SIMD clone spans of 256 points of an image."""
    n, ho, wo = grid.shape[:3]
    return n * -(-ho * wo // 256) if _grid_simd(grid, options, op) else n * ho


def grid_scatter_tasks(grid, image_shape, num_threads, options):
    """The last tasks of an image gradient: the last image's planes, cut
    into bands of rows when there are fewer channels than threads; in the
    SIMD clone, the images, cut into bands when they are fewer than the
    threads."""
    n, c, h, _ = image_shape
    parts = n if _grid_simd(grid, options, "grad_image") else c
    return parts * min(-(-num_threads // parts), h)


def _ref(options):
    return options["mode"], options["padding_mode"], options["align_corners"]


@examples(60)
@given(problem=grid_problems(), num_threads=st.integers(1, 4))
def test_grid_sample_matches_reference(problem, num_threads):
    image, grid, _, _, options = problem
    out = on_team_as_alone(
        num_threads,
        grid_point_tasks(grid, options),
        lambda t: cropgrad.grid_sample(image, grid, num_threads=t, **options),
    )
    default = image.dtype if image.dtype.kind == "f" else np.float32
    assert out.dtype == default
    with np.errstate(all="ignore"):
        expected = grid_reference.grid_sample(image, grid, *_ref(options))
        assert_same_values(out, expected.astype(out.dtype))


@examples(60)
@given(
    problem=grid_problems(),
    num_threads=st.integers(1, 4),
    out_dtype=st.sampled_from([None, np.float16, np.float32, np.float64]),
)
def test_grid_sample_grad_image_matches_reference(problem, num_threads, out_dtype):
    image, grid, grads, _, options = problem
    if out_dtype == np.float16 and grads.dtype == np.float64:
        out_dtype = None  # float16 results from float32 arithmetic only
    out = on_team_as_alone(
        num_threads,
        grid_scatter_tasks(grid, image.shape, num_threads, options),
        lambda t: cropgrad.grid_sample_grad_image(
            grads, grid, image.shape, dtype=out_dtype, num_threads=t, **options
        ),
    )
    assert out.dtype == (grads.dtype if out_dtype is None else out_dtype)
    with np.errstate(all="ignore"):
        expected = grid_reference.grid_sample_grad_image(
            grads, grid, image.shape, *_ref(options)
        )
        assert_same_values(out, expected.astype(out.dtype))


@examples(60)
@given(problem=grid_problems(), num_threads=st.integers(1, 4))
def test_grid_sample_grad_grid_matches_reference(problem, num_threads):
    image, grid, grads, _, options = problem
    out = on_team_as_alone(
        num_threads,
        grid_point_tasks(grid, options, "grad_grid"),
        lambda t: cropgrad.grid_sample_grad_grid(
            grads, image, grid, num_threads=t, **options
        ),
    )
    assert out.dtype == grads.dtype and out.shape == grid.shape
    with np.errstate(all="ignore"):
        expected = grid_reference.grid_sample_grad_grid(
            grads, image, grid, *_ref(options)
        )
    assert_same_values(out, expected)


@examples(60)
@given(
    problem=grid_problems(), num_threads=st.integers(1, 4), axis=st.sampled_from([0, 1])
)
def test_grid_sample_jvp_grid_of_unit_tangents_is_the_grid_gradient(
    problem, num_threads, axis
):
    # One channel: the JVP along x (or y) at every point is the reference's
    # grid gradient of gradients of ones, that point's x (or y) slope, the
    # same product rounded once (equal values: the gradient's sum starts
    # from +0).  Any other tangent: one thread's bits on teams.
    image, grid, _, tangent, options = problem
    n, ho = grid.shape[:2]
    out = on_team_as_alone(
        num_threads,
        n * ho,
        lambda t: cropgrad.grid_sample_jvp_grid(
            image, grid, tangent, num_threads=t, **options
        ),
    )
    default = image.dtype if image.dtype.kind == "f" else np.float32
    assert out.dtype == default and out.shape == image.shape[:2] + grid.shape[1:3]
    unit = np.zeros_like(grid)
    unit[..., axis] = 1
    plane = image[:, :1]
    jvp = cropgrad.grid_sample_jvp_grid(plane, grid, unit, dtype=grid.dtype, **options)
    ones = np.ones((n, 1, *grid.shape[1:3]), grid.dtype)
    with np.errstate(all="ignore"):
        expected = grid_reference.grid_sample_grad_grid(
            ones, plane.astype(grid.dtype), grid, *_ref(options)
        )
    # Where the other axis's slope is not finite, its zero tangent makes
    # the JVP NaN (0 * inf), which the gradient does not add.
    other = np.isfinite(expected[..., 1 - axis])
    np.testing.assert_array_equal(jvp[:, 0][other], expected[..., axis][other])
    assert np.isnan(jvp[:, 0][~other]).all()


# --------------------------------------------------------------------------
# The examples CI runs


def _made_by(chosen, made):
    """Whether a test's settings are `made` (examples(n)'s): the same object,
    or, for a test pytest parametrizes, the copy Hypothesis makes of it
    with one health check more suppressed (differing_executors)."""
    if chosen is made:
        return True
    more = set(chosen.suppress_health_check) - set(made.suppress_health_check)
    return more <= {HealthCheck.differing_executors} and all(
        getattr(chosen, key) == getattr(made, key)
        for key in ("max_examples", "derandomize", "database", "deadline", "phases")
    )


def test_profile_is_bounded(request):
    # CI must not silently run an unbounded or changing set of examples:
    # every property test of this session (of every module collected) has
    # its example count from examples() (at most 1500 here, times the
    # profile's scale), and the ci profile tries the same examples on every
    # run, without a database that could add old failures.
    tests = {
        item.nodeid: item.obj
        for item in request.session.items
        if getattr(getattr(item, "obj", None), "is_hypothesis_test", False)
    }
    own = {
        name: test
        for name, test in vars(request.module).items()
        if getattr(test, "is_hypothesis_test", False)
    }
    assert len(own) >= 7, sorted(own)
    for name, test in {**tests, **own}.items():
        chosen = test._hypothesis_internal_use_settings
        assert any(_made_by(chosen, made) for made in EXAMPLE_SETTINGS), (
            f"{name}: settings not made by examples(n)"
        )
        assert chosen.max_examples <= max(int(1500 * SCALE), 5), name
        assert chosen.deadline is None, name
        if PROFILE == "ci":
            assert chosen.derandomize and chosen.database is None, name
