"""Time grid sampling beside PyTorch's grid_sample and ONNX Runtime's
GridSample (each in a worker process, when installed).

    python benchmarks/grid.py [--workloads warp-flow,stn] [--rounds N]
        [--mode bilinear] [--padding-mode zeros] [--json FILE]

From a source checkout, against the installed cropgrad (see bench.py);
``benchmarks/README.md`` says what the columns mean.
"""

import os
import sys

if __name__ == "__main__":
    here = os.path.dirname(os.path.abspath(__file__))
    if here not in sys.path:
        sys.path.insert(0, here)

    from cropgrad_bench.grid import main

    sys.exit(main())
