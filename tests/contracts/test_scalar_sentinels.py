"""RFC 0016 §9 sentinel regressions per scalar-taking operation of the CPU reference engine
(epsilon, momentum; alpha/beta pointwise operands are in test_runtime_pbv.py), through the backend
C API with runtime pass-by-value scalars: the sentinel in the variant pack must reach the math.
Also mixed multi-scalar graphs (batchnorm training: epsilon and momentum in different states),
override-inert for defaulted uids, a missing scalar, and the runtime uid set surviving a
serialize → fresh process → deserialize round trip."""
from __future__ import annotations

import os

import numpy as np
import pytest

import ct_norms as cn
from ct_support import PLUGIN, ROOT, plugin_dir, py

EPS, MOM = cn.EPS, cn.MOM
S, D = cn.SENTINEL, cn.DEFAULT


@pytest.fixture(scope="module")
def cpu_dir(ct_base):
    src = os.path.join(ROOT, "engine_plugins", "cpu_reference")
    if not os.path.exists(os.path.join(src, "engine.py")):
        pytest.skip("engine_plugins/cpu_reference has not landed")
    return plugin_dir(ct_base, "d_cpu_reference_sentinels", [src])


def check(op, got, eps, mom=None):
    """``got`` ({str uid: list}) equals the float64 reference for (eps, mom)."""
    ref = cn.reference(op, cn.data(op), eps, mom)
    for uid, r in ref.items():
        np.testing.assert_allclose(np.array(got[str(uid)]), r, rtol=1e-4, atol=1e-5,
                                   err_msg=f"{op} uid {uid} (eps={eps}, mom={mom})")


def test_sentinels_distinguish_the_values():
    """The data make each sentinel visible: the reference with the sentinel differs clearly from
    the reference with the baked default (otherwise the regressions below prove nothing)."""
    for op in cn.OPS:
        a = cn.reference(op, cn.data(op), S[EPS], S[MOM])
        b = cn.reference(op, cn.data(op), D[EPS], D[MOM])
        assert max(np.abs(a[u] - b[u]).max() for u in a) > 0.05, op
    a = cn.reference("bn_train", cn.data("bn_train"), D[EPS], S[MOM])
    b = cn.reference("bn_train", cn.data("bn_train"), D[EPS], D[MOM])
    assert np.abs(a[14] - b[14]).max() > 1e-3 and np.abs(a[15] - b[15]).max() > 1e-4


# (op, {uid: state}, pack scalars, expected eps, expected mom)
def _cases():
    out = []
    for op in cn.OPS:
        rt = {u: "runtime" for u in cn.SCALARS[op]}
        df = {u: "default" for u in cn.SCALARS[op]}
        cs = {u: "const" for u in cn.SCALARS[op]}
        out += [(op, "runtime", rt, S, S[EPS], S[MOM]),            # sentinel reaches the math
                (op, "runtime_other", rt, {EPS: 0.5, MOM: 0.75}, 0.5, 0.75),
                (op, "default_inert", df, S, D[EPS], D[MOM]),     # override inert
                (op, "default_alone", df, {}, D[EPS], D[MOM]),
                (op, "const", cs, {}, S[EPS], S[MOM])]            # baked sentinel (CONST)
    # mixed multi-scalar graphs: batchnorm training, epsilon and momentum in different states
    out += [("bn_train", "eps_rt_mom_default", {EPS: "runtime", MOM: "default"}, S, S[EPS], D[MOM]),
            ("bn_train", "eps_default_mom_rt", {EPS: "default", MOM: "runtime"}, S, D[EPS], S[MOM]),
            # CONST bakes the sentinel; the runtime one takes another value from the pack
            ("bn_train", "eps_const_mom_rt", {EPS: "const", MOM: "runtime"}, {MOM: 0.75},
             S[EPS], 0.75),
            ("bn_train", "eps_rt_mom_const", {EPS: "runtime", MOM: "const"}, {EPS: 0.5, MOM: 0.9},
             0.5, S[MOM])]
    return out


CASES = _cases()

RUN = """
import ct_norms as cn
from hipdnn_cabi.backend.plugins.loader import fnv1a64
from hipdnn_cabi.backend import registry, graph_fb
CPU = fnv1a64("HIPDNN_CABI_CPU_REFERENCE_ENGINE")
h = handle()
out = {}
for op, tag, states, pack, _e, _m in CASES:
    states = {int(k): v for k, v in states.items()}
    pack = {int(k): v for k, v in pack.items()}
    baked = {u: (cn.SENTINEL[u] if states[u] == CONST else cn.DEFAULT[u]) for u in states}
    st, g = cn.build(h, op, states, baked); ok(st)
    stamp = graph_fb.read(registry.objects[addr(g)].serialized(), "Graph")["min_required_engine_api_version"]
    st, ids = engine_ids(g); ok(st)
    st, p = plan_for_engine(g, CPU); ok(st)
    r = {"ids": ids == [CPU] or CPU in ids, "stamp": [stamp["major"], stamp["minor"], stamp["patch"]]}
    r["st"], r["y"] = cn.execute(h, p, op, pack)
    r["msg"] = err() if r["st"] else ""
    rt = [u for u in states if states[u] == RUNTIME]
    r["missing"] = {}
    for u in rt:                                   # each user-supplied scalar left out in turn
        st, _ = cn.execute(h, p, op, {k: v for k, v in cn.SENTINEL.items() if k != u})
        r["missing"][str(u)] = [st, err()]
    out[op + "/" + tag] = r
print(json.dumps(out))
"""


def test_scalar_sentinels_per_operation(cpu_dir):
    """Per scalar-taking operation, through the backend C API on the CPU reference engine:
    user-supplied scalars are read from the host pointer (sentinel 0.123 for epsilon, 0.37 for
    momentum, and a second value, both show up in the numbers), a runtime-with-default scalar
    keeps its baked default whatever the variant pack holds (override inert), a compile-time
    constant is baked, each missing user-supplied scalar is INVALID_VALUE naming its uid
    (→ PLUGIN_ERROR), and the graph stamps API 1.2.0 only when a scalar is runtime."""
    r = py(f"CASES = {CASES!r}\n" + RUN, cpu_dir)
    assert len(r) == len(CASES)
    for op, tag, states, _pack, eps, mom in CASES:
        v = r[op + "/" + tag]
        key = f"{op}/{tag}"
        assert v["ids"], key
        assert v["st"] == 0, (key, v["msg"])
        check(op, v["y"], eps, mom)
        runtime_any = any(s != "const" for s in states.values())
        assert v["stamp"] == ([1, 2, 0] if runtime_any else [1, 0, 0]), key
        rt = sorted(u for u, s in states.items() if s == "runtime")
        assert sorted(int(u) for u in v["missing"]) == rt, key
        for u, (st, msg) in v["missing"].items():
            assert st == PLUGIN, (key, u)
            assert "HIPDNN_PLUGIN_STATUS_INVALID_VALUE" in msg and f"uid {u}" in msg, (key, msg)


SER = """
import os
import ct_norms as cn
from hipdnn_cabi.backend.plugins.loader import fnv1a64
CPU = fnv1a64("HIPDNN_CABI_CPU_REFERENCE_ENGINE")
h = handle()
out = {}
for op, tag, states in PLANS:
    states = {int(k): v for k, v in states.items()}
    st, g = cn.build(h, op, states, cn.DEFAULT); ok(st)
    st, p = plan_for_engine(g, CPU); ok(st)
    st, data = serialize_plan(p); ok(st)
    open(os.path.join(DIR, op + tag + ".bin"), "wb").write(data)
    out[op + tag] = cn.execute(h, p, op, cn.SENTINEL)
print(json.dumps(out))
"""

RESTORE = """
import os
import ct_norms as cn
h = handle()
out = {}
for op, tag, states in PLANS:
    st, p = deserialize_plan(h, open(os.path.join(DIR, op + tag + ".bin"), "rb").read())
    r = {"deser": [st, err() if st else ""]}
    if st == 0:
        r["full"] = cn.execute(h, p, op, cn.SENTINEL)
        r["other"] = cn.execute(h, p, op, {cn.EPS: 0.5, cn.MOM: 0.75})
        r["none"] = [cn.execute(h, p, op, {})[0], err()]
    out[op + tag] = r
print(json.dumps(out))
"""

PLANS = [("bn_train", "mixed", {EPS: "runtime", MOM: "default"}),
         ("bn_train", "mixed2", {EPS: "default", MOM: "runtime"}),
         ("bn_inf_var", "rt", {EPS: "runtime"}),
         ("layernorm", "rt", {EPS: "runtime"}),
         ("layernorm_bwd", "rt", {EPS: "runtime"}),
         ("rmsnorm", "rt", {EPS: "runtime"})]


def test_serialized_norm_plans_keep_runtime_scalars(cpu_dir, tmp_path):
    """Serialize → fresh process → deserialize → execute: user-supplied scalars are still read
    from the host pointer (two different values show up), defaulted ones keep the baked default
    (override inert), and a missing one is still INVALID_VALUE (→ PLUGIN_ERROR)."""
    head = f"PLANS = {PLANS!r}\nDIR = {str(tmp_path)!r}\n"
    a = py(head + SER, cpu_dir)
    b = py(head + RESTORE, cpu_dir)
    for op, tag, states in PLANS:
        def want(vals, u):
            return vals[u] if states.get(u) == "runtime" else D[u]
        st, y = a[op + tag]
        assert st == 0
        check(op, y, want(S, EPS), want(S, MOM))
        v = b[op + tag]
        assert v["deser"] == [0, ""], v
        assert v["full"][0] == 0 and v["full"][1] == y, (op, tag)
        other = {EPS: 0.5, MOM: 0.75}
        assert v["other"][0] == 0
        check(op, v["other"][1], want(other, EPS), want(other, MOM))
        assert v["none"][0] == PLUGIN and "HIPDNN_PLUGIN_STATUS_INVALID_VALUE" in v["none"][1]
