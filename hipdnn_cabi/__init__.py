"""hipdnn-cabi: AMD hipDNN's C API implemented in Python.

C and C++ programs link ``libhipdnn_backend.so`` (see :func:`library_path`) with the headers in
:func:`include_dir`; Python code uses :mod:`hipdnn_cabi.frontend`, which drives the same C API.
"""
import os

__version__ = "0.1.0"

_HERE = os.path.dirname(os.path.abspath(__file__))

from . import _engines_alias  # noqa: E402  (hipdnn_cabi.engines in a source checkout)
_engines_alias.install(_HERE)


def library_dir() -> str:
    """Directory holding libhipdnn_backend.so (and hipdnn_plugins/engines/ beside it)."""
    return os.path.join(_HERE, "lib")


def library_path() -> str:
    """Absolute path of the embedded backend library."""
    return os.path.join(library_dir(), "libhipdnn_backend.so")


def include_dir() -> str:
    """Directory with hipdnn_backend.h and hipdnn_plugin_sdk/ (like numpy.get_include())."""
    packaged = os.path.join(_HERE, "include")
    if os.path.isdir(packaged):
        return packaged
    return os.path.join(os.path.dirname(_HERE), "include")


def pkgconfig_dir() -> str:
    """Directory holding hipdnn_backend.pc (put it on PKG_CONFIG_PATH)."""
    return os.path.join(library_dir(), "pkgconfig")


def cmake_dir() -> str:
    """Directory holding hipdnn_backendConfig.cmake (pass as -Dhipdnn_backend_DIR=...)."""
    return os.path.join(library_dir(), "cmake")
