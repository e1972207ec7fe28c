"""gpu-planner: optimization-based GPU allocation planning for research institutes."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("gpu-planner")
except PackageNotFoundError:  # pragma: no cover - running from a source tree
    __version__ = "0.0.0"
