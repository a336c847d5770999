"""grid_sample's kernels (private): PyTorch's ``grid_sample`` (2-D), its
image and grid gradients and the grid JVP, in one module (``kernels.pyx``)
that the NumPy API (cropgrad/_api/grid_sample.py) calls directly."""
