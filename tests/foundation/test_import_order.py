"""The library starts in an already-running interpreter whatever was imported first.

Before Python 3.12, cffi's embedding start spins until ``PyCapsule_Type.tp_version_tag`` reads 0;
any attribute lookup on a capsule (the datetime C API import that torch/pandas do, numpy's and
cffi's capsules) gives the type a version tag and the first backend call used to spin for ever.
Every case runs in a fresh subprocess with a timeout (a hang is a failure, not a stuck test run)."""
import subprocess
import sys
import textwrap

import pytest

from cabi_testlib import LIB, ROOT

PRELUDES = {
    "datetime_capi": "import datetime; hasattr(datetime.datetime_CAPI, 'x')",
    "datetime_capi_getattr": "import datetime; getattr(datetime.datetime_CAPI, '__class__')",
    "numpy_capsule": "import importlib, numpy; m = importlib.import_module("
                     "'numpy._core._multiarray_umath' if numpy.__version__ >= '2' else "
                     "'numpy.core._multiarray_umath'); hasattr(m._ARRAY_API, 'x')",
    "cffi_capsule": "import _cffi_backend; hasattr(_cffi_backend._C_API, 'x')",
    "any_capsule": "import ctypes; c = ctypes.pythonapi.PyCapsule_New; "
                   "c.restype = ctypes.py_object; c.argtypes = [ctypes.c_void_p, ctypes.c_char_p, "
                   "ctypes.c_void_p]; hasattr(c(1, None, None), 'x')",
    "nothing": "pass",
}

FRONTEND = "import hipdnn_cabi.frontend as hf; h = hf.Handle(); print('started')"
CTYPES = textwrap.dedent(f"""
    import ctypes
    lib = ctypes.CDLL({LIB!r})
    h = ctypes.c_void_p()
    rc = lib.hipdnnCreate(ctypes.byref(h))
    assert rc == 0, rc
    assert lib.hipdnnDestroy(h) == 0
    print('started')
""")
THREADS = textwrap.dedent(f"""
    import ctypes, threading
    lib = ctypes.CDLL({LIB!r})
    rcs = []
    def go():
        h = ctypes.c_void_p()
        rcs.append(lib.hipdnnCreate(ctypes.byref(h)))
    ts = [threading.Thread(target=go) for _ in range(4)]
    [t.start() for t in ts]; [t.join() for t in ts]
    assert rcs == [0, 0, 0, 0], rcs
    print('started')
""")


def _run(code, timeout=30):
    try:
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           timeout=timeout, cwd=ROOT)
    except subprocess.TimeoutExpired:
        pytest.fail(f"hang: the first backend call did not return within {timeout} s:\n{code}")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().endswith("started"), r.stdout + r.stderr


@pytest.mark.parametrize("prelude", sorted(PRELUDES))
def test_frontend_starts_after(prelude):
    _run(PRELUDES[prelude] + "\n" + FRONTEND)


@pytest.mark.parametrize("prelude", ["datetime_capi", "numpy_capsule", "any_capsule"])
def test_ctypes_host_starts_after(prelude):
    _run(PRELUDES[prelude] + "\n" + CTYPES)


def test_concurrent_first_calls_after_datetime():
    _run(PRELUDES["datetime_capi"] + "\n" + THREADS)


def test_capsule_lookups_keep_working_after_start():
    """The start invalidates the capsule type's method cache; capsules stay fully usable."""
    _run(PRELUDES["datetime_capi"] + "\n" + FRONTEND + "\n"
         "import datetime; assert not hasattr(datetime.datetime_CAPI, 'x');"
         "assert type(datetime.datetime_CAPI).__name__ == 'PyCapsule'; "
         "import numpy; numpy.zeros(3).sum(); print('started')")
