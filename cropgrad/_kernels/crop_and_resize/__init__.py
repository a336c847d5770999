"""The crop_and_resize family's kernels (private): TensorFlow's
``CropAndResize``, its image and boxes gradients, and the boxes JVP.

``sampling.pxd`` holds the one copy of the family's float32 arithmetic of
where a sample falls (coordinates, corners, weights); ``grad_image_plan.pxd``
and ``grad_boxes_plan.pxd`` the plans and inner steps each gradient shares
between its two layouts.  See cropgrad._kernels for the dispatch.
"""
