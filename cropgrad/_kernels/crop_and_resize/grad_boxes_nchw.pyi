# Stub of grad_boxes_nchw.pyx: it defines no Python-visible name; other compiled
# modules reach it through cimport (grad_boxes_nchw.pxd).
