"""``python -m cropgrad``: a self-check of this install, then a short benchmark.

    python -m cropgrad                 # self-check, then a few seconds of timing
    python -m cropgrad check           # self-check only
    python -m cropgrad bench [...]     # the full benchmark (see --help)

The self-check (`cropgrad._selfcheck`) compares every operation with the
NumPy reference (`cropgrad._reference`, independent of the compiled
kernels) on a few small random problems, and checks that 1, 2, 3 and 4
threads give the same bits.  The short benchmark (`cropgrad._timing`)
times two ops on 1 thread and on the default threads.  The full benchmark
and the command line live in `cropgrad._bench`.
"""

import sys

from cropgrad._bench.cli import main

if __name__ == "__main__":
    sys.exit(main())
