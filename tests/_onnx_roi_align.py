"""ONNX's ``RoiAlign`` run by ONNX Runtime, to compare with torchvision's bits.

Not a test module and not a test dependency: the RoIAlign fixture script
(``tests/data/make_roi_align_fixtures.py``) loads this file by its path in
an environment that has ``onnx`` and ``onnxruntime``, and checks that
ONNX Runtime's CPU kernel computes torchvision's bits on the fixtures.

ONNX's attribute ``coordinate_transformation_mode`` (opset 16 and later) is
torchvision's ``aligned``: ``"half_pixel"`` shifts the scaled coordinates by
-0.5 (``aligned=True``), ``"output_half_pixel"`` does not and forces a
malformed box's size to at least 1 (``aligned=False``).  ONNX has no
negative ``sampling_ratio``: 0 is the adaptive grid, as any ratio <= 0 is
for torchvision.  ``spatial_scale`` is a float32 attribute.
"""

import numpy as np

_ELEMENT_TYPES = {np.dtype(np.float32): "FLOAT", np.dtype(np.float64): "DOUBLE"}


def roi_align_model(
    dtype, output_size, spatial_scale=1.0, sampling_ratio=-1, aligned=False, opset=16
):
    """A serialized ONNX model of one ``RoiAlign`` node (mode ``avg``).

    Parameters
    ----------
    dtype : {numpy.float32, numpy.float64}
        The type of the image, the boxes and the output.
    output_size : (int, int)
        ``(out_h, out_w)``.
    spatial_scale : float, default 1.0
    sampling_ratio : int, default -1
        Samples per bin along each axis; <= 0: adaptive (ONNX's 0).
    aligned : bool, default False
        ``coordinate_transformation_mode``: ``half_pixel`` if True, else
        ``output_half_pixel``.
    opset : int, default 16
        The ONNX opset; 16 is the first with the coordinate transformation.

    Returns
    -------
    bytes
        The model; its inputs are ``X`` ``[N, C, H, W]``, ``rois`` ``[K,
        4]`` (``x1, y1, x2, y2``) and ``batch_indices`` int64 ``[K]``, its
        output ``Y`` ``[K, C, out_h, out_w]``.
    """
    import onnx
    from onnx import TensorProto, helper

    elem = getattr(TensorProto, _ELEMENT_TYPES[np.dtype(dtype)])
    out_h, out_w = (int(v) for v in output_size)
    node = helper.make_node(
        "RoiAlign",
        ["X", "rois", "batch_indices"],
        ["Y"],
        mode="avg",
        output_height=out_h,
        output_width=out_w,
        sampling_ratio=max(int(sampling_ratio), 0),
        spatial_scale=float(spatial_scale),
        coordinate_transformation_mode="half_pixel" if aligned else "output_half_pixel",
    )
    graph = helper.make_graph(
        [node],
        "roi_align",
        [
            helper.make_tensor_value_info("X", elem, ["N", "C", "H", "W"]),
            helper.make_tensor_value_info("rois", elem, ["K", 4]),
            helper.make_tensor_value_info("batch_indices", TensorProto.INT64, ["K"]),
        ],
        [helper.make_tensor_value_info("Y", elem, ["K", "C", out_h, out_w])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    # An IR version every ONNX Runtime release with opset 16 reads.
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model.SerializeToString()


def roi_align(
    image,
    boxes,
    box_ind,
    output_size,
    spatial_scale=1.0,
    sampling_ratio=-1,
    aligned=False,
    opset=16,
):
    """ONNX Runtime's CPU ``RoiAlign`` on one thread.

    Parameters
    ----------
    image : ndarray of shape (N, C, H, W), float32 or float64
    boxes : array_like of shape (K, 4)
        ``[x1, y1, x2, y2]``, converted to the image's dtype.
    box_ind : array_like of shape (K,)
        Converted to int64.
    output_size, spatial_scale, sampling_ratio, aligned, opset
        As for `roi_align_model`.

    Returns
    -------
    ndarray of shape (K, C, out_h, out_w)
        ONNX Runtime's output, the image's dtype.

    Raises
    ------
    Exception
        Whatever ONNX Runtime raises for the call (its errors are not a
        stable type across releases).
    """
    import onnxruntime

    image = np.ascontiguousarray(image)
    model = roi_align_model(
        image.dtype, output_size, spatial_scale, sampling_ratio, aligned, opset
    )
    options = onnxruntime.SessionOptions()
    # One thread: the result cannot depend on how boxes are shared out.
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    # A failing call raises; its log line would only repeat the message.
    options.log_severity_level = 4
    session = onnxruntime.InferenceSession(
        model, options, providers=["CPUExecutionProvider"]
    )
    feeds = {
        "X": image,
        "rois": np.ascontiguousarray(
            np.asarray(boxes, dtype=image.dtype).reshape(-1, 4)
        ),
        "batch_indices": np.ascontiguousarray(np.asarray(box_ind, dtype=np.int64)),
    }
    return session.run(None, feeds)[0]
