"""ENGINEHEUR policies and results (spec §1.6): HIPDNN_HEUR_POLICY_ORDER > POLICY_ORDER_EXT > default,
the POLICY_ORDER_EXT getter, StaticOrdering and HIPDNN_HEUR_FALLBACK_ENGINE_ORDER, RESULTS fetch rules.
Engines come from mini plugins (tests/plugins/broken/mini_plugin.c) named so that the file order
differs from the static order."""
from __future__ import annotations

import os

import pytest

from plugins_testlib import py

from hipdnn_cabi.backend.plugins.loader import fnv1a64

CONFIG, STATIC = fnv1a64("SelectionHeuristic::Config"), fnv1a64("SelectionHeuristic::StaticOrdering")
DET, MID, MIO = (fnv1a64(n) for n in ("MIOPEN_ENGINE_DETERMINISTIC", "MINI_mid", "MIOPEN_ENGINE"))


@pytest.fixture(scope="module")
def three(mini):
    """Files a_, b_, c_ (sorted path order) declare MIOPEN_ENGINE_DETERMINISTIC, MINI_mid, MIOPEN_ENGINE."""
    d = None
    for tag, name in (("a", "MIOPEN_ENGINE_DETERMINISTIC"), ("b", None), ("c", "MIOPEN_ENGINE")):
        defs = (f'ENGINE_NAME="{name}"',) if name else ('ENGINE_NAME="MINI_mid"',)
        d = os.path.dirname(mini(tag, *defs, dirname="three"))
    return d


RUN = """
hh = create_handle()
g = standin_graph(hh)
def heur(policy=None, find_first=None, count=None):
    hd = desc(D.HIPDNN_BACKEND_ENGINEHEUR_DESCRIPTOR)
    set_attr(hd, A.HIPDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, T.HIPDNN_TYPE_BACKEND_DESCRIPTOR, "hipdnnBackendDescriptor_t", [g])
    set_attr(hd, A.HIPDNN_ATTR_ENGINEHEUR_MODE, T.HIPDNN_TYPE_HEUR_MODE, "int", [0])
    if find_first is not None:
        set_attr(hd, A.HIPDNN_ATTR_ENGINEHEUR_FIND_FIRST_EXT, T.HIPDNN_TYPE_BOOLEAN, "bool", [find_first])
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
def policies(hd, req=8):
    n = ffi.new("int64_t*"); v = ffi.new("int64_t[8]")
    st = lib.hipdnnBackendGetAttribute(hd, A.HIPDNN_ATTR_ENGINEHEUR_POLICY_ORDER_EXT, T.HIPDNN_TYPE_INT64, req, n, v)
    return [st, list(v)[:n[0]] if st == 0 else None]
def outcome(**kw):
    hd, st = heur(**kw)
    return {"st": st, "err": err() if st else "", "ids": ids(hd) if st == 0 else None,
            "pol": policies(hd) if st == 0 else None}
"""


def test_static_ordering_and_default_policies(three):
    r = py(RUN + """
print(json.dumps({"default": outcome(), "ff": outcome(find_first=True)}))
""", {"HIPDNN_PLUGIN_DIR": three})
    assert r["default"]["ids"] == [MIO, MID, DET]  # MIOPEN_ENGINE first, …_DETERMINISTIC last
    assert r["default"]["pol"] == [0, [CONFIG, STATIC]]
    assert r["ff"]["ids"] == [DET]  # FIND_FIRST: the first plugin's engines, unordered


def test_policy_attribute(three):
    r = py(RUN + f"""
print(json.dumps({{"static": outcome(policy=[{STATIC}]), "config": outcome(policy=[{CONFIG}]),
                  "unknown_then_static": outcome(policy=[99, {STATIC}]), "empty": outcome(policy=[])}}))
""", {"HIPDNN_PLUGIN_DIR": three})
    assert r["static"]["ids"] == [MIO, MID, DET] and r["static"]["pol"] == [0, [STATIC]]
    for k in ("config", "empty"):  # nothing succeeds (an explicit empty list included)
        assert r[k]["st"] == 9 and r[k]["err"].endswith("No heuristic policy succeeded.")
    assert r["unknown_then_static"]["ids"] == [MIO, MID, DET]
    assert r["unknown_then_static"]["pol"] == [0, [99, STATIC]]


def test_policy_env_overrides_attribute(three):
    r = py(RUN + f"""
import os
out = {{}}
os.environ["HIPDNN_HEUR_POLICY_ORDER"] = "SelectionHeuristic::Config"
out["env_config"] = outcome(policy=[{STATIC}])
os.environ["HIPDNN_HEUR_POLICY_ORDER"] = " , SelectionHeuristic::Config ,, SelectionHeuristic::StaticOrdering "
out["env_names"] = outcome(policy=[{CONFIG}])
os.environ["HIPDNN_HEUR_POLICY_ORDER"] = "{STATIC}"
out["env_decimal"] = outcome(policy=[])
os.environ["HIPDNN_HEUR_POLICY_ORDER"] = "   "
out["env_blank"] = outcome(policy=[{STATIC}])
print(json.dumps(out))
""", {"HIPDNN_PLUGIN_DIR": three})
    assert r["env_config"]["st"] == 9
    assert r["env_names"]["st"] == 0 and r["env_names"]["pol"] == [0, [CONFIG, STATIC]]
    assert r["env_names"]["ids"] == [MIO, MID, DET]
    assert r["env_decimal"]["st"] == 0 and r["env_decimal"]["pol"] == [0, [STATIC]]
    assert r["env_blank"]["pol"] == [0, [STATIC]]  # blank: the attribute applies


def test_fallback_engine_order_env(three):
    r = py(RUN + f"""
import os
out = {{}}
for k, v in {{"names": "MINI_mid, MIOPEN_ENGINE", "hex_dec": "0x%016X,{DET}" % ({MIO} & (2**64 - 1)),
            "unknown_skipped": "NOPE,MIOPEN_ENGINE_DETERMINISTIC", "none": "NOPE,0x1"}}.items():
    os.environ["HIPDNN_HEUR_FALLBACK_ENGINE_ORDER"] = v
    out[k] = outcome()
print(json.dumps(out))
""", {"HIPDNN_PLUGIN_DIR": three})
    assert r["names"]["ids"] == [MID, MIO]
    assert r["hex_dec"]["ids"] == [MIO, DET]
    assert r["unknown_skipped"]["ids"] == [DET]
    assert r["none"]["st"] == 9  # StaticOrdering declines, nothing else succeeds


def test_no_candidates_succeeds_before_policies(c_sample):
    # alignment 8 needs plugin API 1.3.0: the C sample (1.1.0) is filtered out → empty, success,
    # even though the only policy would decline
    r = py(f"""
hh = create_handle()
g = standin_graph(hh, alignment=8)
st, cfgs = heuristic_configs(g, policy=[{CONFIG}])
print(json.dumps({{"st": st, "n": len(cfgs)}}))
""", {"HIPDNN_PLUGIN_DIR": c_sample})
    assert r == {"st": 0, "n": 0}


def test_results_and_policy_getter_rules(three):
    r = py(RUN + """
out = {}
pre = desc(D.HIPDNN_BACKEND_ENGINEHEUR_DESCRIPTOR)
n = ffi.new("int64_t*"); v = ffi.new("int64_t[4]")
out["pol_unfin"] = lib.hipdnnBackendGetAttribute(pre, A.HIPDNN_ATTR_ENGINEHEUR_POLICY_ORDER_EXT, T.HIPDNN_TYPE_INT64, 0, n, ffi.NULL)
neg = ffi.new("int64_t[1]")
out["pol_set_neg"] = lib.hipdnnBackendSetAttribute(pre, A.HIPDNN_ATTR_ENGINEHEUR_POLICY_ORDER_EXT, T.HIPDNN_TYPE_INT64, -1, neg)
hd, st = heur()
G = lambda req, cnt, arr: lib.hipdnnBackendGetAttribute(hd, A.HIPDNN_ATTR_ENGINEHEUR_POLICY_ORDER_EXT, T.HIPDNN_TYPE_INT64, req, cnt, arr)
out["pol_nocount"] = G(0, ffi.NULL, ffi.NULL)
out["pol_neg"] = [G(-1, n, v), G(-1, n, ffi.NULL)]
out["pol_one"] = [G(1, n, v), n[0], v[0]]
R = lambda req, cnt, arr: lib.hipdnnBackendGetAttribute(hd, A.HIPDNN_ATTR_ENGINEHEUR_RESULTS, T.HIPDNN_TYPE_BACKEND_DESCRIPTOR, req, cnt, arr)
out["res_nocount"] = R(0, ffi.NULL, ffi.NULL)
out["res_query"] = [R(0, n, ffi.NULL), n[0]]
out["res_null_arr"] = R(2, n, ffi.NULL)
c1 = desc(D.HIPDNN_BACKEND_ENGINECFG_DESCRIPTOR)
arr = ffi.new("hipdnnBackendDescriptor_t[]", [c1])
out["res_partial"] = [R(1, n, arr), n[0]]
out["cfg_unfinalized_then_ok"] = [lib.hipdnnBackendGetAttribute(c1, A.HIPDNN_ATTR_ENGINECFG_ENGINE, T.HIPDNN_TYPE_BACKEND_DESCRIPTOR, 1, ffi.NULL, ffi.new("hipdnnBackendDescriptor_t*")),
                                  lib.hipdnnBackendFinalize(c1), engine_id_of_cfg(c1)]
out["res_null_entry"] = R(2, n, ffi.new("hipdnnBackendDescriptor_t[2]"))
out["res_finalized_cfg"] = R(1, n, arr)
print(json.dumps(out))
""", {"HIPDNN_PLUGIN_DIR": three})
    assert r["pol_unfin"] == 4 and r["pol_set_neg"] == 2
    assert r["pol_nocount"] == 3 and r["pol_neg"] == [2, 2] and r["pol_one"] == [0, 1, CONFIG]
    assert r["res_nocount"] == 3 and r["res_query"] == [0, 3] and r["res_null_arr"] == 3
    assert r["res_partial"] == [0, 1]
    assert r["cfg_unfinalized_then_ok"] == [1, 0, MIO]
    assert r["res_null_entry"] == 3 and r["res_finalized_cfg"] == 2
