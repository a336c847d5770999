# Build an extension that calls cropgrad's C-level API; with pyproject.toml:
#     pip wheel --no-build-isolation .      (or: python setup.py build_ext --inplace)
# Needs Cython and an installed cropgrad (its capi.pxd is found on sys.path).
from Cython.Build import cythonize
from setuptools import Extension, setup

setup(
    ext_modules=cythonize(
        [Extension("consumer", ["consumer.pyx"])],
        compiler_directives={"language_level": 3},
    ),
)
