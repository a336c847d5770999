"""Grid sampling beside PyTorch's ``grid_sample`` and ONNX Runtime's.

Three workloads, each the call a user makes:

``warp-flow``
    one 3 x 1024 x 1024 image warped by a dense flow field of its own size:
    the single-image warp, where PyTorch has no batch to share out between
    threads;
``stn``
    a spatial transformer's batch: 64 images 3 x 64 x 64, an affine grid of
    64 x 64 each;
``deform-attn``
    the pure-PyTorch fallback of multi-scale deformable attention: image
    ``[8 * 8, 32, 64, 64]`` (batch x heads, head channels), grid
    ``[64, 300, 4, 2]`` (queries x points).

Columns, each a median over interleaved rounds: cropgrad's forward and its
forward + backward (the forward op, the image gradient and the grid
gradient: what autograd calls) on 1 thread and on the default threads, NCHW,
NHWC and NCHW on NHWC memory (PyTorch's ``channels_last``); PyTorch's
forward and forward + backward (``torch.autograd.grad`` in both inputs)
on 1 and on the default threads; ONNX Runtime's ``GridSample`` forward;
``cropgrad.jax.grid_sample`` jitted, forward and forward + backward
(``jax.vjp`` in both inputs), beside the same in pure
JAX (bilinear, zeros: four gathers, differentiated by JAX).  PyTorch, ONNX
Runtime and JAX run in a worker process of their own (their OpenMP runtime
and thread pools apart from cropgrad's), on the same arrays made from the
same seed.  Every column samples with the same options: bilinear and zeros
padding (PyTorch's defaults), or what ``--mode`` and ``--padding-mode``
say (then without the pure-JAX columns), ``align_corners=False``.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np

SEED = 20261206
WORKLOADS = ("warp-flow", "stn", "deform-attn")
# The sampling options every column uses: PyTorch's defaults, or what
# --mode and --padding-mode give (of the op model's choices).
DEFAULT_OPTIONS = {"mode": "bilinear", "padding_mode": "zeros"}


def make_problem(name, seed=SEED):
    """``(image NCHW, grid, grads)`` of workload `name`, float32."""
    rng = np.random.default_rng(seed)
    if name == "warp-flow":
        n, c, h, w = 1, 3, 1024, 1024
        ys, xs = np.meshgrid(
            np.linspace(-1, 1, h), np.linspace(-1, 1, w), indexing="ij"
        )
        # A smooth flow of a few pixels, as optical flow is.
        flow = 0.01 * np.stack([np.sin(3 * ys), np.cos(2 * xs)], axis=-1)
        grid = (np.stack([xs, ys], axis=-1) + flow)[None]
    elif name == "stn":
        n, c, h, w = 64, 3, 64, 64
        angle = rng.uniform(-0.3, 0.3, n)
        scale = rng.uniform(0.8, 1.2, n)
        theta = np.zeros((n, 2, 3))
        theta[:, 0, 0] = theta[:, 1, 1] = scale * np.cos(angle)
        theta[:, 0, 1] = -scale * np.sin(angle)
        theta[:, 1, 0] = scale * np.sin(angle)
        theta[:, :, 2] = rng.uniform(-0.1, 0.1, (n, 2))
        # affine_grid with align_corners=False: pixel centres in [-1, 1].
        base_x = (2 * np.arange(w) + 1) / w - 1
        base_y = (2 * np.arange(h) + 1) / h - 1
        ys, xs = np.meshgrid(base_y, base_x, indexing="ij")
        base = np.stack([xs, ys, np.ones_like(xs)], axis=-1)  # h, w, 3
        grid = np.einsum("hwk,nik->nhwi", base, theta)
    elif name == "deform-attn":
        n, c, h, w = 64, 32, 64, 64
        grid = rng.uniform(-1, 1, (n, 300, 4, 2))
    else:
        raise ValueError(f"unknown grid workload {name!r}; known: {WORKLOADS}")
    image = rng.standard_normal((n, c, h, w)).astype(np.float32)
    grid = np.ascontiguousarray(grid, np.float32)
    grads = rng.standard_normal((n, c) + grid.shape[1:3]).astype(np.float32)
    return image, grid, grads


# One op of a workload, as ``<workload>-<op>`` (``warp-flow-grad-image``):
# what benchmarks/idle.py times.
OPS = ("forward", "grad-image", "grad-grid")
OP_NAMES = tuple(f"{w}-{op}" for w in WORKLOADS for op in OPS)


def op_call(name):
    """``call(num_threads)``: op ``<workload>-<op>`` (one of `OP_NAMES`) on
    the workload's problem, into a reused output."""
    import cropgrad

    workload, op = next(
        (w, name[len(w) + 1 :]) for w in WORKLOADS if name.startswith(w + "-")
    )
    image, grid, grads = make_problem(workload)
    if op == "forward":
        out = np.empty(grads.shape, np.float32)
        return lambda nt: cropgrad.grid_sample(image, grid, out=out, num_threads=nt)
    if op == "grad-image":
        out = np.empty(image.shape, np.float32)
        return lambda nt: cropgrad.grid_sample_grad_image(
            grads, grid, image.shape, out=out, num_threads=nt
        )
    out = np.empty(grid.shape, np.float32)
    return lambda nt: cropgrad.grid_sample_grad_grid(
        grads, image, grid, out=out, num_threads=nt
    )


def _median_time(fn, rounds, inner):
    samples = []
    for _ in range(rounds):
        fn()
        start = time.perf_counter()
        for _ in range(inner):
            fn()
        samples.append((time.perf_counter() - start) / inner)
    return samples


def _inner(fn):
    """Calls per sample: about 20 ms of them, at least one."""
    fn()
    start = time.perf_counter()
    fn()
    took = time.perf_counter() - start
    return max(1, int(0.02 / max(took, 1e-7)))


def cropgrad_columns(name, threads, options=DEFAULT_OPTIONS):
    import functools

    import cropgrad

    image, grid, grads = make_problem(name)
    image_nhwc = np.ascontiguousarray(image.transpose(0, 2, 3, 1))
    grads_nhwc = np.ascontiguousarray(grads.transpose(0, 2, 3, 1))
    out = np.empty(grads.shape, np.float32)
    out_nhwc = np.empty(grads_nhwc.shape, np.float32)
    size = image.shape
    sample = functools.partial(cropgrad.grid_sample, **options)
    grad_image = functools.partial(cropgrad.grid_sample_grad_image, **options)
    grad_grid = functools.partial(cropgrad.grid_sample_grad_grid, **options)

    # PyTorch's channels_last: NCHW calls on a view of the NHWC memory.
    image_view = image_nhwc.transpose(0, 3, 1, 2)

    def forward(nt, fmt="NCHW"):
        if fmt != "NHWC":
            im = image_view if fmt == "view" else image
            return lambda: sample(im, grid, out=out, num_threads=nt)
        return lambda: sample(
            image_nhwc, grid, data_format="NHWC", out=out_nhwc, num_threads=nt
        )

    def both(nt, fmt="NCHW"):
        im, g = (image, grads) if fmt == "NCHW" else (image_nhwc, grads_nhwc)
        s = size if fmt == "NCHW" else image_nhwc.shape
        o = out if fmt == "NCHW" else out_nhwc
        if fmt == "view":
            im, g, s, o, fmt = image_view, grads, size, out, "NCHW"

        def call():
            sample(im, grid, data_format=fmt, out=o, num_threads=nt)
            grad_image(g, grid, s, data_format=fmt, num_threads=nt)
            grad_grid(g, im, grid, data_format=fmt, num_threads=nt)

        return call

    return {
        "cropgrad forward 1 thr": forward(1),
        "cropgrad forward": forward(threads),
        "cropgrad forward NHWC": forward(threads, "NHWC"),
        "cropgrad fwd+bwd 1 thr": both(1),
        "cropgrad fwd+bwd": both(threads),
        "cropgrad fwd+bwd NHWC": both(threads, "NHWC"),
        "cropgrad forward channels_last": forward(threads, "view"),
        "cropgrad fwd+bwd channels_last": both(threads, "view"),
    }


def torch_columns(name, threads, options=DEFAULT_OPTIONS):
    import torch
    import torch.nn.functional as F

    image, grid, grads = make_problem(name)
    x = torch.from_numpy(image).requires_grad_(True)
    g = torch.from_numpy(grid).requires_grad_(True)
    c = torch.from_numpy(grads)

    def with_threads(nt, fn):
        def call():
            torch.set_num_threads(nt)
            fn()

        return call

    def forward():
        with torch.no_grad():
            F.grid_sample(x, g, align_corners=False, **options)

    def both():
        y = F.grid_sample(x, g, align_corners=False, **options)
        torch.autograd.grad(y, (x, g), c)

    return {
        "torch forward 1 thr": with_threads(1, forward),
        "torch forward": with_threads(threads, forward),
        "torch fwd+bwd 1 thr": with_threads(1, both),
        "torch fwd+bwd": with_threads(threads, both),
    }


def onnxruntime_columns(name, threads, options=DEFAULT_OPTIONS):
    import onnxruntime as ort
    from onnx import TensorProto, helper

    image, grid, _ = make_problem(name)
    # ONNX's names of PyTorch's modes (opset 20).
    mode = {"bilinear": "linear", "bicubic": "cubic"}.get(
        options["mode"], options["mode"]
    )
    node = helper.make_node(
        "GridSample",
        ["X", "G"],
        ["Y"],
        mode=mode,
        padding_mode=options["padding_mode"],
        align_corners=0,
    )
    graph = helper.make_graph(
        [node],
        "grid",
        [
            helper.make_tensor_value_info("X", TensorProto.FLOAT, image.shape),
            helper.make_tensor_value_info("G", TensorProto.FLOAT, grid.shape),
        ],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    session = ort.InferenceSession(
        model.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )
    return {"onnxruntime forward": lambda: session.run(None, {"X": image, "G": grid})}


def jax_gather_grid_sample(image, grid):
    """PyTorch's grid_sample (bilinear, zeros, align_corners=False) in pure
    JAX: the four taps of each point gathered, those outside the image
    weighted 0.  NCHW, float32."""
    import jax
    import jax.numpy as jnp

    _, _, h, w = image.shape
    x = ((grid[..., 0] + 1) * w - 1) / 2
    y = ((grid[..., 1] + 1) * h - 1) / 2
    x0, y0 = jnp.floor(x), jnp.floor(y)
    fx, fy = x - x0, y - y0

    def one(img, x0, y0, fx, fy):
        out = 0.0
        for dy, wy in ((0, 1 - fy), (1, fy)):
            for dx, wx in ((0, 1 - fx), (1, fx)):
                xx, yy = x0 + dx, y0 + dy
                inside = (xx >= 0) & (xx <= w - 1) & (yy >= 0) & (yy <= h - 1)
                xi = jnp.clip(xx, 0, w - 1).astype(jnp.int32)
                yi = jnp.clip(yy, 0, h - 1).astype(jnp.int32)
                out = out + img[:, yi, xi] * jnp.where(inside, wx * wy, 0.0)
        return out

    return jax.vmap(one)(image, x0, y0, fx, fy)


def jax_columns(name, threads, options=DEFAULT_OPTIONS):
    """cropgrad.jax's grid_sample and (bilinear, zeros) the pure-JAX
    gather, jitted."""
    import functools

    import jax
    import jax.numpy as jnp

    import cropgrad.jax as cgj

    image, grid, grads = (jnp.asarray(a) for a in make_problem(name))

    def columns(label, sample):
        forward = jax.jit(sample)

        @jax.jit
        def both(x, g, c):
            _, vjp = jax.vjp(sample, x, g)
            return vjp(c)

        return {
            f"{label} forward": lambda: forward(image, grid).block_until_ready(),
            f"{label} fwd+bwd": lambda: jax.block_until_ready(both(image, grid, grads)),
        }

    result = columns("cropgrad.jax", functools.partial(cgj.grid_sample, **options))
    if options == DEFAULT_OPTIONS:
        result.update(columns("pure jax", jax_gather_grid_sample))
    return result


def measure(columns, rounds):
    """Median seconds of each column, the columns interleaved round by round."""
    inner = {k: _inner(fn) for k, fn in columns.items()}
    samples = {k: [] for k in columns}
    for _ in range(rounds):
        for k, fn in columns.items():
            samples[k] += _median_time(fn, 1, inner[k])
    return {k: statistics.median(v) for k, v in samples.items()}


def worker(backend, name, threads, rounds, options=DEFAULT_OPTIONS):
    """Run in a process of its own: the backend's columns, as JSON."""
    try:
        make = {
            "torch": torch_columns,
            "onnxruntime": onnxruntime_columns,
            "jax": jax_columns,
        }[backend]
        columns = make(name, threads, options)
    except ImportError as exc:
        return {"error": f"{backend} is not installed ({exc})"}
    return {"median_s": measure(columns, rounds)}


def _run_worker(backend, name, threads, rounds, options):
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    call = f"grid.worker({backend!r}, {name!r}, {threads}, {rounds}, {options!r})"
    code = (
        f"import sys, json; sys.path.insert(0, {here!r}); "
        f"from cropgrad_bench import grid; print(json.dumps({call}))"
    )
    done = subprocess.run(
        [sys.executable, "-P", "-c", code], capture_output=True, text=True
    )
    if done.returncode != 0:
        return {"error": done.stderr.strip().splitlines()[-1:]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def run(names=WORKLOADS, rounds=7, progress=print, options=DEFAULT_OPTIONS):
    import cropgrad

    threads = cropgrad.show_config("dicts")["default_threads"]
    rows = []
    for name in names:
        progress(f"{name}: cropgrad")
        medians = measure(cropgrad_columns(name, threads, options), rounds)
        errors = {}
        for backend in ("torch", "onnxruntime", "jax"):
            progress(f"{name}: {backend} (worker)")
            reply = _run_worker(backend, name, threads, rounds, options)
            if "error" in reply:
                errors[backend] = reply["error"]
            else:
                medians.update(reply["median_s"])
        rows.append({"workload": name, "median_s": medians, "errors": errors})
    return {
        "default_threads": threads,
        "rounds": rounds,
        "options": dict(options),
        "rows": rows,
    }


RATIOS = (
    ("torch fwd+bwd / cropgrad", "torch fwd+bwd", "cropgrad fwd+bwd"),
    (
        "torch fwd+bwd 1 thr / cropgrad 1 thr",
        "torch fwd+bwd 1 thr",
        "cropgrad fwd+bwd 1 thr",
    ),
    ("torch forward / cropgrad", "torch forward", "cropgrad forward"),
    ("onnxruntime forward / cropgrad", "onnxruntime forward", "cropgrad forward"),
    ("cropgrad fwd+bwd NCHW / NHWC", "cropgrad fwd+bwd", "cropgrad fwd+bwd NHWC"),
    (
        "cropgrad fwd+bwd channels_last / NCHW",
        "cropgrad fwd+bwd channels_last",
        "cropgrad fwd+bwd",
    ),
    ("pure jax forward / cropgrad.jax", "pure jax forward", "cropgrad.jax forward"),
    ("pure jax fwd+bwd / cropgrad.jax", "pure jax fwd+bwd", "cropgrad.jax fwd+bwd"),
)


def format_table(report):
    lines = []
    options = report.get("options", DEFAULT_OPTIONS)
    for row in report["rows"]:
        m = row["median_s"]
        lines.append(
            f"{row['workload']} ({options['mode']}, {options['padding_mode']}; "
            f"default threads {report['default_threads']})"
        )
        for key, value in m.items():
            lines.append(f"  {key:32} {value * 1e3:10.2f} ms")
        for label, num, den in RATIOS:
            if num in m and den in m:
                lines.append(f"  {label:40} {m[num] / m[den]:6.2f}")
        for backend, error in row["errors"].items():
            lines.append(f"  {backend}: n/a ({error})")
    return "\n".join(lines)


def main(argv=None):
    from cropgrad._ops.grid_sample import MODES, PADDING_MODES

    from .machine import machine_info

    parser = argparse.ArgumentParser(
        prog="python benchmarks/grid.py", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--workloads", default=",".join(WORKLOADS))
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--mode", choices=MODES, default=DEFAULT_OPTIONS["mode"])
    parser.add_argument(
        "--padding-mode", choices=PADDING_MODES, default=DEFAULT_OPTIONS["padding_mode"]
    )
    parser.add_argument("--json", metavar="FILE")
    args = parser.parse_args(argv)
    options = {"mode": args.mode, "padding_mode": args.padding_mode}
    names = [n for n in args.workloads.split(",") if n]
    for n in names:
        if n not in WORKLOADS:
            parser.error(f"unknown workload {n!r}; known: {', '.join(WORKLOADS)}")
    machine = machine_info()
    print(
        f"machine: {machine.get('cpu_model')} (family {machine.get('cpu_family')}, "
        f"model {machine.get('cpu_model_number')}); arithmetic scales "
        f"{machine.get('compute_scaling')}x to 2 threads",
        file=sys.stderr,
    )
    report = run(names, args.rounds, lambda m: print(m, file=sys.stderr), options)
    report["machine"] = machine
    print(format_table(report))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)
    return 0
