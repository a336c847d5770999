"""The benchmark's problems: shapes, dtypes and the arrays, from a fixed seed."""

import numpy as np

SEED = 20240603

GRAD_IMAGE, FORWARD, GRAD_BOXES = "grad_image", "forward", "grad_boxes"


class Workload:
    """One benchmark problem: an op, its shapes and its output dtype.

    ``kind`` says how the row is measured: ``"op"`` (the columns of the
    main table) or ``"pipeline"`` (the idle-thread measurements of
    `cropgrad._bench.pipeline` on the same problem).
    """

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
        _detector(
            "pipeline",
            kind="pipeline",
            about="a detector call, then NumPy work: what the idle threads cost",
        ),
    )
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
