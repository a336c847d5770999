# Stub of the module that decodes XLA's call frames (frames.pyx): it has no
# Python-visible names; handlers.pyx cimports its C functions.
