"""Time cropgrad warm and after idle, on 1 and 2 threads, beside the
machine's own OpenMP loop of the same duration.

    python benchmarks/idle.py [--workloads A,B] [--rounds N] [--json FILE]

From a source checkout, against the installed cropgrad (see bench.py);
``benchmarks/README.md`` says what the columns mean.
"""

import os
import sys

if __name__ == "__main__":
    here = os.path.dirname(os.path.abspath(__file__))
    if here not in sys.path:
        sys.path.insert(0, here)

    from cropgrad_bench.idle import main

    sys.exit(main())
