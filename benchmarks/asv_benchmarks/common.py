"""What every family's benchmarks share: the thread counts, the ops."""

import cropgrad

# ``default``: the call's ``num_threads=None``, cropgrad's default count.
THREADS = (1, "default")


def num_threads(threads):
    """The ``num_threads=`` argument of a ``threads`` parameter."""
    return None if threads == "default" else threads


def require(*names):
    """Skip the benchmark on a build without the functions `names`.

    asv times the suite of the checkout against older commits' builds too;
    ``NotImplementedError`` in ``setup`` is asv's skip.
    """
    missing = [name for name in names if not hasattr(cropgrad, name)]
    if missing:
        raise NotImplementedError(f"this build has no {', '.join(missing)}")
