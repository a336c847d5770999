import os

import numpy as np
import pytest

DATA = os.path.join(os.path.dirname(__file__), "data")


@pytest.fixture(
    params=[np.float32, np.float64, np.float16], ids=lambda t: np.dtype(t).name
)
def out_dtype(request):
    """Every output dtype of the image gradient."""
    return np.dtype(request.param)


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
