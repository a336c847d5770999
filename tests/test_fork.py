"""Child processes: fork after the parent ran threads, spawn, forkserver.

GNU OpenMP keeps its thread pool across ``fork()`` without the threads, so
a forked child that starts a parallel region waits for them forever.
cropgrad notices the fork (``os.register_at_fork``) and runs such a child's
kernels on its calling thread.  Each scenario runs in its own parent
process (this test session has used threads already, and a hang must not
take the session with it): the parent uses every op with two threads, then
children started every way must finish within a timeout with the parent's
bits.
"""

import textwrap

import pytest
from _helpers import json_report, run_python

PARENT = textwrap.dedent(r"""
    import json, multiprocessing as mp, os, sys, time
    import numpy as np
    import cropgrad

    def problem():
        rng = np.random.default_rng(3)
        grads = rng.standard_normal((64, 9, 9, 32)).astype(np.float32)
        boxes = rng.uniform(0, 1, (64, 4)).astype(np.float32)
        box_ind = rng.integers(0, 2, 64)
        image = rng.standard_normal((2, 40, 40, 32)).astype(np.float32)
        return grads, boxes, box_ind, image

    def compute(threads):
        # Big enough that every op starts its thread team when allowed to.
        grads, boxes, box_ind, image = problem()
        return [
            cropgrad.crop_and_resize_grad_image(grads, boxes, box_ind, [2, 40, 40, 32],
                                                num_threads=threads).tobytes(),
            cropgrad.crop_and_resize_grad_image(grads, boxes, box_ind, [2, 40, 40, 32],
                                                np.float16, "nearest",
                                                num_threads=threads).tobytes(),
            cropgrad.crop_and_resize(image, boxes, box_ind, [9, 9],
                                     num_threads=threads).tobytes(),
            cropgrad.crop_and_resize_grad_boxes(grads, image, boxes, box_ind,
                                                num_threads=threads).tobytes(),
        ]

    def child(queue, threads):
        start = time.perf_counter()
        results = compute(threads) + compute(None)
        queue.put((results, time.perf_counter() - start,
                   cropgrad.show_config("dicts")["default_threads"]))

    def run(method, threads, expected, timeout=60):
        ctx = mp.get_context(method)
        queue = ctx.Queue()
        proc = ctx.Process(target=child, args=(queue, threads))
        proc.start()
        try:
            results, took, default = queue.get(timeout=timeout)
        except Exception:
            proc.kill()
            proc.join()
            return {"method": method, "status": "hung", "timeout": timeout}
        proc.join(timeout)
        status = "ok" if results == expected + expected else "wrong result"
        return {"method": method, "status": status, "seconds": round(took, 2),
                "exitcode": proc.exitcode, "default_threads": default}

    if __name__ == "__main__":
        scenario = sys.argv[1]
        report = {"openmp": cropgrad.show_config("dicts")["openmp"]}
        expected = compute(1)
        if scenario == "threads-first":
            # The parent runs its thread team first.
            assert compute(2) == expected
            report["parent_os_threads"] = len(os.listdir("/proc/self/task")) \
                if os.path.isdir("/proc/self/task") else None
        report["children"] = [
            run(m, 2, expected) for m in ("fork", "spawn", "forkserver")
        ]
        # Another fork child that leaves the thread count to the library,
        # then a bare os.fork().
        report["children"].append(run("fork", None, expected))
        pid = os.fork()
        if pid == 0:
            os._exit(0 if compute(2) == expected else 3)
        deadline = time.time() + 60
        while time.time() < deadline:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            time.sleep(0.05)
        else:
            os.kill(pid, 9)
            status = -1
        report["os_fork_status"] = status
        # The parent still runs threads after all this.
        report["parent_after"] = compute(2) == expected
        print(json.dumps(report))
""")


@pytest.mark.parametrize("scenario", ["threads-first", "serial-first"])
def test_children_finish_with_the_right_answer(scenario, tmp_path):
    script = tmp_path / "parent.py"
    script.write_text(PARENT)
    proc = run_python(str(script), scenario, timeout=400, cwd=tmp_path)
    report = json_report(proc)
    print(report)
    for child in report["children"]:
        assert child["status"] == "ok", child
    assert report["os_fork_status"] == 0
    assert report["parent_after"]
    if scenario == "threads-first" and report["openmp"] and report["parent_os_threads"]:
        # The team really started in the parent: the protection was needed.
        assert report["parent_os_threads"] >= 2
        fork_child = report["children"][0]
        assert fork_child["default_threads"] == 1, "a forked child must run serially"
