#!/usr/bin/env bash
# Build and test cropgrad on the other CPython versions the wheels promise
# that this machine has: 3.12 and 3.13 (pyenv), each in a fresh venv.
#
#   bash wheels/ci/other_pythons.sh           # about 4-5 minutes per version on 2 cores
#
# For each version: a venv under a temporary directory, `pip install
# .[test]` from a copy of the tracked files (the sdist's files: a real
# build of every module with that version's headers and Cython's code for
# it), then the tests of OTHER_PYTHONS_TESTS (default below, chosen in
# wheels/ci/README.md) from that copy, against the installed package.
# An interpreter that is missing is a failure, never a skip: CI machines of
# this kind have both.  PYTHON_3_12 / PYTHON_3_13 name other interpreters.
# Prints each version's pytest summary line; exits non-zero on any failure.
set -euo pipefail

cd "$(dirname "$0")/../.."
repo=$(pwd)
start=$(date +%s)
pythons=(
    "3.12=${PYTHON_3_12:-/root/.pyenv/versions/3.12.1/bin/python3.12}"
    "3.13=${PYTHON_3_13:-/root/.pyenv/versions/3.13.0/bin/python3.13}"
)
# What runs on each version: the TensorFlow fixtures of the three ops (every
# dtype, both methods, both layouts), validation, the build facts, the
# type stubs (mypy), the C-level API's compiled consumer, threads and fork.
default_tests="tests/test_grad_image.py tests/test_forward_and_boxes.py tests/test_nchw.py
tests/test_validation.py tests/test_build.py tests/test_config.py tests/test_stubs.py
tests/test_capi.py tests/test_concurrency.py tests/test_fork.py tests/test_sampling.py
tests/test_jvp_boxes.py tests/test_bfloat16.py tests/test_capi_consumers.py
tests/test_grid_sample.py"
read -r -a tests <<<"$(echo ${OTHER_PYTHONS_TESTS:-$default_tests})"

while read -r var; do unset "$var"; done < <(compgen -e | grep -E '^(CIBW_|CROPGRAD_)' || true)
unset PYTHONPATH PIP_REQUIRE_VIRTUALENV

for entry in "${pythons[@]}"; do
    version=${entry%%=*}
    python=${entry#*=}
    if [[ ! -x $python ]] || ! "$python" -c "import sys; assert sys.version.startswith('$version.')"; then
        echo "other_pythons.sh: FAIL: no CPython $version at $python (set PYTHON_${version/./_})" >&2
        exit 1
    fi
done

work=$(mktemp -d "${TMPDIR:-/tmp}/cropgrad-pythons.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir "$work/src"
git ls-files -z | xargs -0 cp --parents -t "$work/src"

summaries=()
for entry in "${pythons[@]}"; do
    version=${entry%%=*}
    python=${entry#*=}
    echo
    echo "=== [$(($(date +%s) - start))s] CPython $version ($python)"
    venv=$work/venv-$version
    "$python" -m venv "$venv"
    "$venv/bin/pip" install -q --disable-pip-version-check "$work/src[test]" \
        >"$work/install-$version.log" 2>&1 \
        || { tail -n 40 "$work/install-$version.log"; echo "other_pythons.sh: FAIL: install on $version" >&2; exit 1; }
    "$venv/bin/python" -P -c "
import sys, cropgrad
c = cropgrad.show_config('dicts')
print(sys.version.split()[0], cropgrad.__file__, 'openmp', c['openmp'], 'simd', c['simd'])
assert 'site-packages' in cropgrad.__file__ and c['openmp']
"
    set +e
    (cd "$work/src" && "$venv/bin/python" -P -m pytest -q -p no:cacheprovider "${tests[@]}") \
        2>&1 | tee "$work/pytest-$version.log"
    rc=${PIPESTATUS[0]}
    set -e
    line=$(grep -E '^=* ?[0-9]+ (passed|failed).* in [0-9.]+s' "$work/pytest-$version.log" | tail -n 1 || true)
    summaries+=("CPython $version: ${line:-no summary line} (pytest exit $rc)")
    if [[ $rc -ne 0 ]] || [[ $line != *passed* ]]; then
        printf '%s\n' "${summaries[@]}"
        echo "other_pythons.sh: FAIL: the tests on $version" >&2
        exit 1
    fi
done
echo
echo "==================== other_pythons.sh summary ===================="
printf '%s\n' "${summaries[@]}"
echo "time: $(($(date +%s) - start)) s"
