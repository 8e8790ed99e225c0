"""hipdnnEnginePluginGetEngineDetails / DestroyEngineDetails (spec §3.8, §5.2)."""
from __future__ import annotations

from ...schemas.dump import to_dict
from ...schemas.verifier import VerificationError, verify
from ..core import Fail, Skip, check, fmt_call

BEHAVIOR_NOTE_TYPE_COUNT = 5


def details(s) -> list:
    """[(engine id, graph name, call record, details record, parsed dict or error str)]"""
    def compute():
        pairs = s.pairs()
        if not pairs:
            raise Skip("the plugin runs none of the corpus graphs: no graph to ask details for")
        per_engine = {}
        for g, eid in pairs:
            per_engine.setdefault(eid, g)
        out = []
        for eid, g in per_engine.items():
            run = s.finished(s.child("details", s.case(g, eid), eid))
            rec, call = run.one("details"), run.one("call", "details")
            parsed = None
            if rec["st"] == 0 and rec["size"]:
                raw = bytes.fromhex(rec["hex"])
                try:
                    verify(raw, "EngineDetails")
                    parsed = to_dict(raw, "EngineDetails")
                except VerificationError as e:
                    parsed = f"not a valid EngineDetails FlatBuffer: {e}"
            out.append((eid, g.name, call, rec, parsed, run))
        return out
    return s.memo("engine_details", compute)


def _valid(s):
    out = [x for x in details(s) if isinstance(x[4], dict)]
    if not out:
        raise Skip("no valid EngineDetails (see conform.engine_details.valid_flatbuffer)")
    return out


@check("conform.engine_details.valid_flatbuffer")
def valid_flatbuffer(s):
    """GetEngineDetails succeeds with a non-empty buffer that verifies as an EngineDetails FlatBuffer."""
    bad = []
    for eid, gname, call, rec, parsed, _ in details(s):
        if rec["st"] != 0:
            bad.append(fmt_call(call))
        elif not rec["size"]:
            bad.append(f"hipdnnEnginePluginGetEngineDetails(handle, {eid}, graph={gname}) -> empty details")
        elif isinstance(parsed, str):
            bad.append(f"hipdnnEnginePluginGetEngineDetails(handle, {eid}, graph={gname}): {parsed}")
    if bad:
        raise Fail("; ".join(bad))
    return f"{len(details(s))} engine(s)"


@check("conform.engine_details.engine_id_matches")
def engine_id_matches(s):
    """EngineDetails.engine_id is the engine id asked for."""
    bad = [f"GetEngineDetails(handle, {eid}, ...) -> engine_id {p['engine_id']}"
           for eid, _, _, _, p, _ in _valid(s) if p["engine_id"] != eid]
    if bad:
        raise Fail("; ".join(bad))
    return "match"


def _knob_problems(k) -> list:
    kid = k.get("knob_id")
    out = []
    if not kid:
        out.append("a knob without knob_id")
    dv, cons = k.get("default_value"), k.get("constraint")
    if not dv or not isinstance(dv.get("type"), str):
        return out + [f"knob {kid!r}: default_value missing or of an unknown type"]
    val = (dv.get("value") or {}).get("value")
    if cons:
        ct, c = cons.get("type"), cons.get("value") or {}
        if not isinstance(ct, str):
            return out + [f"knob {kid!r}: unknown constraint type {ct}"]
        if ct.replace("Constraint", "Value") != dv["type"]:
            out.append(f"knob {kid!r}: default {dv['type']} does not match constraint {ct}")
        elif ct in ("IntConstraint", "FloatConstraint"):
            lo, hi = c.get("min_value") or 0, c.get("max_value") or 0
            if lo > hi:
                out.append(f"knob {kid!r}: min_value {lo} > max_value {hi}")
            elif (lo or hi) and not lo <= (val or 0) <= hi:
                out.append(f"knob {kid!r}: default {val} outside [{lo}, {hi}]")
            vv = c.get("valid_values") or []
            if vv and val not in vv:
                out.append(f"knob {kid!r}: default {val} not in valid_values {vv}")
            if ct == "IntConstraint" and (c.get("step") or 1) <= 0:
                out.append(f"knob {kid!r}: step {c.get('step')} <= 0")
        elif ct == "StringConstraint":
            ml, vv = c.get("max_length") or 0, c.get("valid_values") or []
            if ml and len(val or "") > ml:
                out.append(f"knob {kid!r}: default longer than max_length {ml}")
            if vv and val not in vv:
                out.append(f"knob {kid!r}: default {val!r} not in valid_values")
    return out


@check("conform.engine_details.knobs_valid")
def knobs_valid(s):
    """Knobs have unique non-empty ids and defaults that satisfy their constraints."""
    bad, n = [], 0
    for eid, _, _, _, p, _ in _valid(s):
        knobs = p.get("knobs") or []
        n += len(knobs)
        ids = [k.get("knob_id") for k in knobs]
        if len(set(ids)) != len(ids):
            bad.append(f"engine {eid}: duplicate knob ids {ids}")
        for k in knobs:
            bad += [f"engine {eid}: {m}" for m in _knob_problems(k)]
    if bad:
        raise Fail("; ".join(bad))
    return f"{n} knob(s)"


@check("conform.engine_details.behavior_notes_valid")
def behavior_notes_valid(s):
    """Behaviour notes are known hipdnnBackendBehaviorNote_t values (0 <= note < TYPE_COUNT)."""
    bad = []
    for eid, _, _, _, p, _ in _valid(s):
        for v in p.get("behavior_notes") or []:
            if not 0 <= v < BEHAVIOR_NOTE_TYPE_COUNT:
                bad.append(f"engine {eid}: behavior note {v}")
    if bad:
        raise Fail("invalid behaviour notes: " + "; ".join(bad))
    return "ok"


@check("conform.engine_details.destroy")
def destroy(s):
    """DestroyEngineDetails succeeds on details the plugin returned."""
    bad = []
    for eid, _, _, rec, _, run in details(s):
        if rec["st"] == 0:
            c = run.one("call", "destroy_details")
            if c is None or c["st"] != 0:
                bad.append(fmt_call(c) if c else f"engine {eid}: DestroyEngineDetails not reached")
    if bad:
        raise Fail("; ".join(bad))
    return "ok"
