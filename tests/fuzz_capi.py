"""Fuzz target of the C-level API: random calls judged against the NumPy API.

Each execution draws one call of one of the twelve C functions (the
crop_and_resize family's four, RoIAlign's four and grid sampling's four,
whose cases fuzz_capi_grid.py makes), through ctypes
(tests/capi_ctypes.py), from a seeded generator:

- real arrays of random shapes (zero dimensions included, their pointers
  NULL or not), both layouts, every image dtype, int32 or int64 box_ind,
  random data with NaN boxes and box_ind values out of range, random
  ``num_threads``, ``flush_denormals`` and methods, an output that may
  overlap an input, a NULL error record now and then; for RoIAlign also
  float32 and float64 arithmetic, boxes in pixels (some whose adaptive grid
  passes the sample bound), random ``spatial_scale`` (not finite too),
  ``sampling_ratio`` (above 4096 too), ``aligned`` and output dtypes; the
  NumPy API gets the same problem, and the C call must give its bits on
  success, or its exception's class (by status code) and message on error;
- one argument the NumPy API cannot pass (a bad method, layout or dtype
  code, a boxes or grads dtype code other than the arithmetic type's, a
  ``num_threads`` outside 0..1024, NULL for an array that holds bytes), the
  rest valid: the C call must return the documented status with the
  C-level API's own message (docs/capi.md) and write nothing;
- shapes beyond any memory (negative, or whose bytes overflow int64) with
  every pointer NULL: the call must fail with CG_ERR_VALUE before reading
  anything, with the NumPy API's message where it can make the same call
  (``crop_size``, ``output_size``, ``image_size``).

Usage::

    python -P tests/fuzz_capi.py --seconds 60 [--seed N] [--crash-file PATH]

prints one JSON line (executions, failures, seconds).  Before each
execution its seed is written to ``--crash-file``, so a process that dies
leaves the seed that killed it there; ``--replay SEED`` runs one case.
"""

import argparse
import json
import os
import random
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

import capi_ctypes  # noqa: E402
from _helpers import IMAGE_DTYPES  # noqa: E402

import cropgrad  # noqa: E402
import cropgrad.capi  # noqa: E402

C = cropgrad.capi._CODES
STATUS_OF = {
    ValueError: C["CG_ERR_VALUE"],
    IndexError: C["CG_ERR_INDEX"],
    TypeError: C["CG_ERR_TYPE"],
    MemoryError: C["CG_ERR_MEMORY"],
}
DTYPE_CODE = {np.dtype(t): C["CG_" + np.dtype(t).name.upper()] for t in IMAGE_DTYPES}
OUTPUT_DTYPES = [np.float16, np.float32, np.float64]
METHODS = {0: "bilinear", 1: "nearest"}
BILINEAR_ONLY = ("grad_boxes", "jvp_boxes")
INPUTS = ("image", "grads", "boxes", "boxes_tangent", "box_ind")
ROI_OPS = ("roi_forward", "roi_grad_image", "roi_grad_boxes", "roi_jvp_boxes")
OPS = ("forward", "grad_image", "grad_boxes", "jvp_boxes") + ROI_OPS
# RoIAlign's options, the usual ones first (drawn more often): scales of
# zero and below compute, those that are not finite are refused, as are
# more than 4096 samples per bin along an axis.
SCALES = [1.0, 0.5, 0.25, 2.0, 1 / 3, 0.0, -1.0, float("inf"), float("nan")]
RATIOS = [-1, 0, 1, 2, 3, -7, 4097, 2**31 - 1]
LAYOUTS = {0: "NHWC", 1: "NCHW"}
NAMES = {
    code: name
    for name, code in C.items()
    if name[3:4] in "UIF" or name == "CG_BFLOAT16"
}
IMAGE_CODES_TEXT = (
    "CG_UINT8, CG_INT8, CG_UINT16, CG_INT16, CG_INT32, CG_INT64, CG_FLOAT16, "
    "CG_FLOAT32, CG_FLOAT64 or CG_BFLOAT16"
)
OUTPUT_CODES_TEXT = "CG_FLOAT16, CG_FLOAT32, CG_FLOAT64 or CG_BFLOAT16"


# --------------------------------------------------------------------------
# The C-level API's own messages (docs/capi.md), for codes only C can pass


def code_message(argument, allowed, code):
    if code in NAMES:
        return f"{argument} must be {allowed}, got {NAMES[code]} ({code})"
    return f"{argument} must be {allowed}, got {code} (not a dtype code)"


def method_message(code, bilinear_only):
    allowed = (
        "CG_BILINEAR (0): the only method this op has"
        if bilinear_only
        else "CG_BILINEAR (0) or CG_NEAREST (1)"
    )
    return f"method must be {allowed}, got {code}"


def layout_message(code):
    return f"layout must be CG_NHWC (0) or CG_NCHW (1), got {code}"


def threads_message(n):
    return f"num_threads must be 0 (the default) or from 1 to 1024, got {n}"


# --------------------------------------------------------------------------
# Problems


def _dims(rng, small=6):
    """A dimension: mostly small and positive, sometimes 0."""
    return 0 if rng.random() < 0.08 else rng.randint(1, small)


def _image(rng, shape, dtype):
    dtype = np.dtype(dtype)
    nprng = np.random.default_rng(rng.getrandbits(32))
    if dtype.kind == "f":
        data = nprng.standard_normal(shape) * 10 ** rng.randint(-40, 4)
        if rng.random() < 0.2 and data.size:
            data.flat[rng.randrange(data.size)] = rng.choice([np.nan, np.inf, -np.inf])
        with np.errstate(over="ignore", under="ignore"):
            return data.astype(dtype)
    info = np.iinfo(dtype)
    return nprng.integers(info.min, info.max, shape, dtype=dtype, endpoint=True)


def _boxes(rng, n, batch):
    nprng = np.random.default_rng(rng.getrandbits(32))
    boxes = nprng.uniform(-0.4, 1.4, (n, 4)).astype(np.float32)
    box_ind = nprng.integers(0, max(batch, 1), n)
    if n and rng.random() < 0.1:
        boxes[rng.randrange(n), rng.randrange(4)] = rng.choice([np.nan, np.inf])
    if n and rng.random() < 0.1:
        box_ind[rng.randrange(n)] = rng.choice([-1, batch, batch + 5, -(2**31)])
    if n == 0 and rng.random() < 0.5:
        box_ind = np.zeros(0, np.int64)
    index_dtype = rng.choice([np.int32, np.int64])
    return boxes, box_ind.astype(index_dtype)


def _to_layout(shape_nhwc, layout):
    n, h, w, d = shape_nhwc
    return (n, d, h, w) if layout == 1 else (n, h, w, d)


def make_problem(rng):
    """A random call of one op on real arrays, in the NumPy API's terms."""
    op = rng.choice(OPS)
    layout = rng.choice([0, 1])
    p = {
        "op": op,
        "layout": layout,
        "method": 0 if op in BILINEAR_ONLY else rng.choice([0, 1]),
        "num_threads": rng.choice([0, 0, 1, 2, 3, 1024]),
        "flush": rng.choice([0, 1]),
        "record": rng.random() < 0.9,
    }
    if op in ROI_OPS:
        del p["method"]
        _roi_problem(rng, p)
        if rng.random() < 0.15:
            _overlap(rng, p)
        return p
    batch, height, width, depth = (_dims(rng) for _ in range(4))
    num_boxes = _dims(rng)
    crop = (_dims(rng, 5), _dims(rng, 5))
    p["boxes"], p["box_ind"] = _boxes(rng, num_boxes, batch)
    image_shape = _to_layout((batch, height, width, depth), layout)
    grads_shape = _to_layout((num_boxes, *crop, depth), layout)
    if op in ("forward", "jvp_boxes"):
        p["image"] = _image(rng, image_shape, rng.choice(IMAGE_DTYPES))
        p["crop"] = crop
        p["extrapolation"] = rng.choice([0.0, -1.5, float("nan"), 3e38])
        p["out"] = np.full(_to_layout((num_boxes, *crop, depth), layout), 7, np.float32)
        if op == "jvp_boxes":
            tangent = _image(rng, (num_boxes, 4), np.float32)
            p["boxes_tangent"] = tangent
    elif op == "grad_image":
        p["grads"] = _image(rng, grads_shape, np.float32)
        if rng.random() < 0.1:
            image_shape = _to_layout((batch, height, width, depth + 1), layout)
        p["image_size"] = image_shape
        p["out_dtype"] = np.dtype(rng.choice(OUTPUT_DTYPES))
        p["out"] = np.full(image_shape, 7, p["out_dtype"])
    else:
        p["grads"] = _image(rng, grads_shape, np.float32)
        if rng.random() < 0.1:
            image_shape = _to_layout((batch, height, width, depth + 1), layout)
        p["image"] = _image(rng, image_shape, rng.choice(IMAGE_DTYPES))
        p["out"] = np.full((num_boxes, 4), 7, np.float32)
    if rng.random() < 0.15:
        _overlap(rng, p)
    return p


def _roi_boxes(rng, n, batch, dtype):
    """Boxes [x1, y1, x2, y2] in pixels (some flipped, some outside the image,
    now and then one too large for the adaptive grid's sample bound), and
    box_ind, as _boxes draws them."""
    boxes, box_ind = _boxes(rng, n, batch)
    nprng = np.random.default_rng(rng.getrandbits(32))
    pixels = nprng.uniform(-3, 10, (n, 4))
    pixels[~np.isfinite(boxes)] = boxes[~np.isfinite(boxes)]
    if n and rng.random() < 0.05:
        pixels[rng.randrange(n), rng.choice([2, 3])] = rng.choice([1e9, 3e38])
    with np.errstate(over="ignore"):
        return pixels.astype(dtype), box_ind


def _roi_problem(rng, p):
    """A random RoIAlign call (`p` holds the op and the common options)."""
    op, layout = p["op"], p["layout"]
    batch, height, width, depth = (_dims(rng) for _ in range(4))
    num_boxes = _dims(rng)
    out_size = (_dims(rng, 4), _dims(rng, 4))
    p["spatial_scale"] = rng.choice(SCALES[:5] * 6 + SCALES[5:])
    p["sampling_ratio"] = rng.choice(RATIOS[:6] * 8 + RATIOS[6:])
    p["aligned"] = rng.choice([0, 1])
    image_shape = _to_layout((batch, height, width, depth), layout)
    grads_shape = _to_layout((num_boxes, *out_size, depth), layout)
    if op == "roi_grad_image":
        # The gradient's dtype is the arithmetic type's source.
        p["grads"] = _image(rng, grads_shape, rng.choice([np.float32, np.float64]))
        p["arith"] = p["grads"].dtype
        if rng.random() < 0.1:
            image_shape = _to_layout((batch, height, width, depth + 1), layout)
        p["image_size"] = image_shape
    else:
        p["image"] = _image(rng, image_shape, rng.choice(IMAGE_DTYPES))
        p["arith"] = np.dtype(
            np.float64 if p["image"].dtype == np.float64 else np.float32
        )
    p["boxes"], p["box_ind"] = _roi_boxes(rng, num_boxes, batch, p["arith"])
    if op == "roi_grad_boxes":
        if rng.random() < 0.1:
            grads_shape = _to_layout((num_boxes, *out_size, depth + 1), layout)
        p["grads"] = _image(rng, grads_shape, p["arith"])
        p["out"] = np.full((num_boxes, 4), 7, p["arith"])
        return p
    # float16 for float64 arithmetic is refused, by the NumPy API too.
    p["out_dtype"] = np.dtype(rng.choice([p["arith"]] * 3 + OUTPUT_DTYPES))
    if op == "roi_grad_image":
        p["out"] = np.full(image_shape, 7, p["out_dtype"])
        return p
    p["out_size"] = out_size
    p["out"] = np.full(grads_shape, 7, p["out_dtype"])
    if op == "roi_jvp_boxes":
        p["boxes_tangent"] = _image(rng, (num_boxes, 4), p["arith"])
    return p


def _overlap(rng, p):
    """Make the output a view into an input's memory (the same dtype's bytes)."""
    inputs = [k for k in INPUTS if k in p]
    name = rng.choice(inputs)
    out = p["out"]
    if out.nbytes == 0 or p[name].nbytes == 0:
        return
    # A buffer holding the input at some offset, the output at another.
    size = out.nbytes + 2 * p[name].nbytes
    buf = np.zeros(size + 64, np.uint8)
    start = rng.randrange(0, p[name].nbytes) // 8 * 8
    src = buf[start : start + p[name].nbytes].view(p[name].dtype).reshape(p[name].shape)
    src[...] = p[name]
    p[name] = src
    p["out"] = buf[: out.nbytes].view(out.dtype).reshape(out.shape)


def numpy_result(p):
    """("ok", array) or ("error", status, message) from the NumPy API."""
    kwargs = {
        "num_threads": p["num_threads"] or None,
        "flush_denormals": bool(p["flush"]),
        "data_format": LAYOUTS[p["layout"]],
        "out": p["out"],
    }
    if p["op"] in ROI_OPS:
        kwargs.update(
            spatial_scale=p["spatial_scale"],
            sampling_ratio=p["sampling_ratio"],
            aligned=bool(p["aligned"]),
        )
        if p["op"] != "roi_grad_boxes":
            kwargs["dtype"] = p["out_dtype"]
    try:
        if p["op"] == "roi_forward":
            out = cropgrad.roi_align(
                p["image"], p["boxes"], p["box_ind"], list(p["out_size"]), **kwargs
            )
        elif p["op"] == "roi_grad_image":
            out = cropgrad.roi_align_grad_image(
                p["grads"], p["boxes"], p["box_ind"], list(p["image_size"]), **kwargs
            )
        elif p["op"] == "roi_grad_boxes":
            out = cropgrad.roi_align_grad_boxes(
                p["grads"], p["image"], p["boxes"], p["box_ind"], **kwargs
            )
        elif p["op"] == "roi_jvp_boxes":
            out = cropgrad.roi_align_jvp_boxes(
                p["image"],
                p["boxes"],
                p["box_ind"],
                p["boxes_tangent"],
                list(p["out_size"]),
                **kwargs,
            )
        elif p["op"] == "forward":
            out = cropgrad.crop_and_resize(
                p["image"],
                p["boxes"],
                p["box_ind"],
                list(p["crop"]),
                METHODS[p["method"]],
                p["extrapolation"],
                **kwargs,
            )
        elif p["op"] == "grad_image":
            out = cropgrad.crop_and_resize_grad_image(
                p["grads"],
                p["boxes"],
                p["box_ind"],
                list(p["image_size"]),
                p["out_dtype"],
                METHODS[p["method"]],
                **kwargs,
            )
        elif p["op"] == "jvp_boxes":
            out = cropgrad.crop_and_resize_jvp_boxes(
                p["image"],
                p["boxes"],
                p["box_ind"],
                p["boxes_tangent"],
                list(p["crop"]),
                METHODS[p["method"]],
                **kwargs,
            )
        else:
            out = cropgrad.crop_and_resize_grad_boxes(
                p["grads"], p["image"], p["boxes"], p["box_ind"], **kwargs
            )
    except (ValueError, IndexError, TypeError, MemoryError) as exc:
        return ("error", STATUS_OF[type(exc)], str(exc))
    return ("ok", out)


def _maybe_null(rng, a):
    """An empty array is passed as NULL (mostly) or by its own pointer."""
    if a is not None and a.size == 0 and rng.random() < 0.8:
        return None
    return a


def c_call(consumer, p, rng=None, overrides=None):
    """The C call of problem `p` through `consumer`; `overrides` sets codes,
    and NULL for the arrays it names in ``"null"``."""
    rng = rng or random.Random(0)
    o = {
        "method": p.get("method"),
        "layout": p["layout"],
        "num_threads": p["num_threads"],
        "box_ind_dtype": C["CG_INT64"]
        if p["box_ind"].dtype == np.int64
        else C["CG_INT32"],
        "null": (),
    }
    if "image" in p:
        o["image_dtype"] = DTYPE_CODE[p["image"].dtype]
    if "out_dtype" in p:
        o["output_dtype"] = DTYPE_CODE[p["out_dtype"]]
    if "arith" in p:
        o["boxes_dtype"] = DTYPE_CODE[p["arith"]]
        o["grads_dtype"] = DTYPE_CODE[p["arith"]]
    o.update(overrides or {})

    def null(name):
        return None if name in o["null"] else _maybe_null(rng, p.get(name))

    out = null("out")
    if p["op"] in ROI_OPS:
        return _roi_c_call(consumer, p, o, null, out)
    if p["op"] == "forward":
        return consumer.crop_and_resize(
            null("image"),
            o["image_dtype"],
            p["image"].shape,
            null("boxes"),
            null("box_ind"),
            o["box_ind_dtype"],
            len(p["boxes"]),
            p["crop"][0],
            p["crop"][1],
            o["method"],
            p["extrapolation"],
            o["layout"],
            out,
            o["num_threads"],
            p["flush"],
            p["record"],
        )
    if p["op"] == "jvp_boxes":
        return consumer.crop_and_resize_jvp_boxes(
            null("image"),
            o["image_dtype"],
            p["image"].shape,
            null("boxes"),
            null("boxes_tangent"),
            null("box_ind"),
            o["box_ind_dtype"],
            len(p["boxes"]),
            p["crop"][0],
            p["crop"][1],
            o["method"],
            o["layout"],
            out,
            o["num_threads"],
            p["flush"],
            p["record"],
        )
    if p["op"] == "grad_image":
        return consumer.crop_and_resize_grad_image(
            null("grads"),
            p["grads"].shape,
            null("boxes"),
            null("box_ind"),
            o["box_ind_dtype"],
            p["image_size"],
            out,
            o["output_dtype"],
            o["method"],
            o["layout"],
            o["num_threads"],
            p["flush"],
            p["record"],
        )
    return consumer.crop_and_resize_grad_boxes(
        null("grads"),
        p["grads"].shape,
        null("image"),
        o["image_dtype"],
        p["image"].shape,
        null("boxes"),
        null("box_ind"),
        o["box_ind_dtype"],
        out,
        o["method"],
        o["layout"],
        o["num_threads"],
        p["flush"],
        p["record"],
    )


def _roi_c_call(consumer, p, o, null, out):
    """`c_call` of a RoIAlign op: `o` holds the codes, `null` gives the
    arrays (None for NULL), `out` is the output's."""
    options = (p["spatial_scale"], p["sampling_ratio"], p["aligned"], o["layout"])
    if p["op"] == "roi_forward":
        return consumer.roi_align(
            null("image"),
            o["image_dtype"],
            p["image"].shape,
            null("boxes"),
            o["boxes_dtype"],
            null("box_ind"),
            o["box_ind_dtype"],
            len(p["boxes"]),
            *p["out_size"],
            *options,
            out,
            o["output_dtype"],
            o["num_threads"],
            p["flush"],
            p["record"],
        )
    if p["op"] == "roi_jvp_boxes":
        return consumer.roi_align_jvp_boxes(
            null("image"),
            o["image_dtype"],
            p["image"].shape,
            null("boxes"),
            null("boxes_tangent"),
            o["boxes_dtype"],
            null("box_ind"),
            o["box_ind_dtype"],
            len(p["boxes"]),
            *p["out_size"],
            *options,
            out,
            o["output_dtype"],
            o["num_threads"],
            p["flush"],
            p["record"],
        )
    if p["op"] == "roi_grad_image":
        return consumer.roi_align_grad_image(
            null("grads"),
            o["grads_dtype"],
            p["grads"].shape,
            null("boxes"),
            o["boxes_dtype"],
            null("box_ind"),
            o["box_ind_dtype"],
            p["image_size"],
            *options,
            out,
            o["output_dtype"],
            o["num_threads"],
            p["flush"],
            p["record"],
        )
    return consumer.roi_align_grad_boxes(
        null("grads"),
        o["grads_dtype"],
        p["grads"].shape,
        null("image"),
        o["image_dtype"],
        p["image"].shape,
        null("boxes"),
        o["boxes_dtype"],
        null("box_ind"),
        o["box_ind_dtype"],
        *options,
        out,
        o["num_threads"],
        p["flush"],
        p["record"],
    )


def same_bits(a, b):
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def judge(result, expected, out, before):
    """None, or what is wrong with the C call's `result`."""
    status = result[0]
    if len(result) == 3 and result[0] == 0 and result[1:] != (-1, ""):
        return f"success with a record {result!r}"
    if expected[0] == "ok":
        if status != 0:
            return f"C failed with {result!r}, the NumPy API succeeded"
        if not same_bits(out, expected[1]):
            return "C's output differs from the NumPy API's"
        return None
    _, want_status, want_message = expected
    if status != want_status:
        return f"status {status}, the NumPy API's is {want_status}: {want_message!r}"
    if len(result) == 3 and result[2] != want_message:
        return f"message {result[2]!r}, the NumPy API's {want_message!r}"
    if not same_bits(out, before):
        return "an error, yet the output was written"
    return None


# --------------------------------------------------------------------------
# One execution


def _c_only_code(rng, p):
    """An override the NumPy API cannot express and what C must answer."""
    roi = p["op"] in ROI_OPS
    kinds = ["layout", "num_threads", "box_ind_dtype", "null"]
    kinds += ["image_dtype"] if "image" in p else ["output_dtype"]
    if roi:
        kinds += ["boxes_dtype"] + (["grads_dtype"] if "grads" in p else [])
        kinds += ["output_dtype"] if "out_dtype" in p and "image" in p else []
    else:
        kinds += ["method"]
    kind = rng.choice(kinds)
    value = rng.choice([-1, 2, 7, 10, 99, -(2**31), 2**31 - 1])
    if kind == "method":
        bilinear_only = p["op"] in BILINEAR_ONLY
        value = rng.choice([1, value]) if bilinear_only else value
        if value in ((0,) if bilinear_only else (0, 1)):
            value = 2
        return {kind: value}, (C["CG_ERR_VALUE"], method_message(value, bilinear_only))
    if kind == "layout":
        value = 2 if value in (0, 1) else value
        return {kind: value}, (C["CG_ERR_VALUE"], layout_message(value))
    if kind == "num_threads":
        value = rng.choice([-1, 1025, -(2**31), 2**31 - 1])
        return {kind: value}, (C["CG_ERR_VALUE"], threads_message(value))
    if kind == "null":
        return _null_array(rng, p)
    if kind == "box_ind_dtype":
        value = rng.choice([C["CG_FLOAT32"], C["CG_UINT8"], 0, 10, -3])
        return {kind: value}, (
            C["CG_ERR_TYPE"],
            code_message("box_ind_dtype", "CG_INT32 or CG_INT64", value),
        )
    if kind == "image_dtype":
        value = rng.choice([0, 11, -1, 99])
        return {kind: value}, (
            C["CG_ERR_TYPE"],
            code_message("image_dtype", IMAGE_CODES_TEXT, value),
        )
    if kind in ("boxes_dtype", "grads_dtype"):
        return _roi_typed_code(rng, p, kind)
    value = rng.choice([C["CG_UINT8"], C["CG_INT64"], 0, 11])
    if roi and p["arith"] == np.float64 and rng.random() < 0.5:
        value = rng.choice([C["CG_FLOAT16"], C["CG_BFLOAT16"]])
        allowed = "CG_FLOAT32 or CG_FLOAT64 for float64 arithmetic"
        return {kind: value}, (C["CG_ERR_TYPE"], code_message(kind, allowed, value))
    return {kind: value}, (
        C["CG_ERR_TYPE"],
        code_message("output_dtype", OUTPUT_CODES_TEXT, value),
    )


def roi_typed_text(arith):
    """What RoIAlign's boxes_dtype (and the boxes gradient's grads_dtype)
    must be, in the C-level API's words, for arithmetic `arith`."""
    if np.dtype(arith) == np.float64:
        return "CG_FLOAT64 for float64 data, CG_FLOAT32 otherwise (the arithmetic type)"
    return "CG_FLOAT32 for data other than float64 (the arithmetic type)"


def _roi_typed_code(rng, p, kind):
    """A boxes_dtype or grads_dtype code other than the arithmetic type's."""
    other = C["CG_FLOAT32"] if p["arith"] == np.float64 else C["CG_FLOAT64"]
    if kind == "grads_dtype" and p["op"] == "roi_grad_image":
        # grads' own dtype is the arithmetic type's source: not a float one.
        value = rng.choice([C["CG_FLOAT16"], C["CG_BFLOAT16"], C["CG_INT32"], 0, 99])
        allowed = "CG_FLOAT32 or CG_FLOAT64 (the arithmetic type)"
    else:
        value = rng.choice([other, other, C["CG_FLOAT16"], C["CG_UINT8"], 0, 99])
        allowed = roi_typed_text(p["arith"])
    return {kind: value}, (C["CG_ERR_TYPE"], code_message(kind, allowed, value))


def null_message(name, nbytes):
    return (
        f"{name} is NULL but its shape holds {nbytes} bytes (NULL is only for an "
        "empty array)"
    )


def _null_array(rng, p):
    """NULL for one array that holds bytes (the output included)."""
    names = [k for k in (*INPUTS, "out") if k in p and p[k].nbytes > 0]
    name = rng.choice(names)
    c_name = name
    if name == "out":
        c_name = "crops" if p["op"] == "forward" else "output"
    message = null_message(c_name, p[name].nbytes)
    return {"null": (name,)}, (C["CG_ERR_VALUE"], message)


HUGE = [-1, -(2**62), 2**31, 2**40, 2**62, 2**63 - 1]


def _huge_case(rng, consumer):
    """Shapes beyond memory, every pointer NULL: an error before any read."""
    op = rng.choice(["forward", "grad_image", "grad_boxes"] + list(ROI_OPS[:3]))
    shape = [rng.choice(HUGE + [1, 3]) for _ in range(4)]
    if all(v in (1, 3) for v in shape):
        shape[rng.randrange(4)] = rng.choice(HUGE)
    box_ind_dtype = C["CG_INT64"]
    expected = None
    if op in ROI_OPS:
        result, expected = _roi_huge_case(rng, consumer, op, tuple(shape))
    elif op == "forward":
        crop = [rng.choice(HUGE + [2]), rng.choice(HUGE + [2])]
        num_boxes = rng.choice([0, 1, 2**40, 2**62])
        small = rng.random() < 0.5
        image_shape = (1, 2, 2, 1) if small else tuple(shape)
        result = consumer.crop_and_resize(
            None, C["CG_FLOAT32"], image_shape, None, None, box_ind_dtype,
            num_boxes, crop[0], crop[1], 0, 0.0, 0, None, 0, 0,
        )  # fmt: skip
        # The NumPy API only where it must fail too (it would allocate the rest).
        if (
            small
            and num_boxes <= 1
            and (min(crop) <= 0 or _beyond((num_boxes, *crop, 1), 4))
        ):
            image = np.zeros(image_shape, np.float32)
            boxes = np.zeros((num_boxes, 4), np.float32)
            expected = _numpy_error(
                cropgrad.crop_and_resize, image, boxes, [0] * num_boxes, crop
            )
    elif op == "grad_image":
        grads_shape = (1, 1, 1, 1) if rng.random() < 0.5 else tuple(shape)
        image_size = tuple(rng.choice(HUGE + [1, 2]) for _ in range(4))
        result = consumer.crop_and_resize_grad_image(
            None, grads_shape, None, None, box_ind_dtype, image_size, None,
            C["CG_FLOAT32"], 0, 0, 0, 0,
        )  # fmt: skip
        if grads_shape == (1, 1, 1, 1) and (
            min(image_size) < 0 or _beyond(image_size, 4)
        ):
            expected = _numpy_error(
                cropgrad.crop_and_resize_grad_image,
                np.zeros(grads_shape, np.float32),
                np.zeros((1, 4), np.float32),
                [0],
                list(image_size),
            )
    else:
        other = tuple(rng.choice(HUGE + [1, 2]) for _ in range(4))
        result = consumer.crop_and_resize_grad_boxes(
            None, tuple(shape), None, C["CG_FLOAT32"], other, None, None,
            box_ind_dtype, None, 0, 0, 0, 0,
        )  # fmt: skip
    if result[0] == 0:
        return f"{op} with shapes beyond memory succeeded: {result!r}"
    if expected is not None and expected[0] == "error":
        if result[0] != expected[1] or result[2] != expected[2]:
            return f"{op}: {result!r}, the NumPy API's {expected!r}"
    if result[0] not in (C["CG_ERR_VALUE"], C["CG_ERR_INDEX"]) or not result[2]:
        return f"{op}: unexpected {result!r}"
    return None


def _roi_huge_case(rng, consumer, op, shape):
    """`_huge_case` of a RoIAlign op: (the C call's result, the NumPy API's
    where it must fail too, or None)."""
    f32, i64 = C["CG_FLOAT32"], C["CG_INT64"]
    expected = None
    if op == "roi_forward":
        out_size = [rng.choice(HUGE + [2]), rng.choice(HUGE + [2])]
        num_boxes = rng.choice([0, 1, 2**40, 2**62])
        small = rng.random() < 0.5
        image_shape = (1, 1, 2, 2) if small else shape
        result = consumer.roi_align(
            None, f32, image_shape, None, f32, None, i64, num_boxes, *out_size,
            1.0, -1, 0, C["CG_NCHW"], None, f32, 0, 0,
        )  # fmt: skip
        if (
            small
            and num_boxes <= 1
            and (min(out_size) <= 0 or _beyond((num_boxes, 1, *out_size), 4))
        ):
            expected = _numpy_error(
                cropgrad.roi_align,
                np.zeros(image_shape, np.float32),
                np.zeros((num_boxes, 4), np.float32),
                [0] * num_boxes,
                out_size,
            )
    elif op == "roi_grad_image":
        grads_shape = (1, 1, 1, 1) if rng.random() < 0.5 else shape
        image_size = tuple(rng.choice(HUGE + [1, 2]) for _ in range(4))
        result = consumer.roi_align_grad_image(
            None, f32, grads_shape, None, f32, None, i64, image_size, 1.0, -1, 0,
            C["CG_NCHW"], None, f32, 0, 0,
        )  # fmt: skip
        if grads_shape == (1, 1, 1, 1) and (
            min(image_size) < 0 or _beyond(image_size, 4)
        ):
            expected = _numpy_error(
                cropgrad.roi_align_grad_image,
                np.zeros(grads_shape, np.float32),
                np.zeros((1, 4), np.float32),
                [0],
                list(image_size),
            )
    else:
        other = tuple(rng.choice(HUGE + [1, 2]) for _ in range(4))
        result = consumer.roi_align_grad_boxes(
            None, f32, shape, None, f32, other, None, f32, None, i64, 1.0, -1, 0,
            C["CG_NCHW"], None, 0, 0,
        )  # fmt: skip
    return result, expected


def _beyond(shape, itemsize):
    """Whether the non-zero dimensions' bytes exceed int64 (no memory has them)."""
    span = itemsize
    for n in shape:
        span *= n or 1
    return span > 2**63 - 1


def _numpy_error(fn, *args):
    result = numpy_error_of(fn, *args)
    return result if result[0] == "error" else ("ok",)


def numpy_error_of(fn, *args, **kwargs):
    """("ok", result) or ("error", status, message) of a NumPy API call."""
    try:
        out = fn(*args, **kwargs)
    except (ValueError, IndexError, TypeError, MemoryError) as exc:
        return ("error", STATUS_OF[type(exc)], str(exc))
    return ("ok", out)


def judge_c_only_code(consumer, p, rng, c_call, c_only_code):
    """Call with one code the NumPy API cannot pass (`c_only_code` draws it).

    The call must return the documented status and message and leave the
    output as it was; None, or what went wrong.
    """
    overrides, (status, message) = c_only_code(rng, p)
    p["record"] = True
    before = p["out"].copy()
    result = c_call(consumer, p, rng, overrides)
    if result[0] != status or result[2] != message:
        return f"{overrides}: {result!r}, documented ({status}, {message!r})"
    if not same_bits(p["out"], before):
        return "a code error, yet the output was written"
    return None


def judge_against_numpy(consumer, p, rng, c_call, numpy_result):
    """Call `p` in C and judge it against the NumPy API's result of it."""
    before = p["out"].copy()
    expected = numpy_result(p)
    if expected[0] == "ok":
        expected = ("ok", expected[1].copy())
    p["out"][...] = before
    return judge(c_call(consumer, p, rng), expected, p["out"], before)


def execute(seed, consumer):
    """Run the case of `seed`; None, or what went wrong."""
    rng = random.Random(seed)
    kind = rng.random()
    if kind < 0.12:
        return _huge_case(rng, consumer)
    if kind > 0.7:
        # Grid sampling's functions (1.2), in fuzz_capi_grid.py.
        import fuzz_capi_grid

        return fuzz_capi_grid.execute(rng, consumer)
    p = make_problem(rng)
    if kind < 0.3:
        if p["out"].nbytes == 0 or any(
            p[k].nbytes and np.shares_memory(p[k], p["out"]) for k in INPUTS if k in p
        ):
            return None  # the code must be the only error: needs a clean problem
        p["boxes"] = np.nan_to_num(p["boxes"], nan=0.5, posinf=0.5)
        batch = p["image"].shape[0] if "image" in p else p["image_size"][0]
        p["box_ind"] = np.clip(p["box_ind"], 0, max(batch - 1, 0))
        if numpy_result(p)[0] != "ok":
            return None
        return judge_c_only_code(consumer, p, rng, c_call, _c_only_code)
    return judge_against_numpy(consumer, p, rng, c_call, numpy_result)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--crash-file", default=None)
    parser.add_argument("--replay", type=int, default=None)
    args = parser.parse_args(argv)
    consumer = capi_ctypes.CtypesConsumer()
    if args.replay is not None:
        problem = execute(args.replay, consumer)
        print(json.dumps({"seed": args.replay, "failure": problem}))
        return 1 if problem else 0
    base = args.seed if args.seed is not None else random.randrange(2**32)
    failures = []
    executions = 0
    start = time.perf_counter()
    while time.perf_counter() - start < args.seconds:
        seed = base * 1_000_003 + executions
        if args.crash_file:
            with open(args.crash_file, "w") as f:
                f.write(str(seed))
        problem = execute(seed, consumer)
        if problem:
            failures.append({"seed": seed, "failure": problem})
        executions += 1
    print(
        json.dumps(
            {
                "base_seed": base,
                "executions": executions,
                "seconds": round(time.perf_counter() - start, 2),
                "failures": failures[:20],
                "failure_count": len(failures),
            }
        )
    )
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
