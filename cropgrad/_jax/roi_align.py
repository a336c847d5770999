"""cropgrad.jax's RoIAlign functions: torchvision's dialect of box sampling.

Boxes are ``[x1, y1, x2, y2]`` in the input image's pixels and images NCHW
by default; float64 data is computed in float64, everything else in
float32, as the NumPy API computes it.  Each function converts its
arguments (``checks``) and binds its primitive; cropgrad.jax re-exports
them.

May import: JAX, NumPy, ``checks`` and ``primitives``.
"""

from cropgrad._api import docstrings as _docs
from cropgrad._jax import checks
from cropgrad._jax.primitives import bind


def _pooled(name, options, output_size, dtype, *operands):
    """The pooled output of op `name`, `roi_align` or its boxes JVP, of the
    caller's `operands` (the image, boxes and box_ind, then the JVP's boxes
    tangent), converted in that order, then `output_size` and `dtype`."""
    image, boxes, box_ind, *tangent = operands
    image = checks.image(image, options["data_format"])
    arith = checks.arithmetic(image.dtype)
    boxes, box_ind = checks.roi_boxes(boxes, box_ind, arith)
    tangent = [checks.boxes_tangent(t, boxes.shape[0], arith) for t in tangent]
    output_size = checks.output_size(output_size)
    dtype = checks.result_dtype(dtype, image.dtype)
    return bind(
        name,
        image,
        boxes,
        box_ind,
        *tangent,
        output_size=output_size,
        dtype=dtype,
        **options,
    )


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
    data_format="NCHW",
    num_threads=None,
):
    """Pool each box into `output_size` bins by averaging bilinear samples, in JAX.

    torchvision's ``roi_align`` (average pooling) as an XLA custom call; the
    same bits as `cropgrad.roi_align` (with ``flush_denormals=True``,
    XLA:CPU's arithmetic).  The output's shape is static; with the adaptive
    `sampling_ratio` the kernel counts each box's samples when it runs.
    Differentiable in forward and reverse mode with respect to `image`
    (floating dtypes; any number of times: the op is linear in it) and
    `boxes` (once: the tangent is `roi_align_jvp_boxes`, whose transpose is
    `roi_align_grad_boxes`).

    Parameters
    ----------
    image : array of shape (batch, channels, height, width)
        The feature map (``(batch, height, width, channels)`` with
        ``data_format="NHWC"``): uint8, uint16, int8, int16, int32, int64,
        float16, bfloat16, float32 or float64.  float64 images are computed
        in float64 (which needs ``jax_enable_x64``), every other dtype in
        float32 (float16 and bfloat16 read exactly).
    boxes : array of shape (num_boxes, 4)
        Finite ``[x1, y1, x2, y2]`` per box in the input image's
        coordinates, converted to the arithmetic type.  torchvision's
        ``Tensor[K, 5]`` is ``boxes[:, 1:]`` with ``box_ind = boxes[:, 0]``.
    box_ind : array of int, shape (num_boxes,)
        Image of the batch each box belongs to, in ``[0, batch)``.
    output_size : int or (int, int)
        ``(out_height, out_width)`` bins per box (an int: a square); static.
    spatial_scale : float, default 1.0
        Feature-map pixels per input pixel (``1/16`` for a stride-16 map);
        static.
    sampling_ratio : int, default -1
        Samples per bin along each axis, at most 4096; 0 or less: adaptive,
        ``ceil(bin size)`` per box, counted by the kernel; static.
    aligned : bool, default False
        Shift the scaled boxes by -0.5 pixel (torchvision's
        ``aligned=True``); static.
    dtype : {float32, float64, float16, bfloat16}, optional
        Output dtype; static.  Default: the image's when it is a floating
        dtype, float32 otherwise.  Computed in the arithmetic type and
        rounded once (float16 and bfloat16 from float32 arithmetic only).
    {jax_options}

    Returns
    -------
    jax.Array of shape (num_boxes, channels, out_height, out_width)
        (``(num_boxes, out_height, out_width, channels)`` with NHWC.)

    Raises
    ------
    TypeError, ValueError, NotImplementedError
        While tracing: a bad argument, named in the message.
    jax.errors.JaxRuntimeError
        When the call runs: a non-finite box, a `box_ind` value outside
        ``[0, batch)``, or a box whose adaptive grid would put more than
        2**24 samples in a bin (cropgrad's message; JAX's fast path for
        cached calls raises it as a ValueError).

    Examples
    --------
    >>> import jax, jax.numpy as jnp
    >>> import cropgrad.jax as cgj
    >>> image = jnp.arange(16.0).reshape(1, 1, 4, 4)
    >>> boxes = jnp.array([[0.0, 0.0, 4.0, 4.0]])
    >>> pool = jax.jit(cgj.roi_align, static_argnums=3)
    >>> pool(image, boxes, jnp.array([0]), 2)[0, 0]
    Array([[ 5.  ,  6.75],
           [12.  , 13.75]], dtype=float32)
    >>> jax.grad(lambda b: cgj.roi_align(image, b, [0], 2).sum())(boxes)
    Array([[1.875, 7.5  , 1.125, 4.5  ]], dtype=float32)
    """
    options = checks.roi_options(
        spatial_scale, sampling_ratio, aligned, data_format, num_threads
    )
    return _pooled("roi_align", options, output_size, dtype, image, boxes, box_ind)


@_docs.shared
def roi_align_grad_image(
    grads,
    boxes,
    box_ind,
    image_shape,
    *,
    spatial_scale=1.0,
    sampling_ratio=-1,
    aligned=False,
    dtype=None,
    data_format="NCHW",
    num_threads=None,
):
    """Gradient of `roi_align` with respect to the image, in JAX.

    torchvision's backward of ``roi_align``, deterministic; the same bits as
    `cropgrad.roi_align_grad_image` with ``flush_denormals=True``.  Linear
    in `grads` (its transpose is `roi_align`) and differentiable, in reverse
    mode, with respect to `boxes` (forward mode along the boxes has no
    kernel: NotImplementedError).

    Parameters
    ----------
    grads : array of shape (num_boxes, channels, out_height, out_width)
        The gradient flowing into the pooled output (``(num_boxes,
        out_height, out_width, channels)`` with NHWC); float64 is computed
        in float64, every other dtype in float32.
    boxes : array of shape (num_boxes, 4)
        Finite ``[x1, y1, x2, y2]``, converted to the arithmetic type.
    box_ind : array of int, shape (num_boxes,)
        Image of each box, in ``[0, batch)``.
    image_shape : sequence of 4 ints
        The image's shape in the layout's order: the output's shape; static.
    spatial_scale, sampling_ratio, aligned
        As for `roi_align`; static.
    dtype : {float32, float64, float16, bfloat16}, optional
        Output dtype; static.  Default: the dtype of `grads` when it is a
        floating one, float32 otherwise.  Accumulated in the arithmetic type
        and rounded once.
    {jax_options}

    Returns
    -------
    jax.Array of shape `image_shape`

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> import cropgrad.jax as cgj
    >>> grads = jnp.ones((1, 1, 1, 1))
    >>> boxes = jnp.array([[0.0, 0.0, 2.0, 2.0]])
    >>> cgj.roi_align_grad_image(
    ...     grads, boxes, [0], (1, 1, 3, 3), sampling_ratio=1
    ... )[0, 0]
    Array([[0., 0., 0.],
           [0., 1., 0.],
           [0., 0., 0.]], dtype=float32)
    """
    options = checks.roi_options(
        spatial_scale, sampling_ratio, aligned, data_format, num_threads
    )
    raw = checks.array(grads, "grads")
    grads = checks.roi_grads(raw, options["data_format"])
    boxes, box_ind = checks.roi_boxes(boxes, box_ind, grads.dtype, grads)
    image_shape = checks.image_shape(image_shape, options["data_format"])
    dtype = checks.result_dtype(dtype, raw.dtype)
    return bind(
        "roi_align_grad_image",
        grads,
        boxes,
        box_ind,
        image_shape=image_shape,
        dtype=dtype,
        **options,
    )


def roi_align_grad_boxes(
    grads,
    image,
    boxes,
    box_ind,
    *,
    spatial_scale=1.0,
    sampling_ratio=-1,
    aligned=False,
    data_format="NCHW",
    num_threads=None,
):
    """Gradient of `roi_align` with respect to the boxes, in JAX.

    What torchvision does not compute: the derivative of the sampling with
    respect to ``x1, y1, x2, y2``, the adaptive grid held constant; the same
    bits as `cropgrad.roi_align_grad_boxes` with ``flush_denormals=True``.
    Linear in `grads` (its transpose is `roi_align_jvp_boxes`) and in
    `image` (forward mode only: reverse mode along the image has no
    kernel); not differentiable with respect to `boxes`.

    Parameters
    ----------
    grads : array of shape (num_boxes, channels, out_height, out_width)
        The gradient flowing into the pooled output (NHWC: ``(num_boxes,
        out_height, out_width, channels)``), converted to the image's
        arithmetic type.
    image, boxes, box_ind
        As for `roi_align`.
    spatial_scale, sampling_ratio, aligned, data_format, num_threads
        As for `roi_align`; static.

    Returns
    -------
    jax.Array of shape (num_boxes, 4)
        ``d/d[x1, y1, x2, y2]`` per box, in the arithmetic type (float64
        for float64 images, float32 otherwise).

    Examples
    --------
    A ramp rising by 1 per column: moving ``x1`` (or ``x2``) by one moves
    the samples by a half on average, in each of the four bins:

    >>> import jax.numpy as jnp
    >>> import cropgrad.jax as cgj
    >>> image = jnp.tile(jnp.arange(5.0), (1, 1, 5, 1))
    >>> grads = jnp.ones((1, 1, 2, 2))
    >>> cgj.roi_align_grad_boxes(grads, image, jnp.array([[1.0, 1, 3, 3]]), [0])
    Array([[2., 0., 2., 0.]], dtype=float32)
    """
    options = checks.roi_options(
        spatial_scale, sampling_ratio, aligned, data_format, num_threads
    )
    image = checks.image(image, options["data_format"])
    arith = checks.arithmetic(image.dtype)
    grads = checks.roi_grads(grads, options["data_format"], arith)
    boxes, box_ind = checks.roi_boxes(boxes, box_ind, arith, grads)
    return bind("roi_align_grad_boxes", grads, image, boxes, box_ind, **options)


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
    data_format="NCHW",
    num_threads=None,
):
    """Derivative of `roi_align` along a tangent of the boxes, in JAX.

    How the pooled output changes as the boxes move along `boxes_tangent`,
    the adaptive grid held constant: the same bits as
    `cropgrad.roi_align_jvp_boxes` with ``flush_denormals=True``, and what
    `jax.jvp` of `roi_align` computes for a boxes tangent.  Linear in
    `boxes_tangent` (its transpose is `roi_align_grad_boxes`) and in
    `image` (forward mode only); not differentiable with respect to
    `boxes`.

    Parameters
    ----------
    image, boxes, box_ind, output_size
        As for `roi_align`.
    boxes_tangent : array of shape (num_boxes, 4)
        ``[t_x1, t_y1, t_x2, t_y2]`` per box, converted to the arithmetic
        type; NaN and infinities are allowed and propagate.
    spatial_scale, sampling_ratio, aligned, dtype, data_format, num_threads
        As for `roi_align`; static.

    Returns
    -------
    jax.Array of the shape and dtype `roi_align` returns

    Examples
    --------
    A ramp rising by 1 per column; moving the box right by 1 moves every
    sample right by 1:

    >>> import jax.numpy as jnp
    >>> import cropgrad.jax as cgj
    >>> image = jnp.tile(jnp.arange(5.0), (1, 1, 5, 1))
    >>> boxes = jnp.array([[1.0, 1.0, 3.0, 3.0]])
    >>> cgj.roi_align_jvp_boxes(image, boxes, [0], [[1.0, 0, 1, 0]], 2)[0, 0]
    Array([[1., 1.],
           [1., 1.]], dtype=float32)
    """
    options = checks.roi_options(
        spatial_scale, sampling_ratio, aligned, data_format, num_threads
    )
    operands = image, boxes, box_ind, boxes_tangent
    return _pooled("roi_align_jvp_boxes", options, output_size, dtype, *operands)
