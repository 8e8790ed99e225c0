"""Heuristic plugins through the C API (HeuristicsPluginApi.h; docs/plugins.md "Heuristic plugins"):
load-time validation, policy enumeration, the policy pipeline at ENGINEHEUR finalize, precedence
of HIPDNN_HEUR_POLICY_ORDER over the attribute, misbehaving policies skipped, plugin handles per
hipdnn handle.  Engines: three mini engine plugins (MIOPEN_ENGINE_DETERMINISTIC, MINI_mid,
MIOPEN_ENGINE); policies: tests/plugins/heuristics/mini_heuristic.c with switches."""
from __future__ import annotations

import os
import subprocess

import pytest

from plugins_testlib import HERE, INCLUDE, py

from hipdnn_cabi.backend.plugins.loader import fnv1a64

CONFIG, STATIC = fnv1a64("SelectionHeuristic::Config"), fnv1a64("SelectionHeuristic::StaticOrdering")
DET, MID, MIO = (fnv1a64(n) for n in ("MIOPEN_ENGINE_DETERMINISTIC", "MINI_mid", "MIOPEN_ENGINE"))
STATIC_ORDER = [MIO, MID, DET]
CANDIDATES = [DET, MID, MIO]  # plugin file order a_, b_, c_


@pytest.fixture(scope="module")
def three(mini):
    d = None
    for tag, name in (("a", "MIOPEN_ENGINE_DETERMINISTIC"), ("b", "MINI_mid"), ("c", "MIOPEN_ENGINE")):
        d = os.path.dirname(mini(tag, f'ENGINE_NAME="{name}"', dirname="hthree"))
    return d


@pytest.fixture(scope="module")
def heur(tmp_path_factory):
    """heur(tag, *defines, dirname=None) → path of a compiled mini heuristic plugin."""
    base = tmp_path_factory.mktemp("heur")
    cache = {}

    def build(tag, *defines, dirname=None):
        key = (tag, defines, dirname)
        if key in cache:
            return cache[key]
        d = base / (dirname or f"h_{tag}")
        d.mkdir(exist_ok=True)
        so = d / f"libmini_heur_{tag}.so"
        cmd = ["gcc", "-std=c11", "-Wall", "-Wextra", "-Werror", "-fPIC", "-shared",
               "-DHIPDNN_CABI_NO_HIP_HEADERS", f"-I{INCLUDE}", f'-DHEUR_TAG="{tag}"',
               *[f"-D{x}" for x in defines], os.path.join(HERE, "heuristics", "mini_heuristic.c"),
               "-o", str(so)]
        r = subprocess.run(cmd, capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        cache[key] = str(so)
        return str(so)

    return build


PRELUDE = """
hh = create_handle()
g = standin_graph(hh)
def heur(policy=None):
    hd = desc(D.HIPDNN_BACKEND_ENGINEHEUR_DESCRIPTOR)
    set_attr(hd, A.HIPDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, T.HIPDNN_TYPE_BACKEND_DESCRIPTOR, "hipdnnBackendDescriptor_t", [g])
    set_attr(hd, A.HIPDNN_ATTR_ENGINEHEUR_MODE, T.HIPDNN_TYPE_HEUR_MODE, "int", [0])
    if policy is not None:
        arr = ffi.new("int64_t[]", policy or [0])
        assert lib.hipdnnBackendSetAttribute(hd, A.HIPDNN_ATTR_ENGINEHEUR_POLICY_ORDER_EXT, T.HIPDNN_TYPE_INT64, len(policy), arr) == 0
    return hd, lib.hipdnnBackendFinalize(hd)
def ids(hd):
    n = ffi.new("int64_t*")
    assert lib.hipdnnBackendGetAttribute(hd, A.HIPDNN_ATTR_ENGINEHEUR_RESULTS, T.HIPDNN_TYPE_BACKEND_DESCRIPTOR, 0, n, ffi.NULL) == 0
    cfgs = [desc(D.HIPDNN_BACKEND_ENGINECFG_DESCRIPTOR) for _ in range(n[0])]
    if not cfgs:
        return []
    arr = ffi.new("hipdnnBackendDescriptor_t[]", cfgs)
    assert lib.hipdnnBackendGetAttribute(hd, A.HIPDNN_ATTR_ENGINEHEUR_RESULTS, T.HIPDNN_TYPE_BACKEND_DESCRIPTOR, len(cfgs), n, arr) == 0
    return [lib.hipdnnBackendFinalize(c) or engine_id_of_cfg(c) for c in cfgs]
def outcome(**kw):
    hd, st = heur(**kw)
    return {"st": st, "err": err() if st else "", "ids": ids(hd) if st == 0 else None}
def policies(h=hh):
    n = ffi.new("size_t*")
    assert lib.hipdnnGetHeuristicPolicyCount_ext(h, n) == 0
    out = []
    for i in range(n[0]):
        pid = ffi.new("int64_t*")
        L = [ffi.new("size_t*") for _ in range(4)]
        assert lib.hipdnnGetHeuristicPolicyInfo_ext(h, i, pid, ffi.NULL, L[0], ffi.NULL, L[1], ffi.NULL, L[2], ffi.NULL, L[3]) == 0
        bufs = [ffi.new("char[]", l[0]) for l in L]
        assert lib.hipdnnGetHeuristicPolicyInfo_ext(h, i, pid, bufs[0], L[0], bufs[1], L[1], bufs[2], L[2], bufs[3], L[3]) == 0
        out.append([pid[0]] + [ffi.string(b).decode() for b in bufs])
    return out
"""


def _env(three, hdir, tmp_path, **extra):
    e = {"HIPDNN_PLUGIN_DIR": three, "HIPDNN_HEURISTIC_PLUGIN_DIR": hdir,
         "HIPDNN_CACHE_DIR": str(tmp_path / "cache"), "HIPDNN_LOG_LEVEL": "info",
         "HIPDNN_LOG_FILE": str(tmp_path / "log.txt")}
    e.update(extra)
    return e


def _log(tmp_path):
    p = tmp_path / "log.txt"
    return p.read_text() if p.exists() else ""


def test_plugin_policy_orders_engines(three, heur, tmp_path):
    rec = tmp_path / "rec.txt"
    so = heur("rev", 'POLICY_NAME="MiniHeuristic::rev"', "MODE_REVERSE", "WITH_HOST", "WITH_TRACE",
              "WITH_CONFIG", 'SECOND_POLICY="MiniHeuristic::never"', f'RECORD_FILE="{rec}"',
              dirname="good")
    rev = fnv1a64("MiniHeuristic::rev")
    never = fnv1a64("MiniHeuristic::never")
    r = py(PRELUDE + f"""
out = {{"pol": policies(), "rev": outcome(policy=[{rev}]), "never_then_static": outcome(policy=[{never}, {STATIC}]),
        "default": outcome()}}
h2 = create_handle()
out["pol2"] = len(policies(h2))
lib.hipdnnDestroy(h2)
lib.hipdnnDestroy(hh)
print(json.dumps(out))
""", _env(three, os.path.dirname(so), tmp_path))
    names = [p[1] for p in r["pol"]]
    assert names == ["SelectionHeuristic::Config", "SelectionHeuristic::StaticOrdering",
                     "MiniHeuristic::never", "MiniHeuristic::rev"]
    assert r["pol"][0][0] == CONFIG and r["pol"][3][0] == rev
    assert r["pol"][3][2:] == ["mini_heur_rev", "1.2.3", "0.1.0"]
    assert r["pol2"] == 4
    assert r["rev"]["ids"] == CANDIDATES[::-1]
    assert r["never_then_static"]["ids"] == STATIC_ORDER  # the declining policy is skipped
    assert r["default"]["ids"] == STATIC_ORDER            # plugins do not change the default order
    lines = rec.read_text().splitlines()
    assert lines.count("create 0") == 2 and lines.count("destroy 0") == 2  # one per hipdnn handle
    assert any(x.startswith("devprops ") for x in lines)
    assert "with_host prediction_status 5" in lines   # the host answers NOT_APPLICABLE
    assert "finalize_plain 0" not in lines            # FinalizeWithHost is preferred
    assert lines.count("policy_destroy 0") == 2       # every policy descriptor destroyed
    assert any(x.startswith("loglevel ") for x in lines)  # the level handed over at load
    log = _log(tmp_path)
    assert "Loaded heuristic plugin mini_heur_rev 1.2.3" in log
    assert "trace for engine" in log and '{"mini": "trace"}' in log


def test_env_order_overrides_attribute_and_names_resolve(three, heur, tmp_path):
    so = heur("fwd", 'POLICY_NAME="MiniHeuristic::fwd"', "MODE_REVERSE", dirname="envorder")
    r = py(PRELUDE + f"""
import os
out = {{}}
os.environ["HIPDNN_HEUR_POLICY_ORDER"] = " MiniHeuristic::fwd , SelectionHeuristic::StaticOrdering"
out["env"] = outcome(policy=[{STATIC}])
os.environ["HIPDNN_HEUR_POLICY_ORDER"] = "{STATIC}"
out["env_static"] = outcome(policy=[{fnv1a64("MiniHeuristic::fwd")}])
print(json.dumps(out))
""", _env(three, os.path.dirname(so), tmp_path))
    assert r["env"]["ids"] == CANDIDATES[::-1]
    assert r["env_static"]["ids"] == STATIC_ORDER


@pytest.mark.parametrize("mode,text", [
    ("MODE_FAIL", "finalize failed on purpose"),
    ("MODE_WRONG_IDS", "which is not an applicable engine"),
    ("MODE_DUP_IDS", "duplicate engine IDs"),
    ("MODE_EMPTY", "returned no engine IDs"),
    ("MODE_DECLINE", "declined"),
])
def test_misbehaving_policy_is_skipped(three, heur, tmp_path, mode, text):
    tag = mode.lower()
    so = heur(tag, f'POLICY_NAME="Bad::{tag}"', mode, dirname=f"bad_{tag}")
    pid = fnv1a64(f"Bad::{tag}")
    r = py(PRELUDE + f"""
print(json.dumps({{"fallback": outcome(policy=[{pid}, {STATIC}]), "alone": outcome(policy=[{pid}])}}))
""", _env(three, os.path.dirname(so), tmp_path))
    assert r["fallback"]["st"] == 0 and r["fallback"]["ids"] == STATIC_ORDER
    assert r["alone"]["st"] == 9 and r["alone"]["err"].endswith("No heuristic policy succeeded.")
    assert text in _log(tmp_path)


def test_slow_policy(three, heur, tmp_path):
    so = heur("slow", 'POLICY_NAME="Slow::p"', "SLEEP_MS=300", dirname="slow")
    r = py(PRELUDE + f"""
print(json.dumps(outcome(policy=[{fnv1a64("Slow::p")}])))
""", _env(three, os.path.dirname(so), tmp_path))
    assert r["ids"] == CANDIDATES


@pytest.mark.parametrize("defines,text", [
    (("NO_FINALIZE",), "ERROR: HEURISTIC PLUGIN ABI INCOMPLETE"),
    (("BAD_POLICY_HASH",), "Policy ID/name mismatch"),
    (('API_VERSION="1.0.0"',), "HEURISTIC PLUGIN ABI VALIDATION FAILED"),
    (('API_VERSION="nonsense"',), "HEURISTIC PLUGIN ABI VALIDATION FAILED"),
])
def test_load_rejections(three, heur, tmp_path, defines, text):
    tag = "rej%d" % abs(hash(defines) % 10000)
    so = heur(tag, *defines, dirname=f"rej_{tag}")
    r = py(PRELUDE + """
print(json.dumps({"pol": policies(), "default": outcome()}))
""", _env(three, os.path.dirname(so), tmp_path))
    assert [p[1] for p in r["pol"]] == ["SelectionHeuristic::Config",
                                        "SelectionHeuristic::StaticOrdering"]
    assert r["default"]["ids"] == STATIC_ORDER  # the host carries on without the plugin
    log = _log(tmp_path)
    assert "Error loading heuristic plugin from [" in log and text in log


def test_duplicate_policy_first_plugin_keeps_it(three, heur, tmp_path):
    heur("d1", 'POLICY_NAME="Dup::p"', "MODE_REVERSE", dirname="dups")
    so = heur("d2", 'POLICY_NAME="Dup::p"', dirname="dups")
    r = py(PRELUDE + f"""
print(json.dumps({{"pol": policies(), "o": outcome(policy=[{fnv1a64("Dup::p")}])}}))
""", _env(three, os.path.dirname(so), tmp_path))
    assert [p[1] for p in r["pol"]].count("Dup::p") == 1
    assert r["o"]["ids"] == CANDIDATES[::-1]  # libmini_heur_d1.so sorts first and keeps it
    assert "already provides" in _log(tmp_path)


def test_set_heuristic_plugin_paths(three, heur, tmp_path):
    so = heur("paths", 'POLICY_NAME="Paths::p"', "MODE_REVERSE", dirname="paths")
    r = py(f"""
p = ffi.new("char[]", {so!r}.encode())
arr = ffi.new("const char*[]", [p])
out = {{"set": lib.hipdnnSetHeuristicPluginPaths_ext(1, arr, 1)}}
hh = create_handle()
n = ffi.new("size_t*")
lib.hipdnnGetHeuristicPolicyCount_ext(hh, n)
out["n"] = n[0]
out["busy"] = lib.hipdnnSetHeuristicPluginPaths_ext(1, arr, 0)
out["busy_err"] = err()
lib.hipdnnDestroy(hh)
out["after"] = lib.hipdnnSetHeuristicPluginPaths_ext(0, ffi.NULL, 1)
hh = create_handle()
lib.hipdnnGetHeuristicPolicyCount_ext(hh, n)
out["n2"] = n[0]
print(json.dumps(out))
""", {"HIPDNN_PLUGIN_DIR": three, "HIPDNN_HEURISTIC_PLUGIN_DIR": str(tmp_path / "none")})
    assert r["set"] == 0 and r["n"] == 3
    assert r["busy"] == 8 and "active handle" in r["busy_err"]  # NOT_SUPPORTED
    assert r["after"] == 0 and r["n2"] == 2


PYDIR = os.path.join(HERE, "heuristics", "pydir")
PYREV, PYDECL = fnv1a64("PyHeuristic::Reverse"), fnv1a64("PyHeuristic::Decline")


def test_python_heuristic_plugin_in_host(three, tmp_path):
    r = py(PRELUDE + f"""
out = {{"pol": policies(), "rev": outcome(policy=[{PYREV}]),
        "decl": outcome(policy=[{PYDECL}, {STATIC}])}}
print(json.dumps(out))
""", _env(three, PYDIR, tmp_path))
    assert ["PyHeuristic::Decline", "PyHeuristic::Reverse"] == [p[1] for p in r["pol"][2:]]
    assert r["pol"][3][2:] == ["py_reverse_heuristic", "2.0.0", "0.1.0"]
    assert r["rev"]["ids"] == CANDIDATES[::-1]
    assert r["decl"]["ids"] == STATIC_ORDER
    assert '"policy": "PyHeuristic::Reverse"' in _log(tmp_path)   # GetTrace, logged at info
    assert '"device_id": -1' in _log(tmp_path)   # the host's CPU description reached the plugin


@pytest.mark.slow
def test_python_heuristic_plugin_exported_as_so(three, tmp_path):
    from hipdnn_cabi.plugin_sdk import export
    d = tmp_path / "exported"
    d.mkdir()
    so = export.build(os.path.join(PYDIR, "py_reverse_heuristic.py"),
                      str(d / "libpy_reverse_heuristic.so"), tmp_dir=str(tmp_path / "b"))
    syms = subprocess.run(["nm", "-D", "--defined-only", so], capture_output=True, text=True).stdout
    assert "hipdnnHeuristicPolicyFinalize" in syms and "hipdnnEnginePluginCreate" not in syms
    r = py(PRELUDE + f"""
print(json.dumps({{"pol": [p[1] for p in policies()], "rev": outcome(policy=[{PYREV}])}}))
""", _env(three, str(d), tmp_path))
    assert "PyHeuristic::Reverse" in r["pol"]
    assert r["rev"]["ids"] == CANDIDATES[::-1]


def test_c_sample_heuristic_plugin(tmp_path, c_sample):
    from plugins_testlib import ROOT
    out = tmp_path / "cs"
    r = subprocess.run(["make", "-s", "-C", os.path.join(ROOT, "engine_plugins", "c_sample"),
                        f"OUT={out}"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    hdir = tmp_path / "hdir"
    hdir.mkdir()
    os.symlink(out / "libhipdnn_c_sample_heuristic.so", hdir / "libhipdnn_c_sample_heuristic.so")
    aware = fnv1a64("HipdnnCabiSample::DeviceAware")
    cpu = fnv1a64("HIPDNN_CABI_CPU_REFERENCE_ENGINE")
    ref = os.path.join(ROOT, "hipdnn_cabi", "lib", "hipdnn_plugins", "engines")
    r = py(PRELUDE.replace("g = standin_graph(hh)", "g = standin_graph(hh)\n") + f"""
out = {{"pol": [p[1] for p in policies()], "aware": outcome(policy=[{aware}]),
        "default": outcome()}}
print(json.dumps(out))
""", {"HIPDNN_PLUGIN_DIR": c_sample, "HIPDNN_HEURISTIC_PLUGIN_DIR": str(hdir),
      "HIPDNN_CACHE_DIR": str(tmp_path / "c"), "HIPDNN_LOG_LEVEL": "info",
      "HIPDNN_LOG_FILE": str(tmp_path / "log.txt")})
    assert "HipdnnCabiSample::DeviceAware" in r["pol"]
    # the C sample engine is the only candidate: neither preferred engine is there → declines
    assert r["aware"]["st"] == 9
    assert r["default"]["st"] == 0
    del ref, cpu
