"""A default run (no plugin paths set, the default heuristic-plugin directory absent, as in a
checkout or a wheel) logs no warning about that directory; a path the caller names that is
neither a directory nor a file name still does."""
from __future__ import annotations

from plugins_testlib import py


def test_missing_default_heuristic_dir_is_not_a_warning(tmp_path):
    logf = tmp_path / "log.txt"
    r = py("""
h = create_handle()
print(json.dumps({"ok": True}))
""", {"HIPDNN_LOG_LEVEL": "warn", "HIPDNN_LOG_FILE": str(logf),
      "HIPDNN_HEURISTIC_PLUGIN_DIR": ""})
    assert r["ok"]
    text = logf.read_text() if logf.exists() else ""
    assert "hipdnn_plugins/heuristics" not in text, text
    assert "neither a directory nor a file name" not in text, text


def test_named_path_that_is_neither_still_warns(tmp_path):
    logf = tmp_path / "log.txt"
    py("""
p = ffi.new("char[]", b"no_such_dir/")
arr = ffi.new("char*[]", [p])
lib.hipdnnSetHeuristicPluginPaths_ext(1, arr, 0)
h = create_handle()
print(json.dumps({"ok": True}))
""", {"HIPDNN_LOG_LEVEL": "warn", "HIPDNN_LOG_FILE": str(logf)})
    text = logf.read_text()
    assert "no_such_dir" in text and "neither a directory nor a file name" in text, text
