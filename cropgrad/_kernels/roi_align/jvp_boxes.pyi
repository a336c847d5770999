# Stub of jvp_boxes.pyx: it defines no Python-visible name; other compiled
# modules reach it through cimport (jvp_boxes.pxd).
