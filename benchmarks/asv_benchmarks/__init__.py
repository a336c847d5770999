"""cropgrad's own timings across commits, for asv (airspeed velocity).

One module per op family (``crop_and_resize``, ``roi_align``,
``grid_sample``), one class per op kind (the forward op, the image
gradient, the coordinates' gradient and JVP), each timing one call of the
NumPy API into an ``out=`` array made in ``setup``, on 1 thread and on the
default thread count.  The problems are the full benchmark's
(`cropgrad_bench.workloads`, `cropgrad_bench.grid`), imported from the
folder beside this one, plus a one-box ``tiny`` problem per family where
the full benchmark has none: the cost of a call.

``benchmarks/asv.conf.json`` runs them (``benchmarks/README.md``: the
commands); ``tests/test_bench_asv.py`` runs each once without asv.
"""

import os
import sys

# asv imports this folder as a package of its own, without its parent on
# the path: the full benchmark's problems are in benchmarks/cropgrad_bench.
_BENCHMARKS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if _BENCHMARKS not in sys.path:
    sys.path.insert(0, _BENCHMARKS)
