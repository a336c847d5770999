"""Dask worker preload of tests/test_multiprocess.py.

Loaded by every worker through ``DASK_DISTRIBUTED__WORKER__PRELOAD``.

Each worker process, the ones a nanny starts again after a kill included,
writes ``worker-<pid>.json`` into ``$CROPGRAD_MP_GATE``: the OpenMP team
size cropgrad's calls get there and the ``OMP_NUM_THREADS`` it started with.

With ``CROPGRAD_MP_HOLD=1`` it also holds every image-gradient task: the
task writes ``started-<pid>-<n>`` (holding its key) and waits for a file
``go`` before it computes, so that the test can kill a worker while its
task is surely running and none has finished.  A task waits at most
`HOLD_SECONDS`, then fails: the test cannot hang on a lost ``go``.
"""

import itertools
import json
import os
import pathlib
import time

from distributed import get_worker

import cropgrad

HOLD_SECONDS = 60


def dask_setup(worker):
    gate = pathlib.Path(os.environ["CROPGRAD_MP_GATE"])
    pid = os.getpid()
    facts = {
        "pid": pid,
        "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
        "default_threads": cropgrad.show_config(mode="dicts")["default_threads"],
    }
    (gate / f"worker-{pid}.json").write_text(json.dumps(facts))
    if os.environ.get("CROPGRAD_MP_HOLD") != "1":
        return
    compute = cropgrad.crop_and_resize_grad_image
    numbers = itertools.count()

    def held(*args, **kwargs):
        key = str(get_worker().get_current_task())
        started = gate / f"started-{pid}-{next(numbers)}"
        started.with_suffix(".tmp").write_text(key)
        started.with_suffix(".tmp").replace(started)  # seen whole or not at all
        deadline = time.monotonic() + HOLD_SECONDS
        while not (gate / "go").exists():
            if time.monotonic() > deadline:
                raise TimeoutError(f"no {gate / 'go'} after {HOLD_SECONDS} s")
            time.sleep(0.02)
        return compute(*args, **kwargs)

    cropgrad.crop_and_resize_grad_image = held
