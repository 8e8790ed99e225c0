"""``hipdnn-cabi export-plugin <module-or-file.py|package-dir> -o lib<name>.so``

Builds a standalone shared library (cffi embedding; interpreter start-up from cdef/bootstrap.c)
that exports the full engine-plugin C API (PluginApi.h + EnginePluginApi.h, default visibility,
exact signatures — the headers are included, so the compiler checks them) and runs the given
Python plugin inside; for a heuristic plugin (plugin_sdk.heuristics.HeuristicPluginBase) it exports
PluginApi.h + HeuristicsPluginApi.h instead.  Each exported function starts Python on first use, then calls the
``extern "Python"`` dispatcher ``hpy_plugin_<Fn>(0, ...)`` bound to a :class:`.cabi.CAdapter`.
If the plugin cannot be imported, every entry point returns HIPDNN_PLUGIN_STATUS_NOT_INITIALIZED
and hipdnnPluginGetLastErrorString gives the reason.
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import sys
import sysconfig
import tempfile

import cffi

from .. import include_dir
from .._cdef import load
from .heuristics import is_heuristic_plugin
from .loader import make_adapter, resolve
from .signatures import (ENGINE_HEADERS, HEURISTIC_HEADERS, dispatcher_externs, dispatcher_name,
                         signatures)
from .slots import SlotTable, attach, check_complete

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
# An installed package carries cdef/bootstrap.c as hipdnn_cabi/cdef/bootstrap.c (setup.py); a
# source checkout reads it from cdef/.  The headers come from hipdnn_cabi.include_dir().
_PKG_BOOTSTRAP = os.path.join(os.path.dirname(HERE), "cdef", "bootstrap.c")
BOOTSTRAP = _PKG_BOOTSTRAP if os.path.isfile(_PKG_BOOTSTRAP) else os.path.join(ROOT, "cdef", "bootstrap.c")
INCLUDE = include_dir()

GUARD_C = r"""
#include "hipdnn_plugin_sdk/EnginePluginApi.h"
#include "hipdnn_plugin_sdk/HeuristicsPluginApi.h"
static volatile int g_pp_ready = 0;
static char g_pp_error[1300] = "";
static void hipdnn_pyplugin_mark_ready(void) { g_pp_ready = 1; }
static void hipdnn_pyplugin_set_init_error(const char* msg)
{
    snprintf(g_pp_error, sizeof g_pp_error, "%s", msg ? msg : "");
}
/* 0 when the Python plugin is usable. */
static int hipdnn_pyplugin_enter(void)
{
    if (__builtin_expect(g_pp_ready, 1))
        return 0;
    if (hipdnn_cabi_bootstrap() != 0) {
        snprintf(g_pp_error, sizeof g_pp_error,
                 "python plugin: the embedded Python interpreter failed to start: %s", g_boot_error);
        return -1;
    }
    if (hipdnn_cabi_start_embedded() != 0) {
        if (!g_pp_error[0])
            snprintf(g_pp_error, sizeof g_pp_error,
                     "python plugin: the embedded Python module failed to initialise");
        return -1;
    }
    if (!g_pp_ready) {
        if (!g_pp_error[0])
            snprintf(g_pp_error, sizeof g_pp_error, "python plugin: failed to load (unknown error)");
        return -1;
    }
    return 0;
}
"""

INIT_CODE = r'''
import sys
from %(module)s import ffi, lib
try:
    for _p in %(paths)r:
        if _p not in sys.path:
            sys.path.append(_p)
    from hipdnn_cabi.plugin_sdk import export as _export
    _export.start(ffi, lib, %(spec)r)
except BaseException as _e:
    try:
        _msg = "python plugin %(spec)s failed to load: %%s: %%s" %% (type(_e).__name__, _e)
    except BaseException:
        _msg = "python plugin failed to load"
    lib.hipdnn_pyplugin_set_init_error(_msg.encode("utf-8", "replace")[:1200])
'''

_started = {}


def start(ffi, lib, spec: str) -> None:
    """Init code of an exported library: load the plugin, bind it to slot 0, attach bodies."""
    check_complete()
    table = SlotTable(1)
    table.adapters[0] = make_adapter(resolve(spec), ffi)
    attach(ffi, table)
    _started[id(ffi)] = table
    lib.hipdnn_pyplugin_mark_ready()


def exported_c_code(generated, headers=None) -> str:
    """Exported entry points for the functions of ``headers`` (default: the engine-plugin API);
    the dispatchers of every plugin function are declared (one Python module serves both kinds)."""
    headers = headers or ENGINE_HEADERS
    code = []
    for s in signatures(generated):
        code.append(f"static {s.decl(['int slot'], dispatcher_name(s.name))};")
    for s in signatures(generated):
        if s.header not in headers:
            continue
        call = f"{dispatcher_name(s.name)}({', '.join(['0'] + s.names)})"
        if s.is_void:  # hipdnnPluginGetLastErrorString
            arg = s.names[0]
            body = (f"if (hipdnn_pyplugin_enter() != 0) {{ if ({arg}) *{arg} = g_pp_error; return; }} "
                    f"{call};")
        else:
            body = ("if (hipdnn_pyplugin_enter() != 0) return HIPDNN_PLUGIN_STATUS_NOT_INITIALIZED; "
                    f"return {call};")
        code.append(f"HIPDNN_PLUGIN_EXPORT {s.decl()} {{ {body} }}")
    return "\n".join(code)


def module_name(out: str) -> str:
    stem = os.path.basename(out)
    stem = re.sub(r"\.so.*$", "", stem)
    stem = re.sub(r"^lib", "", stem)
    return "_hipdnn_pyplugin_" + (re.sub(r"\W", "_", stem) or "plugin")


def build(spec: str, out: str, tmp_dir: str | None = None, python: str | None = None,
          check_import: bool = True) -> str:
    gen = load()
    if os.path.exists(spec):
        spec = os.path.realpath(spec)
    headers = None
    if check_import:  # fail at build time, not at first call
        if is_heuristic_plugin(resolve(spec)):
            headers = HEURISTIC_HEADERS
    out = os.path.abspath(out)
    mod = module_name(out)
    ffi = cffi.FFI()
    ffi.cdef(gen.types())
    ffi.cdef("\n".join(f'extern "Python" {d};' for d in dispatcher_externs(gen).values()))
    ffi.cdef("void hipdnn_pyplugin_mark_ready(void);\n"
             "void hipdnn_pyplugin_set_init_error(const char* msg);")
    paths = [ROOT, os.getcwd()]
    ffi.embedding_init_code(INIT_CODE % {"module": mod, "paths": paths, "spec": spec})
    python = python or sys.executable
    source = "\n".join([open(BOOTSTRAP).read(),
                        "\n".join(f'#include "{h}"' for h in gen.TYPES),
                        GUARD_C, exported_c_code(gen, headers)])
    libdir = sysconfig.get_config_var("LIBDIR")
    ver = sysconfig.get_config_var("LDVERSION") or sysconfig.get_python_version()
    soname = os.path.basename(out)
    ffi.set_source(
        mod, source, include_dirs=[INCLUDE],
        define_macros=[("HIPDNN_CABI_NO_HIP_HEADERS", "1"),
                       ("HIPDNN_CABI_DEFAULT_PYTHON", '"%s"' % python.replace("\\", "\\\\"))],
        libraries=[f"python{ver}", "dl", "pthread"], library_dirs=[libdir],
        runtime_library_dirs=[libdir],
        extra_compile_args=["-O2", "-Wno-unused-function", "-Wno-unused-variable"],
        extra_link_args=[f"-Wl,-soname,{soname}"], py_limited_api=False)
    own_tmp = tmp_dir is None
    tmp_dir = tmp_dir or tempfile.mkdtemp(prefix="hipdnn_export_")
    try:
        built = ffi.compile(tmpdir=tmp_dir, target=soname, verbose=False)
        os.makedirs(os.path.dirname(out) or ".", exist_ok=True)
        shutil.copyfile(built, out + ".tmp")
        os.chmod(out + ".tmp", 0o755)
        os.replace(out + ".tmp", out)
    finally:
        if own_tmp:
            shutil.rmtree(tmp_dir, ignore_errors=True)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="hipdnn-cabi export-plugin",
                                 description="Build a standalone engine-plugin .so from a Python plugin")
    ap.add_argument("plugin", help="a .py file, a package directory or a module name")
    ap.add_argument("-o", "--output", required=True, help="the library to write (lib<name>.so)")
    ap.add_argument("--tmp", default=None, help="build directory (kept)")
    ap.add_argument("--python", default=None, help="interpreter the library starts (default: this one)")
    a = ap.parse_args(argv)
    print(build(a.plugin, a.output, a.tmp, a.python))
    return 0


if __name__ == "__main__":
    sys.exit(main())
