# cython: language_level=3
#
# The one parallel driver of every op, and the thread policy.
#
# An op cuts its work into independent tasks (each writing its own part of
# the output) and hands them to `run_tasks`, which runs them on the calling
# thread or on an OpenMP team, inside the floating-point environment the
# call asked for.

# A task: `ctx` is the op's plan, `task` the task number, `thread` the
# OpenMP thread number running it (0 on the calling thread), for scratch.
ctypedef void (*task_fn)(void* ctx, Py_ssize_t task, int thread) noexcept nogil

# Below this many element updates a call runs on the calling thread without
# entering OpenMP: waking a thread team costs more than the work.  Read it
# through `serial_work()`, which the tests lower (use_serial_work) so that
# small problems start teams too.
cdef enum:
    SERIAL_WORK = 1 << 17

# How the threads of a team claim tasks from their shared counter: either
# way a worker that wakes late takes fewer tasks instead of holding the call
# with a fixed share.
cdef enum:
    SCHEDULE_STATIC = 0    # tasks of equal cost: runs of consecutive tasks
    SCHEDULE_DYNAMIC = 1   # tasks of uneven cost: one at a time

cdef Py_ssize_t serial_work() noexcept nogil
cdef int resolve_threads(int num_threads) noexcept nogil
cdef int team_size(int requested, Py_ssize_t units) noexcept nogil
cdef void run_tasks(task_fn fn, void* ctx, Py_ssize_t num_tasks, int nthreads,
                    Py_ssize_t work, bint flush, int schedule) noexcept nogil
