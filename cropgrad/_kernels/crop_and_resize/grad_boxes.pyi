# Stub of grad_boxes.pyx: it defines no Python-visible name; other compiled
# modules reach it through cimport (grad_boxes.pxd).
