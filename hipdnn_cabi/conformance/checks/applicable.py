"""hipdnnEnginePluginGetApplicableEngineIds (spec §3.7)."""
from __future__ import annotations

from ..core import Fail, check


def _records(s, degenerate):
    run = s.finished(s.applicable_run())
    known = set(s.engine_ids())
    for r in run.of("applicable"):
        g = s.corpus[r["graph"]]
        if g.degenerate == degenerate:
            yield g, r, known


def _judge(s, degenerate):
    bad, summary = [], []
    for g, r, known in _records(s, degenerate):
        if r["max"] == 0:
            continue
        call = (f"hipdnnEnginePluginGetApplicableEngineIds(handle, graph={g.name}, ids, "
                f"max_engines={r['max']}, &num)")
        if r["st"] != 0:
            bad.append(f"{call} -> status {r['st']} (a well-formed graph must give SUCCESS)")
            continue
        ids = [int(x) for x in r["ids"]]
        if r["num"] > r["max"]:
            bad.append(f"{call} -> num {r['num']} > max_engines")
        extra = [i for i in ids if i not in known]
        if extra:
            bad.append(f"{call} -> ids {extra} not among GetAllEngineIds {sorted(known)}")
        if len(set(ids)) != len(ids):
            bad.append(f"{call} -> duplicate ids {ids}")
        summary.append(f"{g.name}:{len(ids)}")
    if bad:
        raise Fail("; ".join(bad))
    return ", ".join(summary)


@check("conform.applicable.subset_of_all_ids")
def subset_of_all_ids(s):
    """For every corpus graph: SUCCESS, num <= max_engines, ids unique and among GetAllEngineIds."""
    return _judge(s, False)


@check("conform.applicable.unrunnable_graphs")
def unrunnable_graphs(s):
    """Well-formed graphs nothing can run (no nodes, unknown node kind, dangling uid): SUCCESS, ids ⊆ all ids."""
    return _judge(s, True)


@check("conform.applicable.max_engines_respected")
def max_engines_respected(s):
    """With max_engines = 0 nothing is written to the id buffer."""
    bad = []
    for deg in (False, True):
        for g, r, _ in _records(s, deg):
            if r["wrote_past_max"]:
                bad.append(f"hipdnnEnginePluginGetApplicableEngineIds(handle, graph={g.name}, ids, "
                           f"max_engines={r['max']}, &num) wrote past max_engines (status {r['st']})")
    if bad:
        raise Fail("; ".join(bad))
    return "ok"
