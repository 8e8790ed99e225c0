"""Access to the generated cffi declarations (cdef/generated.py).

In a source checkout they are read from ``cdef/generated.py``; an installed package carries a copy
as ``hipdnn_cabi/_cdef_generated.py`` (written by setup.py).
"""
import importlib.util
import os

_HERE = os.path.dirname(os.path.abspath(__file__))


def load():
    try:
        from . import _cdef_generated as mod  # installed copy
        return mod
    except ImportError:
        pass
    path = os.path.join(os.path.dirname(_HERE), "cdef", "generated.py")
    spec = importlib.util.spec_from_file_location("hipdnn_cabi._cdef_source", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod
