"""hipDNN's version parsing (signed components) and its plugin-admission messages,
word for word (tests and users grep for them)."""
from __future__ import annotations

import os
import shutil

import pytest

from plugins_testlib import py
from hipdnn_cabi.backend.plugins import host
from hipdnn_cabi.backend.plugins.loader import fnv1a64, hex_id, parse_version, parse_version_checked

FORMAT = 'Required format: "MAJOR.MINOR.PATCH"'


@pytest.mark.parametrize("text, want", [
    ("1.2.3", (1, 2, 3)), ("-1.0.0", (-1, 0, 0)), ("+1.0.0", (1, 0, 0)), ("1.-2.3", (1, -2, 3)),
    (" 1 . 2 . 3", (1, 2, 3)), ("1.2.3.4", (1, 2, 3)), ("1.2.3abc", (1, 2, 3)), ("1.2.3 ", (1, 2, 3)),
    ("-2147483648.0.0", (-2147483648, 0, 0)), ("007.0.0", (7, 0, 0)),
    ("1.2", None), ("", None), ("x", None), ("one.two", None), ("1..2", None), ("1.2.", None),
    ("- 1.0.0", None), ("0x1.0.0", None), ("2147483648.0.0", None), ("1,2,3", None),
])
def test_version_parsing_is_hipdnns(text, want):
    assert parse_version(text) == want
    v, why = parse_version_checked(text)
    assert v == want
    if want is None:
        assert why == f"Version string does not match required format. String = {text} {FORMAT}"
    else:
        assert why is None


def test_negative_major_is_a_major_mismatch_not_unparseable(mini):
    so = mini("neg", 'API_VERSION="-1.0.0"', dirname="negonly")
    r = py("""
h = ffi.new("hipdnnHandle_t*")
st = lib.hipdnnCreate(h)
n = ffi.new("size_t*"); lib.hipdnnGetEngineCount_ext(h[0], n)
print(json.dumps({"st": st, "err": err(), "n": n[0]}))
""", {"HIPDNN_PLUGIN_DIR": os.path.dirname(so)})
    assert r["st"] == 0 and r["n"] == 0
    assert r["err"] == (f"Error loading plugin from [{so}]: ERROR: ENGINE PLUGIN ABI VALIDATION FAILED\n"
                        "Plugin mini_neg's major API version (-1.0.0) does not match expected engine "
                        "API major version (1)\nExpected API version: 1.0.0")


def test_admission_log_lines(mini, tmp_path):
    d = tmp_path / "adm"
    d.mkdir()
    for tag, defs in (("a", ()), ("badhash", ("BAD_NAME_HASH",)), ("claim", ('REPORTED_NAME="MINI_a"',)),
                      ("fn", ("FAIL_ENGINE_NAME",)), ("nn", ("NO_ENGINE_NAME",)),
                      ("v0", ('API_VERSION="0.9.0"',)), ("bad", ('API_VERSION="x"',))):
        shutil.copy(mini(tag, *defs), d / f"libmini_{tag}.so")
    shutil.copy(d / "libmini_a.so", d / "libmini_a_copy.so")  # the same engine again
    logf = tmp_path / "log.txt"
    r = py("""
h = create_handle()
n = ffi.new("size_t*"); lib.hipdnnGetEngineCount_ext(h, n)
print(json.dumps({"n": n[0]}))
""", {"HIPDNN_PLUGIN_DIR": str(d), "HIPDNN_LOG_LEVEL": "info", "HIPDNN_LOG_FILE": str(logf)})
    # admitted: MINI_a (first copy), MINI_nn (no names), MINI_v0 (major 0)
    assert r["n"] == 3
    lines = logf.read_text().splitlines()

    def has(sev, text):
        return f"[hipdnn_backend] [{sev}] {text}" in lines

    a, bh = fnv1a64("MINI_a"), fnv1a64("NOT_THE_HASHED_NAME")
    assert has("error", f"Plugin 'mini_badhash' reports engine name 'NOT_THE_HASHED_NAME' for engine "
                        f"{hex_id(fnv1a64('MINI_badhash'))}, but that name is the name of engine "
                        f"{hex_id(bh)} (no loaded engine claims that ID). An engine ID must equal "
                        "the hash of its name; dropping the engine."), lines
    assert has("error", f"Plugin 'mini_claim' reports engine name 'MINI_a' for engine "
                        f"{hex_id(fnv1a64('MINI_claim'))}, but that name is the name of engine "
                        f"{hex_id(a)} (plugin 'mini_a' provides that engine). An engine ID must equal "
                        "the hash of its name; dropping the engine."), lines
    assert has("error", f"Plugin 'mini_a' declares engine {hex_id(a)}, which plugin 'mini_a' already "
                        "provides. The first plugin to declare an engine keeps it; dropping the "
                        "duplicate."), lines
    assert has("error", f"Plugin 'mini_fn' failed to report a name for engine "
                        f"{hex_id(fnv1a64('MINI_fn'))}: Failed to get engine name. Status: "
                        "HIPDNN_PLUGIN_STATUS_INTERNAL_ERROR(3), Error: mini: no name today. "
                        "Dropping the engine."), lines
    assert has("warning", "Plugin 'mini_fn' names none of its engines, so they are identified by "
                          "their IDs. Its engine container supplies no name for any of them; give it "
                          "a static getEngineName."), lines
    assert has("warning", "Plugin 'mini_nn' names none of its engines, so they are identified by "
                          "their IDs. It does not export hipdnnEnginePluginGetEngineName, which engine "
                          "plugin API 1.4.0 added."), lines
    assert has("info", "Plugin does not supply engine names "
                       "(hipdnnEnginePluginGetEngineName not exported)"), lines
    assert has("info", "Accepting legacy major-0 plugin 'mini_v0' under transitional shim; this "
                       "will be removed in the next major version."), lines
    assert has("warning", "Plugin 'mini_bad' has malformed API version string 'x': Version string "
                          f"does not match required format. String = x {FORMAT}"), lines
    assert not any("names none" in ln and ("mini_a'" in ln or "mini_claim" in ln) for ln in lines)


class _FakePlugin:
    """Just what PluginManager._admit reads."""

    def __init__(self, name, names):
        self.name = name
        self.fn = {"hipdnnEnginePluginGetEngineName": 1}
        self._names = names                       # id -> reported name
        self.engine_ids = sorted(names)
        self.known = frozenset(names)
        self.names = {}

    def engine_name_of(self, eid):
        return self._names[eid]


def test_holder_when_the_same_plugin_declares_the_named_engine(monkeypatch):
    """IDs are admitted in ascending order, so a name can point at an engine of the same plugin
    that is not admitted yet ("this plugin also declares that engine") or already is."""
    errors = []
    monkeypatch.setattr(host, "_err", errors.append)
    monkeypatch.setattr(host, "_warn", lambda m: None)
    x, y = sorted([fnv1a64("ENGINE_X"), fnv1a64("ENGINE_Y")])
    nx = "ENGINE_X" if fnv1a64("ENGINE_X") == x else "ENGINE_Y"
    ny = "ENGINE_Y" if nx == "ENGINE_X" else "ENGINE_X"
    m = host.PluginManager.__new__(host.PluginManager)
    m.owner, m.dropped = {}, set()
    # the smaller id reports the bigger id's name (not admitted yet); the bigger one its own name
    m._admit(_FakePlugin("two", {x: ny, y: ny}))
    assert errors == [f"Plugin 'two' reports engine name '{ny}' for engine {hex_id(x)}, but that name "
                      f"is the name of engine {hex_id(y)} (this plugin also declares that engine). "
                      "An engine ID must equal the hash of its name; dropping the engine."]
    assert set(m.owner) == {y} and m.dropped == {x}
    errors.clear()
    m = host.PluginManager.__new__(host.PluginManager)
    m.owner, m.dropped = {}, set()
    # the bigger id reports the smaller id's name, which this plugin already provides
    m._admit(_FakePlugin("two", {x: nx, y: nx}))
    assert errors == [f"Plugin 'two' reports engine name '{nx}' for engine {hex_id(y)}, but that name "
                      f"is the name of engine {hex_id(x)} (plugin 'two' provides that engine). "
                      "An engine ID must equal the hash of its name; dropping the engine."]
