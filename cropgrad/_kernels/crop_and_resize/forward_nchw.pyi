# Stub of forward_nchw.pyx's Python-visible function; the kernel is reached
# through cimport (forward_nchw.pxd).

def use_stream_bytes(nbytes: int) -> int: ...
