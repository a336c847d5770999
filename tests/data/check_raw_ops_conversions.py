"""Compare how TensorFlow and ``cropgrad.raw_ops`` convert their arguments.

Each case changes one argument of a small valid call into another form (a
NumPy array of another dtype, a Python list, a byte string, ...) and calls
``tf.raw_ops.<Op>`` and ``cropgrad.raw_ops.<Op>`` with the same arguments.
It prints one row per case: what TensorFlow did, what cropgrad did, and
whether they agree (both refuse, or both return the same bits).  A case
where both refuse counts as agreeing whatever the exception types: the
exception cropgrad raises is its own (docs/semantics.md).

Run it with a Python that has TensorFlow and NumPy, from the repository root
after an in-place build (``python setup.py build_ext --inplace``)::

    python3 -m venv /path/to/tfvenv
    /path/to/tfvenv/bin/pip install tensorflow-cpu numpy
    /path/to/tfvenv/bin/python tests/data/check_raw_ops_conversions.py

``--markdown`` prints the table as Markdown; ``--differences`` prints only
the rows that disagree.  The exit status is 0 when every difference is one
that docs/semantics.md lists (``DOCUMENTED`` below), 1 otherwise.

Cases that crash TensorFlow (non-finite boxes in the gradients) are left
out: docs/semantics.md lists them.
"""

import argparse
import os
import sys
import warnings

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import ml_dtypes  # noqa: E402  (installed with TensorFlow)
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(__file__))))

import cropgrad  # noqa: E402
from cropgrad import raw_ops  # noqa: E402

# The serial, deterministic kernel: the multi-threaded one races.
tf.config.threading.set_inter_op_parallelism_threads(1)
tf.config.threading.set_intra_op_parallelism_threads(1)
tf.config.experimental.enable_op_determinism()

BATCH, HEIGHT, WIDTH, DEPTH = 2, 4, 5, 3
NUM_BOXES, CROP_H, CROP_W = 2, 3, 2

OPS = ("CropAndResizeGradImage", "CropAndResize", "CropAndResizeGradBoxes")
ARGS = {
    "CropAndResizeGradImage": (
        "grads",
        "boxes",
        "box_ind",
        "image_size",
        "T",
        "method",
    ),
    "CropAndResize": (
        "image",
        "boxes",
        "box_ind",
        "crop_size",
        "method",
        "extrapolation_value",
    ),
    "CropAndResizeGradBoxes": ("grads", "image", "boxes", "box_ind", "method"),
}

# Differences kept on purpose, each explained in docs/semantics.md ("The
# raw_ops drop-ins"): case name -> why.
_WRAPS = "TensorFlow wraps integers beyond int32 around; cropgrad refuses them"
_COMPLEX = "TensorFlow drops the imaginary part; cropgrad refuses complex input"
_STRINGS = "TensorFlow parses NumPy strings as numbers; cropgrad refuses them"
_FLOAT16 = "float16 output: cropgrad rounds once, TensorFlow after every addition"
_MORE = "cropgrad accepts a spelling TensorFlow refuses"
DOCUMENTED = {
    "box_ind: int64 2**32 (wraps to 0)": _WRAPS,
    "box_ind: int64 -(2**32)+1 (wraps to 1)": _WRAPS,
    "box_ind: list with 2**32": _WRAPS,
    "image_size: int64 with 2**32 + 3 (wraps to 3)": _WRAPS,
    "image_size: list with 2**32 + 3": _WRAPS,
    "crop_size: int64 with 2**32 + 2 (wraps to 2)": _WRAPS,
    "crop_size: list with 2**32 + 2": _WRAPS,
    "grads: complex64 array": _COMPLEX,
    "boxes: complex64 array": _COMPLEX,
    "box_ind: complex128 array": _COMPLEX,
    "grads: str array": _STRINGS,
    "boxes: str array": _STRINGS,
    "box_ind: str array": _STRINGS,
    "image_size: str array": _STRINGS,
    "crop_size: str array": _STRINGS,
    "T: tf.float16": _FLOAT16,
    "T: np.float16": _FLOAT16,
    "T: 'half'": _FLOAT16,
    "T: 'f4'": _MORE,
    "extrapolation_value: np.array(2.0) (0-d)": _MORE,
}


# TensorFlow 2.21 segfaults on these (a box that is infinite once rounded to
# float32, in the gradients): not run.
CRASHES_TENSORFLOW = {
    ("boxes: float64 1e40 (beyond float32)", "CropAndResizeGradImage"),
    ("boxes: float64 1e40 (beyond float32)", "CropAndResizeGradBoxes"),
}


def base_args(op):
    rng = np.random.default_rng(0)
    grads = rng.standard_normal((NUM_BOXES, CROP_H, CROP_W, DEPTH)).astype(np.float32)
    image = rng.standard_normal((BATCH, HEIGHT, WIDTH, DEPTH)).astype(np.float32)
    boxes = np.array([[0.1, 0.2, 0.8, 0.9], [0.9, 0.0, 0.2, 1.0]], np.float32)
    values = {
        "grads": grads,
        "image": image,
        "boxes": boxes,
        "box_ind": np.array([1, 0], np.int32),
        "image_size": np.array([BATCH, HEIGHT, WIDTH, DEPTH], np.int32),
        "crop_size": np.array([CROP_H, CROP_W], np.int32),
        "T": tf.float32,
        "method": "bilinear",
        "extrapolation_value": 0.0,
    }
    return {key: values[key] for key in ARGS[op]}


def _float_arrays(name, shape, valid):
    """Forms of a float32 input: other dtypes, lists, byte orders."""
    rng = np.random.default_rng(1)
    if valid is None:
        data = rng.standard_normal(shape)
    else:
        data = valid.astype(np.float64)
    return [
        (f"{name}: float64 array", data),
        (f"{name}: float16 array", data.astype(np.float16)),
        (f"{name}: int64 array", np.round(data * 3).astype(np.int64)),
        (f"{name}: int32 array", np.round(data * 3).astype(np.int32)),
        (f"{name}: uint8 array", np.abs(np.round(data * 3)).astype(np.uint8)),
        (f"{name}: bool array", data > 0.5),
        (f"{name}: complex64 array", data.astype(np.complex64) + 0.5j),
        (f"{name}: bfloat16 array", data.astype(ml_dtypes.bfloat16)),
        (f"{name}: list of floats", data.tolist()),
        (f"{name}: list of bools", (data > 0.5).tolist()),
        (f"{name}: list of ints", np.round(data * 3).astype(int).tolist()),
        (f"{name}: big-endian float64", data.astype(">f8")),
        (f"{name}: Fortran-order float64", np.asfortranarray(data)),
        (f"{name}: object array of floats", data.astype(object)),
        (f"{name}: str array", data.astype(str)),
    ]


BOXES = np.array([[0.1, 0.2, 0.8, 0.9], [0.9, 0.0, 0.2, 1.0]])


def cases():
    """(name, argument, value) for every argument form tried."""
    out = []
    shape_g = (NUM_BOXES, CROP_H, CROP_W, DEPTH)
    shape_i = (BATCH, HEIGHT, WIDTH, DEPTH)
    for name, value in _float_arrays("grads", shape_g, None):
        out.append((name, "grads", value))
    for name, value in _float_arrays("image", shape_i, None):
        out.append((name, "image", value))
    out.append(("image: uint32 array", "image", np.ones(shape_i, np.uint32)))
    out.append(("image: int8 array", "image", np.ones(shape_i, np.int8)))
    out.append(("image: uint16 array", "image", np.ones(shape_i, np.uint16)))
    for name, value in _float_arrays("boxes", (NUM_BOXES, 4), BOXES):
        out.append((name, "boxes", value))
    out.append(
        ("boxes: float64 1e40 (beyond float32)", "boxes", BOXES * [1, 1, 1e40, 1])
    )

    def index(name, value):
        out.append((f"box_ind: {name}", "box_ind", value))

    index("float64 [1.0, 0.0]", np.array([1.0, 0.0]))
    index("float64 [1.7, 0.2] (truncated to [1, 0])", np.array([1.7, 0.2]))
    index("float64 [-0.5, 1.9] (truncated to [0, 1])", np.array([-0.5, 1.9]))
    index("float32 [1.5, 0.5]", np.array([1.5, 0.5], np.float32))
    index("float16 [1.5, 0.5]", np.array([1.5, 0.5], np.float16))
    index("big-endian float64", np.array([1.5, 0.5], ">f8"))
    index("float64 [2.5, 0] (2 after truncation: out of range)", np.array([2.5, 0]))
    index("float64 [-1.5, 0] (-1 after truncation)", np.array([-1.5, 0.0]))
    index("float64 [nan, 0]", np.array([np.nan, 0.0]))
    index("float64 [1e10, 0]", np.array([1e10, 0.0]))
    index("float64 [-1e10, 0]", np.array([-1e10, 0.0]))
    index("float64 [inf, 0]", np.array([np.inf, 0.0]))
    index("list of floats [1.0, 0.0]", [1.0, 0.0])
    index("list of floats [1.5, 0.0]", [1.5, 0.0])
    index("list of numpy floats", [np.float64(1.0), np.float64(0.0)])
    index("int64 array", np.array([1, 0], np.int64))
    index("uint8 array", np.array([1, 0], np.uint8))
    index("uint64 2**64-1 (wraps to -1)", np.array([2**64 - 1, 0], np.uint64))
    index("int64 2**32 (wraps to 0)", np.array([2**32, 0], np.int64))
    index("int64 -(2**32)+1 (wraps to 1)", np.array([-(2**32) + 1, 0], np.int64))
    index("list with 2**32", [2**32, 0])
    index("bool array", np.array([True, False]))
    index("list of bools", [True, False])
    index("complex128 array", np.array([1 + 0j, 0 + 0j]))
    index("object array of ints", np.array([1, 0], dtype=object))
    index("object array of floats [1.5, 0.2]", np.array([1.5, 0.2], dtype=object))
    index("object array [1, 0.2]", np.array([1, 0.2], dtype=object))
    index("object array with 2**32", np.array([2**32, 0], dtype=object))
    index("str array", np.array(["1", "0"]))
    index("empty list (with 2 boxes)", [])

    for arg, valid in (
        ("image_size", [BATCH, HEIGHT, WIDTH, DEPTH]),
        ("crop_size", [CROP_H, CROP_W]),
    ):

        def size(name, value, arg=arg):
            out.append((f"{arg}: {name}", arg, value))

        size("list of ints", list(valid))
        size("tuple of ints", tuple(valid))
        size("int64 array", np.array(valid, np.int64))
        size("uint64 array", np.array(valid, np.uint64))
        size("float64 array", np.array(valid, np.float64))
        size(
            "float64 array with .5",
            np.array(valid, np.float64) + [0, 0.5] * (len(valid) // 2),
        )
        size("float32 array", np.array(valid, np.float32))
        size("list of floats", [float(v) for v in valid])
        size("object array of ints", np.array(valid, dtype=object))
        size("object array of floats", np.array(valid, dtype=float).astype(object))
        size("float64 array with nan", np.array([np.nan, *valid[1:]], np.float64))
        size("float64 array with -1.5", np.array([-1.5, *valid[1:]], np.float64))
        size("float64 array with 1e10", np.array([1e10, *valid[1:]], np.float64))
        size("list of bools", [True] * len(valid))
        wrapped = [*valid[:-1], 2**32 + valid[-1]]
        size(
            f"int64 with 2**32 + {valid[-1]} (wraps to {valid[-1]})",
            np.array(wrapped, np.int64),
        )
        size(f"list with 2**32 + {valid[-1]}", wrapped)
        size("bool array", np.ones(len(valid), bool))
        size("str array", np.array([str(v) for v in valid]))

    for name, value in [
        ("tf.float32", tf.float32),
        ("tf.float64", tf.float64),
        ("tf.float16", tf.float16),
        ("np.float32", np.float32),
        ("np.float64", np.float64),
        ("np.float16", np.float16),
        ("np.dtype('float32')", np.dtype("float32")),
        ("np.dtype('<f4')", np.dtype("<f4")),
        ("np.dtype('>f4')", np.dtype(">f4")),
        ("'float32'", "float32"),
        ("'float'", "float"),
        ("'half'", "half"),
        ("'double'", "double"),
        ("'float64'", "float64"),
        ("'f4'", "f4"),
        ("float (Python type)", float),
        ("tf.bfloat16", tf.bfloat16),
        ("tf.int32", tf.int32),
        ("np.int32", np.int32),
        ("None", None),
    ]:
        out.append((f"T: {name}", "T", value))

    for name, value in [
        ("'nearest'", "nearest"),
        ("b'nearest'", b"nearest"),
        ("b'bilinear'", b"bilinear"),
        ("'Bilinear'", "Bilinear"),
        ("'area'", "area"),
        ("None", None),
        ("np.str_('nearest')", np.str_("nearest")),
    ]:
        out.append((f"method: {name}", "method", value))

    for name, value in [
        ("1 (int)", 1),
        ("-1.5", -1.5),
        ("np.float64(2.5)", np.float64(2.5)),
        ("np.float32(2.5)", np.float32(2.5)),
        ("np.int64(3)", np.int64(3)),
        ("np.array(2.0) (0-d)", np.array(2.0)),
        ("0.1 (rounded to float32)", 0.1),
        ("nan", float("nan")),
        ("inf", float("inf")),
        ("1e40 (beyond float32)", 1e40),
        ("True", True),
        ("np.bool_(True)", np.bool_(True)),
        ("'0'", "0"),
        ("None", None),
        ("[0.0]", [0.0]),
    ]:
        out.append((f"extrapolation_value: {name}", "extrapolation_value", value))
    return out


def _outcome(call):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            result = call()
        except Exception as exc:  # noqa: BLE001 - any refusal is an outcome
            message = " ".join(str(exc).split())
            if len(message) > 70:
                message = message[:67] + "..."
            return None, f"{type(exc).__name__}: {message}", caught
    if hasattr(result, "numpy"):
        result = result.numpy()
    return np.asarray(result), None, caught


def _describe(result, error, caught):
    if error is not None:
        text = f"refuses ({error})"
    else:
        text = f"{result.dtype} {list(result.shape)}"
    if caught:
        kinds = sorted({w.category.__name__ for w in caught})
        text += f" + {', '.join(kinds)}"
    return text


def _bits_equal(a, b):
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def run():
    rows = []
    for name, arg, value in cases():
        for op in OPS:
            if arg not in ARGS[op] or (name, op) in CRASHES_TENSORFLOW:
                continue
            args = base_args(op)
            args[arg] = value
            tf_result, tf_error, tf_warn = _outcome(
                lambda op=op, args=args: getattr(tf.raw_ops, op)(**args)
            )
            cg_result, cg_error, cg_warn = _outcome(
                lambda op=op, args=args: getattr(raw_ops, op)(**args)
            )
            if tf_error and cg_error:
                verdict = "same (both refuse)"
            elif tf_error or cg_error:
                verdict = "DIFFERENT (one refuses)"
            elif _bits_equal(tf_result, cg_result):
                verdict = "same bits"
            else:
                verdict = "DIFFERENT RESULT"
            if "DIFFERENT" in verdict and name in DOCUMENTED:
                verdict += f" - documented: {DOCUMENTED[name]}"
            if cg_warn:
                verdict += "; cropgrad WARNS"
            rows.append(
                (
                    name,
                    op,
                    _describe(tf_result, tf_error, tf_warn),
                    _describe(cg_result, cg_error, cg_warn),
                    verdict,
                )
            )
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--markdown", action="store_true", help="a Markdown table")
    parser.add_argument(
        "--differences", action="store_true", help="only the rows that disagree"
    )
    options = parser.parse_args(argv)
    print(
        f"TensorFlow {tf.__version__}, NumPy {np.__version__}, "
        f"cropgrad {cropgrad.__version__}",
        file=sys.stderr,
    )
    rows = run()
    undocumented = [
        row
        for row in rows
        if ("DIFFERENT" in row[4] and row[0] not in DOCUMENTED) or "WARNS" in row[4]
    ]
    shown = [r for r in rows if not options.differences or r[4] != "same bits"]
    shown = [r for r in shown if not options.differences or "both refuse" not in r[4]]
    header = ("argument form", "op", "TensorFlow", "cropgrad.raw_ops", "verdict")
    if options.markdown:
        print("| " + " | ".join(header) + " |")
        print("|" + "---|" * len(header))
        for row in shown:
            cells = [c.replace("|", "\\|") for c in row]
            print("| " + " | ".join(cells) + " |")
    else:
        for row in shown:
            print(" ;; ".join(row))
    documented = sum(1 for r in rows if "DIFFERENT" in r[4] and r[0] in DOCUMENTED)
    print(
        f"\n{len(rows)} calls; {documented} documented differences; "
        f"{len(undocumented)} undocumented differences or warnings",
        file=sys.stderr,
    )
    for row in undocumented:
        print(f"  undocumented: {row[0]} ({row[1]}): {row[4]}", file=sys.stderr)
    return 1 if undocumented else 0


if __name__ == "__main__":
    sys.exit(main())
