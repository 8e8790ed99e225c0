"""Execution-context serialization hooks (spec §3.8, §5.1)."""
from __future__ import annotations

from ..core import Fail, Skip, check, fmt_call
from ..corpus import decode_output
from .engine_details import details
from .execute import compare

SERIALIZE = ("hipdnnEnginePluginSerializeExecutionContext",
             "hipdnnEnginePluginSerializeExecutionContextWithEngineId")
TRIO_REST = ("hipdnnEnginePluginDestroySerializedExecutionContext",
             "hipdnnEnginePluginCreateExecutionContextFromSerialized")


def _complete(s):
    return any(s.has(n) for n in SERIALIZE) and all(s.has(n) for n in TRIO_REST)


def _advertises(s, eid) -> bool:
    try:
        for e, _, _, _, p, _ in details(s):
            if e == eid and isinstance(p, dict) and 4 in (p.get("behavior_notes") or []):
                return True
    except Skip:
        pass
    return False


@check("conform.serialization.symbols_consistent", mustpass=False)
def symbols_consistent(s):
    """The serialization hooks are exported all together (Serialize*, DestroySerialized*, CreateFromSerialized) or not at all."""
    s.finished(s.probe)
    present = [n for n in SERIALIZE + TRIO_REST if s.has(n)]
    if present and not _complete(s):
        raise Fail("only some serialization hooks are exported (" + ", ".join(present) +
                   "): a hipDNN backend needs all three to serialize plans")
    return "complete" if present else "none exported"


def _serialize_run(s, what):
    if not _complete(s):
        raise Skip("the serialization hooks are not exported")
    g, eid, case = s.first_case()
    run = s.finished(s.child("serialize", case, what))
    ser = run.one("serialized")
    if ser["st"] != 0 or ser["null"] or not ser["size"]:
        if _advertises(s, eid):
            raise Fail(f"engine {eid} advertises SUPPORTS_EXECUTION_PLAN_SERIALIZATION but "
                       + fmt_call(run.one("call", "serialize")) + f" (payload size {ser['size']})")
        raise Skip(f"engine {eid} does not serialize contexts ({fmt_call(run.one('call', 'serialize'))})")
    return g, eid, run


@check("conform.serialization.round_trip")
def round_trip(s):
    """Serialize -> CreateExecutionContextFromSerialized gives a context with the same workspace and outputs."""
    g, eid, run = _serialize_run(s, "round")
    c = run.one("call", "from_serialized")
    if c["st"]:
        raise Fail(fmt_call(c))
    for tag in ("destroy_serialized", "ws_ctx2", "exec_orig", "exec_round", "destroy_ctx2"):
        c = run.one("call", tag)
        if c is None or c["st"]:
            raise Fail(fmt_call(c) if c else f"{tag} not reached")
    w = run.one("ws_pair")
    if w["ws"] != w["ws2"]:
        raise Fail(f"workspace {w['ws']} before, {w['ws2']} after the round trip")
    orig = {o["uid"]: o["hex"] for o in run.of("output", "orig")}
    for o in run.of("output", "round"):
        msg = compare(g, o["uid"], decode_output(g, o["uid"], o["hex"]), decode_output(g, o["uid"], orig[o["uid"]]))
        if msg:
            raise Fail(f"[{g.name}] the deserialized context computes differently: {msg}")
    return f"{g.name}: payload {run.one('serialized')['size']} bytes"


@check("conform.serialization.rejects_corrupt")
def rejects_corrupt(s):
    """CreateExecutionContextFromSerialized rejects truncated, junk and bit-flipped payloads."""
    g, eid, run = _serialize_run(s, "corrupt")
    calls = run.of("call", "corrupt")
    bad = [f"{c['fn']}({c['args']}) -> SUCCESS" for c in calls if c["st"] == 0]
    if bad:
        raise Fail("corrupt payload accepted: " + "; ".join(bad))
    return f"{len(calls)} corrupt payloads rejected"
