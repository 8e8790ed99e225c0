"""CI (no GPU): matmul plans for any M, N, K and alignment on the Hopper wgmma core.

* the pad pre-pass (layout.pad_matmul, kernels/pack.hip): an operand whose rows are not
  16-byte aligned (odd N or K, odd row strides) is copied into a zero-padded workspace buffer
  when the cost model (gemm_core.pad_choice) says so, and the GEMM then loads both operands with
  the tensor copy engine; the copy is counted in the workspace size; knob PAD=0 / 1;
* swap-AB for small M (gemm.swap_ab, gemm_core.swap_ab_choice): decode shapes run as
  C^T = B^T A^T so N fills the 128-row side of the tile; knob SWAP_AB=0 / 1;
* both on the host (host_emu: the pack kernel as it is, the GEMM's generated gathers and
  epilogue under a serial loop, the split-K finish as it is) against float64 numpy, with fused
  bias + ReLU and broadcast batches.
"""
from __future__ import annotations

import re

import numpy as np
import pytest

from engine_plugins.hip_kernels import gemm_core as gc
from engine_plugins.hip_kernels.program import build_program
from hipdnn_cabi.plugin_sdk import parse_graph

import host_emu
from gpu_testlib import TOL, T, graph_bytes, matmul, pw, quantize, quantized_normal, relerr

rng = np.random.default_rng(4097)
KNOBS = ("PAD", "SWAP_AB", "TILE", "SPLITK", "TMA", "TMA_STORE", "GEMM", "SPLITK_FIXUP")


@pytest.fixture(autouse=True)
def _clean_knobs(monkeypatch):
    for k in KNOBS:
        monkeypatch.delenv("HIPDNN_CABI_HIP_" + k, raising=False)


def mm_graph(M, N, K, dt="BFLOAT16", bt=False, batch=(), bbatch=None, epi=False):
    """a [batch.., M, K] x b [bbatch.., K, N] (``bt``: b stored K-major, i.e. as [N, K]) -> c;
    ``epi``: True / "bias_relu": c = relu(a @ b + bias[N]), "residual": c = a @ b + r[.., M, N],
    through a fused pointwise run."""
    bb = list(batch) if bbatch is None else list(bbatch)
    a = T(1, list(batch) + [M, K], dt)
    bst = None
    if bt:
        bst = [K * N * int(np.prod(bb[i + 1:])) for i in range(len(bb))] + [1, K]
    b = T(2, bb + [K, N], dt, strides=bst)
    cd = list(batch) + [M, N]
    y = T(6, cd, dt)
    if not epi:
        return graph_bytes([a, b, y], [matmul(1, 2, 6)]), a, b, None, y
    c = T(3, cd, "FLOAT", virtual=True)
    if epi == "residual":       # y = a @ b + r[.., M, N]
        e = T(4, cd, dt)
        return graph_bytes([a, b, c, e, y], [matmul(1, 2, 3), pw("ADD", 3, 6, 4)]), a, b, e, y
    e = T(4, [1] * len(batch) + [1, N], dt)
    v = T(5, cd, "FLOAT", virtual=True)
    g = graph_bytes([a, b, c, e, v, y], [matmul(1, 2, 3), pw("ADD", 3, 5, 4), pw("RELU_FWD", 5, 6)])
    return g, a, b, e, y


def plan(g, sms=132):
    return build_program(parse_graph(g), use_mma=True, sms=sms, arch="sm_90")


def gemm_src(prog):
    return [s for s in prog.steps if s[0] == "launch" and s[2] == "hdn_gemm_wgmma"][0][1]


def _first_defs(src):
    out = {}
    for k, v in re.findall(r"#define (\w+) (\S+)", src):
        out.setdefault(k, v)
    return out


# ---------------------------------------------------------------- plan choices
@pytest.mark.parametrize("shape", [(4097, 4095, 4096), (4096, 50257, 4096), (300, 1001, 512)])
def test_unaligned_n_pads_b_and_loads_both_with_tma(shape):
    M, N, K = shape
    prog = plan(mm_graph(M, N, K)[0])
    pads = [n for n in prog.notes if n.startswith("pad pre-pass")]
    assert len(pads) == 1 and "tensor 2" in pads[0], prog.notes
    assert any("TMA AB" in n for n in prog.notes), prog.notes
    d = _first_defs(gemm_src(prog))
    assert (d["A_TMA"], d["B_TMA"], d["B_MODE"], d["GN"]) == ("1", "1", "2", str(N))
    P = -(-N // 8) * 8
    assert prog.ws_size >= K * P * 2            # the padded copy is in the workspace size
    steps = [s[2] for s in prog.steps if s[0] == "launch"]
    assert steps[0] == "hdn_pack" and "hdn_gemm_wgmma" in steps
    pk = _first_defs([s for s in prog.steps if s[0] == "launch" and s[2] == "hdn_pack"][0][1])
    assert (pk["PK_R"], pk["PK_C"], pk["PK_CP"]) == (str(K), str(N), str(P))


def test_unaligned_k_pads_both_operands_k_major():
    """K odd: A [M, K] and a K-major B [N, K] both padded along k (the zero k tail)."""
    prog = plan(mm_graph(2048, 2048, 4095, bt=True)[0])
    pads = [n for n in prog.notes if n.startswith("pad pre-pass")]
    assert len(pads) == 2 and all("4095 -> 4096" in p for p in pads), prog.notes
    d = _first_defs(gemm_src(prog))
    assert (d["A_MODE"], d["B_MODE"], d["A_TMA"], d["B_TMA"]) == ("1", "1", "1", "1")


def test_aligned_and_tiny_gemms_unchanged():
    """Aligned operands never copy; a tiny unaligned GEMM keeps the element gathers (the copy's
    launch costs more than it saves)."""
    prog = plan(mm_graph(4096, 4096, 4096)[0])
    assert not any("pad pre-pass" in n or "swap-AB" in n for n in prog.notes), prog.notes
    prog = plan(mm_graph(7, 17, 5)[0])
    assert not any("pad pre-pass" in n for n in prog.notes), prog.notes


def test_pad_knob(monkeypatch):
    monkeypatch.setenv("HIPDNN_CABI_HIP_PAD", "0")
    prog = plan(mm_graph(4097, 4095, 4096)[0])
    assert not any("pad pre-pass" in n for n in prog.notes)
    assert _first_defs(gemm_src(prog))["B_MODE"] == "0"
    monkeypatch.setenv("HIPDNN_CABI_HIP_PAD", "1")
    prog = plan(mm_graph(7, 17, 5)[0])
    assert len([n for n in prog.notes if "pad pre-pass" in n]) == 2


@pytest.mark.parametrize("M", [1, 16])
@pytest.mark.parametrize("N", [4096, 12288])
def test_decode_shapes_swap_ab(M, N):
    prog = plan(mm_graph(M, N, 4096)[0])
    assert any("swap-AB" in n for n in prog.notes), prog.notes
    d = _first_defs(gemm_src(prog))
    # N on the 128-row side: A' = B (N-major -> M-major mode 2), B' = A (K-major)
    assert (d["GM"], d["GN"], d["A_MODE"], d["B_MODE"]) == (str(N), str(M), "2", "1")
    assert d["C_VEC"] == "0" and d["WG_TMA_STORE"] == "0"


def test_matmul_split_k_summed_in_the_gemm_kernel(monkeypatch):
    """Matmul split-K on the wgmma core with knob SPLITK_FIXUP=1: no finish kernel - the GEMM
    kernel's last part of each tile sums the partials (WG_FIXUP) with per-tile counters in the
    plan's scratch; by default (measured faster on an H100) the finish kernel sums them;
    convolution split-K keeps it."""
    monkeypatch.setenv("HIPDNN_CABI_HIP_SPLITK_FIXUP", "1")
    prog = plan(mm_graph(16, 4096, 4096)[0])
    launches = [s for s in prog.steps if s[0] == "launch"]
    assert [s[2] for s in launches] == ["hdn_gemm_wgmma"], prog.notes
    assert "#define WG_FIXUP 1" in launches[0][1]
    d = _first_defs(launches[0][1])
    S = int(d["GSPLIT"])
    assert S > 1 and any(f"split-K x{S}, summed in the GEMM kernel" in n for n in prog.notes)
    args = launches[0][5]
    tiles = -(-int(d["GM"]) // 128) * -(-int(d["GN"]) // int(d["WG_BN"]))
    assert args[-2][0] == "sc" and prog.scratch_size >= 4 * tiles      # counters: plan scratch
    assert args[-3][0] == "ws" and prog.ws_size >= 4 * S * int(d["GM"]) * int(d["GN"])
    monkeypatch.delenv("HIPDNN_CABI_HIP_SPLITK_FIXUP")
    prog = plan(mm_graph(16, 4096, 4096)[0])
    assert [s[2] for s in prog.steps if s[0] == "launch"] == ["hdn_gemm_wgmma", "hdn_gemm_splitk"]
    assert "#define WG_FIXUP 1" not in prog.steps[0][1]


def test_scratch_starts_zeroed(monkeypatch):
    """The plan's scratch is zeroed when the plan is made (the fixup counters reset themselves
    after every launch, so they must start at 0)."""
    from engine_plugins.hip_kernels import engine

    class Rt:
        device = 0

        def __init__(self):
            self.calls = []

        def malloc(self, n):
            self.calls.append(("malloc", n))
            return 4096

        def memset(self, p, v, n, stream=0):
            self.calls.append(("memset", p, v, n))

        def synchronize(self):
            self.calls.append(("sync",))

    rt = Rt()
    monkeypatch.setenv("HIPDNN_CABI_HIP_SPLITK_FIXUP", "1")     # the fixup counters: scratch
    prog = plan(mm_graph(16, 4096, 4096)[0])
    prog.steps = []
    orig = engine.device.get_runtime
    engine.device.get_runtime = lambda: rt
    try:
        engine.GpuPlan(prog)
    finally:
        engine.device.get_runtime = orig
    assert ("memset", 4096, 0, prog.scratch_size) in rt.calls and rt.calls[-1] == ("sync",)


def test_swap_ab_model_and_knob(monkeypatch):
    # big M never swaps, nor M = 128 (a full tile either way); M = 64 x N = 4096 swaps (measured)
    assert not gc.swap_ab_choice(4096, 4096, 4096, 1, 132, 2)
    assert not gc.swap_ab_choice(128, 4096, 4096, 1, 132, 2)
    assert gc.swap_ab_choice(64, 4096, 4096, 1, 132, 2)
    assert gc.swap_ab_choice(16, 4096, 4096, 1, 132, 2)
    monkeypatch.setenv("HIPDNN_CABI_HIP_SWAP_AB", "0")
    prog = plan(mm_graph(16, 4096, 4096)[0])
    assert not any("swap-AB" in n for n in prog.notes)
    monkeypatch.setenv("HIPDNN_CABI_HIP_SWAP_AB", "1")
    prog = plan(mm_graph(200, 256, 512)[0])
    assert any("swap-AB" in n for n in prog.notes)


def test_broadcast_operand_on_one_tensor_map(monkeypatch):
    """A b shared by every batch index (batch stride 0) loads through a single-matrix tensor map
    read at batch coordinate 0 (WG_B_BATCH), also as the swapped GEMM's A."""
    prog = plan(mm_graph(300, 256, 512, batch=(3,), bbatch=(1,))[0])
    src = gemm_src(prog)
    assert "#define WG_B_BATCH(b) 0" in src and any("TMA AB" in n for n in prog.notes), prog.notes
    tm = [a for s in prog.steps if s[0] == "launch" for a in s[5] if a[0] == "tmap"]
    assert tm[1][3] == (256, 512, 1) and tm[0][3] == (512, 300, 3), tm
    monkeypatch.setenv("HIPDNN_CABI_HIP_SWAP_AB", "1")
    prog = plan(mm_graph(16, 1024, 1024, batch=(3,), bbatch=())[0])
    assert "#define WG_A_BATCH(b) 0" in gemm_src(prog) and any("swap-AB" in n for n in prog.notes)


def test_swap_ab_needs_copy_engine_operands(monkeypatch):
    """An operand the producer gathers (odd N, no pad) keeps the plain orientation."""
    monkeypatch.setenv("HIPDNN_CABI_HIP_PAD", "0")
    prog = plan(mm_graph(16, 4095, 4096)[0])
    assert not any("swap-AB" in n for n in prog.notes), prog.notes


# ---------------------------------------------------------------- host emulation
HOST = [  # M, N, K, bt, batch, bbatch, epi, knobs
    (7, 17, 33, False, (), None, False, {"PAD": "1"}),           # pad both, odd everything
    (5, 130, 41, True, (), None, True, {"PAD": "1"}),            # K-major B padded, bias + relu
    (16, 200, 72, False, (), None, True, {"SWAP_AB": "1"}),      # swap-AB + fused epilogue
    (3, 75, 1032, False, (2,), None, False, {"SWAP_AB": "1", "PAD": "1"}),  # batched swap, split-K
    (3, 75, 136, False, (2,), (1,), True, {"PAD": "1"}),         # broadcast b (gathered), bias + relu
    (16, 200, 72, True, (), None, "residual", {"SWAP_AB": "1"}),  # swap-AB + residual read at (m, n)
    (5, 136, 264, False, (2, 2), None, False, {"SWAP_AB": "1"}),  # swap-AB over two batch dims
    (6, 136, 264, False, (3,), (1,), True, {"SWAP_AB": "1"}),   # swap-AB, broadcast b
    (9, 31, 19, True, (3,), None, False, {"PAD": "1"}),          # batched, odd K, K-major B
]


@pytest.mark.skipif(host_emu.compiler() is None, reason="no host C++ compiler")
@pytest.mark.parametrize("case", range(len(HOST)))
def test_odd_matmul_on_host(case, monkeypatch):
    import test_host_emulation as the
    real = the.build_program

    def host_steps(*args, **kw):
        # the serial GEMM runs the prelude's gathers: the tensor-map arguments are the device's;
        # a split-K GEMM summed in the kernel (WG_FIXUP: GPU-only code) runs as one part
        prog = real(*args, **kw)
        steps = []
        for s in prog.steps:
            if s[0] == "launch":
                src, argv = s[1], [a for a in s[5] if a[0] != "tmap"]
                if "#define WG_FIXUP 1" in src:
                    src = re.sub(r"#define GSPLIT \d+", "#define GSPLIT 1", src.replace("#define WG_FIXUP 1", ""))
                    argv = argv[:2] + argv[4:]
                s = (s[0], src) + s[2:5] + (argv,) + s[6:]
            steps.append(s)
        prog.steps = steps
        return prog
    monkeypatch.setattr(the, "build_program", host_steps)
    run_host = the.run_host
    M, N, K, bt, batch, bbatch, epi, knobs = HOST[case]
    for k, v in knobs.items():
        monkeypatch.setenv("HIPDNN_CABI_HIP_" + k, v)
    dt = "HALF"
    g, a, b, e, y = mm_graph(M, N, K, dt, bt, batch, bbatch, epi)
    av = quantized_normal(rng, a.dims, dt)
    bv = quantized_normal(rng, b.dims, dt, K ** -0.5)
    ins = {a: av, b: bv}
    ref = np.matmul(av.astype(np.float64), bv.astype(np.float64))
    if e is not None:
        ev = quantized_normal(rng, e.dims, dt)
        ins[e] = ev
        ref = ref + ev if epi == "residual" else np.maximum(ref + ev, 0)
    progs = []
    out = run_host(g, ins, [y], arch="sm_90", prog_out=progs)[0][6]
    notes = progs[0].notes
    if knobs.get("PAD") == "1":
        assert any("pad pre-pass" in n for n in notes), notes
    if knobs.get("SWAP_AB") == "1":
        assert any("swap-AB" in n for n in notes), notes
    if case == 3:
        assert any("split-K" in n for n in notes), notes
    assert np.all(np.isfinite(out))
    err = relerr(out, quantize(ref, dt))
    assert err < TOL[dt], (HOST[case], err)


@pytest.mark.skipif(host_emu.compiler() is None, reason="no host C++ compiler")
def test_pack_kernel_zero_fills_padding(monkeypatch):
    """kernels/pack.hip on the host: rows copied, the padding columns zero (the workspace
    starts as 0xFF bytes)."""
    from engine_plugins.hip_kernels import codegen
    monkeypatch.setenv("HIPDNN_CABI_HIP_PAD", "1")
    prog = plan(mm_graph(3, 13, 11, "HALF", bt=True)[0])
    packs = [s for s in prog.steps if s[0] == "launch" and s[2] == "hdn_pack"]
    assert len(packs) == 2
    mem = host_emu.HostMem()
    x = (np.arange(13 * 11, dtype=np.uint16) + 1).reshape(13, 11)      # b stored as [N, K]
    xp, xraw = mem.alloc(x.nbytes)
    xraw[:] = x.view(np.uint8).ravel()
    yp, yraw = mem.alloc(13 * 16 * 2)
    st = packs[1]
    host_emu.run_kernel(st[1], st[2], st[3], st[4], [xp, yp], codegen.headers())
    y = yraw.view(np.uint16).reshape(13, 16)
    assert np.array_equal(y[:, :11], x) and not y[:, 11:].any()


def test_swapped_decode_split_only_up_to_16_columns():
    """Swap-AB decode GEMMs split K only while the original M is at most 16 (measured on an H100:
    M = 1 / 16 faster split, M = 64 faster unsplit); a forced split count still applies."""
    for M, split in ((1, True), (16, True), (64, False)):
        prog = plan(mm_graph(M, 4096, 4096)[0])
        assert any("swap-AB" in n for n in prog.notes), prog.notes
        assert any("split-K" in n for n in prog.notes) == split, (M, prog.notes)
    assert gc.swapped_split_ok(16) and not gc.swapped_split_ok(64)
