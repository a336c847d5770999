# The stub of cropgrad._kernels.crop_and_resize.jvp_boxes:
# jvp_boxes.pyx defines no Python-visible name; other compiled modules
# reach it through cimport (jvp_boxes.pxd).
