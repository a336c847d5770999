"""Run setup.py with its macOS ("apple") compiler flags, on Linux.

Usage, from a source tree (e.g. an unpacked sdist)::

    CC=clang CPPFLAGS=-I$PREFIX/include \\
    LDFLAGS="-L$PREFIX/lib -Wl,-rpath,$PREFIX/lib" CROPGRAD_OPENMP=required \\
        python build_as_apple.py build_ext --inplace

macOS wheels cannot be built here, but the part of setup.py that only they
use can: the apple family compiles with ``-Xpreprocessor -fopenmp``, links
``-lomp``, and finds libomp through CPPFLAGS/LDFLAGS pointing at a prefix
(where macos_libomp.sh unpacks conda-forge's llvm-openmp on the runners).
Linux clang with LLVM's libomp copied to such a prefix behaves the same way
for these flags, so the OpenMP probe and the build are exercised for real.
"""

import sys

import setuptools

_real_setup = setuptools.setup


def _setup_with_apple_family(**kwargs):
    kwargs["cmdclass"]["build_ext"]._family = lambda self: "apple"
    return _real_setup(**kwargs)


setuptools.setup = _setup_with_apple_family
sys.argv = ["setup.py", *sys.argv[1:]]
with open("setup.py", encoding="utf-8") as f:
    code = compile(f.read(), "setup.py", "exec")
exec(code, {"__name__": "__main__", "__file__": "setup.py"})
