# Stub of roi_align.pyx's Python-visible function; the checks and calls are
# reached through cimport (roi_align.pxd).

def use_tile_bytes(budget: int) -> int: ...
