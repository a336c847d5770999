# The stub of cropgrad._capi.crop_and_resize:
# crop_and_resize.pyx defines no Python-visible name; other compiled modules
# reach it through cimport (crop_and_resize.pxd).
