"""cropgrad's version: the one place it is written.

``pyproject.toml`` reads it for the package metadata (``dynamic =
["version"]``) and ``cropgrad.__version__`` imports it.
"""

__version__ = "0.1.0"
