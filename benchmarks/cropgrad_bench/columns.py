"""What each column of the main table times: cropgrad calls and the roofline.

The RoIAlign rows (`cropgrad_bench.workloads.RoiWorkload`) have columns
of their own (``ROI_COLUMNS``, ``ROI_RATIOS``): the same cropgrad and
roofline columns, the references' (torchvision, ONNX Runtime) and calls
timed beside cropgrad's.
"""

import numpy as np

import cropgrad

from .workloads import FORWARD, GRAD_BOXES, GRAD_IMAGE, ROI_ALIGN, to_nchw

CG1, CGD, CGN = "cropgrad_1thread", "cropgrad_default", "cropgrad_default_new_output"
CG32 = "cropgrad_default_float32"
ROOF, ROOFN, ROOF1 = "roofline", "roofline_default_threads", "roofline_1thread"
TFD, TFX = "tf_default", "tf_deterministic"
COLUMNS = (CG1, CGD, CGN, CG32, ROOF, ROOFN, ROOF1, TFD, TFX)
TF_MODES = {TFD: "default", TFX: "deterministic"}

# The RoIAlign rows' columns: the references (in worker processes,
# `cropgrad_bench.roi_worker`) and the calls timed beside cropgrad's.
TV, ORT1, ORTD = "torchvision", "onnxruntime_1thread", "onnxruntime_default"
NCHW_BESIDE, GRAD_IMAGE_BESIDE = "nchw_default", "grad_image_default"
ROI_COLUMNS = (
    *(CG1, CGD, CGN, ROOF, ROOFN, ROOF1),
    *(TV, ORT1, ORTD, NCHW_BESIDE, GRAD_IMAGE_BESIDE),
)

# Ratios: name -> (numerator column, denominator column).
RATIOS = {
    "tf_default_over_cropgrad_default": (TFD, CGD),
    "tf_deterministic_over_cropgrad_1thread": (TFX, CG1),
    "cropgrad_default_over_roofline": (CGD, ROOF),
    "scaling_1thread_over_default": (CG1, CGD),
    "tf_default_over_cropgrad_new_output": (TFD, CGN),
    "tf_deterministic_over_cropgrad_default": (TFX, CGD),
    # What allocating the result costs: the same call, default threads.
    "new_output_over_default": (CGN, CGD),
}
ROI_RATIOS = {
    "torchvision_over_cropgrad_1thread": (TV, CG1),
    "torchvision_over_cropgrad_default": (TV, CGD),
    "onnxruntime_1thread_over_cropgrad_1thread": (ORT1, CG1),
    "onnxruntime_default_over_cropgrad_default": (ORTD, CGD),
    "cropgrad_default_over_roofline": (CGD, ROOF),
    "scaling_1thread_over_default": (CG1, CGD),
    # NHWC rows: the NCHW call beside the NHWC one, default threads.
    "nchw_over_nhwc": (NCHW_BESIDE, CGD),
    # Boxes-gradient rows: against the input gradient of the same problem.
    "grad_boxes_over_grad_image": (CGD, GRAD_IMAGE_BESIDE),
}


def columns_of(workload):
    """(columns, ratios) of a workload's row in the JSON."""
    if workload.family == ROI_ALIGN:
        return ROI_COLUMNS, ROI_RATIOS
    return COLUMNS, RATIOS


class RooflinePasses:
    """One read pass over `reads` and one zeroing pass over `writes`.

    With ``pool``, each array is cut into contiguous pieces, one per thread,
    and the pieces are handled at once; the calling thread takes the first.
    Arrays under 256 KiB per thread stay whole on the calling thread.
    """

    def __init__(self, reads, writes, pool=None, threads=1):
        self.pool = pool
        self.reads = [self._split(a, threads) for a in reads]
        self.writes = [self._split(a, threads) for a in writes]

    @staticmethod
    def _split(array, threads):
        flat = array.reshape(-1)
        pieces = max(1, min(threads, flat.nbytes // (256 * 1024)))
        return np.array_split(flat, pieces)

    def _run(self, fn, pieces):
        if len(pieces) == 1 or self.pool is None:
            for piece in pieces:
                fn(piece)
            return
        futures = [self.pool.submit(fn, piece) for piece in pieces[1:]]
        fn(pieces[0])
        for future in futures:
            future.result()

    def __call__(self):
        for pieces in self.reads:
            self._run(np.maximum.reduce, pieces)
        for pieces in self.writes:
            self._run(_zero, pieces)


def _zero(piece):
    piece.fill(0)


def cropgrad_call(workload, problem, out=None):
    """``call(num_threads)``: the workload's op on `problem`, into `out`.

    The boxes gradient has no ``out=`` argument and allocates its result.
    """
    p = problem
    if workload.family == ROI_ALIGN:
        return roi_call(workload, problem, out)
    if workload.op == GRAD_IMAGE:
        size = list(workload.image_size)
        dtype = workload.dtype
        return lambda num_threads: cropgrad.crop_and_resize_grad_image(
            p["grads"],
            p["boxes"],
            p["box_ind"],
            size,
            dtype=dtype,
            out=out,
            num_threads=num_threads,
        )
    if workload.op == FORWARD:
        crop = list(workload.crop)
        return lambda num_threads: cropgrad.crop_and_resize(
            p["image"],
            p["boxes"],
            p["box_ind"],
            crop,
            out=out,
            num_threads=num_threads,
        )
    return lambda num_threads: cropgrad.crop_and_resize_grad_boxes(
        p["grads"], p["image"], p["boxes"], p["box_ind"], num_threads=num_threads
    )


def roi_call(workload, problem, out=None):
    """``call(num_threads)``: a RoIAlign workload's op on `problem`, into
    `out` (`problem` in the workload's layout)."""
    p = problem
    boxes, box_ind = p["boxes"], p["box_ind"]
    kwargs = dict(workload.options(), data_format=workload.data_format, out=out)
    if workload.op == FORWARD:
        size = workload.crop
        return lambda num_threads: cropgrad.roi_align(
            p["image"], boxes, box_ind, size, num_threads=num_threads, **kwargs
        )
    if workload.op == GRAD_IMAGE:
        size = workload.image_size
        return lambda num_threads: cropgrad.roi_align_grad_image(
            p["grads"], boxes, box_ind, size, num_threads=num_threads, **kwargs
        )
    return lambda num_threads: cropgrad.roi_align_grad_boxes(
        p["grads"], p["image"], boxes, box_ind, num_threads=num_threads, **kwargs
    )


def roi_beside_columns(workload, problem):
    """The calls a RoIAlign row times beside cropgrad's, default threads.

    ``nchw_default`` (NHWC rows): the same op on the NCHW arrays;
    ``grad_image_default`` (boxes-gradient rows): the input gradient of
    the same problem, in the row's layout.  Each writes into an array of
    its own.
    """
    columns = {}
    if workload.data_format == "NHWC":
        nchw = workload.variant(data_format="NCHW")
        columns[NCHW_BESIDE] = _default_threads(nchw, to_nchw(problem))
    if workload.op == GRAD_BOXES:
        columns[GRAD_IMAGE_BESIDE] = _default_threads(
            workload.variant(op=GRAD_IMAGE), problem
        )
    return columns


def _default_threads(workload, problem):
    """A no-argument call of `workload`'s op, default threads, into an array
    of its own."""
    out = np.zeros(*workload.output())
    call = roi_call(workload, problem, out)
    return lambda: call(None)


def roofline_reads(workload, problem):
    """The input arrays an op reads in full."""
    if workload.op == GRAD_IMAGE:
        return [problem["grads"]]
    if workload.op == FORWARD:
        return [problem["image"]]
    return [problem["grads"], problem["image"]]


def cropgrad_columns(workload, problem, pool, threads):
    """The cropgrad and roofline columns of a workload: {name: callable}."""
    shape, dtype = workload.output()
    out = np.zeros(shape, dtype)
    run = cropgrad_call(workload, problem, out)
    columns = {CG1: lambda: run(1), CGD: lambda: run(None)}
    columns.update(roofline_columns(workload, problem, pool, threads, out))
    if workload.family == ROI_ALIGN:
        new_output = cropgrad_call(workload, problem)
        columns[CGN] = lambda: new_output(None)
        columns.update(roi_beside_columns(workload, problem))
        return columns
    if workload.op != GRAD_BOXES:  # the boxes gradient has no out= argument
        new_output = cropgrad_call(workload, problem)
        columns[CGN] = lambda: new_output(None)
    if workload.op == GRAD_IMAGE and dtype != np.float32:
        # The float32 call beside it, for the cost of the output dtype.
        out32 = np.zeros(shape, np.float32)
        p = problem
        size = list(workload.image_size)
        columns[CG32] = lambda: cropgrad.crop_and_resize_grad_image(
            p["grads"], p["boxes"], p["box_ind"], size, out=out32
        )
    return columns


def roofline_columns(workload, problem, pool, threads, out=None):
    """The two roofline passes of a workload (threaded and one thread)."""
    if out is None:
        shape, dtype = workload.output()
        out = np.zeros(shape, dtype)
    reads = roofline_reads(workload, problem)
    return {
        ROOFN: RooflinePasses(reads, [out], pool, threads),
        ROOF1: RooflinePasses(reads, [out]),
    }
