"""Python engine plugins found the way .so plugins are (a package dir / .py file in a plugin path)
are called by the host through the same function-pointer path, end to end through the C API."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PY_SAMPLE = os.path.join(ROOT, "engine_plugins", "py_sample")


def _py(code: str, env: dict | None = None) -> dict:
    e = dict(os.environ)
    e["HIPDNN_CABI_NO_ENTRY_POINT_PLUGINS"] = "1"
    e.update(env or {})
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=e, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_python_plugin_loaded_from_a_plugin_path(tmp_path):
    plugdir = tmp_path / "plugins"
    plugdir.mkdir()
    os.symlink(PY_SAMPLE, plugdir / "py_sample")
    r = _py(textwrap.dedent(f"""
        import json
        from hipdnn_cabi import capi
        ffi, lib = capi.load()
        keep = ffi.new("char[]", {str(plugdir)!r}.encode())
        paths = ffi.new("char*[1]", [keep])
        st_paths = lib.hipdnnSetEnginePluginPaths_ext(1, paths, lib.HIPDNN_PLUGIN_LOADING_ABSOLUTE)
        h = ffi.new("hipdnnHandle_t*")
        st = lib.hipdnnCreate(h)
        n = ffi.new("size_t*")
        lib.hipdnnGetEngineCount_ext(h[0], n)
        name_len = ffi.new("size_t*"); pl = ffi.new("size_t*"); vl = ffi.new("size_t*"); tl = ffi.new("size_t*")
        eid = ffi.new("int64_t*")
        lib.hipdnnGetEngineInfo_ext(h[0], 0, eid, ffi.NULL, name_len, ffi.NULL, pl, ffi.NULL, vl, ffi.NULL, tl)
        name = ffi.new("char[]", name_len[0]); plug = ffi.new("char[]", pl[0])
        ver = ffi.new("char[]", vl[0]); typ = ffi.new("char[]", tl[0])
        st_info = lib.hipdnnGetEngineInfo_ext(h[0], 0, eid, name, name_len, plug, pl, ver, vl, typ, tl)
        cnt = ffi.new("size_t*"); ml = ffi.new("size_t*")
        lib.hipdnnGetLoadedEnginePluginPaths_ext(h[0], cnt, ffi.NULL, ml)
        print(json.dumps(dict(paths=st_paths, create=st, count=n[0], info=st_info,
                              name=ffi.string(name).decode(), type=ffi.string(typ).decode(),
                              loaded=cnt[0], err=capi.last_error(lib, ffi))))
    """))
    assert r["paths"] == 0 and r["create"] == 0 and r["info"] == 0
    assert r["count"] == 1 and r["loaded"] == 1, r
    assert r["type"] == "HIPDNN_PLUGIN_TYPE_ENGINE"
    assert r["name"], r


def test_broken_python_plugin_is_a_load_error_not_a_crash(tmp_path):
    plugdir = tmp_path / "plugins"
    plugdir.mkdir()
    (plugdir / "broken_plugin.py").write_text("raise RuntimeError('this plugin does not import')\n"
                                              "hipdnn_plugin = None  # declares itself a plugin\n")
    r = _py(textwrap.dedent(f"""
        import json
        from hipdnn_cabi import capi
        ffi, lib = capi.load()
        keep = ffi.new("char[]", {str(plugdir)!r}.encode())
        paths = ffi.new("char*[1]", [keep])
        lib.hipdnnSetEnginePluginPaths_ext(1, paths, lib.HIPDNN_PLUGIN_LOADING_ABSOLUTE)
        h = ffi.new("hipdnnHandle_t*")
        st = lib.hipdnnCreate(h)
        n = ffi.new("size_t*")
        lib.hipdnnGetEngineCount_ext(h[0], n)
        print(json.dumps(dict(create=st, count=n[0], err=capi.last_error(lib, ffi))))
    """))
    assert r["create"] == 0 and r["count"] == 0
    assert r["err"].startswith("Error loading plugin from [") and "does not import" in r["err"]
