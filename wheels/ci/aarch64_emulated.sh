#!/usr/bin/env bash
# Build cropgrad for aarch64 on this x86_64 machine and run its tests under
# QEMU user-mode emulation (no binfmt_misc needed, none is mounted).
#
#   bash wheels/ci/aarch64_emulated.sh            # about 15-20 minutes on 2 cores
#
# 1. tools from Debian (apt-get, as root): qemu-user-static, the aarch64
#    cross compiler and binutils; the arm64 architecture is added to dpkg
#    only to download arm64 packages (nothing arm64 is installed)
# 2. an arm64 sysroot: Debian's arm64 Python 3.11, libgomp and their
#    libraries (apt-get download + dpkg-deb -x), and the test dependencies
#    from PyPI's manylinux aarch64 wheels (pip --platform, binary only),
#    pinned in wheels/ci/aarch64-requirements.txt
# 3. the cross build: the host's Python 3.11 runs setup.py (Cython on the
#    host) with the arm64 Python's sysconfig data and a compiler wrapper
#    (bin/cc-aarch64: the cross gcc with the arm64 Python headers; an
#    executable it links, such as setup.py's OpenMP probe, is wrapped to run
#    under qemu), with CROPGRAD_OPENMP=required
# 4. show_config() under emulation: OpenMP on, simd "neon"
# 5. the aarch64 objects: check_fp_contract.sh --aarch64 (no FMA in any
#    module, with its control; vector arithmetic in the NEON clones only)
# 6. the tests under qemu (the selection of wheels/ci/README.md), pytest's
#    summary line last
#
# AARCH64_PYTEST_ARGS, when set, replaces the test selection (pytest
# arguments, relative to tests/).
# Everything lives in one work directory under /tmp (AARCH64_WORK, default
# /tmp/cropgrad-aarch64), made afresh on every run; nothing is cached
# elsewhere.  Exits non-zero when any step or test fails.
set -euo pipefail

cd "$(dirname "$0")/../.."
repo=$(pwd)
start=$(date +%s)
work=${AARCH64_WORK:-/tmp/cropgrad-aarch64}
host_python=${HOST_PYTHON:-/usr/bin/python3}
requirements=$repo/wheels/ci/aarch64-requirements.txt
step() { echo; echo "=== aarch64 [$(($(date +%s) - start))s] $*"; }
fail() { echo "aarch64_emulated.sh: FAIL: $*" >&2; exit 1; }

# Nothing from the caller's environment may change what is built or tested.
while read -r var; do unset "$var"; done < <(compgen -e | grep -E '^(CIBW_|CROPGRAD_)' || true)
unset PYTHONPATH PIP_REQUIRE_VIRTUALENV

step "1. tools: qemu-user-static, gcc-aarch64-linux-gnu, g++-aarch64-linux-gnu, libc6-dev-arm64-cross"
tools=(qemu-aarch64-static aarch64-linux-gnu-gcc aarch64-linux-gnu-g++ aarch64-linux-gnu-objdump)
missing=0
for t in "${tools[@]}"; do command -v "$t" >/dev/null || missing=1; done
arm64_known=0
dpkg --print-foreign-architectures | grep -qx arm64 && arm64_known=1
if [[ $missing == 1 || $arm64_known == 0 ]]; then
    [[ $(id -u) == 0 ]] || fail "missing tools or dpkg arm64 architecture, and not root to install them"
    dpkg --add-architecture arm64
    apt-get -o DPkg::Lock::Timeout=600 update -q
    DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -q \
        qemu-user-static gcc-aarch64-linux-gnu g++-aarch64-linux-gnu libc6-dev-arm64-cross \
        binutils-aarch64-linux-gnu
fi
"$host_python" -c 'import sys; assert sys.version_info[:2] == (3, 11), sys.version' \
    || fail "$host_python must be Python 3.11 (the arm64 Python is Debian's 3.11)"

rm -rf "$work"
mkdir -p "$work"/{debs,sysroot,bin}
sysroot=$work/sysroot
site=$sysroot/site-packages

step "2. the arm64 sysroot: Debian's python3.11 and libgomp1 with their libraries; PyPI's aarch64 wheels"
# The dependency closure, arm64 packages only; the -dev packages other than
# Python's, and dpkg's own tools, are not needed to run Python.
mapfile -t packages < <(apt-cache depends --recurse --no-recommends --no-suggests \
        --no-conflicts --no-breaks --no-replaces --no-enhances \
        python3.11:arm64 libpython3.11-dev:arm64 libgomp1:arm64 libstdc++6:arm64 \
    | grep -E '^[a-z0-9].*:arm64$' \
    | grep -vE '^(dpkg|tar|install-info|rpcsvc-proto|libc-dev-bin|linux-libc-dev)(:|$)' \
    | grep -vE -- '-dev:arm64$' | sort -u)
packages+=(libpython3.11-dev:arm64)
echo "${#packages[@]} packages: ${packages[*]}"
(cd "$work/debs" && apt-get download -q "${packages[@]}" >/dev/null)
for deb in "$work"/debs/*.deb; do dpkg-deb -x "$deb" "$sysroot"; done
arm_python=$sysroot/usr/bin/python3.11
[[ -x $arm_python ]] || fail "no arm64 python3.11 in the sysroot"
"$host_python" -m pip install -q --disable-pip-version-check --no-compile \
    --target "$site" --platform manylinux_2_28_aarch64 --python-version 3.11 \
    --implementation cp --only-binary=:all: -r "$requirements"

# The launcher: sys.executable of the emulated Python (tests start children
# with it), so it must itself run under qemu.  argv[0] is the launcher.
launcher=$work/bin/python-aarch64
cat >"$launcher" <<EOF
#!/bin/sh
exec qemu-aarch64-static -L "$sysroot" -0 "$launcher" "$arm_python" "\$@"
EOF
chmod +x "$launcher"
# The compiler wrapper: the cross gcc with the arm64 Python's headers first
# (the host's /usr/include/python3.11 is x86_64's; Debian's pyconfig.h
# includes <aarch64-linux-gnu/python3.11/pyconfig.h>, found after the
# cross toolchain's own headers); an executable it links
# (setup.py's OpenMP probe, a test's program) becomes a script that runs it
# under qemu.
# write_wrapper PATH COMPILER: the wrapper around the cross gcc or g++ (the
# C-level API's C++ consumer needs the latter).
write_wrapper() {
cat >"$1" <<EOF
#!/bin/bash
set -e
out= exe=1
args=("\$@")
for ((i = 0; i < \${#args[@]}; i++)); do
    case \${args[i]} in
        -c | -S | -E | -shared | -M | -MM) exe=0 ;;
        -o) out=\${args[i + 1]} ;;
    esac
done
$2 -I"$sysroot/usr/include/python3.11" \\
    -idirafter "$sysroot/usr/include" "\$@"
if [[ \$exe == 1 && -n \$out ]]; then
    mv "\$out" "\$out.aarch64"
    printf '#!/bin/sh\nexec qemu-aarch64-static -L "%s" "%s" "\$@"\n' "$sysroot" "\$out.aarch64" >"\$out"
    chmod +x "\$out"
fi
EOF
chmod +x "$1"
}
cc=$work/bin/cc-aarch64
cxx=$work/bin/cxx-aarch64
write_wrapper "$cc" aarch64-linux-gnu-gcc
write_wrapper "$cxx" aarch64-linux-gnu-g++
sysconfig_name=$(basename "$(ls "$sysroot"/usr/lib/python3.11/_sysconfigdata__*aarch64*.py)" .py)
mkdir -p "$work/sysconfig"
cp "$sysroot/usr/lib/python3.11/$sysconfig_name.py" "$work/sysconfig/"
"$launcher" -c 'import platform, sys; print("emulated:", platform.machine(), sys.version.split()[0], sys.executable)'

step "3. the cross build (host Python $("$host_python" -V 2>&1 | cut -d' ' -f2), CROPGRAD_OPENMP=required)"
"$host_python" -m venv "$work/host-venv"
"$work/host-venv/bin/pip" install -q --disable-pip-version-check \
    "$(grep -E '^Cython==' "$requirements")" "$(grep -E '^setuptools==' "$requirements")"
mkdir -p "$work/src"
git ls-files -z | xargs -0 cp --parents -t "$work/src"
(cd "$work/src" && env CROPGRAD_OPENMP=required CC="$cc" LDSHARED="$cc -shared" \
    _PYTHON_SYSCONFIGDATA_NAME="$sysconfig_name" _PYTHON_HOST_PLATFORM=linux-aarch64 \
    PYTHONPATH="$work/sysconfig" \
    "$work/host-venv/bin/python" setup.py build_ext --inplace -j 2) >"$work/build.log" 2>&1 \
    || { tail -n 40 "$work/build.log"; fail "the cross build"; }
grep -E '^cropgrad: building with OpenMP on' "$work/build.log" || fail "built without OpenMP"
[[ -n $(find "$work/src/cropgrad" -name '*.cpython-311-aarch64-linux-gnu.so') ]] || fail "no aarch64 modules"

# The emulated Python imports this build; compilers it starts (the C-level
# API's consumer) are the wrapper.
export PYTHONPATH=$work/src:$site CC=$cc LDSHARED="$cc -shared" CXX=$cxx \
    LDCXXSHARED="$cxx -shared"
export PYTHONDONTWRITEBYTECODE=1

step "4. show_config() under emulation"
"$launcher" -P -c 'import cropgrad; cropgrad.show_config()' | tee "$work/show_config.txt"
"$launcher" -P -c '
import platform, cropgrad
c = cropgrad.show_config("dicts")
assert platform.machine() == "aarch64", platform.machine()
assert c["openmp"], "OpenMP off"
assert c["simd"] == "neon", c["simd"]
from cropgrad._runtime import simd as _simd
assert _simd.simd_targets() == ["baseline", "neon"], _simd.simd_targets()
' || fail "show_config()"
CROPGRAD_SIMD=baseline "$launcher" -P -c 'import cropgrad; s = cropgrad.show_config("dicts")["simd"]; assert s == "baseline", s' \
    || fail "CROPGRAD_SIMD=baseline does not select the portable code"

step "5. the aarch64 objects: FMA and NEON instruction counts"
cflags=$("$launcher" -P -c 'import cropgrad; print(cropgrad.show_config("dicts")["cflags"])')
CROSS_CC=$cc bash "$repo/wheels/ci/check_fp_contract.sh" --aarch64 "$work/src/cropgrad" "$cflags"

step "6. the tests under qemu"
# See wheels/ci/README.md for what runs and what is left out, and why.
# test_simd.py runs the image gradient's, forward op's and boxes gradient's
# TensorFlow fixtures and bit checks (its SELECTION, both layouts) once per
# target, neon and baseline, in children; the NCHW and forward/boxes files
# run whole here too (on neon).
selection=(
    tests/test_simd.py tests/test_forward_and_boxes.py tests/test_nchw.py
    tests/test_capi.py tests/test_concurrency.py
    tests/test_fork.py tests/test_fuzz.py tests/test_sampling.py tests/test_raw_ops.py
    tests/test_config.py tests/test_jvp_boxes.py tests/test_bfloat16.py
    tests/test_capi_consumers.py tests/test_grid_sample.py
)
# The fuzzer's bounded run: 30 s (its executions floor scales with the
# measured speed of the emulated machine).
export CROPGRAD_FUZZ_SECONDS=30
cd "$work/src/tests"
set +e
# AARCH64_PYTEST_ARGS replaces the selection (to try one test).
if [[ -n ${AARCH64_PYTEST_ARGS:-} ]]; then
    read -r -a args <<<"$AARCH64_PYTEST_ARGS"
else
    args=("${selection[@]/#tests\//}")
fi
"$launcher" -P -m pytest -p no:cacheprovider -q "${args[@]}" \
    2>&1 | tee "$work/pytest.log"
rc=${PIPESTATUS[0]}
set -e
summary=$(grep -E '[0-9]+ (passed|failed|error).* in [0-9.]+s' "$work/pytest.log" | tail -n 1 || true)
echo
echo "aarch64 (qemu user mode): $summary"
echo "aarch64 stage: $(($(date +%s) - start)) s"
[[ $rc == 0 ]] || fail "pytest exited with $rc"
grep -q ' passed' <<<"$summary" || fail "no test passed"
