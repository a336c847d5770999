"""cropgrad.torch: every op x every input to differentiate x every transformation
x both layouts, against the NumPy API.

The matrix: the three public ops of crop_and_resize (crop_and_resize with
respect to the image, the boxes and both; crop_and_resize_grad_image with
respect to grads, the boxes and both; crop_and_resize_grad_boxes with
respect to grads, and in forward mode grads, the image and both) in
{NCHW, NHWC}, and RoIAlign (roi_align with respect to the input, the boxes'
coordinates and both; torchvision's boxes Tensor[K, 5]) in {contiguous,
channels_last} memory, in four option sets that take every pair of values
of spatial_scale {1, 0.5}, sampling_ratio {-1, 2} and aligned {False,
True} -- each x {eager autograd, torch.compile, torch.export's program,
torch.func.grad / vjp / jacrev, torch.func.jvp / jacfwd, torch.func.vmap}.
Reverse-mode results are compared with the NumPy API's bits on the same
arrays (cropgrad.crop_and_resize*, cropgrad.roi_align*), and so are
forward-mode ones: the jvp rules call the same kernels (the forward op on
an image's tangent, the boxes JVP on the boxes', an op linear in an input
on its tangent) and add the parts in float32, in the order the rule adds
them.  RoIAlign's image index gets a zero derivative, and its results come
back in the input's memory format.  The derivatives cropgrad has no kernel
for must raise: for RoIAlign, second derivatives of its boxes derivatives
in the boxes (and of the boxes gradient in the input); the one second
derivative it has a kernel for, the input gradient's in the boxes, gives
the NumPy API's bits.

The whole matrix runs in one process three times, in order, reversed and
shuffled, so that nothing one call leaves behind (a compiled graph, a cached
rule, a saved context) changes another's result.

Skipped when PyTorch is not installed, unless CROPGRAD_REQUIRE_ADAPTERS=1.
"""

import itertools
import random

import numpy as np
import pytest
from _helpers import assert_same_bits, required, unrequired

import cropgrad

try:
    import torch
except ImportError:
    if required("CROPGRAD_REQUIRE_ADAPTERS"):
        raise
    torch = None
else:
    import cropgrad.torch as cgt

pytestmark = [
    pytest.mark.skipif(torch is None, reason=unrequired("PyTorch is not installed")),
]

LAYOUTS = ("NCHW", "NHWC")
CROP = (2, 3)
BATCH, HEIGHT, WIDTH, DEPTH, NUM_BOXES = 2, 5, 4, 2, 3


# --------------------------------------------------------------------------
# Arrays (NHWC NumPy) and tensors in a layout


def arrays(seed):
    rng = np.random.default_rng(seed)
    return {
        "image": rng.standard_normal((BATCH, HEIGHT, WIDTH, DEPTH)).astype(np.float32),
        "grads": rng.standard_normal((NUM_BOXES, *CROP, DEPTH)).astype(np.float32),
        # Some boxes reach outside the image, one is flipped.
        "boxes": np.array(
            [[0.1, 0.2, 0.8, 0.9], [-0.2, 0.3, 0.6, 1.2], [0.9, 0.7, 0.2, 0.1]],
            dtype=np.float32,
        )
        + rng.uniform(-0.05, 0.05, (NUM_BOXES, 4)).astype(np.float32),
        "box_ind": np.array([1, 0, 1], dtype=np.int64),
    }


def to_torch(a, layout):
    t = torch.from_numpy(np.ascontiguousarray(a))
    if a.ndim == 4 and layout == "NCHW":
        t = t.permute(0, 3, 1, 2).contiguous()
    return t


def to_nhwc(t, layout):
    t = t.detach()
    if t.dim() == 4 and layout == "NCHW":
        t = t.permute(0, 2, 3, 1)
    return np.ascontiguousarray(t.numpy())


def image_size(layout):
    if layout == "NCHW":
        return [BATCH, DEPTH, HEIGHT, WIDTH]
    return [BATCH, HEIGHT, WIDTH, DEPTH]


class Family:
    """What the ops of one family share: the layouts of the matrix, their
    arrays as the NumPy API takes them, the conversions between those and
    tensors in a layout, the arrays every problem of a vmap shares (not
    mapped), how vmap's inputs are stacked, and the memory format results
    in a layout must come back in (None: not checked)."""

    def __init__(
        self, layouts, arrays, to_torch, to_numpy, shared, stack, memory_format
    ):
        self.layouts = layouts
        self.arrays = arrays
        self.to_torch = to_torch
        self.to_numpy = to_numpy
        self.shared = shared
        self.stack = stack
        self.memory_format = memory_format


CROP_AND_RESIZE = Family(
    LAYOUTS,
    arrays,
    to_torch,
    to_nhwc,
    shared=("box_ind",),
    stack=lambda tensors, layout: torch.stack(tensors),
    # NHWC is a layout of its own here, not a memory format of NCHW.
    memory_format=lambda layout: None,
)


# --------------------------------------------------------------------------
# The ops: what each takes, the public call, and the NumPy API's result and
# reverse-mode derivatives (vjp) on the same arrays.


class Op:
    def __init__(
        self,
        name,
        inputs,
        call,
        reference,
        vjp,
        reverse,
        forward,
        jvp,
        linear=None,
        family=None,
        target=None,
    ):
        self.name = name
        self.family = family or CROP_AND_RESIZE
        # The custom op torch.export's program must call.
        self.target = target or name
        # (NHWC arrays, {input: NHWC tangent}) -> NHWC output tangent: the
        # kernels the op's jvp rule calls, its parts added in its order.
        self.jvp = jvp
        # For an input with no reverse-mode derivative the op is linear in:
        # (NHWC arrays, NHWC input) -> NHWC output, the Jacobian's columns.
        self.linear = linear or {}
        self.inputs = inputs  # differentiable inputs, in call order
        self.call = call  # (tensors, layout) -> output
        self.reference = reference  # NHWC arrays -> NHWC output
        self.vjp = vjp  # (NHWC arrays, NHWC cotangent) -> {input: NHWC array}
        self.reverse = reverse  # inputs with a reverse-mode derivative
        self.forward = forward  # inputs with a forward-mode derivative


def _forward_call(t, layout):
    return cgt.crop_and_resize(
        t["image"], t["boxes"], t["box_ind"], CROP, data_format=layout
    )


def _forward_vjp(a, w):
    return {
        "image": cropgrad.crop_and_resize_grad_image(
            w, a["boxes"], a["box_ind"], a["image"].shape
        ),
        "boxes": cropgrad.crop_and_resize_grad_boxes(
            w, a["image"], a["boxes"], a["box_ind"]
        ),
    }


def _sum(parts):
    """The parts of a jvp rule added as it adds them: float32, in order."""
    total = parts[0]
    for part in parts[1:]:
        total = total + part
    return total


def _forward_jvp(a, t):
    parts = []
    if "image" in t:  # the forward op is linear in the image, zero outside
        parts.append(
            cropgrad.crop_and_resize(
                t["image"], a["boxes"], a["box_ind"], CROP, extrapolation_value=0.0
            )
        )
    if "boxes" in t:
        parts.append(
            cropgrad.crop_and_resize_jvp_boxes(
                a["image"], a["boxes"], a["box_ind"], t["boxes"], CROP
            )
        )
    return _sum(parts)


def _grad_image_jvp(a, t):
    return cropgrad.crop_and_resize_grad_image(
        t["grads"], a["boxes"], a["box_ind"], a["image"].shape
    )


def _grad_boxes_jvp(a, t):
    # Linear in grads and in the image.
    parts = []
    if "grads" in t:
        parts.append(
            cropgrad.crop_and_resize_grad_boxes(
                t["grads"], a["image"], a["boxes"], a["box_ind"]
            )
        )
    if "image" in t:
        parts.append(
            cropgrad.crop_and_resize_grad_boxes(
                a["grads"], t["image"], a["boxes"], a["box_ind"]
            )
        )
    return _sum(parts)


def _grad_image_call(t, layout):
    return cgt.crop_and_resize_grad_image(
        t["grads"], t["boxes"], t["box_ind"], image_size(layout), data_format=layout
    )


def _grad_image_vjp(a, c):
    # <c, grad_image(g, b)> = <g, crop(c, b)>: its transpose is the forward
    # op (zero outside the image) and its boxes gradient grad_boxes(g, c, b).
    return {
        "grads": cropgrad.crop_and_resize(c, a["boxes"], a["box_ind"], CROP),
        "boxes": cropgrad.crop_and_resize_grad_boxes(
            a["grads"], c, a["boxes"], a["box_ind"]
        ),
    }


def _grad_boxes_call(t, layout):
    return cgt.crop_and_resize_grad_boxes(
        t["grads"], t["image"], t["boxes"], t["box_ind"], data_format=layout
    )


def _grad_boxes_vjp(a, c):
    # <c, grad_boxes(g, x, b)> = <g, jvp_boxes(x, b, c)>.
    return {
        "grads": cropgrad.crop_and_resize_jvp_boxes(
            a["image"], a["boxes"], a["box_ind"], c, CROP
        )
    }


OPS = {
    op.name: op
    for op in (
        Op(
            "crop_and_resize",
            ("image", "boxes"),
            _forward_call,
            lambda a: cropgrad.crop_and_resize(
                a["image"], a["boxes"], a["box_ind"], CROP
            ),
            _forward_vjp,
            reverse=("image", "boxes"),
            forward=("image", "boxes"),
            jvp=_forward_jvp,
        ),
        Op(
            "crop_and_resize_grad_image",
            ("grads", "boxes"),
            _grad_image_call,
            lambda a: cropgrad.crop_and_resize_grad_image(
                a["grads"], a["boxes"], a["box_ind"], a["image"].shape
            ),
            _grad_image_vjp,
            reverse=("grads", "boxes"),
            forward=("grads",),
            jvp=_grad_image_jvp,
        ),
        Op(
            "crop_and_resize_grad_boxes",
            ("grads", "image", "boxes"),
            _grad_boxes_call,
            lambda a: cropgrad.crop_and_resize_grad_boxes(
                a["grads"], a["image"], a["boxes"], a["box_ind"]
            ),
            _grad_boxes_vjp,
            reverse=("grads",),
            forward=("grads", "image"),
            jvp=_grad_boxes_jvp,
            linear={
                "image": lambda a, x: cropgrad.crop_and_resize_grad_boxes(
                    a["grads"], x, a["boxes"], a["box_ind"]
                )
            },
        ),
    )
}


# --------------------------------------------------------------------------
# RoIAlign: torchvision's NCHW input, read in place in either memory format;
# the NumPy API computes on the same NCHW arrays (its default data_format).

ROI_LAYOUTS = ("contiguous", "channels_last")
ROI_SIZE = (2, 3)
ROI_BATCH, ROI_DEPTH, ROI_HEIGHT, ROI_WIDTH = 2, 2, 5, 6
# The options as an orthogonal array: every value of spatial_scale,
# sampling_ratio (-1: adaptive, per box) and aligned meets every value of
# the others (test_roi_options_meet_pairwise), in 4 option sets instead of 8.
ROI_OPTIONS = ((1.0, -1, False), (1.0, 2, True), (0.5, -1, True), (0.5, 2, False))


def roi_arrays(seed):
    rng = np.random.default_rng(seed)
    # torchvision's boxes: [image index, x1, y1, x2, y2] in the input's
    # pixels.  One inside, one reaching outside the map, one smaller than a
    # pixel (torchvision widens it to one unless aligned), one flipped.
    boxes = np.array(
        [
            [1, 0.6, 1.2, 4.3, 3.9],
            [0, -1.4, 0.7, 5.2, 6.1],
            [1, 2.2, 1.9, 2.6, 2.3],
            [0, 4.1, 3.3, 1.2, 0.4],
        ]
    )
    boxes[:, 1:] += rng.uniform(-0.1, 0.1, (len(boxes), 4))
    shape = (ROI_BATCH, ROI_DEPTH, ROI_HEIGHT, ROI_WIDTH)
    return {
        "image": rng.standard_normal(shape).astype(np.float32),
        "boxes": boxes.astype(np.float32),
    }


def roi_to_torch(a, layout):
    t = torch.from_numpy(np.ascontiguousarray(a))
    if t.dim() == 4 and layout == "channels_last":
        t = t.contiguous(memory_format=torch.channels_last)
    return t


def roi_to_numpy(t, layout):
    # NCHW in either memory format: the NumPy API's array is its values.
    return t.detach().contiguous().numpy()


def roi_stack(tensors, layout):
    if tensors[0].dim() == 4 and layout == "channels_last":
        # Each problem's slice of the stack stays in channels_last memory,
        # so that vmap hands the op what the layout promises.
        nhwc = torch.stack([t.permute(0, 2, 3, 1) for t in tensors])
        return nhwc.permute(0, 1, 4, 2, 3)
    return torch.stack(tensors)


ROI_ALIGN = Family(
    ROI_LAYOUTS,
    roi_arrays,
    roi_to_torch,
    roi_to_numpy,
    # The image index is a column of the boxes: every input is mapped.
    shared=(),
    stack=roi_stack,
    memory_format=lambda layout: (
        torch.channels_last if layout == "channels_last" else torch.contiguous_format
    ),
)


def _split(a):
    """torchvision's boxes as the NumPy API's boxes and image indices."""
    return a["boxes"][:, 1:], a["boxes"][:, 0].astype(np.int64)


def _with_index(gradient):
    """A gradient in the NumPy API's boxes [K, 4] as one in torchvision's
    [K, 5]: the image index is piecewise constant, its derivative +0."""
    return np.pad(gradient, ((0, 0), (1, 0)))


def roi_op(spatial_scale, sampling_ratio, aligned):
    options = dict(
        spatial_scale=spatial_scale, sampling_ratio=sampling_ratio, aligned=aligned
    )

    def call(t, layout):
        return cgt.roi_align(
            t["image"], t["boxes"], ROI_SIZE, spatial_scale, sampling_ratio, aligned
        )

    def reference(a):
        boxes, box_ind = _split(a)
        return cropgrad.roi_align(a["image"], boxes, box_ind, ROI_SIZE, **options)

    def vjp(a, c):
        boxes, box_ind = _split(a)
        return {
            "image": cropgrad.roi_align_grad_image(
                c, boxes, box_ind, a["image"].shape, **options
            ),
            "boxes": _with_index(
                cropgrad.roi_align_grad_boxes(c, a["image"], boxes, box_ind, **options)
            ),
        }

    def jvp(a, t):
        # The rule's parts: the op on the image's tangent (linear in the
        # image), the boxes JVP on the coordinates' (the index's is not
        # read), added in float32 in this order.
        boxes, box_ind = _split(a)
        parts = []
        if "image" in t:
            parts.append(
                cropgrad.roi_align(t["image"], boxes, box_ind, ROI_SIZE, **options)
            )
        if "boxes" in t:
            parts.append(
                cropgrad.roi_align_jvp_boxes(
                    a["image"], boxes, box_ind, t["boxes"][:, 1:], ROI_SIZE, **options
                )
            )
        return _sum(parts)

    return Op(
        f"roi_align{(spatial_scale, sampling_ratio, aligned)}",
        ("image", "boxes"),
        call,
        reference,
        vjp,
        reverse=("image", "boxes"),
        forward=("image", "boxes"),
        jvp=jvp,
        family=ROI_ALIGN,
        target="roi_align",
    )


ROI_OPS = {op.name: op for op in (roi_op(*options) for options in ROI_OPTIONS)}
OPS.update(ROI_OPS)


def subsets(names):
    """Each name alone, then all of them together (when more than one)."""
    out = [(n,) for n in names]
    if len(names) > 1:
        out.append(tuple(names))
    return out


# --------------------------------------------------------------------------
# A problem: arrays, tensors, the reference output and Jacobians


class Problem:
    def __init__(self, op, layout, seed=0):
        self.op, self.layout = op, layout
        self.family = op.family
        self.a = self.family.arrays(seed)
        self.out = op.reference(self.a)
        self.cotangent = (
            np.random.default_rng(seed + 100)
            .standard_normal(self.out.shape)
            .astype(np.float32)
        )

    def to_torch(self, a):
        return self.family.to_torch(a, self.layout)

    def to_numpy(self, t):
        return self.family.to_numpy(t, self.layout)

    def tensors(self, requires=()):
        t = {k: self.to_torch(v) for k, v in self.a.items()}
        for name in requires:
            t[name].requires_grad_()
        return t

    def w(self):
        return self.to_torch(self.cotangent)

    def expected_vjp(self, name, cotangent=None):
        c = self.cotangent if cotangent is None else cotangent
        return self.op.vjp(self.a, c)[name]

    def jacobian(self, name):
        """The NumPy API's Jacobian [output elements, input elements], both in
        the caller's layout, one vjp per output element."""
        out_layout = self.to_torch(self.out)
        if name in self.op.linear:
            x = self.to_torch(self.a[name])
            columns = []
            for k in range(x.numel()):
                basis = torch.zeros(x.numel())
                basis[k] = 1
                c = self.to_numpy(basis.reshape(x.shape))
                column = self.op.linear[name](self.a, c)
                columns.append(self.to_torch(column).reshape(-1))
            return torch.stack(columns, dim=1)
        rows = []
        for k in range(out_layout.numel()):
            basis = torch.zeros(out_layout.numel())
            basis[k] = 1
            c = self.to_numpy(basis.reshape(out_layout.shape))
            rows.append(self.to_torch(self.expected_vjp(name, c)).reshape(-1))
        return torch.stack(rows)

    def expected_jvp(self, tangents):
        """The output tangent for {input: tangent in the caller's layout}, in
        the caller's layout (the NumPy API's bits).  PyTorch's forward mode
        hands on the rule's -0.0 as +0.0, as if added to a zero tangent
        (measured: torch.func.jvp and jacfwd alike, every other bit kept)."""
        t = {name: self.to_numpy(v) for name, v in tangents.items()}
        return self.to_torch(self.op.jvp(self.a, t) + np.float32(0.0))

    def forward_jacobian(self, names, name):
        """What jacfwd over `names` gives for `name`: one jvp per element of
        `name`, the other inputs' tangents zero (as jacfwd pushes them)."""
        zeros = {n: torch.zeros_like(self.to_torch(self.a[n])) for n in names}
        x = zeros[name]
        columns = []
        for k in range(x.numel()):
            basis = torch.zeros(x.numel())
            basis[k] = 1
            tangents = {**zeros, name: basis.reshape(x.shape)}
            columns.append(self.expected_jvp(tangents).reshape(-1))
        return torch.stack(columns, dim=1)

    def check_memory_format(self, t):
        memory_format = self.family.memory_format(self.layout)
        if memory_format is not None and t.dim() == 4:
            assert t.is_contiguous(memory_format=memory_format), (
                f"{tuple(t.shape)} strides {t.stride()}, not {memory_format}"
            )

    def check_out(self, out, memory_format=True):
        """The NumPy API's bits; in the layout's memory format unless
        `memory_format` is false (vmap's results are slices of a batch)."""
        if memory_format:
            self.check_memory_format(out)
        assert_same_bits(self.to_numpy(out), self.out)

    def check_grads(self, names, grads, memory_format=True):
        for name, g in zip(names, grads):
            if memory_format:
                self.check_memory_format(g)
            assert_same_bits(self.to_numpy(g), self.expected_vjp(name))


def functional(p, names):
    """The op as a function of the inputs `names` (the others fixed)."""
    fixed = p.tensors()

    def f(*values):
        return p.op.call({**fixed, **dict(zip(names, values))}, p.layout)

    return f, [fixed[n] for n in names]


# --------------------------------------------------------------------------
# The transformations: each runs one (op, layout, inputs) cell and checks it


def eager(p, names):
    t = p.tensors(names)
    out = p.op.call(t, p.layout)
    p.check_out(out)
    p.check_grads(names, torch.autograd.grad(out, [t[n] for n in names], p.w()))


_COMPILED = {}


def compiled(p, names):
    key = (p.op.name, p.layout)
    if key not in _COMPILED:
        _COMPILED[key] = torch.compile(
            lambda t, layout=p.layout, call=p.op.call: call(t, layout),
            fullgraph=True,
        )
    t = p.tensors(names)
    # One lambda compiled for every op, layout and set of inputs requiring
    # grad: each is a graph of its own, one per compile cell (14 for
    # crop_and_resize, 24 for RoIAlign's option sets).  The limit is that
    # count: a graph compiled again would exceed it and warn.
    with torch._dynamo.config.patch(recompile_limit=COMPILED_GRAPHS):
        out = _COMPILED[key](t)
    p.check_out(out)
    p.check_grads(names, torch.autograd.grad(out, [t[n] for n in names], p.w()))


class _Module(torch.nn.Module if torch is not None else object):
    def __init__(self, op, layout, keys):
        super().__init__()
        self.op, self.layout, self.keys = op, layout, keys

    def forward(self, *values):
        return self.op.call(dict(zip(self.keys, values)), self.layout)


_EXPORTED = {}


def exported(p, names):
    key = (p.op.name, p.layout)
    keys = sorted(p.a)
    if key not in _EXPORTED:
        t = p.tensors()
        program = torch.export.export(
            _Module(p.op, p.layout, keys), tuple(t[k] for k in keys)
        )
        # The program calls the custom ops themselves.
        targets = {str(n.target) for n in program.graph.nodes}
        assert f"cropgrad.{p.op.target}.default" in targets, targets
        _EXPORTED[key] = program.module()
    t = p.tensors(names)
    out = _EXPORTED[key](*(t[k] for k in keys))
    p.check_out(out)
    p.check_grads(names, torch.autograd.grad(out, [t[n] for n in names], p.w()))


def func_reverse(p, names):
    f, primals = functional(p, names)
    w = p.w()
    out, vjp_fn = torch.func.vjp(f, *primals)
    p.check_out(out)
    p.check_grads(names, vjp_fn(w))
    argnums = tuple(range(len(names)))
    grads = torch.func.grad(lambda *v: (f(*v) * w).sum(), argnums)(*primals)
    p.check_grads(names, grads)
    jacobians = torch.func.jacrev(f, argnums)(*primals)
    for name, jac in zip(names, jacobians):
        assert_same_bits(jac.reshape(out.numel(), -1).numpy(), p.jacobian(name).numpy())


def func_forward(p, names):
    f, primals = functional(p, names)
    rng = np.random.default_rng(7)
    # Each tangent in its primal's memory format.
    tangents = [
        torch.empty_like(x).copy_(
            torch.from_numpy(rng.standard_normal(x.shape).astype(np.float32))
        )
        for x in primals
    ]
    out, tangent_out = torch.func.jvp(f, tuple(primals), tuple(tangents))
    p.check_out(out)
    expected = p.expected_jvp(dict(zip(names, tangents)))
    assert_same_bits(tangent_out.numpy(), expected.numpy())
    jacobians = torch.func.jacfwd(f, tuple(range(len(names))))(*primals)
    for name, jac in zip(names, jacobians):
        assert_same_bits(
            jac.reshape(out.numel(), -1).numpy(),
            p.forward_jacobian(names, name).numpy(),
        )
    # The same derivative as reverse mode's, rounded in another order.
    for name, jac in zip(names, jacobians):
        torch.testing.assert_close(
            jac.reshape(out.numel(), -1), p.jacobian(name), rtol=0, atol=1e-5
        )


def vmapped(p, names):
    """vmap over 3 problems (each its own data), of the op and of its vjp:
    each problem's result is the NumPy API's on that problem alone."""
    problems = [Problem(p.op, p.layout, seed) for seed in (11, 12, 13)]
    family = p.op.family
    keys = sorted(p.a)
    # The family's shared arrays (crop_and_resize's box_ind) are the first
    # problem's for all three, not mapped.
    for q in problems[1:]:
        for k in family.shared:
            q.a[k] = problems[0].a[k]
        q.out = q.op.reference(q.a)
    tensors = [q.tensors() for q in problems]
    mapped = {k: None if k in family.shared else 0 for k in keys}
    values = {}
    for k in keys:
        if mapped[k] is None:
            values[k] = tensors[0][k]
        else:
            values[k] = family.stack([t[k] for t in tensors], p.layout)
    # The mapped axis of the first input in `names` is its last one, to
    # exercise a mapped axis that is not first.
    first = names[0]
    values[first] = values[first].movedim(0, -1)
    mapped[first] = values[first].dim() - 1
    values = [values[k] for k in keys]
    in_dims = tuple(mapped[k] for k in keys)

    def one(*vals):
        return p.op.call(dict(zip(keys, vals)), p.layout)

    outs = torch.func.vmap(one, in_dims=in_dims)(*values)
    for q, out in zip(problems, outs):
        q.check_out(out, memory_format=False)

    def one_vjp(w, *vals):
        t = dict(zip(keys, vals))

        def f(*v):
            return p.op.call({**t, **dict(zip(names, v))}, p.layout)

        return torch.func.vjp(f, *(t[n] for n in names))[1](w)

    ws = family.stack([q.w() for q in problems], p.layout)
    grads = torch.func.vmap(one_vjp, in_dims=(0, *in_dims))(ws, *values)
    for k, q in enumerate(problems):
        q.check_grads(names, [g[k] for g in grads], memory_format=False)


REVERSE = {
    "eager": eager,
    "compile": compiled,
    "export": exported,
    "func.grad/vjp/jacrev": func_reverse,
    "vmap": vmapped,
}
FORWARD = {"func.jvp/jacfwd": func_forward}


def cells():
    """Every (op, transformation, layout, inputs) of the matrix, in order."""
    out = []
    for op in OPS.values():
        for layout in op.family.layouts:
            for mode, check in REVERSE.items():
                for names in subsets(op.reverse):
                    out.append((op.name, mode, layout, names, check))
            for mode, check in FORWARD.items():
                for names in subsets(op.forward):
                    out.append((op.name, mode, layout, names, check))
    return out


CELLS = cells() if torch is not None else []
COMPILED_GRAPHS = sum(cell[1] == "compile" for cell in CELLS)
# The derivatives cropgrad has no kernel for: (op, mode, inputs, words).
MISSING = [
    ("crop_and_resize_grad_image", "forward", ("boxes",), "with respect to boxes"),
    ("crop_and_resize_grad_boxes", "reverse", ("image",), "with respect to the image"),
    ("crop_and_resize_grad_boxes", "reverse", ("boxes",), "with respect to boxes"),
    ("crop_and_resize_grad_boxes", "forward", ("boxes",), "with respect to boxes"),
]


def run(cell):
    name, mode, layout, names, check = cell
    try:
        check(Problem(OPS[name], layout), names)
    except AssertionError as exc:
        raise AssertionError(f"{name} / {mode} / {layout} / {names}: {exc}") from None


def test_matrix_dimensions():
    ops = {c[0] for c in CELLS}
    modes = {c[1] for c in CELLS}
    layouts = {c[2] for c in CELLS}
    assert ops == set(OPS) and layouts == set(LAYOUTS) | set(ROI_LAYOUTS)
    assert modes == set(REVERSE) | set(FORWARD)
    for op in OPS.values():
        assert {c[2] for c in CELLS if c[0] == op.name} == set(op.family.layouts)
    # crop_and_resize's 3 ops: (3 + 3 + 1) reverse input sets x 5 +
    # (3 + 1 + 3) forward x 1, in 2 layouts.
    assert sum(OPS[c[0]].family is CROP_AND_RESIZE for c in CELLS) == 2 * (7 * 5 + 7)
    # RoIAlign's 4 option sets: 3 reverse input sets x 5 + 3 forward x 1, in
    # 2 memory formats.
    assert sum(OPS[c[0]].family is ROI_ALIGN for c in CELLS) == 4 * 2 * (3 * 5 + 3)
    assert COMPILED_GRAPHS == 2 * 7 + 4 * 2 * 3


def test_roi_options_meet_pairwise():
    # Every two of the three options take each pair of their values in some
    # option set of the matrix.
    values = [sorted({o[k] for o in ROI_OPTIONS}) for k in range(3)]
    assert values == [[0.5, 1.0], [-1, 2], [False, True]]
    for i, j in itertools.combinations(range(3), 2):
        met = {(o[i], o[j]) for o in ROI_OPTIONS}
        assert met == set(itertools.product(values[i], values[j])), (i, j)


@pytest.mark.parametrize("order", ["in order", "reversed", "shuffled"])
def test_matrix(order):
    cells = list(CELLS)
    if order == "reversed":
        cells.reverse()
    elif order == "shuffled":
        random.Random(19).shuffle(cells)
    for cell in cells:
        run(cell)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize(
    "name, mode, names, words",
    MISSING,
    ids=[f"{m[0]}-{m[1]}-{m[2][0]}" for m in MISSING],
)
def test_missing_derivatives_raise(name, mode, names, words, layout):
    p = Problem(OPS[name], layout)
    f, primals = functional(p, names)
    with pytest.raises(NotImplementedError, match=words):
        if mode == "forward":
            torch.func.jvp(
                f, tuple(primals), tuple(torch.ones_like(x) for x in primals)
            )
        else:
            torch.func.vjp(f, *primals)[1](p.w())
    # Eager autograd and forward_ad raise alike.
    t = p.tensors(names)
    with pytest.raises(NotImplementedError, match=words):
        if mode == "forward":
            fwad = torch.autograd.forward_ad
            with fwad.dual_level():
                duals = {n: fwad.make_dual(t[n], torch.ones_like(t[n])) for n in names}
                p.op.call({**t, **duals}, layout)
        else:
            torch.autograd.grad(p.op.call(t, layout), [t[n] for n in names], p.w())


# RoIAlign's second derivatives that differentiate its boxes derivative (the
# boxes gradient, the boxes JVP) again in the boxes, or the boxes gradient
# in the input, have no kernel: {how: the words of the error}.
ROI_MISSING = {
    "reverse over reverse": "reverse-mode derivative of roi_align_grad_boxes "
    "with respect to boxes",
    "forward over reverse": "forward-mode derivative of roi_align_grad_boxes "
    "with respect to boxes",
    "reverse over forward": "reverse-mode derivative of roi_align_jvp_boxes "
    "with respect to boxes",
    "forward over forward": "forward-mode derivative of roi_align_jvp_boxes "
    "with respect to boxes",
    "input of the boxes gradient": "reverse-mode derivative of "
    "roi_align_grad_boxes with respect to the image",
}


@pytest.mark.parametrize("layout", ROI_LAYOUTS)
@pytest.mark.parametrize("how", ROI_MISSING)
@pytest.mark.parametrize("name", ROI_OPS)
def test_roi_align_second_derivatives_without_a_kernel_raise(name, how, layout):
    p = Problem(ROI_OPS[name], layout)
    f, (image, boxes) = functional(p, ("image", "boxes"))
    w = p.w()

    def loss(i, b):
        return (f(i, b) * w).sum()

    func = torch.func
    second = {
        "reverse over reverse": lambda: func.jacrev(func.grad(loss, 1), 1),
        "forward over reverse": lambda: func.jacfwd(func.grad(loss, 1), 1),
        "reverse over forward": lambda: func.jacrev(func.jacfwd(f, 1), 1),
        "forward over forward": lambda: func.jacfwd(func.jacfwd(f, 1), 1),
        "input of the boxes gradient": lambda: func.jacrev(func.grad(loss, 1), 0),
    }[how]()
    with pytest.raises(NotImplementedError, match=ROI_MISSING[how]):
        second(image, boxes)
    if how in ("reverse over reverse", "input of the boxes gradient"):
        # Eager autograd raises alike.  Only what is differentiated
        # requires grad: the rule refuses the input before the boxes.
        wrt = "boxes" if how == "reverse over reverse" else "image"
        t = p.tensors({"boxes", wrt})
        out = p.op.call(t, layout)
        (d_boxes,) = torch.autograd.grad(out, [t["boxes"]], w, create_graph=True)
        with pytest.raises(NotImplementedError, match=ROI_MISSING[how]):
            torch.autograd.grad(d_boxes, [t[wrt]], torch.ones_like(d_boxes))


@pytest.mark.parametrize("layout", ROI_LAYOUTS)
@pytest.mark.parametrize("name", ROI_OPS)
def test_roi_align_boxes_derivative_of_the_input_gradient(name, layout):
    # The second derivative RoIAlign has a kernel for: <v, grad_image(w, b)>
    # = <w, roi_align(v, b)>, whose boxes gradient is the boxes gradient at
    # the image v.  The NumPy API's bits, in eager autograd and torch.func.
    p = Problem(ROI_OPS[name], layout)
    v = np.random.default_rng(5).standard_normal(p.a["image"].shape)
    v = v.astype(np.float32)
    expected = p.op.vjp({**p.a, "image": v}, p.cotangent)["boxes"]
    w, tv = p.w(), p.to_torch(v)
    t = p.tensors(("image", "boxes"))
    out = p.op.call(t, layout)
    (d_image,) = torch.autograd.grad(out, [t["image"]], w, create_graph=True)
    (second,) = torch.autograd.grad(d_image, [t["boxes"]], tv)
    assert_same_bits(second.numpy(), expected)
    f, (image, boxes) = functional(p, ("image", "boxes"))

    def input_gradient(b):
        return torch.func.vjp(lambda i: f(i, b), image)[1](w)[0]

    (second,) = torch.func.vjp(input_gradient, boxes)[1](tv)
    assert_same_bits(second.numpy(), expected)


def test_every_order_of_inputs_in_one_process():
    # The inputs of one cell differentiated in every order, call after call.
    for op in OPS.values():
        for layout, order in itertools.product(
            op.family.layouts, itertools.permutations(subsets(op.reverse))
        ):
            for names in order:
                eager(Problem(op, layout), names)
                func_reverse(Problem(op, layout), names)
