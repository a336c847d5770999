"""How cropgrad's kernels run: the layer under every op (private).

- `parallel` (compiled, with ``parallel.pxd``): the one parallel driver, which
  runs an op's tasks on the calling thread or on an OpenMP team inside the
  floating-point environment the call asked for, and the thread policy
  (default count, fork guard).
- ``openmp.pxd``: the OpenMP shim; every ``omp_*`` call goes through it, with
  serial stand-ins when the extension is built without OpenMP.
- `simd` (compiled, with ``simd.pxd``): the instruction set of the inner
  loops' clones, chosen once for the process; each kernel module reads it
  when it is imported.
- `tuning`: the cache sizes and the sizes chosen from them, which each
  kernel module reads when it is imported (none changes a bit).
- `wait_policy`: OpenMP's wait policy, set before the runtime loads.

It imports nothing of cropgrad above it: the kernels, the C-level API and the
Python layer import it, never the other way round.
"""
