#!/usr/bin/env python3
"""Build libhipdnn_backend.so with cffi's embedding mode.

Usage: python cdef/build_backend.py [--out DIR] [--tmp DIR]

The library is: cdef/bootstrap.c (interpreter start-up) + cffi's glue for the extern "Python"
entry points listed in hipdnn_cabi/backend/_externs.py + cdef/shims.c (the exported hipDNN
functions).  Its init code imports hipdnn_cabi.backend.entry, which attaches every Python body.
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import sysconfig

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)
sys.path.insert(0, HERE)

MODULE = "_hipdnn_cabi_backend"
LIBNAME = "libhipdnn_backend.so"

# C helpers implemented in bootstrap.c/shims.c that Python calls through `lib`.
C_HELPERS = """
void hipdnn_cabi_set_last_error(const char* msg);
const char* hipdnn_cabi_peek_last_error(void);
void hipdnn_cabi_mark_ready(void);
void hipdnn_cabi_set_log_level_cache(int level);
void hipdnn_cabi_set_init_error(const char* msg);
const char* hipdnn_cabi_library_path(void);
void hipdnn_cabi_call_user_log_cb(uint64_t cb, uint64_t user, int sev, const char* msg);
void hipdnn_cabi_call_plugin_log_cb(uint64_t cb, int sev, const char* msg);
"""

INIT_CODE = r'''
import sys, os
from _hipdnn_cabi_backend import ffi, lib
try:
    import importlib.util
    if importlib.util.find_spec("hipdnn_cabi") is None:
        _so = ffi.string(lib.hipdnn_cabi_library_path()).decode("utf-8", "replace")
        _root = os.path.dirname(os.path.dirname(os.path.dirname(_so)))
        if _root not in sys.path:
            sys.path.append(_root)
    from hipdnn_cabi.backend import entry as _entry
    _entry.install(ffi, lib)
except BaseException as _e:
    try:
        _msg = "%s: %s" % (type(_e).__name__, _e)
    except BaseException:
        _msg = "unprintable exception"
    lib.hipdnn_cabi_set_init_error(_msg.encode("utf-8", "replace")[:1000])
'''


def status_cases() -> str:
    from hipdnn_cabi._generated.enums import Status
    return "\n".join(f'    case {s.name}: return "{s.name}";' for s in Status)


def make_ffibuilder(default_python: str | None = None):
    import cffi
    from hipdnn_cabi.backend._externs import EXTERNS
    import generated

    ffi = cffi.FFI()
    ffi.cdef(generated.types())
    ffi.cdef(generated.function_pointer_typedefs(generated.PLUGIN_HEADERS))
    ffi.cdef("\n".join(f'extern "Python" {decl};' for decl in EXTERNS.values()))
    ffi.cdef(C_HELPERS)
    ffi.embedding_init_code(INIT_CODE)

    python = default_python or sys.executable
    shims = open(os.path.join(HERE, "shims.c")).read().replace(
        "HIPDNN_CABI_STATUS_CASES", status_cases())
    source = "\n".join([
        open(os.path.join(HERE, "bootstrap.c")).read(),
        "\n".join(f'#include "{h}"' for h in generated.TYPES),
        # cffi emits the hpy_* bodies after this prelude; the shims need their prototypes first.
        "\n".join(f"static {decl};" for decl in EXTERNS.values()),
        shims,
    ])
    libdir = sysconfig.get_config_var("LIBDIR")
    ver = sysconfig.get_config_var("LDVERSION") or sysconfig.get_python_version()
    ffi.set_source(
        MODULE, source,
        include_dirs=[os.path.join(ROOT, "include")],
        define_macros=[("HIPDNN_CABI_NO_HIP_HEADERS", "1"),
                       ("HIPDNN_CABI_DEFAULT_PYTHON", '"%s"' % python.replace("\\", "\\\\"))],
        libraries=[f"python{ver}", "dl", "pthread"],
        library_dirs=[libdir],
        runtime_library_dirs=[libdir],
        extra_compile_args=["-O2", "-Wno-unused-function", "-Wno-unused-variable"],
        extra_link_args=[f"-Wl,-soname,{LIBNAME}"],
        py_limited_api=False,
    )
    return ffi


def build(out_dir: str, tmp_dir: str, default_python: str | None = None) -> str:
    ffi = make_ffibuilder(default_python)
    os.makedirs(tmp_dir, exist_ok=True)
    os.makedirs(out_dir, exist_ok=True)
    built = ffi.compile(tmpdir=tmp_dir, target=LIBNAME, verbose=False)
    dest = os.path.join(out_dir, LIBNAME)
    tmp_dest = dest + ".tmp"
    shutil.copyfile(built, tmp_dest)
    os.chmod(tmp_dest, 0o755)
    os.replace(tmp_dest, dest)  # atomic: running processes keep their mapping
    return dest


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(ROOT, "hipdnn_cabi", "lib"))
    ap.add_argument("--tmp", default=os.path.join(ROOT, "build", "cffi"))
    ap.add_argument("--python", default=None, help="interpreter the library starts (default: this one)")
    a = ap.parse_args(argv)
    print(build(a.out, a.tmp, a.python))


if __name__ == "__main__":
    main()
