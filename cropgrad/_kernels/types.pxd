# cython: language_level=3
#
# The types every kernel shares: the fused accumulator and image types and
# the layout tags.

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
