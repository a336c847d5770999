"""Runs a recipe of docs/scaling.md in a process a multi-process job started,
and writes down what tests/test_multiprocess.py checks afterwards.

The test writes, for each recipe, a shim under the recipe's own file name
that calls `run`: every process the documented command starts (a DDP rank,
a JAX process, the Dask client) runs the documented code as ``__main__``
through it.  Written into the output folder when the recipe has returned:

- ``process-<pid>.json``: the OpenMP team size cropgrad's calls get in this
  process (``show_config``'s ``default_threads``), ``OMP_NUM_THREADS``, the
  rank torchrun gave, PyTorch's thread count and JAX's devices, when those
  were imported;
- ``globals-<pid>.npz``: the NumPy arrays the recipe left in its module's
  namespace (the Dask recipe's result);
- ``calls-<pid>.npz`` (with ``record=True``): every call of the ops in
  `RECORDED`, numbered in call order: its tensor arguments, its result, the
  gradient that reached the result and the gradients the op passed back to
  its differentiable arguments; the other arguments go into the JSON.

Public APIs only (cropgrad, cropgrad.torch).  Nothing here imports
cropgrad before the recipe does (its OpenMP runtime reads OMP_NUM_THREADS
when it loads), unless calls are recorded.
"""

import functools
import inspect
import json
import os
import runpy
import sys

import numpy as np

# The cropgrad.torch ops whose calls `record=True` records, each with its
# differentiable tensor arguments (the test's NUMPY_GRADIENTS has the NumPy
# API's gradients of each).
RECORDED = {"crop_and_resize": ("image", "boxes"), "roi_align": ("input", "boxes")}


def _keep(arrays, key):
    """A tensor hook that keeps a copy of the gradient it sees."""

    def hook(grad):
        arrays[key] = grad.detach().clone().numpy()

    return hook


def _recording(op, differentiable, calls):
    """`op` (a cropgrad.torch function), recording each call into `calls`.

    Each differentiable argument reaches the op through a view of its own,
    whose hook sees only the gradient the op passes back (not what other
    uses of the same tensor add); the result's hook sees the gradient that
    reached the op.
    """
    import torch

    signature = inspect.signature(op)

    @functools.wraps(op)
    def recorded(*args, **kwargs):
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        arrays, options = {}, {}
        for name, value in bound.arguments.items():
            if not isinstance(value, torch.Tensor):
                options[name] = value
                continue
            if name in differentiable and value.requires_grad:
                value = value.view_as(value)
                value.register_hook(_keep(arrays, "d_" + name))
                bound.arguments[name] = value
            arrays[name] = value.detach().clone().numpy()
        result = op(*bound.args, **bound.kwargs)
        arrays["result"] = result.detach().clone().numpy()
        if result.requires_grad:
            result.register_hook(_keep(arrays, "d_result"))
        calls.append({"op": op.__name__, "options": options, "arrays": arrays})
        return result

    return recorded


def _frameworks():
    """What this process's PyTorch and JAX (if imported) report."""
    facts = {}
    if "torch" in sys.modules:
        facts["torch_threads"] = sys.modules["torch"].get_num_threads()
    if "jax" in sys.modules:
        jax = sys.modules["jax"]
        facts["jax_local_devices"] = jax.local_device_count()
        facts["jax_devices"] = jax.device_count()
        facts["jax_process_index"] = jax.process_index()
    return facts


def run(recipe, out, record=False):
    """Run `recipe` (a path) as __main__ with this process's arguments."""
    omp_num_threads = os.environ.get("OMP_NUM_THREADS")  # as the process started
    calls = []
    if record:
        import cropgrad.torch as cgt

        for name, differentiable in RECORDED.items():
            setattr(cgt, name, _recording(getattr(cgt, name), differentiable, calls))
    namespace = runpy.run_path(recipe, run_name="__main__")
    import cropgrad  # after the recipe, which decides when cropgrad loads

    pid = os.getpid()
    arrays = {k: v for k, v in namespace.items() if isinstance(v, np.ndarray)}
    if arrays:
        np.savez(os.path.join(out, f"globals-{pid}.npz"), **arrays)
    facts = {
        "pid": pid,
        "argv": sys.argv[1:],
        "rank": os.environ.get("RANK"),
        "omp_num_threads": omp_num_threads,
        "default_threads": cropgrad.show_config(mode="dicts")["default_threads"],
        "calls": [{"op": c["op"], "options": c["options"]} for c in calls],
        **_frameworks(),
    }
    if record:
        numbered = {
            f"{i}.{name}": array
            for i, call in enumerate(calls)
            for name, array in call["arrays"].items()
        }
        np.savez(os.path.join(out, f"calls-{pid}.npz"), **numbered)
    with open(os.path.join(out, f"process-{pid}.json"), "w", encoding="utf-8") as f:
        json.dump(facts, f)
