#!/usr/bin/env bash
# Prove that no fused multiply-add changes cropgrad's float32 roundings.
#
#   bash wheels/ci/check_fp_contract.sh EXTENSION.so GENERATED_CORE.c [CFLAGS]
#
# EXTENSION.so    the built x86_64 extension (e.g. unzipped from the wheel)
# GENERATED_CORE.c the C that Cython generated for that build (its folder must
#                 hold the package's src/ headers)
# CFLAGS          the flags the extension was built with, as recorded in
#                 show_config()["cflags"]; default the ones setup.py uses with
#                 GCC and OpenMP
#
# (a) x86_64: objdump the extension; count FMA instructions (vfmadd, vfmsub,
#     vfnmadd, vfnmsub...) everywhere, AVX clones included, and ymm/zmm
#     registers outside the run-time dispatched clones (*_avx2, *_avx512).
#     Expect 0: the baseline code is SSE2 and no code contracts.
# (b) aarch64: every aarch64 CPU has FMA and GCC contracts a*b+c by default,
#     so cross-compile the same C with the same flags (-S, Python headers of
#     this host, for compilation only) and count fmadd, fmsub, fnmadd, fnmsub,
#     fmla, fmls. Expect 0.
# (c) controls, proving the counts can be non-zero: the aarch64 compile
#     without -ffp-contract=off, and an x86_64 compile with -mfma and without
#     the flag, must both show FMA instructions.
#
# Needs objdump, gcc and aarch64-linux-gnu-gcc (Debian: gcc-aarch64-linux-gnu).
# Prints "fma-check: ..." result lines; exits 1 if a count is not as expected.
#
#   bash wheels/ci/check_fp_contract.sh --aarch64 MODULE_DIR [CFLAGS]
#
# checks a real aarch64 build instead (wheels/ci/aarch64_emulated.sh):
# MODULE_DIR (the package folder) holds its extension modules
# (*aarch64-linux-gnu.so, in its subfolders too) and the C Cython generated
# for them.  For every module but EXPLICIT_FMA_MODULES: 0 fmadd/fmsub/fnmadd/
# fnmsub/fmla/fmls; the vector float arithmetic (fmul, fadd, fsub on .4s or
# .2d) of the NEON clones (functions *_neon) and of the portable ones
# (cg_*_base, scalar on aarch64): nonzero and zero where a module has them.
# Control: the image gradient's grad_image.c cross-compiled without
# -ffp-contract=off must show FMA instructions.  CROSS_PY_INCLUDE: the arm64 Python's include folders.
set -euo pipefail

# Modules whose arithmetic is written with C's fma() where the reference
# fuses a multiply-add (grid_sample's, PyTorch's): fma() rounds once on every
# CPU, with or without the instruction, so its instructions are expected
# there; only contraction the compiler adds on its own would change bits.
EXPLICIT_FMA_MODULES="_kernels.grid_sample.kernels"

if [[ ${1:-} == --aarch64 ]]; then
    [[ $# -ge 2 ]] || { echo "usage: $0 --aarch64 MODULE_DIR [CFLAGS]" >&2; exit 2; }
    dir=$2
    cflags=${3:-"-O3 -ffp-contract=off -fno-fast-math -fopenmp"}
    cross=${CROSS_CC:-aarch64-linux-gnu-gcc}
    objdump_a64=${CROSS_OBJDUMP:-aarch64-linux-gnu-objdump}
    if [[ " $cflags " != *" -ffp-contract=off "* ]]; then
        echo "check_fp_contract.sh: the build flags lack -ffp-contract=off: $cflags" >&2
        exit 1
    fi
    work=$(mktemp -d)
    trap 'rm -rf "$work"' EXIT
    status=0
    modules=0
    echo "fma-check: aarch64 modules in $dir, built with: $cflags"
    grad_image=_kernels/crop_and_resize/grad_image
    while IFS= read -r so; do
        modules=$((modules + 1))
        # The module's dotted name under the package (grad_image's: its path).
        rel=${so#"$dir"/}
        name=${rel%%.*}
        name=${name//\//.}
        "$objdump_a64" -d --no-show-raw-insn "$so" >"$work/$name.dis"
        # Per module: FMA lines; vector arithmetic in the NEON clones and
        # in the portable clones (cg_row_*_base, cg_terms_base, cg_lerp_row_base).
        read -r fma neon base < <(awk '
            /^[0-9a-f]+ <.*>:$/ {fn = $2}
            /^ +[0-9a-f]+:	(fmadd|fmsub|fnmadd|fnmsub|fmla|fmls)	/ {fma++}
            /^ +[0-9a-f]+:	(fmul|fadd|fsub)	v[0-9]+\.(4s|2d)/ {
                if (fn ~ /_neon[.>]/) neon++
                if (fn ~ /^<cg_(row_[fd]|terms|lerp_row)_base[.>]/) base++
            }
            END {print fma + 0, neon + 0, base + 0}' "$work/$name.dis")
        verdict=ok
        explicit=0
        [[ " $EXPLICIT_FMA_MODULES " == *" $name "* ]] && explicit=1
        [[ $fma -eq 0 || $explicit == 1 ]] || { verdict=FAIL; status=1; }
        has_clones=0
        grep -qE '^[0-9a-f]+ <cg_row_f_neon[.>]' "$work/$name.dis" && has_clones=1
        if [[ $has_clones == 1 ]] && { [[ $neon -eq 0 ]] || [[ $base -ne 0 ]]; }; then
            verdict=FAIL
            status=1
        fi
        if [[ $has_clones == 1 ]]; then
            echo "fma-check: aarch64 $name: FMA instructions = $fma (expected zero);" \
                "vector fmul/fadd/fsub (.4s/.2d): NEON clones $neon (expected nonzero)," \
                "portable clones $base (expected zero) $verdict"
        elif [[ $explicit == 1 ]]; then
            echo "fma-check: aarch64 $name: FMA instructions = $fma (its explicit" \
                "fma() calls, the reference's fused steps; its bits are held to the" \
                "fixtures by the tests) $verdict"
        else
            echo "fma-check: aarch64 $name: FMA instructions = $fma (expected zero) $verdict"
        fi
    done < <(find "$dir" -name '*aarch64-linux-gnu.so' | sort)
    [[ $modules -gt 0 ]] || { echo "check_fp_contract.sh: no aarch64 module in $dir" >&2; exit 1; }
    # The NEON clones' vector arithmetic per function, for the record.
    awk '
        /^[0-9a-f]+ <.*>:$/ {
            fn = substr($2, 2, length($2) - 3)
            if (fn ~ /^cg_(row_[fd]|terms|planes_gather|planes_scatter_f)_(neon|base)/) seen[fn] = 1
        }
        /^ +[0-9a-f]+:\t(fmul|fadd|fsub)\tv[0-9]+\.(4s|2d)/ {n[fn]++}
        /^ +[0-9a-f]+:\t(zip1|zip2)\tv[0-9]+\.(4s|2d)/ {z[fn]++}
        END {
            for (f in seen)
                printf "fma-check: aarch64 grad_image %s: %d vector fmul/fadd/fsub, %d vector zip1/zip2\n", f, n[f], z[f]
        }' "$work/${grad_image//\//.}.dis" | sort
    read -r -a flags <<<"$cflags"
    no_contract_off=()
    for f in "${flags[@]}"; do
        [[ "$f" == "-ffp-contract=off" ]] || no_contract_off+=("$f")
    done
    includes=()
    for d in ${CROSS_PY_INCLUDE:-}; do includes+=(-I "$d"); done
    "$cross" -DNDEBUG -fwrapv -fPIC "${includes[@]}" -I "$dir" -I "$dir/_kernels/src" \
        "${no_contract_off[@]}" -S -o "$work/control.s" "$dir/$grad_image.c"
    control=$(grep -cE '^\s+(fmadd|fmsub|fnmadd|fnmsub|fmla|fmls)\s' "$work/control.s" || true)
    verdict=ok
    [[ $control -ne 0 ]] || { verdict=FAIL; status=1; }
    echo "fma-check: aarch64 $grad_image.c without -ffp-contract=off (control) = $control (expected nonzero) $verdict"
    exit "$status"
fi

if [[ $# -lt 2 ]]; then
    echo "usage: $0 EXTENSION.so GENERATED_CORE.c [CFLAGS]" >&2
    exit 2
fi
ext=$1
core_c=$2
cflags=${3:-"-O3 -ffp-contract=off -fno-fast-math -fopenmp"}
python=${PYTHON:-python3}
cross=${CROSS_CC:-aarch64-linux-gnu-gcc}

for tool in objdump gcc "$cross"; do
    if ! command -v "$tool" >/dev/null; then
        echo "check_fp_contract.sh: '$tool' not found" >&2
        exit 2
    fi
done
if [[ " $cflags " != *" -ffp-contract=off "* ]]; then
    echo "check_fp_contract.sh: the build flags lack -ffp-contract=off: $cflags" >&2
    exit 1
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
py_include=$("$python" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
# The C headers: cropgrad/_kernels/src, beside the kernel families' folders.
common=(-DNDEBUG -fwrapv -fPIC -I "$(dirname "$core_c")" -I "$(dirname "$core_c")/../src" -I "$py_include")
read -r -a flags <<<"$cflags"
no_contract_off=()
for f in "${flags[@]}"; do
    [[ "$f" == "-ffp-contract=off" ]] || no_contract_off+=("$f")
done

# x86 FMA3/FMA4 mnemonics, and aarch64 scalar and vector fused forms.
x86_fma='\bv?fn?m(add|sub)[0-9a-z]*(ss|sd|ps|pd)\b|\bvfm(addsub|subadd)'
a64_fma='^\s+(fmadd|fmsub|fnmadd|fnmsub|fmla|fmls)\s'

count() {  # count PATTERN FILE -> number of matching lines
    grep -cE "$1" "$2" || true
}

status=0
expect() {  # expect NAME VALUE CONDITION(zero|nonzero)
    local verdict=ok
    if [[ $3 == zero && $2 -ne 0 ]] || [[ $3 == nonzero && $2 -eq 0 ]]; then
        verdict=FAIL
        status=1
    fi
    echo "fma-check: $1 = $2 (expected $3) $verdict"
}

# Debian's Python headers choose pyconfig.h by target
# (<aarch64-linux-gnu/python3.X/pyconfig.h>), which only the arm64 package
# has: for these compile-only runs, the host's stands in for it.
shim=()
py_ver=$("$python" -c 'import sys; print("python%d.%d" % sys.version_info[:2])')
multiarch=$("$python" -c 'import sysconfig; print(sysconfig.get_config_var("MULTIARCH") or "")')
if [[ -n $multiarch ]] && grep -q "aarch64-linux-gnu/$py_ver/pyconfig.h" "$py_include/pyconfig.h"; then
    mkdir -p "$work/shim/aarch64-linux-gnu/$py_ver"
    echo "#include <$multiarch/$py_ver/pyconfig.h>" >"$work/shim/aarch64-linux-gnu/$py_ver/pyconfig.h"
    shim=(-idirafter "$work/shim" -idirafter /usr/include)
fi

# The three compiles are independent: run them side by side.
"$cross" "${common[@]}" ${shim[@]+"${shim[@]}"} "${flags[@]}" -S -o "$work/a64.s" "$core_c" &
pid_a64=$!
"$cross" "${common[@]}" ${shim[@]+"${shim[@]}"} "${no_contract_off[@]}" -S -o "$work/a64_contract.s" "$core_c" &
pid_a64c=$!
wait "$pid_a64"
wait "$pid_a64c"
gcc "${common[@]}" "${no_contract_off[@]}" -mfma -S -o "$work/x86_mfma.s" "$core_c"

objdump -d --no-show-raw-insn "$ext" >"$work/ext.dis"
if [[ $(wc -l <"$work/ext.dis") -lt 1000 ]]; then
    echo "check_fp_contract.sh: objdump shows almost no code in $ext" >&2
    exit 1
fi

echo "fma-check: flags under test: $cflags"
expect "x86_64 extension FMA instructions" "$(count "$x86_fma" "$work/ext.dis")" zero
# Wide registers only inside the run-time dispatched clones (functions named
# *_avx2 / *_avx512), never in the baseline code.
wide_outside=$(awk '/^[0-9a-f]+ <.*>:$/ {fn = $2} /%[yz]mm[0-9]/ && fn !~ /_avx(2|512)[.>]/ {n++} END {print n + 0}' "$work/ext.dis")
expect "x86_64 extension ymm/zmm register lines outside the AVX clones" "$wide_outside" zero
expect "aarch64 FMA instructions with the build flags" "$(count "$a64_fma" "$work/a64.s")" zero
expect "aarch64 FMA instructions without -ffp-contract=off (control)" \
    "$(count "$a64_fma" "$work/a64_contract.s")" nonzero
expect "x86_64 FMA instructions with -mfma, without -ffp-contract=off (control)" \
    "$(count "$x86_fma" "$work/x86_mfma.s")" nonzero
exit "$status"
