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
const char* hipdnn_cabi_library_dir(void);
const char* hipdnn_cabi_getenv(const char* name);
void hipdnn_cabi_call_user_log_cb(uint64_t cb, uint64_t user, int sev, const char* msg);
void hipdnn_cabi_call_plugin_log_cb(uint64_t cb, int sev, const char* msg);
/* the execute fast path's registry (shims.c) */
uint64_t hipdnn_cabi_fx_epoch(void);
int hipdnn_cabi_fx_register(uint64_t epoch, int64_t hid, int64_t eid, uint64_t ph, uint64_t exec_fn,
                            uint64_t lasterr_fn, int64_t plan_id, uint64_t ctx, uint32_t n_align,
                            const int64_t* align_pairs, int64_t vp_id, const char* packed,
                            uint32_t n, uint64_t ws, int64_t hdev, int64_t pdev, int64_t vdev);
void hipdnn_cabi_fx_remove(int64_t id);
void hipdnn_cabi_fx_set_enabled(int on);
void hipdnn_cabi_fx_set_multi_device(int on);
int hipdnn_cabi_vp_set_device(int64_t id, int64_t dev);
int hipdnn_cabi_fx_enabled(void);
void hipdnn_cabi_fx_stats(uint64_t* out);
/* C-resident variant packs (vpack.c) */
void hipdnn_cabi_vp_set_resident(int on);
int hipdnn_cabi_vp_resident(void);
long hipdnn_cabi_vp_live(void);
int64_t hipdnn_cabi_vp_export(int64_t id, int64_t* out, int64_t cap);
/* the C attribute store (astore.c) */
void hipdnn_cabi_as_set_enabled(int on);
int hipdnn_cabi_as_enabled(void);
int64_t hipdnn_cabi_as_read(int64_t id, int slot, int64_t* out, int64_t cap);
int64_t hipdnn_cabi_as_export(int64_t id, int64_t* out, int64_t cap);
int hipdnn_cabi_as_write(int64_t id, int slot, const int64_t* v, int64_t n);
void hipdnn_cabi_as_mark_finalized(int64_t id, int on);
int hipdnn_cabi_as_live(int64_t id);
void hipdnn_cabi_as_set_py(int64_t id);
long hipdnn_cabi_as_count(void);
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


DL_HELPERS_C = r"""
#include <dlfcn.h>
static uint64_t hipdnn_cabi_dlopen(const char* path, int local)
{
    return (uint64_t)(uintptr_t)dlopen(path, RTLD_NOW | (local ? RTLD_LOCAL : RTLD_GLOBAL));
}
static uint64_t hipdnn_cabi_dlsym(uint64_t h, const char* name)
{
    dlerror();
    return (uint64_t)(uintptr_t)dlsym((void*)(uintptr_t)h, name);
}
static const char* hipdnn_cabi_dlerror(void)
{
    const char* e = dlerror();
    return e ? e : "";
}
static int hipdnn_cabi_dlclose(uint64_t h) { return dlclose((void*)(uintptr_t)h); }
static uint64_t hipdnn_cabi_backend_logging_callback(void)
{
    return (uint64_t)(uintptr_t)&hipdnnLoggingCallback_ext;
}
"""
DL_HELPERS_CDEF = """
uint64_t hipdnn_cabi_dlopen(const char* path, int local);
uint64_t hipdnn_cabi_dlsym(uint64_t h, const char* name);
const char* hipdnn_cabi_dlerror(void);
int hipdnn_cabi_dlclose(uint64_t h);
uint64_t hipdnn_cabi_backend_logging_callback(void);
"""


def trampolines(generated):
    """One C trampoline per plugin API function: ``tramp_<name>(uint64_t fn, args...)`` calls the
    dlsym()ed pointer ``fn`` at API-mode speed (no libffi)."""
    import re
    cdefs, code = [], []
    for h in generated.PLUGIN_HEADERS:
        for proto in generated.FUNCTIONS[h]:
            m = re.match(r"^(.*?)\b(\w+)\((.*)\);$", proto, re.S)
            ret, name, args = m.group(1).strip(), m.group(2), m.group(3).strip()
            params = [a.strip() for a in args.split(",")] if args and args != "void" else []
            names = [re.findall(r"\w+", p)[-1] for p in params]
            sig = ", ".join(["uint64_t fn"] + params)
            call = f"((PFN_{name})(uintptr_t)fn)({', '.join(names)})"
            body = f"{call};" if ret == "void" else f"return {call};"
            cdefs.append(f"{ret} tramp_{name}({sig});")
            code.append(f"static {ret} tramp_{name}({sig}) {{ {body} }}")
    return "\n".join(cdefs), "\n".join(code)


def status_cases() -> str:
    from hipdnn_cabi._generated.enums import Status
    return "\n".join(f'    case {s.name}: return "{s.name}";' for s in Status)


def vpack_source() -> str:
    """cdef/vpack.c with the attribute name/type tables its messages need (from the enums)."""
    from hipdnn_cabi._generated.enums import AttributeName, AttributeType
    names = "\n".join(f'    case {int(m)}: return "{m.name}";' for m in AttributeName)
    types = "\n".join(f'    case {int(m)}: return "{m.name}";' for m in AttributeType)
    return open(os.path.join(HERE, "vpack.c")).read().replace(
        "HIPDNN_CABI_ATTR_NAME_CASES", names).replace("HIPDNN_CABI_ATTR_TYPE_CASES", types)


def astore_source() -> str:
    """cdef/astore.c with its field tables (cdef/astore_tables.h, generated by
    tools/gen_astore_tables.py from the descriptor classes; `make check-generated` checks it)."""
    tables = open(os.path.join(HERE, "astore_tables.h")).read()
    return open(os.path.join(HERE, "astore.c")).read().replace("HIPDNN_CABI_ASTORE_TABLES", tables)


def make_ffibuilder(default_python: str | None = None):
    import cffi
    from hipdnn_cabi.backend._externs import EXTERNS
    import generated

    ffi = cffi.FFI()
    ffi.cdef(generated.types())
    ffi.cdef(generated.function_pointer_typedefs(generated.PLUGIN_HEADERS))
    ffi.cdef("\n".join(f'extern "Python" {decl};' for decl in EXTERNS.values()))
    ffi.cdef(C_HELPERS)
    ffi.cdef(DL_HELPERS_CDEF)
    tramp_cdef, tramp_code = trampolines(generated)
    ffi.cdef(tramp_cdef)
    # Python-plugin slots (hipdnn_cabi.plugin_sdk): static slot<K>_<Fn> C functions with the exact
    # plugin API signatures, each calling the extern "Python" dispatcher hpy_plugin_<Fn>(K, ...).
    from hipdnn_cabi.plugin_sdk import signatures as plugin_sigs
    ffi.cdef("\n".join(f'extern "Python" {decl};'
                       for decl in plugin_sigs.dispatcher_externs(generated).values()))
    slot_cdef, slot_code = plugin_sigs.slot_c_code(generated)
    ffi.cdef(slot_cdef)
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
        vpack_source(),
        astore_source(),
        generated.function_pointer_typedefs(generated.PLUGIN_HEADERS),
        DL_HELPERS_C,
        tramp_code,
        slot_code,
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


def build_fastexec(dest_dir: str, tmp_dir: str) -> str | None:
    """Compile cdef/fastexec.c (the CPython extension ``hipdnn_cabi.frontend._fastexec``, the C
    half of Graph.execute's by-value cache) into ``dest_dir``.  Optional: the frontend runs the
    same cache in Python without it, so a failed compile is reported and skipped."""
    from setuptools import Distribution, Extension
    from setuptools.command.build_ext import build_ext
    ext = Extension("_fastexec", [os.path.join(HERE, "fastexec.c")],
                    extra_compile_args=["-O2", "-Wall", "-Wextra", "-Werror"])
    dist = Distribution({"name": "hipdnn_cabi_fastexec", "ext_modules": [ext]})
    cmd = build_ext(dist)
    cmd.build_temp = os.path.join(tmp_dir, "fastexec")
    cmd.build_lib = os.path.join(tmp_dir, "fastexec_lib")
    try:
        cmd.ensure_finalized()
        cmd.run()
    except Exception as e:  # noqa: BLE001 - no compiler / headers: the Python cache serves
        print(f"fastexec: not built ({type(e).__name__}: {e})", file=sys.stderr)
        return None
    name = os.path.basename(cmd.get_ext_fullpath("_fastexec"))
    os.makedirs(dest_dir, exist_ok=True)
    dest = os.path.join(dest_dir, name)
    shutil.copyfile(os.path.join(cmd.build_lib, name), dest + ".tmp")
    os.replace(dest + ".tmp", dest)
    return dest


def build(out_dir: str, tmp_dir: str, default_python: str | None = None,
          frontend_dir: str | None = None) -> str:
    """libhipdnn_backend.so into ``out_dir`` (hipdnn_cabi/lib) and the frontend's _fastexec
    extension into ``frontend_dir`` (default: the frontend package beside ``out_dir``)."""
    build_fastexec(frontend_dir or os.path.join(os.path.dirname(os.path.abspath(out_dir)), "frontend"),
                   tmp_dir)
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
