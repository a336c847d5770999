"""The RoIAlign family's kernels (private): torchvision's ``roi_align``
(average pooling), its image gradient, and the boxes gradient and JVP.

``sampling.pxd`` holds the one copy of the family's arithmetic of where a
sample falls, in torchvision's roundings; ``plan.pxd`` the problem, the
plan, a box's axes and the store into an output of any float dtype.  See
cropgrad._kernels for the dispatch.
"""
