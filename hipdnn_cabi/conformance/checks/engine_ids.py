"""hipdnnEnginePluginGetAllEngineIds / GetEngineName (spec §3.5 steps 5 and 7)."""
from __future__ import annotations

from ...backend.plugins.loader import fnv1a64
from ..core import Fail, Skip, check, fmt_call


@check("conform.engine_ids.two_call")
def two_call(s):
    """(NULL, 0, &n) then (ids, n, &m): succeed, n > 0, m == n, no duplicate ids."""
    run = s.finished(s.probe)
    cnt = run.one("count")
    if cnt is None:
        raise Fail("hipdnnEnginePluginGetAllEngineIds is not exported")
    if cnt["st"] != 0:
        raise Fail(fmt_call(run.one("call", "count")))
    if cnt["n"] == 0:
        raise Fail("hipdnnEnginePluginGetAllEngineIds(NULL, 0, &num) -> num 0: a plugin needs >= 1 engine")
    ids = run.one("ids")
    if ids is None or ids["st"] != 0:
        raise Fail(fmt_call(run.one("call", "ids")) if run.one("call", "ids") else "second call not made")
    if ids["n"] != cnt["n"]:
        raise Fail(f"hipdnnEnginePluginGetAllEngineIds: the size query said {cnt['n']} engines, "
                   f"(ids, {cnt['n']}, &num) then wrote num = {ids['n']}")
    if len(set(ids["ids"])) != len(ids["ids"]):
        raise Fail(f"hipdnnEnginePluginGetAllEngineIds returned duplicate ids {ids['ids']}")
    return f"{cnt['n']} engine(s)"


@check("conform.engine_ids.max_engines_respected")
def max_engines_respected(s):
    """With max_engines smaller than the engine count, nothing is written past max_engines."""
    run = s.finished(s.child("engine_ids"))
    bad = []
    for r in run.of("cap"):
        if r["wrote_past_max"]:
            bad.append(f"hipdnnEnginePluginGetAllEngineIds(ids, max_engines={r['max']}, &num) wrote past max_engines "
                       f"(status {r['st']}, num {r['num']})")
    if bad:
        raise Fail("; ".join(bad))
    return "max_engines respected"


@check("conform.engine_ids.engine_names")
def engine_names(s):
    """GetEngineName (when exported) names each engine with FNV-1a-64(name) == id, or NOT_APPLICABLE."""
    if not s.has("hipdnnEnginePluginGetEngineName"):
        raise Skip("hipdnnEnginePluginGetEngineName is not exported")
    run = s.finished(s.probe)
    bad = []
    for r in run.of("engine_name"):
        if r["st"] == 5 or (r["st"] == 0 and not r["name"]):
            continue
        if r["st"] != 0:
            bad.append(f"hipdnnEnginePluginGetEngineName({r['id']}, &name) -> status {r['st']}")
        elif fnv1a64(r["name"]) != int(r["id"]):
            bad.append(f"hipdnnEnginePluginGetEngineName({r['id']}) -> {r['name']!r} whose FNV-1a-64 is "
                       f"{fnv1a64(r['name'])}: a hipDNN backend drops this engine")
    if bad:
        raise Fail("; ".join(bad))
    return "names match ids"
