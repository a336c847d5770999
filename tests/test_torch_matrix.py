"""cropgrad.torch: every op x every input to differentiate x every transformation
x both layouts, against the NumPy API.

The matrix: the public ops (crop_and_resize with respect to the image,
the boxes and both; crop_and_resize_grad_image with respect to grads, the
boxes and both; crop_and_resize_grad_boxes with respect to grads, and in
forward mode grads, the image and both; roi_align with respect to the
feature map, the boxes and both, with torchvision's default options and
with the others changed) x {eager autograd, torch.compile, torch.export's
program, torch.func.grad / vjp / jacrev, torch.func.jvp / jacfwd,
torch.func.vmap} x {NCHW, NHWC} (for roi_align, which takes NCHW tensors
only: NCHW in contiguous and in channels_last memory).  Reverse-mode
results are compared with the NumPy API's bits on the same arrays, and so
are forward-mode ones:
the jvp rules call the same kernels (the forward op on an image's tangent,
the boxes JVP on the boxes', an op linear in an input on its tangent) and
add the parts in float32, in the order the rule adds them.  The derivatives
cropgrad has no kernel for must raise.

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
    # torch.compile's machinery and forward-mode AD's first use warn about
    # deprecated parts of torch.jit.
    pytest.mark.filterwarnings(
        "ignore:`torch.jit.script_method` is deprecated:DeprecationWarning"
    ),
    pytest.mark.filterwarnings(
        "ignore:`torch.jit.script` is deprecated:DeprecationWarning"
    ),
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


# RoIAlign's problems: boxes [x1, y1, x2, y2] in input pixels, some reaching
# outside the map, one flipped; the two option sets of its rows.
ROI_OUTPUT = (2, 3)
ROI_OPTIONS = {
    "roi_align": dict(spatial_scale=1.0, sampling_ratio=-1, aligned=False),
    "roi_align(0.5, 2, aligned)": dict(
        spatial_scale=0.5, sampling_ratio=2, aligned=True
    ),
}


def roi_arrays(seed):
    a = arrays(seed)
    rng = np.random.default_rng(seed + 50)
    a["boxes"] = np.array(
        [[0.6, 0.3, 3.2, 4.1], [-0.9, 1.3, 2.7, 5.6], [3.4, 3.1, 1.2, 0.4]],
        dtype=np.float32,
    ) + rng.uniform(-0.2, 0.2, (NUM_BOXES, 4)).astype(np.float32)
    a["grads"] = rng.standard_normal((NUM_BOXES, *ROI_OUTPUT, DEPTH)).astype(np.float32)
    return a


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
        make=arrays,
        custom_op=None,
    ):
        self.name = name
        self.make = make  # seed -> the NHWC arrays of a problem
        self.custom_op = custom_op or name  # what torch.export's graph calls
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


def _roi_call(options):
    """cgt.roi_align on the matrix's tensors: an NHWC layout is the NCHW
    tensor in channels_last memory (its permuted view), the result permuted
    back; the boxes become torchvision's ``[K, 5]`` inside the call, so that
    their gradient is the coordinates'."""

    def call(t, layout):
        image = t["image"].permute(0, 3, 1, 2) if layout == "NHWC" else t["image"]
        index = t["box_ind"][:, None].to(t["boxes"].dtype)
        rois = torch.cat([index, t["boxes"]], dim=1)
        out = cgt.roi_align(image, rois, ROI_OUTPUT, **options)
        return out.permute(0, 2, 3, 1) if layout == "NHWC" else out

    return call


def _roi_op(name, options):
    kw = dict(options, data_format="NHWC")

    def vjp(a, w):
        return {
            "image": cropgrad.roi_align_grad_image(
                w, a["boxes"], a["box_ind"], a["image"].shape, **kw
            ),
            "boxes": cropgrad.roi_align_grad_boxes(
                w, a["image"], a["boxes"], a["box_ind"], **kw
            ),
        }

    def jvp(a, t):
        parts = []
        if "image" in t:  # linear in the feature map
            parts.append(
                cropgrad.roi_align(
                    t["image"], a["boxes"], a["box_ind"], ROI_OUTPUT, **kw
                )
            )
        if "boxes" in t:
            parts.append(
                cropgrad.roi_align_jvp_boxes(
                    a["image"], a["boxes"], a["box_ind"], t["boxes"], ROI_OUTPUT, **kw
                )
            )
        return _sum(parts)

    return Op(
        name,
        ("image", "boxes"),
        _roi_call(options),
        lambda a: cropgrad.roi_align(
            a["image"], a["boxes"], a["box_ind"], ROI_OUTPUT, **kw
        ),
        vjp,
        reverse=("image", "boxes"),
        forward=("image", "boxes"),
        jvp=jvp,
        make=roi_arrays,
        custom_op="roi_align",
    )


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
        *(_roi_op(name, options) for name, options in ROI_OPTIONS.items()),
    )
}


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
        self.a = op.make(seed)
        self.out = op.reference(self.a)
        self.cotangent = (
            np.random.default_rng(seed + 100)
            .standard_normal(self.out.shape)
            .astype(np.float32)
        )

    def tensors(self, requires=()):
        t = {k: to_torch(v, self.layout) for k, v in self.a.items()}
        for name in requires:
            t[name].requires_grad_()
        return t

    def w(self):
        return to_torch(self.cotangent, self.layout)

    def expected_vjp(self, name, cotangent=None):
        c = self.cotangent if cotangent is None else cotangent
        return self.op.vjp(self.a, c)[name]

    def jacobian(self, name):
        """The NumPy API's Jacobian [output elements, input elements], both in
        the caller's layout, one vjp per output element."""
        out_layout = to_torch(self.out, self.layout)
        if name in self.op.linear:
            x = to_torch(self.a[name], self.layout)
            columns = []
            for k in range(x.numel()):
                basis = torch.zeros(x.numel())
                basis[k] = 1
                c = to_nhwc(basis.reshape(x.shape), self.layout)
                column = self.op.linear[name](self.a, c)
                columns.append(to_torch(column, self.layout).reshape(-1))
            return torch.stack(columns, dim=1)
        rows = []
        for k in range(out_layout.numel()):
            basis = torch.zeros(out_layout.numel())
            basis[k] = 1
            c = to_nhwc(basis.reshape(out_layout.shape), self.layout)
            rows.append(to_torch(self.expected_vjp(name, c), self.layout).reshape(-1))
        return torch.stack(rows)

    def expected_jvp(self, tangents):
        """The output tangent for {input: tangent in the caller's layout}, in
        the caller's layout (the NumPy API's bits).  PyTorch's forward mode
        hands on the rule's -0.0 as +0.0, as if added to a zero tangent
        (measured: torch.func.jvp and jacfwd alike, every other bit kept)."""
        t = {name: to_nhwc(v, self.layout) for name, v in tangents.items()}
        return to_torch(self.op.jvp(self.a, t) + np.float32(0.0), self.layout)

    def forward_jacobian(self, names, name):
        """What jacfwd over `names` gives for `name`: one jvp per element of
        `name`, the other inputs' tangents zero (as jacfwd pushes them)."""
        zeros = {n: torch.zeros_like(to_torch(self.a[n], self.layout)) for n in names}
        x = zeros[name]
        columns = []
        for k in range(x.numel()):
            basis = torch.zeros(x.numel())
            basis[k] = 1
            tangents = {**zeros, name: basis.reshape(x.shape)}
            columns.append(self.expected_jvp(tangents).reshape(-1))
        return torch.stack(columns, dim=1)

    def check_out(self, out):
        assert_same_bits(to_nhwc(out, self.layout), self.out)

    def check_grads(self, names, grads):
        for name, g in zip(names, grads):
            assert_same_bits(to_nhwc(g, self.layout), self.expected_vjp(name))


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
    # grad: each is a graph of its own (14 in all).
    with torch._dynamo.config.patch(recompile_limit=32):
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
        assert f"cropgrad.{p.op.custom_op}.default" in targets, targets
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
    tangents = [
        torch.from_numpy(rng.standard_normal(x.shape).astype(np.float32))
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
    keys = sorted(p.a)
    stacked = {k: torch.stack([q.tensors()[k] for q in problems]) for k in keys}
    # box_ind is shared (not mapped); the mapped axis of the first input in
    # `names` is its last one, to exercise a mapped axis that is not first.
    mapped = {k: None if k == "box_ind" else 0 for k in keys}
    first = names[0]
    stacked[first] = stacked[first].movedim(0, -1)
    mapped[first] = stacked[first].dim() - 1
    shared = problems[0].tensors()["box_ind"]
    for q in problems[1:]:
        q.a["box_ind"] = problems[0].a["box_ind"]
        q.out = q.op.reference(q.a)
    values = [shared if mapped[k] is None else stacked[k] for k in keys]
    in_dims = tuple(mapped[k] for k in keys)

    def one(*vals):
        return p.op.call(dict(zip(keys, vals)), p.layout)

    outs = torch.func.vmap(one, in_dims=in_dims)(*values)
    for q, out in zip(problems, outs):
        q.check_out(out)

    def one_vjp(w, *vals):
        t = dict(zip(keys, vals))

        def f(*v):
            return p.op.call({**t, **dict(zip(names, v))}, p.layout)

        return torch.func.vjp(f, *(t[n] for n in names))[1](w)

    ws = torch.stack([q.w() for q in problems])
    grads = torch.func.vmap(one_vjp, in_dims=(0, *in_dims))(ws, *values)
    for k, q in enumerate(problems):
        q.check_grads(names, [g[k] for g in grads])


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
        for layout in LAYOUTS:
            for mode, check in REVERSE.items():
                for names in subsets(op.reverse):
                    out.append((op.name, mode, layout, names, check))
            for mode, check in FORWARD.items():
                for names in subsets(op.forward):
                    out.append((op.name, mode, layout, names, check))
    return out


CELLS = cells() if torch is not None else []
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
    assert ops == set(OPS) and layouts == set(LAYOUTS)
    assert modes == set(REVERSE) | set(FORWARD)
    # crop_and_resize's 3 ops: (3 + 3 + 1) reverse input sets x 5 + (3 + 1 +
    # 3) forward x 1; roi_align's 2 option sets: 3 x 5 + 3 x 1 each; in 2
    # layouts.
    assert len(CELLS) == 2 * (7 * 5 + 7) + 2 * 2 * (3 * 5 + 3)


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


def test_every_order_of_inputs_in_one_process():
    # The inputs of one cell differentiated in every order, call after call.
    for name, layout in itertools.product(OPS, LAYOUTS):
        op = OPS[name]
        for order in itertools.permutations(subsets(op.reverse)):
            for names in order:
                eager(Problem(op, layout), names)
                func_reverse(Problem(op, layout), names)
