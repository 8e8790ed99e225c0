"""Access to the generated cffi declarations (cdef/generated.py).

In a source checkout they are read from ``cdef/generated.py``; an installed package carries a copy
as ``hipdnn_cabi/_cdef_generated.py`` (written by setup.py).
"""
import importlib.util
import os

try:
    from . import _cdef_generated as _INSTALLED  # only an installed package carries the copy
except ImportError:
    _INSTALLED = None

_HERE = os.path.dirname(os.path.abspath(__file__))


def load():
    if _INSTALLED is not None:
        return _INSTALLED
    path = os.path.join(os.path.dirname(_HERE), "cdef", "generated.py")
    spec = importlib.util.spec_from_file_location("hipdnn_cabi._cdef_source", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod
