#!/usr/bin/env bash
# Put an OpenMP runtime for macOS wheels in PREFIX/<arch>/{include,lib}.
#
#   bash wheels/ci/macos_libomp.sh PREFIX [ARCH...]     (ARCH: x86_64, arm64; default both)
#
# Apple clang compiles OpenMP (-Xpreprocessor -fopenmp) but ships no runtime.
# The runtime is bundled into every wheel by delocate, so it must run on the
# oldest macOS the wheel claims: conda-forge's llvm-openmp 11.1.0 builds were
# made for macOS 10.9 (osx-64) and 11.0 (osx-arm64), below our deployment
# targets (10.15 and 11.0).  Homebrew's libomp is built for the runner's own
# macOS, which would force the wheel's tag up or make delocate refuse it.
#
# cibuildwheel runs this as before-all; its environment option then sets
# CPPFLAGS=-IPREFIX/<arch>/include and
# LDFLAGS="-LPREFIX/<arch>/lib -Wl,-rpath,PREFIX/<arch>/lib" per arch, and
# setup.py adds -Xpreprocessor -fopenmp and -lomp.  Both architectures are
# fetched (two small downloads) so a job may build either.
#
# Pinned by build string and sha256 (the sums scikit-image's
# tools/build_libomp.sh publishes for the same two files).
set -euo pipefail

if [[ $# -lt 1 ]]; then
    echo "usage: $0 PREFIX [x86_64|arm64 ...]" >&2
    exit 2
fi
prefix=$1
shift
if [[ $# -gt 0 ]]; then archs=("$@"); else archs=(x86_64 arm64); fi

version=11.1.0
for arch in "${archs[@]}"; do
    case "$arch" in
        x86_64)
            subdir=osx-64
            build=hda6cdc1_1
            sha256=1ebfeee2af90bcedf6b39c7290244e2aec0bda01ecf81b0d8d78ed405480c21c
            ;;
        arm64)
            subdir=osx-arm64
            build=hf3c4609_1
            sha256=29763e493e46801c416f2e75f20e9183719bde3b727d8983b1917a480b4076fe
            ;;
        *)
            echo "macos_libomp.sh: unknown architecture '$arch' (x86_64 or arm64)" >&2
            exit 2
            ;;
    esac
    file="llvm-openmp-$version-$build.tar.bz2"
    dest="$prefix/$arch"
    rm -rf "$dest"
    mkdir -p "$dest"
    echo "libomp for $arch: conda-forge $subdir/$file -> $dest"
    curl -fsSL --retry 5 --retry-delay 5 -o "$dest/$file" \
        "https://conda.anaconda.org/conda-forge/$subdir/$file"
    echo "$sha256  $dest/$file" | shasum -a 256 --check
    tar -xjf "$dest/$file" -C "$dest"
    rm "$dest/$file"
    for needed in include/omp.h lib/libomp.dylib; do
        if [[ ! -e "$dest/$needed" ]]; then
            echo "macos_libomp.sh: $dest/$needed missing from the package" >&2
            exit 1
        fi
    done
    # For the log: the install name (@rpath/libomp.dylib, resolved through
    # the -rpath above) and the oldest macOS the runtime was built for.
    if command -v otool >/dev/null; then
        otool -L "$dest/lib/libomp.dylib" | sed -n 2p
        otool -l "$dest/lib/libomp.dylib" | grep -E -A4 'LC_VERSION_MIN_MACOSX|LC_BUILD_VERSION' \
            | grep -E 'version|minos' | head -n 2 || true
    fi
done
