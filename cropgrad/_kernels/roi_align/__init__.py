"""The RoIAlign family's kernels (private): torchvision's ``roi_align``
(average pooling), its image gradient, and the boxes gradient and JVP.

``sampling.pxd`` holds the one copy of the family's arithmetic of where a
sample falls, in torchvision's roundings; ``plan.pxd`` the problem, the
plan, a box's axes and the store into an output of any float dtype;
``channels.pxd`` a sample's loops over channels (the SIMD clones of
``src/cg_roi.h``); ``tiles.pxd`` how an NCHW image is read: a tile of up to
128 channels gathered side by side, so that the channel loops run on
contiguous memory as they do in NHWC; ``bins.pxd`` the walk over a box's
bins that the forward op and the boxes JVP share.  See cropgrad._kernels
for the dispatch.
"""
