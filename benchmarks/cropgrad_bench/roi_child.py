"""The program of a RoIAlign reference worker: torchvision or ONNX Runtime.

Run as ``python -P roi_child.py BACKEND [THREADS]`` by
`cropgrad_bench.roi_worker`, possibly by another Python than cropgrad's
(torchvision cannot be installed beside every PyTorch that cropgrad
supports).  So it imports nothing from cropgrad: only NumPy, the backend,
and ``timing.py`` from its own folder, by path, so that the references are
timed by the same code as cropgrad's columns.

The protocol is `cropgrad_bench.tf_worker.WorkerProcess`'s.  A ``load``
request carries the path of an ``.npz`` file with the problem's arrays in
NCHW (``boxes``, ``box_ind`` and ``image`` or ``grads``) and the
workload's ``reference_spec()`` (``op``, ``nchw``, ``output_size``,
``spatial_scale``, ``sampling_ratio``, ``aligned``); its reply gives the
SHA-256 of the result's bytes, which the parent compares with cropgrad's.

Backends:

``torchvision``
    ``torchvision.ops.roi_align`` (forward) and
    ``torch.ops.torchvision._roi_align_backward`` (the input gradient:
    what autograd calls), or both (``forward_backward``: the forward op on
    an input that requires grad, then ``torch.autograd.grad`` with the
    problem's ``grads``, as a training step runs them), on tensors made
    once from the arrays (the boxes as torchvision's ``[K, 5]`` rois),
    allocating the result on each call.
    torchvision's CPU kernels run on one thread; PyTorch's thread count
    (in the ``hello`` reply) only matters for zeroing the gradient.
``onnxruntime``
    one ``RoiAlign`` node (mode ``avg``, opset 16) in an inference
    session on the CPU with THREADS intra-op threads; the inputs bound
    once as ORT values (``IOBinding``), the result allocated by ONNX
    Runtime on each call.  Forward only.
"""

import hashlib
import importlib.util
import json
import os
import sys

import numpy as np


def _load_timing():
    """``timing.py`` beside this file, imported by its path."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "timing.py")
    spec = importlib.util.spec_from_file_location("_cropgrad_bench_timing", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def rois(problem):
    """torchvision's rois ``[K, 5]`` float32: the image's index, then the box."""
    index = problem["box_ind"].astype(np.float32)[:, None]
    boxes = problem["boxes"].astype(np.float32)
    return np.ascontiguousarray(np.concatenate([index, boxes], axis=1))


def torchvision_backend(threads=None):
    """(info, build) of torchvision's RoIAlign (`threads` is not used).

    ``build(problem, spec)`` returns ``(call, as_array)``: `call` runs the
    op once and returns its result, ``as_array(result)`` is that result as
    a NumPy array.
    """
    import torch
    import torchvision
    from torchvision.ops import roi_align

    info = {
        "torchvision": torchvision.__version__,
        "torch": torch.__version__,
        "torch_threads": torch.get_num_threads(),
        "python": sys.version.split()[0],
        "executable": sys.executable,
    }

    def build(problem, spec):
        batch, channels, height, width = spec["nchw"]
        oh, ow = spec["output_size"]
        scale = spec["spatial_scale"]
        ratio, aligned = spec["sampling_ratio"], spec["aligned"]
        boxes = torch.from_numpy(rois(problem))
        if spec["op"] == "forward":
            image = torch.from_numpy(problem["image"])

            def call():
                return roi_align(image, boxes, (oh, ow), scale, ratio, aligned)

        elif spec["op"] == "grad_image":
            grads = torch.from_numpy(problem["grads"])
            backward = torch.ops.torchvision._roi_align_backward

            def call():
                return backward(
                    grads, boxes, scale, oh, ow, batch, channels, height, width,
                    ratio, aligned,
                )  # fmt: skip

        elif spec["op"] == "forward_backward":
            image = torch.from_numpy(problem["image"]).requires_grad_()
            grads = torch.from_numpy(problem["grads"])

            def call():
                crops = roi_align(image, boxes, (oh, ow), scale, ratio, aligned)
                return torch.autograd.grad(crops, image, grads)[0]

        else:
            raise ValueError(f"torchvision has no {spec['op']} op")
        return call, lambda result: result.numpy()

    return info, build


def roi_align_model(output_size, spatial_scale, sampling_ratio, aligned):
    """A serialized ONNX model: one float32 ``RoiAlign`` node, mode ``avg``.

    Inputs ``X`` ``[N, C, H, W]``, ``rois`` ``[K, 4]`` (``x1, y1, x2, y2``)
    and ``batch_indices`` int64 ``[K]``; output ``Y``.  torchvision's
    ``aligned`` is ONNX's ``coordinate_transformation_mode`` (``half_pixel``
    if True, else ``output_half_pixel``); a ``sampling_ratio`` <= 0 (the
    adaptive grid) is ONNX's 0.
    """
    import onnx
    from onnx import TensorProto, helper

    out_h, out_w = (int(v) for v in output_size)
    node = helper.make_node(
        "RoiAlign",
        ["X", "rois", "batch_indices"],
        ["Y"],
        mode="avg",
        output_height=out_h,
        output_width=out_w,
        sampling_ratio=max(int(sampling_ratio), 0),
        spatial_scale=float(spatial_scale),
        coordinate_transformation_mode="half_pixel" if aligned else "output_half_pixel",
    )
    value = helper.make_tensor_value_info
    graph = helper.make_graph(
        [node],
        "roi_align",
        [
            value("X", TensorProto.FLOAT, ["N", "C", "H", "W"]),
            value("rois", TensorProto.FLOAT, ["K", 4]),
            value("batch_indices", TensorProto.INT64, ["K"]),
        ],
        [value("Y", TensorProto.FLOAT, ["K", "C", out_h, out_w])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 16)])
    model.ir_version = 8  # read by every ONNX Runtime with opset 16
    onnx.checker.check_model(model)
    return model.SerializeToString()


def onnxruntime_backend(threads):
    """(info, build) of ONNX Runtime's ``RoiAlign`` on `threads` threads."""
    import onnx
    import onnxruntime

    threads = int(threads or 1)
    info = {
        "onnxruntime": onnxruntime.__version__,
        "onnx": onnx.__version__,
        "intra_op_threads": threads,
        "python": sys.version.split()[0],
    }

    def build(problem, spec):
        if spec["op"] != "forward":
            raise ValueError(f"ONNX Runtime's RoiAlign has no {spec['op']} op")
        model = roi_align_model(
            spec["output_size"],
            spec["spatial_scale"],
            spec["sampling_ratio"],
            spec["aligned"],
        )
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.execution_mode = onnxruntime.ExecutionMode.ORT_SEQUENTIAL
        session = onnxruntime.InferenceSession(
            model, options, providers=["CPUExecutionProvider"]
        )
        inputs = {
            "X": np.ascontiguousarray(problem["image"], dtype=np.float32),
            "rois": np.ascontiguousarray(problem["boxes"], dtype=np.float32),
            "batch_indices": np.ascontiguousarray(problem["box_ind"], np.int64),
        }
        binding = session.io_binding()
        # The values read the arrays' memory: both stay alive with `call`.
        values = {
            name: onnxruntime.OrtValue.ortvalue_from_numpy(array)
            for name, array in inputs.items()
        }
        for name, value in values.items():
            binding.bind_ortvalue_input(name, value)
        binding.bind_output("Y", "cpu")

        def call():
            session.run_with_iobinding(binding)

        call.keep_alive = (inputs, values)
        return call, lambda _: binding.get_outputs()[0].numpy()

    return info, build


BACKENDS = {"torchvision": torchvision_backend, "onnxruntime": onnxruntime_backend}


def _load_problem(path):
    with np.load(path) as data:
        return {key: data[key] for key in data.files}


def main(argv, backends=None):
    """The worker's loop: ``argv`` is ``[BACKEND]`` or ``[BACKEND, THREADS]``.

    `backends` replaces `BACKENDS` (a stand-in for a test).
    """
    backends = BACKENDS if backends is None else backends
    # The protocol's stdout is ours alone: what a library prints goes to
    # stderr (the parent's log of this worker).
    channel = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)

    def reply(**message):
        channel.write(json.dumps({"ok": True, **message}) + "\n")
        channel.flush()

    def fail(error):
        channel.write(json.dumps({"ok": False, "error": error}) + "\n")
        channel.flush()

    name = argv[0] if argv else "(none)"
    threads = int(argv[1]) if len(argv) > 1 else None
    build, error = None, None
    try:
        info, build = backends[name](threads)
    except KeyError:
        error = f"n/a (no backend {name!r}; choose from {', '.join(backends)})"
    except Exception as exc:  # a missing or broken install is not ours to fix
        error = f"n/a ({name} failed to import: {type(exc).__name__}: {exc})"
    timing = _load_timing()
    fn = None
    inner = 1
    for line in sys.stdin:
        request = json.loads(line)
        cmd = request["cmd"]
        if cmd == "quit":
            break
        if build is None:
            fail(error)
            continue
        try:
            if cmd == "hello":
                reply(**info)
            elif cmd == "load":
                fn = None
                problem = _load_problem(request["file"])
                fn, as_array = build(problem, request)
                result = np.ascontiguousarray(as_array(fn()))
                reply(
                    sha256=hashlib.sha256(result.tobytes()).hexdigest(),
                    shape=list(result.shape),
                    dtype=result.dtype.name,
                )
            elif cmd == "calibrate":
                inner, estimate = timing.calibrate(fn, request["block"])
                reply(inner=inner, estimate=estimate)
            elif cmd == "time":
                reply(seconds=timing.time_block(fn, inner, int(request["warm"])))
            else:
                fail(f"unknown command {cmd!r}")
        except Exception as exc:
            fail(f"{type(exc).__name__}: {exc}")


if __name__ == "__main__":
    main(sys.argv[1:])
