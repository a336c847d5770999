"""cropgrad for JAX: crop-and-resize, RoIAlign and their gradients as XLA calls.

cropgrad's ops as JAX primitives, the NumPy API's names and families:
TensorFlow's crop-and-resize family (`crop_and_resize`), torchvision's
RoIAlign family (`roi_align`) and PyTorch's grid sampling (`grid_sample`),
each the forward op, its image gradient (``<op>_grad_image``), its
coordinates' gradient (``<op>_grad_boxes``, ``<op>_grad_grid``) and
their JVP (``<op>_jvp_boxes``, ``<op>_jvp_grid``).  They run eagerly and
under `jax.jit`, `jax.vmap`, `jax.pmap`, `jax.shard_map`, `jax.lax.scan`
and `jax.checkpoint` on CPU devices.  Each op is one XLA FFI call into
the compiled kernels (through ``cropgrad._jax.handlers``), which read and
write XLA's buffers in place: no Python callback, no copy, no GIL.

Derivatives: `crop_and_resize`, `roi_align` and `grid_sample` are
differentiable in forward and reverse mode with respect to the image (any
number of times) and the boxes (bilinear; once) or the grid (once).  Each
op has a forward-mode rule, linear in the tangents, and JAX transposes it
for reverse mode, the transposes being cropgrad's gradient kernels:
`jax.grad`, `jax.vjp`, `jax.jvp`, `jax.jacfwd`, `jax.jacrev` and
`jax.hessian` all work, and no result depends on which inputs are
differentiated.  What has no kernel raises
NotImplementedError: a second derivative along the boxes or the grid, and
forward mode of an image gradient (``<op>_grad_image``) along the boxes or
the grid (reverse mode of them works).

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
`DEFAULT_THREADS`; its documentation says why.
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

import importlib as _importlib

from cropgrad import _ops as _model
from cropgrad._api import docstrings as _docs
from cropgrad._jax import batching as _batching
from cropgrad._jax import checks as _checks
from cropgrad._jax import derivatives as _derivatives
from cropgrad._jax import ops as _ops
from cropgrad._jax import registration as _registration
from cropgrad._jax.primitives import bind as _bind

__all__ = ["DEFAULT_THREADS", "FFI_TARGETS"]

# Every op of the model that JAX has is a function here, by its name: the
# crop-and-resize family's are defined below, every other family's in its
# own module, cropgrad._jax.<family>.
for _family in _model.FAMILIES.values():
    _module = None
    if _family.name != "crop_and_resize":
        _module = _importlib.import_module(f"cropgrad._jax.{_family.name}")
    for _op in _family.ops.values():
        if "jax" in _op.apis:
            if _module is not None:
                globals()[_op.name] = getattr(_module, _op.name)
            __all__ += [_op.name]
__all__.sort()
del _family, _module, _op

# num_threads=None's thread count: see its comment in cropgrad._jax.checks.
DEFAULT_THREADS = _checks.DEFAULT_THREADS

# The XLA FFI targets the ops lower to ("cropgrad_" and the op's name:
# cropgrad_crop_and_resize, cropgrad_roi_align, cropgrad_grid_sample and
# their gradients' and coordinates' JVPs'), registered for the CPU platform
# when cropgrad.jax is imported.  jax.export refuses custom calls it does
# not know to be stable unless told otherwise: pass
# [jax.export.DisabledSafetyCheck.custom_call(t) for t in FFI_TARGETS] as
# `disabled_checks` (and import cropgrad.jax before calling what it made).
FFI_TARGETS = _ops.TARGETS

# Importing cropgrad.jax makes the adapter whole: XLA learns the handlers,
# JAX the vmap, JVP and transpose rules of the primitives.
_registration.register_handlers()
_batching.install()
_derivatives.install()


def _in_image_dtype(crops, image):
    """The float32 `crops` of `image` as crop_and_resize and its boxes JVP
    return them: in the image's floating dtype, as JAX's ops return results
    (float16 and bfloat16 rounded once, float64 widened exactly).  The
    primitives themselves keep float32."""
    if jnp.issubdtype(image.dtype, jnp.floating) and image.dtype != jnp.float32:
        return crops.astype(image.dtype)
    return crops


@_docs.shared
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
    {jax_options}

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
    options = _checks.options(method, data_format, num_threads)
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
    return _in_image_dtype(crops, image)


@_docs.shared
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
    {jax_options}

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
    options = _checks.options(method, data_format, num_threads)
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


@_docs.shared
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
    {jax_options}

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
    options = _checks.options(method, data_format, num_threads, methods=("bilinear",))
    grads = _checks.grads(grads, options["data_format"])
    image = _checks.image(image, options["data_format"])
    boxes, box_ind = _checks.boxes_and_index(boxes, box_ind, grads)
    return _bind("crop_and_resize_grad_boxes", grads, image, boxes, box_ind, **options)


def crop_and_resize_jvp_boxes(
    image,
    boxes,
    box_ind,
    boxes_tangent,
    crop_size,
    method="bilinear",
    *,
    data_format="NHWC",
    num_threads=None,
):
    """Derivative of crop-and-resize along a tangent of the boxes, in JAX.

    How the crops of `crop_and_resize` change as the boxes move along
    `boxes_tangent`: the same bits as `cropgrad.crop_and_resize_jvp_boxes`
    with ``flush_denormals=True`` (in the image's floating dtype, as
    `crop_and_resize` returns it), and what `jax.jvp` of `crop_and_resize`
    computes for a boxes tangent.  Linear in `boxes_tangent` (its transpose
    is `crop_and_resize_grad_boxes`) and in `image` (forward mode only);
    not differentiable with respect to `boxes`.

    Parameters
    ----------
    image, boxes, box_ind, crop_size
        As for `crop_and_resize`.
    boxes_tangent : array of shape (num_boxes, 4)
        ``[dy1, dx1, dy2, dx2]`` per box, converted to float32; NaN and
        infinities are allowed and propagate.
    method : {"bilinear"}
        Only bilinear sampling has a boxes derivative.
    data_format, num_threads
        As for `crop_and_resize`; static.

    Returns
    -------
    jax.Array of the shape and dtype `crop_and_resize` returns

    Examples
    --------
    A ramp rising by 1 per column, 4 pixels wide; moving the box right by
    1 (the image's width is 1) moves every sample right by 3 pixels:

    >>> import jax.numpy as jnp
    >>> import cropgrad.jax as cgj
    >>> image = jnp.tile(jnp.arange(4.0), (1, 4, 1)).reshape(1, 4, 4, 1)
    >>> boxes = jnp.array([[0.1, 0.1, 0.6, 0.6]])
    >>> tangent = [[0.0, 1.0, 0.0, 1.0]]
    >>> cgj.crop_and_resize_jvp_boxes(image, boxes, [0], tangent, 2)[0, :, :, 0]
    Array([[3., 3.],
           [3., 3.]], dtype=float32)
    """
    options = _checks.options(method, data_format, num_threads, methods=("bilinear",))
    crop_size = _checks.crop_size(crop_size)
    image = _checks.image(image, options["data_format"])
    boxes, box_ind = _checks.boxes_and_index(boxes, box_ind)
    boxes_tangent = _checks.boxes_tangent(boxes_tangent, boxes.shape[0], jnp.float32)
    crops = _bind(
        "crop_and_resize_jvp_boxes",
        image,
        boxes,
        box_ind,
        boxes_tangent,
        crop_size=crop_size,
        **options,
    )
    return _in_image_dtype(crops, image)
