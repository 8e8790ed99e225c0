"""Runtime pass-by-value scalars (RFC 0016 §4.6) for plugins reporting API >= 1.2.0.

The graphs are pointwise MUL / ADD with a [1, 1] float32 scalar operand flagged
``is_runtime_pass_by_value`` (corpus.pbv_corpus), stamped 1.2.0 as a backend stamps them.  The
scalar arrives as a *host* pointer in the ordinary ``{uid, ptr}`` device-buffer array.  Semantics
checked (docs/contracts.md §3, the provider contract as hipdnn-cabi's SDK implements it):

* user-supplied (flag, no value): the value is read through the host pointer at every execute;
* runtime-with-default (flag + value), no entry: the baked default;
* runtime-with-default with an entry: the baked default (override inert, RFC §4.9/§9) — advisory,
  since RFC §4.6 lets a provider honour the override;
* user-supplied with no entry: the execute fails with HIPDNN_PLUGIN_STATUS_INVALID_VALUE (RFC §7.2).

A plugin reporting < 1.2.0 skips these checks: a backend never sends it such a graph (spec §3.6,
covered by ``conform.backend.runtime_pbv_version_filter``).  A >= 1.2.0 plugin may decline a
runtime graph (RFC §4.6 "MUST decline rather than mis-serve"); then the checks skip.
"""
from __future__ import annotations

import os

import numpy as np

from ..core import Fail, Skip, check, fmt_call
from ..corpus import SCALAR_UID, decode_output, pbv_corpus, write_custom_case
from .execute import compare

PBV_MIN = (1, 2, 0)
INVALID_VALUE = 2
# (graph, first host value, second host value for the re-bound execute)
HOST_VALUES = {"pbv_mul_user_f32": (2.5, -0.75), "pbv_add_user_f32": (-1.25, 3.0)}
DEFAULT, OVERRIDE = 1.5, 4.0


def _gate(s):
    v = s.api_version()
    if v is None:
        raise Skip("the API version does not parse (see conform.api_version.parses)")
    if v < PBV_MIN:
        raise Skip(f"the plugin reports API {'.'.join(map(str, v))} < 1.2.0: a backend never sends it a graph "
                   "with a runtime pass-by-value scalar (spec §3.6 version filtering)")
    return v


def _graphs(s):
    return s.memo("pbv_graphs", pbv_corpus)


def _applicable(s) -> dict:
    """{graph name: [known engine ids]} for the runtime graphs."""
    def compute():
        gs = list(_graphs(s).values())
        paths = []
        for g in gs:
            p = os.path.join(s.workdir, f"graph_{g.name}.bin")
            with open(p, "wb") as f:
                f.write(g.to_bytes())
            paths.append(p)
        run = s.finished(s.child("applicable", None, *paths))
        known = set(s.engine_ids())
        out, bad = {}, []
        for r in run.of("applicable"):
            if r["max"] == 0:
                continue
            g = gs[r["graph"]]
            if r["st"]:
                bad.append(fmt_call(next(c for c in run.of("call", "applicable") if g.name in c["args"]
                                         and "max_engines=0" not in c["args"])))
                continue
            ids = [int(x) for x in r["ids"]]
            unknown = [i for i in ids if i not in known]
            if unknown:
                bad.append(f"GetApplicableEngineIds({g.name}) listed unknown engine id(s) {unknown}")
            out[g.name] = [i for i in ids if i in known]
        return out, bad
    return s.memo("pbv_applicable", compute)


def _engines(s, name):
    _gate(s)
    app, bad = _applicable(s)
    if bad:
        raise Fail("; ".join(bad))
    ids = app.get(name) or []
    if not ids:
        raise Skip(f"the plugin lists no engine for {name}: it declines runtime pass-by-value graphs "
                   "(allowed, RFC 0016 §4.6)")
    return ids


def _f32(v) -> bytes:
    return np.array([[v]], dtype=np.float32).tobytes()


def _run(s, tag, g, eid, inputs, in2=None):
    out = {3: int(np.prod(g.tensor(3).dims)) * 4}
    case = s.memo(("pbv_case", tag, eid),
                  lambda: write_custom_case(s.workdir, tag, g, eid, inputs, out, in2=in2))
    return s.child("execute", case)


def _x(g):
    return np.ascontiguousarray(g.inputs()[1])


def _expect(g, x, v):
    return g.reference({1: x, SCALAR_UID: np.array([[v]], dtype=np.float32)})[3]


def _output(g, run, tag):
    o = next((o for o in run.of("output", tag) if o["uid"] == 3), None)
    return None if o is None else decode_output(g, 3, o["hex"])


def _what_was_used(g, x, got, candidates: dict) -> str:
    for label, v in candidates.items():
        if not compare(g, 3, got, _expect(g, x, v)):
            return f" (the output matches scalar = {label})"
    return ""


@check("conform.runtime_pbv.host_scalar")
def host_scalar(s):
    """API >= 1.2.0: a user-supplied runtime scalar is read through its host pointer in the device-buffer array, at every execute."""
    gs = _graphs(s)
    bad, done = [], []
    for name, (v1, v2) in HOST_VALUES.items():
        g = gs[name]
        for eid in _engines(s, name):
            x = _x(g)
            run = _run(s, f"{name}_host", g, eid, {1: x.tobytes(), SCALAR_UID: _f32(v1)}, in2={SCALAR_UID: _f32(v2)})
            if not run.finished:
                bad.append(f"[{name}, engine {eid}] {run.describe_death()}")
                continue
            for k, (tag, v, other) in enumerate((("run1", v1, v2), ("run2", v2, v1)), 1):
                c = run.one("call", f"execute_{k}")
                what = (f"ExecuteOpGraph #{k} with uid {SCALAR_UID} bound to a host float32 {v}"
                        + (" (re-bound after execute #1)" if k == 2 else ""))
                if c["st"]:
                    bad.append(f"[{name}, engine {eid}] {what}: " + fmt_call(c))
                    continue
                got = _output(g, run, tag)
                msg = compare(g, 3, got, _expect(g, x, v))
                if msg:
                    bad.append(f"[{name}, engine {eid}] {what}: {msg}"
                               + _what_was_used(g, x, got, {"0 (the host value was ignored)": 0.0,
                                                             "1 (the host value was ignored)": 1.0,
                                                             f"{other} (a stale host value)": other}))
            done.append(name)
    if bad:
        raise Fail("; ".join(bad))
    return "host values honoured: " + ", ".join(done)


@check("conform.runtime_pbv.default_value")
def default_value(s):
    """API >= 1.2.0: a runtime-with-default scalar with no variant-pack entry uses its baked default."""
    name = "pbv_mul_default_f32"
    g = _graphs(s)[name]
    bad = []
    for eid in _engines(s, name):
        x = _x(g)
        run = s.finished(_run(s, "pbv_default_unbound", g, eid, {1: x.tobytes()}))
        c = run.one("call", "execute_1")
        if c["st"]:
            bad.append(f"[{name}, engine {eid}] no entry for uid {SCALAR_UID} (default {DEFAULT}): " + fmt_call(c))
            continue
        msg = compare(g, 3, _output(g, run, "run1"), _expect(g, x, DEFAULT))
        if msg:
            bad.append(f"[{name}, engine {eid}] ExecuteOpGraph without an entry for uid {SCALAR_UID} "
                       f"(baked default {DEFAULT}): {msg}")
    if bad:
        raise Fail("; ".join(bad))
    return f"baked default {DEFAULT} used"


@check("conform.runtime_pbv.override_inert", mustpass=False)
def override_inert(s):
    """API >= 1.2.0: a variant-pack entry for a runtime-with-default scalar is inert (baked default wins; advisory, RFC §4.9)."""
    name = "pbv_mul_default_f32"
    g = _graphs(s)[name]
    bad = []
    for eid in _engines(s, name):
        x = _x(g)
        run = s.finished(_run(s, "pbv_default_bound", g, eid, {1: x.tobytes(), SCALAR_UID: _f32(OVERRIDE)}))
        c = run.one("call", "execute_1")
        what = f"ExecuteOpGraph with uid {SCALAR_UID} (default {DEFAULT}) bound to a host {OVERRIDE}"
        if c["st"]:
            bad.append(f"[{name}, engine {eid}] {what}: " + fmt_call(c))
            continue
        got = _output(g, run, "run1")
        msg = compare(g, 3, got, _expect(g, x, DEFAULT))
        if msg:
            honoured = not compare(g, 3, got, _expect(g, x, OVERRIDE))
            bad.append(f"[{name}, engine {eid}] {what}: "
                       + ("the override was honoured (RFC 0016 §4.6 permits it; hipdnn-cabi and the in-tree "
                          "providers keep the baked default, §4.9)" if honoured else msg))
    if bad:
        raise Fail("; ".join(bad))
    return "override inert"


@check("conform.runtime_pbv.unbound_rejected")
def unbound_rejected(s):
    """API >= 1.2.0: executing with no entry for a user-supplied runtime scalar returns INVALID_VALUE (never reads garbage)."""
    name = "pbv_mul_user_f32"
    g = _graphs(s)[name]
    bad = []
    for eid in _engines(s, name):
        run = s.finished(_run(s, "pbv_user_unbound", g, eid, {1: _x(g).tobytes()}))
        c = run.one("call", "execute_1")
        if c["st"] != INVALID_VALUE:
            bad.append(f"[{name}, engine {eid}] ExecuteOpGraph without an entry for user-supplied uid {SCALAR_UID}: "
                       f"{fmt_call(c)}; expected HIPDNN_PLUGIN_STATUS_INVALID_VALUE ({INVALID_VALUE})")
    if bad:
        raise Fail("; ".join(bad))
    return "INVALID_VALUE"
