"""Fuzz driver (run in its own process): mutated SerializedExecutionPlan envelopes, HDGP containers
and plugin payloads re-wrapped in valid envelopes, fed to
hipdnnBackendCreateAndDeserializeExecutionPlan_ext and hipdnnBackendGetSerializedBinaryContents_ext;
every restored plan is executed once.  usage: fuzz_plans.py N SEED  (prints one JSON line)."""
from __future__ import annotations

import json
import random
import sys

from ctlib import (CONST, RUNTIME, L, add_graph, contents, deserialize_plan, engine_ids, ffi,
                   handle, lib, ok, plan_for_engine, run_add, run_scale_shift, scale_shift_graph,
                   serialize_graph_and_plan, serialize_plan)

ALLOWED = {0, 2, 3, 8, 9, 14}


def envelope(version, engine_id, ws, uids, payload):
    import flatbuffers
    from hipdnn_cabi.schemas._generated import SerializedExecutionPlan as S
    b = flatbuffers.Builder(256)
    S.StartPluginPayloadVector(b, len(payload))
    b.head -= len(payload)
    b.Bytes[b.head:b.head + len(payload)] = payload
    pv = b.EndVector()
    S.StartTensorUidsVector(b, len(uids))
    for u in reversed(uids):
        b.PrependInt64(u)
    uv = b.EndVector()
    S.Start(b)
    S.AddVersion(b, version)
    S.AddEngineId(b, engine_id)
    S.AddWorkspaceSize(b, ws)
    S.AddTensorUids(b, uv)
    S.AddPluginPayload(b, pv)
    b.Finish(S.End(b))
    return bytes(b.Output())


def mutate(rng, data: bytes) -> bytes:
    b = bytearray(data)
    for _ in range(rng.randint(1, 6)):
        op = rng.randrange(6)
        if op == 0 and b:
            b[rng.randrange(len(b))] ^= 1 << rng.randrange(8)
        elif op == 1 and b:
            b[rng.randrange(len(b))] = rng.randrange(256)
        elif op == 2 and len(b) > 1:
            del b[rng.randrange(len(b)):][: rng.randint(1, 16)]
        elif op == 3:
            i = rng.randrange(len(b) + 1)
            b[i:i] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 8)))
        elif op == 4 and len(b) >= 4:
            i = rng.randrange(len(b) - 3)
            b[i:i + 4] = rng.choice([b"\xff\xff\xff\x7f", b"\0\0\0\0", b"\xff\xff\xff\xff",
                                     b"\x00\x00\x00\x80"])
        elif op == 5 and b:
            b = b[: rng.randrange(len(b))]
    return bytes(b)


def main(n, seed):
    rng = random.Random(seed)
    h = handle()
    from hipdnn_cabi.schemas._generated.SerializedExecutionPlan import SerializedExecutionPlan
    seeds = []       # (kind, blob, runner)
    g = add_graph(h)
    st, ids = engine_ids(g)
    ok(st)
    for eid in ids:
        st, p = plan_for_engine(g, eid)
        ok(st)
        st, env = serialize_plan(p)
        ok(st)
        st, box = serialize_graph_and_plan(g, p)
        ok(st)
        seeds += [("envelope", env, "add"), ("container", box, "add")]
    st, g2 = scale_shift_graph(h, RUNTIME, CONST)
    ok(st)
    st, ids2 = engine_ids(g2)
    for eid in ids2:
        st, p = plan_for_engine(g2, eid)
        if st == 0:
            st, env = serialize_plan(p)
            if st == 0:
                seeds.append(("envelope", env, "scale"))
    counts = {}
    executed = 0
    bad = []
    for i in range(n):
        kind, blob, runner = seeds[i % len(seeds)]
        mode = rng.randrange(3)
        if mode == 0:
            data = mutate(rng, blob)
        elif mode == 1 and kind == "envelope":
            e = SerializedExecutionPlan.GetRootAs(blob, 0)
            payload = e.PluginPayloadAsNumpy().tobytes()
            data = envelope(1, e.EngineId(), e.WorkspaceSize(),
                            [int(u) for u in e.TensorUidsAsNumpy()], mutate(rng, payload))
        else:
            data = mutate(rng, blob) if rng.random() < 0.5 else blob[: rng.randrange(len(blob))]
        if not data:
            data = b"\0"
        st, p = deserialize_plan(h, data)
        counts[st] = counts.get(st, 0) + 1
        if st not in ALLOWED:
            bad.append([i, st])
        if st == 0:
            executed += 1
            if runner == "add":
                run_add(h, p)
            else:
                run_scale_shift(h, p, scalars={10: 2.0})
            lib.hipdnnBackendDestroyDescriptor(p)
        cst, _ = contents(data)
        counts[f"contents_{cst}"] = counts.get(f"contents_{cst}", 0) + 1
        if cst not in (0, 2):
            bad.append([i, "contents", cst])
    print(json.dumps({"n": n, "seeds": len(seeds), "counts": {str(k): v for k, v in counts.items()},
                      "executed": executed, "bad": bad[:20]}))


if __name__ == "__main__":
    del L, ffi
    main(int(sys.argv[1]), int(sys.argv[2]))
