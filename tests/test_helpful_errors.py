"""Mistakes a new user makes, answered with what to do.

A layout mismatch names the layout both arrays would fit, or the one
array that would fit the other layout; a framework's tensor given to the
NumPy API names the adapter; an unbuilt source tree says how to build it or
where to run from; ``dtype=`` takes PyTorch's and JAX's dtypes; a bare int
is a square crop; an empty list is no boxes.
"""

import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
from _helpers import required, unrequired

import cropgrad

HERE = os.path.dirname(os.path.abspath(__file__))
REQUIRED = required("CROPGRAD_REQUIRE_ADAPTERS")


def _framework(name):
    try:
        return __import__(name)
    except ImportError:
        if REQUIRED:
            raise
        pytest.skip(unrequired(f"{name} is not installed"))


def test_layout_mismatch_names_the_layout_that_fits():
    grads_nhwc = np.ones((2, 4, 3, 8), np.float32)
    boxes = [[0, 0, 1, 1], [0.2, 0.2, 0.8, 0.8]]
    # NHWC grads and an NHWC image size read as NCHW: depths 4 and 6 there,
    # 8 and 8 as NHWC.
    with pytest.raises(ValueError, match="both fit 'NHWC': pass data_format='NHWC'"):
        cropgrad.crop_and_resize_grad_image(
            grads_nhwc, boxes, [0, 0], [1, 6, 7, 8], data_format="NCHW"
        )
    # Without such a reading, no hint.
    with pytest.raises(ValueError, match=r"depth is 9 but grads depth is 4$"):
        cropgrad.crop_and_resize_grad_image(
            grads_nhwc, boxes, [0, 0], [1, 9, 7, 5], data_format="NCHW"
        )


ONE_OF_EACH = (
    r"\(read as data_format 'NCHW'; {} would fit 'NHWC' and {} 'NCHW': give "
    r"both in one layout\)$"
)


def test_one_array_of_each_layout_names_the_one_that_fits_the_other():
    # NHWC grads (depth 8) with an NCHW image size (depth 8): read as NCHW
    # their depths are 4 and 8, as NHWC 8 and 5; only grads fits NHWC.
    grads_nhwc = np.ones((2, 4, 3, 8), np.float32)
    boxes = [[0, 0, 1, 1], [0.2, 0.2, 0.8, 0.8]]
    with pytest.raises(
        ValueError,
        match=r"image_size depth is 8 but grads depth is 4 "
        + ONE_OF_EACH.format("grads", "image_size"),
    ):
        cropgrad.crop_and_resize_grad_image(
            grads_nhwc, boxes, [0, 0], [1, 8, 7, 5], data_format="NCHW"
        )
    # NCHW grads with an NHWC image size: the image size fits NHWC.
    with pytest.raises(ValueError, match=ONE_OF_EACH.format("image_size", "grads")):
        cropgrad.crop_and_resize_grad_image(
            np.ones((2, 8, 4, 3), np.float32),
            boxes,
            [0, 0],
            [1, 7, 5, 8],
            data_format="NCHW",
        )
    # The boxes gradient: NHWC grads with an NCHW image.
    with pytest.raises(
        ValueError,
        match=r"same depth, got 8 and 4 " + ONE_OF_EACH.format("grads", "image"),
    ):
        cropgrad.crop_and_resize_grad_boxes(
            grads_nhwc, np.ones((1, 8, 7, 5)), boxes, [0, 0], data_format="NCHW"
        )


def test_roi_align_channel_mismatch_names_the_layout_that_fits():
    grads = np.ones((1, 2, 2, 3), np.float32)  # NHWC: 3 channels
    with pytest.raises(ValueError, match="both fit 'NHWC'"):
        cropgrad.roi_align_grad_image(grads, [[0, 0, 4, 4]], [0], (1, 5, 6, 3))
    # NHWC grads with an NCHW image size or image (NCHW is RoIAlign's
    # default): 2 and 3 channels as NCHW, 3 and 6 as NHWC.
    with pytest.raises(
        ValueError,
        match=r"image_size has 3 channels but grads has 2 "
        + ONE_OF_EACH.format("grads", "image_size"),
    ):
        cropgrad.roi_align_grad_image(grads, [[0, 0, 4, 4]], [0], (1, 3, 5, 6))
    with pytest.raises(
        ValueError,
        match=r"image has 3 channels but grads has 2 "
        + ONE_OF_EACH.format("grads", "image"),
    ):
        cropgrad.roi_align_grad_boxes(
            grads, np.ones((1, 3, 5, 6), np.float32), [[0, 0, 4, 4]], [0]
        )


def test_a_torch_tensor_is_told_about_cropgrad_torch():
    torch = _framework("torch")
    image = torch.ones(1, 3, 3, 1, requires_grad=True)
    with pytest.raises(TypeError, match="image is a torch.Tensor.*cropgrad.torch"):
        cropgrad.crop_and_resize(image, [[0, 0, 1, 1]], [0], 2)
    with pytest.raises(TypeError, match="cropgrad.torch"):
        cropgrad.roi_align(
            torch.ones(1, 1, 3, 3, dtype=torch.bfloat16), [[0, 0, 2, 2]], [0], 2
        )


def test_a_jax_tracer_is_told_about_cropgrad_jax():
    jax = _framework("jax")

    @jax.jit
    def f(image):
        return cropgrad.crop_and_resize(image, [[0, 0, 1, 1]], [0], 2)

    with pytest.raises(TypeError, match="image is a JAX tracer.*cropgrad.jax"):
        f(np.ones((1, 3, 3, 1), np.float32))


def test_dtype_takes_torch_and_jax_dtypes():
    grads = np.ones((1, 2, 2, 1), np.float32)
    expected = cropgrad.crop_and_resize_grad_image(
        grads, [[0, 0, 1, 1]], [0], [1, 3, 3, 1], np.float64
    )
    torch = _framework("torch")
    _framework("jax")
    import jax.numpy as jnp

    for dtype in (torch.float64, jnp.float64):
        out = cropgrad.crop_and_resize_grad_image(
            grads, [[0, 0, 1, 1]], [0], [1, 3, 3, 1], dtype
        )
        assert out.dtype == np.float64
        np.testing.assert_array_equal(out, expected)
    out = cropgrad.crop_and_resize_grad_image(
        grads, [[0, 0, 1, 1]], [0], [1, 3, 3, 1], torch.bfloat16
    )
    assert out.dtype.name == "bfloat16"


def test_an_int_crop_size_is_a_square():
    image = np.arange(16, dtype=np.float32).reshape(1, 4, 4, 1)
    boxes = [[0.1, 0.2, 0.9, 0.7]]
    square = cropgrad.crop_and_resize(image, boxes, [0], 3)
    np.testing.assert_array_equal(
        square, cropgrad.crop_and_resize(image, boxes, [0], [3, 3])
    )
    jvp = cropgrad.crop_and_resize_jvp_boxes(image, boxes, [0], [[1, 0, 0, 0]], 3)
    assert jvp.shape == (1, 3, 3, 1)


@pytest.mark.parametrize("op", ["crop_and_resize", "roi_align"])
def test_an_empty_list_of_boxes_is_no_boxes(op):
    image = np.ones((1, 4, 4, 2), np.float32)
    if op == "roi_align":
        out = cropgrad.roi_align(image, [], [], 2, data_format="NHWC")
    else:
        out = cropgrad.crop_and_resize(image, [], [], 2)
    assert out.shape == (0, 2, 2, 2)


def test_an_unbuilt_source_tree_says_how_to_build_it(tmp_path):
    # A copy of the package's Python files alone: what a fresh clone is
    # before its build.
    source = os.path.dirname(os.path.abspath(cropgrad.__file__))
    shutil.copytree(
        source,
        tmp_path / "cropgrad",
        ignore=shutil.ignore_patterns("*.so", "*.pyd", "*.c", "__pycache__"),
    )
    # The folder the command runs from is on sys.path, as in a clone (not
    # with PYTHONSAFEPATH, which the wheels' test runs set).
    env = {k: v for k, v in os.environ.items() if k != "PYTHONSAFEPATH"}
    run = subprocess.run(
        [sys.executable, "-m", "cropgrad", "--help"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert run.returncode != 0
    assert "compiled modules are not built" in run.stderr
    assert "build_ext --inplace" in run.stderr and "python -P" in run.stderr
