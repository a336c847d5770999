#!/usr/bin/env bash
# The extension under AddressSanitizer and UndefinedBehaviorSanitizer, with
# OpenMP on: the core test files and a short fuzz, on teams of 2 threads.
#
#     bash .ci/sanitize.sh          # about 5 minutes on 2 cores, half of it the build
#
# 1. tools: GCC with libasan and libubsan (apt-get install as root when a
#    sanitized program cannot be built)
# 2. a fresh venv with the package built by pip (from a copy of the
#    tracked files) with
#    CFLAGS/LDFLAGS=-fsanitize=address,undefined and CROPGRAD_OPENMP=required
#    (setup.py's OpenMP probe links as the extension does, so the sanitizer
#    runtime does not make the build serial), then its test dependencies
# 3. the core test files from the clone against the installed package,
#    Python started with libasan preloaded (the interpreter itself is not
#    instrumented), 2 OpenMP threads, CI=true (tests/README.md); the
#    property tests with the quick Hypothesis profile.  CFLAGS replaces
#    Python's own, -fwrapv included: a signed overflow is reported
# 4. the NumPy API's fuzz target for SANITIZE_FUZZ_SECONDS (default 30), its
#    calls on teams however small (the serial threshold lowered)
#
# Any report of either sanitizer ends the process with an error (UBSan:
# -fno-sanitize-recover), which fails the test or the fuzz run.
# allocator_may_return_null=1: the tests of unallocatable sizes expect a
# MemoryError, not ASan's report of a huge allocation.  Leak detection is
# off: CPython keeps memory to the end on purpose.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
FUZZ_SECONDS=${SANITIZE_FUZZ_SECONDS:-30}
start=$(date +%s)
fail() { echo "sanitize.sh: FAIL: $*" >&2; exit 1; }
step() { echo; echo "=== [$(($(date +%s) - start))s] $*"; }

work=$(mktemp -d "${TMPDIR:-/tmp}/cropgrad-sanitize.XXXXXX")
# SANITIZE_KEEP=1 keeps the venv and logs (the path is printed).
if [[ ${SANITIZE_KEEP:-0} == 1 ]]; then echo "keeping $work"; else trap 'rm -rf "$work"' EXIT; fi

SANITIZE="-fsanitize=address,undefined"

step "1. GCC with AddressSanitizer and UndefinedBehaviorSanitizer"
probe() {
    printf 'int main(void) { return 0; }\n' >"$work/probe.c"
    gcc $SANITIZE "$work/probe.c" -o "$work/probe" 2>/dev/null && "$work/probe"
}
if ! command -v gcc >/dev/null || ! probe; then
    [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null \
        || fail "no gcc with libasan and libubsan, and not root to install them"
    apt-get -o DPkg::Lock::Timeout=600 update -qq
    gcc_major=$(gcc -dumpversion 2>/dev/null | cut -d. -f1 || true)
    DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq \
        --no-install-recommends gcc ${gcc_major:+libgcc-${gcc_major}-dev} >/dev/null
    probe || fail "gcc cannot build a sanitized program"
fi
libasan=$(gcc -print-file-name=libasan.so)
[[ -f $libasan ]] || fail "gcc has no libasan.so ($libasan)"
echo "$(gcc --version | head -n 1); $libasan"

step "2. the package built with $SANITIZE, OpenMP required"
# From a copy of the tracked files: pip builds in the source tree, and the
# sanitized objects it leaves in build/ must not reach a later in-place
# build of the clone.
mkdir "$work/src"
git ls-files -z | xargs -0 cp --parents -t "$work/src"
"$PYTHON" -m venv "$work/venv"
py=$work/venv/bin/python
"$py" -m pip install -q --disable-pip-version-check --upgrade pip >/dev/null
CC=gcc CFLAGS="$SANITIZE -fno-sanitize-recover=undefined -fno-omit-frame-pointer -g" \
    LDFLAGS="$SANITIZE" CROPGRAD_OPENMP=required \
    "$py" -m pip install -v --disable-pip-version-check --no-cache-dir "$work/src[test]" \
    >"$work/build.log" 2>&1 || { tail -n 40 "$work/build.log"; fail "the sanitized build"; }
grep -E '^ *cropgrad: building with OpenMP on' "$work/build.log" \
    || fail "the sanitized build is not built with OpenMP"
so=$(cd "$work" && LD_PRELOAD=$libasan ASAN_OPTIONS=detect_leaks=0 "$py" -P -c \
    'import cropgrad._runtime.parallel as p; print(p.__file__)')
linked=$(ldd "$so")
[[ $linked == *libasan* ]] || fail "$so is not linked with libasan: $linked"
[[ $linked == *libgomp* ]] || fail "$so is not linked with libgomp: $linked"

export LD_PRELOAD=$libasan
export ASAN_OPTIONS=detect_leaks=0:allocator_may_return_null=1:detect_odr_violation=0
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
export OMP_NUM_THREADS=2

step "3. the core test files (2 threads; quick Hypothesis profile)"
"$py" -P -c 'import cropgrad; cropgrad.show_config()'
tests=(
    tests/test_grad_image.py tests/test_forward_and_boxes.py tests/test_jvp_boxes.py
    tests/test_nchw.py tests/test_bfloat16.py tests/test_sampling.py
    tests/test_validation.py tests/test_raw_ops.py tests/test_warnings.py
    tests/test_tuning.py tests/test_properties.py tests/test_concurrency.py
    tests/test_roi_align.py tests/test_roi_align_boxes.py tests/test_grid_sample.py
    "tests/test_huge.py::test_sizes_that_cannot_be_allocated_fail_before_any_work"
)
set +e
CI=true CROPGRAD_HYPOTHESIS_PROFILE=quick "$py" -P -m pytest -q -p no:cacheprovider \
    "${tests[@]}" -k "not onnx_runtime" 2>&1 | tee "$work/pytest.log"
rc=${PIPESTATUS[0]}
set -e
summary=$(grep -E '^=* ?[0-9]+ (passed|failed).* in [0-9.]+s' "$work/pytest.log" | tail -n 1 || true)
[[ $rc == 0 && $summary == *passed* ]] || fail "pytest under the sanitizers exited with $rc: ${summary:-no summary}"

step "4. the fuzz target for $FUZZ_SECONDS s, calls on teams of 2"
"$py" -P -c '
import runpy, sys
from cropgrad._runtime import parallel
parallel.use_serial_work(0)
sys.argv = ["fuzz_target.py", *sys.argv[1:]]
try:
    runpy.run_path("tests/fuzz_target.py", run_name="__main__")
finally:
    print("teams started:", parallel.teams_started())
' --seconds "$FUZZ_SECONDS" --corpus tests/fuzz_corpus --stats "$work/fuzz.json" \
    >"$work/fuzz.log" 2>&1 || { tail -n 60 "$work/fuzz.log"; fail "the fuzz run"; }
teams=$(sed -n 's/^teams started: \([0-9]*\)$/\1/p' "$work/fuzz.log")
executions=$("$PYTHON" -c 'import json, sys; print(json.load(open(sys.argv[1]))["executions"])' "$work/fuzz.json")
[[ ${teams:-0} -gt 0 ]] || { tail -n 20 "$work/fuzz.log"; fail "the fuzz run started no team"; }

step "done"
echo "sanitize: pytest: $summary"
echo "sanitize: fuzz: $executions executions in $FUZZ_SECONDS s, $teams teams started, no report"
echo "sanitize: $(($(date +%s) - start)) s"
