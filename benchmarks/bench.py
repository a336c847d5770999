"""Run cropgrad's benchmark against the installed cropgrad.

    python benchmarks/bench.py [options]     # from a source checkout; --help

The benchmark (``benchmarks/cropgrad_bench/``) is not part of the wheel.
Run as a script, with or without ``python -P``, Python puts this folder on
the path, not the repository's root: ``import cropgrad`` finds the installed
package (or an editable install's build), never the unbuilt sources beside
it.  ``benchmarks/README.md`` explains the rows, the columns and the options.
"""

import os
import sys

if __name__ == "__main__":
    # -P leaves the script's folder off the path too: the package is here.
    here = os.path.dirname(os.path.abspath(__file__))
    if here not in sys.path:
        sys.path.insert(0, here)

    from cropgrad_bench.cli import main

    sys.exit(main())
