"""cropgrad.jax's grid-sampling functions: PyTorch's ``grid_sample`` (2-D).

Images are NCHW by default, the grid ``[N, H_out, W_out, 2]`` of ``(x, y)``
normalised to ``[-1, 1]``; float64 data is computed in float64, everything
else in float32, as the NumPy API computes it.  Each function converts its
arguments (``checks``), runs the gate and binds its primitive, which
computes in the caller's layout (NHWC read and written in place, but for
few channels, which XLA transposes around an NCHW call: see ``_call``) and
in the arithmetic type: a narrower result dtype is a cast of the result,
rounded once.  cropgrad.jax re-exports them.

May import: JAX, NumPy, ``checks``, ``primitives`` and the kernels' layout
choice.
"""

import jax.numpy as jnp

from cropgrad._api import docstrings as _docs
from cropgrad._jax import checks
from cropgrad._jax.primitives import bind
from cropgrad._kernels.grid_sample import kernels as _kernels


def _call(name, options, arrays, **params):
    """Check op `name`'s call, then bind it on `arrays` (in the options'
    layout); in NCHW, the image and grads transposed around it, where the
    kernels read an NHWC call faster so (few channels:
    kernels.nhwc_in_place)."""
    checks.GATES[name](arrays, {**options, **params})
    layout = options["data_format"]
    shaped = arrays["image"] if "image" in arrays else arrays["grads"]
    wide = arrays["grid"].dtype == jnp.float64
    if layout == checks.NCHW or _kernels.nhwc_in_place(
        shaped.shape[3], wide, options["mode"]
    ):
        return bind(name, *arrays.values(), **options, **params)
    nchw = {
        k: jnp.transpose(x, (0, 3, 1, 2)) if k in ("image", "grads") else x
        for k, x in arrays.items()
    }
    if "image_shape" in params:
        n, h, w, c = params["image_shape"]
        params["image_shape"] = (n, c, h, w)
    out = bind(
        name, *nchw.values(), **{**options, "data_format": checks.NCHW}, **params
    )
    # The grid gradient is grid-shaped; the others in the image's layout.
    return out if name == "grid_sample_grad_grid" else jnp.transpose(out, (0, 2, 3, 1))


def _sampled(name, options, dtype, image, **points):
    """The samples of op `name`, `grid_sample` or its grid JVP, of the
    caller's `image` at `points` (the grid, then the JVP's tangent, by
    name): the image converted, `dtype` checked, then the points; computed
    in the image's arithmetic type and cast to the result's dtype."""
    image = checks.grid_image(image, options["data_format"])
    arith = checks.arithmetic(image.dtype)
    result = checks.grid_result_dtype(dtype, image.dtype, arith)
    arrays = {"image": image.astype(arith)}
    arrays.update((k, checks.grid(v, arith, k)) for k, v in points.items())
    return _call(name, options, arrays, dtype=arith).astype(result)


@_docs.shared
def grid_sample(
    image,
    grid,
    *,
    mode="bilinear",
    padding_mode="zeros",
    align_corners=False,
    dtype=None,
    data_format="NCHW",
    num_threads=None,
):
    """Sample an image at the points of a grid, in JAX.

    PyTorch's ``torch.nn.functional.grid_sample`` (2-D) as an XLA custom
    call: the same bits as `cropgrad.grid_sample` (with
    ``flush_denormals=True``, XLA:CPU's arithmetic).  Differentiable in
    forward and reverse mode with respect to `image` (floating dtypes; any
    number of times: the op is linear in it) and `grid` (once: the tangent
    is `grid_sample_jvp_grid`, whose transpose is `grid_sample_grad_grid`).

    Parameters
    ----------
    image : array of shape (N, C, H, W)
        ``(N, H, W, C)`` with ``data_format="NHWC"``: uint8, uint16, int8,
        int16, int32, int64, float16, bfloat16, float32 or float64.
        float64 images are computed in float64 (which needs
        ``jax_enable_x64``), every other dtype in float32.
    grid : array of shape (N, H_out, W_out, 2)
        ``(x, y)`` per output pixel, ``-1`` and ``1`` the image's outer
        edges (or its corner pixels' centres with ``align_corners=True``),
        converted to the arithmetic type; every value must be finite.
    mode : {"bilinear", "nearest", "bicubic"}, default "bilinear"
    padding_mode : {"zeros", "border", "reflection"}, default "zeros"
    align_corners : bool, default False
        Static, as the other options.
    dtype : {float32, float64, float16, bfloat16}, optional
        Output dtype.  Default: the image's for float images, float32
        otherwise; rounded once from the arithmetic type.
    {jax_options}

    Returns
    -------
    jax.Array of shape (N, C, H_out, W_out)
        ``(N, H_out, W_out, C)`` with NHWC.

    Raises
    ------
    ValueError, TypeError
        While traced, as `cropgrad.grid_sample` raises them.
    jax.errors.JaxRuntimeError
        When the computation runs, for a non-finite grid value.

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> import cropgrad.jax
    >>> image = jnp.arange(6.0).reshape(1, 1, 2, 3)
    >>> grid = jnp.array([[[[-1.0, -1.0], [1.0, 1.0], [0.5, 0.0]]]])
    >>> cropgrad.jax.grid_sample(image, grid, align_corners=True)[0, 0]
    Array([[0., 5., 3.]], dtype=float32)
    """
    options = checks.grid_options(
        mode, padding_mode, align_corners, data_format, num_threads
    )
    return _sampled("grid_sample", options, dtype, image, grid=grid)


def grid_sample_grad_image(
    grads,
    grid,
    image_shape,
    *,
    mode="bilinear",
    padding_mode="zeros",
    align_corners=False,
    dtype=None,
    data_format="NCHW",
    num_threads=None,
):
    """Gradient of `grid_sample` with respect to the image, in JAX.

    The same bits as `cropgrad.grid_sample_grad_image` (PyTorch's input
    gradient) with ``flush_denormals=True``.  Linear in `grads` (its
    transpose is `grid_sample`); its derivative along the grid has no
    kernel: reverse mode of it along the grid works, forward mode raises
    NotImplementedError.

    Parameters
    ----------
    grads : array of shape (N, C, H_out, W_out)
        The gradient of the sampled output (``(N, H_out, W_out, C)`` with
        NHWC); float64 is computed in float64, every other dtype in float32.
    grid : array of shape (N, H_out, W_out, 2)
        As for `grid_sample`.
    image_shape : sequence of 4 ints
        The image's shape in `data_format`'s order: the output's; static.
    mode, padding_mode, align_corners, data_format, num_threads
        As for `grid_sample`.
    dtype : {float32, float64, float16, bfloat16}, optional
        Output dtype.  Default: that of float `grads`, float32 otherwise.

    Returns
    -------
    jax.Array of shape `image_shape`

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> import cropgrad.jax
    >>> grads = jnp.ones((1, 1, 1, 1))
    >>> grid = jnp.zeros((1, 1, 1, 2))                 # the image's centre
    >>> cropgrad.jax.grid_sample_grad_image(grads, grid, (1, 1, 2, 2))[0, 0]
    Array([[0.25, 0.25],
           [0.25, 0.25]], dtype=float32)
    """
    options = checks.grid_options(
        mode, padding_mode, align_corners, data_format, num_threads
    )
    raw = checks.array(grads, "grads")
    grads = checks.grid_grads(raw)
    arith = grads.dtype
    image_shape = checks.image_shape(image_shape, options["data_format"])
    result = checks.grid_result_dtype(dtype, raw.dtype, arith)
    arrays = {"grads": grads, "grid": checks.grid(grid, arith)}
    out = _call(
        "grid_sample_grad_image", options, arrays, image_shape=image_shape, dtype=arith
    )
    return out.astype(result)


def grid_sample_grad_grid(
    grads,
    image,
    grid,
    *,
    mode="bilinear",
    padding_mode="zeros",
    align_corners=False,
    data_format="NCHW",
    num_threads=None,
):
    """Gradient of `grid_sample` with respect to the grid, in JAX.

    The same bits as `cropgrad.grid_sample_grad_grid` (PyTorch's grid
    gradient) with ``flush_denormals=True``: the transpose of
    `grid_sample_jvp_grid` in its tangent.  Linear in `grads` and in
    `image`; not differentiable with respect to the grid.

    Parameters
    ----------
    grads : array of shape (N, C, H_out, W_out)
        The gradient of the sampled output, converted to the image's
        arithmetic type.
    image, grid, mode, padding_mode, align_corners, data_format, num_threads
        As for `grid_sample`.

    Returns
    -------
    jax.Array of the grid's shape
        ``d/d(x, y)`` per point, in the arithmetic type.

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> import cropgrad.jax
    >>> image = jnp.arange(6.0).reshape(1, 1, 2, 3)
    >>> grads = jnp.ones((1, 1, 1, 1))
    >>> grid = jnp.zeros((1, 1, 1, 2))
    >>> cropgrad.jax.grid_sample_grad_grid(grads, image, grid, align_corners=True)
    Array([[[[1. , 1.5]]]], dtype=float32)
    """
    options = checks.grid_options(
        mode, padding_mode, align_corners, data_format, num_threads
    )
    image = checks.grid_image(image, options["data_format"])
    arith = checks.arithmetic(image.dtype)
    arrays = {
        "grads": checks.grid_grads(grads, arith),
        "image": image.astype(arith),
        "grid": checks.grid(grid, arith),
    }
    return _call("grid_sample_grad_grid", options, arrays)


def grid_sample_jvp_grid(
    image,
    grid,
    grid_tangent,
    *,
    mode="bilinear",
    padding_mode="zeros",
    align_corners=False,
    dtype=None,
    data_format="NCHW",
    num_threads=None,
):
    """Derivative of `grid_sample` along a tangent of the grid, in JAX.

    The same bits as `cropgrad.grid_sample_jvp_grid` with
    ``flush_denormals=True``; linear in `grid_tangent` (its transpose is
    `grid_sample_grad_grid`) and in `image`.

    Parameters
    ----------
    image, grid, mode, padding_mode, align_corners, data_format, num_threads
        As for `grid_sample`.
    grid_tangent : array of shape (N, H_out, W_out, 2)
        ``(t_x, t_y)`` per point, converted to the arithmetic type.
    dtype : {float32, float64, float16, bfloat16}, optional
        As for `grid_sample`.

    Returns
    -------
    jax.Array of shape (N, C, H_out, W_out)
        ``(N, H_out, W_out, C)`` with NHWC.

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> import cropgrad.jax
    >>> image = jnp.arange(6.0).reshape(1, 1, 2, 3)
    >>> grid = jnp.zeros((1, 1, 1, 2))
    >>> tangent = jnp.array([[[[2.0, 0.0]]]])
    >>> cropgrad.jax.grid_sample_jvp_grid(image, grid, tangent, align_corners=True)
    Array([[[[2.]]]], dtype=float32)
    """
    options = checks.grid_options(
        mode, padding_mode, align_corners, data_format, num_threads
    )
    points = {"grid": grid, "grid_tangent": grid_tangent}
    return _sampled("grid_sample_jvp_grid", options, dtype, image, **points)
