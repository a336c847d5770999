"""The RoIAlign family's NumPy functions (re-exported by ``cropgrad``).

RoIAlign speaks torchvision's and ONNX's dialect of box sampling, not
TensorFlow's: boxes ``[x1, y1, x2, y2]`` in the input image's pixels,
which `spatial_scale` maps to the feature map; `sampling_ratio` samples
per bin along each axis (adaptive when 0 or less); `aligned` shifts by half
a pixel; NCHW by default.  Each function converts its arguments
(cropgrad/_api/validation.py), runs the gate through cropgrad._core,
allocates the output and makes one call through the bridge, as the
crop_and_resize family's do.
"""

from typing import NamedTuple

import numpy as np

from cropgrad import _core
from cropgrad._api import docstrings as _docs
from cropgrad._api import validation as _v

__all__ = [
    "roi_align",
    "roi_align_grad_boxes",
    "roi_align_grad_image",
    "roi_align_jvp_boxes",
]

_FLOAT32 = np.dtype(np.float32)
_FLOAT64 = np.dtype(np.float64)
_COLUMNS = "[x1, y1, x2, y2]"
_F32 = _v.CODES["CG_FLOAT32"]
_F64 = _v.CODES["CG_FLOAT64"]


def _arithmetic(code):
    """The arithmetic type of data whose dtype code is `code`: float64 for
    float64, float32 for everything else."""
    return _FLOAT64 if code == _F64 else _FLOAT32


_GRADS_FLOATS = (np.dtype(np.float16), _FLOAT32, _FLOAT64)


def _grads_arithmetic(raw):
    """The arithmetic type of `grads` (a real array): float64 for float64 in
    either byte order, float32 for the other floats and integers.  A float
    wider than float64 is refused: computing it in float32 would be a
    silent loss, and no result dtype has its precision."""
    native = raw.dtype.newbyteorder("=")
    if native.kind == "f" and native not in _GRADS_FLOATS:
        raise TypeError(
            "grads must be float16, float32, float64, bfloat16 or integers, "
            f"got {raw.dtype}: convert them first, e.g. grads.astype(numpy.float64)"
        )
    return _FLOAT64 if native == _FLOAT64 else _FLOAT32


class _Options(NamedTuple):
    """The options every RoIAlign op takes, converted."""

    scale: float
    ratio: int
    aligned: bool
    layout: int
    threads: int
    flush: bool


def _options(
    spatial_scale, sampling_ratio, aligned, data_format, num_threads, flush_denormals
):
    """The options every RoIAlign op takes, checked in this order."""
    return _Options(
        _v.float_scalar(spatial_scale, "spatial_scale"),
        _v.int_scalar(sampling_ratio, "sampling_ratio"),
        _v.flag(aligned, "aligned"),
        _v.data_format(data_format),
        _v.threads(num_threads),
        _v.flag(flush_denormals, "flush_denormals"),
    )


class _Pooled(NamedTuple):
    """The arguments of the forward op (and of the boxes JVP), converted and
    checked, and the output to write."""

    image: np.ndarray
    image_code: int
    boxes: np.ndarray
    tangent: np.ndarray
    box_ind: np.ndarray
    box_ind_code: int
    arith_code: int
    out_h: int
    out_w: int
    result: np.ndarray
    out_code: int


# The forward op's place for the boxes JVP's tangent: it has none (a None
# from a caller of the JVP is converted, and refused, as any tangent is).
_NO_TANGENT = object()


def _pooled(
    image,
    boxes,
    box_ind,
    output_size,
    dtype,
    out,
    o,
    data_format,
    boxes_tangent=_NO_TANGENT,
):
    """Convert the pooled ops' arguments, run the gate, allocate the output."""
    image, image_code = _v.image_array(image, data_format, num_threads=o.threads)
    arith = _arithmetic(image_code)
    arith_code = _v.dtype_code(arith)
    boxes, box_ind = _v.boxes_and_index(boxes, box_ind, arith, _COLUMNS)
    tangent = None
    if boxes_tangent is not _NO_TANGENT:
        tangent = _v.boxes_tangent(boxes_tangent, boxes.shape[0], arith)
    out_h, out_w = _v.size_pair(output_size, "output_size", "[height, width]")
    result_dtype = _result_dtype(dtype, image.dtype)
    out_code = _v.dtype_code(result_dtype)
    _core.check_roi_align(
        image.shape,
        image_code,
        arith_code,
        boxes.shape[0],
        out_h,
        out_w,
        o.scale,
        o.ratio,
        o.layout,
        out_code,
        o.threads,
    )
    index, index_code = _v.native_index(box_ind)
    shape = _pooled_shape(o.layout, image.shape, boxes.shape[0], out_h, out_w)
    result = _v.output(out, shape, result_dtype)
    return _Pooled(
        image,
        image_code,
        boxes,
        tangent,
        index,
        index_code,
        arith_code,
        out_h,
        out_w,
        result,
        out_code,
    )


def _run_pooled(bridge, a, o, *tangent):
    """Call the pooled op's `bridge` on the prepared arguments `a` (a
    `_Pooled`) and options `o`, and return the output it wrote.

    The forward op's bridge and the boxes JVP's take the same arguments but
    for the JVP's tangent, which follows the boxes: `tangent` is empty for
    the forward op and ``(a.tangent,)`` for the JVP."""
    bridge(
        a.image,
        a.image_code,
        a.boxes,
        *tangent,
        a.arith_code,
        a.box_ind,
        a.box_ind_code,
        a.out_h,
        a.out_w,
        o.scale,
        o.ratio,
        o.aligned,
        o.layout,
        a.result,
        a.out_code,
        o.threads,
        o.flush,
    )
    return a.result


def _result_dtype(dtype, data_dtype):
    """The output dtype: `dtype`, or the data's when it is a float dtype
    (float32 for integer data)."""
    if dtype is not None:
        return _v.output_dtype(dtype, "dtype")
    if data_dtype.kind == "f" or _v.is_bfloat16(data_dtype):
        return data_dtype.newbyteorder("=")
    return _FLOAT32


def _pooled_shape(layout, image_shape, num_boxes, out_h, out_w):
    """The pooled output's shape (the forward op's and the JVP's)."""
    if layout == _v.LAYOUT_CODES["NCHW"]:
        return (num_boxes, image_shape[1], out_h, out_w)
    return (num_boxes, out_h, out_w, image_shape[3])


@_docs.shared
def roi_align(
    image,
    boxes,
    box_ind,
    output_size,
    *,
    spatial_scale=1.0,
    sampling_ratio=-1,
    aligned=False,
    dtype=None,
    out=None,
    data_format="NCHW",
    num_threads=None,
    flush_denormals=False,
):
    """Pool each box into `output_size` bins by averaging bilinear samples.

    torchvision's ``roi_align`` (average pooling) and ONNX's ``RoiAlign``,
    bit for bit in float32 and float64, on every thread count.

    Parameters
    ----------
    image : array_like of shape (batch, channels, height, width)
        The feature map (``(batch, height, width, channels)`` with
        ``data_format="NHWC"``): uint8, uint16, int8, int16, int32, int64,
        float16, float32, float64 or bfloat16.  float64 images are computed
        in float64, every other dtype in float32 (float16 and bfloat16
        read exactly), as torchvision computes in its input's type.
    boxes : array_like of shape (num_boxes, 4)
        Finite ``[x1, y1, x2, y2]`` per box in the input image's
        coordinates (torchvision's and ONNX's order), converted to the
        arithmetic type.  torchvision's ``Tensor[K, 5]`` is ``boxes[:, 1:]``
        with ``box_ind = boxes[:, 0]``.
    box_ind : array_like of int, shape (num_boxes,)
        Image of the batch each box belongs to, in ``[0, batch)``.
    output_size : int or (int, int)
        ``(out_height, out_width)`` bins per box; an int is a square.
    spatial_scale : float, default 1.0
        Feature-map pixels per input pixel (``1/16`` for a stride-16 map).
    sampling_ratio : int, default -1
        Samples per bin along each axis, at most 4096; 0 or less: adaptive,
        ``ceil(bin size)`` per box.
    aligned : bool, default False
        Shift the scaled boxes by -0.5 pixel (torchvision's ``aligned=True``,
        ONNX's ``half_pixel``); False keeps torchvision's legacy
        coordinates (ONNX's ``output_half_pixel``) and its minimum box size
        of one pixel.
    {dtype}
    {options}

    Returns
    -------
    ndarray of shape (num_boxes, channels, out_height, out_width)
        ``(num_boxes, out_height, out_width, channels)`` with NHWC.

    Raises
    ------
    ValueError
        Bad shapes or options, a non-finite box, a box whose adaptive grid
        would put more than 2**24 samples in a bin, a bad `out`.
    IndexError
        A `box_ind` value outside ``[0, batch)``.
    TypeError
        Non-numeric inputs, an unsupported dtype.

    Notes
    -----
    Along each axis (``y1, y2`` for rows), in the arithmetic type:
    ``start = y1 * spatial_scale - offset`` (``offset`` 0.5 when aligned),
    the bin size ``(y2 * spatial_scale - offset - start) / out_height``
    (the size held at 1 when not aligned), and sample ``i`` of bin ``p`` at
    ``(start + p * bin) + ((i + 0.5) * bin) / grid``.  Samples outside
    ``[-1, height]`` add nothing and read no pixel; the others are clamped
    at 0 and ``height - 1``.  Each bin is the sum of its samples in order,
    divided by their count.  docs/semantics.md has every rounding.

    Examples
    --------
    >>> import numpy as np
    >>> import cropgrad
    >>> image = np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4)
    >>> out = cropgrad.roi_align(image, [[0, 0, 4, 4]], [0], 2, sampling_ratio=2)
    >>> out[0, 0]
    array([[ 5.  ,  6.75],
           [12.  , 13.75]], dtype=float32)
    """
    o = _options(
        spatial_scale,
        sampling_ratio,
        aligned,
        data_format,
        num_threads,
        flush_denormals,
    )
    a = _pooled(image, boxes, box_ind, output_size, dtype, out, o, data_format)
    return _run_pooled(_core.roi_align, a, o)


@_docs.shared
def roi_align_grad_image(
    grads,
    boxes,
    box_ind,
    image_size,
    *,
    spatial_scale=1.0,
    sampling_ratio=-1,
    aligned=False,
    dtype=None,
    out=None,
    data_format="NCHW",
    num_threads=None,
    flush_denormals=False,
):
    """Gradient of `roi_align` with respect to the image.

    torchvision's backward (``_roi_align_backward``), bit for bit in
    float32 and float64, on every thread count: each inside sample of each
    bin adds ``(g * w) / count`` to its four pixels, every pixel summed in
    the serial order (box, bin row, bin column, sample row, sample column,
    corner).

    Parameters
    ----------
    grads : array_like of shape (num_boxes, channels, out_height, out_width)
        The gradient flowing into the pooled output (``(num_boxes,
        out_height, out_width, channels)`` with NHWC).  float64 is computed
        in float64, every other dtype in float32.
    boxes, box_ind
        As for `roi_align`.
    {image_size}
    spatial_scale, sampling_ratio, aligned
        As for `roi_align`.
    {grads_dtype}
    out, data_format, num_threads, flush_denormals
        As for `roi_align`.

    Returns
    -------
    ndarray of shape `image_size`

    Examples
    --------
    >>> import numpy as np
    >>> import cropgrad
    >>> grads = np.ones((1, 1, 1, 1), dtype=np.float32)
    >>> cropgrad.roi_align_grad_image(
    ...     grads, [[0, 0, 2, 2]], [0], (1, 1, 3, 3), sampling_ratio=1
    ... )[0, 0]
    array([[0., 0., 0.],
           [0., 1., 0.],
           [0., 0., 0.]], dtype=float32)
    """
    o = _options(
        spatial_scale,
        sampling_ratio,
        aligned,
        data_format,
        num_threads,
        flush_denormals,
    )
    raw = _v.real_array(grads, "grads", bfloat16=True)
    arith = _grads_arithmetic(raw)
    arith_code = _v.dtype_code(arith)
    grads = _grads(raw, arith, data_format)
    boxes, box_ind = _v.boxes_and_index(boxes, box_ind, arith, _COLUMNS)
    _v.same_num_boxes(boxes.shape[0], grads.shape)
    shape = _v.image_size(image_size, data_format)
    result_dtype = _result_dtype(dtype, raw.dtype)
    out_code = _v.dtype_code(result_dtype)
    _core.check_roi_align_grad_image(
        grads.shape,
        arith_code,
        arith_code,
        shape,
        o.scale,
        o.ratio,
        o.layout,
        out_code,
        o.threads,
    )
    index, index_code = _v.native_index(box_ind)
    result = _v.output(out, shape, result_dtype)
    _core.roi_align_grad_image(
        grads,
        arith_code,
        boxes,
        arith_code,
        index,
        index_code,
        shape,
        o.scale,
        o.ratio,
        o.aligned,
        o.layout,
        result,
        out_code,
        o.threads,
        o.flush,
    )
    return result


def _grads(raw, arith, data_format):
    """`raw` (a real array) as 4-D C-contiguous `arith`."""
    grads = _v.float32_array(raw, "grads", arith, bfloat16=True)
    if grads.ndim != 4:
        raise ValueError(
            f"grads must be 4-D {_v.POOLED_AXES[data_format]} ({data_format}), "
            f"got shape {grads.shape}"
        )
    return grads


def roi_align_grad_boxes(
    grads,
    image,
    boxes,
    box_ind,
    *,
    spatial_scale=1.0,
    sampling_ratio=-1,
    aligned=False,
    out=None,
    data_format="NCHW",
    num_threads=None,
    flush_denormals=False,
):
    """Gradient of `roi_align` with respect to the boxes.

    What torchvision does not compute: the derivative of the sampling with
    respect to ``x1, y1, x2, y2`` through the sample coordinates, the
    adaptive grid held constant.  A sample whose coordinate a clamp holds
    (at or below 0, or in the last pixel) does not move with the box along
    that axis; with ``aligned=False`` a box smaller than a pixel is held at
    one pixel and only moves.  At a whole-pixel coordinate the slope is
    that of the cell above it (torchvision's corners: ``low = int(c)``,
    ``high = low + 1``).  Deterministic and parallel over boxes; the exact
    transpose of `roi_align_jvp_boxes`.

    Parameters
    ----------
    grads : array_like of shape (num_boxes, channels, out_height, out_width)
        The gradient flowing into the pooled output (NHWC:
        ``(num_boxes, out_height, out_width, channels)``), converted to the
        image's arithmetic type.
    image, boxes, box_ind
        As for `roi_align`.
    spatial_scale, sampling_ratio, aligned, out, data_format, num_threads, \
flush_denormals
        As for `roi_align`.

    Returns
    -------
    ndarray of shape (num_boxes, 4)
        ``d/d[x1, y1, x2, y2]`` per box, in the arithmetic type (float64
        for float64 images, float32 otherwise).

    Notes
    -----
    Each coordinate's sum is kept in eight partial sums, channel ``c`` in
    lane ``c % 8``, each in the serial order (bin row, bin column, sample
    row, sample column, channel), combined as ``((l0 + l1) + (l2 + l3)) +
    ((l4 + l5) + (l6 + l7))`` and divided by the bin's count:
    docs/semantics.md has every rounding.

    Examples
    --------
    A ramp rising by 1 per column: moving ``x1`` (or ``x2``) by one moves
    the samples by a half on average, in each of the four bins:

    >>> import numpy as np
    >>> import cropgrad
    >>> image = np.tile(np.arange(5.0, dtype=np.float32), (1, 1, 5, 1))
    >>> grads = np.ones((1, 1, 2, 2), dtype=np.float32)
    >>> cropgrad.roi_align_grad_boxes(grads, image, [[1, 1, 3, 3]], [0])
    array([[2., 0., 2., 0.]], dtype=float32)
    """
    o = _options(
        spatial_scale,
        sampling_ratio,
        aligned,
        data_format,
        num_threads,
        flush_denormals,
    )
    image, image_code = _v.image_array(image, data_format, num_threads=o.threads)
    arith = _arithmetic(image_code)
    arith_code = _v.dtype_code(arith)
    grads = _grads(_v.real_array(grads, "grads", bfloat16=True), arith, data_format)
    boxes, box_ind = _v.boxes_and_index(boxes, box_ind, arith, _COLUMNS)
    _v.same_num_boxes(boxes.shape[0], grads.shape)
    _core.check_roi_align_grad_boxes(
        grads.shape,
        arith_code,
        image.shape,
        image_code,
        arith_code,
        o.scale,
        o.ratio,
        o.layout,
        o.threads,
    )
    index, index_code = _v.native_index(box_ind)
    result = _v.output(out, (boxes.shape[0], 4), arith)
    _core.roi_align_grad_boxes(
        grads,
        arith_code,
        image,
        image_code,
        boxes,
        arith_code,
        index,
        index_code,
        o.scale,
        o.ratio,
        o.aligned,
        o.layout,
        result,
        o.threads,
        o.flush,
    )
    return result


def roi_align_jvp_boxes(
    image,
    boxes,
    box_ind,
    boxes_tangent,
    output_size,
    *,
    spatial_scale=1.0,
    sampling_ratio=-1,
    aligned=False,
    dtype=None,
    out=None,
    data_format="NCHW",
    num_threads=None,
    flush_denormals=False,
):
    """Derivative of `roi_align` along a tangent of the boxes (forward mode).

    How the pooled output changes as the boxes move along `boxes_tangent`:
    per output element, the sum over its bin's inside samples of the
    image's slopes times how fast the sample moves, divided by the count,
    with exactly the terms of `roi_align_grad_boxes`, which is this map's
    transpose: ``sum(jvp(t) * g) == sum(t * grad_boxes(g))`` up to
    rounding.

    Parameters
    ----------
    image, boxes, box_ind, output_size
        As for `roi_align`.
    boxes_tangent : array_like of shape (num_boxes, 4)
        ``[t_x1, t_y1, t_x2, t_y2]`` per box, converted to the arithmetic
        type; NaN and infinities are allowed and propagate.
    spatial_scale, sampling_ratio, aligned, dtype, out, data_format, \
num_threads, flush_denormals
        As for `roi_align`.

    Returns
    -------
    ndarray of the shape and dtype `roi_align` returns

    Examples
    --------
    A ramp rising by 1 per column; moving the box right by 1 moves every
    sample right by 1:

    >>> import numpy as np
    >>> import cropgrad
    >>> image = np.tile(np.arange(5.0, dtype=np.float32), (1, 1, 5, 1))
    >>> jvp = cropgrad.roi_align_jvp_boxes(
    ...     image, [[1, 1, 3, 3]], [0], [[1, 0, 1, 0]], 2
    ... )
    >>> jvp[0, 0]
    array([[1., 1.],
           [1., 1.]], dtype=float32)
    """
    o = _options(
        spatial_scale,
        sampling_ratio,
        aligned,
        data_format,
        num_threads,
        flush_denormals,
    )
    a = _pooled(
        image, boxes, box_ind, output_size, dtype, out, o, data_format, boxes_tangent
    )
    return _run_pooled(_core.roi_align_jvp_boxes, a, o, a.tangent)
