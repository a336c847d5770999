# Stub of grad_image_nchw.pyx: it defines no Python-visible name; other compiled
# modules reach it through cimport (grad_image_nchw.pxd).
