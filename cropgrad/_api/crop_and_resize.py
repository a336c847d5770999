"""The crop_and_resize family's NumPy functions (re-exported by ``cropgrad``).

Each function converts its arguments (cropgrad/_api/validation.py: types,
dtypes, names, numbers of dimensions, shapes that relate arrays to each
other), runs the C-level API's metadata checks through the gate of
cropgrad._core (the one definition of a valid call, shared with the JAX
and PyTorch adapters), allocates the output, then makes one call into the
C-level API through the bridge of cropgrad._core, which checks the data
(finite boxes, ``box_ind`` in range) and runs the kernel without the GIL.
An error of the C-level API comes back as the exception documented here.
"""

from typing import NamedTuple

import numpy as np

from cropgrad import _core
from cropgrad._api import docstrings as _docs
from cropgrad._api import validation as _v

__all__ = [
    "crop_and_resize",
    "crop_and_resize_grad_boxes",
    "crop_and_resize_grad_image",
    "crop_and_resize_jvp_boxes",
]


class _Options(NamedTuple):
    """The codes of the options the ops share."""

    method: int
    layout: int
    threads: int
    flush: bool


def _options(method, allowed, data_format, num_threads, flush_denormals):
    """The codes of the options the ops share, checked in this order."""
    return _Options(
        _v.method(method, allowed),
        _v.data_format(data_format),
        _v.threads(num_threads),
        _v.flag(flush_denormals, "flush_denormals"),
    )


def _crop_size(crop_size):
    """``[crop_height, crop_width]``; an int is a square (raw_ops keeps
    TensorFlow's two ints)."""
    return _v.size_pair(crop_size, "crop_size", "[crop_height, crop_width]")


class _Crops(NamedTuple):
    """The arguments of the forward op (and of the boxes JVP), converted."""

    image: np.ndarray
    image_code: int
    boxes: np.ndarray
    tangent: np.ndarray
    box_ind: np.ndarray
    crop_h: int
    crop_w: int


# The forward op's place for the boxes JVP's tangent: it has none (a None
# from a caller of the JVP is converted, and refused, as any tangent is).
_NO_TANGENT = object()


def _crops(image, boxes, box_ind, crop_size, o, data_format, boxes_tangent=_NO_TANGENT):
    """Convert the arrays and the crop size of the forward op (and of the
    boxes JVP, with its `boxes_tangent`) in the order the functions take
    them."""
    image, image_code = _v.image_array(image, data_format, num_threads=o.threads)
    boxes, box_ind = _v.boxes_and_index(boxes, box_ind)
    tangent = None
    if boxes_tangent is not _NO_TANGENT:
        tangent = _v.boxes_tangent(boxes_tangent, boxes.shape[0])
    crop_h, crop_w = _crop_size(crop_size)
    return _Crops(image, image_code, boxes, tangent, box_ind, crop_h, crop_w)


def _gated_crops(check, a, o, out):
    """Run the gate `check` of the forward op or of its boxes JVP (both
    check the same arguments) on the converted arguments `a` (a `_Crops`),
    then return the native box_ind, its code, and the crops to write."""
    num_boxes = a.boxes.shape[0]
    check(
        a.image.shape,
        a.image_code,
        num_boxes,
        a.crop_h,
        a.crop_w,
        o.method,
        o.layout,
        o.threads,
    )
    index, index_code = _v.native_index(a.box_ind)
    shape = _v.crops_shape(o.layout, a.image.shape, num_boxes, a.crop_h, a.crop_w)
    return index, index_code, _v.output(out, shape, np.dtype(np.float32))


def crop_and_resize_grad_image(
    grads,
    boxes,
    box_ind,
    image_size,
    dtype=np.float32,
    method="bilinear",
    *,
    out=None,
    data_format="NHWC",
    num_threads=None,
    flush_denormals=False,
):
    """Gradient of crop-and-resize with respect to the image.

    Scatters each crop sample's gradient back to the pixels it was
    interpolated from, exactly as TensorFlow's ``CropAndResizeGradImage``
    does with op determinism enabled.

    Parameters
    ----------
    grads : array_like of shape (num_boxes, crop_height, crop_width, depth)
        Gradient flowing into each crop.  Real numbers, converted to float32
        (the op's arithmetic); a C-contiguous float32 array is used in place.
    boxes : array_like of shape (num_boxes, 4)
        Finite ``[y1, x1, y2, x2]`` per box in normalized coordinates
        (``0`` is the first pixel, ``1`` the last), converted to float32.
        ``y1 > y2`` flips the crop; coordinates outside ``[0, 1]`` sample
        outside the image and contribute nothing.
    box_ind : array_like of int, shape (num_boxes,)
        Image of the batch each box was cut from, in ``[0, batch)``.
    image_size : sequence of 4 ints
        ``[batch, image_height, image_width, depth]``: the output's shape.
    dtype : {float32, float16, float64, bfloat16}, default float32
        Output dtype: a NumPy dtype, a name (``"float32"``, ``"float"``,
        ``"half"``, ``"double"``, ``"bfloat16"``, ...), ``ml_dtypes.bfloat16``
        or a TensorFlow DType.  float16 and bfloat16 accumulate in float32
        and are rounded once at the end (``"bfloat16"`` needs ml_dtypes).
    method : {"bilinear", "nearest"}, default "bilinear"
        Sampling method of the forward crop.
    out : ndarray, optional
        C-contiguous array of shape `image_size` and dtype `dtype` to
        overwrite and return instead of a new array.
    data_format : {"NHWC", "NCHW"}, default "NHWC"
        Layout of `grads`, `image_size` and the result: TensorFlow's NHWC,
        or PyTorch's NCHW (grads ``(num_boxes, depth, crop_height,
        crop_width)``, image_size and result ``[batch, depth, image_height,
        image_width]``).  NCHW has kernels of its own; its result is the
        NHWC result transposed, bit for bit.
    num_threads : int, optional
        Threads to use, 1 to 1024.  Default: OpenMP's default, which
        honours ``OMP_NUM_THREADS`` and threadpoolctl.  The result does not
        depend on it.
    flush_denormals : bool, default False
        Compute with flush-to-zero and denormals-are-zero, as TensorFlow's
        CPU kernels do: subnormal inputs and results count as zero.  With it,
        float32 and float64 results equal TensorFlow's bits on every input;
        without it (IEEE arithmetic, as NumPy), wherever no subnormal occurs.

    Returns
    -------
    ndarray of shape (batch, image_height, image_width, depth), dtype `dtype`
        Zero except where crops sampled the image (``(batch, depth,
        image_height, image_width)`` with ``data_format="NCHW"``).

    Raises
    ------
    ValueError
        Bad shapes, non-finite boxes, an unknown method, a bad `out`, or an
        output too large to index.
    IndexError
        A `box_ind` value outside ``[0, batch)``.
    TypeError
        Non-numeric, complex or boolean inputs; an unsupported `dtype`.
    MemoryError
        The output cannot be allocated.

    Notes
    -----
    For box ``b`` with ``crop_height > 1``, crop row ``y`` samples image row
    ``y1 * (H - 1) + y * (y2 - y1) * (H - 1) / (crop_height - 1)`` in
    float32; a bilinear sample adds ``(1 - y_lerp) * (1 - x_lerp) * g`` and
    its three siblings to the four surrounding pixels.  Every output element
    is summed by one thread in the serial order (box, crop row, crop column,
    corner), which is why the result is bit-identical for any
    `num_threads`.

    Examples
    --------
    >>> import numpy as np
    >>> import cropgrad
    >>> grads = np.ones((1, 2, 2, 1), dtype=np.float32)
    >>> boxes = np.array([[0.0, 0.0, 1.0, 1.0]], dtype=np.float32)
    >>> out = cropgrad.crop_and_resize_grad_image(grads, boxes, [0], [1, 3, 3, 1])
    >>> out[0, :, :, 0]
    array([[1., 0., 1.],
           [0., 0., 0.],
           [1., 0., 1.]], dtype=float32)
    """
    method_code = _v.method(method)
    out_dtype = _v.output_dtype(dtype, "dtype")
    layout = _v.data_format(data_format)
    nthreads = _v.threads(num_threads)
    flush = _v.flag(flush_denormals, "flush_denormals")
    grads = _v.grads_array(grads, data_format)
    boxes, box_ind = _v.boxes_and_index(boxes, box_ind)
    _v.same_num_boxes(boxes.shape[0], grads.shape)
    shape = _v.image_size(image_size, data_format)
    out_code = _v.dtype_code(out_dtype)
    _core.check_crop_and_resize_grad_image(
        grads.shape, shape, out_code, method_code, layout, nthreads
    )
    index, index_code = _v.native_index(box_ind)
    result = _v.output(out, shape, out_dtype)
    _core.crop_and_resize_grad_image(
        grads,
        boxes,
        index,
        index_code,
        shape,
        result,
        out_code,
        method_code,
        layout,
        nthreads,
        flush,
    )
    return result


@_docs.shared
def crop_and_resize(
    image,
    boxes,
    box_ind,
    crop_size,
    method="bilinear",
    extrapolation_value=0.0,
    *,
    out=None,
    data_format="NHWC",
    num_threads=None,
    flush_denormals=False,
):
    """Crop boxes out of a batch of images and resize them to `crop_size`.

    TensorFlow's ``CropAndResize``, bit for bit.

    Parameters
    ----------
    image : array_like of shape (batch, image_height, image_width, depth)
        uint8, uint16, int8, int16, int32, int64, float16, float32, float64
        or bfloat16 (``ml_dtypes.bfloat16``); pixels are converted to
        float32 as they are read (float16 and bfloat16 exactly).
    boxes : array_like of shape (num_boxes, 4)
        Finite ``[y1, x1, y2, x2]`` in normalized coordinates (float32).
    box_ind : array_like of int, shape (num_boxes,)
        Image of each box, in ``[0, batch)``.
    crop_size : int or sequence of 2 ints
        ``[crop_height, crop_width]``, both positive; an int is a square.
    method : {"bilinear", "nearest"}, default "bilinear"
    extrapolation_value : float, default 0.0
        Value of samples that fall outside the image.
    {crops_options}

    Returns
    -------
    ndarray of shape (num_boxes, crop_height, crop_width, depth), dtype=float32
        (``(num_boxes, depth, crop_height, crop_width)`` in NCHW)

    Examples
    --------
    >>> import numpy as np
    >>> import cropgrad
    >>> image = np.arange(9, dtype=np.float32).reshape(1, 3, 3, 1)
    >>> crops = cropgrad.crop_and_resize(image, [[0, 0, 1, 1]], [0], [2, 2])
    >>> crops[0, :, :, 0]
    array([[0., 2.],
           [6., 8.]], dtype=float32)
    """
    o = _options(method, _v.METHODS, data_format, num_threads, flush_denormals)
    a = _crops(image, boxes, box_ind, crop_size, o, data_format)
    extrapolation = _v.real_scalar(extrapolation_value, "extrapolation_value")
    index, index_code, result = _gated_crops(_core.check_crop_and_resize, a, o, out)
    _core.crop_and_resize(
        a.image,
        a.image_code,
        a.boxes,
        index,
        index_code,
        a.crop_h,
        a.crop_w,
        o.method,
        float(extrapolation),
        o.layout,
        result,
        o.threads,
        o.flush,
    )
    return result


def crop_and_resize_grad_boxes(
    grads,
    image,
    boxes,
    box_ind,
    method="bilinear",
    *,
    out=None,
    data_format="NHWC",
    num_threads=None,
    flush_denormals=False,
):
    """Gradient of crop-and-resize with respect to the boxes.

    TensorFlow's ``CropAndResizeGradBoxes``, bit for bit (bilinear only, as
    there).

    Parameters
    ----------
    grads : array_like of shape (num_boxes, crop_height, crop_width, depth)
        Gradient flowing into each crop (float32 arithmetic).
    image : array_like of shape (batch, image_height, image_width, depth)
        The forward op's image, of any dtype `crop_and_resize` accepts.
    boxes : array_like of shape (num_boxes, 4)
        Finite ``[y1, x1, y2, x2]`` in normalized coordinates.
    box_ind : array_like of int, shape (num_boxes,)
        Image of each box, in ``[0, batch)``.
    method : {"bilinear"}
        Only bilinear sampling has a boxes gradient.
    out : ndarray, optional
        C-contiguous float32 array of shape ``(num_boxes, 4)`` to overwrite
        and return instead of a new array.
    data_format : {"NHWC", "NCHW"}, default "NHWC"
        Layout of `grads` and `image`: with ``"NCHW"``, grads ``(num_boxes,
        depth, crop_height, crop_width)`` and image ``(batch, depth,
        image_height, image_width)``; the same result, bit for bit.
    num_threads : int, optional
        Threads to use, 1 to 1024 (default: OpenMP's default).
    flush_denormals : bool, default False
        TensorFlow's flush-to-zero arithmetic.

    Returns
    -------
    ndarray of shape (num_boxes, 4), dtype=float32
        Gradient with respect to ``[y1, x1, y2, x2]`` of each box.

    Notes
    -----
    A sample on a whole pixel row (column) contributes nothing to the
    ``y`` (``x``) terms: TensorFlow's two corner rows are then the same
    row.  A box whose samples all fall on whole pixels has a zero gradient
    whatever the image (``[[0, 0, 1, 1]]`` with a crop the size of the
    image).  To learn such boxes, offset them by a fraction of a pixel, or
    use `roi_align_grad_boxes` (docs/semantics.md, "Whole pixels give no
    slope").

    Examples
    --------
    >>> import numpy as np
    >>> import cropgrad
    >>> image = np.arange(9, dtype=np.float32).reshape(1, 3, 3, 1)
    >>> grads = np.ones((1, 2, 2, 1), dtype=np.float32)
    >>> boxes = [[0.25, 0.25, 0.75, 0.75]]
    >>> cropgrad.crop_and_resize_grad_boxes(grads, image, boxes, [0])
    array([[12.,  4., 12.,  4.]], dtype=float32)
    """
    o = _options(method, ("bilinear",), data_format, num_threads, flush_denormals)
    grads = _v.grads_array(grads, data_format)
    image, image_code = _v.image_array(image, data_format, num_threads=o.threads)
    boxes, box_ind = _v.boxes_and_index(boxes, box_ind)
    _v.same_num_boxes(boxes.shape[0], grads.shape)
    _core.check_crop_and_resize_grad_boxes(
        grads.shape, image.shape, image_code, o.method, o.layout, o.threads
    )
    index, index_code = _v.native_index(box_ind)
    result = _v.output(out, (boxes.shape[0], 4), np.dtype(np.float32))
    _core.crop_and_resize_grad_boxes(
        grads,
        image,
        image_code,
        boxes,
        index,
        index_code,
        result,
        o.method,
        o.layout,
        o.threads,
        o.flush,
    )
    return result


@_docs.shared
def crop_and_resize_jvp_boxes(
    image,
    boxes,
    box_ind,
    boxes_tangent,
    crop_size,
    method="bilinear",
    *,
    out=None,
    data_format="NHWC",
    num_threads=None,
    flush_denormals=False,
):
    """Derivative of crop-and-resize along a tangent of the boxes.

    Forward mode: how the crops of `crop_and_resize` change as the boxes
    move along `boxes_tangent`.  Each crop element is the image's slope at
    the sample along y and x times how fast the sample's row and column
    coordinates move, with exactly the per-element factors of
    `crop_and_resize_grad_boxes` (TensorFlow's ``CropAndResizeGradBoxes``),
    so that the boxes gradient is this map's transpose:
    ``sum(jvp(t) * g) == sum(t * grad_boxes(g))`` up to rounding.  Samples
    outside the image are 0.  Bilinear only, as the boxes gradient.

    Parameters
    ----------
    image : array_like of shape (batch, image_height, image_width, depth)
        Any dtype `crop_and_resize` accepts; read as float32.
    boxes : array_like of shape (num_boxes, 4)
        Finite ``[y1, x1, y2, x2]`` in normalized coordinates (float32).
    box_ind : array_like of int, shape (num_boxes,)
        Image of each box, in ``[0, batch)``.
    boxes_tangent : array_like of shape (num_boxes, 4)
        Direction of the boxes' motion, ``[dy1, dx1, dy2, dx2]`` per box,
        converted to float32; NaN and infinities are allowed and propagate.
    crop_size : int or sequence of 2 ints
        ``[crop_height, crop_width]``, both positive; an int is a square.
    method : {"bilinear"}
        Only bilinear sampling has a boxes derivative.
    {crops_options}

    Returns
    -------
    ndarray of the shape and dtype `crop_and_resize` returns

    Raises
    ------
    ValueError
        Bad shapes, non-finite boxes, a method other than ``"bilinear"``, a
        bad `out`, or an output too large to index.
    IndexError
        A `box_ind` value outside ``[0, batch)``.
    TypeError
        Non-numeric, complex or boolean inputs; an unsupported image dtype.

    Notes
    -----
    The sampling coordinates, the slopes and the factors are those of the
    boxes gradient, which rounds the spacing of the samples as
    ``(y2 - y1) * ((H - 1) / (crop_height - 1))``; docs/semantics.md gives
    the float32 order of every operation.  As in the boxes gradient, a
    sample on a whole pixel row (column) has a zero slope along ``y``
    (``x``), so a box whose samples all fall on whole pixels has a zero
    JVP whatever the tangent.

    Examples
    --------
    A ramp rising by 3 per row: moving the box down by ``t`` (both ``y1``
    and ``y2``) moves every sample by ``2 * t`` rows, so the crops rise by
    ``6 * t``:

    >>> import numpy as np
    >>> import cropgrad
    >>> image = np.arange(9, dtype=np.float32).reshape(1, 3, 3, 1)
    >>> boxes = [[0.25, 0.25, 0.75, 0.75]]
    >>> jvp = cropgrad.crop_and_resize_jvp_boxes(
    ...     image, boxes, [0], [[1.0, 0.0, 1.0, 0.0]], [2, 2]
    ... )
    >>> jvp[0, :, :, 0]
    array([[6., 6.],
           [6., 6.]], dtype=float32)
    """
    o = _options(method, ("bilinear",), data_format, num_threads, flush_denormals)
    a = _crops(image, boxes, box_ind, crop_size, o, data_format, boxes_tangent)
    index, index_code, result = _gated_crops(
        _core.check_crop_and_resize_jvp_boxes, a, o, out
    )
    _core.crop_and_resize_jvp_boxes(
        a.image,
        a.image_code,
        a.boxes,
        a.tangent,
        index,
        index_code,
        a.crop_h,
        a.crop_w,
        o.method,
        o.layout,
        result,
        o.threads,
        o.flush,
    )
    return result
