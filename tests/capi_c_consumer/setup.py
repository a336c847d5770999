# A C extension (and the same source as C++) calling cropgrad's C-level API
# through its header alone:  pip wheel --no-build-isolation .
# The -I comes from the installed cropgrad; nothing else is needed.
from setuptools import Extension, setup

import cropgrad

flags = ["-Wall", "-Wextra", "-Werror"]
setup(
    ext_modules=[
        Extension(
            "c_consumer",
            ["c_consumer.c"],
            include_dirs=[cropgrad.get_include()],
            extra_compile_args=["-std=c11", *flags],
        ),
        Extension(
            "cxx_consumer",
            ["cxx_consumer.cpp"],
            include_dirs=[cropgrad.get_include()],
            extra_compile_args=["-std=c++11", *flags],
            language="c++",
        ),
    ]
)
