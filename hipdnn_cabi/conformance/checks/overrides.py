"""hipdnnEnginePluginExecuteOpGraphWithOverrides (API >= 1.1.0; spec §4.1, §3.8): actually executed.

An override-enabled float32 ADD declared [4, 6] (corpus.override_graph) runs with
num_overrides = 0, with packed [2, 3] shapes, and with [2, 3] shapes whose input strides are
padded (row stride 5) and transposed (column-major); outputs are compared with numpy.
"""
from __future__ import annotations

import os

import numpy as np

from ..core import Fail, Skip, check, fmt_call
from ..corpus import decode_output, override_graph, write_custom_case
from .execute import compare

FN = "hipdnnEnginePluginExecuteOpGraphWithOverrides"
PAD = 1.0e6   # filler in the gaps of strided inputs: reading it shows up in the output


def _engines(s):
    v = s.api_version()
    if v is None:
        raise Skip("the API version does not parse (see conform.api_version.parses)")
    if v < (1, 1, 0):
        raise Skip(f"the plugin reports API {'.'.join(map(str, v))} < 1.1.0: a backend answers overrides "
                   "with NOT_SUPPORTED itself (spec §4.1)")
    if not s.has(FN):
        raise Skip(f"{FN} is not exported (see conform.api_version.optional_symbols_consistent)")
    g = s.memo("ovr_graph", override_graph)

    def compute():
        p = os.path.join(s.workdir, f"graph_{g.name}.bin")
        with open(p, "wb") as f:
            f.write(g.to_bytes())
        run = s.finished(s.child("applicable", None, p))
        known = set(s.engine_ids())
        r = next(r for r in run.of("applicable") if r["max"] != 0)
        return [int(x) for x in r["ids"] if int(x) in known] if r["st"] == 0 else []
    ids = s.memo("ovr_applicable", compute)
    if not ids:
        raise Skip(f"the plugin lists no engine for the override-enabled graph {g.name}")
    return g, ids


def _strided(shape, strides, rng):
    """(buffer bytes, logical array): the array laid out with the given element strides, gaps = PAD."""
    n = 1 + sum((d - 1) * st for d, st in zip(shape, strides))
    buf = np.full(n, PAD, dtype=np.float32)
    arr = rng.uniform(-2.0, 2.0, size=shape).astype(np.float32)
    view = np.lib.stride_tricks.as_strided(buf, shape=shape, strides=[st * 4 for st in strides])
    view[...] = arr
    return buf.tobytes(), arr


CASES = {
    # tag: (shape, (strides x1, strides x2)) ; None = no overrides at all
    "no_overrides": None,
    "packed": ([2, 3], ([3, 1], [3, 1])),
    "strided": ([2, 3], ([5, 1], [1, 2])),
}


def _case(s, g, eid, tag):
    rng = np.random.default_rng(77 + len(tag))
    spec = CASES[tag]
    if spec is None:
        shape, st = g.tensor(1).dims, (g.tensor(1).strides, g.tensor(2).strides)
    else:
        shape, st = spec
    b1, x1 = _strided(shape, st[0], rng)
    b2, x2 = _strided(shape, st[1], rng)
    out_strides = [shape[1], 1]
    ovr = [] if spec is None else [(1, shape, st[0]), (2, shape, st[1]), (3, shape, out_strides)]
    case = s.memo(("ovr_case", tag, eid), lambda: write_custom_case(
        s.workdir, f"ovr_{tag}", g, eid, {1: b1, 2: b2}, {3: int(np.prod(shape)) * 4}, overrides=ovr))
    want = (x1.astype(np.float64) + x2.astype(np.float64)).astype(np.float32)
    return s.child("execute_ovr", case), shape, want


def _judge(s, tags):
    g, ids = _engines(s)
    bad = []
    for eid in ids:
        for tag in tags:
            run, shape, want = _case(s, g, eid, tag)
            if not run.finished:
                bad.append(f"[{tag}, engine {eid}] {run.describe_death()}")
                continue
            c = run.one("call", "execute_ovr")
            if c["st"]:
                bad.append(f"[{tag}, engine {eid}] " + fmt_call(c))
                continue
            e = run.one("exec")
            if e["guard_broken"]:
                bad.append(f"[{tag}, engine {eid}] {FN} wrote past the end of buffer #{e['guard_broken'] - 1}")
            if e["input_modified"]:
                bad.append(f"[{tag}, engine {eid}] {FN} modified input buffer #{e['input_modified'] - 1}")
            o = next(o for o in run.of("output", "run1") if o["uid"] == 3)
            got = np.frombuffer(bytes.fromhex(o["hex"]), dtype=np.float32).reshape(shape)
            msg = compare(g, 3, got, want)
            if msg:
                bad.append(f"[{tag}, engine {eid}] {fmt_call(c)}: {msg}")
    if bad:
        raise Fail("; ".join(bad))
    return f"{len(ids)} engine(s): " + ", ".join(tags)


@check("conform.overrides.shapes")
def shapes(s):
    """API >= 1.1.0: ExecuteOpGraphWithOverrides with num_overrides 0 and with packed smaller shapes matches numpy."""
    return _judge(s, ["no_overrides", "packed"])


@check("conform.overrides.strides")
def strides(s):
    """API >= 1.1.0: ExecuteOpGraphWithOverrides with padded and transposed input strides matches numpy."""
    return _judge(s, ["strided"])
