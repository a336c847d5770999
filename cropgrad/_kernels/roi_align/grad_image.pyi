# Stub of grad_image.pyx: it defines no Python-visible name; other compiled
# modules reach it through cimport (grad_image.pxd).
