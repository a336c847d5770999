"""cropgrad for JAX: crop-and-resize and its gradients as XLA custom calls.

The three ops of cropgrad as JAX functions.  They run eagerly and under
`jax.jit`, `jax.vmap`, `jax.pmap` and `jax.shard_map` on CPU devices, and
`crop_and_resize` is differentiable in reverse mode with respect to the
image and the boxes, its backward pass being cropgrad's own gradient
kernels.  Each op is one XLA FFI call into the compiled kernels
(``cropgrad._xla``), which read and write XLA's buffers in place: no Python
callback, no copy, no GIL.

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
[0, batch_size) = [0, 2): box_ind[1] = 5``.

Threads: ``num_threads`` is fixed when the call is traced (it is an
attribute of the XLA call, like the method).  The default, None, is
`DEFAULT_THREADS`; see its comment for why.
"""

import functools

import numpy as np

try:
    import jax
    import jax.numpy as jnp
except ImportError as _exc:  # not installed, or hidden
    raise ImportError(
        "cropgrad.jax needs JAX, which could not be imported: "
        'pip install "cropgrad[jax]"'
    ) from _exc

from cropgrad import _validation as _v
from cropgrad import _xla

__all__ = [
    "DEFAULT_THREADS",
    "crop_and_resize",
    "crop_and_resize_grad_boxes",
    "crop_and_resize_grad_image",
]

# num_threads=None means this many threads; 0 is the library's default, that
# of the NumPy API: OpenMP's default count on the calling thread, which for
# XLA's threads is OMP_NUM_THREADS or the CPU count (threadpoolctl's limits
# are per thread and do not reach them).
#
# Why not 1: XLA runs the call on one of its threads and, unless it has
# independent work to run beside it, waits for it with the rest of its pool
# idle, so an OpenMP team has the cores to itself.  Measured in a jitted
# detector training step (crops of a feature map, a dense head, and an
# independent dense branch XLA may run at the same time) on a shared 2-core
# machine, the default team (2 threads) took 0.65 to 0.69 times as long as
# one thread when the second core was free, and no longer when other
# processes kept it busy, at the same CPU time (within 3%): its threads do
# not spin at XLA's expense.  Benchmark row detector-train-step-jax
# measures it.
DEFAULT_THREADS = 0

_IMAGE_DTYPES = tuple(
    np.dtype(t)
    for t in (
        np.uint8,
        np.int8,
        np.uint16,
        np.int16,
        np.int32,
        np.int64,
        np.float16,
        np.float32,
        np.float64,
    )
)
_TARGETS = {
    "forward": "cropgrad_crop_and_resize",
    "grad_image": "cropgrad_crop_and_resize_grad_image",
    "grad_boxes": "cropgrad_crop_and_resize_grad_boxes",
}


# --------------------------------------------------------------------------
# Registration with XLA


def _register(name, capsule):
    """Register one handler for the CPU platform, explaining a refusal.

    XLA asks the handler which FFI API version it was written for and
    refuses versions it does not support.  When the CPU backend already
    runs, that happens here; otherwise XLA does it when the backend starts
    (its error then names the handler and both versions).
    """
    try:
        jax.ffi.register_ffi_target(name, capsule, platform="cpu")
    except Exception as exc:
        import jaxlib

        major, minor = _xla.FFI_API_VERSION
        raise ImportError(
            f"cropgrad.jax cannot register its XLA handler {name!r} with "
            f"jaxlib {jaxlib.__version__}: the handlers use XLA FFI API "
            f"{major}.{minor}, which this jaxlib refuses. Install a jax and "
            f'jaxlib that cropgrad supports (pip install "cropgrad[jax]"). '
            f"XLA said: {exc}"
        ) from exc


for _name, _capsule in _xla.handlers().items():
    _register(_name, _capsule)
del _name, _capsule


# --------------------------------------------------------------------------
# Trace-time checks: everything but the data


def _static(value, name):
    if isinstance(value, jax.core.Tracer):
        raise TypeError(
            f"{name} must be a static Python value, not a traced array: it "
            "is fixed when the call is compiled"
        )
    return value


def _threads(num_threads):
    """The ``num_threads`` attribute: 1 to 1024, or `DEFAULT_THREADS`."""
    num_threads = _static(num_threads, "num_threads")
    if num_threads is None:
        return DEFAULT_THREADS
    if isinstance(num_threads, (bool, np.bool_)) or not isinstance(
        num_threads, (int, np.integer)
    ):
        raise TypeError(
            f"num_threads must be None or an int from 1 to {_v.MAX_THREADS}, "
            f"got {type(num_threads).__name__} {num_threads!r}"
        )
    if not 1 <= num_threads <= _v.MAX_THREADS:
        raise ValueError(
            f"num_threads must be from 1 to {_v.MAX_THREADS}, got {num_threads}"
        )
    return int(num_threads)


@functools.cache
def _layout_status(layout):
    return _xla.layout_status(layout)


def _layout(data_format):
    """The layout code of ``data_format``, refusing one this build lacks."""
    layout = _v.data_format(_static(data_format, "data_format"))
    status, message = _layout_status(layout)
    if status == _v.CODES["CG_ERR_UNSUPPORTED"]:
        # The C-level API's message names the layout.
        raise NotImplementedError(message)
    return layout


def _method(method, allowed=_v.METHODS):
    method = _static(method, "method")
    return _v.method(method, allowed)


def _array(value, name):
    """``jnp.asarray(value)``, refusing anything but integers and floats."""
    try:
        arr = jnp.asarray(value)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} cannot be converted to a JAX array: {exc}") from None
    if not (
        jnp.issubdtype(arr.dtype, jnp.integer)
        or jnp.issubdtype(arr.dtype, jnp.floating)
    ):
        raise TypeError(
            f"{name} must hold real numbers (integers or floats), got dtype {arr.dtype}"
        )
    return arr


def _dims(shape, layout):
    """(batch, height, width, depth) of a 4-D shape in `layout`."""
    if layout == _v.LAYOUT_CODES["NHWC"]:
        return shape
    batch, depth, height, width = shape
    return batch, height, width, depth


def _shape(batch, height, width, depth, layout):
    """A 4-D shape in `layout` from its named dimensions."""
    if layout == _v.LAYOUT_CODES["NHWC"]:
        return (batch, height, width, depth)
    return (batch, depth, height, width)


# Dimension names of images and crops in each layout, for messages.
_ORDER = {
    _v.LAYOUT_CODES["NHWC"]: "[batch, height, width, depth]",
    _v.LAYOUT_CODES["NCHW"]: "[batch, depth, height, width]",
}
_CROP_ORDER = {
    _v.LAYOUT_CODES["NHWC"]: "[num_boxes, crop_height, crop_width, depth]",
    _v.LAYOUT_CODES["NCHW"]: "[num_boxes, depth, crop_height, crop_width]",
}


def _image(image, layout):
    image = _array(image, "image")
    if image.dtype not in _IMAGE_DTYPES:
        raise TypeError(
            "image must be uint8, uint16, int8, int16, int32, int64, float16, "
            f"float32 or float64, got {image.dtype}"
        )
    if image.ndim != 4:
        raise ValueError(f"image must be 4-D {_ORDER[layout]}, got shape {image.shape}")
    _, height, width, _ = _dims(image.shape, layout)
    if height == 0 or width == 0:
        raise ValueError(f"image dimensions must be positive, got shape {image.shape}")
    return image


def _grads(grads, layout):
    grads = _array(grads, "grads").astype(jnp.float32)
    if grads.ndim != 4:
        raise ValueError(
            f"grads must be 4-D {_CROP_ORDER[layout]}, got shape {grads.shape}"
        )
    _, crop_h, crop_w, _ = _dims(grads.shape, layout)
    if crop_h == 0 or crop_w == 0:
        raise ValueError(
            "grads dimensions must be positive: crop_height and crop_width "
            f"are {crop_h} and {crop_w}"
        )
    return grads


def _boxes_and_index(boxes, box_ind, grads=None):
    boxes = _array(boxes, "boxes").astype(jnp.float32)
    if boxes.ndim != 2 or boxes.shape[1] != 4:
        raise ValueError(
            "boxes must be 2-D with 4 columns [y1, x1, y2, x2], got shape "
            f"{boxes.shape}"
        )
    box_ind = _array(box_ind, "box_ind")
    if box_ind.dtype.kind not in "iu":
        raise TypeError(f"box_ind must hold integers, got dtype {box_ind.dtype}")
    if box_ind.ndim != 1 or box_ind.shape[0] != boxes.shape[0]:
        raise ValueError(
            f"box_ind has incompatible shape {box_ind.shape}: expected "
            f"({boxes.shape[0]},), one image index per box"
        )
    if box_ind.dtype != np.int64:
        # int32 holds every index XLA can address in the smaller types;
        # uint32 and uint64 only fit int64 (which needs jax_enable_x64).
        box_ind = box_ind.astype(
            jnp.int64
            if box_ind.dtype.itemsize >= 4 and box_ind.dtype.kind == "u"
            else jnp.int32
        )
    if grads is not None and grads.shape[0] != boxes.shape[0]:
        raise ValueError(
            f"boxes and grads have incompatible shape: {boxes.shape[0]} boxes "
            f"but grads has shape {grads.shape}"
        )
    return boxes, box_ind


# --------------------------------------------------------------------------
# vmap: the mapped axis becomes more images and more boxes, in one call


def _fold_index(box_ind, n, batch):
    """Indices of problem ``k`` shifted by ``k * batch`` into the folded batch.

    An index outside ``[0, batch)`` must stay outside the folded batch, so
    that the kernel still refuses it rather than reading another problem's
    image: negative values are kept, values past the end pushed past the
    folded end.
    """
    offset = (jnp.arange(n, dtype=box_ind.dtype) * batch)[:, None]
    valid = (box_ind >= 0) & (box_ind < batch)
    past_end = jnp.where(box_ind < 0, box_ind, box_ind + (n - 1) * batch)
    return jnp.where(valid, box_ind + offset, past_end)


def _broadcast(x, batched, n):
    return x if batched else jnp.broadcast_to(x, (n, *x.shape))


def _fold_boxes(n, in_batched, image, boxes, box_ind):
    """Fold the mapped axis of (image, boxes, box_ind) into one problem.

    Returns the image (the mapped images one after another, or the shared
    image), the boxes of every problem one after another, and their indices
    into that image.
    """
    image_batched, boxes_batched, index_batched = in_batched
    boxes = _broadcast(boxes, boxes_batched, n)
    box_ind = _broadcast(box_ind, index_batched, n)
    if image_batched:
        box_ind = _fold_index(box_ind, n, image.shape[1])
        image = image.reshape(n * image.shape[1], *image.shape[2:])
    return image, boxes.reshape(-1, 4), box_ind.reshape(-1)


def _unfold(out, n):
    return out.reshape(n, out.shape[0] // n if n else 0, *out.shape[1:])


# --------------------------------------------------------------------------
# The ops, one per set of static attributes: an FFI call with a vmap rule,
# inside a custom_vjp, inside jit (so that eager calls are compiled once).


def _attributes(method, layout, threads, **more):
    return dict(
        method=np.int32(method),
        layout=np.int32(layout),
        num_threads=np.int32(threads),
        **more,
    )


def _ffi_call(op, shape, dtype, operands, attrs):
    """One XLA call of handler `op`, returning an array of `shape`, `dtype`.

    Inside `jax.shard_map`, JAX types arrays by the mesh axes they vary
    over, and an FFI call needs all its operands, and declares its result,
    of one such type: operands that vary over fewer axes (say, boxes closed
    over) are cast to vary like the others, as every device reads its own
    copy anyway.
    """
    result = jax.ShapeDtypeStruct(shape, dtype)
    axes = frozenset().union(*(_varying_axes(x) for x in operands))
    if axes:
        operands = [
            x
            if _varying_axes(x) == axes
            else jax.lax.pcast(x, tuple(axes - _varying_axes(x)), to="varying")
            for x in operands
        ]
        mesh = jax.typeof(operands[0]).sharding.mesh
        result = jax.ShapeDtypeStruct(
            shape,
            dtype,
            sharding=jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec()),
            manual_axis_type=jax.typeof(operands[0]).mat,
        )
    # vmap never reaches the call itself (the op's own rule folds the
    # mapped axis first); "sequential" only names a correct fallback.
    return jax.ffi.ffi_call(_TARGETS[op], result, vmap_method="sequential")(
        *operands, **attrs
    )


def _varying_axes(x):
    return jax.typeof(x).mat.varying


@functools.cache
def _forward(crop_size, method, extrapolation, layout, threads):
    crop_h, crop_w = crop_size
    attrs = _attributes(
        method, layout, threads, extrapolation_value=np.float32(extrapolation)
    )

    @jax.custom_batching.custom_vmap
    def call(image, boxes, box_ind):
        depth = _dims(image.shape, layout)[3]
        shape = _shape(boxes.shape[0], crop_h, crop_w, depth, layout)
        return _ffi_call("forward", shape, jnp.float32, (image, boxes, box_ind), attrs)

    @call.def_vmap
    def _(n, in_batched, image, boxes, box_ind):
        out = call(*_fold_boxes(n, in_batched, image, boxes, box_ind))
        return _unfold(out, n), True

    @jax.custom_vjp
    def op(image, boxes, box_ind):
        return call(image, boxes, box_ind)

    def fwd(image, boxes, box_ind):
        # Which gradients are needed, as residual keys (a residual must be
        # an array or a pytree of them).
        wanted = {}
        if image.perturbed and jnp.issubdtype(image.value.dtype, jnp.floating):
            wanted["image"] = None
        if boxes.perturbed and method == _v.METHOD_CODES["bilinear"]:
            wanted["boxes"] = None
        res = (image.value, boxes.value, box_ind.value, wanted)
        # `op`, not `call`: differentiating this rule (a second derivative)
        # must differentiate the op through its own rule again.
        return op(image.value, boxes.value, box_ind.value), res

    def bwd(res, g):
        image, boxes, box_ind, wanted = res
        if isinstance(g, jax.custom_derivatives.SymbolicZero):
            return None, None, None
        d_image = d_boxes = None
        if "image" in wanted:
            d_image = _grad_image(
                (crop_h, crop_w), image.shape, image.dtype, method, layout, threads
            )(g, boxes, box_ind)
        # Nearest sampling is piecewise constant in the boxes: their
        # gradient is zero wherever it exists (not wanted, so None).
        if "boxes" in wanted:
            d_boxes = _grad_boxes(layout, threads)(g, image, boxes, box_ind)
        return d_image, d_boxes, None

    op.defvjp(fwd, bwd, symbolic_zeros=True)
    return jax.jit(op)


@functools.cache
def _grad_image_call(image_shape, dtype, method, layout, threads):
    batch = image_shape[0]
    attrs = _attributes(method, layout, threads)

    @jax.custom_batching.custom_vmap
    def call(grads, boxes, box_ind):
        return _ffi_call(
            "grad_image", image_shape, dtype, (grads, boxes, box_ind), attrs
        )

    @call.def_vmap
    def _(n, in_batched, grads, boxes, box_ind):
        # Every problem scatters into an image gradient of its own: fold
        # them into one of n times the batch.
        grads_batched, boxes_batched, index_batched = in_batched
        grads = _broadcast(grads, grads_batched, n)
        boxes = _broadcast(boxes, boxes_batched, n)
        box_ind = _fold_index(_broadcast(box_ind, index_batched, n), n, batch)
        folded = _grad_image_call(
            (n * batch, *image_shape[1:]), dtype, method, layout, threads
        )
        out = folded(
            grads.reshape(-1, *grads.shape[2:]),
            boxes.reshape(-1, 4),
            box_ind.reshape(-1),
        )
        return _unfold(out, n), True

    return call


@functools.cache
def _grad_image(crop_size, image_shape, dtype, method, layout, threads):
    call = _grad_image_call(image_shape, dtype, method, layout, threads)

    @jax.custom_vjp
    def op(grads, boxes, box_ind):
        return call(grads, boxes, box_ind)

    def fwd(grads, boxes, box_ind):
        wanted = {}
        if grads.perturbed:
            wanted["grads"] = None
        if boxes.perturbed and method == _v.METHOD_CODES["bilinear"]:
            wanted["boxes"] = None
        res = (grads.value, boxes.value, box_ind.value, wanted)
        return op(grads.value, boxes.value, box_ind.value), res

    def bwd(res, ct):
        # The op is linear in grads, and its transpose is the forward op
        # (gathering where it scattered, zero outside the image).  With
        # respect to the boxes, <ct, op(g, boxes)> = <g, crop(ct, boxes)>,
        # whose boxes gradient is the boxes-gradient kernel on image ct.
        grads, boxes, box_ind, wanted = res
        if isinstance(ct, jax.custom_derivatives.SymbolicZero):
            return None, None, None
        d_grads = d_boxes = None
        if "grads" in wanted:
            d_grads = _forward(crop_size, method, 0.0, layout, threads)(
                ct, boxes, box_ind
            )
        if "boxes" in wanted:
            d_boxes = _grad_boxes(layout, threads)(grads, ct, boxes, box_ind)
        return d_grads, d_boxes, None

    op.defvjp(fwd, bwd, symbolic_zeros=True)
    return jax.jit(op)


@functools.cache
def _grad_boxes(layout, threads):
    attrs = _attributes(_v.METHOD_CODES["bilinear"], layout, threads)

    @jax.custom_batching.custom_vmap
    def call(grads, image, boxes, box_ind):
        shape = (boxes.shape[0], 4)
        operands = (grads, image, boxes, box_ind)
        return _ffi_call("grad_boxes", shape, jnp.float32, operands, attrs)

    @call.def_vmap
    def _(n, in_batched, grads, image, boxes, box_ind):
        grads = _broadcast(grads, in_batched[0], n)
        image, boxes, box_ind = _fold_boxes(n, in_batched[1:], image, boxes, box_ind)
        out = call(grads.reshape(-1, *grads.shape[2:]), image, boxes, box_ind)
        return _unfold(out, n), True

    @jax.custom_vjp
    def op(grads, image, boxes, box_ind):
        return call(grads, image, boxes, box_ind)

    def not_differentiable(*args):
        raise NotImplementedError(
            "crop_and_resize_grad_boxes is not differentiable: cropgrad.jax "
            "differentiates crop_and_resize twice only along the image "
            "(its boxes gradient has no gradient of its own)"
        )

    op.defvjp(not_differentiable, not_differentiable)
    return jax.jit(op)


# --------------------------------------------------------------------------
# Public API


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
    arithmetic).  Differentiable in reverse mode with respect to `image`
    (floating dtypes; any number of times) and `boxes` (bilinear; once).

    Parameters
    ----------
    image : array of shape (batch, image_height, image_width, depth)
        uint8, uint16, int8, int16, int32, int64, float16, float32 or
        float64 (shape ``(batch, depth, image_height, image_width)`` with
        ``data_format="NCHW"``).
    boxes : array of shape (num_boxes, 4)
        ``[y1, x1, y2, x2]`` in normalized coordinates, computed in float32
        (other real dtypes are converted); they must be finite.
    box_ind : array of int, shape (num_boxes,)
        Image of each box, in ``[0, batch)``.
    crop_size : sequence of 2 ints
        ``[crop_height, crop_width]``, both positive; static.
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
    jax.Array of shape (num_boxes, crop_height, crop_width, depth), float32
        (``(num_boxes, depth, crop_height, crop_width)`` with NCHW.)

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
    method = _method(method)
    layout = _layout(data_format)
    threads = _threads(num_threads)
    crop_h, crop_w = _v.int_vector(
        _static(crop_size, "crop_size"), 2, "crop_size", "[crop_height, crop_width]"
    )
    if crop_h <= 0 or crop_w <= 0:
        raise ValueError(
            f"crop dimensions must be positive, got crop_size = {[crop_h, crop_w]}"
        )
    extrapolation = _v.real_scalar(
        _static(extrapolation_value, "extrapolation_value"), "extrapolation_value"
    )
    image = _image(image, layout)
    boxes, box_ind = _boxes_and_index(boxes, box_ind)
    op = _forward((crop_h, crop_w), method, float(extrapolation), layout, threads)
    return op(image, boxes, box_ind)


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
    transpose is the forward op) and, bilinear, `boxes`.

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
    dtype : {float32, float16, float64}, default float32
        Output dtype (float64 needs ``jax_enable_x64``, otherwise JAX makes
        it float32); float16 accumulates in float32 and is rounded once.
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
    method = _method(method)
    layout = _layout(data_format)
    threads = _threads(num_threads)
    out_dtype = jax.dtypes.canonicalize_dtype(
        _v.output_dtype(_static(dtype, "dtype"), "dtype")
    )
    grads = _grads(grads, layout)
    boxes, box_ind = _boxes_and_index(boxes, box_ind, grads)
    shape = tuple(
        _v.int_vector(
            _static(image_shape, "image_shape"), 4, "image_shape", _ORDER[layout]
        )
    )
    batch, height, width, depth = _dims(shape, layout)
    if height <= 0 or width <= 0:
        raise ValueError(f"image dimensions must be positive: image_shape = {shape}")
    if batch < 0 or depth < 0:
        raise ValueError(
            f"image_shape: batch and depth must be non-negative, got {shape}"
        )
    _, crop_h, crop_w, grads_depth = _dims(grads.shape, layout)
    if grads_depth != depth:
        raise ValueError(
            f"image_shape and grads are incompatible: image depth is {depth} but "
            f"grads depth is {grads_depth}"
        )
    op = _grad_image((crop_h, crop_w), shape, out_dtype, method, layout, threads)
    return op(grads, boxes, box_ind)


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
    ``flush_denormals=True``.  Not differentiable itself.

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
    _method(method, allowed=("bilinear",))
    layout = _layout(data_format)
    threads = _threads(num_threads)
    grads = _grads(grads, layout)
    image = _image(image, layout)
    boxes, box_ind = _boxes_and_index(boxes, box_ind, grads)
    if _dims(grads.shape, layout)[3] != _dims(image.shape, layout)[3]:
        raise ValueError(
            "image and grads must have the same depth, got "
            f"{_dims(image.shape, layout)[3]} and {_dims(grads.shape, layout)[3]}"
        )
    return _grad_boxes(layout, threads)(grads, image, boxes, box_ind)
