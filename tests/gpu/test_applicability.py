"""CI (no GPU): the HIP engine and the CPU reference engine agree on what they accept.

For every graph of a corpus - the GPU sample graphs (uids from 1 and from 0), hipDNN-frontend
shaped graphs (uids from 0, graph-level io/intermediate/compute data types set, node compute
type FLOAT or UNSET, NCHW and NHWC, 16-bit data with FLOAT scale/bias/statistics) and a sweep
of data-type / compute-type / layout combinations per operation - the GPU engine's analysis
(the one ``is_applicable`` runs once a device is present) accepts the graph iff the CPU
reference accepts it and the GPU engine implements every node (:func:`gpu_implements`).

Mixed-precision batchnorm (each parameter / statistics tensor the data type or FLOAT, as the
CPU reference accepts it) is inside :func:`gpu_implements`: both engines accept those graphs.
"""
from __future__ import annotations

import itertools

import pytest

from engine_plugins.cpu_reference import engine as cpu_engine
from engine_plugins.hip_kernels import codegen as cg
from engine_plugins.hip_kernels import ops
from engine_plugins.hip_kernels import program as gp
from hipdnn_cabi.plugin_sdk import parse_graph
from hipdnn_cabi.schemas import catalog

from gpu_testlib import (FB, T, bn_bwd, bn_inf, bn_inf_var, bn_train, conv_bwd_data, conv_bwd_filter,
                         conv_fwd, from_zero, graph_bytes, matmul, node, pw, reduction,
                         sample_graphs)

GPU_TYPES = ("FLOAT", "HALF", "BFLOAT16")


def gpu_analysis(g):
    try:
        gp.build_program(g, use_mma=True, sms=132)
        return True, ""
    except gp.NotApplicable as e:
        return False, str(e)


def cpu_analysis(g):
    cpu_engine._cache.clear()
    a = cpu_engine._analyse(g)
    return a.ok, a.reason


def gpu_implements(g) -> bool:
    """The node kinds, modes and features the GPU engine has kernels for (its documented
    limits: no DOUBLE / integer data, no negative strides, no peer statistics,
    runtime scalars only where a kernel takes them, no DOUBLE compute type)."""
    for n in g.nodes:
        if n.kind not in ops.FAMILY or cg.dtype_name(n.compute_dtype) == "DOUBLE":
            return False
        try:
            r = gp.roles(n, g)
        except gp.NotApplicable:
            return False
        if any(gp.dt(t) not in GPU_TYPES for t in r.values()):
            return False
        if any(s < 0 for t in r.values() for s in t.strides):
            return False
        if any(t.is_runtime_pass_by_value and role not in ops.RUNTIME_SCALARS.get(n.kind, ())
               for role, t in r.items()):
            return False
        if n.kind == "PointwiseAttributes" and ops.pointwise.pw_mode_name(n) not in ops.pointwise.PW_EXPR:
            return False
        if n.kind == "ReductionAttributes" and \
                catalog.FB_NAMES["ReductionMode"].get(n.attrs.get("mode")) not in ops.reduction.MODES:
            return False
        if n.kind.startswith("Batchnorm"):
            if n.attrs.get("peer_stats_tensor_uid"):
                return False
    return True


# ------------------------------------------------------------------------------- the corpus
def c_dims(C, nd=4):
    return [1, C] + [1] * (nd - 2)


def frontend_graphs():
    """Graphs shaped like the hipDNN C++ frontend's: uids from 0 in creation order, graph-level
    types set, node compute FLOAT (or UNSET), epsilon/momentum by-value scalars."""
    out = []
    for dtp, lay, comp in itertools.product(GPU_TYPES, ("nchw", "nhwc"), ("FLOAT", "UNSET")):
        tag = f"{dtp}_{lay}_{comp}"
        kw = dict(io=dtp, intermediate="FLOAT", compute="FLOAT")
        N, C, H, K = 2, 8, 6, 16
        x, w, y = T(0, [N, C, H, H], dtp, lay), T(1, [K, C, 3, 3], dtp, lay), T(2, [N, K, H, H], dtp, lay)
        n = conv_fwd(0, 1, 2, [1, 1], [1, 1], [1, 1])
        _with_compute(n, comp)
        out.append((f"fe_conv_fwd_{tag}", graph_bytes([x, w, y], [n], **kw)))
        stats = [T(i, c_dims(C), "FLOAT") for i in range(1, 5)]          # mean, inv_var, scale, bias
        yb = T(5, [N, C, H, H], dtp, lay)
        xb = T(0, [N, C, H, H], dtp, lay)
        n = bn_inf(0, 1, 2, 3, 4, 5)
        _with_compute(n, comp)
        out.append((f"fe_bn_inf_{tag}", graph_bytes([xb] + stats + [yb], [n], **kw)))
        var = [T(i, c_dims(C), "FLOAT") for i in range(1, 5)]            # mean, var, scale, bias
        eps = T(5, [1, 1, 1, 1], "FLOAT", value=1e-5)
        yv = T(6, [N, C, H, H], dtp, lay)
        n = bn_inf_var(0, 1, 2, 3, 4, 5, 6)
        _with_compute(n, comp)
        out.append((f"fe_bn_inf_var_{tag}", graph_bytes([xb] + var + [eps, yv], [n], **kw)))
        # training: x, scale, bias, epsilon, momentum, prev running mean/var -> y, mean, inv_var,
        # next running mean/var
        ts = [xb, T(1, c_dims(C), "FLOAT"), T(2, c_dims(C), "FLOAT"),
              T(3, [1, 1, 1, 1], "FLOAT", value=1e-5), T(4, [1, 1, 1, 1], "FLOAT", value=0.1),
              T(5, c_dims(C), "FLOAT"), T(6, c_dims(C), "FLOAT"), T(7, [N, C, H, H], dtp, lay),
              T(8, c_dims(C), "FLOAT"), T(9, c_dims(C), "FLOAT"), T(10, c_dims(C), "FLOAT"),
              T(11, c_dims(C), "FLOAT")]
        n = bn_train(0, 1, 2, 3, 7, 8, 9, 5, 6, 4, 10, 11)
        _with_compute(n, comp)
        out.append((f"fe_bn_train_{tag}", graph_bytes(ts, [n], **kw)))
        n = bn_train(0, 1, 2, 3, 7, 8, 9)
        _with_compute(n, comp)
        out.append((f"fe_bn_train_norun_{tag}", graph_bytes(ts[:4] + [ts[7], ts[8], ts[9]], [n], **kw)))
        # backward: dy, x, mean, inv_var, scale -> dx, dscale, dbias
        ts = [T(0, [N, C, H, H], dtp, lay), T(1, [N, C, H, H], dtp, lay)] + \
             [T(i, c_dims(C), "FLOAT") for i in (2, 3, 4)] + [T(5, [N, C, H, H], dtp, lay)] + \
             [T(i, c_dims(C), "FLOAT") for i in (6, 7)]
        n = bn_bwd(0, 1, 2, 3, 4, 5, 6, 7)
        _with_compute(n, comp)
        out.append((f"fe_bn_bwd_{tag}", graph_bytes(ts, [n], **kw)))
    return out


def _with_compute(n, comp):
    n["compute_data_type"] = FB["DataType"][comp]
    return n


def sweep_graphs():
    """Per operation: data / output / parameter types x compute types, plus aliased outputs."""
    out = []
    types = GPU_TYPES + ("DOUBLE",)
    comps = ("FLOAT", "UNSET", "HALF", "DOUBLE")
    for a, o, comp in itertools.product(types, types, comps):
        tag = f"{a}_{o}_{comp}"
        out.append((f"sw_conv_{tag}", graph_bytes(
            *from_zero([T(1, [1, 4, 5, 5], a), T(2, [8, 4, 3, 3], a), T(3, [1, 8, 3, 3], o)],
                       [_with_compute(conv_fwd(1, 2, 3, [0, 0], [1, 1], [1, 1]), comp)]))))
        out.append((f"sw_matmul_{tag}", graph_bytes(
            [T(0, [4, 8], a), T(1, [8, 6], a), T(2, [4, 6], o)], [_with_compute(matmul(0, 1, 2), comp)])))
        out.append((f"sw_red_{tag}", graph_bytes(
            [T(0, [4, 8], a), T(1, [4, 1], o)], [_with_compute(reduction("ADD", 0, 1), comp)])))
        out.append((f"sw_pw_{tag}", graph_bytes(
            [T(0, [4, 8], a), T(1, [1, 8], "FLOAT"), T(2, [4, 8], o)],
            [_with_compute(pw("ADD", 0, 2, 1), comp)])))
        for pt in types:
            C = 4
            out.append((f"sw_bninf_{tag}_{pt}", graph_bytes(
                [T(0, [2, C, 3, 3], a)] + [T(i, c_dims(C), pt) for i in (1, 2, 3, 4)] + [T(5, [2, C, 3, 3], o)],
                [_with_compute(bn_inf(0, 1, 2, 3, 4, 5), comp)])))
            if comp in ("FLOAT", "UNSET"):
                out.append((f"sw_bnbwd_{tag}_{pt}", graph_bytes(
                    [T(0, [2, C, 3, 3], a), T(1, [2, C, 3, 3], a)] + [T(i, c_dims(C), pt) for i in (2, 3, 4)] +
                    [T(5, [2, C, 3, 3], o)] + [T(i, c_dims(C), pt) for i in (6, 7)],
                    [_with_compute(bn_bwd(0, 1, 2, 3, 4, 5, 6, 7), comp)])))
    # mixed batchnorm parameter types (the CPU reference accepts some)
    for a in GPU_TYPES:
        C = 4
        out.append((f"mix_bninf_{a}", graph_bytes(
            [T(0, [2, C, 3, 3], a), T(1, c_dims(C), "FLOAT"), T(2, c_dims(C), "FLOAT"),
             T(3, c_dims(C), a), T(4, c_dims(C), a), T(5, [2, C, 3, 3], a)], [bn_inf(0, 1, 2, 3, 4, 5)])))
        out.append((f"mix_bntrain_{a}", graph_bytes(
            [T(0, [2, C, 3, 3], a), T(1, c_dims(C), a), T(2, c_dims(C), a),
             T(3, [1, 1, 1, 1], "FLOAT", value=1e-5), T(4, [2, C, 3, 3], a), T(5, c_dims(C), "FLOAT"),
             T(6, c_dims(C), "FLOAT")], [bn_train(0, 1, 2, 3, 4, 5, 6)])))
    # outputs whose elements share addresses; a node reading its own output; a 1-D per-channel
    # tensor; a dangling uid; uid 0 missing from the graph
    out.append(("alias_pw_out", graph_bytes(
        [T(0, [4, 8]), T(1, [4, 8]), T(2, [4, 8], strides=[0, 1])], [pw("ADD", 0, 2, 1)])))
    out.append(("alias_conv_out", graph_bytes(
        [T(0, [1, 4, 5, 5]), T(1, [8, 4, 3, 3]), T(2, [1, 8, 3, 3], strides=[72, 9, 3, 0])],
        [conv_fwd(0, 1, 2, [0, 0], [1, 1], [1, 1])])))
    out.append(("self_loop_pw", graph_bytes([T(0, [4, 8]), T(1, [4, 8])], [pw("ADD", 0, 0, 1)])))
    out.append(("bn_inf_1d_params", graph_bytes(
        [T(0, [2, 4, 3, 3])] + [T(i, [4]) for i in (1, 2, 3, 4)] + [T(5, [2, 4, 3, 3])],
        [bn_inf(0, 1, 2, 3, 4, 5)])))
    out.append(("dangling_uid0", graph_bytes([T(1, [4, 8]), T(2, [4, 8]), T(3, [4, 8])],
                                             [pw("ADD", 0, 3, 2)])))
    out.append(("grouped_conv", graph_bytes(
        [T(0, [1, 4, 5, 5]), T(1, [8, 2, 3, 3]), T(2, [1, 8, 3, 3])], [conv_fwd(0, 1, 2, [0, 0], [1, 1], [1, 1])])))
    return out


def corpus():
    out = list(sample_graphs()) + frontend_graphs() + sweep_graphs()
    return out


CORPUS = corpus()


def test_engines_agree_on_the_corpus():
    bad, counts = [], {"both": 0, "cpu_only": 0, "neither": 0}
    for name, b in CORPUS:
        g = parse_graph(b)
        cpu_ok, cpu_why = cpu_analysis(g)
        gpu_ok, gpu_why = gpu_analysis(g)
        impl = gpu_implements(g)
        if gpu_ok and not cpu_ok:
            bad.append(f"{name}: the GPU engine accepts a graph the CPU reference declines ({cpu_why})")
        elif cpu_ok and impl and not gpu_ok:
            bad.append(f"{name}: the CPU reference accepts, the GPU engine implements every node "
                       f"but declines: {gpu_why}")
        if not gpu_ok:
            assert gpu_why, name
        counts["both" if gpu_ok else "cpu_only" if cpu_ok else "neither"] += 1
    assert not bad, "\n".join(bad[:40]) + f"\n({len(bad)} disagreements)"
    # the corpus exercises all three outcomes
    assert all(counts.values()), counts


def test_frontend_shaped_graphs_run_on_the_gpu_engine():
    """hipDNN-frontend graphs (uids from 0, 16-bit data with FLOAT statistics) are accepted by
    both engines."""
    for name, b in frontend_graphs():
        g = parse_graph(b)
        assert min(g.tensors) == 0, name
        ok, why = gpu_analysis(g)
        assert ok, f"{name}: {why}"
        assert cpu_analysis(g)[0], name


@pytest.mark.parametrize("name,expect", [
    ("sw_conv_FLOAT_FLOAT_HALF", "compute type HALF"),
    ("sw_matmul_HALF_BFLOAT16_FLOAT", "c is BFLOAT16 for HALF data"),
    ("alias_pw_out", "share addresses"),
    ("self_loop_pw", "reads and writes the same tensor"),
    ("dangling_uid0", "uid 0"),
])
def test_decline_reasons(name, expect):
    b = dict(CORPUS)[name]
    ok, why = gpu_analysis(parse_graph(b))
    assert not ok and expect in why, why


@pytest.mark.parametrize("name", ["mix_bninf_HALF", "mix_bninf_BFLOAT16", "mix_bntrain_HALF",
                                  "mix_bntrain_BFLOAT16"])
def test_mixed_precision_batchnorm_accepted(name):
    """Batchnorm parameter / statistics tensors each the data type or FLOAT (hipDNN's samples):
    both engines accept."""
    g = parse_graph(dict(CORPUS)[name])
    assert cpu_analysis(g)[0], name
    ok, why = gpu_analysis(g)
    assert ok, why


def test_grouped_conv_accepted():
    """Grouped convolutions (C of x a multiple of C of w): both engines accept."""
    g = parse_graph(dict(CORPUS)["grouped_conv"])
    assert cpu_analysis(g)[0]
    ok, why = gpu_analysis(g)
    assert ok, why


def test_uid_zero_roles():
    """uid 0 names a tensor like any other uid; an optional role left unset (None) is absent."""
    g = parse_graph(graph_bytes([T(0, [4, 8]), T(1, [4, 8])], [pw("RELU_FWD", 0, 1)]))
    r = gp.roles(g.nodes[0], g)
    assert r["in_0"].uid == 0 and r["out_0"].uid == 1 and "in_1" not in r
    prog = gp.build_program(g)
    assert prog.external == [0, 1]
    assert [a for a in prog.steps[0][5]] == [("t", 0), ("t", 1)]
