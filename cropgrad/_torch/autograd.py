"""The derivatives of the PyTorch ops: one ``torch.autograd.Function`` an op.

Each has a backward (reverse mode), a jvp (forward mode) and a vmap rule
generated from the ops' own, so that torch.func's transforms compose.  Each
rule is made of the ops themselves, through these Functions, so that it can
be differentiated in turn.  The derivatives are:

- crop_and_resize(image, boxes): linear in the image (its JVP is the op on
  the tangent with extrapolation 0, its transpose the image gradient); its
  boxes JVP is crop_and_resize_jvp_boxes, whose transpose is the boxes
  gradient.
- crop_and_resize_grad_image(grads, boxes) = the transpose of the forward
  op: linear in grads (JVP: itself on the tangent; transpose: the forward
  op); since <ct, grad_image(g, b)> = <g, crop(ct, b)>, its boxes gradient
  is grad_boxes(g, ct, b).  Its boxes JVP would need a kernel cropgrad does
  not have.
- crop_and_resize_grad_boxes(grads, image, boxes): linear in grads and in
  the image (JVP: itself on either tangent); its transpose in grads is
  crop_and_resize_jvp_boxes.
- crop_and_resize_jvp_boxes(image, boxes, tangent): linear in the image and
  in the tangent; its transpose in the tangent is the boxes gradient.

What is missing (second derivatives in the boxes, the transposes in the
image of the last two) raises NotImplementedError when it is needed.

RoIAlign's ops (torchvision's boxes ``Tensor[K, 5]``, the image index in
column 0) have the same structure: roi_align is linear in the image (its
transpose roi_align_grad_image) and its boxes JVP roi_align_jvp_boxes has
the transpose roi_align_grad_boxes.  The boxes derivatives are ``[K, 4]``
in the kernels; the image index, piecewise constant, gets a zero column
(`_with_index`), and its tangent is not read.

The Functions take the custom ops' arguments, positionally; the rules name
them through the signature table (`call`, `_saved`, `_gradients`).
"""

import inspect

import torch

from cropgrad._torch import checks

__all__ = []

# The options every op of a family ends with, passed on from one op to
# another.
_OPTIONS = ("method", "data_format", "num_threads", "flush_denormals")
_ROI_OPTIONS = ("spatial_scale", "sampling_ratio", "aligned")
# What replaces each op's tensors in the call a Function keeps on its ctx.
_WITHOUT_TENSORS = {name: dict.fromkeys(names) for name, names in checks.ARRAYS.items()}


def functions():
    """Each op's Function, by the op's name (a Function's ``op``; a subclass
    defined elsewhere, which names no op of its own, is not one)."""
    return {
        function.op: function
        for function in _OpFunction.__subclasses__()
        if "op" in vars(function)
    }


def _flows(tangent):
    """Whether a tangent the jvp rule gets carries anything.

    Forward-mode AD gives a Function zeros for the floating inputs that have
    no tangent (not None), so a derivative cropgrad lacks is refused only
    for a tangent that is not all zero.  The values are read below
    torch.func's wrappers; a tangent mapped by vmap cannot be read and
    counts as one that flows.
    """
    if tangent is None:
        return False
    functorch = torch._C._functorch
    while functorch.is_functorch_wrapped_tensor(tangent):
        if functorch.is_batchedtensor(tangent):
            return True
        tangent = functorch.get_unwrapped(tangent)
    return bool(tangent.any())


def _missing(op, wrt, mode):
    return NotImplementedError(
        f"cropgrad.torch: the {mode} derivative of {op} with respect to {wrt} "
        "is not implemented (cropgrad has no kernel for it)"
    )


def _no_reverse(ctx, op):
    """Refuse the reverse-mode derivatives of `op` in its image and boxes."""
    if _needs(ctx, "image"):
        raise _missing(op, "the image", "reverse-mode")
    if _needs(ctx, "boxes"):
        raise _missing(op, "boxes", "reverse-mode")


class _Shape(tuple):
    """A crop or image size, which the Functions take as one argument.

    torch.func flattens a Function's arguments as pytrees and, in forward
    mode under vmap, then pairs its tangents with the leaves: a list of ints
    would count as several inputs.  A subclass of tuple is a single leaf.
    """

    __slots__ = ()


def apply(function, *args):
    """``function.apply(*args)``, sizes as `_Shape`."""
    return function.apply(
        *(_Shape(a) if isinstance(a, (list, tuple)) else a for a in args)
    )


def call(function, **values):
    """`function` applied to its op's arguments given by name."""
    names = checks.OPS[function.op].call_type("torch")._fields
    return apply(function, *(values[n] for n in names))


def _gradients(ctx, **grads):
    """The backward's result: `grads` by name, None for the other inputs."""
    return tuple(grads.get(n) for n in ctx.call._fields)


def _op_forward(name):
    """A Function's forward: custom op `name`, below autograd."""

    def forward(*args):
        args = [list(a) if isinstance(a, _Shape) else a for a in args]
        with torch._C._AutoDispatchBelowAutograd():
            return getattr(torch.ops.cropgrad, name).default(*args)

    # Function.apply binds its arguments to forward's signature on every
    # call; inspect reads a signature kept on the function instead of
    # working it out each time (some 5 us of a tiny call).
    forward.__signature__ = inspect.signature(forward)
    return staticmethod(forward)


def _saved(ctx):
    """The call `_OpFunction.setup_context` kept, its tensors as saved."""
    call = ctx.call
    return call.replace(**dict(zip(checks.ARRAYS[call._op], ctx.saved_tensors)))


def _needs(ctx, name):
    """Whether the backward must return a gradient for input `name`."""
    return ctx.needs_input_grad[ctx.call._fields.index(name)]


def _crop_size(grads, layout):
    height, width = checks.dims(layout)[1:]
    return [grads.shape[height], grads.shape[width]]


def _sampled(image, boxes, box_ind, crop_size, options):
    """The forward op, linear in `image`: samples outside it are zero."""
    return call(
        Forward,
        image=image,
        boxes=boxes,
        box_ind=box_ind,
        crop_size=crop_size,
        extrapolation_value=0.0,
        **options,
    )


def _boxes_gradient(grads, image, boxes, box_ind, options):
    """The boxes gradient in the boxes' dtype."""
    if options["method"] != "bilinear":
        # Nearest sampling is piecewise constant in the boxes.
        return torch.zeros_like(boxes)
    gradient = call(
        GradBoxes, grads=grads, image=image, boxes=boxes, box_ind=box_ind, **options
    )
    return gradient.to(boxes.dtype)


def _total(parts):
    """The sum of one or two tangents."""
    return parts[0] if len(parts) == 1 else parts[0] + parts[1]


def _linear(function, a, tangents):
    """The JVP of a `function` linear in each of several arguments of call
    `a`: the sum of `function` with each tangent (`tangents`: by name, None
    for none) in place of its primal, or None when no tangent flows."""
    parts = [
        apply(function, *a.replace(**{name: t}))
        for name, t in tangents.items()
        if t is not None
    ]
    return _total(parts) if parts else None


class _OpFunction(torch.autograd.Function):
    """The Function of custom op `op` (a subclass's): its forward is the op,
    below autograd; setup_context keeps the call for the backward and the
    jvp alike.

    Its tensors are saved as autograd saves them; ctx keeps the rest
    (`_saved` puts them together again), the options the derivatives pass
    on and the output's shape.
    """

    generate_vmap_rule = True
    options: tuple[str, ...] = _OPTIONS

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        cls.forward = _op_forward(cls.op)

    @classmethod
    def setup_context(cls, ctx, inputs, output):
        a = checks.bind(cls.op, inputs)
        tensors = [getattr(a, n) for n in checks.ARRAYS[cls.op]]
        ctx.save_for_backward(*tensors)
        ctx.save_for_forward(*tensors)
        ctx.call = a.replace(**_WITHOUT_TENSORS[cls.op])
        ctx.options = {n: getattr(a, n) for n in cls.options}
        ctx.out_shape = output.shape
        ctx.out_dtype = output.dtype


class Forward(_OpFunction):
    op = "crop_and_resize"

    @staticmethod
    def backward(ctx, grad):
        a = _saved(ctx)
        d_image = d_boxes = None
        if _needs(ctx, "image"):
            d_image = call(
                GradImage,
                grads=grad,
                boxes=a.boxes,
                box_ind=a.box_ind,
                image_size=list(a.image.shape),
                dtype=a.image.dtype,
                **ctx.options,
            )
        if _needs(ctx, "boxes"):
            d_boxes = _boxes_gradient(grad, a.image, a.boxes, a.box_ind, ctx.options)
        return _gradients(ctx, image=d_image, boxes=d_boxes)

    @staticmethod
    def jvp(ctx, image_t, boxes_t, *_):
        a = _saved(ctx)
        crop_size = list(a.crop_size)
        parts = []
        if image_t is not None:
            parts.append(_sampled(image_t, a.boxes, a.box_ind, crop_size, ctx.options))
        if boxes_t is not None and ctx.options["method"] == "bilinear":
            parts.append(
                call(
                    JvpBoxes,
                    image=a.image,
                    boxes=a.boxes,
                    box_ind=a.box_ind,
                    boxes_tangent=boxes_t,
                    crop_size=crop_size,
                    **ctx.options,
                )
            )
        if not parts:  # nearest sampling, boxes only: piecewise constant
            return torch.zeros(ctx.out_shape, dtype=torch.float32)
        return _total(parts)


class GradImage(_OpFunction):
    op = "crop_and_resize_grad_image"

    @staticmethod
    def backward(ctx, ct):
        a = _saved(ctx)
        crop_size = _crop_size(a.grads, a.data_format)
        d_grads = d_boxes = None
        if _needs(ctx, "grads"):
            # The transpose samples outside the image as zero.
            d_grads = _sampled(ct, a.boxes, a.box_ind, crop_size, ctx.options)
            d_grads = d_grads.to(a.grads.dtype)
        if _needs(ctx, "boxes"):
            d_boxes = _boxes_gradient(a.grads, ct, a.boxes, a.box_ind, ctx.options)
        return _gradients(ctx, grads=d_grads, boxes=d_boxes)

    @staticmethod
    def jvp(ctx, grads_t, boxes_t, *_):
        if ctx.options["method"] == "bilinear" and _flows(boxes_t):
            raise _missing(GradImage.op, "boxes", "forward-mode")
        if grads_t is None:
            return torch.zeros(ctx.out_shape, dtype=ctx.call.dtype)
        return apply(GradImage, *_saved(ctx).replace(grads=grads_t))


class GradBoxes(_OpFunction):
    op = "crop_and_resize_grad_boxes"

    @staticmethod
    def backward(ctx, ct):
        _no_reverse(ctx, GradBoxes.op)
        a = _saved(ctx)
        d_grads = None
        if _needs(ctx, "grads"):
            d_grads = call(
                JvpBoxes,
                image=a.image,
                boxes=a.boxes,
                box_ind=a.box_ind,
                boxes_tangent=ct,
                crop_size=_crop_size(a.grads, a.data_format),
                **ctx.options,
            ).to(a.grads.dtype)
        return _gradients(ctx, grads=d_grads)

    @staticmethod
    def jvp(ctx, grads_t, image_t, boxes_t, *_):
        if _flows(boxes_t):
            raise _missing(GradBoxes.op, "boxes", "forward-mode")
        total = _linear(GradBoxes, _saved(ctx), {"grads": grads_t, "image": image_t})
        return torch.zeros(ctx.out_shape) if total is None else total


class JvpBoxes(_OpFunction):
    op = "crop_and_resize_jvp_boxes"

    @staticmethod
    def backward(ctx, ct):
        _no_reverse(ctx, JvpBoxes.op)
        a = _saved(ctx)
        d_tangent = None
        if _needs(ctx, "boxes_tangent"):
            d_tangent = call(
                GradBoxes,
                grads=ct,
                image=a.image,
                boxes=a.boxes,
                box_ind=a.box_ind,
                **ctx.options,
            ).to(a.boxes_tangent.dtype)
        return _gradients(ctx, boxes_tangent=d_tangent)

    @staticmethod
    def jvp(ctx, image_t, boxes_t, _, tangent_t, *__):
        if _flows(boxes_t):
            raise _missing(JvpBoxes.op, "boxes", "forward-mode")
        tangents = {"image": image_t, "boxes_tangent": tangent_t}
        return _linear(JvpBoxes, _saved(ctx), tangents)


# --------------------------------------------------------------------------
# RoIAlign


def _with_index(gradient, boxes):
    """A boxes gradient ``[K, 4]`` as one of torchvision's boxes ``[K, 5]``
    (zero for the image index), in the boxes' dtype."""
    return torch.nn.functional.pad(gradient, (1, 0)).to(boxes.dtype)


def _output_size(grads):
    return [grads.shape[2], grads.shape[3]]


class RoiAlign(_OpFunction):
    op = "roi_align"
    options = _ROI_OPTIONS

    @staticmethod
    def backward(ctx, grad):
        a = _saved(ctx)
        d_image = d_boxes = None
        if _needs(ctx, "image"):
            d_image = call(
                RoiGradImage,
                grads=grad.to(ctx.out_dtype),
                boxes=a.boxes,
                image_size=list(a.image.shape),
                **ctx.options,
            ).to(a.image.dtype)
        if _needs(ctx, "boxes"):
            gradient = call(
                RoiGradBoxes, grads=grad, image=a.image, boxes=a.boxes, **ctx.options
            )
            d_boxes = _with_index(gradient, a.boxes)
        return _gradients(ctx, image=d_image, boxes=d_boxes)

    @staticmethod
    def jvp(ctx, image_t, boxes_t, *_):
        a = _saved(ctx)
        output_size = list(a.output_size)
        parts = []
        if image_t is not None:
            # Linear in the image: samples outside it are zero.
            parts.append(apply(RoiAlign, *a.replace(image=image_t)))
        if boxes_t is not None:
            parts.append(
                call(
                    RoiJvpBoxes,
                    image=a.image,
                    boxes=a.boxes,
                    boxes_tangent=boxes_t,
                    output_size=output_size,
                    **ctx.options,
                )
            )
        if not parts:
            return torch.zeros(ctx.out_shape, dtype=ctx.out_dtype)
        return _total(parts).to(ctx.out_dtype)


class RoiGradImage(_OpFunction):
    op = "roi_align_grad_image"
    options = _ROI_OPTIONS

    @staticmethod
    def backward(ctx, ct):
        a = _saved(ctx)
        d_grads = d_boxes = None
        if _needs(ctx, "grads"):
            d_grads = call(
                RoiAlign,
                image=ct,
                boxes=a.boxes,
                output_size=_output_size(a.grads),
                **ctx.options,
            ).to(a.grads.dtype)
        if _needs(ctx, "boxes"):
            # <ct, grad_image(g, b)> = <g, roi_align(ct, b)>
            gradient = call(
                RoiGradBoxes, grads=a.grads, image=ct, boxes=a.boxes, **ctx.options
            )
            d_boxes = _with_index(gradient, a.boxes)
        return _gradients(ctx, grads=d_grads, boxes=d_boxes)

    @staticmethod
    def jvp(ctx, grads_t, boxes_t, *_):
        if _flows(boxes_t):
            raise _missing(RoiGradImage.op, "boxes", "forward-mode")
        if grads_t is None:
            return torch.zeros(ctx.out_shape, dtype=ctx.out_dtype)
        return apply(RoiGradImage, *_saved(ctx).replace(grads=grads_t))


class RoiGradBoxes(_OpFunction):
    op = "roi_align_grad_boxes"
    options = _ROI_OPTIONS

    @staticmethod
    def backward(ctx, ct):
        _no_reverse(ctx, RoiGradBoxes.op)
        a = _saved(ctx)
        d_grads = None
        if _needs(ctx, "grads"):
            d_grads = call(
                RoiJvpBoxes,
                image=a.image,
                boxes=a.boxes,
                boxes_tangent=_with_index(ct, a.boxes),
                output_size=_output_size(a.grads),
                **ctx.options,
            ).to(a.grads.dtype)
        return _gradients(ctx, grads=d_grads)

    @staticmethod
    def jvp(ctx, grads_t, image_t, boxes_t, *_):
        if _flows(boxes_t):
            raise _missing(RoiGradBoxes.op, "boxes", "forward-mode")
        tangents = {"grads": grads_t, "image": image_t}
        total = _linear(RoiGradBoxes, _saved(ctx), tangents)
        if total is None:
            return torch.zeros(ctx.out_shape, dtype=ctx.out_dtype)
        return total


class RoiJvpBoxes(_OpFunction):
    op = "roi_align_jvp_boxes"
    options = _ROI_OPTIONS

    @staticmethod
    def backward(ctx, ct):
        _no_reverse(ctx, RoiJvpBoxes.op)
        a = _saved(ctx)
        d_tangent = None
        if _needs(ctx, "boxes_tangent"):
            gradient = call(
                RoiGradBoxes, grads=ct, image=a.image, boxes=a.boxes, **ctx.options
            )
            d_tangent = _with_index(gradient, a.boxes_tangent)
        return _gradients(ctx, boxes_tangent=d_tangent)

    @staticmethod
    def jvp(ctx, image_t, boxes_t, tangent_t, *_):
        if _flows(boxes_t):
            raise _missing(RoiJvpBoxes.op, "boxes", "forward-mode")
        tangents = {"image": image_t, "boxes_tangent": tangent_t}
        return _linear(RoiJvpBoxes, _saved(ctx), tangents)
