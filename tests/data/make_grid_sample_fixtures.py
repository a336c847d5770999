"""Make the PyTorch golden fixtures of grid_sample used by cropgrad's tests.

The tests compare cropgrad's NumPy reference of
``torch.nn.functional.grid_sample`` (``cropgrad/_reference/grid_sample/``)
with results PyTorch computed once and that are committed next to this
script (``grid_sample.npz``); torch is never imported by the tests.
Re-create the file with a Python that has torch installed, from the
repository root:

    python3 -m venv /path/to/tvenv
    /path/to/tvenv/bin/pip install torch==2.14.1 torchvision==0.29.1 numpy
    /path/to/tvenv/bin/python tests/data/make_grid_sample_fixtures.py

Options: ``--outdir DIR`` writes the file elsewhere (default: this script's
folder); ``--no-write`` keeps the file as it is; ``--check`` compares the
file bit for bit with the NumPy reference (loaded from its file, so no
compiled cropgrad is needed); ``--dispatch CAP`` recomputes every case in a
child process with ``ATEN_CPU_CAPABILITY=CAP`` and reports how its bits
differ from the file's (``avx2``: none expected; ``default``: the build
without fused multiply-adds); ``--report`` prints what PyTorch does with
NaN and infinite grid coordinates (in child processes).

PyTorch's CPU kernel is vectorised; which build runs is its dispatch
(``torch.backends.cpu.get_cpu_capability()``), recorded in the file as
``cpu_capability`` with ``torch_version`` and ``numpy_version``.  The file
is made with the default dispatch of the CPU (AVX2 on the machine that
made the committed one).  torch runs on one thread; its grid_sample
kernels split work by batch only, so threads do not change the bits.  All
inputs come from NumPy generators seeded from each case's name, so a
case's inputs do not change when cases are added.

Keys (every ``NAME`` is listed in the 1-D unicode array ``cases``):
``NAME/image`` [N, C, H, W] and ``NAME/grid`` [N, H_out, W_out, 2] (float32
or float64), ``NAME/grads`` (the output's shape and dtype), ``NAME/mode``,
``NAME/padding_mode`` (0-d str), ``NAME/align_corners`` (0-d bool),
``NAME/out`` (the forward op), ``NAME/grad_image`` and ``NAME/grad_grid``
(the backward of ``(out * grads).sum()``).
"""

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import zlib

import numpy as np
import torch
import torch.nn.functional as F

F32, F64 = np.float32, np.float64
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, os.pardir, os.pardir)
MODES = ("bilinear", "nearest", "bicubic")
PADDINGS = ("zeros", "border", "reflection")
DTYPE_SUFFIX = {F32: "f32", F64: "f64"}
FILENAME = "grid_sample.npz"


def load_package(name, *parts):
    """A package loaded from its folder, without importing the package that
    holds it (cropgrad, which would need its compiled modules)."""
    folder = os.path.join(ROOT, *parts)
    spec = importlib.util.spec_from_file_location(
        name, os.path.join(folder, "__init__.py"), submodule_search_locations=[folder]
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def rng_for(name):
    return np.random.default_rng(zlib.crc32(name.encode("utf-8")))


# ---------------------------------------------------------------------------
# Grid points, as normalised coordinates along one axis of `size` pixels


def centres(size, aligned):
    """The normalised coordinates of the pixel centres."""
    i = np.arange(size, dtype=F64)
    if aligned:
        return 2 * i / max(size - 1, 1) - 1
    return (2 * i + 1) / size - 1


def halfway(size, aligned):
    """Halfway between neighbouring centres (nearest's ties)."""
    c = centres(size, aligned)
    return (c[:-1] + c[1:]) / 2 if size > 1 else c


def axis_points(r, size, aligned, count):
    """`count` coordinates mixing centres, ties, the edges (+-1 and one
    pixel beyond), random points inside, outside and far outside."""
    pools = [
        centres(size, aligned),
        halfway(size, aligned),
        np.array([-1.0, 1.0, -1 - 2.0 / size, 1 + 2.0 / size, 0.0]),
        r.uniform(-1.05, 1.05, 8),
        r.uniform(1.0, 4.0, 4) * r.choice([-1, 1], 4),
        10.0 ** r.uniform(1, 3, 3) * r.choice([-1, 1], 3),
    ]
    weights = np.array([3, 2, 2, 6, 2, 1], dtype=F64)
    which = r.choice(len(pools), count, p=weights / weights.sum())
    return np.array([r.choice(pools[k]) for k in which])


def make_grid(r, height, width, aligned, batch, out_h, out_w):
    n = batch * out_h * out_w
    x = axis_points(r, width, aligned, n)
    y = axis_points(r, height, aligned, n)
    return np.stack([x, y], 1).reshape(batch, out_h, out_w, 2)


# ---------------------------------------------------------------------------
# Cases


def spec(shape, grid, mode, padding, aligned, dtype):
    return {
        "shape": tuple(int(v) for v in shape),
        "grid": np.asarray(grid, dtype=F64).astype(dtype),
        "mode": mode,
        "padding_mode": padding,
        "align_corners": bool(aligned),
        "dtype": dtype,
    }


def all_specs():
    specs = {}
    for dtype in (F32, F64):
        sfx = DTYPE_SUFFIX[dtype]
        for mode in MODES:
            for padding in PADDINGS:
                for aligned in (False, True):
                    # The matrix: every mode, padding, alignment and dtype.
                    name = "%s_%s_%s_%s" % (
                        mode,
                        padding,
                        "aligned" if aligned else "unaligned",
                        sfx,
                    )
                    r = rng_for(name)
                    h, w = (int(v) for v in r.integers(3, 9, 2))
                    grid = make_grid(r, h, w, aligned, 2, 5, 7)
                    specs[name] = spec(
                        (2, 3, h, w), grid, mode, padding, aligned, dtype
                    )
            # Size corners: a 1x1 image, one output row, one channel.
            for k, padding in enumerate(PADDINGS):
                aligned = bool(k % 2)
                name = "one_pixel_%s_%s_%s" % (mode, padding, sfx)
                r = rng_for(name)
                grid = make_grid(r, 1, 1, aligned, 2, 1, 9)
                specs[name] = spec((2, 1, 1, 1), grid, mode, padding, aligned, dtype)
                name = "one_row_%s_%s_%s" % (mode, padding, sfx)
                r = rng_for(name)
                grid = make_grid(r, 1, 6, not aligned, 1, 1, 11)
                specs[name] = spec(
                    (1, 1, 1, 6), grid, mode, padding, not aligned, dtype
                )
            # Many points on few pixels: the order of the image gradient's
            # additions (several lanes of one vector hit the same pixel).
            name = "crowded_%s_%s" % (mode, sfx)
            r = rng_for(name)
            grid = r.uniform(-0.3, 0.3, (2, 6, 13, 2))
            specs[name] = spec((2, 2, 4, 5), grid, mode, "zeros", False, dtype)
    return specs


def torch_case(image, grid, grads, mode, padding, aligned):
    """PyTorch's output, input gradient and grid gradient."""
    x = torch.from_numpy(image.copy()).requires_grad_()
    g = torch.from_numpy(grid.copy()).requires_grad_()
    out = F.grid_sample(x, g, mode=mode, padding_mode=padding, align_corners=aligned)
    (out * torch.from_numpy(grads)).sum().backward()
    return out.detach().numpy(), x.grad.numpy(), g.grad.numpy()


def make_case(name, s):
    dtype = s["dtype"]
    image = rng_for("image/" + name).standard_normal(s["shape"]).astype(dtype)
    n, c = s["shape"][:2]
    out_hw = s["grid"].shape[1:3]
    grads = rng_for("grads/" + name).standard_normal((n, c, *out_hw)).astype(dtype)
    out, grad_image, grad_grid = torch_case(
        image, s["grid"], grads, s["mode"], s["padding_mode"], s["align_corners"]
    )
    return {
        "image": image,
        "grid": s["grid"],
        "grads": grads,
        "mode": np.array(s["mode"]),
        "padding_mode": np.array(s["padding_mode"]),
        "align_corners": np.array(s["align_corners"]),
        "out": out,
        "grad_image": grad_image,
        "grad_grid": grad_grid,
    }


def all_cases():
    return {name: make_case(name, s) for name, s in all_specs().items()}


def write_npz(path, cases):
    names = list(cases)
    flat = {
        "cases": np.array(names, dtype=str),
        "torch_version": np.array(torch.__version__),
        "numpy_version": np.array(np.__version__),
        "cpu_capability": np.array(torch.backends.cpu.get_cpu_capability()),
    }
    for name, c in cases.items():
        assert "/" not in name and name not in flat
        for key, value in c.items():
            flat[name + "/" + key] = np.asarray(value)
    np.savez_compressed(path, **flat)
    print(
        "wrote %s: %d cases, %d bytes, torch %s, dispatch %s"
        % (
            path,
            len(names),
            os.path.getsize(path),
            torch.__version__,
            flat["cpu_capability"],
        )
    )


def load(path):
    with np.load(path, allow_pickle=False) as f:
        names = [str(n) for n in f["cases"]]
        cases = {
            n: {k[len(n) + 1 :]: f[k] for k in f.files if k.startswith(n + "/")}
            for n in names
        }
        meta = {k: str(f[k]) for k in ("torch_version", "cpu_capability")}
    return cases, meta


OUTPUTS = ("out", "grad_image", "grad_grid")


def args_of(c):
    return str(c["mode"]), str(c["padding_mode"]), bool(c["align_corners"])


def bits_equal(a, b):
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


# ---------------------------------------------------------------------------
# --check: the NumPy reference


def check(outdir):
    ref = load_package("grid_sample_reference", "cropgrad", "_reference", "grid_sample")
    cases, meta = load(os.path.join(outdir, FILENAME))
    print(
        "--check: the reference against %s (torch %s, %s)"
        % (FILENAME, meta["torch_version"], meta["cpu_capability"])
    )
    tally = {}
    for name, c in cases.items():
        mode, padding, aligned = args_of(c)
        got = {
            "out": ref.grid_sample(c["image"], c["grid"], mode, padding, aligned),
            "grad_image": ref.grid_sample_grad_image(
                c["grads"], c["grid"], c["image"].shape, mode, padding, aligned
            ),
            "grad_grid": ref.grid_sample_grad_grid(
                c["grads"], c["image"], c["grid"], mode, padding, aligned
            ),
        }
        for key in OUTPUTS:
            ok = bits_equal(got[key], c[key])
            k = (mode, c["image"].dtype.name, key)
            tally.setdefault(k, [0, 0])[0 if ok else 1] += 1
            if not ok:
                print("  %-40s %s differs" % (name, key))
    good = True
    for (mode, dt, key), (same, diff) in sorted(tally.items()):
        print("  %-8s %-7s %-10s bits %3d, differ %d" % (mode, dt, key, same, diff))
        good &= diff == 0
    return good


# ---------------------------------------------------------------------------
# --dispatch: another build of the kernel


def ulps(a, b):
    """|a - b| in units in the last place, through the ordered integers."""
    it = np.int32 if a.dtype == F32 else np.int64
    ia, ib = a.view(it).astype(np.int64), b.view(it).astype(np.int64)
    big = np.iinfo(it).min
    ia = np.where(ia < 0, big - ia, ia)
    ib = np.where(ib < 0, big - ib, ib)
    return np.abs(ia - ib)


def compare_dispatch(outdir, capability):
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, ATEN_CPU_CAPABILITY=capability)
        subprocess.run(
            [sys.executable, os.path.abspath(__file__), "--outdir", tmp],
            env=env,
            check=True,
        )
        theirs, meta = load(os.path.join(tmp, FILENAME))
    ours, _ = load(os.path.join(outdir, FILENAME))
    print(
        "--dispatch %s (ran as %s) against the file:"
        % (capability, meta["cpu_capability"])
    )
    summary = {}
    for name, c in ours.items():
        mode = str(c["mode"])
        for key in OUTPUTS:
            a, b = theirs[name][key], c[key]
            s = summary.setdefault((mode, a.dtype.name, key), [0, 0, 0, 0.0])
            s[0] += 1
            if bits_equal(a, b):
                continue
            s[1] += 1
            s[2] = max(s[2], int(ulps(a, b).max()))
            scale = max(float(np.abs(b).max()), np.finfo(b.dtype).tiny)
            s[3] = max(s[3], float(np.abs(a - b).max()) / scale)
    for (mode, dt, key), (n, diff, u, rel) in sorted(summary.items()):
        print(
            "  %-8s %-7s %-10s %2d cases, %2d differ, max %d ulps, max |diff| / "
            "max|value| %.3g" % (mode, dt, key, n, diff, u, rel)
        )
    return all(s[1] == 0 for s in summary.values())


# ---------------------------------------------------------------------------
# --report: non-finite grid coordinates


_PROBE = r"""
import json, sys, torch
import torch.nn.functional as F
mode, padding, value, axis = sys.argv[1:5]
res = {}
for aligned in (False, True):
    x = torch.arange(1.0, 13.0).reshape(1, 1, 3, 4).requires_grad_()
    g = torch.zeros(1, 1, 1, 2)
    g[0, 0, 0, int(axis)] = float(value)
    g.requires_grad_()
    out = F.grid_sample(x, g, mode=mode, padding_mode=padding, align_corners=aligned)
    out.sum().backward()
    res[str(aligned)] = [out.item(), x.grad.flatten().tolist(),
                         g.grad.flatten().tolist()]
print(json.dumps(res))
"""


def probe(mode, padding, value, axis):
    run = subprocess.run(
        [sys.executable, "-c", _PROBE, mode, padding, value, str(axis)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    if run.returncode < 0:
        return "killed by signal %d" % -run.returncode
    if run.returncode:
        return run.stderr.strip().splitlines()[-1]
    return json.loads(run.stdout)


def report():
    print("--report: one point at x (axis 0) or y (axis 1) = NaN, inf, -inf,")
    print("the other 0, 3x4 image 1..12; out, grad_image (nonzero), grad_grid")
    for mode in MODES:
        for padding in PADDINGS:
            for value in ("nan", "inf", "-inf"):
                for axis in (0, 1):
                    r = probe(mode, padding, value, axis)
                    if isinstance(r, str):
                        print(
                            "  %s %s %s axis %d: %s" % (mode, padding, value, axis, r)
                        )
                        continue
                    for aligned, (out, gi, gg) in r.items():
                        nz = {i: v for i, v in enumerate(gi) if v != 0}
                        print(
                            "  %-8s %-10s %-4s axis %d aligned=%-5s out %s "
                            "grad_image %s grad_grid %s"
                            % (mode, padding, value, axis, aligned, out, nz, gg)
                        )


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--outdir", default=HERE)
    p.add_argument("--no-write", action="store_true", help="do not (re)write the file")
    p.add_argument("--check", action="store_true", help="compare with the reference")
    p.add_argument("--dispatch", action="append", default=[], metavar="CAP")
    p.add_argument("--report", action="store_true", help="non-finite coordinates")
    a = p.parse_args(argv)
    torch.set_num_threads(1)
    if not a.no_write:
        os.makedirs(a.outdir, exist_ok=True)
        write_npz(os.path.join(a.outdir, FILENAME), all_cases())
    status = 0
    if a.check and not check(a.outdir):
        status = 1
    for capability in a.dispatch:
        compare_dispatch(a.outdir, capability)
    if a.report:
        report()
    return status


if __name__ == "__main__":
    sys.exit(main())
