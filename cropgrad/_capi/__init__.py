"""The C-level API's body (private, compiled): the gate and the ops' calls.

The gate is the one definition of a valid call: each op's metadata checks
(shapes, dtype codes, options; no data read) and the checks that need the
arrays (NULL and overlapping pointers, box indices in range, finite boxes
or grids), each filling a ``cg_error`` record.  An op's call runs once its
metadata has passed, always through ``gate.run``: the array and data
checks, the kernels' problem, the kernel, in one order for every op, the
op's own parts as hooks.  One module per op family holds its ops' checks
and calls (``crop_and_resize``, ``roi_align``, ``grid_sample``), a call per
op kind (``run_forward``, ``run_grad_image``, ``run_grad_coords``,
``run_jvp_coords``) told the op's name and whether to run its metadata
check first; ``gate`` the record, the checks they share and ``run``.

Who runs what, so that every call passes the gate once::

    cropgrad.capi.cg_*          <family>.run_<kind>, metadata check first
    cropgrad._core (NumPy API)  <family>.check_<op> (before the output is
                                allocated)           ->  <family>.run_<kind>
    cropgrad._jax (JAX)         <family>.run_<kind>, metadata check first,
                                on XLA's buffers

It cimports the kernels (cropgrad/_kernels) and the runtime
(cropgrad/_runtime), and the C-level API's codes from ``capi.pxd``; the
Python layer reaches it only through cropgrad._core.
"""
