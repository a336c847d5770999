"""Benchmark rows of cropgrad.jax (added after the ``detector-forward`` row).

Every JAX column is a jitted function called on arrays already on the
device, timed until its results are ready.  The first two rows have the
main table's cropgrad columns and their NumPy and pure-JAX counterparts:

``cropgrad_1thread``, ``cropgrad_default``
    cropgrad.jax with ``num_threads=1`` / the default, its previous results
    donated to the call, so that XLA writes into them as the NumPy API
    writes into ``out=`` (the same memory on every call);
``cropgrad_default_new_output``
    the plain jitted call: XLA allocates its outputs on every call;
``numpy_out`` / ``numpy_new_output``
    the NumPy API with ``out=`` / allocating its results;
``pure_jax``
    what a JAX user writes without cropgrad: a jitted gather-based bilinear
    crop_and_resize (`pure_jax_crop_and_resize`) and, for the backward
    pass, JAX's autodiff of it (XLA's generic scatter-add); its ``about``
    line gives its largest difference from cropgrad's results, which are
    TensorFlow's bits.

``detector-forward-jax``
    `cropgrad.jax.crop_and_resize`.  Target: ``cropgrad_default`` within
    1.15x of ``numpy_out``, which shows that the FFI call copies nothing.
``detector-forward-backward-jax``
    the crops and their image gradient, from ``jax.vjp``, under one jit
    (NumPy: the forward op, then the image gradient).  Same target.
``detector-vmap-jax``
    ``jax.vmap`` of the forward over 8 problems (the detector's image with
    64 boxes each) against one call on the 8 problems concatenated (one
    image batch of 16, 512 boxes): the vmap rule folds the mapped axis into
    one FFI call, so the two should cost the same (target: within 1.3x).
``detector-train-step-jax``
    a jitted training step (a feature map, crops, a dense head, plus an
    independent dense branch on the feature map that XLA may run at the
    same time as the crops), with the crops' ``num_threads=1`` and with the
    default: how XLA's threads and cropgrad's OpenMP team share the cores.
``roi-fpn-forward-jax``, ``roi-fpn-forward-backward-jax``
    after ``roi-fpn-forward``: `cropgrad.jax.roi_align` on torchvision's
    box pooler problem (NCHW), alone and with its image gradient from
    ``jax.vjp``, with the columns of the first two rows; ``pure_jax`` is
    RoIAlign written with gathers (`pure_jax_roi_align`) and its autodiff.
    Targets: within 1.15x of the NumPy API with ``out=``, and at least 5x
    the pure-JAX op's speed.
"""

import jax
import jax.numpy as jnp
import numpy as np

import cropgrad
import cropgrad.jax as cgj
from cropgrad._jax import handlers as _handlers

# Problems of the vmap row, and boxes in each (8 * 64 = the detector's 512).
VMAP_PROBLEMS = 8


def pure_jax_crop_and_resize(image, boxes, box_ind, crop_size):
    """Bilinear crop_and_resize in plain JAX (NHWC): four gathers and lerps.

    TensorFlow's sampling coordinates and interpolation written with
    ``jax.numpy``, as a JAX user without cropgrad would; its gradient is
    JAX's autodiff of the gathers.  Samples outside the image are 0.
    """
    crop_h, crop_w = crop_size
    _, height, width, _ = image.shape

    def coords(lo, hi, size, crop):
        if crop > 1:
            scale = (hi - lo) * np.float32(size - 1) / np.float32(crop - 1)
            steps = jnp.arange(crop, dtype=jnp.float32)
            return lo[:, None] * np.float32(size - 1) + steps * scale[:, None]
        return (np.float32(0.5) * (lo + hi) * np.float32(size - 1))[:, None]

    in_y = coords(boxes[:, 0], boxes[:, 2], height, crop_h)  # (n, crop_h)
    in_x = coords(boxes[:, 1], boxes[:, 3], width, crop_w)  # (n, crop_w)
    valid = ((in_y >= 0) & (in_y <= height - 1))[:, :, None] & (
        (in_x >= 0) & (in_x <= width - 1)
    )[:, None, :]
    top, left = jnp.floor(in_y), jnp.floor(in_x)
    y_lerp = (in_y - top)[:, :, None, None]
    x_lerp = (in_x - left)[:, None, :, None]

    def index(v, size):
        return jnp.clip(v, 0, size - 1).astype(jnp.int32)

    t, b = index(top, height)[:, :, None], index(jnp.ceil(in_y), height)[:, :, None]
    lt, r = index(left, width)[:, None, :], index(jnp.ceil(in_x), width)[:, None, :]
    i = box_ind[:, None, None]
    tl, tr = image[i, t, lt], image[i, t, r]
    bl, br = image[i, b, lt], image[i, b, r]
    top_v = tl + (tr - tl) * x_lerp
    bottom_v = bl + (br - bl) * x_lerp
    crops = top_v + (bottom_v - top_v) * y_lerp
    return jnp.where(valid[..., None], crops, 0.0)


def _ready(fn, *args):
    return lambda: jax.block_until_ready(fn(*args))


class _Reusing:
    """A column calling ``jax.jit(fn)(*args)`` with its last results donated.

    XLA then writes the results into the donated buffers, as the NumPy API
    writes into ``out=``: the same memory, already faulted in, on every
    call.  (A fresh output is a fresh allocation, which XLA pays for.)
    """

    def __init__(self, fn, *args):
        self.args = args
        self.results = jax.tree.leaves(jax.block_until_ready(jax.jit(fn)(*args)))
        n, k = len(args), len(self.results)
        self.jitted = jax.jit(
            lambda *a: fn(*a[:n]),
            donate_argnums=tuple(range(n, n + k)),
            keep_unused=True,
        )

    def __call__(self):
        out = self.jitted(*self.args, *self.results)
        self.results = jax.tree.leaves(jax.block_until_ready(out))


def _largest_difference(a, b):
    return float(np.max(np.abs(np.asarray(a, np.float64) - np.asarray(b, np.float64))))


def _comparison(name, about, columns):
    """A row of cropgrad.jax columns against the NumPy API and pure JAX."""
    return {
        "name": name,
        "about": about,
        "columns": columns,
        "ratios": {
            "jax_reusing_output_over_numpy_out": ("cropgrad_default", "numpy_out"),
            "jax_over_numpy_new_output": (
                "cropgrad_default_new_output",
                "numpy_new_output",
            ),
            "pure_jax_over_cropgrad_jax": ("pure_jax", "cropgrad_default_new_output"),
        },
        "targets": [
            (
                f"{name}: within 1.15x of the NumPy API with out= (no copy)",
                "jax_reusing_output_over_numpy_out",
                1.15,
                "<=",
            )
        ],
    }


def _op_rows(names, about, forward, pure_forward, grads, numpy_ops, outputs, image):
    """One op's two rows: its forward call, and its forward call with the
    image gradient (jax.vjp), as a training step needs them.

    `names` and `about` are the two rows' names and descriptions (``{diff}``:
    the pure-JAX op's largest difference from the reference's bits);
    ``forward(num_threads)`` is the cropgrad.jax op as a function of the
    image, `pure_forward` the gather op; `numpy_ops` the NumPy API's forward
    and image gradient, each taking an ``out``, and `outputs` their arrays.
    """

    def backward(forward):
        def both(x):
            crops, vjp = jax.vjp(forward, x)
            return crops, vjp(grads)[0]

        return both

    numpy_forward, numpy_grad_image = numpy_ops

    def numpy_both(out=None, d_out=None):
        return numpy_forward(out), numpy_grad_image(d_out)

    forward_diff = _largest_difference(
        jax.jit(pure_forward)(image), jax.jit(forward())(image)
    )
    gradient_diff = _largest_difference(
        jax.jit(backward(pure_forward))(image)[1],
        jax.jit(backward(forward()))(image)[1],
    )
    crops_out, d_image_out = outputs
    return [
        _comparison(
            names[0],
            about[0].format(diff=f"{forward_diff:.3g}"),
            {
                "cropgrad_1thread": _Reusing(forward(1), image),
                "cropgrad_default": _Reusing(forward(), image),
                "cropgrad_default_new_output": _ready(jax.jit(forward()), image),
                "numpy_out": lambda: numpy_forward(crops_out),
                "numpy_new_output": numpy_forward,
                "pure_jax": _ready(jax.jit(pure_forward), image),
            },
        ),
        _comparison(
            names[1],
            about[1].format(diff=f"{gradient_diff:.3g}"),
            {
                "cropgrad_1thread": _Reusing(backward(forward(1)), image),
                "cropgrad_default": _Reusing(backward(forward()), image),
                "cropgrad_default_new_output": _ready(
                    jax.jit(backward(forward())), image
                ),
                "numpy_out": lambda: numpy_both(crops_out, d_image_out),
                "numpy_new_output": numpy_both,
                "pure_jax": _ready(jax.jit(backward(pure_forward)), image),
            },
        ),
    ]


def _forward_rows(p, crop):
    image, boxes, box_ind = (
        jax.device_put(p[k]) for k in ("image", "boxes", "box_ind")
    )
    grads_np = np.random.default_rng(7).standard_normal(
        (p["boxes"].shape[0], *crop, p["image"].shape[3]), dtype=np.float32
    )

    def forward(num_threads=None):
        return lambda x: cgj.crop_and_resize(
            x, boxes, box_ind, crop, num_threads=num_threads
        )

    def pure_forward(x):
        return pure_jax_crop_and_resize(x, boxes, box_ind, crop)

    def numpy_forward(out=None):
        return cropgrad.crop_and_resize(
            p["image"], p["boxes"], p["box_ind"], crop, out=out
        )

    def numpy_grad_image(out=None):
        return cropgrad.crop_and_resize_grad_image(
            grads_np, p["boxes"], p["box_ind"], p["image"].shape, out=out
        )

    return _op_rows(
        ("detector-forward-jax", "detector-forward-backward-jax"),
        (
            "cropgrad.jax.crop_and_resize under jit vs the NumPy API and a jitted "
            "pure-JAX gather op (its largest difference from TensorFlow's bits: "
            "{diff})",
            "the crops and their image gradient (jax.vjp) under jit vs the NumPy "
            "API and pure JAX with autodiff (its largest difference from "
            "TensorFlow's bits: {diff})",
        ),
        forward,
        pure_forward,
        jax.device_put(grads_np),
        (numpy_forward, numpy_grad_image),
        (np.empty(grads_np.shape, np.float32), np.empty_like(p["image"])),
        image,
    )


def _vmap_row(p, crop):
    n = VMAP_PROBLEMS
    per = p["boxes"].shape[0] // n
    rng = np.random.default_rng(8)
    images = rng.standard_normal((n, *p["image"].shape), dtype=np.float32)
    boxes = p["boxes"][: n * per].reshape(n, per, 4)
    box_ind = p["box_ind"][: n * per].reshape(n, per)
    batch = images.shape[1]
    # The same problems as one: images one after another, indices shifted.
    flat_images = images.reshape(n * batch, *images.shape[2:])
    flat_ind = (box_ind + batch * np.arange(n)[:, None]).astype(np.int32).reshape(-1)
    args = [jax.device_put(a) for a in (images, boxes, box_ind)]
    flat = [jax.device_put(a) for a in (flat_images, boxes.reshape(-1, 4), flat_ind)]
    vmapped = jax.jit(jax.vmap(lambda x, b, i: cgj.crop_and_resize(x, b, i, crop)))
    one = jax.jit(lambda x, b, i: cgj.crop_and_resize(x, b, i, crop))
    same = np.array_equal(
        np.asarray(vmapped(*args)).reshape(-1), np.asarray(one(*flat)).reshape(-1)
    )
    return {
        "name": "detector-vmap-jax",
        "about": f"jax.vmap over {n} problems of {per} boxes vs one call on them "
        f"concatenated (same bits: {same})",
        "columns": {
            "vmap": _ready(vmapped, *args),
            "one_call_concatenated": _ready(one, *flat),
        },
        "ratios": {"vmap_over_concatenated": ("vmap", "one_call_concatenated")},
        "targets": [
            (
                f"jax.vmap of {n} problems within 1.3x of one call on them",
                "vmap_over_concatenated",
                1.3,
                "<=",
            )
        ],
    }


def _train_step_row(p, crop):
    image, boxes, box_ind = (
        jax.device_put(p[k]) for k in ("image", "boxes", "box_ind")
    )
    depth = p["image"].shape[3]
    rng = np.random.default_rng(9)
    params = {
        "scale": jnp.ones(depth),
        "head": jnp.asarray(rng.standard_normal((depth, 16), dtype=np.float32) * 0.01),
        "branch": jnp.asarray(
            rng.standard_normal((depth, 64), dtype=np.float32) * 0.01
        ),
    }
    targets = jnp.zeros((p["boxes"].shape[0], 16))

    def step(num_threads):
        def loss(params):
            features = jnp.tanh(image * params["scale"])
            crops = cgj.crop_and_resize(
                features, boxes, box_ind, crop, num_threads=num_threads
            )
            head = crops.mean(axis=(1, 2)) @ params["head"]
            # Independent of the crops: XLA may run it at the same time.
            branch = features.reshape(-1, depth) @ params["branch"]
            return jnp.mean((head - targets) ** 2) + jnp.mean(branch**2)

        def update(params):
            grads = jax.grad(loss)(params)
            return jax.tree.map(lambda w, g: w - 0.1 * g, params, grads)

        return _ready(jax.jit(update), params)

    columns = {"step_1thread": step(1), "step_default_threads": step(None)}
    if cgj.DEFAULT_THREADS != 0:
        # The library's default team (OpenMP's default count), for comparison.
        columns["step_library_default_threads"] = step(_handlers.default_threads())
    return {
        "name": "detector-train-step-jax",
        "about": "a jitted training step around crop_and_resize (and an "
        "independent dense branch) with num_threads=1 and the default",
        "columns": columns,
        "ratios": {"default_over_1thread": ("step_default_threads", "step_1thread")},
    }


def pure_jax_roi_align(
    image, boxes, box_ind, output_size, spatial_scale, sampling_ratio, aligned
):
    """RoIAlign (average) in plain JAX, NCHW: what a JAX user writes today.

    torchvision's sampling (a fixed ``sampling_ratio`` > 0: the adaptive
    grid has no static shape in JAX) and its bilinear rule (samples more
    than a pixel outside the map are 0, others clamped to the border),
    written with ``jax.numpy``: four gathers of every sample's corners from
    the map in NHWC, then the mean of each bin's samples.  Its gradient is
    JAX's autodiff of the gathers (a scatter-add).
    """
    _, _, height, width = image.shape
    out_h, out_w = output_size
    grid = int(sampling_ratio)
    offset = np.float32(0.5 if aligned else 0.0)
    scale = np.float32(spatial_scale)
    x1, y1, x2, y2 = (boxes[:, i] * scale - offset for i in range(4))

    def axis(start, end, bins, size):
        extent = end - start
        if not aligned:
            extent = jnp.maximum(extent, 1.0)
        step = (jnp.arange(bins * grid) // grid).astype(jnp.float32)
        within = (jnp.arange(bins * grid) % grid + 0.5).astype(jnp.float32) / grid
        at = start[:, None] + (step + within)[None, :] * (extent / bins)[:, None]
        valid = (at >= -1.0) & (at <= size)
        at = jnp.maximum(at, 0.0)
        low = jnp.floor(at).astype(jnp.int32)
        last = low >= size - 1
        low = jnp.where(last, size - 1, low)
        high = jnp.where(last, size - 1, low + 1)
        frac = jnp.where(last, 0.0, at - low)
        return low, high, frac, valid

    y_low, y_high, ly, y_ok = axis(y1, y2, out_h, height)
    x_low, x_high, lx, x_ok = axis(x1, x2, out_w, width)
    maps = jnp.transpose(image, (0, 2, 3, 1))
    b = box_ind[:, None, None]

    def corner(y, x):
        return maps[b, y[:, :, None], x[:, None, :]]  # (K, out_h*g, out_w*g, C)

    ly, lx = ly[:, :, None, None], lx[:, None, :, None]
    top = corner(y_low, x_low) * (1 - lx) + corner(y_low, x_high) * lx
    bottom = corner(y_high, x_low) * (1 - lx) + corner(y_high, x_high) * lx
    samples = top * (1 - ly) + bottom * ly
    samples = jnp.where((y_ok[:, :, None] & x_ok[:, None, :])[..., None], samples, 0)
    k, channels = boxes.shape[0], image.shape[1]
    bins = samples.reshape(k, out_h, grid, out_w, grid, channels).mean(axis=(2, 4))
    return jnp.transpose(bins, (0, 3, 1, 2))


def _roi_rows(workload):
    p = workload.problem()  # NCHW arrays
    size, options = tuple(workload.crop), workload.options()
    image, boxes, box_ind = (
        jax.device_put(p[k]) for k in ("image", "boxes", "box_ind")
    )
    shape = (p["boxes"].shape[0], p["image"].shape[1], *size)
    grads_np = np.random.default_rng(7).standard_normal(shape, dtype=np.float32)

    def forward(num_threads=None):
        return lambda x: cgj.roi_align(
            x, boxes, box_ind, size, num_threads=num_threads, **options
        )

    def pure_forward(x):
        return pure_jax_roi_align(x, boxes, box_ind, size, **options)

    def numpy_forward(out=None):
        return cropgrad.roi_align(
            p["image"], p["boxes"], p["box_ind"], size, out=out, **options
        )

    def numpy_grad_image(out=None):
        return cropgrad.roi_align_grad_image(
            grads_np, p["boxes"], p["box_ind"], p["image"].shape, out=out, **options
        )

    rows = _op_rows(
        ("roi-fpn-forward-jax", "roi-fpn-forward-backward-jax"),
        (
            "cropgrad.jax.roi_align under jit vs the NumPy API and a jitted "
            "pure-JAX gather RoIAlign (its largest difference from torchvision's "
            "bits: {diff})",
            "roi_align and its image gradient (jax.vjp) under jit vs the NumPy "
            "API and pure JAX with autodiff (its largest difference from "
            "torchvision's bits: {diff})",
        ),
        forward,
        pure_forward,
        jax.device_put(grads_np),
        (numpy_forward, numpy_grad_image),
        (np.empty(shape, np.float32), np.empty_like(p["image"])),
        image,
    )
    for row in rows:
        row["targets"].append(
            (
                f"{row['name']}: at least 5x the pure-JAX gather op's speed",
                "pure_jax_over_cropgrad_jax",
                5.0,
                ">=",
            )
        )
    return rows


def extra_rows(workload, quick):
    """The JAX rows to add after `workload` (see the module docstring)."""
    if workload.name == "roi-fpn-forward":
        return _roi_rows(workload)
    if workload.name != "detector-forward":
        return []
    p = workload.problem()
    crop = tuple(workload.crop)
    rows = _forward_rows(p, crop)
    rows.append(_vmap_row(p, crop))
    rows.append(_train_step_row(p, crop))
    return rows
