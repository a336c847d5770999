"""The ops' kernels (private, compiled): what runs once a call is valid.

A kernel trusts its arguments: the gate (cropgrad/_capi) has checked them.
Each op family has a folder of kernel modules; what the families share
stands here:

- ``types.pxd``: the fused pixel and accumulator types and the layout tags
  (a family's problem is its own: ``crop_and_resize/geometry.pxd``,
  ``roi_align/plan.pxd``); dtypes are the C-level API's ``CG_*`` codes;
- ``pixels.pxd`` (a pixel of any dtype as float32) and ``image_dtypes.pxi``
  (the one switch from an image's dtype code to the kernel compiled for its
  C type);
- ``box_groups.pxd`` (boxes grouped by image), ``aligned.pxd`` (scratch and
  tables in 64-byte lines);
- ``cdefs.pxd`` and ``src/cg_*.h``: the hand-written C (innermost loops with
  their SIMD clones, float16 and bfloat16 conversions, NCHW plane moves, the
  flush-to-zero mode, build facts), declared once;
- `layout`: NHWC arrays to NCHW and back for the NumPy functions of a
  family whose kernels read NCHW only (grid sampling), on the call's team;
- `testing`: thin wrappers of inline helpers, for the tests.

The call path, from the C-level API's call (cropgrad/_capi/<family>.pyx:
crop_and_resize.pyx, roi_align.pyx) down::

    <family>.run_<kind>
                    ->  the op's entry, e.g. crop_and_resize.grad_image
                          plans its tasks (what both layouts share), and
                          hands NCHW to the op's ``_nchw`` module where NCHW
                          needs a plan of its own (forward, grad_image,
                          grad_boxes); an op whose NCHW differs only in its
                          strides compiles one task body for both layout
                          tags (jvp_boxes)
                    ->  cropgrad._runtime.parallel.run_tasks: the calling
                          thread or an OpenMP team, the floating-point mode
                    ->  the op's tasks, each writing its own part of the
                          output in the serial order (cg_*.h loops, on the
                          SIMD target each module read from
                          cropgrad._runtime.simd when it was imported)

The dispatch of the crop_and_resize family:

=================  ======================  ===========================
op                 NHWC                    NCHW
=================  ======================  ===========================
forward            forward                 forward_nchw (tiles)
image gradient     grad_image              grad_image_nchw (tiles or
                                           planes; grad_image plans the
                                           bands for both)
boxes gradient     grad_boxes              grad_boxes_nchw (staged rows
                                           or the whole image)
boxes JVP          jvp_boxes (both layout tags)
=================  ======================  ===========================

Kernels import the runtime (cropgrad/_runtime) and the C-level API's codes
(``capi.pxd``, enums only), never the layers above them.
"""
