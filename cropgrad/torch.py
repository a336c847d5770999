"""cropgrad for PyTorch: the ops as ``torch.library`` custom ops.

::

    import cropgrad.torch as cgt

    crops = cgt.crop_and_resize(image, boxes, box_ind, (7, 7))  # NCHW

`crop_and_resize`, `crop_and_resize_grad_image` and
`crop_and_resize_grad_boxes` compute what the NumPy functions of the same
names compute, bit for bit, on CPU tensors.  They are the custom operators
``torch.ops.cropgrad.crop_and_resize``,
``torch.ops.cropgrad.crop_and_resize_grad_image`` and
``torch.ops.cropgrad.crop_and_resize_grad_boxes`` (with the Python
functions' defaults in their schemas), plus
``torch.ops.cropgrad.crop_and_resize_jvp_boxes``, the forward-mode
derivative in the boxes (`cropgrad.crop_and_resize_jvp_boxes`).  They have
fake implementations (shapes and dtypes without computing, which meta
tensors get too), so they work with ``torch.compile(fullgraph=True)`` and
``torch.export``.

Derivatives, in reverse mode (autograd, ``torch.func.grad``, ``vjp``,
``jacrev``) and forward mode (``torch.func.jvp``, ``jacfwd``,
``torch.autograd.forward_ad``), composed with ``torch.func.vmap`` (whose
mapped axis is folded into one call: more images and more boxes):

- `crop_and_resize`, with respect to the image (floating dtypes; linear)
  and the boxes (bilinear sampling; nearest sampling is piecewise constant
  in the boxes, so there the derivative is zero);
- `crop_and_resize_grad_image`, with respect to ``grads`` (linear) and, in
  reverse mode, the boxes;
- `crop_and_resize_grad_boxes`, with respect to ``grads`` and, in forward
  mode, the image (it is linear in both).

The derivatives cropgrad has no kernel for (of the boxes gradient with
respect to the boxes, in reverse mode to the image; of the image gradient
with respect to the boxes in forward mode) raise ``NotImplementedError``
when they are needed; none is ever returned as zeros.  ``torch.func``'s
transforms go through the Python functions of this module: the
``torch.ops.cropgrad`` operators raise ``NotImplementedError`` under them
(they support autograd, ``forward_ad`` and ``vmap`` on their own).  Under
``vmap``, an error in one problem's data names that problem's indices.

Dtypes: the ops compute in float32, TensorFlow's arithmetic, whatever the
input dtype; `crop_and_resize` returns its crops in the image's floating
dtype, as PyTorch's ops do (float16 and bfloat16 rounded once from the
float32 result, float64 widened exactly; float32 for integer images),
while ``torch.ops.cropgrad.crop_and_resize`` and the NumPy API keep
float32.  For float64 inputs, ``torch.autograd.gradcheck`` at its default
``eps=1e-6`` therefore fails (the step is lost in the float32 rounding); steps float32
resolves check the derivatives, e.g. ``gradcheck(fn, inputs, eps=1e-3,
atol=1e-3, rtol=1e-3)`` with samples farther than a step from a pixel
boundary (where the op has a kink in the boxes).

Layout: the default ``data_format="NCHW"`` is PyTorch's: images and image
gradients are ``[batch, depth, height, width]``, crops and grads
``[num_boxes, depth, crop_height, crop_width]``.  ``"NHWC"`` is
TensorFlow's.  Tensors are read where they are: an NCHW tensor in
``torch.channels_last`` memory format is NHWC in memory and goes to the
NHWC kernel without a copy (and the result comes back in the same memory
format); likewise an NHWC-shaped view of NCHW memory goes to the NCHW
kernel.  Outputs are allocated by PyTorch and written in place.

bfloat16 images are read exactly as float32 and the image gradient can be
bfloat16 (rounded once); neither needs ``ml_dtypes``.  Under CPU autocast
the ops run as they do outside it: nothing is cast on the way in (they read
every image dtype exactly and compute in float32), so an autocast bfloat16
feature map is read without a float32 copy and the boxes are never rounded
below float32; its crops come back in bfloat16.

RoIAlign: `roi_align` is ``torchvision.ops.roi_align`` (its signature,
its conventions and its bits, as `cropgrad.roi_align` computes them),
differentiable with respect to the boxes as well, through the custom
operators of its family, ``torch.ops.cropgrad.<op>`` for `roi_align`, its
image and boxes gradients and its boxes JVP (named as the NumPy functions
are), which take torchvision's arguments (boxes ``Tensor[K, 5]``, the
image index first) and work under the same transforms as the
crop_and_resize family.  Its results are in the
input's dtype.  Second derivatives in the boxes raise
``NotImplementedError``.

Grid sampling: `grid_sample` is ``torch.nn.functional.grid_sample`` for
4-D inputs (its signature and its bits, as `cropgrad.grid_sample` computes
them), through the custom operators of its family,
``torch.ops.cropgrad.<op>`` for `grid_sample`, its image and grid
gradients and its grid JVP (named as the NumPy functions are; PyTorch's
arguments), under the same transforms.  Second derivatives with respect to
the grid, but for that of the input gradient in reverse mode, raise
``NotImplementedError``.

Only CPU (and meta) tensors are accepted; a tensor on any other device is
a ``ValueError``.  Install with ``pip install "cropgrad[torch]"``.
"""

try:
    import torch
except ImportError:  # the extra is not installed (the cause stays chained)
    raise ImportError(
        'cropgrad.torch needs PyTorch: install it with pip install "cropgrad[torch]"'
    )

# The oldest release with the torch.library functions the ops are defined
# with (register_fake, register_vmap): an older one is told so at import,
# not failed somewhere inside.
_OLDEST = (2, 5)
if tuple(int(p) for p in torch.__version__.split(".")[:2]) < _OLDEST:
    raise ImportError(
        f"cropgrad.torch needs PyTorch {_OLDEST[0]}.{_OLDEST[1]} or newer, "
        f"found {torch.__version__}: upgrade it (pip install -U torch)"
    )

from cropgrad._api import docstrings as _docs  # noqa: E402
from cropgrad._torch import checks as _checks  # noqa: E402
from cropgrad._torch import pyramid as _pyramid  # noqa: E402
from cropgrad._torch import registration as _registration  # noqa: E402

__all__ = [
    "MultiScaleRoIAlign",
    "RoIAlign",
    "crop_and_resize",
    "crop_and_resize_grad_boxes",
    "crop_and_resize_grad_image",
    "grid_sample",
    "roi_align",
]


def _in_dtype_of(image, crops):
    """`crops` (float32) in the dtype of a floating `image`, as PyTorch's
    ops return results: rounded once (float16, bfloat16) or widened exactly
    (float64).  The custom op itself keeps float32."""
    dtype = image.dtype if isinstance(image, torch.Tensor) else None
    if dtype is None or not dtype.is_floating_point or dtype == torch.float32:
        return crops
    return crops.to(dtype)


# Each public function passes its arguments on by name (``locals()``, read
# before anything else is bound): the argument checks and the order the op
# takes them in come from the one table of each op's arguments
# (cropgrad/_ops).


@_docs.shared
def crop_and_resize(
    image,
    boxes,
    box_ind,
    crop_size,
    method="bilinear",
    extrapolation_value=0.0,
    *,
    data_format="NCHW",
    num_threads=None,
    flush_denormals=False,
):
    """Crop boxes out of a batch of images and resize them (differentiable).

    TensorFlow's ``CropAndResize`` bit for bit, as
    `cropgrad.crop_and_resize` computes it, on CPU tensors.

    Parameters
    ----------
    image : Tensor of shape (batch, depth, height, width)
        ``(batch, height, width, depth)`` with ``data_format="NHWC"``.
        uint8, uint16, int8, int16, int32, int64, float16, bfloat16,
        float32 or float64; pixels are converted to float32 as they are
        read.  Differentiable when floating.
    boxes : Tensor of shape (num_boxes, 4)
        Finite ``[y1, x1, y2, x2]`` in normalized coordinates (``0`` is the
        first pixel, ``1`` the last), used as float32.  Differentiable
        (bilinear sampling; the gradient of nearest sampling is zero).
    box_ind : Tensor of shape (num_boxes,), int32 or int64
        Image of each box, in ``[0, batch)``.
    crop_size : int or sequence of 2 ints
        ``[crop_height, crop_width]``, both positive (an int: a square).
    method : {"bilinear", "nearest"}, default "bilinear"
    extrapolation_value : float, default 0.0
        Value of samples that fall outside the image.
    {torch_options}

    Returns
    -------
    Tensor of shape (num_boxes, depth, crop_height, crop_width)
        ``(num_boxes, crop_height, crop_width, depth)`` with
        ``data_format="NHWC"``; in ``channels_last`` memory format when
        the image is.  In the image's dtype when it is a floating one
        (computed in float32 and rounded once), float32 for integer images.

    Examples
    --------
    >>> import torch
    >>> import cropgrad.torch as cgt
    >>> image = torch.arange(9.0).reshape(1, 1, 3, 3)
    >>> boxes = torch.tensor([[0.0, 0.0, 1.0, 1.0]])
    >>> cgt.crop_and_resize(image, boxes, torch.tensor([0]), (2, 2))
    tensor([[[[0., 2.],
              [6., 8.]]]])
    """
    crops = _registration.call("crop_and_resize", locals())
    return _in_dtype_of(image, crops)


@_docs.shared
def crop_and_resize_grad_image(
    grads,
    boxes,
    box_ind,
    image_size,
    dtype=torch.float32,
    method="bilinear",
    *,
    data_format="NCHW",
    num_threads=None,
    flush_denormals=False,
):
    """Gradient of crop-and-resize with respect to the image.

    TensorFlow's ``CropAndResizeGradImage`` bit for bit, as
    `cropgrad.crop_and_resize_grad_image` computes it, on CPU tensors.
    Differentiable with respect to `grads` (its gradient is
    `crop_and_resize` of the incoming gradient, its JVP itself on the
    tangent) and, in reverse mode, the boxes.

    Parameters
    ----------
    grads : Tensor of shape (num_boxes, depth, crop_height, crop_width)
        ``(num_boxes, crop_height, crop_width, depth)`` with
        ``data_format="NHWC"``.  Used as float32 (the op's arithmetic).
    boxes : Tensor of shape (num_boxes, 4)
        Finite ``[y1, x1, y2, x2]`` in normalized coordinates.
    box_ind : Tensor of shape (num_boxes,), int32 or int64
        Image of each box, in ``[0, batch)``.
    image_size : sequence of 4 ints
        The output's shape, ``[batch, depth, height, width]`` (or
        ``[batch, height, width, depth]`` with ``data_format="NHWC"``).
    dtype : {torch.float32, torch.float16, torch.bfloat16, torch.float64}
        Output dtype; float16 and bfloat16 accumulate in float32 and are
        rounded once.
    method : {"bilinear", "nearest"}, default "bilinear"
    {torch_options}

    Returns
    -------
    Tensor of shape `image_size`, dtype `dtype`
        In ``channels_last`` memory format when `grads` is.

    Examples
    --------
    >>> import torch
    >>> import cropgrad.torch as cgt
    >>> grads = torch.ones(1, 1, 2, 2)
    >>> boxes = torch.tensor([[0.0, 0.0, 1.0, 1.0]])
    >>> cgt.crop_and_resize_grad_image(grads, boxes, torch.tensor([0]), (1, 1, 3, 3))
    tensor([[[[1., 0., 1.],
              [0., 0., 0.],
              [1., 0., 1.]]]])
    """
    return _registration.call("crop_and_resize_grad_image", locals())


@_docs.shared
def crop_and_resize_grad_boxes(
    grads,
    image,
    boxes,
    box_ind,
    method="bilinear",
    *,
    data_format="NCHW",
    num_threads=None,
    flush_denormals=False,
):
    """Gradient of crop-and-resize with respect to the boxes.

    TensorFlow's ``CropAndResizeGradBoxes`` bit for bit, as
    `cropgrad.crop_and_resize_grad_boxes` computes it (bilinear only), on
    CPU tensors.  Differentiable with respect to `grads` (its gradient is
    the boxes JVP of the incoming gradient) and, in forward mode, `image`.

    Parameters
    ----------
    grads : Tensor of shape (num_boxes, depth, crop_height, crop_width)
        ``(num_boxes, crop_height, crop_width, depth)`` with
        ``data_format="NHWC"``.  Used as float32.
    image : Tensor of shape (batch, depth, height, width)
        The forward op's image (``(batch, height, width, depth)`` with
        ``data_format="NHWC"``), of any dtype `crop_and_resize` accepts.
    boxes : Tensor of shape (num_boxes, 4)
        Finite ``[y1, x1, y2, x2]`` in normalized coordinates.
    box_ind : Tensor of shape (num_boxes,), int32 or int64
        Image of each box, in ``[0, batch)``.
    method : {"bilinear"}
        Only bilinear sampling has a boxes gradient.
    {torch_options}

    Returns
    -------
    Tensor of shape (num_boxes, 4), float32
        Gradient with respect to ``[y1, x1, y2, x2]`` of each box.

    Examples
    --------
    >>> import torch
    >>> import cropgrad.torch as cgt
    >>> image = torch.arange(9.0).reshape(1, 1, 3, 3)
    >>> grads = torch.ones(1, 1, 2, 2)
    >>> boxes = torch.tensor([[0.25, 0.25, 0.75, 0.75]])
    >>> cgt.crop_and_resize_grad_boxes(grads, image, boxes, torch.tensor([0]))
    tensor([[12.,  4., 12.,  4.]])
    """
    return _registration.call("crop_and_resize_grad_boxes", locals())


def roi_align(
    input, boxes, output_size, spatial_scale=1.0, sampling_ratio=-1, aligned=False
):
    """RoIAlign with average pooling: torchvision's ``roi_align``, differentiable
    in the boxes too.

    ``torchvision.ops.roi_align``'s signature and conventions, and its bits
    (forward and input gradient) in float32 and float64, as
    `cropgrad.roi_align` computes them, on CPU tensors.  Differentiable with
    respect to `input` (floating dtypes) and `boxes` (their coordinates;
    the image index is piecewise constant, its derivative zero), in reverse
    and forward mode.

    Parameters
    ----------
    input : Tensor of shape (N, C, H, W)
        The feature maps: float16, bfloat16, float32, float64 (or an integer
        dtype, read as float32).  float64 is computed in float64, every other
        dtype in float32 (float16 and bfloat16 read exactly).  Read where it
        is in ``channels_last`` memory.
    boxes : Tensor of shape (K, 5) or list of Tensor of shape (L, 4)
        ``[image index, x1, y1, x2, y2]`` per box in the input image's
        coordinates, or a list of ``[x1, y1, x2, y2]`` boxes, one tensor per
        image.  Finite coordinates; the index of a box's image a whole number
        in ``[0, N)``.  Any real dtype, converted to the arithmetic type.
    output_size : int or (int, int)
        ``(out_height, out_width)`` bins per box; an int is a square.
    spatial_scale : float, default 1.0
        Feature-map pixels per input pixel (``1/16`` for a stride-16 map).
    sampling_ratio : int, default -1
        Samples per bin along each axis; 0 or less: adaptive, ``ceil(bin
        size)`` per box.
    aligned : bool, default False
        Shift the scaled boxes by -0.5 pixel (torchvision's ``aligned=True``).

    Returns
    -------
    Tensor of shape (K, C, out_height, out_width)
        In the input's dtype (float32 for integers), computed in the
        arithmetic type and rounded once; in ``channels_last`` memory
        format when the input is.

    Examples
    --------
    >>> import torch
    >>> import cropgrad.torch as cgt
    >>> image = torch.arange(16.0).reshape(1, 1, 4, 4)
    >>> boxes = torch.tensor([[0.0, 0.0, 0.0, 4.0, 4.0]], requires_grad=True)
    >>> out = cgt.roi_align(image, boxes, 2, sampling_ratio=2)
    >>> out
    tensor([[[[ 5.0000,  6.7500],
              [12.0000, 13.7500]]]], grad_fn=<RoiAlignBackward>)
    >>> out.sum().backward()
    >>> boxes.grad
    tensor([[0.0000, 1.8750, 7.5000, 1.1250, 4.5000]])
    """
    args = _checks.roi_public(
        input, boxes, output_size, spatial_scale, sampling_ratio, aligned
    )
    return _registration.call_checked("roi_align", args)


def grid_sample(input, grid, mode="bilinear", padding_mode="zeros", align_corners=None):
    """Sample images at the points of a grid: ``torch.nn.functional.grid_sample``
    (4-D), differentiable, exact on every thread count.

    ``torch.nn.functional.grid_sample``'s signature and conventions, and
    its bits (forward, input gradient, grid gradient; float32 and float64,
    as its AVX2 CPU kernel computes them), as `cropgrad.grid_sample`
    computes them, on CPU tensors.  Differentiable with respect to `input`
    (floating dtypes) and `grid` (zero with ``mode="nearest"``), in reverse
    and forward mode.

    Parameters
    ----------
    input : Tensor of shape (N, C, H, W)
        float16, bfloat16, float32, float64 (or an integer dtype, read as
        float32).  float64 is computed in float64, every other dtype in
        float32.  Any memory format: ``channels_last`` is read in place
        where the NHWC kernels are the faster (docs/adapters.md),
        otherwise changed to NCHW once.
        A 5-D (volumetric) input is refused.
    grid : Tensor of shape (N, H_out, W_out, 2)
        ``(x, y)`` per output pixel, normalised to ``[-1, 1]``; any real
        dtype, converted to the arithmetic type (PyTorch asks for the
        input's).  Every value must be finite.
    mode : {"bilinear", "nearest", "bicubic"}, default "bilinear"
    padding_mode : {"zeros", "border", "reflection"}, default "zeros"
    align_corners : bool, optional
        ``-1`` and ``1`` the corner pixels' centres (True) or the image's
        outer edges (False).  None is False, PyTorch's default, without
        PyTorch's warning: it announces a change of default PyTorch made in
        1.3, which cropgrad never had.

    Returns
    -------
    Tensor of shape (N, C, H_out, W_out)
        In the input's dtype (float32 for integers), contiguous, rounded
        once from the arithmetic type.

    Examples
    --------
    >>> import torch
    >>> import cropgrad.torch as cgt
    >>> image = torch.arange(6.0).reshape(1, 1, 2, 3)
    >>> grid = torch.tensor([[[[-1.0, -1.0], [0.5, 0.0]]]], requires_grad=True)
    >>> out = cgt.grid_sample(image, grid, align_corners=True)
    >>> out
    tensor([[[[0., 3.]]]], grad_fn=<GridSampleBackward>)
    >>> out.sum().backward()
    >>> grid.grad
    tensor([[[[1.0000, 1.5000],
              [1.0000, 1.5000]]]])
    """
    if align_corners is None:
        align_corners = False
    return _registration.call("grid_sample", locals())


class RoIAlign(torch.nn.Module):
    """`roi_align` as a module: torchvision's ``RoIAlign``.

    Parameters
    ----------
    output_size : int or (int, int)
        ``(out_height, out_width)`` bins per box.
    spatial_scale : float
        Feature-map pixels per input pixel.
    sampling_ratio : int
        Samples per bin along each axis; 0 or less: adaptive.
    aligned : bool, default False
        Shift the scaled boxes by -0.5 pixel.

    Examples
    --------
    >>> import torch
    >>> import cropgrad.torch as cgt
    >>> pool = cgt.RoIAlign(2, spatial_scale=0.5, sampling_ratio=2)
    >>> pool
    RoIAlign(output_size=2, spatial_scale=0.5, sampling_ratio=2, aligned=False)
    >>> features = torch.arange(16.0).reshape(1, 1, 4, 4)
    >>> pool(features, [torch.tensor([[0.0, 0.0, 8.0, 8.0]])])
    tensor([[[[ 5.0000,  6.7500],
              [12.0000, 13.7500]]]])
    """

    def __init__(self, output_size, spatial_scale, sampling_ratio, aligned=False):
        super().__init__()
        self.output_size = output_size
        self.spatial_scale = spatial_scale
        self.sampling_ratio = sampling_ratio
        self.aligned = aligned

    def forward(self, input, rois):
        """Pool `rois` (a ``Tensor[K, 5]`` or a list of ``Tensor[L, 4]``)
        out of `input`, as `roi_align`."""
        return roi_align(
            input,
            rois,
            self.output_size,
            self.spatial_scale,
            self.sampling_ratio,
            self.aligned,
        )

    def __repr__(self):
        return (
            f"{type(self).__name__}(output_size={self.output_size}, "
            f"spatial_scale={self.spatial_scale}, "
            f"sampling_ratio={self.sampling_ratio}, aligned={self.aligned})"
        )


class MultiScaleRoIAlign(torch.nn.Module):
    """RoIAlign over a feature pyramid: torchvision's ``MultiScaleRoIAlign``.

    Each box is pooled from one level of the pyramid, chosen by its size as
    torchvision chooses it (the feature-pyramid heuristic: a box of
    ``canonical_scale`` pixels squared goes to ``canonical_level``, one
    twice as large a level up), with that level's scale, inferred from the
    feature maps' and the images' heights on the first call and kept.  The
    same levels, scales and bits as torchvision's, differentiable in the
    feature maps and the boxes (the level of a box is piecewise constant in
    it), so that a torchvision Faster R-CNN's ``roi_heads.box_roi_pool``
    can be replaced by it.

    Parameters
    ----------
    featmap_names : list of str
        The feature maps to pool from, finest first.
    output_size : int or (int, int)
        ``(out_height, out_width)`` bins per box.
    sampling_ratio : int
        Samples per bin along each axis; 0 or less: adaptive.
    canonical_scale : int, default 224
    canonical_level : int, default 4

    Examples
    --------
    >>> import torch
    >>> import cropgrad.torch as cgt
    >>> pool = cgt.MultiScaleRoIAlign(["p2", "p3"], output_size=2, sampling_ratio=2)
    >>> features = {
    ...     "p2": torch.rand(1, 8, 16, 16),
    ...     "p3": torch.rand(1, 8, 8, 8),
    ...     "other": torch.rand(1, 8, 4, 4),
    ... }
    >>> boxes = [torch.tensor([[0.0, 0.0, 20.0, 20.0], [0.0, 0.0, 60.0, 60.0]])]
    >>> pool(features, boxes, [(64, 64)]).shape
    torch.Size([2, 8, 2, 2])
    >>> pool.scales
    [0.25, 0.125]
    """

    def __init__(
        self,
        featmap_names,
        output_size,
        sampling_ratio,
        *,
        canonical_scale=224,
        canonical_level=4,
    ):
        super().__init__()
        self.featmap_names = featmap_names
        self.sampling_ratio = sampling_ratio
        self.output_size = _pyramid.output_pair(output_size)
        self.scales = None
        self.levels = None
        self.canonical_scale = canonical_scale
        self.canonical_level = canonical_level

    def forward(self, x, boxes, image_shapes):
        """Pool `boxes` out of the feature maps `x`.

        Parameters
        ----------
        x : dict of str to Tensor of shape (N, C, H_l, W_l)
            The feature maps by name; those of `featmap_names` are used, in
            the order of `x`.
        boxes : list of Tensor of shape (L, 4)
            ``[x1, y1, x2, y2]`` boxes of each image in image coordinates.
        image_shapes : list of (int, int)
            ``(height, width)`` of each image before the backbone.

        Returns
        -------
        Tensor of shape (K, C, out_height, out_width)
            The boxes in order, in the dtype of the first feature map.
        """
        features = [v for k, v in x.items() if k in self.featmap_names]
        if not features:
            raise ValueError(
                f"none of featmap_names {self.featmap_names} is among the "
                f"feature maps given, {list(x)}"
            )
        if self.scales is None or self.levels is None:
            self.scales, self.levels = _pyramid.setup_scales(features, image_shapes)
        return _pyramid.pool(
            features,
            boxes,
            self.output_size,
            self.sampling_ratio,
            self.scales,
            self.levels,
            (self.canonical_scale, self.canonical_level),
        )

    def __repr__(self):
        return (
            f"{type(self).__name__}(featmap_names={self.featmap_names}, "
            f"output_size={self.output_size}, "
            f"sampling_ratio={self.sampling_ratio})"
        )
