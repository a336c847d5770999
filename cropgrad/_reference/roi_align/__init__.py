"""A plain NumPy model of RoIAlign (average pooling), independent of the kernels.

Private (a package: ``forward``, ``boxes``, ``pyramid``; every name is
re-exported here).  RoIAlign as torchvision's CPU kernel computes it
(``torchvision.ops.roi_align``, NCHW, boxes ``[x1, y1, x2, y2]`` in the
coordinates of the input image, scaled by ``spatial_scale``): one sample
at a time, in the serial order (box, bin row, bin column, sample row,
sample column, corner), vectorised over channels only.  Slow, but every
rounding can be checked by eye.  The fixture script
(``tests/data/make_roi_align_fixtures.py``) loads ``cropgrad/_reference``
by its path in an environment that has torchvision but no compiled
cropgrad, so it imports nothing but NumPy, the standard library and
itself (relatively).

The arithmetic type
-------------------
torchvision computes in the input's type ``T``.  Here ``T`` is float64 for
float64 images (float64 ``grads`` for the image gradient) and float32 for
every other dtype: float32 images, and float16, bfloat16 and integer
images, whose pixels are converted to float32 when read (torchvision's
float16 kernel computes in float16 instead, rounding every operation to
float16; cropgrad does not).  Boxes and ``spatial_scale`` are rounded to
``T`` first, as torchvision's kernel receives them.

Two kinds of arithmetic, chosen with ``exact``:

``exact=True``
    the operation's own arithmetic: every operation in ``T``, rounded in
    torchvision's order.  Results are ``T`` arrays with torchvision's bits
    (float32 and float64, wherever torchvision is defined; see below).
``exact=False``
    the accuracy yardstick: the geometry of every sample (scaled corners,
    bin size, grid, sample coordinate, the clamps, the pixel indices and
    the lerp ``l``) in ``T``, since those decide which pixels a sample
    reads; everything after them (``1 - l``, the weights, products, sums
    and the division by the count) in float64.  Results are float64.  With
    a float64 image everything is float64, so the result is a smooth
    function of the boxes between pixel boundaries: the boxes derivatives
    below are its derivatives.

The default is ``exact=True`` for `roi_align` and `roi_align_grad_image`
(their reason to exist is torchvision's bits) and ``exact=False`` for the
boxes derivatives, which torchvision lacks: their definition is the float64
one, the float32 arithmetic of ``exact=True`` is the order the kernels
will follow (see "Arithmetic of the boxes derivative").

Where a sample falls
--------------------
Along one axis (rows: ``y1, y2, H, out_h``; columns: ``x1, x2, W,
out_w``), with ``s = T(spatial_scale)``, ``off = 0.5`` if ``aligned`` else
``0`` and the pooled size ``P``, in ``T``, one rounding per operation::

    start = lo * s - off
    end   = hi * s - off
    size  = end - start
    if not aligned: size = max(size, 1)        # NaN stays NaN
    bin   = size / P
    grid  = sampling_ratio if sampling_ratio > 0 else ceil(bin)
    c     = (start + p * bin) + ((i + 0.5) * bin) / grid

for bin ``p`` in ``[0, P)`` and sample ``i`` in ``[0, grid)``.  The
bin's count is ``T(max(grid_h * grid_w, 1))``.  A sample is *inside* when
``-1 <= c_y <= H`` and ``-1 <= c_x <= W`` (a NaN coordinate never is);
then, per axis::

    if c <= 0: c = 0                       # the lower clamp
    low = int(c)
    if low >= H - 1: low = high = H - 1; c = H - 1   # the upper clamp
    else: high = low + 1
    l = c - low;  h = 1 - l

and the weights are ``w1 = h_y * h_x, w2 = h_y * l_x, w3 = l_y * h_x,
w4 = l_y * l_x`` for the pixels ``(low_y, low_x), (low_y, high_x),
(high_y, low_x), (high_y, high_x)``.  (torchvision writes ``1. - l`` in
double and rounds it to ``T``: for float32 that is the float32 subtraction,
since double has more than twice float32's precision.)

Forward: per output element, ``acc = 0``; per inside sample ``acc += ((w1
* v1 + w2 * v2) + w3 * v3) + w4 * v4``; the output is ``acc / count``.
Image gradient: per output element in the order (box, channel, bin row,
bin column) and per inside sample, ``(g * w) / count`` is added to each of
the four pixels in the order above (the same pixel twice or four times
when the clamps make ``low == high``).

Where cropgrad defines what torchvision leaves undefined
--------------------------------------------------------
- A sample outside the image contributes nothing and reads no pixel.
  torchvision's forward adds ``0 * pixel[0]`` for it, which is NaN when
  the channel's first pixel is NaN or infinite; here it stays 0.  (For
  finite pixels the two agree bit for bit: adding a zero never changes a
  sum that starts at +0.)  Inside samples read all four corners, as
  torchvision does, so a zero weight times an infinite pixel is NaN in
  both.
- The adaptive grid is ``ceil(bin)`` in ``T``; a negative value (a flipped
  box with ``aligned=True``) means no samples, and so does a NaN or
  infinite bin.  torchvision turns a negative grid into an impossible
  vector size when exactly one axis is flipped (``ValueError: cannot
  create std::vector larger than max_size()``), and into no samples
  otherwise: the output is 0 in every case where it returns.
- NaN and infinite box coordinates: the library will reject them
  (``ValueError`` naming the box, as ``crop_and_resize`` does and as ONNX
  Runtime does); the arithmetic here does not check and treats them as
  the kernels would: their NaN or infinite sample coordinates are outside,
  and so are those of finite boxes whose scaled size overflows (``x2 -
  x1`` beyond float32's range gives ``0 * inf`` in the first bin).  Such a
  box's output and gradients are 0.  torchvision reads pixels at ``(int)
  NaN`` and crashes the process with a fixed sampling ratio (for most such
  boxes), and returns zeros with the adaptive grid.
- A bin may hold at most `MAX_SAMPLES_PER_BIN` samples (``grid_h *
  grid_w``, after negative grids count as 0): beyond it the count would
  not be exact in float32, and torchvision's ``int`` arithmetic overflows
  at 2**31.  The functions here raise ``ValueError`` past it.

Arithmetic of the boxes derivative
----------------------------------
torchvision has no derivative with respect to the boxes.  Here it is the
derivative of the piecewise-bilinear sampling through the sample
coordinates; the adaptive grid (a ``ceil``) is held constant.  Per axis,
with ``frac = (p + (i + 0.5) / grid) / P`` (in ``(0, 1)``), a sample
coordinate moves with the box edges as::

    dc/dlo = s * (1 - frac),  dc/dhi = s * frac      (size not clamped)
    dc/dlo = s,               dc/dhi = 0             (aligned=False and
                                                      the raw size < 1)

(the second line: ``max(size, 1)`` holds the size at 1, so only the start
moves; the clamp holds exactly when the raw size is below 1, as
``std::max`` keeps the size when it equals 1).  The image's slopes at an
inside sample, per channel::

    slope_y = h_x * (v3 - v1) + l_x * (v4 - v2)
    slope_x = h_y * (v2 - v1) + l_y * (v4 - v3)

``slope_y`` is 0 where a row clamp holds (``c_y <= 0`` before clamping, or
``low_y >= H - 1``): the branch the forward takes decides, so a sample
exactly on row 0 has no row slope, while one exactly on an inner integer
row has the slope of the cell below it (``low = int(c)``, ``high = low +
1``: the derivative from the right).  The same for ``slope_x``.  Outside
samples contribute 0.  With ``rate_y = t_y1 * dc/dy1 + t_y2 * dc/dy2``
and ``rate_x`` likewise, the JVP is::

    jvp[k, c, ph, pw] = (sum over inside samples of
                         slope_y * rate_y + slope_x * rate_x) / count

and the boxes gradient its transpose: ``d/dy1 = (sum over channels, bins
and inside samples of g * slope_y * dc/dy1) / count``, and so on for
``x1, x2, y2``.  ``exact=False`` computes these in float64 (the geometry
in ``T``, as above).

``exact=True`` (the order proposed for the kernels) computes in ``T``,
one rounding per operation, in the order written:

- per box and axis, per bin ``p`` and sample ``i``: ``q = T(i + 0.5) /
  T(grid)``, ``r = T(p) + q``, ``frac = r / T(P)``, ``f_hi = s * frac``,
  ``f_lo = s * (1 - frac)``; when the size clamp holds, ``f_lo = s`` and
  there is no ``f_hi`` term;
- per inside sample and channel, for an axis whose clamp does not hold:
  ``slope_y = (h_x * (v3 - v1)) + (l_x * (v4 - v2))`` and ``slope_x =
  (h_y * (v2 - v1)) + (l_y * (v4 - v3))`` (each difference, product and
  the sum rounded);
- JVP: ``rate_y = (t_y1 * f_lo_y) + (t_y2 * f_hi_y)`` once per (bin row,
  sample row) (only ``t_y1 * f_lo_y`` when the size clamp holds), likewise
  ``rate_x``; per output element ``acc = 0``, and per inside sample in the
  order (sample row, sample column) ``acc += (slope_y * rate_y) + (slope_x
  * rate_x)`` (a term whose axis is clamped is left out, not added as 0);
  the result is ``acc / count``;
- gradient: four sums per box, ``S_x1, S_y1, S_x2, S_y2``.  Each channel
  first has its own four sums, starting at 0: per bin row, bin column,
  sample row and sample column, in that order, ``gy = slope_y * g`` then
  ``S_y1[c] += gy * f_lo_y`` and ``S_y2[c] += gy * f_hi_y``, and ``gx =
  slope_x * g`` then ``S_x1[c] += gx * f_lo_x``, ``S_x2[c] += gx * f_hi_x``
  (terms of a clamped axis, and the ``f_hi`` terms of a clamped size, left
  out).  The channels' sums are then added in ``LANES = 8`` lanes (channel
  ``c`` in lane ``c % 8``, each lane from channel to channel, starting at
  0) and the lanes combined as ``((l0 + l1) + (l2 + l3)) + ((l4 + l5) +
  (l6 + l7))``; the result is ``[S_x1, S_y1, S_x2, S_y2] / count``.  (Sums
  per channel let the kernels run a channel plane at a time in NCHW and
  eight channels at once in NHWC, in one fixed order.)

Functions
---------
``forward``: axis_samples
    where the samples of one box fall along one axis;
``forward``: roi_align, roi_align_grad_image
    the forward op and its image gradient (torchvision's bits);
``boxes``: roi_align_jvp_boxes, roi_align_grad_boxes
    the derivative with respect to the boxes, forward and reverse mode;
``pyramid``: infer_scale, fpn_levels, multi_scale_roi_align
    torchvision's ``MultiScaleRoIAlign`` built on `roi_align`.

Examples
--------
>>> import numpy as np
>>> image = np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4)
>>> roi_align(image, [[0, 0, 2, 2]], [0], (1, 1))[0, 0].tolist()
[[5.0]]
"""

from .boxes import LANES, roi_align_grad_boxes, roi_align_jvp_boxes
from .forward import (
    MAX_SAMPLES_PER_BIN,
    arithmetic_type,
    axis_samples,
    f32,
    f64,
    roi_align,
    roi_align_grad_image,
)
from .pyramid import fpn_levels, infer_scale, multi_scale_roi_align

__all__ = [
    "LANES",
    "MAX_SAMPLES_PER_BIN",
    "arithmetic_type",
    "axis_samples",
    "f32",
    "f64",
    "fpn_levels",
    "infer_scale",
    "multi_scale_roi_align",
    "roi_align",
    "roi_align_grad_boxes",
    "roi_align_grad_image",
    "roi_align_jvp_boxes",
]
