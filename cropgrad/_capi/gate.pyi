# Stub of gate.pyx: it defines no Python-visible name; other compiled
# modules reach it through cimport (gate.pxd).
