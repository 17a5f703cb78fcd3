"""babelrun's version, from the installed package's metadata (one source: pyproject.toml)."""

from importlib import metadata

try:
    __version__ = metadata.version("babelrun")
except metadata.PackageNotFoundError:  # a source tree that was never installed
    __version__ = "0.0.0+unknown"
