# The stub of cropgrad._capi.gate:
# gate.pyx defines no Python-visible name; other compiled modules
# reach it through cimport (gate.pxd).
