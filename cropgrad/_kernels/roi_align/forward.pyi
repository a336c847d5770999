# The stub of cropgrad._kernels.roi_align.forward:
# forward.pyx defines no Python-visible name; other compiled modules
# reach it through cimport (forward.pxd).
