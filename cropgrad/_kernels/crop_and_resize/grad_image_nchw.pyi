# The stub of cropgrad._kernels.crop_and_resize.grad_image_nchw:
# grad_image_nchw.pyx defines no Python-visible name; other compiled modules
# reach it through cimport (grad_image_nchw.pxd).
