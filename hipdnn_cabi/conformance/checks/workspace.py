"""hipdnnEnginePluginGetWorkspaceSize / CreateExecutionContext / GetWorkspaceSizeFromExecutionContext."""
from __future__ import annotations

from ..core import Fail, Skip, check, fmt_call


def _runs(s):
    ps = s.pairs()
    if not ps:
        raise Skip("the plugin runs none of the corpus graphs")
    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(max_workers=len(ps)) as ex:
        runs = list(ex.map(lambda p: s.child("workspace", s.case(*p)), ps))
    return [(g, eid, s.finished(run)) for (g, eid), run in zip(ps, runs)]


@check("conform.workspace.config_matches_context")
def config_matches_context(s):
    """Both workspace queries succeed and the context's size is <= the engine config's size."""
    bad = []
    for g, eid, run in _runs(s):
        w = run.one("workspace")
        if w["st_config"]:
            bad.append(f"[{g.name}] " + fmt_call(run.one("call", "ws_config")))
        if w["st_create"] or w["st_ctx"]:
            continue  # judged by conform.execute.context_create_destroy
        if not w["st_config"] and w["ws_ctx"] > w["ws_config"]:
            bad.append(f"[{g.name}, engine {eid}] GetWorkspaceSize(config, graph) -> {w['ws_config']} but "
                       f"GetWorkspaceSizeFromExecutionContext -> {w['ws_ctx']}")
    if bad:
        raise Fail("; ".join(bad))
    return "agree"
