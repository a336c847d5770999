"""grid_sample's kernels (private): PyTorch's ``grid_sample`` (2-D), its
image and grid gradients and the grid JVP.  ``points.pxd`` says where a
grid point samples (unnormalisation, padding, taps and weights);
``kernels.pyx`` runs the four ops over the points in parallel and is what
the NumPy API (cropgrad/_api/grid_sample.py) calls."""
