#!/usr/bin/env bash
# Prove on a Linux x86_64 machine without a container engine what can be
# proved about cropgrad's wheels (wheels/ci/README.md lists what cannot).
#
#   bash wheels/ci/verify_local.sh
#
# 1. tools: a fresh virtual environment with wheels/ci/requirements.txt; the
#    aarch64 cross compiler (and clang + LLVM libomp for step 11) from
#    Debian's packages when missing and we are root
# 2. validate-pyproject on pyproject.toml and wheels/ci/cibuildwheel.toml
#    (plus a broken config that must be rejected); the workflow against
#    GitHub's schema (check-jsonschema)
# 3. cibuildwheel --print-build-identifiers for linux x86_64/aarch64 and
#    macos x86_64/arm64, checked against what we mean to ship; each build's
#    resolved options (wheels/ci/check_build_options.py)
# 4. the sdist, checked: sources, tests and fixtures in, generated C out
# 5. a wheel built from the unpacked sdist with CROPGRAD_OPENMP=required;
#    the generated C is checked for the free-threading marker
# 6. the repair-wheel-command of wheels/ci/cibuildwheel.toml: auditwheel
#    repair (bundles libgomp), then bundle_licenses.py (appends libgomp's
#    licence to the wheel's LICENSE); auditwheel show; the licence check,
#    with controls
# 7. check-wheel-contents, twine check --strict, our own content rules
# 8. the repaired wheel installed in a fresh venv, the tests that depend on
#    the build run from a temporary directory (wheels/ci/test_wheel.py:
#    show_config first, fails without OpenMP)
# 9. FMA check of the x86_64 extension and of the aarch64 code
#    (wheels/ci/check_fp_contract.sh)
# 10. the serial build (CROPGRAD_OPENMP=0) from the sdist, tested with
#    CROPGRAD_EXPECT_SERIAL=1
# 11. setup.py's macOS flags (-Xpreprocessor -fopenmp, -lomp, libomp in a
#    prefix given by CPPFLAGS/LDFLAGS) with clang and LLVM's libomp, tested;
#    the kernels compiled for arm64-apple-macos11 (check_apple_arm64.sh)
#
# Environment: PYTHON (default python3), VERIFY_WORK (work directory,
# default a new temporary one, removed at the end unless VERIFY_KEEP=1).
# Takes about 5-10 minutes on 2 cores, most of it compiling.
set -euo pipefail

cd "$(dirname "$0")/../.."
repo=$(pwd)
start=$(date +%s)
python=${PYTHON:-python3}
work=${VERIFY_WORK:-$(mktemp -d "${TMPDIR:-/tmp}/cropgrad-verify.XXXXXX")}
mkdir -p "$work"
config=wheels/ci/cibuildwheel.toml

# Nothing from the caller's environment may change what is built or tested.
while read -r var; do unset "$var"; done < <(compgen -e | grep -E '^(CIBW_|CROPGRAD_)' || true)
unset PYTHONPATH PIP_REQUIRE_VIRTUALENV

summary=()
tests_passed=0
note() { summary+=("$1"); }
step() { echo; echo "=== [$(($(date +%s) - start))s] $*"; }
fail() { echo "verify_local.sh: FAIL: $*" >&2; exit 1; }
finish() {
    local rc=$?
    echo
    echo "==================== verify_local.sh summary ===================="
    local line
    for line in ${summary[@]+"${summary[@]}"}; do echo "  $line"; done
    echo "  work directory: $work$([[ ${VERIFY_KEEP:-0} == 1 ]] && echo " (kept)" || echo " (removed)")"
    echo "  total runtime: $(($(date +%s) - start))s"
    if [[ $rc -eq 0 ]]; then
        echo "verify_local.sh: all steps passed"
        echo "wheels: $tests_passed passed, 0 failed"
    else
        echo "verify_local.sh: FAILED (exit $rc); see the step above"
    fi
    [[ ${VERIFY_KEEP:-0} == 1 ]] || rm -rf "$work"
    exit "$rc"
}
trap finish EXIT

# run_tests VENV_PYTHON SOURCE_TREE LOG [ENV=VALUE...] [-- PYTEST_ARGS...]:
# the test suite of SOURCE_TREE against the package installed in
# VENV_PYTHON's environment, from a temporary directory holding only tests/,
# pyproject.toml, README.md and the runner (what cibuildwheel's test-sources
# copy), with PYTHONSAFEPATH=1.  Adds the passed count to tests_passed.
run_tests() {
    local py=$1 tree=$2 log=$3
    shift 3
    local envs=() pytest_args=()
    while (($#)) && [[ $1 != -- ]]; do envs+=("$1"); shift; done
    (($#)) && shift
    pytest_args=("$@")
    local dir
    dir=$(mktemp -d "$work/run.XXXXXX")
    cp -r "$tree/tests" "$tree/pyproject.toml" "$tree/README.md" "$dir/"
    cp "$repo/wheels/ci/test_wheel.py" "$dir/"
    # The adapters' tests need JAX and PyTorch, which these environments
    # leave out (.ci/run runs them, with both installed, before this script).
    (cd "$dir" && env PYTHONSAFEPATH=1 "${envs[@]}" "$py" test_wheel.py tests -q \
        --ignore=tests/test_jax.py --ignore=tests/test_torch.py "${pytest_args[@]}") 2>&1 | tee "$log"
    local passed
    passed=$(tail -n 5 "$log" | grep -Eo '[0-9]+ passed' | tail -n 1 | cut -d' ' -f1)
    [[ -n $passed && $passed -gt 0 ]] || fail "no test passed ($log)"
    tests_passed=$((tests_passed + passed))
    last_passed=$passed
}

# What the installed wheel's run (step 8) leaves out: the files that do not
# depend on how the extension was built (the pure-Python references, the
# documentation, the command line, the benchmark, the generated files, the
# signatures) and the long randomised ones (the fuzzers, the Hypothesis
# properties, the huge inputs), which .ci/run's README test command runs on
# the same sources (and its sanitize stage the properties and a fuzzing run).  The serial and
# macOS-flags builds (steps 10 and 11) differ from step 8's wheel in
# threading and compiler only: they also leave out the stubs, which step 8
# checks on the installed wheel.  Every kernel's fixtures, bit checks and
# thread counts, validation, the C-level API and its consumers run on all
# three builds.
wheel_ignore=()
for name in reference reference_roi_align reference_grid_sample docs main bench \
    generated signatures fuzz fuzz_capi properties huge; do
    wheel_ignore+=("--ignore=tests/test_$name.py")
done
other_builds_ignore=("${wheel_ignore[@]}" --ignore=tests/test_stubs.py)

# --------------------------------------------------------------------------
step "1. tools"
"$python" -m venv "$work/tools"
tools="$work/tools/bin"
"$tools/python" -m pip install -q --disable-pip-version-check -r wheels/ci/requirements.txt
export PATH="$tools:$PATH"

apt_wanted=()
# The cross compiler's C library headers are only "recommended": ask for them.
if ! command -v aarch64-linux-gnu-gcc >/dev/null || [[ ! -e /usr/aarch64-linux-gnu/include/stdio.h ]]; then
    apt_wanted+=(gcc-aarch64-linux-gnu libc6-dev-arm64-cross)
fi
llvm_libomp() { compgen -G "/usr/lib/llvm-*/lib/libomp.so" | sort -V | tail -n 1 || true; }
if ! command -v clang >/dev/null || [[ -z $(llvm_libomp) ]]; then apt_wanted+=(clang libomp-dev); fi
if [[ ${#apt_wanted[@]} -gt 0 ]]; then
    if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null; then
        echo "installing from Debian: ${apt_wanted[*]}"
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
            "${apt_wanted[@]}" >/dev/null
    else
        echo "not root or no apt-get: cannot install ${apt_wanted[*]}"
    fi
fi
command -v aarch64-linux-gnu-gcc >/dev/null \
    || fail "aarch64-linux-gnu-gcc is needed for the FMA check (apt-get install gcc-aarch64-linux-gnu)"
note "tools: $("$tools/python" -m pip list --format=freeze 2>/dev/null | grep -iE '^(cibuildwheel|auditwheel|build)==' | tr '\n' ' ')$(aarch64-linux-gnu-gcc --version | head -n 1)"

# --------------------------------------------------------------------------
step "2. validate-pyproject"
validate-pyproject pyproject.toml "$config"
printf '[tool.cibuildwheel]\narchs = 5\n' >"$work/broken.toml"
if validate-pyproject "$work/broken.toml" >/dev/null 2>&1; then
    fail "validate-pyproject accepted a broken cibuildwheel config: it does not check the schema"
fi
check-jsonschema --builtin-schema vendor.github-workflows .github/workflows/wheels.yml
note "validate-pyproject: pyproject.toml and $config valid (a broken config is rejected); .github/workflows/wheels.yml valid (check-jsonschema)"

# --------------------------------------------------------------------------
step "3. build identifiers"
for target in linux:x86_64 linux:aarch64 macos:x86_64 macos:arm64; do
    platform=${target%%:*}
    arch=${target##*:}
    ids=$(CIBW_ARCHS=$arch cibuildwheel --print-build-identifiers --platform "$platform" \
        --config-file "$config" . | tr '\n' ' ')
    ids=${ids% }
    echo "$platform $arch: $ids"
    for id in $ids; do
        [[ $id == cp3*-*_"$arch" ]] || fail "unexpected identifier $id for $platform $arch"
        [[ $id != *musllinux* ]] || fail "musllinux is meant to be skipped: $id"
        [[ $id != cp3[0-9]-* && $id != cp310-* ]] || fail "Python < 3.11 selected: $id"
    done
    for want in cp311- cp312- cp313- cp314- cp314t-; do
        [[ " $ids " == *" $want"* ]] || fail "$platform $arch: no $want* build"
    done
    note "build ids $platform/$arch: $ids"
done
# How each build is configured once the overrides are merged.
python wheels/ci/check_build_options.py "$config"
note "build options: OpenMP required everywhere, manylinux_2_28 images, macOS targets 10.15 (x86_64) / 11.0 (arm64) with their own libomp prefix"

# --------------------------------------------------------------------------
step "4. sdist"
python -m build --sdist --outdir "$work/dist" . >"$work/sdist.log" 2>&1 \
    || { cat "$work/sdist.log"; fail "sdist build"; }
sdist=$(ls "$work"/dist/*.tar.gz)
tar -tzf "$sdist" | sed 's|^[^/]*/||' | grep -v '/$' | sort >"$work/sdist.txt"
cat "$work/sdist.txt"
if git -C "$repo" rev-parse --git-dir >/dev/null 2>&1; then
    expected=$(git -C "$repo" ls-files cropgrad tests docs README.md LICENSE CHANGELOG.md \
        DEVELOPING.md pyproject.toml setup.py MANIFEST.in benchmarks/README.md \
        'benchmarks/*.py' benchmarks/cropgrad_bench benchmarks/asv.conf.json \
        benchmarks/asv_benchmarks)
else
    expected=$(cd "$repo" && find cropgrad tests -type f \( -name '*.py' -o -name '*.pyx' -o -name '*.pxd' \
        -o -name '*.pxi' -o -name '*.h' -o -name '*.pyi' -o -name '*.npz' -o -name 'py.typed' \) -not -path '*/__pycache__/*')
fi
for f in $expected; do
    grep -qxF "$f" "$work/sdist.txt" || fail "the sdist lacks $f"
done
# Generated files: C, objects and reports that are not tracked sources (the
# C consumer of the header, tests/capi_c_consumer/, is one).
if grep -E '\.(c|so|pyd|html|o)$' "$work/sdist.txt" | grep -vxF -e "$expected"; then
    fail "the sdist holds generated files (above)"
fi
note "sdist: $(basename "$sdist"), $(stat -c %s "$sdist") bytes, $(wc -l <"$work/sdist.txt") files; all tracked sources and tests in, no generated C"

# --------------------------------------------------------------------------
step "5. wheel from the sdist (CROPGRAD_OPENMP=required)"
mkdir -p "$work/src-omp"
tar -xzf "$sdist" -C "$work/src-omp"
src_omp=$(echo "$work"/src-omp/*/)
CROPGRAD_OPENMP=required python -m build --wheel --outdir "$work/dist-omp" "$src_omp" \
    >"$work/wheel-omp.log" 2>&1 || { tail -n 40 "$work/wheel-omp.log"; fail "wheel build"; }
grep -E '^cropgrad: building with OpenMP on' "$work/wheel-omp.log" || fail "not built with OpenMP"
wheel=$(ls "$work"/dist-omp/*.whl)
for generated in "$src_omp"/cropgrad/*.c; do
    python wheels/ci/check_freethreading.py "$generated"
done
# Control: a module generated without the directive must fail that check.
printf 'def f(x):\n    return x + 1\n' >"$work/control.pyx"
cython -3 "$work/control.pyx" -o "$work/control.c" >/dev/null
python wheels/ci/check_freethreading.py "$work/control.c" --expect-gil-used
note "wheel: $(basename "$wheel") built from the sdist with OpenMP; free-threading marker Py_MOD_GIL_NOT_USED (a control without the directive shows Py_MOD_GIL_USED)"

# --------------------------------------------------------------------------
step "6. repair-wheel-command as configured: auditwheel repair, then the bundled runtime's licence"
# The Linux command cibuildwheel resolves from $config, with its
# placeholders filled in as cibuildwheel fills them.
repair=$(python wheels/ci/check_build_options.py --repair-command "$config")
repair=${repair//\{wheel\}/$wheel}
repair=${repair//\{dest_dir\}/$work/wheelhouse}
repair=${repair//\{project\}/$repo}
echo "+ $repair"
sh -c "$repair"
repaired=$(ls "$work"/wheelhouse/*.whl)
auditwheel show "$repaired" | tee "$work/auditwheel-show.txt"
bundled=$(python -c 'import sys, zipfile; print(" ".join(n for n in zipfile.ZipFile(sys.argv[1]).namelist() if n.startswith("cropgrad.libs/") and not n.endswith("/")))' "$repaired")
[[ $bundled == *libgomp* ]] || fail "auditwheel did not bundle libgomp"
tag=$(basename "$repaired" .whl | cut -d- -f3-)
note "repaired wheel: $(basename "$repaired"), tag $tag, $(stat -c %s "$repaired") bytes"
note "auditwheel show: $(tr '\n' ' ' <"$work/auditwheel-show.txt" | grep -Eo 'consistent with the following platform tag: "[^"]*"'); bundled: $bundled"
# The repaired wheel's LICENSE holds cropgrad's licence, then libgomp's
# (GPL-3.0 and the GCC Runtime Library Exception, in full); RECORD matches.
python wheels/ci/bundle_licenses.py --check "$repaired" | tee "$work/licences.txt"
[[ -s $work/licences.txt ]] || fail "no licence check output"
licence_file=$(python -c 'import sys, zipfile; print(next(n for n in zipfile.ZipFile(sys.argv[1]).namelist() if n.endswith(".dist-info/licenses/LICENSE")))' "$repaired")
python - "$repaired" "$licence_file" <<'PYEOF' | tee -a "$work/licences.txt"
import sys, zipfile
text = zipfile.ZipFile(sys.argv[1]).read(sys.argv[2]).decode()
for phrase in ("BSD 3-Clause", "GNU GENERAL PUBLIC LICENSE", "Version 3, 29 June 2007",
               "GCC RUNTIME LIBRARY EXCEPTION", "Version 3.1, 31 March 2009"):
    if phrase not in text:
        sys.exit(f"the wheel's {sys.argv[2]} lacks {phrase!r}")
print(f"{sys.argv[2]}: {len(text.splitlines())} lines: cropgrad's BSD-3-Clause, then "
      "libgomp's GPL-3.0 with the GCC Runtime Library Exception 3.1")
PYEOF
# Controls: without the licence step the check fails; the macOS layout gets
# libomp's licence; a bundled library with no known licence stops the repair.
mkdir -p "$work/licence-controls"
auditwheel repair -w "$work/licence-controls" "$wheel" >/dev/null 2>&1
bare=$(ls "$work"/licence-controls/*.whl)
if python wheels/ci/bundle_licenses.py --check "$bare" >/dev/null 2>&1; then
    fail "the licence check passed a wheel repaired without the licence step"
fi
python - "$bare" "$work/licence-controls" <<'PYEOF'
import base64, hashlib, os, sys, zipfile
def record(entries):
    lines = []
    for name, data in entries.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
        lines.append(f"{name},sha256={digest.decode()},{len(data)}")
    return lines
def rewrite(dest, rename=None, extra=()):
    with zipfile.ZipFile(sys.argv[1]) as z:
        entries = {n: z.read(n) for n in z.namelist() if not n.endswith(("/RECORD", "/"))}
        record_name = next(n for n in z.namelist() if n.endswith("/RECORD"))
    for old in [n for n in entries if n.startswith("cropgrad.libs/")]:
        data = entries.pop(old)
        entries[rename or old] = data
    for name in extra:
        entries[name] = b"not a library"
    lines = record(entries) + [f"{record_name},,"]
    entries[record_name] = ("\n".join(lines) + "\n").encode()
    with zipfile.ZipFile(os.path.join(sys.argv[2], dest), "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in entries.items():
            z.writestr(name, data)
rewrite("macos-layout.whl", rename="cropgrad/.dylibs/libomp.dylib")
rewrite("unknown-library.whl", extra=["cropgrad.libs/libunknown-1a2b3c4d.so.1"])
PYEOF
python wheels/ci/bundle_licenses.py "$work/licence-controls/macos-layout.whl"
python wheels/ci/bundle_licenses.py --check "$work/licence-controls/macos-layout.whl" \
    | tee -a "$work/licences.txt" | grep -q 'libomp.txt in LICENSE' \
    || fail "the macOS layout did not get libomp's licence"
if python wheels/ci/bundle_licenses.py "$work/licence-controls/unknown-library.whl" 2>/dev/null; then
    fail "a bundled library with no known licence was accepted"
fi
while read -r line; do note "licence: $line"; done <"$work/licences.txt"
note "licence controls: a wheel repaired without the licence step fails the check; a bundled library without a known licence stops the repair"

# --------------------------------------------------------------------------
step "7. wheel and sdist contents"
check-wheel-contents --ignore W009,W010 "$repaired"
twine check --strict "$sdist" "$repaired"
python - "$repaired" "$repo" <<'EOF'
import glob, os, re, sys, zipfile
names = zipfile.ZipFile(sys.argv[1]).namelist()
pkg = [n for n in names if n.startswith("cropgrad/")]
errors = []
# Every extension module setup.py builds (its _MODULES, dotted under cropgrad).
setup_py = open(os.path.join(sys.argv[2], "setup.py")).read()
modules = re.findall(r'^    "([\w.]+)",$', setup_py.split("_MODULES = [", 1)[1].split("]", 1)[0], re.M)
assert modules, "no _MODULES in setup.py"
for module in modules:
    path = "cropgrad/" + module.replace(".", "/")
    if not any(n.startswith(path + ".") and n.endswith(".so") for n in pkg):
        errors.append(f"no compiled {path}*.so")
# The C-level API: capi.pxd for Cython, capi.h for C and C++.
public = ("cropgrad/capi.pxd", "cropgrad/include/cropgrad/capi.h")
for need in public:
    if need not in names:
        errors.append(f"the C-level API's {need} is not in the wheel")
for need in ["cropgrad/__init__.py", "cropgrad/py.typed"] + [
    os.path.relpath(p, sys.argv[2])
    for p in glob.glob(os.path.join(sys.argv[2], "cropgrad", "**", "*.pyi"), recursive=True)
]:
    if need not in names:
        errors.append(f"missing {need}")
errors += [
    f"source file {n} in the wheel"
    for n in pkg
    if n.endswith((".pyx", ".pxd", ".pxi", ".c", ".h", ".inc")) and n not in public
]
errors += [f"test file {n} in the wheel" for n in names if n.startswith("tests/")]
# The benchmark runs from the source tree (benchmarks/), never from the wheel.
errors += [f"benchmark file {n} in the wheel" for n in names if re.search(r"(^|/)\w*bench", n)]
print("\n".join(pkg))
if errors:
    sys.exit("wheel contents: " + "; ".join(errors))
EOF
note "contents: check-wheel-contents (W009,W010 ignored) and twine check --strict pass; wheel has the module, py.typed, stubs, capi.pxd and include/cropgrad/capi.h, no other .pyx/.pxd/.pxi/.c/.h, no benchmark"

# --------------------------------------------------------------------------
step "8. the repaired wheel in a fresh venv, tests from a temporary directory"
"$python" -m venv "$work/venv-omp"
"$work/venv-omp/bin/python" -m pip install -q --disable-pip-version-check "${repaired}[test]"
run_tests "$work/venv-omp/bin/python" "$src_omp" "$work/tests-omp.log" -- "${wheel_ignore[@]}"
omp_config=$(cd "$work" && "$work/venv-omp/bin/python" -P -c \
    'import cropgrad; c = cropgrad.show_config(mode="dicts"); print(c["openmp"], c["default_threads"], c["cflags"], sep="|")')
note "installed wheel: $last_passed tests passed (openmp|threads|cflags = $omp_config)"

# --------------------------------------------------------------------------
step "9. FMA check"
mkdir -p "$work/so"
(cd "$work/so" && python -c 'import sys, zipfile; z = zipfile.ZipFile(sys.argv[1]); [z.extract(n) for n in z.namelist() if n.startswith("cropgrad/") and n.endswith(".so")]' "$repaired")
# The modules that do floating-point arithmetic: each kernel.
for module in _kernels/crop_and_resize/{forward,grad_image,grad_boxes,jvp_boxes,forward_nchw,grad_image_nchw,grad_boxes_nchw} \
    _kernels/roi_align/{forward,grad_image,grad_boxes,jvp_boxes}; do
    so=$(ls "$work"/so/cropgrad/$module.*.so)
    bash wheels/ci/check_fp_contract.sh "$so" "$src_omp/cropgrad/$module.c" "${omp_config##*|}" \
        | sed "s|^fma-check: |fma-check: $module: |" | tee -a "$work/fma.txt"
    [[ ${PIPESTATUS[0]} -eq 0 ]] || fail "FMA check of $module"
done
note "FMA: $(grep -c ' ok$' "$work/fma.txt") checks ok:"
while read -r line; do note "  ${line#fma-check: }"; done < <(grep -E ' = [0-9]+ ' "$work/fma.txt")

# --------------------------------------------------------------------------
step "10. serial build (CROPGRAD_OPENMP=0) from the sdist"
mkdir -p "$work/src-serial"
tar -xzf "$sdist" -C "$work/src-serial"
src_serial=$(echo "$work"/src-serial/*/)
CROPGRAD_OPENMP=0 python -m build --wheel --outdir "$work/dist-serial" "$src_serial" \
    >"$work/wheel-serial.log" 2>&1 || { tail -n 40 "$work/wheel-serial.log"; fail "serial wheel build"; }
grep -E '^cropgrad: building with OpenMP off' "$work/wheel-serial.log" || fail "serial build not serial"
serial_wheel=$(ls "$work"/dist-serial/*.whl)
"$python" -m venv "$work/venv-serial"
"$work/venv-serial/bin/python" -m pip install -q --disable-pip-version-check "${serial_wheel}[test]"
serial_so=$("$work/venv-serial/bin/python" -P -c 'import cropgrad._kernels.crop_and_resize.grad_image as c; print(c.__file__)')
if objdump -p "$serial_so" | grep -E 'NEEDED.*(gomp|omp)'; then fail "the serial extension links an OpenMP runtime"; fi
run_tests "$work/venv-serial/bin/python" "$src_serial" "$work/tests-serial.log" CROPGRAD_EXPECT_SERIAL=1 \
    -- "${other_builds_ignore[@]}"
serial_openmp=$(cd "$work" && "$work/venv-serial/bin/python" -P -c 'import cropgrad; print(cropgrad.show_config(mode="dicts")["openmp"])')
[[ $serial_openmp == False ]] || fail "serial build reports openmp $serial_openmp"
note "serial build: $(basename "$serial_wheel"), no OpenMP runtime linked, show_config openmp $serial_openmp, $last_passed tests passed (CROPGRAD_EXPECT_SERIAL=1)"

# --------------------------------------------------------------------------
step "11. setup.py's macOS flags with clang and LLVM's libomp"
libomp=$(llvm_libomp)
if ! command -v clang >/dev/null || [[ -z $libomp ]]; then
    note "macOS flags: SKIPPED (no clang or LLVM libomp on this machine)"
else
    # Lay the runtime out as macos_libomp.sh does on the runners: a prefix
    # outside every default search path.
    prefix="$work/libomp-prefix"
    mkdir -p "$prefix/include" "$prefix/lib"
    omp_h=$(find "$(dirname "$(dirname "$libomp")")" -name omp.h | head -n 1)
    cp "$omp_h" "$prefix/include/"
    cp "$(readlink -f "$libomp")" "$prefix/lib/"
    ln -sf "$(basename "$(readlink -f "$libomp")")" "$prefix/lib/libomp.so"
    mkdir -p "$work/src-apple"
    tar -xzf "$sdist" -C "$work/src-apple"
    src_apple=$(echo "$work"/src-apple/*/)
    (cd "$src_apple" && CC=clang CPPFLAGS="-I$prefix/include" \
        LDFLAGS="-L$prefix/lib -Wl,-rpath,$prefix/lib" CROPGRAD_OPENMP=required \
        python "$repo/wheels/ci/build_as_apple.py" bdist_wheel --dist-dir "$work/dist-apple") \
        >"$work/wheel-apple.log" 2>&1 || { tail -n 40 "$work/wheel-apple.log"; fail "apple-flags build"; }
    grep -E '^cropgrad: building with OpenMP on' "$work/wheel-apple.log" || fail "apple-flags build without OpenMP"
    grep -E -- '-Xpreprocessor -fopenmp' "$work/wheel-apple.log" >/dev/null || fail "no -Xpreprocessor -fopenmp"
    apple_wheel=$(ls "$work"/dist-apple/*.whl)
    "$work/venv-serial/bin/python" -m pip install -q --disable-pip-version-check --force-reinstall --no-deps "$apple_wheel"
    apple_so=$("$work/venv-serial/bin/python" -P -c 'import cropgrad._kernels.crop_and_resize.grad_image as c; print(c.__file__)')
    objdump -p "$apple_so" | grep -E 'NEEDED.*libomp' || fail "the apple-flags extension does not link libomp"
    run_tests "$work/venv-serial/bin/python" "$src_apple" "$work/tests-apple.log" \
        -- "${other_builds_ignore[@]}"
    note "macOS flags (-Xpreprocessor -fopenmp, -lomp, libomp via CPPFLAGS/LDFLAGS) with $(clang --version | head -n 1): probe passed, $last_passed tests passed"
    # The same kernels for macOS arm64 (clang --target=arm64-apple-macos11,
    # setup.py's apple flags): no FMA, NEON in the NEON clones, with controls.
    bash "$repo/wheels/ci/check_apple_arm64.sh" | tee "$work/apple-arm64.log" \
        || fail "the arm64-apple-macos11 compile of the kernels (check_apple_arm64.sh)"
    note "macOS arm64 kernels (clang --target=arm64-apple-macos11): $(grep -E 'FMA instructions with' "$work/apple-arm64.log" | sed 's/^apple-arm64: //'); $(grep -E 'in the NEON clones' "$work/apple-arm64.log" | sed 's/^apple-arm64: //')"
fi
