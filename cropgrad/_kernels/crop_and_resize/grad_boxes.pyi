# The stub of cropgrad._kernels.crop_and_resize.grad_boxes:
# grad_boxes.pyx defines no Python-visible name; other compiled modules
# reach it through cimport (grad_boxes.pxd).
