"""Kernels of the crop_and_resize family (private)."""
