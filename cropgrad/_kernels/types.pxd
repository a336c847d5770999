# cython: language_level=3
#
# The types every kernel shares: the fused accumulator and image types, and
# the geometry of a problem.

from libc.stdint cimport int8_t, int16_t, int32_t, int64_t, uint8_t, uint16_t


# The image gradient's accumulator: float16 outputs accumulate in float32
# and are rounded once.
ctypedef fused acc_t:
    float
    double

# Every real image dtype of the forward op and the boxes gradient; float16
# and bfloat16 images arrive as their uint16 bit patterns, with ``half``
# saying which (see pixels.pxd).
ctypedef fused image_t:
    uint8_t
    int8_t
    uint16_t
    int16_t
    int32_t
    int64_t
    float
    double


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


# Dtypes: the kernels take the C-level API's codes (cropgrad.capi's CG_*,
# cimported from capi.pxd: enums only, so no module import follows).


# Layout tags: kernels written once for both layouts take a `layout_t*`
# (always NULL) and pick their strides with ``if layout_t is nchw_t``, so
# each layout gets code of its own, compiled with constant strides.
ctypedef struct nhwc_t:
    char unused
ctypedef struct nchw_t:
    char unused
ctypedef fused layout_t:
    nhwc_t
    nchw_t
