"""cropgrad for JAX: crop-and-resize, RoIAlign and their gradients as XLA calls.

cropgrad's ops as JAX primitives: TensorFlow's crop-and-resize family
(`crop_and_resize`, `crop_and_resize_grad_image`,
`crop_and_resize_grad_boxes`) and torchvision's RoIAlign family
(`roi_align`, `roi_align_grad_image`, `roi_align_grad_boxes`,
`roi_align_jvp_boxes`).  They run eagerly and under `jax.jit`, `jax.vmap`,
`jax.pmap`, `jax.shard_map`, `jax.lax.scan` and `jax.checkpoint` on CPU
devices.  Each op is one XLA FFI call into the compiled kernels (through
``cropgrad._jax.handlers``), which read and write XLA's buffers in place:
no Python callback, no copy, no GIL.

Derivatives: `crop_and_resize` and `roi_align` are differentiable in
forward and reverse mode with respect to the image (any number of times)
and the boxes (bilinear; once).  Each op has a forward-mode rule, linear in
the tangents, and JAX transposes it for reverse mode, the transposes being
cropgrad's gradient kernels: `jax.grad`, `jax.vjp`, `jax.jvp`,
`jax.jacfwd`, `jax.jacrev` and `jax.hessian` all work, and no result
depends on which inputs are differentiated.  What has no kernel raises
NotImplementedError: a second derivative along the boxes, and forward mode
of `crop_and_resize_grad_image` or `roi_align_grad_image` along the boxes
(reverse mode of them works).

RoIAlign computes as the NumPy API does: float64 data in float64 (with
``jax_enable_x64``), everything else in float32, its results in the
image's (or the gradient's) floating dtype, rounded once.

Crop-and-resize reads float64 images exactly, but computes in float32, as
TensorFlow does (`crop_and_resize` returns its crops in the image's
floating dtype, as JAX's ops do: float16 and bfloat16 rounded once,
float64 widened exactly; the NumPy API keeps float32): finite-difference
checks need a step float32 rounding
does not swamp (``jax.test_util.check_grads(..., eps=1e-2)`` for the image,
on which the ops are linear; ``eps=1e-3`` and tolerance 1e-2 for boxes well
inside the image).

jax.export: the ops are custom calls, which `jax.export.export` accepts
when `FFI_TARGETS` are listed as known ones, and the process running the
exported function must import cropgrad.jax (registering the handlers)::

    checks = [jax.export.DisabledSafetyCheck.custom_call(t) for t in FFI_TARGETS]
    exported = jax.export.export(jax.jit(f), disabled_checks=checks)(*args)
    blob = exported.serialize()
    # elsewhere, after importing cropgrad.jax:
    jax.export.deserialize(blob).call(*args)

Results are the NumPy API's bits, computed as XLA:CPU computes everything
else: with flush-to-zero and denormals-are-zero, TensorFlow's arithmetic.
They equal ``cropgrad.crop_and_resize(..., flush_denormals=True)`` (and its
siblings), which is the default's result whenever no subnormal number occurs.

Argument errors are found while tracing and raised as the NumPy API raises
them (`TypeError`, `ValueError`, `NotImplementedError`, naming the
argument).  Errors in the data (a non-finite box, a `box_ind` value outside
``[0, batch)``) can only be found when the kernel runs: the call then
raises JAX's runtime error (`jax.errors.JaxRuntimeError`; JAX's fast path
for cached calls raises it as a `ValueError`), whose message is cropgrad's,
prefixed by the op and the exception the NumPy API would raise, e.g.
``cropgrad.jax.crop_and_resize: IndexError: box_ind has values outside
[0, batch_size) = [0, 2): box_ind[1] = 5``.  Under `jax.vmap` the box is
named by the caller's indices (``box_ind[1, 1] = 2``).

Threads: ``num_threads`` is fixed when the call is traced (it is an
attribute of the XLA call, like the method).  The default, None, is
`DEFAULT_THREADS`; see its comment for why.
"""

try:
    import jax as _jax
    import jax.numpy as jnp
except ImportError as _exc:  # not installed, or hidden
    raise ImportError(
        "cropgrad.jax needs JAX, which could not be imported: "
        'pip install "cropgrad[jax]"'
    ) from _exc
else:
    # The oldest release whose abstract arrays carry shard_map's manual
    # axes (ShapedArray's manual_axis_type), which the primitives' types are
    # made of: an older one is told so at import, not failed inside a trace.
    _OLDEST = (0, 10)
    if tuple(int(p) for p in _jax.__version__.split(".")[:2]) < _OLDEST:
        raise ImportError(
            f"cropgrad.jax needs JAX {_OLDEST[0]}.{_OLDEST[1]} or newer, found "
            f"{_jax.__version__}: upgrade it (pip install -U jax jaxlib)"
        )

from cropgrad._jax import batching as _batching
from cropgrad._jax import checks as _checks
from cropgrad._jax import derivatives as _derivatives
from cropgrad._jax import ops as _ops
from cropgrad._jax import registration as _registration
from cropgrad._jax.primitives import bind as _bind

__all__ = [
    "DEFAULT_THREADS",
    "FFI_TARGETS",
    "crop_and_resize",
    "crop_and_resize_grad_boxes",
    "crop_and_resize_grad_image",
    "roi_align",
    "roi_align_grad_boxes",
    "roi_align_grad_image",
    "roi_align_jvp_boxes",
]

# num_threads=None means this many threads; 0 is the library's default, that
# of the NumPy API: OpenMP's default count on the calling thread, which for
# XLA's threads is OMP_NUM_THREADS or the CPU count (threadpoolctl's limits
# are per thread and do not reach them).
#
# Why not 1: XLA runs the call on one of its threads and, unless it has
# independent work to run beside it, waits for it with the rest of its pool
# idle, so an OpenMP team has the cores to itself, and its threads do not
# spin at XLA's expense once the call returns.  The benchmark row
# detector-train-step-jax (a jitted training step with an independent
# branch XLA may run beside the call) measures the default against one
# thread: benchmarks/README.md has the figures.
DEFAULT_THREADS = 0

# The XLA FFI targets the ops lower to ("cropgrad_" and the op's name:
# cropgrad_crop_and_resize, cropgrad_roi_align and their gradients' and
# boxes JVPs'), registered for the CPU platform when cropgrad.jax is
# imported.  jax.export refuses custom calls it does not
# know to be stable unless told otherwise: pass
# [jax.export.DisabledSafetyCheck.custom_call(t) for t in FFI_TARGETS] as
# `disabled_checks` (and import cropgrad.jax before calling what it made).
FFI_TARGETS = _ops.TARGETS

# Importing cropgrad.jax makes the adapter whole: XLA learns the handlers,
# JAX the vmap, JVP and transpose rules of the primitives.
_registration.register_handlers()
_batching.install()
_derivatives.install()


def crop_and_resize(
    image,
    boxes,
    box_ind,
    crop_size,
    method="bilinear",
    extrapolation_value=0.0,
    *,
    data_format="NHWC",
    num_threads=None,
):
    """Crop boxes out of a batch of images and resize them, in JAX.

    TensorFlow's ``CropAndResize`` as an XLA custom call; the same bits as
    `cropgrad.crop_and_resize` (with ``flush_denormals=True``, XLA:CPU's
    arithmetic).  Differentiable in forward and reverse mode with respect to
    `image` (floating dtypes; any number of times: the image tangent is the
    op on it with ``extrapolation_value=0``) and `boxes` (bilinear; once:
    the tangent is `cropgrad.crop_and_resize_jvp_boxes`).

    Parameters
    ----------
    image : array of shape (batch, image_height, image_width, depth)
        uint8, uint16, int8, int16, int32, int64, float16, bfloat16 (read
        exactly as float32), float32 or float64 (shape ``(batch, depth,
        image_height, image_width)`` with ``data_format="NCHW"``).
    boxes : array of shape (num_boxes, 4)
        ``[y1, x1, y2, x2]`` in normalized coordinates, computed in float32
        (other real dtypes are converted); they must be finite.
    box_ind : array of int, shape (num_boxes,)
        Image of each box, in ``[0, batch)``.
    crop_size : int or sequence of 2 ints
        ``[crop_height, crop_width]``, both positive (an int: a square); static.
    method : {"bilinear", "nearest"}, default "bilinear"
        Static.  The boxes gradient of nearest sampling is zero.
    extrapolation_value : float, default 0.0
        Value of samples outside the image; static.
    data_format : {"NHWC", "NCHW"}, default "NHWC"
        Layout of `image` and of the result.
    num_threads : int, optional
        Threads of the kernel, 1 to 1024; static.  Default:
        `DEFAULT_THREADS`.  The result does not depend on it.

    Returns
    -------
    jax.Array of shape (num_boxes, crop_height, crop_width, depth)
        (``(num_boxes, depth, crop_height, crop_width)`` with NCHW.)  In the
        image's dtype when it is a floating one (computed in float32 and
        rounded once), float32 for integer images.

    Raises
    ------
    TypeError, ValueError, NotImplementedError
        While tracing: a bad argument, named in the message.
    jax.errors.JaxRuntimeError
        When the call runs: a non-finite box or a `box_ind` value outside
        ``[0, batch)`` (cropgrad's message; JAX's fast path for cached calls
        raises it as a ValueError).

    Examples
    --------
    >>> import jax, jax.numpy as jnp
    >>> import cropgrad.jax as cgj
    >>> image = jnp.arange(9.0).reshape(1, 3, 3, 1)
    >>> boxes = jnp.array([[0.0, 0.0, 1.0, 1.0]])
    >>> crops = jax.jit(cgj.crop_and_resize, static_argnums=3)(
    ...     image, boxes, jnp.array([0]), (2, 2))
    >>> crops[0, :, :, 0]
    Array([[0., 2.],
           [6., 8.]], dtype=float32)
    >>> jax.grad(lambda x: cgj.crop_and_resize(x, boxes, [0], (2, 2)).sum())(
    ...     image)[0, :, :, 0]
    Array([[1., 0., 1.],
           [0., 0., 0.],
           [1., 0., 1.]], dtype=float32)
    """
    options = _checks.options(method, data_format, num_threads, DEFAULT_THREADS)
    crop_size = _checks.crop_size(crop_size)
    extrapolation_value = _checks.extrapolation_value(extrapolation_value)
    image = _checks.image(image, options["data_format"])
    boxes, box_ind = _checks.boxes_and_index(boxes, box_ind)
    crops = _bind(
        "crop_and_resize",
        image,
        boxes,
        box_ind,
        crop_size=crop_size,
        extrapolation_value=extrapolation_value,
        **options,
    )
    # JAX's ops return results in their input's floating dtype: float16
    # and bfloat16 rounded once from the float32 crops, float64 widened
    # exactly.  The primitive itself keeps float32.
    if jnp.issubdtype(image.dtype, jnp.floating) and image.dtype != jnp.float32:
        crops = crops.astype(image.dtype)
    return crops


def crop_and_resize_grad_image(
    grads,
    boxes,
    box_ind,
    image_shape,
    dtype=jnp.float32,
    method="bilinear",
    *,
    data_format="NHWC",
    num_threads=None,
):
    """Gradient of crop-and-resize with respect to the image, in JAX.

    TensorFlow's ``CropAndResizeGradImage`` (deterministic, and the same bits
    as `cropgrad.crop_and_resize_grad_image` with ``flush_denormals=True``).
    It is linear in `grads`, and differentiable with respect to `grads` (its
    transpose is the forward op) and, bilinear, in reverse mode, `boxes`
    (forward mode along the boxes has no kernel: NotImplementedError).

    Parameters
    ----------
    grads : array of shape (num_boxes, crop_height, crop_width, depth)
        Gradient flowing into each crop, computed in float32
        (``(num_boxes, depth, crop_height, crop_width)`` with NCHW).
    boxes : array of shape (num_boxes, 4)
        Finite ``[y1, x1, y2, x2]`` in normalized coordinates.
    box_ind : array of int, shape (num_boxes,)
        Image of each box, in ``[0, batch)``.
    image_shape : sequence of 4 ints
        The output's shape, in the layout's order; static.
    dtype : {float32, float16, bfloat16, float64}, default float32
        Output dtype (float64 needs ``jax_enable_x64``, otherwise JAX makes
        it float32); float16 and bfloat16 accumulate in float32 and are
        rounded once.
    method : {"bilinear", "nearest"}, default "bilinear"
    data_format : {"NHWC", "NCHW"}, default "NHWC"
    num_threads : int, optional
        Threads of the kernel, 1 to 1024; static.  Default:
        `DEFAULT_THREADS`.

    Returns
    -------
    jax.Array of shape `image_shape`, dtype `dtype`

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> import cropgrad.jax as cgj
    >>> grads = jnp.ones((1, 2, 2, 1))
    >>> boxes = jnp.array([[0.0, 0.0, 1.0, 1.0]])
    >>> cgj.crop_and_resize_grad_image(grads, boxes, [0], (1, 3, 3, 1))[0, :, :, 0]
    Array([[1., 0., 1.],
           [0., 0., 0.],
           [1., 0., 1.]], dtype=float32)
    """
    options = _checks.options(method, data_format, num_threads, DEFAULT_THREADS)
    dtype = _checks.output_dtype(dtype)
    grads = _checks.grads(grads, options["data_format"])
    boxes, box_ind = _checks.boxes_and_index(boxes, box_ind, grads)
    image_shape = _checks.image_shape(image_shape, options["data_format"])
    return _bind(
        "crop_and_resize_grad_image",
        grads,
        boxes,
        box_ind,
        image_shape=image_shape,
        dtype=dtype,
        **options,
    )


def crop_and_resize_grad_boxes(
    grads,
    image,
    boxes,
    box_ind,
    method="bilinear",
    *,
    data_format="NHWC",
    num_threads=None,
):
    """Gradient of crop-and-resize with respect to the boxes, in JAX.

    TensorFlow's ``CropAndResizeGradBoxes`` (bilinear only, as there); the
    same bits as `cropgrad.crop_and_resize_grad_boxes` with
    ``flush_denormals=True``.  Linear in `grads` (its transpose is the boxes
    JVP) and in `image` (forward mode only: reverse mode along the image has
    no kernel); not differentiable with respect to `boxes`.

    Parameters
    ----------
    grads : array of shape (num_boxes, crop_height, crop_width, depth)
        Gradient flowing into each crop, computed in float32.
    image : array of shape (batch, image_height, image_width, depth)
        The forward op's image, of any dtype `crop_and_resize` accepts.
    boxes : array of shape (num_boxes, 4)
        Finite ``[y1, x1, y2, x2]`` in normalized coordinates.
    box_ind : array of int, shape (num_boxes,)
        Image of each box, in ``[0, batch)``.
    method : {"bilinear"}
    data_format : {"NHWC", "NCHW"}, default "NHWC"
    num_threads : int, optional
        Threads of the kernel, 1 to 1024; static.  Default:
        `DEFAULT_THREADS`.

    Returns
    -------
    jax.Array of shape (num_boxes, 4), float32
        Gradient with respect to ``[y1, x1, y2, x2]`` of each box.

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> import cropgrad.jax as cgj
    >>> image = jnp.arange(9.0).reshape(1, 3, 3, 1)
    >>> grads = jnp.ones((1, 2, 2, 1))
    >>> boxes = jnp.array([[0.25, 0.25, 0.75, 0.75]])
    >>> cgj.crop_and_resize_grad_boxes(grads, image, boxes, [0])
    Array([[12.,  4., 12.,  4.]], dtype=float32)
    """
    options = _checks.options(
        method, data_format, num_threads, DEFAULT_THREADS, methods=("bilinear",)
    )
    grads = _checks.grads(grads, options["data_format"])
    image = _checks.image(image, options["data_format"])
    boxes, box_ind = _checks.boxes_and_index(boxes, box_ind, grads)
    return _bind("crop_and_resize_grad_boxes", grads, image, boxes, box_ind, **options)


# --------------------------------------------------------------------------
# RoIAlign: torchvision's dialect of box sampling (boxes [x1, y1, x2, y2] in
# the input image's pixels, NCHW by default), computed in float64 for
# float64 data and in float32 otherwise, as the NumPy API computes it.


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
    data_format : {"NCHW", "NHWC"}, default "NCHW"
        Layout of `image` and of the result.
    num_threads : int, optional
        Threads of the kernel, 1 to 1024; static.  Default:
        `DEFAULT_THREADS`.  The result does not depend on it.

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
    options = _checks.roi_options(
        spatial_scale,
        sampling_ratio,
        aligned,
        data_format,
        num_threads,
        DEFAULT_THREADS,
    )
    image = _checks.image(image, options["data_format"])
    boxes, box_ind = _checks.boxes_and_index(
        boxes,
        box_ind,
        dtype=_checks.arithmetic(image.dtype),
        columns=_checks.ROI_COLUMNS,
    )
    output_size = _checks.output_size(output_size)
    dtype = _checks.result_dtype(dtype, image.dtype)
    return _bind(
        "roi_align",
        image,
        boxes,
        box_ind,
        output_size=output_size,
        dtype=dtype,
        **options,
    )


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
    data_format : {"NCHW", "NHWC"}, default "NCHW"
    num_threads : int, optional
        Threads of the kernel, 1 to 1024; static.  Default:
        `DEFAULT_THREADS`.

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
    options = _checks.roi_options(
        spatial_scale,
        sampling_ratio,
        aligned,
        data_format,
        num_threads,
        DEFAULT_THREADS,
    )
    raw = _checks.array(grads, "grads")
    grads = _checks.roi_grads(raw, options["data_format"])
    boxes, box_ind = _checks.boxes_and_index(
        boxes, box_ind, grads, dtype=grads.dtype, columns=_checks.ROI_COLUMNS
    )
    image_shape = _checks.image_shape(image_shape, options["data_format"])
    dtype = _checks.result_dtype(dtype, raw.dtype)
    return _bind(
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
    options = _checks.roi_options(
        spatial_scale,
        sampling_ratio,
        aligned,
        data_format,
        num_threads,
        DEFAULT_THREADS,
    )
    image = _checks.image(image, options["data_format"])
    arith = _checks.arithmetic(image.dtype)
    grads = _checks.roi_grads(grads, options["data_format"], arith)
    boxes, box_ind = _checks.boxes_and_index(
        boxes, box_ind, grads, dtype=arith, columns=_checks.ROI_COLUMNS
    )
    return _bind("roi_align_grad_boxes", grads, image, boxes, box_ind, **options)


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
    options = _checks.roi_options(
        spatial_scale,
        sampling_ratio,
        aligned,
        data_format,
        num_threads,
        DEFAULT_THREADS,
    )
    image = _checks.image(image, options["data_format"])
    arith = _checks.arithmetic(image.dtype)
    boxes, box_ind = _checks.boxes_and_index(
        boxes, box_ind, dtype=arith, columns=_checks.ROI_COLUMNS
    )
    boxes_tangent = _checks.boxes_tangent(boxes_tangent, boxes.shape[0], arith)
    output_size = _checks.output_size(output_size)
    dtype = _checks.result_dtype(dtype, image.dtype)
    return _bind(
        "roi_align_jvp_boxes",
        image,
        boxes,
        box_ind,
        boxes_tangent,
        output_size=output_size,
        dtype=dtype,
        **options,
    )
