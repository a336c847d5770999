# Stub of forward.pyx: it defines no Python-visible name; other compiled
# modules reach it through cimport (forward.pxd).
