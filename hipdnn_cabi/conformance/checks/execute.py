"""hipdnnEnginePluginExecuteOpGraph on the corpus, against an independent numpy reference."""
from __future__ import annotations

import numpy as np

from ..core import Fail, Skip, check, fmt_call
from ..corpus import TOLERANCE, decode_output
from .workspace import _runs as _ws_runs


def _runs(s):
    def compute():
        ps = s.pairs()
        if not ps:
            raise Skip("the plugin runs none of the corpus graphs")
        from concurrent.futures import ThreadPoolExecutor
        with ThreadPoolExecutor(max_workers=len(ps)) as ex:  # a hang costs one timeout, not one per graph
            runs = list(ex.map(lambda p: s.child("execute", s.case(*p)), ps))
        return [(g, eid, run) for (g, eid), run in zip(ps, runs)]
    return s.memo("execute_runs", compute)


def compare(g, uid, got: np.ndarray, want: np.ndarray) -> str:
    t = g.tensor(uid)
    rtol, atol = TOLERANCE[t.dtype]
    a, b = got.astype(np.float64), want.astype(np.float64)
    ok = np.isclose(a, b, rtol=rtol, atol=atol, equal_nan=True)
    if ok.all():
        return ""
    idx = np.argwhere(~ok)[0]
    return (f"output uid {uid}: {int((~ok).sum())}/{ok.size} elements off "
            f"(rtol {rtol}, atol {atol}); first at {tuple(int(i) for i in idx)}: got {a[tuple(idx)]!r}, "
            f"expected {b[tuple(idx)]!r}")


@check("conform.execute.context_create_destroy")
def create_destroy(s):
    """For every applicable (graph, engine): CreateExecutionContext, its workspace query and Destroy succeed."""
    bad = []
    for g, eid, run in _ws_runs(s):
        w = run.one("workspace")
        for tag in ("create_ctx", "ws_ctx", "destroy_ctx"):
            c = run.one("call", tag)
            if c is not None and c["st"]:
                bad.append(f"[{g.name}] " + fmt_call(c))
        if w["st_create"] == 0 and w["ctx_null"]:
            bad.append(f"[{g.name}] CreateExecutionContext -> SUCCESS with a NULL context")
    if bad:
        raise Fail("; ".join(bad))
    return f"{len(s.pairs())} context(s)"


@check("conform.execute.numerics")
def numerics(s):
    """ExecuteOpGraph succeeds and every output matches the numpy reference within the per-type tolerance."""
    bad, done = [], []
    for g, eid, run in _runs(s):
        if not run.finished:
            bad.append(f"[{g.name}] {run.describe_death()}")
            continue
        c = run.one("call", "execute_1")
        if c["st"]:
            bad.append(f"[{g.name}] " + fmt_call(c))
            continue
        ref = g.reference(g.inputs())
        for o in run.of("output", "run1"):
            msg = compare(g, o["uid"], decode_output(g, o["uid"], o["hex"]), ref[o["uid"]])
            if msg:
                bad.append(f"[{g.name}, engine {eid}] ExecuteOpGraph: {msg}")
        done.append(g.name)
    if bad:
        raise Fail("; ".join(bad))
    return "matched: " + ", ".join(done)


@check("conform.execute.repeatable")
def repeatable(s):
    """Executing the same context twice gives the same outputs."""
    bad = []
    for g, eid, run in _runs(s):
        if not run.finished:
            bad.append(f"[{g.name}] {run.describe_death()}")
            continue
        c = run.one("call", "execute_2")
        if c["st"]:
            bad.append(f"[{g.name}] second " + fmt_call(c))
            continue
        r1 = {o["uid"]: o["hex"] for o in run.of("output", "run1")}
        for o in run.of("output", "run2"):
            if r1.get(o["uid"]) != o["hex"]:
                bad.append(f"[{g.name}] output uid {o['uid']} differs between two executions of one context")
    if bad:
        raise Fail("; ".join(bad))
    return "ok"


@check("conform.execute.buffers_respected")
def buffers_respected(s):
    """Execution writes nothing past any buffer's end and leaves input buffers unmodified."""
    bad = []
    for g, eid, run in _runs(s):
        if not run.finished:
            bad.append(f"[{g.name}] {run.describe_death()}")
            continue
        _, ins_outs = g.io()
        for e in run.of("exec"):
            if e["guard_broken"]:
                bad.append(f"[{g.name}] ExecuteOpGraph wrote past the end of buffer #{e['guard_broken'] - 1}")
            if e["input_modified"]:
                bad.append(f"[{g.name}] ExecuteOpGraph modified input buffer #{e['input_modified'] - 1}")
    if bad:
        raise Fail("; ".join(sorted(set(bad))))
    return "ok"
