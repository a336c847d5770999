"""cropgrad's benchmark: ``python benchmarks/bench.py`` from a source checkout.

It times the installed cropgrad (the package is not part of the wheel, and
reads cropgrad's private modules only for the machine's description and the
adapters' rows).  Files, one job each:

``workloads.py``
    the problems (shapes, dtypes, the arrays from a fixed seed), the
    RoIAlign rows among them, and the groups of rows (``roi-fpn``);
``columns.py``
    what the main table's columns time: cropgrad calls and the NumPy
    roofline, and the RoIAlign rows' columns;
``pipeline.py``
    the ``pipeline`` row: a call followed by NumPy work, and the CPU the
    idle OpenMP threads take after a call;
``tf_worker.py``
    TensorFlow's columns, in worker processes, and the pipe every worker
    process is driven by (``WorkerProcess``);
``roi_worker.py`` / ``roi_child.py``
    the RoIAlign rows' references, torchvision and ONNX Runtime, in worker
    processes: the parent's side / the worker's program, which imports
    nothing from cropgrad (torchvision may run in another Python);
``rows.py``
    the registry of rows that optional adapters add (below);
``timing.py``
    blocks, warm-up and rounds;
``machine.py``
    the machine and the load of other processes;
``run.py``
    the run: every row measured, the results dict;
``targets.py``
    the performance targets and their measured figures;
``report.py`` / ``plot.py``
    the text tables and JSON / the bar plot;
``cli.py``
    the command line (``benchmarks/bench.py`` runs its ``main``).

Measuring
---------
Each workload is a row, timed in several columns in the same run:

``cropgrad_1thread`` / ``cropgrad_default``
    the cropgrad call with ``num_threads=1`` / with the default thread count,
    writing into a preallocated ``out=`` array (so no allocation is timed);
``cropgrad_default_new_output``
    the same call with the default threads, allocating its result;
``roofline``
    NumPy on the same arrays: one read pass over every input array that is
    read in full (``np.maximum.reduce``, the fastest vectorised reduction),
    then writing the output once (``ndarray.fill(0)`` on a preallocated
    array).  Timed with each pass split between as many Python threads as
    cropgrad's default thread count (``roofline_default_threads``; NumPy
    releases the GIL) and on one thread (``roofline_1thread``); the roofline
    of a round is the faster of the two.  No kernel that reads its inputs
    and writes its output once can be faster;
``tf_default`` / ``tf_deterministic``
    ``tf.raw_ops`` in TensorFlow's default mode / with op determinism
    enabled, each in a worker process of its own (determinism cannot be
    switched off again in a process, and TensorFlow's threads stay out of
    the process that times cropgrad).  The inputs are TensorFlow tensors made
    once before timing; TensorFlow allocates its output on every call.

The ``pipeline`` row has columns of its own (`cropgrad_bench.pipeline`).

The RoIAlign rows (``roi-fpn-*``, ``roi-mask-*``, ``roi-adaptive-*``:
the forward op, the input gradient and the boxes gradient, in NCHW and
NHWC) have their own table: the same cropgrad and roofline columns (NCHW
rows in NCHW, the layout of torchvision and ONNX), then

``torchvision``
    ``torchvision.ops.roi_align`` / ``_roi_align_backward`` (forward and
    input-gradient NCHW rows), in a worker process of the Python given by
    ``--torchvision-python`` (`cropgrad_bench.roi_worker`);
``onnxruntime_1thread`` / ``onnxruntime_default``
    ONNX Runtime's ``RoiAlign`` (NCHW forward rows) on 1 thread / on
    cropgrad's default thread count, in worker processes;
``nchw_default`` (NHWC rows) / ``grad_image_default`` (boxes-gradient rows)
    the NCHW call of the same problem / its input gradient, default
    threads, timed beside the row's own calls.

A column a row cannot have is None in ``median_s`` and explained in the
row's ``not_measured``; ``same_bits`` says whether each reference's result
had cropgrad's bits.  Under ``--quick`` a RoIAlign row pools a sixteenth of
its boxes.

Noise: the columns are measured in rounds.  A round times each column once
(a block of calls), in an order that rotates from round to round, after
about 10 ms of untimed calls of the same column (while the previous
column's idle OpenMP threads stop spinning; a pause instead would let the
CPUs idle, and they run slowly for a few ms after waking).  A column's time
is the median over rounds; a ratio is the median of the per-round ratios,
i.e. of measurements taken side by side.  Calls faster than the block time
are repeated within a block and the per-call time is reported.

Rows from adapters
------------------
An optional adapter (``cropgrad.jax``, ``cropgrad.torch``) adds rows through
a module of this package listed in `cropgrad_bench.rows.ADAPTERS`:
``jax_rows.py`` and ``torch_rows.py``.  The contract:

- The module imports its framework at the top.  If importing the module
  raises ``ImportError`` (the framework is not installed), it adds no rows
  and the report says why (``"adapters"`` in the JSON); ``--no-adapters``
  leaves every adapter out.
- It defines ``extra_rows(workload, quick) -> list of dict``, called once
  per op row measured (after that row), never for the ``pipeline`` row.
  `workload` is a `cropgrad_bench.workloads.Workload` (``workload.name``,
  ``.op``, ``.image_size``, ``.crop``, ``.dtype``); ``workload.problem()``
  returns its arrays (``grads``, ``boxes``, ``box_ind``, ``image`` as the op
  needs, the same arrays every column uses) and ``workload.output()`` the
  result's shape and dtype.  `quick` is true under ``--quick``: keep the
  setup short (e.g. fewer columns).  Return ``[]`` for workloads the adapter
  does not cover.
- Each row dict has

  ``"name"``: str
      the row's name, unique in the run (e.g. ``"detector-jax"``);
  ``"about"``: str, optional
      one line for the progress output and the JSON;
  ``"columns"``: dict of str to callable
      column name to a no-argument callable making one complete call on the
      workload's problem; the work must be finished when it returns (e.g.
      ``jax.block_until_ready``), and the first two calls may be slow (they
      are untimed: compilation, thread pools).  The names
      ``cropgrad_1thread``, ``cropgrad_default`` and
      ``cropgrad_default_new_output`` fill the main table's cropgrad
      columns; any other name (e.g. a framework's own op) is reported in
      the JSON and listed under the table;
  ``"ratios"``: dict of str to (str, str), optional
      extra ratios, numerator and denominator column (the row's own or the
      standard ones);
  ``"targets"``: list of (str, str, float, str), optional
      targets of the row: (what, ratio or column, bound, ``"<="`` or
      ``">="``), listed with the others;
  ``"reference_op"``: str, optional
      RoIAlign rows: what the references time instead of the workload's
      op (``"forward_backward"``: torchvision's forward op and its input
      gradient, for a training-step row after a boxes-gradient workload,
      whose problem has both the image and ``grads``).

- The benchmark adds the workload's roofline and TensorFlow columns (a
  RoIAlign workload's: its references'), so the row's ``TF/cg``,
  ``cg/roof`` and ``scaling`` (or ``torchvision/cg``) compare like those
  of the built-in row.  An exception in ``extra_rows`` or a malformed row
  ends that adapter's rows for the workload, with a message; the rest of
  the run goes on.

A sketch of ``jax_rows.py``::

    import jax

    import cropgrad.jax as cgj


    def extra_rows(workload, quick):
        if workload.name != "detector":
            return []
        p = workload.problem()
        args = [jax.device_put(p[k]) for k in ("grads", "boxes", "box_ind")]
        size = workload.image_size
        call = jax.jit(lambda g, b, i: cgj.crop_and_resize_grad_image(g, b, i, size))
        return [
            {
                "name": "detector-jax",
                "about": "cropgrad.jax under jax.jit",
                "columns": {
                    "cropgrad_default": lambda: call(*args).block_until_ready()
                },
            }
        ]
"""
