"""Time calls that allocate their result against the same calls into a
reused ``out=``, beside the machine's own cost of touching new memory.

    python benchmarks/fresh.py [--workloads A,B] [--rounds N] [--json FILE]

From a source checkout, against the installed cropgrad (see bench.py);
``benchmarks/README.md`` says what the columns mean.
"""

import os
import sys

if __name__ == "__main__":
    here = os.path.dirname(os.path.abspath(__file__))
    if here not in sys.path:
        sys.path.insert(0, here)

    from cropgrad_bench.fresh import main

    sys.exit(main())
