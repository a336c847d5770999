"""The examples in the docstrings and the README run and say what they show."""

import doctest
import os
import re

import pytest

import cropgrad
import cropgrad._api.crop_and_resize
import cropgrad._ops.model
import cropgrad._reference
import cropgrad.capi
import cropgrad.raw_ops

README = os.path.join(os.path.dirname(__file__), os.pardir, "README.md")


@pytest.mark.parametrize(
    "module",
    [
        cropgrad,
        cropgrad._api.crop_and_resize,
        cropgrad._ops.model,
        cropgrad.raw_ops,
        cropgrad._reference,
        cropgrad.capi,
    ],
    ids=lambda m: m.__name__,
)
def test_docstring_examples(module):
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0
    assert result.failed == 0


def test_readme_usage_example_runs():
    with open(README, encoding="utf-8") as f:
        text = f.read()
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    namespace = {}
    exec(blocks[0], namespace)  # the forward/backward example
    assert namespace["crops"].shape == (2, 14, 14, 16)
    assert namespace["d_image"].shape == namespace["image"].shape
    assert namespace["d_boxes"].shape == (2, 4)


def test_readme_roi_align_example_runs():
    with open(README, encoding="utf-8") as f:
        blocks = re.findall(r"```python\n(.*?)```", f.read(), flags=re.S)
    (block,) = [b for b in blocks if "cropgrad.roi_align(" in b]
    namespace = {}
    exec(block, namespace)
    assert namespace["pooled"].shape == (2, 16, 7, 7)
    assert namespace["d_features"].shape == namespace["features"].shape
    assert namespace["d_boxes"].shape == (2, 4)
    # Both boxes lie inside the map: each bin's sample weights add up to 1,
    # so a gradient of ones gives back one unit per pooled element.
    total = namespace["d_features"].sum(dtype="float64")
    assert abs(total - namespace["pooled"].size) < 1e-3
