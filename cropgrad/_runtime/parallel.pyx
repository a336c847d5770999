# cython: language_level=3
"""The parallel driver and thread policy of cropgrad's kernels (private).

Thread policy
-------------
- ``num_threads == 0`` means the library's default: OpenMP's
  ``omp_get_max_threads()`` read at call time, so ``OMP_NUM_THREADS`` and
  threadpoolctl apply.
- A team never has more threads than tasks, nor more than
  ``THREADS_PER_PROC`` per available processor: more only share the same
  cores, and a team the system cannot start ends the process inside the
  OpenMP runtime, where no error can be reported.
- Idle workers: after a parallel region OpenMP's workers keep spinning for
  a while in case another region follows, burning a core that the
  caller's next step (NumPy, another library) would use.  Unless the user
  chose a policy (``OMP_WAIT_POLICY``, ``GOMP_SPINCOUNT`` or
  ``KMP_BLOCKTIME`` set), cropgrad shortens the wait: GNU OpenMP's spin
  count is set when the runtime loads (``cropgrad/_runtime/wait_policy.py``), and
  LLVM's OpenMP gets ``kmp_set_blocktime(0)`` on the calling thread before
  each team starts.
- fork(): GNU OpenMP keeps a thread pool that does not survive ``fork()``; a
  child forked after this process ran a team would hang in its next
  parallel region.  A ``pthread_atfork`` handler marks such a child, which
  then runs every call on its own thread and makes no OpenMP call at all.
"""

from cython.parallel cimport parallel, threadid
from libc.stdlib cimport free, malloc

from cropgrad._kernels.cdefs cimport cg_fpenv_enter, cg_fpenv_leave
from cropgrad._runtime.openmp cimport omp_get_max_threads, omp_get_num_procs


cdef extern from *:
    """
    #if !defined(_WIN32)
    #include <pthread.h>
    #endif
    /* Set once a team of more than one thread has run in this process. */
    static volatile int cg_threads_used = 0;
    /* Set in a child forked after that: it must not enter OpenMP. */
    static volatile int cg_serial_only = 0;
    static void cg_after_fork_in_child(void) {
        if (cg_threads_used) cg_serial_only = 1;
    }
    static int cg_install_fork_guard(void) {
    #if !defined(_WIN32)
        return pthread_atfork(NULL, NULL, cg_after_fork_in_child);
    #else
        return 0;
    #endif
    }
    """
    int cg_threads_used
    int cg_serial_only
    int cg_install_fork_guard() noexcept nogil

cdef extern from *:
    """
    /* LLVM's OpenMP: workers sleep as soon as a region ends on this thread
       (its default keeps them spinning for 200 ms).  GNU OpenMP has no such
       call: its spin count is set when it loads (see wait_policy.py). */
    #if defined(_OPENMP) && defined(KMP_VERSION_MAJOR)
    static void cg_short_wait(void) { kmp_set_blocktime(0); }
    #else
    static void cg_short_wait(void) { }
    #endif
    """
    void cg_short_wait() noexcept nogil

cdef extern from *:
    """
    /* Claim the next `n` tasks: returns *next and adds `n`, atomically.
       (MSVC's OpenMP 2.0 has no atomic capture.) */
    #if defined(_MSC_VER)
    #include <intrin.h>
    static Py_ssize_t cg_claim(Py_ssize_t* next, Py_ssize_t n) {
    #if defined(_WIN64)
        return (Py_ssize_t)_InterlockedExchangeAdd64((__int64 volatile*)next, n);
    #else
        return (Py_ssize_t)_InterlockedExchangeAdd((long volatile*)next, n);
    #endif
    }
    #else
    static Py_ssize_t cg_claim(Py_ssize_t* next, Py_ssize_t n) {
        return __atomic_fetch_add(next, n, __ATOMIC_RELAXED);
    }
    #endif
    """
    Py_ssize_t cg_claim(Py_ssize_t* next, Py_ssize_t n) noexcept nogil

cdef extern from *:
    """
    /* For the tests' hooks (record_claims, make_late): count a task's runs
       from any thread, and make a worker late. */
    static void cg_count(int* n) {
    #pragma omp atomic
        (*n)++;
    }
    #if defined(_WIN32)
    #ifndef NOMINMAX
    #define NOMINMAX
    #endif
    #ifndef WIN32_LEAN_AND_MEAN
    #define WIN32_LEAN_AND_MEAN
    #endif
    #include <windows.h>
    static void cg_sleep_ms(int ms) { Sleep((DWORD)ms); }
    #else
    #include <errno.h>
    #include <time.h>
    static void cg_sleep_ms(int ms) {
        struct timespec left;
        left.tv_sec = ms / 1000;
        left.tv_nsec = (long)(ms % 1000) * 1000000L;
        while (nanosleep(&left, &left) != 0 && errno == EINTR) { }
    }
    #endif
    """
    void cg_count(int* n) noexcept nogil
    void cg_sleep_ms(int ms) noexcept nogil


cdef enum:
    THREADS_PER_PROC = 4
    # Claims per thread of a team for tasks of equal cost, which are
    # claimed in runs of consecutive tasks: one claim per task cost the
    # forward op (tens of thousands of crop rows of a microsecond) a fifth
    # of its time on two threads, and a late worker still finds all but
    # 1 / CLAIMS_PER_THREAD of its share free.
    CLAIMS_PER_THREAD = 16


if cg_install_fork_guard() != 0:
    raise ImportError("cropgrad: could not install its fork() handler")

# Shorten the workers' wait unless the user set a policy of their own (as
# the package found the environment before it set GOMP_SPINCOUNT itself).
from cropgrad._runtime import wait_policy as _wait_policy

cdef bint short_wait = not _wait_policy.user_policy

# The serial threshold in use (see parallel.pxd); for the tests, the size
# of the last team a call ran (1: the calling thread), how many times tasks
# were run and how many of those on a team of two or more.  Plain counters
# written by the calling thread: exact while no other thread calls
# cropgrad meanwhile.
cdef Py_ssize_t _serial_work = SERIAL_WORK
# The most threads a team may have; 0: THREADS_PER_PROC per processor.
cdef Py_ssize_t _team_limit = 0
cdef int _last_team = 1
cdef Py_ssize_t _task_runs = 0
cdef Py_ssize_t _teams_started = 0

# The tests' view of how tasks were claimed: for the last run of tasks
# while recording is on, how many times each task ran and the thread that
# last ran it; and a worker made late (it sleeps before claiming its first
# task).  Set only by the calling thread between calls.
cdef bint _recording = False
cdef int* _claim_counts = NULL
cdef int* _claim_threads = NULL
cdef Py_ssize_t _claim_tasks = 0
cdef Py_ssize_t _claim_capacity = 0
cdef int _late_thread = -1
cdef int _late_ms = 0


cdef bint _start_recording(Py_ssize_t num_tasks) noexcept nogil:
    """Clear the record for a run of `num_tasks` tasks; False when not
    recording (or when the record has no room: `recorded()` says so)."""
    global _claim_counts, _claim_threads, _claim_tasks, _claim_capacity
    cdef Py_ssize_t t
    if not _recording:
        return False
    _claim_tasks = num_tasks
    if num_tasks > _claim_capacity:
        free(_claim_counts)
        free(_claim_threads)
        _claim_counts = <int*>malloc(<size_t>num_tasks * sizeof(int))
        _claim_threads = <int*>malloc(<size_t>num_tasks * sizeof(int))
        _claim_capacity = num_tasks
        if _claim_counts == NULL or _claim_threads == NULL:
            _claim_capacity = 0
            _claim_tasks = -1
            return False
    for t in range(num_tasks):
        _claim_counts[t] = 0
        _claim_threads[t] = -1
    return True


cdef inline void _record(Py_ssize_t t, int thread) noexcept nogil:
    cg_count(&_claim_counts[t])
    _claim_threads[t] = thread


cdef Py_ssize_t serial_work() noexcept nogil:
    """Below this many element updates a call runs on the calling thread."""
    return _serial_work


cdef int resolve_threads(int num_threads) noexcept nogil:
    """The thread count a call asking for `num_threads` (0: default) gets."""
    if cg_serial_only:
        return 1
    if num_threads <= 0:
        return omp_get_max_threads()
    return num_threads


cdef int team_size(int requested, Py_ssize_t units) noexcept nogil:
    """Threads to start for `units` independent tasks (at least 1).

    Only asks OpenMP for the processor count when ``requested > 1``, so a
    forked child running on one thread makes no OpenMP call.
    """
    cdef Py_ssize_t n = requested, limit
    if n <= 1 or cg_serial_only:
        return 1
    if n > units:
        n = units
    limit = _team_limit
    if limit <= 0:
        limit = <Py_ssize_t>THREADS_PER_PROC * omp_get_num_procs()
    if n > limit:
        n = limit
    return <int>max(n, 1)


cdef void run_tasks(task_fn fn, void* ctx, Py_ssize_t num_tasks, int nthreads,
                    Py_ssize_t work, bint flush, int schedule) noexcept nogil:
    """Run tasks ``0 .. num_tasks - 1`` of `fn`, each exactly once.

    On a team every thread claims the next tasks from a shared counter as
    soon as it is free (one at a time, or runs of consecutive tasks of
    equal cost), so a worker that wakes late or is descheduled takes fewer
    tasks instead of holding the call with a fixed share.  Which thread
    runs a task never changes the bits: every output element is summed by
    one task.

    Parameters
    ----------
    fn, ctx : the task function and the op's plan.
    num_tasks : number of tasks.
    nthreads : int
        Upper bound on the team (already resolved by `resolve_threads`).
    work : Py_ssize_t
        Element updates of the whole call: below `serial_work()` the tasks
        run on the calling thread.
    flush : bool
        Run every task with flush-to-zero and denormals-are-zero.
    schedule : SCHEDULE_STATIC or SCHEDULE_DYNAMIC
        Tasks of equal cost (claimed in runs, `CLAIMS_PER_THREAD` a
        thread) or of uneven cost (claimed one at a time).
    """
    # (t and first start at 0: the parallel block copies them in.)
    cdef Py_ssize_t t = 0, first = 0, chunk = 1
    cdef Py_ssize_t claimed = 0  # the next task nobody has claimed
    cdef int team = 1
    cdef bint record
    global _last_team, _task_runs, _teams_started
    if nthreads > 1 and work >= _serial_work:
        team = team_size(nthreads, num_tasks)
    _last_team = team
    _task_runs += 1
    if team > 1:
        _teams_started += 1
    record = _start_recording(num_tasks)
    if team <= 1:
        cg_fpenv_enter(flush)
        for t in range(num_tasks):
            if record:
                _record(t, 0)
            fn(ctx, t, 0)
        cg_fpenv_leave(flush)
        return
    global cg_threads_used
    cg_threads_used = 1
    if schedule == SCHEDULE_STATIC:
        chunk = max(num_tasks // (<Py_ssize_t>team * CLAIMS_PER_THREAD), 1)
    if short_wait:
        cg_short_wait()
    # Not a prange: Cython makes its loop variable firstprivate and
    # lastprivate, for which GCC puts a barrier before the loop, so no
    # thread would start before the last one arrived.
    with parallel(num_threads=team):
        cg_fpenv_enter(flush)
        if _late_ms > 0 and threadid() == _late_thread:
            cg_sleep_ms(_late_ms)
        first = cg_claim(&claimed, chunk)
        while first < num_tasks:
            for t in range(first, min(first + chunk, num_tasks)):
                if record:
                    _record(t, threadid())
                fn(ctx, t, threadid())
            first = cg_claim(&claimed, chunk)
        cg_fpenv_leave(flush)


def use_serial_work(Py_ssize_t work):
    """Run calls of fewer than `work` element updates on the calling thread
    from now on (``SERIAL_WORK``: the default); returns the previous value.
    For the tests, which lower it so that small problems start teams: the
    bits never depend on it.  Not thread-safe: no call may run meanwhile."""
    global _serial_work
    previous = _serial_work
    _serial_work = max(work, 0)
    return previous


def use_team_limit(Py_ssize_t limit):
    """Let teams have up to `limit` threads from now on (0: the default,
    ``THREADS_PER_PROC`` per processor OpenMP reports); returns the previous
    value.  For the tests, which ask for teams of up to 8 threads whatever
    the processor count (LLVM's OpenMP may report one processor where GNU's
    reports all).  Not thread-safe: no call may run meanwhile."""
    global _team_limit
    previous = _team_limit
    _team_limit = max(limit, 0)
    return previous


def last_team():
    """The threads of the last team a call ran (1: the calling thread), for
    the tests (a call on another thread may have changed it)."""
    return _last_team


def task_runs():
    """How many times a call has run its tasks (on any team) in this
    process, for the tests: unchanged by a call that did no work."""
    return _task_runs


def teams_started():
    """How many of those runs started a team of two threads or more."""
    return _teams_started


def default_threads():
    """The thread count a call with ``num_threads=None`` uses now."""
    return resolve_threads(0)


def shortens_wait():
    """Whether cropgrad shortened the idle wait of its OpenMP workers."""
    return bool(short_wait)


def record_claims(bint on):
    """Record how each later run of tasks is claimed (see `recorded`), or
    stop; returns the previous setting.  For the tests: not thread-safe, no
    call may run meanwhile."""
    global _recording
    previous = bool(_recording)
    _recording = on
    return previous


def recorded():
    """``(counts, threads)`` of the last run of tasks made while recording:
    how many times each task ran, and the OpenMP thread number that ran it
    (0: the calling thread), one entry a task; None when recording could
    not allocate its record."""
    if _claim_tasks < 0:
        return None
    counts = [_claim_counts[t] for t in range(_claim_tasks)]
    threads = [_claim_threads[t] for t in range(_claim_tasks)]
    return counts, threads


def make_late(int thread, int ms):
    """Thread number `thread` of every later team sleeps `ms` milliseconds
    before it claims its first task (``ms == 0``: no thread is late), as a
    worker that wakes late or is descheduled would; returns the previous
    ``(thread, ms)``.  For the tests: not thread-safe, no call may run
    meanwhile."""
    global _late_thread, _late_ms
    previous = (_late_thread, _late_ms)
    _late_thread = thread
    _late_ms = max(ms, 0)
    return previous


cdef void _no_work(void* ctx, Py_ssize_t task, int thread) noexcept nogil:
    pass


def run_empty_tasks(Py_ssize_t num_tasks, int nthreads, bint equal_cost=False):
    """Run `num_tasks` tasks that do nothing on a team of up to `nthreads`
    threads, however small the work, scheduled as tasks of equal cost or
    not; returns the team's size.  For the tests of how tasks are claimed
    (`record_claims`, `make_late`)."""
    cdef int schedule = SCHEDULE_STATIC if equal_cost else SCHEDULE_DYNAMIC
    with nogil:
        run_tasks(_no_work, NULL, num_tasks, resolve_threads(nthreads),
                  _serial_work, False, schedule)
    return _last_team


def serial_only():
    """Whether this process is a child forked after threads ran."""
    return bool(cg_serial_only)
