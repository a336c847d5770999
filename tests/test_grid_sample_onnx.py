"""ONNX Runtime's ``GridSample`` (opset 20), a second witness of the forward.

ONNX Runtime computes its own arithmetic, not PyTorch's, so it agrees with
cropgrad (PyTorch's bits) where the arithmetic leaves no room:

- ``nearest`` picks one pixel: the same bits in every padding mode and both
  ``align_corners``, wherever no coordinate lands within rounding of a tie
  between two pixels (random grids; a grid written to land on ties, such as
  the fixtures' ``1.4`` on 5 rows, can round the other way);
- ``bilinear`` and ``bicubic`` weigh pixels with coordinates computed in
  another order: each result within 16 machine epsilons of the image's
  largest magnitude (measured: at most 6.7 on these problems), a bound that
  catches a wrong tap, weight or padding rule, which moves a result by a
  whole pixel's difference.

Run where ONNX Runtime and ``onnx`` are installed (CI's adapters stage);
skipped, and then required, as the other adapters' tests are.
"""

import numpy as np
import pytest
from _helpers import assert_same_bits, missing, starting_teams

import cropgrad

# cropgrad's (PyTorch's) modes by ONNX's names from opset 20.
_MODES = {"bilinear": "linear", "nearest": "nearest", "bicubic": "cubic"}
_PADDING_MODES = ("zeros", "border", "reflection")
_EPSILONS = 16


def _onnx_grid_sample(image, grid, mode, padding_mode, align_corners):
    """ONNX Runtime's ``GridSample`` on one thread."""
    try:
        import onnxruntime
        from onnx import TensorProto, helper
    except ImportError as exc:
        missing(f"ONNX Runtime cannot be imported ({exc})", "CROPGRAD_REQUIRE_ADAPTERS")
    elem = TensorProto.FLOAT if image.dtype == np.float32 else TensorProto.DOUBLE
    node = helper.make_node(
        "GridSample",
        ["X", "G"],
        ["Y"],
        mode=_MODES[mode],
        padding_mode=padding_mode,
        align_corners=int(align_corners),
    )
    graph = helper.make_graph(
        [node],
        "grid_sample",
        [
            helper.make_tensor_value_info("X", elem, None),
            helper.make_tensor_value_info("G", elem, None),
        ],
        [helper.make_tensor_value_info("Y", elem, None)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1
    session = onnxruntime.InferenceSession(
        model.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )
    return session.run(None, {"X": image, "G": grid})[0]


def _problem(dtype, mode, padding_mode, align_corners):
    rng = np.random.default_rng(
        [list(_MODES).index(mode), _PADDING_MODES.index(padding_mode)]
        + [align_corners, np.dtype(dtype).itemsize]
    )
    image = rng.standard_normal((2, 3, 9, 11)).astype(dtype)
    # Inside, on the border and outside, for every padding rule.
    grid = rng.uniform(-1.6, 1.6, (2, 7, 8, 2)).astype(dtype)
    return image, grid


def _ours(image, grid, mode, padding_mode, align_corners):
    with starting_teams() as parallel:
        out = cropgrad.grid_sample(
            image,
            grid,
            mode=mode,
            padding_mode=padding_mode,
            align_corners=align_corners,
            num_threads=2,
        )
        assert parallel.last_team() == 2
    return out


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("padding_mode", _PADDING_MODES)
def test_nearest_is_onnx_runtime_bits(padding_mode, align_corners, dtype):
    image, grid = _problem(dtype, "nearest", padding_mode, align_corners)
    expected = _onnx_grid_sample(image, grid, "nearest", padding_mode, align_corners)
    assert_same_bits(
        _ours(image, grid, "nearest", padding_mode, align_corners), expected
    )


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("padding_mode", _PADDING_MODES)
@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
def test_interpolation_is_onnx_runtimes_to_rounding(
    mode, padding_mode, align_corners, dtype
):
    image, grid = _problem(dtype, mode, padding_mode, align_corners)
    expected = _onnx_grid_sample(image, grid, mode, padding_mode, align_corners)
    ours = _ours(image, grid, mode, padding_mode, align_corners)
    assert ours.shape == expected.shape and ours.dtype == expected.dtype
    bound = _EPSILONS * np.finfo(dtype).eps * np.abs(image).max()
    assert np.abs(ours - expected).max() <= bound
