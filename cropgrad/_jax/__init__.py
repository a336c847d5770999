"""The JAX adapter's machinery (private); cropgrad.jax is its public face.

cropgrad.jax's functions convert their arguments (``checks``) and bind a
primitive (``primitives``); the primitive lowers to one XLA FFI call, whose
handler (``handlers``) calls the C-level API on XLA's buffers::

    cropgrad.jax.<op>                 while traced:
      checks.options, checks.image ...  argument conversion
      primitives.bind("<op>", ...)      a row of ops.OPS
        abstract evaluation               the gate (checks.GATES), shapes
        under vmap                        batching: the gate, one folded call
        under jvp, grad                   derivatives: other rows of ops.OPS
    XLA FFI call "cropgrad_<op>"      when the computation runs:
      handlers._handle                  frames: decode the call frame
        handlers._run_<family>_<kind>   _capi.<family>.run_<kind>: the gate,
                                        the kernel

Modules, what each owns and what it may import (besides JAX and NumPy):

``ops``
    The table: one row a primitive (operands and parameters from the
    signature table, FFI target, result, gate, linear operands and their
    transposes, derivative along the coordinates), made by family.  Imports
    cropgrad._ops and ``checks``.
``checks``
    Argument conversion and the trace-time gate.  Imports
    cropgrad._api.validation, cropgrad._core and ``handlers``.
``shapes``
    Shapes in a layout, and each op's result.  Imports
    cropgrad._api.validation.
``primitives``
    The primitives made from the table: binding, abstract evaluation,
    eager evaluation, lowering to the FFI call.  Imports ``ops`` and
    ``shapes``.
``batching``
    One vmap rule for every row.  Imports ``ops`` and ``primitives``.
``derivatives``
    One JVP and one transpose rule for every row.  Imports
    cropgrad._api.validation, ``ops``, ``primitives`` and ``shapes``.
``registration``
    The handlers registered with XLA.  Imports ``handlers``.
``roi_align``, ``grid_sample``
    The RoIAlign and grid-sampling families' public functions, which
    cropgrad.jax re-exports.  Import ``checks`` and ``primitives``.

Compiled, built without JAX (no module above is imported by them):

``ffi.pxd``
    The few structs of XLA's FFI C API the handlers touch.
``frames``
    Decoding a call frame (buffers, attributes, XLA's metadata query) and
    the way back, an error carrying cropgrad's message.  Cimports
    cropgrad.capi (its codes and error record) and ``ffi``.
``handlers``
    One handler an FFI target, calling the C-level API (which runs the
    gate), and the Python side: the capsules that ``registration`` hands
    to XLA, the layout probe, the thread default.  Cimports cropgrad.capi,
    ``ffi`` and ``frames``.

cropgrad.jax wires them when imported (registration, then the rules);
nothing here imports cropgrad.jax.  A new family of ops (RoIAlign's) is its
run functions and Target rows in ``handlers.pyx``, one ``_family`` call in
``ops`` with its gates in ``checks.GATES``, and its public functions in
a module of their own (``roi_align``), re-exported by cropgrad.jax.
"""
