"""Two fusions built into the wgmma GEMM core (kernels/gemm_wgmma.hip, gemm.py, program.py):

* paired GEMM (SwiGLU): matmul(x, W_gate) and matmul(x, W_up) - the two halves of a packed
  gate|up weight bound as two B tensors (hipDNN tensors have no offset and no slice operation)
  - whose virtual outputs only a pointwise run reads (swish(g) * u) run as ONE kernel: each
  tile loads the same columns of both weights (tensor maps tmB / tmB2), combines the two
  accumulators in registers and stores only z;
* genstats: a convolution forward (or 2-D matmul) whose output a training batchnorm reads
  accumulates the per-channel sum and sum of squares in its epilogue (warp reduce, double
  atomics into the plan's zeroed scratch); the batchnorm then runs no statistics pass.

CI (no GPU): the programs for an sm_90a target (one kernel instead of three; the statistics
pass gone), the fallbacks (other targets, knobs off, layouts the copy engine cannot load) and
NVRTC compiles of the new sources for sm_90a without spills.  GPU (``-m gpu``): the results
against float64 formulas over the CPU reference kernels (odd M, fp16 / bf16, both B layouts,
both epilogues); every output starts poisoned (NaN)."""
from __future__ import annotations

import functools

import numpy as np
import pytest

from engine_plugins.cpu_reference.kernels import conv as kconv
from engine_plugins.hip_kernels import codegen
from engine_plugins.hip_kernels.program import build_program
from hipdnn_cabi.plugin_sdk import parse_graph

from gpu_testlib import (TOL, nvrtc_or_skip, T, bn_train, conv_fwd, graph_bytes, matmul, plan_notes, pw, quantize,
                         quantized_normal, reduction)
from test_fusion_topologies import dataflow_problems

rng = np.random.default_rng(1107)
rnd = functools.partial(quantized_normal, rng)
EPS = 1e-5
# the batchnorm's own statistics pass: the generic kernel or the channels-last partial sums
STATS = {"hdn_bn_stats", "hdn_bn_cl_part"}


# ---------------------------------------------------------------- graphs
def swiglu_graph(M, K, F, dtype="BFLOAT16", kmajor=False):
    """x [M, K] @ W_gate, x @ W_up (views of one packed [K, 2F] weight: row-major, or K-major
    as a transposed [2F, K] Linear weight) -> swish(g) * u -> z [M, F].  Returns (tensors,
    nodes, x, w_gate, w_up, z)."""
    x = T(1, [M, K], dtype)
    st = [1, K] if kmajor else [2 * F, 1]
    wg, wu = T(2, [K, F], dtype, strides=st), T(3, [K, F], dtype, strides=st)
    g, u, s = (T(v, [M, F], "FLOAT", virtual=True) for v in (4, 5, 6))
    z = T(7, [M, F], dtype)
    nodes = [matmul(1, 2, 4), matmul(1, 3, 5), pw("SWISH_FWD", 4, 6, swish_beta=1.0), pw("MUL", 6, 7, 5)]
    return [x, wg, wu, g, u, s, z], nodes, x, wg, wu, z


def swiglu_ref(xv, wgv, wuv, dtype):
    g, u = xv @ wgv, xv @ wuv
    return quantize(g / (1.0 + np.exp(-g)) * u, dtype)


def nhwc(d):
    return [d[1] * d[2] * d[3], 1, d[3] * d[1], d[1]]


def convbn_graph(N, C, H, K, dtype="HALF", lay="nhwc", y_stored=False, ksize=3):
    """x -> conv (ksize x ksize, pad ksize // 2) -> y -> batchnorm training (mean, inv_variance,
    out).  Returns (tensors, nodes, x, w, y, (scale, bias), (mean, inv_variance, out))."""
    st = nhwc if lay == "nhwc" else (lambda d: None)
    x = T(1, [N, C, H, H], dtype, strides=st([N, C, H, H]))
    w = T(2, [K, C, ksize, ksize], dtype, strides=st([K, C, ksize, ksize]))
    y = T(3, [N, K, H, H], dtype, strides=st([N, K, H, H]), virtual=not y_stored)
    cd = [1, K, 1, 1]
    sc, bi, mu, iv = T(5, cd), T(6, cd), T(8, cd), T(9, cd)
    eps = T(7, [1, 1, 1, 1], value=EPS)
    out = T(10, [N, K, H, H], dtype, strides=st([N, K, H, H]))
    p = ksize // 2
    nodes = [conv_fwd(1, 2, 3, [p, p], [1, 1], [1, 1]), bn_train(3, 5, 6, 7, 10, 8, 9)]
    return [x, w, y, sc, bi, eps, mu, iv, out], nodes, x, w, y, (sc, bi), (mu, iv, out)


def mmbn_graph(M, K, N, dtype="BFLOAT16"):
    """a [M, K] @ b [K, N] -> c -> batchnorm training over the N columns."""
    a, b, c = T(1, [M, K], dtype), T(2, [K, N], dtype), T(3, [M, N], dtype, virtual=True)
    cd = [1, N]
    sc, bi, mu, iv = T(5, cd), T(6, cd), T(8, cd), T(9, cd)
    eps = T(7, [1, 1], value=EPS)
    out = T(10, [M, N], dtype)
    return ([a, b, c, sc, bi, eps, mu, iv, out], [matmul(1, 2, 3), bn_train(3, 5, 6, 7, 10, 8, 9)],
            a, b, (sc, bi), (mu, iv, out))


def convred_graph(N, C, H, K, dtype="HALF", y_virtual=False, avg=False):
    """The cuDNN peer's genstats spelling: x -> conv 3x3 -> y; REDUCTION ADD (or AVG) of y and of
    MUL(y, y) (FLOAT, virtual) to [1, K, 1, 1].  Returns (tensors, nodes, x, w, y, s, q)."""
    x = T(1, [N, C, H, H], dtype, strides=nhwc([N, C, H, H]))
    w = T(2, [K, C, 3, 3], dtype, strides=nhwc([K, C, 3, 3]))
    y = T(3, [N, K, H, H], dtype, strides=nhwc([N, K, H, H]), virtual=y_virtual)
    s, q = T(4, [1, K, 1, 1]), T(6, [1, K, 1, 1])
    y2 = T(5, [N, K, H, H], "FLOAT", strides=nhwc([N, K, H, H]), virtual=True)
    mode = "AVG" if avg else "ADD"
    nodes = [conv_fwd(1, 2, 3, [1, 1], [1, 1], [1, 1]), reduction(mode, 3, 4), pw("MUL", 3, 5, 3),
             reduction(mode, 5, 6)]
    return [x, w, y, s, y2, q], nodes, x, w, y, s, q


def bn_ref(yq, axes, scv, biv, dtype):
    m = yq.mean(axis=axes, keepdims=True)
    iv = 1.0 / np.sqrt(yq.var(axis=axes, keepdims=True) + EPS)
    return m, iv, quantize((yq - m) * iv * scv + biv, dtype)


def _prog(ts, nodes, **kw):
    p = build_program(parse_graph(graph_bytes(ts, nodes)), **kw)
    assert not dataflow_problems(p), dataflow_problems(p)
    return p


def _launches(p):
    return [st for st in p.steps if st[0] == "launch"]


# ---------------------------------------------------------------- CI: programs
@pytest.mark.parametrize("kmajor", [False, True])
@pytest.mark.parametrize("dtype", ["HALF", "BFLOAT16"])
def test_swiglu_one_paired_kernel(kmajor, dtype):
    ts, nodes, *_ = swiglu_graph(37, 64, 96, dtype, kmajor)
    p = _prog(ts, nodes, arch="sm_90a")
    ls = _launches(p)
    assert [s[2] for s in ls] == ["hdn_gemm_wgmma"], [s[2] for s in ls]
    assert len(p.steps) == 1 and p.ws_size == 0           # g, u never reach memory
    assert any("paired GEMM" in n for n in p.notes), p.notes
    args = ls[0][5]
    tm = [a for a in args if a[0] == "tmap"]
    assert [a[1] for a in tm[-2:]] == [("t", 2), ("t", 3)]   # tmB = W_gate, tmB2 = W_up
    assert ("t", 7) in args and ("t", 4) not in args and ("t", 5) not in args
    src = ls[0][1]
    assert "#define WG_PAIR 1" in src and "#define GN 192" in src and "pair_v(" in src


def test_swiglu_frontend_spelling_is_paired():
    """The graph as the frontend spells it (docs/gpu.md): two matmuls on views of the packed
    weight, swish, mul - one paired kernel for an sm_90 target."""
    from hipdnn_cabi import frontend as hf
    bf16, f32 = hf.DataType.HIPDNN_DATA_BFLOAT16, hf.DataType.HIPDNN_DATA_FLOAT
    M, K, F = 64, 128, 256
    g = hf.Graph(io_data_type=bf16, intermediate_data_type=f32, compute_data_type=f32)
    x = g.tensor(name="x", dim=[M, K], stride=[K, 1], data_type=bf16)
    wg = g.tensor(name="w_gate", dim=[K, F], stride=[2 * F, 1], data_type=bf16)
    wu = g.tensor(name="w_up", dim=[K, F], stride=[2 * F, 1], data_type=bf16)
    z = g.mul(g.swish(g.matmul(x, wg), 1.0), g.matmul(x, wu))
    z.set_output(True).set_data_type(bf16)
    try:
        p = build_program(parse_graph(g.serialize()), arch="sm_90")
    finally:
        g.close()
    assert [s[2] for s in _launches(p)] == ["hdn_gemm_wgmma"], p.notes
    assert any("paired GEMM" in n for n in p.notes)


def test_swiglu_fallbacks_stay_three_kernels(monkeypatch):
    """Other targets, the knob off, a B the copy engine cannot load (odd row stride), a batched
    matmul: the two GEMMs and the elementwise run as before."""
    ts, nodes, *_ = swiglu_graph(37, 64, 96)
    for kw in ({"arch": None}, {"arch": "sm_80"}, {"arch": "sm_90a", "use_mma": False}):
        p = _prog(ts, nodes, **kw)
        assert len(_launches(p)) == 3 and not any("paired" in n for n in p.notes), (kw, p.notes)
    monkeypatch.setenv("HIPDNN_CABI_HIP_PAIR_GEMM", "0")
    assert len(_launches(_prog(ts, nodes, arch="sm_90a"))) == 3
    monkeypatch.delenv("HIPDNN_CABI_HIP_PAIR_GEMM")
    ts2, nodes2, *_ = swiglu_graph(37, 64, 96)
    ts2[1].strides = ts2[2].strides = [193, 1]              # rows not 16-byte aligned
    assert len(_launches(_prog(ts2, nodes2, arch="sm_90a"))) == 3
    ts3, nodes3, *_ = swiglu_graph(37, 64, 96)
    ts3[2].strides = [1, 64]                                # the two B layouts differ
    assert len(_launches(_prog(ts3, nodes3, arch="sm_90a"))) == 3


def test_swiglu_gate_read_elsewhere_not_paired():
    """g also a graph output (not virtual): no pairing, the graph still builds."""
    ts, nodes, *_ = swiglu_graph(37, 64, 96)
    ts[3].virtual = False
    p = _prog(ts, nodes, arch="sm_90a")
    assert not any("paired" in n for n in p.notes)
    assert len(_launches(p)) >= 2


@pytest.mark.parametrize("lay", ["nhwc", "nchw"])
def test_genstats_conv_bn_drops_the_statistics_pass(lay):
    ts, nodes, *_ = convbn_graph(2, 8, 6, 16, "HALF", lay)
    p = _prog(ts, nodes, arch="sm_90a")
    names = [s[2] for s in _launches(p)]
    assert not STATS & set(names), names
    assert names[-2:] == ["hdn_bn_finalize", "hdn_bn_apply_u1"], names
    assert any("genstats" in n for n in p.notes) and any("no statistics pass" in n for n in p.notes)
    gemm = [s for s in _launches(p) if s[2] == "hdn_gemm_wgmma"][0]
    fin = [s for s in _launches(p) if s[2] == "hdn_bn_finalize"][0]
    assert gemm[5][-1] == fin[5][0]                        # the GEMM's sums feed the finalize
    mem = [s for s in p.steps if s[0] == "memset"]
    assert len(mem) == 1 and mem[0][1] == fin[5][0] and p.steps.index(mem[0]) < p.steps.index(gemm)
    assert "#define WG_STATS 1" in gemm[1]


def test_genstats_matmul_bn_and_fallbacks(monkeypatch):
    ts, nodes, *_ = mmbn_graph(37, 64, 40)
    names = [s[2] for s in _launches(_prog(ts, nodes, arch="sm_90a"))]
    assert not STATS & set(names) and names[0] == "hdn_gemm_wgmma", names
    # other cores keep the batchnorm's own statistics pass
    for kw in ({"arch": None}, {"arch": "sm_90a", "use_mma": False}):
        names = [s[2] for s in _launches(_prog(ts, nodes, **kw))]
        assert STATS & set(names), (kw, names)
    monkeypatch.setenv("HIPDNN_CABI_HIP_GENSTATS", "0")
    assert STATS & {s[2] for s in _launches(_prog(ts, nodes, arch="sm_90a"))}


def test_genstats_conv_with_relu_between_keeps_the_pass():
    """conv -> relu -> batchnorm: the batchnorm's x is not the GEMM's output."""
    ts, nodes, x, w, y, _, _ = convbn_graph(2, 8, 6, 16, "HALF")
    r = T(11, y.dims, "HALF", strides=y.strides, virtual=True)
    nodes = [nodes[0], pw("RELU_FWD", 3, 11), bn_train(11, 5, 6, 7, 10, 8, 9)]
    names = [s[2] for s in _launches(_prog(ts + [r], nodes, arch="sm_90a"))]
    assert STATS & set(names), names


@pytest.mark.parametrize("y_virtual", [False, True])
def test_genstats_reductions_from_the_epilogue(y_virtual):
    """conv -> y; sum(y), sum(y * y) per channel (the cuDNN peer's spelling): the GEMM keeps the
    sums, one small kernel writes both outputs - no square kernel, no reduction kernels."""
    ts, nodes, *_ = convred_graph(2, 8, 6, 16, y_virtual=y_virtual)
    p = _prog(ts, nodes, arch="sm_90a")
    names = [s[2] for s in _launches(p)]
    assert names == ["hdn_gemm_wgmma", "hdn_genstats_out_u0"], names
    assert any("2 per-channel reduction(s)" in n for n in p.notes), p.notes
    gemm, fin = _launches(p)
    assert gemm[5][-1] == fin[5][0] and ("t", 4) in fin[5] and ("t", 6) in fin[5]
    assert (p.ws_size > 0) == y_virtual                  # a virtual y is still written (workspace)
    # other targets: the conv, the square and two reductions as before
    names = [s[2] for s in _launches(_prog(ts, nodes, arch=None))]
    assert len(names) == 4 and not any("genstats" in n for n in names), names


def test_genstats_reductions_not_per_channel_stay():
    """A reduction to [1, 1, 1, 1] (not per channel) and a HALF square keep their kernels."""
    ts, nodes, x, w, y, s, q = convred_graph(2, 8, 6, 16)
    s.dims, s.strides = [1, 1, 1, 1], [1, 1, 1, 1]
    ts[4].dtype = "HALF"                                 # the square rounded to half
    names = [st[2] for st in _launches(_prog(ts, nodes, arch="sm_90a"))]
    assert not any(n.startswith("hdn_genstats_out") for n in names) and "hdn_pw_u1" in names, names


# ---------------------------------------------------------------- CI: host emulation
def _run_host(prog, inputs, outputs):
    """The program on the host (host_emu.py): the wgmma GEMM steps through their generated
    prelude under a serial loop (the paired GEMM through pair_v; the statistics through the
    prelude's WG_STATS contract), every other kernel as it is."""
    import re
    import host_emu
    from gpu_testlib import from_storage, to_storage
    if host_emu.compiler() is None:
        pytest.skip("no host C++ compiler")
    hdr = codegen.headers()
    body = codegen.read_kernel("gemm_wgmma.hip")
    mem = host_emu.HostMem()
    ptr, host = {}, {}
    for t, v in list(inputs.items()) + [(t, None) for t in outputs]:
        st = to_storage(t, v if v is not None else np.full(t.dims, np.nan))
        p, raw = mem.alloc(st.nbytes)
        raw[:] = st.view(np.uint8)
        ptr[t.uid], host[t.uid] = p, (raw, st.dtype, t)
    base = {"ws": mem.alloc(max(16, prog.ws_size)), "sc": mem.alloc(max(16, prog.scratch_size))}
    for st in prog.steps:
        if st[0] == "memset":
            base[st[1][0]][1][st[1][1]:st[1][1] + st[2]] = 0
            continue
        _, src, name, grid, block, args = st[:6]

        def val(a):
            return ptr[a[1]] if a[0] == "t" else base[a[0]][0] + a[1]
        if name == "hdn_gemm_wgmma":
            prelude = src[:src.index(body)]
            d = {k: int(v) for k, v in re.findall(r"#define (G\w+|C_VEC|WG_PAIR) (\d+)", prelude)}
            epi = [val(a) for a in args[2:] if a[0] != "tmap"]
            if d.get("WG_PAIR"):
                b2 = [a for a in args if a[0] == "tmap"][-1][1]
                host_emu.run_pair_gemm(prelude, [val(args[0]), val(args[1]), val(b2)] + epi, hdr,
                                       d["C_VEC"], d["GM"], d["GN"] // 2, d["GK"])
            else:
                host_emu.run_gemm_prelude(prelude, [val(args[0]), val(args[1])] + epi, hdr,
                                          d["C_VEC"], d["GBATCH"], d["GM"], d["GN"], d["GK"])
        else:
            host_emu.run_kernel(src, name, grid, block, [val(a) for a in args], hdr)
    return {t.uid: from_storage(t, host[t.uid][0].view(host[t.uid][1]).copy()) for t in outputs}


@pytest.mark.parametrize("kmajor", [False, True])
@pytest.mark.parametrize("F", [96, 100])
def test_swiglu_host_emulation(kmajor, F):
    """The paired program's pair_v (the run seeded with both accumulators) and its stores of
    z, on the host, against the float64 formula."""
    M, K, dtype = 19, 24, "BFLOAT16"
    ts, nodes, x, wg, wu, z = swiglu_graph(M, K, F, dtype, kmajor)
    prog = _prog(ts, nodes, arch="sm_90a")
    # N-major rows of F = 100 elements are not 16-byte multiples: unfused there
    assert any("paired GEMM" in n for n in prog.notes) == (kmajor or F % 8 == 0)
    xv, wgv, wuv = rnd(x.dims, dtype), rnd(wg.dims, dtype, K ** -0.5), rnd(wu.dims, dtype, K ** -0.5)
    out = _run_host(prog, {x: xv, wg: wgv, wu: wuv}, [z])[7]
    from gpu_testlib import relerr
    assert np.all(np.isfinite(out)) and relerr(out, swiglu_ref(xv, wgv, wuv, dtype)) < TOL[dtype]


@pytest.mark.parametrize("case", ["conv1x1", "matmul"])
def test_genstats_host_emulation(case, monkeypatch):
    """The GEMM's statistics contract (rounded stored values summed per channel) feeding the
    batchnorm's finalize and apply, on the host."""
    monkeypatch.setenv("HIPDNN_CABI_HIP_CONV_IM2COL", "0")     # the prelude's real k
    dtype = "HALF"
    if case == "conv1x1":
        ts, nodes, x, w, y, (sc, bi), (mu, iv, out) = convbn_graph(2, 16, 5, 24, dtype, ksize=1)
        xv = quantize(rnd(x.dims, "FLOAT") + 0.5, dtype)
        wv = rnd(w.dims, dtype, 0.25)
        yq, axes = quantize(_conv_ref(xv, wv, 0), dtype), (0, 2, 3)
        ins = {x: xv, w: wv}
    else:
        ts, nodes, x, w, (sc, bi), (mu, iv, out) = mmbn_graph(37, 16, 24, dtype)
        xv = quantize(rnd(x.dims, "FLOAT") + 0.5, dtype)
        wv = rnd(w.dims, dtype, 0.25)
        yq, axes = quantize(xv @ wv, dtype), (0,)
        ins = {x: xv, w: wv}
    prog = _prog(ts, nodes, arch="sm_90a")
    assert not STATS & {s[2] for s in _launches(prog)}
    scv, biv = rnd(sc.dims, "FLOAT"), rnd(bi.dims, "FLOAT")
    ins.update({sc: scv, bi: biv})
    res = _run_host(prog, ins, [mu, iv, out])
    m, ivv, o = bn_ref(yq, axes, scv, biv, dtype)
    from gpu_testlib import relerr
    assert relerr(res[8], m) < 1e-5 and relerr(res[9], ivv) < 1e-4
    assert relerr(res[10], o) < TOL[dtype]


@pytest.mark.parametrize("avg", [False, True])
def test_genstats_reductions_host_emulation(avg, monkeypatch):
    monkeypatch.setenv("HIPDNN_CABI_HIP_CONV_IM2COL", "0")     # the prelude's real k
    ts, nodes, x, w, y, s, q = convred_graph(2, 16, 5, 24, avg=avg)
    prog = _prog(ts, nodes, arch="sm_90a")
    assert "hdn_genstats_out_u0" in [st[2] for st in _launches(prog)]
    xv = quantize(rnd(x.dims, "FLOAT") + 0.5, "HALF")
    wv = rnd(w.dims, "HALF", 0.1)
    res = _run_host(prog, {x: xv, w: wv}, [y, s, q])
    yq = quantize(_conv_ref(xv, wv, 1), "HALF")
    red = np.mean if avg else np.sum
    from gpu_testlib import relerr
    assert relerr(res[3], yq) < TOL["HALF"]
    assert relerr(res[4], red(res[3], axis=(0, 2, 3), keepdims=True)) < 1e-6
    assert relerr(res[6], red(res[3] ** 2, axis=(0, 2, 3), keepdims=True)) < 1e-6


# ---------------------------------------------------------------- CI: NVRTC sm_90a, no spills
_compiler = nvrtc_or_skip


def _compile_clean(c, src, name):
    c.compile(src, f"{name}.hip", ("--ptxas-options=-v",), "sm_90a", codegen.headers())
    assert " 0 bytes spill stores" in c.last_log, (name, c.last_log)
    assert "C7514" not in c.last_log and "C7508" not in c.last_log, (name, c.last_log)


def test_new_sources_compile_sm90a_without_spills(monkeypatch):
    c = _compiler()
    for tile in ("", "128x256"):
        monkeypatch.setenv("HIPDNN_CABI_HIP_TILE", tile)
        for kmajor in (False, True):
            ts, nodes, *_ = swiglu_graph(129, 64, 200, "BFLOAT16", kmajor)
            s = _launches(_prog(ts, nodes, arch="sm_90a"))[0]
            _compile_clean(c, s[1], f"pair_{tile}_{kmajor}")
    monkeypatch.setenv("HIPDNN_CABI_HIP_TILE", "")
    for tstore in ("0", "1"):
        monkeypatch.setenv("HIPDNN_CABI_HIP_TMA_STORE", tstore)
        # ResNet-50 conv2 3 x 3 (the bench row), the 1 x 1 expand (64 -> 256), a 2-D matmul
        for k, (ts, nodes) in enumerate([convbn_graph(32, 64, 56, 64, "HALF")[:2],
                                         convbn_graph(32, 64, 56, 256, "BFLOAT16", ksize=1)[:2],
                                         mmbn_graph(8192, 1024, 1024)[:2]]):
            s = [x for x in _launches(_prog(ts, nodes, arch="sm_90a")) if x[2] == "hdn_gemm_wgmma"][0]
            assert "#define WG_STATS 1" in s[1]
            if k == 0:
                assert ("#define WG_TMA_STORE 1" in s[1]) == (tstore == "1")
            _compile_clean(c, s[1], f"stats_{tstore}_{k}")


# ---------------------------------------------------------------- GPU
def _check(out, ref, dtype, what):
    from gpu_testlib import relerr
    assert np.all(np.isfinite(out)), f"{what}: non-finite / unwritten output"
    e = relerr(out, ref)
    assert e < TOL[dtype], f"{what}: rel err {e:.3g}"


SWIGLU = [  # M, K, F, tile
    (37, 64, 96, ""),           # odd M (one partial tile), F: one tile and a half
    (129, 40, 200, ""),         # K tail (40), F % 64 != 0, two row tiles
    (67, 128, 100, ""),         # F % 8 != 0: the element-store epilogue (K-major B; N-major: unfused)
    (200, 64, 300, "128x256"),  # 256-wide tiles (128 + 128 columns per pair)
]


@pytest.mark.gpu
@pytest.mark.parametrize("kmajor", [False, True])
@pytest.mark.parametrize("dtype", ["HALF", "BFLOAT16"])
@pytest.mark.parametrize("case", range(len(SWIGLU)))
def test_swiglu_gpu(R, case, dtype, kmajor, monkeypatch):
    M, K, F, tile = SWIGLU[case]
    if kmajor and K % 8:
        pytest.skip("K-major B needs 16-byte rows")
    monkeypatch.setenv("HIPDNN_CABI_HIP_TILE", tile)
    ts, nodes, x, wg, wu, z = swiglu_graph(M, K, F, dtype, kmajor)
    g = graph_bytes(ts, nodes)
    # N-major B with F % 8 != 0: rows the copy engine cannot load - the unfused plan (checked too)
    assert any("paired GEMM" in n for n in plan_notes(g)) == (kmajor or F % 8 == 0)
    xv, wgv, wuv = rnd(x.dims, dtype), rnd(wg.dims, dtype, K ** -0.5), rnd(wu.dims, dtype, K ** -0.5)
    out = R.run(g, {x: xv, wg: wgv, wu: wuv}, [z])[7]
    _check(out, swiglu_ref(xv, wgv, wuv, dtype), dtype, f"swiglu {SWIGLU[case]} {dtype} kmajor={kmajor}")


def _conv_ref(xv, wv, p):
    return kconv.conv_fwd(xv, wv, [p, p], [p, p], [1, 1], [1, 1], compute_dtype=np.float64)


CONVBN = [  # N, C, H, K, ksize, TMA store knob
    (3, 16, 7, 24, 3, ""),      # M = 147 (tail), K = 24: a partial channel tile
    (2, 64, 9, 64, 1, "1"),     # 1 x 1, TMA-store epilogue
    (2, 64, 9, 64, 1, "0"),     # the same on the register epilogue
    (1, 32, 11, 136, 3, "0"),   # odd M = 121, N = 136 (a partial 64-column block)
    (32, 64, 28, 64, 1, ""),    # 196 tiles > the SMs: CTAs sum several units before flushing
    (32, 64, 28, 64, 1, "0"),
]


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["HALF", "BFLOAT16"])
@pytest.mark.parametrize("case", range(len(CONVBN)))
def test_genstats_conv_bn_gpu(R, case, dtype, monkeypatch):
    N, C, H, K, ks, tstore = CONVBN[case]
    monkeypatch.setenv("HIPDNN_CABI_HIP_TMA_STORE", tstore or "auto")
    ts, nodes, x, w, y, (sc, bi), (mu, iv, out) = convbn_graph(N, C, H, K, dtype, "nhwc", ksize=ks)
    g = graph_bytes(ts, nodes)
    assert any("no statistics pass" in n for n in plan_notes(g))
    xv = quantize(rnd(x.dims, "FLOAT") + 0.5, dtype)      # channel means away from 0
    wv = rnd(w.dims, dtype, (C * ks * ks) ** -0.5)
    scv, biv = rnd(sc.dims, "FLOAT"), rnd(bi.dims, "FLOAT")
    res = R.run(g, {x: xv, w: wv, sc: scv, bi: biv}, [mu, iv, out])
    yq = quantize(_conv_ref(xv, wv, ks // 2), dtype)
    m, ivv, o = bn_ref(yq, (0, 2, 3), scv, biv, dtype)
    _check(res[8], m, dtype, "mean")
    _check(res[9], ivv, dtype, "inv_variance")
    _check(res[10], o, dtype, f"batchnorm out {CONVBN[case]} {dtype}")


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["HALF", "BFLOAT16"])
@pytest.mark.parametrize("y_virtual", [False, True])
def test_genstats_reductions_gpu(R, dtype, y_virtual):
    """The cuDNN peer's genstats spelling (sum(y), sum(y * y) per channel) from the epilogue."""
    N, C, H, K = 3, 16, 7, 24
    ts, nodes, x, w, y, s, q = convred_graph(N, C, H, K, dtype, y_virtual)
    g = graph_bytes(ts, nodes)
    assert any("per-channel reduction(s)" in n for n in plan_notes(g))
    xv = quantize(rnd(x.dims, "FLOAT") + 0.5, dtype)
    wv = rnd(w.dims, dtype, (9 * C) ** -0.5)
    outs = [s, q] if y_virtual else [y, s, q]
    res = R.run(g, {x: xv, w: wv}, outs)
    yq = quantize(_conv_ref(xv, wv, 1), dtype)
    if not y_virtual:
        _check(res[3], yq, dtype, "y")
    _check(res[4], yq.sum(axis=(0, 2, 3), keepdims=True), dtype, "sum")
    _check(res[6], (yq ** 2).sum(axis=(0, 2, 3), keepdims=True), dtype, "sum of squares")


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["HALF", "BFLOAT16"])
@pytest.mark.parametrize("shape", [(301, 64, 72), (19201, 64, 136)])
def test_genstats_matmul_bn_gpu(R, dtype, shape):
    """2-D matmul -> batchnorm over the columns; the second shape has 151 x 3 tiles: CTAs walk
    units of different columns (a flush per change)."""
    M, K, N = shape
    ts, nodes, a, b, (sc, bi), (mu, iv, out) = mmbn_graph(M, K, N, dtype)
    g = graph_bytes(ts, nodes)
    assert any("no statistics pass" in n for n in plan_notes(g))
    av, bv = quantize(rnd(a.dims, "FLOAT") + 0.5, dtype), rnd(b.dims, dtype, K ** -0.5)
    scv, biv = rnd(sc.dims, "FLOAT"), rnd(bi.dims, "FLOAT")
    res = R.run(g, {a: av, b: bv, sc: scv, bi: biv}, [mu, iv, out])
    yq = quantize(av @ bv, dtype)
    m, ivv, o = bn_ref(yq, (0,), scv, biv, dtype)
    _check(res[8], m, dtype, "mean")
    _check(res[9], ivv, dtype, "inv_variance")
    _check(res[10], o, dtype, f"batchnorm out matmul {dtype}")
