"""Registration of the XLA FFI handlers with XLA, for the CPU platform.

May import: JAX, cropgrad._jax.handlers.
"""

import jax

from cropgrad._jax import handlers as _handlers


def register(name, capsule):
    """Register one handler for the CPU platform, explaining a refusal.

    XLA asks the handler which FFI API version it was written for and
    refuses versions it does not support.  When the CPU backend already
    runs, that happens here; otherwise XLA does it when the backend starts
    (its error then names the handler and both versions).
    """
    try:
        jax.ffi.register_ffi_target(name, capsule, platform="cpu")
    except Exception as exc:
        import jaxlib

        major, minor = _handlers.FFI_API_VERSION
        raise ImportError(
            f"cropgrad.jax cannot register its XLA handler {name!r} with "
            f"jaxlib {jaxlib.__version__}: the handlers use XLA FFI API "
            f"{major}.{minor}, which this jaxlib refuses. Install a jax and "
            f'jaxlib that cropgrad supports (pip install "cropgrad[jax]"). '
            f"XLA said: {exc}"
        ) from exc


def register_handlers():
    """Register every handler under its FFI target's name."""
    for name, capsule in _handlers.handlers().items():
        register(name, capsule)
