# grid_sample.pyx has no Python-visible function: its checks and calls are
# reached through cimport (grid_sample.pxd).
