"""Sphinx configuration of cropgrad's documentation site.

The source folder is the repository's root, so that the Markdown pages link
to each other (docs/, benchmarks/README.md, DEVELOPING.md) with the same
relative links that work when they are read on their own;
``include_patterns`` keeps every other file out.  From the root, with
cropgrad built and installed (DEVELOPING.md, "Documentation"):

    sphinx-build -W --keep-going -b html -c docs . docs/_build/html
    sphinx-build -W --keep-going -b doctest -c docs . docs/_build/doctest

The HTML lands in docs/_build/html (open index.html there).  The API
reference is autodoc of the public modules, whose docstrings are numpydoc;
the getting-started pages' examples run under the doctest builder; the
gallery's pictures are drawn at build time by docs/gallery/*.py.
"""

import doctest
import importlib
import os

from sphinx.util import logging

import cropgrad

_LOG = logging.getLogger(__name__)

project = "cropgrad"
author = "The cropgrad developers"
copyright = "the cropgrad developers (BSD-3-Clause)"
version = release = cropgrad.__version__

extensions = [
    "matplotlib.sphinxext.plot_directive",
    "myst_parser",
    "numpydoc",
    "sphinx.ext.autodoc",
    "sphinx.ext.doctest",
]

root_doc = "docs/index"
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
# The pages of the site; everything else in the repository is not a page
# (the README is the repository's landing page, tests/ and wheels/ have
# READMEs of their own).  Excluded folders are not even walked.
include_patterns = [
    "docs/**",
    "benchmarks/README.md",
    "DEVELOPING.md",
    "CHANGELOG.md",
]
exclude_patterns = [
    ".*",
    "build",
    "dist",
    "docs/_build",
    "cropgrad",
    "tests",
    "wheels",
]

# Code blocks without a language are program output and tables.
highlight_language = "none"

# MyST: GitHub's anchors for headings, so that links such as
# semantics.md#bfloat16 resolve here as they do on GitHub.
myst_heading_anchors = 3

# autodoc and numpydoc: the signatures as written in the source
# (``dtype=np.float32``, not the class's repr).
autodoc_preserve_defaults = True
autodoc_member_order = "bysource"
numpydoc_show_class_members = False
numpydoc_xref_param_type = False
# Single backticks in the docstrings name Python objects.
default_role = "py:obj"

# The doctest builder: the getting-started pages' examples, and the
# docstrings' on the API pages.  An exception's message is part of the
# result (Sphinx ignores it by default); whitespace in printed arrays is not.
doctest_default_flags = (
    doctest.ELLIPSIS | doctest.DONT_ACCEPT_TRUE_FOR_1 | doctest.NORMALIZE_WHITESPACE
)
# Failures only: the summary is in the builder's output.txt.
doctest_show_successes = False

# The gallery: figures drawn when the page is built, PNG only.
plot_basedir = "gallery"  # the scripts, beside this file
plot_formats = [("png", 100)]
plot_html_show_formats = False
plot_html_show_source_link = False
plot_include_source = False
plot_rcparams = {"figure.dpi": 100, "savefig.bbox": "tight"}

html_theme = "furo"
html_title = f"cropgrad {release}"
html_show_sourcelink = False

# The modules whose public names the API reference must document.
PUBLIC_MODULES = (
    "cropgrad",
    "cropgrad.raw_ops",
    "cropgrad.jax",
    "cropgrad.torch",
    "cropgrad.capi",
)


def _public_names(module):
    """A module's public names: its ``__all__``, or what it defines."""
    names = getattr(module, "__all__", None)
    if names is None:
        names = [
            name
            for name, value in vars(module).items()
            if not name.startswith("_")
            and getattr(value, "__module__", None) == module.__name__
        ]
    return [
        name
        for name in names
        if not isinstance(getattr(module, name), type(os))  # submodules
    ]


def _check_api_reference(app, env):
    """Warn (an error under -W) about a public name no page documents."""
    objects = env.domains.python_domain.objects
    for module_name in PUBLIC_MODULES:
        if module_name not in objects:
            _LOG.warning("the API reference has no page for %s", module_name)
            continue
        module = importlib.import_module(module_name)
        for name in _public_names(module):
            if f"{module_name}.{name}" not in objects:
                _LOG.warning(
                    "%s.%s is public but the API reference does not document "
                    "it: add it to its page in docs/api/",
                    module_name,
                    name,
                )


_REDIRECT = """<!DOCTYPE html>
<html lang="en">
<meta charset="utf-8">
<title>cropgrad</title>
<meta http-equiv="refresh" content="0; url=docs/index.html">
<a href="docs/index.html">cropgrad's documentation</a>
</html>
"""


def _write_redirect(app, exception):
    """index.html at the output's root, pointing to the site's first page.

    The pages keep the repository's folders (docs/index.html,
    DEVELOPING.html, benchmarks/README.html); this is the door.
    """
    if exception is None and app.builder.format == "html":
        with open(os.path.join(app.outdir, "index.html"), "w") as f:
            f.write(_REDIRECT)


def setup(app):
    app.connect("env-check-consistency", _check_api_reference)
    app.connect("build-finished", _write_redirect)
