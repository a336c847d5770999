"""The JAX adapter's machinery (private); cropgrad.jax is its public face.

Compiled, built without JAX (the XLA FFI handlers):

- ``ffi.pxd``: the few structs of XLA's FFI C API the handlers touch.
- ``frames``: decoding a call frame (buffers, attributes, the metadata
  query) and the way back to XLA, an error carrying cropgrad's message.
- ``handlers``: one handler an FFI target, calling the C-level API
  (`cropgrad.capi`, which runs the gate), and the Python side: the capsules
  that registration hands to XLA, the layout probe, the thread default.
"""
