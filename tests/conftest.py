"""Fixtures of the test suite; its helpers are in tests/_helpers.py."""

import numpy as np
import pytest


@pytest.fixture(
    params=[np.float32, np.float64, np.float16], ids=lambda t: np.dtype(t).name
)
def out_dtype(request):
    """Every output dtype of the image gradient."""
    return np.dtype(request.param)
