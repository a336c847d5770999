"""The C-level API's body (private, compiled): the gate and the ops' calls.

``gate`` is the one definition of a valid call: each op's metadata checks
(shapes, dtype codes, options; no data read) and the checks that need the
arrays (NULL and overlapping pointers, box indices in range, finite boxes),
each filling a ``cg_error`` record.  ``calls`` runs an op once its metadata
has passed: the array and data checks, the kernels' geometry, the kernel.

Who runs what, so that every call passes the gate once::

    cropgrad.capi.cg_*          gate.check_<op>  ->  calls.run_<op>
    cropgrad._core (NumPy API)  gate.check_<op> (before the output is
                                allocated)       ->  calls.run_<op>
    cropgrad._xla (JAX)         cropgrad.capi.cg_* on XLA's buffers

It cimports the kernels (cropgrad/_kernels) and the runtime
(cropgrad/_runtime), and the C-level API's codes from ``capi.pxd``; the
Python layer reaches it only through cropgrad._core.
"""
