# The stub of cropgrad._kernels.roi_align.jvp_boxes:
# jvp_boxes.pyx defines no Python-visible name; other compiled modules
# reach it through cimport (jvp_boxes.pxd).
