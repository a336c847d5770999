"""Build the cropgrad extension.

Metadata lives in ``pyproject.toml``; this file only knows how to compile
the extension modules (``cropgrad/**/*.pyx``).

OpenMP is probed, not guessed: the compiler that will build the extension
compiles, links and runs a tiny OpenMP program first.  The environment
variable ``CROPGRAD_OPENMP`` chooses what happens next:

``auto`` (default)
    use OpenMP when the probe passes, otherwise build a serial extension and
    print a warning.
``required`` (or ``1``)
    fail the build when the probe does not pass (release wheels use this).
``off`` (or ``0``)
    build the serial extension without trying.

Floating point: the kernels must round exactly as TensorFlow's float32
arithmetic does, so every compiler is told not to contract ``a * b + c``
into a fused multiply-add and never to use fast-math.  No ``-march=native``:
the extension is distributed.  ``CROPGRAD_CYTHON_DEBUG=1`` turns Cython's
bounds and wraparound checks on for a debug build.

The modules are translated and compiled on every CPU the build may use;
``CROPGRAD_BUILD_JOBS=N`` sets how many at once (``1``: one at a time), and
``build_ext --parallel N`` still wins for the compile.
"""

import glob
import os
import runpy
import subprocess
import sys
import tempfile
import textwrap

from Cython.Build import cythonize
from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

# Flags per compiler family: (compile, link) for the OpenMP runtime, and the
# floating-point flags every compile gets.
_OPENMP_FLAGS = {
    "unix": (["-fopenmp"], ["-fopenmp"]),
    # Apple clang has no driver support: the preprocessor flag plus libomp.
    "apple": (["-Xpreprocessor", "-fopenmp"], ["-lomp"]),
    "msvc": (["/openmp"], []),
}
_FP_FLAGS = {
    "unix": ["-O3", "-ffp-contract=off", "-fno-fast-math"],
    "apple": ["-O3", "-ffp-contract=off", "-fno-fast-math"],
    "msvc": ["/O2", "/fp:precise"],
}

_PROBE = textwrap.dedent(
    """
    #include <omp.h>
    #include <stdio.h>
    int main(void) {
        int n = 0;
        #pragma omp parallel num_threads(2) reduction(+:n)
        n += 1;
        printf("%d %d\\n", n, omp_get_max_threads());
        return n == 2 ? 0 : 1;
    }
    """
)


def _openmp_mode():
    value = os.environ.get("CROPGRAD_OPENMP", "auto").strip().lower()
    aliases = {"1": "required", "yes": "required", "0": "off", "no": "off", "": "auto"}
    value = aliases.get(value, value)
    if value not in ("auto", "required", "off"):
        raise SystemExit(
            f"CROPGRAD_OPENMP must be auto, required (1) or off (0), not {value!r}"
        )
    return value


def _build_jobs():
    """How many modules are translated and compiled at once."""
    value = os.environ.get("CROPGRAD_BUILD_JOBS", "").strip()
    if value:
        if not value.isdigit() or int(value) < 1:
            raise SystemExit(
                f"CROPGRAD_BUILD_JOBS must be a positive integer, not {value!r}"
            )
        return int(value)
    try:
        return len(os.sched_getaffinity(0))  # the CPUs this process may run on
    except AttributeError:  # macOS and Windows have no affinity call
        return os.cpu_count() or 1


_JOBS = _build_jobs()


class BuildExt(build_ext):
    """``build_ext`` that adds per-compiler flags, probes OpenMP and, unless
    told otherwise, compiles the modules in parallel."""

    def finalize_options(self):
        super().finalize_options()
        if not self.parallel and _JOBS > 1:
            self.parallel = _JOBS

    def _family(self):
        if self.compiler.compiler_type == "msvc":
            return "msvc"
        if sys.platform == "darwin":
            return "apple"
        return "unix"

    def _probe_openmp(self, compile_flags, link_flags):
        """Compile, link and run a tiny OpenMP program; return the reason it failed."""
        with tempfile.TemporaryDirectory() as tmp:
            source = os.path.join(tmp, "probe.c")
            with open(source, "w") as f:
                f.write(_PROBE)
            try:
                objects = self.compiler.compile(
                    [source], output_dir=tmp, extra_postargs=compile_flags
                )
                exe = os.path.join(tmp, "probe")
                self.compiler.link_executable(
                    objects, exe, extra_postargs=link_flags + self._extra_link_args()
                )
                run = subprocess.run(
                    [exe], capture_output=True, text=True, timeout=60, check=False
                )
            except Exception as exc:  # compile or link errors of any compiler
                return f"{type(exc).__name__}: {exc}"
            if run.returncode != 0:
                return f"the probe program exited with {run.returncode}: {run.stdout}"
            return None

    def _extra_link_args(self):
        """The flags the extension's link adds to the compiler driver's.

        The probe is linked by the bare compiler driver, which (unlike the
        extension's link) gets neither LDSHARED's flags nor LDFLAGS and
        CFLAGS: without them a libomp outside the default search path (the
        -L and -rpath of macOS's LDFLAGS), a custom linker or a sanitizer's
        runtime (-fsanitize=address in CFLAGS and LDFLAGS) is missing from
        the probe alone, which then fails and, in auto mode, makes the
        build serial.  So the probe gets the extension's link command, less
        what makes a library of it, on every platform.
        """
        linker = getattr(self.compiler, "linker_so", None)
        if not linker:  # MSVC: no such command, and no environment flags
            return []
        args, skip = [], False
        for arg in linker[1:]:
            if skip:
                skip = False
            elif arg == "-undefined":  # macOS: -undefined dynamic_lookup
                skip = True
            elif arg not in ("-shared", "-bundle", "-dynamiclib"):
                args.append(arg)
        return args

    def build_extensions(self):
        family = self._family()
        mode = _openmp_mode()
        fp_flags = _FP_FLAGS[family]
        omp_compile, omp_link = _OPENMP_FLAGS[family]
        use_openmp = False
        if mode != "off":
            failure = self._probe_openmp(omp_compile, omp_link)
            if failure is None:
                use_openmp = True
            elif mode == "required":
                raise SystemExit(
                    "CROPGRAD_OPENMP=required but the compiler cannot build and run "
                    f"an OpenMP program:\n{failure}"
                )
            else:
                self.warn(
                    "cropgrad: OpenMP is not available with this compiler; building "
                    "a serial extension (set CROPGRAD_OPENMP=required to make this "
                    f"an error).\n{failure}"
                )
        compiler_name = (
            os.path.basename(str(self.compiler.compiler_so[0]))
            if hasattr(self.compiler, "compiler_so")
            else self.compiler.compiler_type
        )
        for ext in self.extensions:
            ext.extra_compile_args = list(fp_flags)
            ext.extra_link_args = []
            ext.define_macros = list(ext.define_macros or []) + [
                ("CG_COMPILER", f'"{compiler_name}"'),
                (
                    "CG_CFLAGS",
                    '"'
                    + " ".join(fp_flags + (omp_compile if use_openmp else []))
                    + '"',
                ),
            ]
            if use_openmp:
                ext.extra_compile_args += omp_compile
                ext.extra_link_args += omp_link
        print(
            f"cropgrad: building with OpenMP {'on' if use_openmp else 'off'} "
            f"(CROPGRAD_OPENMP={mode}), flags {' '.join(fp_flags)}"
        )
        super().build_extensions()


def _directives():
    debug = os.environ.get("CROPGRAD_CYTHON_DEBUG", "0") not in ("", "0")
    return {
        "language_level": 3,
        "boundscheck": debug,
        "wraparound": debug,
        "initializedcheck": debug,
        "cdivision": True,
        "embedsignature": True,
        "freethreading_compatible": True,
    }


# One extension module per job, named by its dotted path (the folders are
# the layers: cropgrad/_runtime the parallel driver and the instruction-set
# choice, cropgrad/_kernels the ops' kernels, cropgrad/_capi the gate and the
# ops' calls, cropgrad.capi the C-level API other compiled code cimports,
# cropgrad._core the Python layer's bridge to it, cropgrad/_jax the XLA FFI
# handlers of cropgrad.jax, built without JAX).
# The kernels reach each other through their .pxd files.
_MODULES = [
    "_runtime.parallel",
    "_runtime.simd",
    "_kernels.crop_and_resize.forward",
    "_kernels.crop_and_resize.forward_nchw",
    "_kernels.crop_and_resize.grad_image",
    "_kernels.crop_and_resize.grad_image_nchw",
    "_kernels.crop_and_resize.grad_boxes",
    "_kernels.crop_and_resize.grad_boxes_nchw",
    "_kernels.crop_and_resize.jvp_boxes",
    "_kernels.roi_align.forward",
    "_kernels.roi_align.grad_image",
    "_kernels.roi_align.grad_boxes",
    "_kernels.roi_align.jvp_boxes",
    "_kernels.grid_sample.kernels",
    "_kernels.layout",
    # Thin wrappers of the kernels' inline helpers, for the tests.  Kept in
    # the wheel on purpose: the installed wheel's tests (on every platform
    # cibuildwheel builds, and aarch64 under emulation) check the sampling
    # coordinates and float16 roundings bit for bit as the wheel's own
    # compiler and flags built them, which a module compiled at test time
    # would not show.
    "_kernels.testing",
    "_capi.gate",
    "_capi.crop_and_resize",
    "_capi.roi_align",
    "_capi.grid_sample",
    "capi",
    "_core",
    "_jax.frames",
    "_jax.handlers",
]
# The generated files (capi.h, capi.pxd, the capsule's table, the FFI
# targets, the bridges, the stubs) are rendered from the op model,
# cropgrad/_ops, before anything is compiled or listed below: a change to the
# model reaches every reader.  The public header and capi.pxd are committed;
# the rest are build products (not in git: a clone or an sdist renders them
# here, and the wheel gets the stubs as package data).  A file is written
# only when it differs from its rendering.
runpy.run_path(os.path.join("cropgrad", "_ops", "generate.py"), run_name="__build__")[
    "main"
]([])

# Every module depends on every .pxd, .pxi and C header of the package.
_DEPENDS = sorted(
    glob.glob(os.path.join("cropgrad", "**", "*.pxd"), recursive=True)
    + glob.glob(os.path.join("cropgrad", "**", "*.pxi"), recursive=True)
    + glob.glob(os.path.join("cropgrad", "_kernels", "src", "cg_*"))
)
extensions = [
    Extension(
        f"cropgrad.{name}",
        [os.path.join("cropgrad", *name.split(".")) + ".pyx"],
        depends=_DEPENDS,
        include_dirs=[os.path.join("cropgrad", "_kernels", "src")],
    )
    for name in _MODULES
]

setup(
    ext_modules=cythonize(
        extensions,
        compiler_directives=_directives(),
        nthreads=_JOBS if _JOBS > 1 else 0,
    ),
    cmdclass={"build_ext": BuildExt},
)
