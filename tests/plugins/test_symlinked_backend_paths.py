"""Relative plugin paths resolve against the folder of the path libhipdnn_backend.so was loaded
by - a symlink's folder, not its target's - as hipDNN's getCurrentModuleDirectory (dladdr's file
name, its parent folder made absolute and canonical) does."""
from __future__ import annotations

import os
import shutil

from cabi_testlib import LIB, ROOT
from plugins_testlib import py


def test_relative_plugin_dir_is_relative_to_the_symlink_folder(tmp_path):
    link_dir = tmp_path / "linked"
    link_dir.mkdir()
    os.symlink(LIB, link_dir / "libhipdnn_backend.so")
    plugins = link_dir / "relplugins"
    plugins.mkdir()
    loader = os.path.join(ROOT, "hipdnn_cabi", "lib", "hipdnn_plugins", "engines",
                          "cpu_reference.py")
    shutil.copy(loader, plugins / "cpu_reference.py")
    r = py("""
h = create_handle()
n = ffi.new("size_t*"); lib.hipdnnGetEngineCount_ext(h, n)
cnt = ffi.new("size_t*"); ln = ffi.new("size_t*")
lib.hipdnnGetLoadedEnginePluginPaths_ext(h, cnt, ffi.NULL, ln)
bufs = [ffi.new("char[]", ln[0]) for _ in range(cnt[0])]
arr = ffi.new("char*[]", bufs)
lib.hipdnnGetLoadedEnginePluginPaths_ext(h, cnt, arr, ln)
print(json.dumps({"n": n[0], "paths": [ffi.string(b).decode() for b in bufs], "err": err()}))
""", {"HIPDNN_CABI_BACKEND_LIB": str(link_dir / "libhipdnn_backend.so"),
      "HIPDNN_PLUGIN_DIR": "relplugins/", "HIPDNN_CABI_NO_ENTRY_POINT_PLUGINS": "1"})
    assert r["n"] == 1, r
    assert r["paths"] == [os.path.realpath(plugins / "cpu_reference.py")], r
