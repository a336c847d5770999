"""The ops' compiled kernels (private): placeholder docstring, drawn below."""
