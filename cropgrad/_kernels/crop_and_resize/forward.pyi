# The stub of cropgrad._kernels.crop_and_resize.forward:
# forward.pyx defines no Python-visible name; other compiled modules
# reach it through cimport (forward.pxd).
