# cython: language_level=3
#
# The problem every crop-and-resize kernel is given: the boxes, the crop
# size, the image, the sampling method and the layout.


ctypedef struct Geometry:
    # Boxes and the crop each one is resized to
    Py_ssize_t num_boxes
    Py_ssize_t crop_h
    Py_ssize_t crop_w
    # The image (or image gradient): batch of height x width x depth
    Py_ssize_t batch
    Py_ssize_t height
    Py_ssize_t width
    Py_ssize_t depth
    # Nearest-neighbour sampling instead of bilinear
    bint nearest
    # [n, depth, height, width] memory instead of [n, height, width, depth]
    bint nchw
