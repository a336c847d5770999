# Stub of crop_and_resize.pyx: it defines no Python-visible name; other compiled
# modules reach it through cimport (crop_and_resize.pxd).
