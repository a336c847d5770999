#!/usr/bin/env bash
# Compile the kernels' C for macOS arm64 with setup.py's Apple flags, on
# Linux, and check what the compiler made of it.
#
#   bash wheels/ci/check_apple_arm64.sh            # a few seconds
#
# clang --target=arm64-apple-macos11 (the arm64 wheels' deployment target)
# compiles wheels/ci/apple_kernels.c: every clone of the inner loops
# (cropgrad/_kernels/src/cg_*.h, NEON and portable), as cg_simd.h selects them.
# The kernel headers need no SDK: -ffreestanding, clang's own <stddef.h>,
# <stdint.h> and <arm_neon.h>, and the two declarations they take from
# <string.h> (memcpy, strcmp) in a stand-in header.  The flags are read
# from setup.py (_FP_FLAGS and _OPENMP_FLAGS of the "apple" family).
# Expect: 0 fmadd/fmsub/fnmadd/fnmsub/fmla/fmls; vector fmul/fadd/fsub in
# the NEON clones, none in the portable ones; control: without
# -ffp-contract=off (clang's default is "on") the same C has FMA.
# Needs clang (Debian: clang).  Exits 1 if a count is not as expected.
set -euo pipefail

cd "$(dirname "$0")/../.."
clang=${CLANG:-clang}
python=${PYTHON:-python3}
command -v "$clang" >/dev/null || { echo "check_apple_arm64.sh: '$clang' not found" >&2; exit 2; }

read -r -a flags < <("$python" - <<'EOF'
import ast

tree = ast.parse(open("setup.py", encoding="utf-8").read())
values = {
    t.id: ast.literal_eval(node.value)
    for node in tree.body
    if isinstance(node, ast.Assign)
    for t in node.targets
    if isinstance(t, ast.Name) and t.id in ("_FP_FLAGS", "_OPENMP_FLAGS")
}
print(" ".join(values["_FP_FLAGS"]["apple"] + values["_OPENMP_FLAGS"]["apple"][0]))
EOF
)
if [[ " ${flags[*]} " != *" -ffp-contract=off "* ]]; then
    echo "check_apple_arm64.sh: setup.py's apple flags lack -ffp-contract=off: ${flags[*]}" >&2
    exit 1
fi
no_contract_off=()
for f in "${flags[@]}"; do
    [[ "$f" == "-ffp-contract=off" ]] || no_contract_off+=("$f")
done

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir "$work/include"
cat >"$work/include/string.h" <<'EOF'
/* What the kernel headers use of <string.h>, for a compile without the SDK. */
#include <stddef.h>
void* memcpy(void* restrict, const void* restrict, size_t);
int strcmp(const char*, const char*);
EOF
common=(--target=arm64-apple-macos11 -ffreestanding -isystem "$work/include"
    -I cropgrad/_kernels/src -DNDEBUG -fPIC -Wall -Werror)
"$clang" "${common[@]}" "${flags[@]}" -S -o "$work/apple.s" wheels/ci/apple_kernels.c
"$clang" "${common[@]}" "${no_contract_off[@]}" -S -o "$work/control.s" wheels/ci/apple_kernels.c

# Apple's assembly spells vector forms "fmul.4s v0, v1, v2".
fma='^[[:space:]]+(fmadd|fmsub|fnmadd|fnmsub|fmla|fmls)(\.[0-9a-z]+)?[[:space:]]'
counts() {  # counts FILE -> "FMA NEON BASE": FMA lines; vector arithmetic per clone kind
    awk -v fma="$fma" '
        /^_[A-Za-z0-9_]+:/ {fn = $1}
        $0 ~ fma {f++}
        /^[ \t]+(fmul|fadd|fsub)\.(4s|2d)[ \t]/ || /^[ \t]+(fmul|fadd|fsub)[ \t]+v[0-9]+\.(4s|2d)/ {
            if (fn ~ /^_cg_.*_neon:/) neon++
            if (fn ~ /^_cg_(row_[fd]|terms|lerp_row)_base:/) base++
        }
        END {print f + 0, neon + 0, base + 0}' "$1"
}
status=0
expect() {  # expect NAME VALUE zero|nonzero
    local verdict=ok
    if [[ $3 == zero && $2 -ne 0 ]] || [[ $3 == nonzero && $2 -eq 0 ]]; then
        verdict=FAIL
        status=1
    fi
    echo "apple-arm64: $1 = $2 (expected $3) $verdict"
}
for clone in cg_row_f_neon cg_row_d_neon cg_terms_neon cg_planes_gather_neon \
    cg_lerp_row_neon cg_row_f_base cg_row_d_base cg_terms_base cg_planes_gather_base \
    cg_lerp_row_base; do
    grep -q "^_$clone:" "$work/apple.s" || { echo "apple-arm64: no function $clone" >&2; status=1; }
done
read -r fma_n neon_n base_n < <(counts "$work/apple.s")
read -r control_n _ _ < <(counts "$work/control.s")
echo "apple-arm64: $("$clang" --version | head -n 1), flags: ${flags[*]}"
expect "FMA instructions with setup.py's apple flags" "$fma_n" zero
expect "vector fmul/fadd/fsub in the NEON clones" "$neon_n" nonzero
expect "vector fmul/fadd/fsub in the portable clones (cg_row_*_base, cg_terms_base, cg_lerp_row_base)" "$base_n" zero
expect "FMA instructions without -ffp-contract=off (control)" "$control_n" nonzero
exit "$status"
