# The stub of cropgrad._kernels.roi_align.grad_image:
# grad_image.pyx defines no Python-visible name; other compiled modules
# reach it through cimport (grad_image.pxd).
