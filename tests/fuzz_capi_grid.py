"""The C-level API's fuzz target, grid sampling's part (C-level API 1.2).

`execute` runs one case of fuzz_capi.py's for one of the four grid-sampling
functions, drawn from the seeded generator it is given:

- real NCHW or NHWC arrays of the arithmetic type (float32 or float64) of
  random shapes (zero dimensions included, their pointers NULL or not), grids
  reaching beyond [-1, 1] with NaN and infinities now and then, every
  mode, padding and ``align_corners``, random ``num_threads`` and
  ``flush_denormals``, now and then a grid or grads of the wrong shape and
  an output overlapping an input: the C call must give the NumPy API's
  bits, or its exception's class (by status code) and message;
- one code the NumPy API cannot pass (a mode, padding, layout or dtype
  code, a ``num_threads`` outside 0..1024, NULL for an array that holds
  bytes), the rest valid: the documented status and message, nothing
  written.
"""

import numpy as np
from fuzz_capi import (
    C,
    _dims,
    _image,
    code_message,
    judge_against_numpy,
    judge_c_only_code,
    layout_message,
    null_message,
    numpy_error_of,
    threads_message,
)

import cropgrad

OPS = ("grid_sample", "grid_sample_grad_image", "grid_sample_grad_grid",
       "grid_sample_jvp_grid")  # fmt: skip
MODES = ("bilinear", "nearest", "bicubic")
PADDINGS = ("zeros", "border", "reflection")
# The arrays each op reads, in the C function's order, the output apart.
INPUTS = {
    "grid_sample": ("image", "grid"),
    "grid_sample_grad_image": ("grads", "grid"),
    "grid_sample_grad_grid": ("grads", "image", "grid"),
    "grid_sample_jvp_grid": ("image", "grid", "grid_tangent"),
}
DTYPE_TEXT = "CG_FLOAT32 or CG_FLOAT64 (the arithmetic type of every array)"


def make_problem(rng):
    """A random call of one grid-sampling op, in the NumPy API's terms."""
    op = rng.choice(OPS)
    arith = np.dtype(rng.choice([np.float32, np.float64]))
    n, c, h, w, ho, wo = (_dims(rng) for _ in range(6))
    nprng = np.random.default_rng(rng.getrandbits(32))
    grid = nprng.uniform(-1.4, 1.4, (n, ho, wo, 2)).astype(arith)
    if grid.size and rng.random() < 0.1:
        grid.flat[rng.randrange(grid.size)] = rng.choice([np.nan, np.inf, -np.inf])
    if rng.random() < 0.05:
        grid = grid[:, :, :, :1].copy() if rng.random() < 0.5 else grid[: n // 2]
    nhwc = rng.random() < 0.5

    def laid_out(shape):
        """An NCHW `shape` in the call's layout."""
        return (shape[0], shape[2], shape[3], shape[1]) if nhwc else shape

    p = {
        "op": op,
        "nhwc": nhwc,
        "arith": arith,
        "mode": rng.randrange(3),
        "padding": rng.randrange(3),
        "aligned": rng.choice([0, 1]),
        "num_threads": rng.choice([0, 0, 1, 2, 3, 1024]),
        "flush": rng.choice([0, 1]),
        "record": rng.random() < 0.9,
        "grid": grid,
        "image_shape": laid_out((n, c, h, w)),
    }
    sampled = laid_out((n, c, ho, wo))
    if op != "grid_sample_grad_image":
        p["image"] = _image(rng, p["image_shape"], arith)
    if op in ("grid_sample_grad_image", "grid_sample_grad_grid"):
        grads = sampled if rng.random() > 0.05 else laid_out((n, c + 1, ho, wo))
        p["grads"] = _image(rng, grads, arith)
    if op == "grid_sample_jvp_grid":
        p["grid_tangent"] = _image(rng, grid.shape, arith)
    out_shape = {
        "grid_sample_grad_image": p["image_shape"],
        "grid_sample_grad_grid": grid.shape,
    }.get(op, sampled)
    p["out"] = np.full(out_shape, 7, arith)
    if rng.random() < 0.1:
        _overlap(rng, p)
    return p


def _overlap(rng, p):
    """The output as a view into an input's memory."""
    name = rng.choice(INPUTS[p["op"]])
    a, out = p[name], p["out"]
    if a.nbytes == 0 or out.nbytes == 0:
        return
    buf = np.zeros(out.nbytes + 2 * a.nbytes, np.uint8)
    start = rng.randrange(0, a.nbytes) // 8 * 8
    src = buf[start : start + a.nbytes].view(a.dtype).reshape(a.shape)
    src[...] = a
    p[name] = src
    p["out"] = buf[: out.nbytes].view(out.dtype).reshape(out.shape)


def numpy_result(p):
    """("ok", array) or ("error", status, message) from the NumPy API."""
    kw = dict(
        mode=MODES[p["mode"]],
        padding_mode=PADDINGS[p["padding"]],
        align_corners=bool(p["aligned"]),
        out=p["out"],
        num_threads=p["num_threads"] or None,
        flush_denormals=bool(p["flush"]),
        data_format="NHWC" if p["nhwc"] else "NCHW",
    )
    op = p["op"]
    if op == "grid_sample":
        args = (p["image"], p["grid"])
    elif op == "grid_sample_grad_image":
        args = (p["grads"], p["grid"], p["image_shape"])
    elif op == "grid_sample_grad_grid":
        args = (p["grads"], p["image"], p["grid"])
    else:
        args = (p["image"], p["grid"], p["grid_tangent"])
    return numpy_error_of(getattr(cropgrad, op), *args, **kw)


def c_call(consumer, p, rng, overrides=None):
    """The C call of problem `p`; `overrides` sets codes, and NULL for the
    arrays it names in ``"null"``."""
    o = dict(
        dtype=C["CG_FLOAT64" if p["arith"] == np.float64 else "CG_FLOAT32"],
        mode=p["mode"],
        padding_mode=p["padding"],
        align_corners=p["aligned"],
        layout=C["CG_NHWC" if p["nhwc"] else "CG_NCHW"],
        num_threads=p["num_threads"],
        null=(),
    )
    o.update(overrides or {})
    null = o.pop("null")

    def array(name):
        a = p[name]
        if name in null or (a.size == 0 and rng.random() < 0.8):
            return None
        return a

    tail = dict(o, output=array("out"), flush_denormals=p["flush"])
    tail["record"] = p["record"]
    op, grid = p["op"], p["grid"]
    if op == "grid_sample":
        return consumer.grid_sample(
            array("image"), p["image"].shape, array("grid"), grid.shape, **tail
        )
    if op == "grid_sample_grad_image":
        return consumer.grid_sample_grad_image(
            array("grads"), p["grads"].shape, array("grid"), grid.shape,
            image_size=p["image_shape"], **tail,
        )  # fmt: skip
    if op == "grid_sample_grad_grid":
        return consumer.grid_sample_grad_grid(
            array("grads"), p["grads"].shape, array("image"), p["image"].shape,
            array("grid"), grid.shape, **tail,
        )  # fmt: skip
    return consumer.grid_sample_jvp_grid(
        array("image"), p["image"].shape, array("grid"), array("grid_tangent"),
        grid.shape, **tail,
    )  # fmt: skip


def _c_only_code(rng, p):
    """An override the NumPy API cannot express and what C must answer."""
    kind = rng.choice(["mode", "padding_mode", "layout", "dtype", "threads", "null"])
    value = rng.choice([-1, 3, 7, 99, -(2**31), 2**31 - 1])
    bad = C["CG_ERR_VALUE"]
    if kind == "mode":
        return {kind: value}, (bad, (
            f"mode must be CG_BILINEAR (0), CG_NEAREST (1) or CG_BICUBIC (2), got "
            f"{value}"))  # fmt: skip
    if kind == "padding_mode":
        return {kind: value}, (bad, (
            "padding_mode must be CG_ZEROS (0), CG_BORDER (1) or CG_REFLECTION (2), "
            f"got {value}"))  # fmt: skip
    if kind == "layout":
        return {kind: value}, (bad, layout_message(value))
    if kind == "dtype":
        value = rng.choice([0, 11, -1, C["CG_FLOAT16"], C["CG_BFLOAT16"]])
        return {kind: value}, (
            C["CG_ERR_TYPE"],
            code_message("dtype", DTYPE_TEXT, value),
        )
    if kind == "threads":
        value = rng.choice([-1, 1025, -(2**31), 2**31 - 1])
        return {"num_threads": value}, (bad, threads_message(value))
    names = [k for k in (*INPUTS[p["op"]], "out") if p[k].nbytes > 0]
    name = rng.choice(names)
    c_name = "output" if name == "out" else name
    return {"null": (name,)}, (bad, null_message(c_name, p[name].nbytes))


def execute(rng, consumer):
    """One case (`rng` drawn by fuzz_capi.execute); None, or what went wrong."""
    p = make_problem(rng)
    if rng.random() < 0.25:
        if p["out"].nbytes == 0 or any(
            p[k].nbytes and np.shares_memory(p[k], p["out"]) for k in INPUTS[p["op"]]
        ):
            return None  # the code must be the only error: needs a clean problem
        p["grid"] = np.nan_to_num(p["grid"], nan=0.5, posinf=0.5, neginf=-0.5)
        if numpy_result(p)[0] != "ok":
            return None
        p["out"][...] = 7
        return judge_c_only_code(consumer, p, rng, c_call, _c_only_code)
    return judge_against_numpy(consumer, p, rng, c_call, numpy_result)
