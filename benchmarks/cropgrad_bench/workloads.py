"""The benchmark's problems: shapes, dtypes and the arrays, from a fixed seed."""

import math

import numpy as np

SEED = 20240603

GRAD_IMAGE, FORWARD, GRAD_BOXES = "grad_image", "forward", "grad_boxes"
# Not a row's op: what the references time for an adapter's training-step
# row (a RoIAlign workload's ``reference_op``).
FORWARD_BACKWARD = "forward_backward"
# The op families: a workload's ``family``.
CROP_AND_RESIZE, ROI_ALIGN = "crop_and_resize", "roi_align"


class Workload:
    """One benchmark problem: an op, its shapes and its output dtype.

    ``kind`` says how the row is measured: ``"op"`` (the columns of the
    main table) or ``"pipeline"`` (the idle-thread measurements of
    `cropgrad_bench.pipeline` on the same problem).
    """

    family = CROP_AND_RESIZE

    def __init__(
        self,
        name,
        op,
        batch,
        height,
        width,
        depth,
        num_boxes,
        crop,
        dtype="float32",
        about="",
        kind="op",
    ):
        self.name = name
        self.op = op
        self.image_size = (batch, height, width, depth)
        self.num_boxes = num_boxes
        self.crop = tuple(crop)
        self.dtype = np.dtype(dtype)
        self.about = about
        self.kind = kind

    def describe(self):
        b, h, w, d = self.image_size
        return (
            f"{self.op} image ({b},{h},{w},{d}), {self.num_boxes} boxes "
            f"{self.crop[0]}x{self.crop[1]}, {self.dtype.name}"
        )

    def as_dict(self):
        return {
            "name": self.name,
            "family": self.family,
            "op": self.op,
            "image_size": list(self.image_size),
            "num_boxes": self.num_boxes,
            "crop_size": list(self.crop),
            "output_dtype": self.dtype.name if self.op == GRAD_IMAGE else "float32",
            "about": self.about,
        }

    def problem(self, seed=SEED):
        """The arrays of this workload (see `make_problem`)."""
        return make_problem(self, seed)

    def output(self):
        """(shape, dtype) of the op's result."""
        return output_shape(self)


class RoiWorkload(Workload):
    """A RoIAlign problem: `cropgrad.roi_align` or one of its gradients.

    ``nchw`` is the feature map's ``(batch, channels, height, width)``;
    ``image_size`` is the same shape in ``data_format``'s order (the
    image's, and the image gradient's, shape).  Boxes are in input pixels:
    the feature map covers ``height / spatial_scale`` by ``width /
    spatial_scale`` of them.  Boxes are ``boxes_min`` to ``boxes_max`` input
    pixels on each side (`make_roi_problem`).  Average pooling, float32
    image, grads and results.
    """

    family = ROI_ALIGN

    def __init__(
        self,
        name,
        op,
        nchw,
        num_boxes,
        output_size,
        spatial_scale,
        sampling_ratio,
        aligned,
        data_format="NCHW",
        box_sides=(16.0, 400.0),
        about="",
        reference_op=None,
    ):
        batch, channels, height, width = nchw
        super().__init__(
            name, op, batch, height, width, channels, num_boxes, output_size,
            about=about,
        )  # fmt: skip
        self.nchw = tuple(nchw)
        self.data_format = data_format
        if data_format == "NCHW":
            self.image_size = self.nchw
        self.spatial_scale = float(spatial_scale)
        self.sampling_ratio = int(sampling_ratio)
        self.aligned = bool(aligned)
        self.box_sides = tuple(float(v) for v in box_sides)
        # What the references time, when not the row's own op: an adapter
        # row's ``FORWARD_BACKWARD`` (the forward op and its input
        # gradient, on a boxes-gradient problem, which has both arrays).
        self.reference_op = reference_op

    def options(self):
        """The keywords every call of the workload takes."""
        return {
            "spatial_scale": self.spatial_scale,
            "sampling_ratio": self.sampling_ratio,
            "aligned": self.aligned,
        }

    def variant(self, **changes):
        """A copy with some attributes changed (``op``, ``data_format``, ...)."""
        args = {
            "name": self.name,
            "op": self.op,
            "nchw": self.nchw,
            "num_boxes": self.num_boxes,
            "output_size": self.crop,
            "spatial_scale": self.spatial_scale,
            "sampling_ratio": self.sampling_ratio,
            "aligned": self.aligned,
            "data_format": self.data_format,
            "box_sides": self.box_sides,
            "about": self.about,
            "reference_op": self.reference_op,
        }
        args.update(changes)
        return RoiWorkload(**args)

    def quick(self):
        """The ``--quick`` problem: a sixteenth of the boxes (at least one)."""
        n = max(1, self.num_boxes // QUICK_BOX_DIVISOR)
        about = f"{self.about} (--quick: {n} of its {self.num_boxes} boxes)"
        return self.variant(num_boxes=n, about=about)

    def describe(self):
        b, c, h, w = self.nchw
        oh, ow = self.crop
        return (
            f"roi_align {self.op} {self.data_format} map ({b},{c},{h},{w}), "
            f"{self.num_boxes} boxes, {oh}x{ow}, spatial_scale "
            f"1/{1 / self.spatial_scale:g}, sampling_ratio {self.sampling_ratio}, "
            f"aligned={self.aligned}"
        )

    def as_dict(self):
        d = super().as_dict()
        d.update(
            output_dtype="float32",
            output_size=list(self.crop),
            data_format=self.data_format,
            nchw=list(self.nchw),
            box_sides=list(self.box_sides),
            **self.options(),
        )
        return d

    def problem(self, seed=SEED):
        """The arrays, in the workload's layout (see `make_roi_problem`)."""
        problem = make_roi_problem(self, seed)
        return to_layout(problem, self.data_format)

    def output(self):
        k = self.num_boxes
        if self.op == GRAD_IMAGE:
            shape = self.image_size
        elif self.op == FORWARD:
            c, (oh, ow) = self.nchw[1], self.crop
            shape = (k, c, oh, ow) if self.data_format == "NCHW" else (k, oh, ow, c)
        else:
            shape = (k, 4)
        return tuple(shape), np.dtype(np.float32)

    def reference_spec(self):
        """What a reference worker needs besides the arrays (JSON)."""
        return {
            "op": self.reference_op or self.op,
            "nchw": list(self.nchw),
            "output_size": list(self.crop),
            **self.options(),
        }


# ``--quick`` pools this fraction of a RoIAlign row's boxes.
QUICK_BOX_DIVISOR = 16


def _roi_rows(name, about, **kwargs):
    """The six rows of a RoIAlign problem: three ops, NCHW and NHWC."""
    ops = (
        (FORWARD, "forward", "roi_align"),
        (GRAD_IMAGE, "grad-image", "its input gradient"),
        (GRAD_BOXES, "grad-boxes", "its boxes gradient"),
    )
    rows = []
    for op, suffix, what in ops:
        for layout, tail in (("NCHW", ""), ("NHWC", "-nhwc")):
            rows.append(
                RoiWorkload(
                    f"{name}-{suffix}{tail}",
                    op,
                    data_format=layout,
                    about=f"{about}: {what}, {layout}",
                    **kwargs,
                )
            )
    return rows


# The stride-8 level of an 800 x 1088 input (FPN's P3) with 256 channels,
# two images; boxes of 16 to 400 input pixels a side.
_FPN_MAP = (2, 256, 100, 136)
ROI_ROWS = (
    *_roi_rows(
        "roi-fpn",
        "torchvision's Faster R-CNN box pooler",
        nchw=_FPN_MAP,
        num_boxes=1024,
        output_size=(7, 7),
        spatial_scale=1 / 8,
        sampling_ratio=2,
        aligned=False,
    ),
    *_roi_rows(
        "roi-mask",
        "a Mask R-CNN mask head (14x14, aligned)",
        nchw=_FPN_MAP,
        num_boxes=256,
        output_size=(14, 14),
        spatial_scale=1 / 8,
        sampling_ratio=2,
        aligned=True,
    ),
    *_roi_rows(
        "roi-adaptive",
        "detectron2's box head (ROIAlignV2, adaptive grid)",
        nchw=_FPN_MAP,
        num_boxes=1024,
        output_size=(7, 7),
        spatial_scale=1 / 8,
        sampling_ratio=0,
        aligned=True,
    ),
)


def _detector(name, op=GRAD_IMAGE, **kwargs):
    """A workload on the detector's geometry: 512 RoIs of 256-channel maps."""
    return Workload(name, op, 2, 64, 64, 256, 512, (14, 14), **kwargs)


WORKLOADS = {
    w.name: w
    for w in (
        _detector("detector", about="RoI gradients of a detector's feature maps"),
        Workload(
            "augment",
            GRAD_IMAGE,
            16,
            224,
            224,
            3,
            16,
            (224, 224),
            about="one large crop per RGB image (depth 3)",
        ),
        Workload(
            "dense",
            GRAD_IMAGE,
            1,
            128,
            128,
            64,
            2000,
            (7, 7),
            about="many small, heavily overlapping boxes",
        ),
        Workload(
            "tiny",
            GRAD_IMAGE,
            1,
            16,
            16,
            8,
            1,
            (7, 7),
            about="one tiny box: the cost of a call",
        ),
        _detector(
            "detector-float16", dtype="float16", about="detector, float16 output"
        ),
        _detector(
            "detector-float64", dtype="float64", about="detector, float64 output"
        ),
        _detector(
            "detector-forward",
            FORWARD,
            about="crop_and_resize on the detector's float32 image",
        ),
        _detector(
            "detector-grad-boxes",
            GRAD_BOXES,
            about="crop_and_resize_grad_boxes on the detector's problem",
        ),
        *ROI_ROWS,
        _detector(
            "pipeline",
            kind="pipeline",
            about="a detector call, then NumPy work: what the idle threads cost",
        ),
    )
}


# Names that select several rows (``--workloads roi-fpn``).
GROUPS = {
    **{
        group: [w.name for w in ROI_ROWS if w.name.startswith(group + "-")]
        for group in ("roi-fpn", "roi-mask", "roi-adaptive")
    },
    "roi": [w.name for w in ROI_ROWS],
}


def make_problem(workload, seed=SEED):
    """The arrays of a workload: the same for every process and column.

    Boxes ``[y1, x1, y1 + h, x1 + w]`` with ``y1, x1 ~ U(-0.1, 0.7)`` and
    ``h, w ~ U(0.05, 0.5)``, sorted random ``box_ind``, standard-normal
    float32 ``grads`` (and ``image`` for the ops that read one).  Each array
    has its own random stream, so workloads of the same geometry share
    boxes, grads and image.
    """
    batch, height, width, depth = workload.image_size
    n = workload.num_boxes
    rng = np.random.default_rng([seed, 0])
    y1 = rng.uniform(-0.1, 0.7, n)
    x1 = rng.uniform(-0.1, 0.7, n)
    h = rng.uniform(0.05, 0.5, n)
    w = rng.uniform(0.05, 0.5, n)
    boxes = np.stack([y1, x1, y1 + h, x1 + w], axis=1).astype(np.float32)
    box_ind = np.sort(rng.integers(0, batch, n)).astype(np.int32)
    problem = {"boxes": boxes, "box_ind": box_ind}
    if workload.op in (GRAD_IMAGE, GRAD_BOXES):
        problem["grads"] = np.random.default_rng([seed, 1]).standard_normal(
            (n, *workload.crop, depth), dtype=np.float32
        )
    if workload.op in (FORWARD, GRAD_BOXES):
        problem["image"] = np.random.default_rng([seed, 2]).standard_normal(
            workload.image_size, dtype=np.float32
        )
    return problem


def output_shape(workload):
    """(shape, dtype) of the result of the workload's op."""
    if workload.op == GRAD_IMAGE:
        return workload.image_size, workload.dtype
    if workload.op == FORWARD:
        shape = (workload.num_boxes, *workload.crop, workload.image_size[3])
        return shape, np.dtype(np.float32)
    return (workload.num_boxes, 4), np.dtype(np.float32)


def make_roi_problem(workload, seed=SEED):
    """The arrays of a RoIAlign workload, in NCHW.

    Boxes ``[x1, y1, x2, y2]`` in input pixels, inside the input (the map's
    size over ``spatial_scale``): the square root of a box's area is
    log-uniform between the workload's ``box_sides`` and its aspect ratio
    (height / width) log-uniform between 1/2 and 2, each side then held to
    ``box_sides``; the corner uniform over the positions that keep the box
    inside.  Sorted random ``box_ind``; standard-normal float32 ``grads``
    ``[K, C, out_h, out_w]`` and ``image`` ``[N, C, H, W]`` for the ops that
    read them.  Workloads on the same map share its image, and the boxes
    of a workload with fewer boxes are the first ones of one with more.
    """
    batch, channels, height, width = workload.nchw
    n = workload.num_boxes
    lo, hi = workload.box_sides
    u = np.random.default_rng([seed, 10]).random((n, 4))
    side = np.exp(math.log(lo) + u[:, 0] * math.log(hi / lo))
    aspect = np.exp((u[:, 1] - 0.5) * 2 * math.log(2.0))
    w = np.clip(side / np.sqrt(aspect), lo, hi)
    h = np.clip(side * np.sqrt(aspect), lo, hi)
    x1 = u[:, 2] * (width / workload.spatial_scale - w)
    y1 = u[:, 3] * (height / workload.spatial_scale - h)
    boxes = np.stack([x1, y1, x1 + w, y1 + h], axis=1).astype(np.float32)
    box_ind = np.random.default_rng([seed, 11]).integers(0, batch, n)
    problem = {"boxes": boxes, "box_ind": np.sort(box_ind).astype(np.int32)}
    if workload.op in (GRAD_IMAGE, GRAD_BOXES):
        problem["grads"] = np.random.default_rng([seed, 12]).standard_normal(
            (n, channels, *workload.crop), dtype=np.float32
        )
    if workload.op in (FORWARD, GRAD_BOXES):
        problem["image"] = np.random.default_rng([seed, 13]).standard_normal(
            workload.nchw, dtype=np.float32
        )
    return problem


def to_layout(problem, data_format):
    """`problem` (NCHW arrays) with ``grads`` and ``image`` in `data_format`.

    NCHW arrays are returned as they are; NHWC ones are transposed copies.
    """
    if data_format == "NCHW":
        return dict(problem)
    return {
        k: np.ascontiguousarray(v.transpose(0, 2, 3, 1)) if v.ndim == 4 else v
        for k, v in problem.items()
    }


def to_nchw(problem):
    """An NHWC problem's arrays in NCHW (the inverse of `to_layout`)."""
    return {
        k: np.ascontiguousarray(v.transpose(0, 3, 1, 2)) if v.ndim == 4 else v
        for k, v in problem.items()
    }
