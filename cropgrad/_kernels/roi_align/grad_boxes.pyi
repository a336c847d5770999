# The stub of cropgrad._kernels.roi_align.grad_boxes:
# grad_boxes.pyx defines no Python-visible name; other compiled modules
# reach it through cimport (grad_boxes.pxd).
