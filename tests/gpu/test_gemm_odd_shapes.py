"""GPU: matmul for any M, N, K and alignment against numpy float64 - the pad pre-pass
(layout.pad_matmul + kernels/pack.hip: unaligned operands copied into zero-padded 16-byte
aligned workspace rows, then the wgmma core with both operands on the tensor copy engine), the
unaligned-N epilogue (element stores, no TMA store), swap-AB for small M (gemm.swap_ab: C^T =
B^T A^T, with and without split-K), fused bias + ReLU / residual epilogues, batched and
broadcast-batch operands.  Every output starts poisoned (NaN): an element the stores miss fails
the finiteness check.  Shapes are small (odd M / N / K of 1, 7, 17, 4095, 4097 in mixes that
stay quick)."""
from __future__ import annotations

import functools

import numpy as np
import pytest

from gpu_testlib import TOL, T, graph_bytes, matmul, plan_notes, pw, quantize, quantized_normal, relerr

pytestmark = pytest.mark.gpu
rng = np.random.default_rng(50257)
rnd = functools.partial(quantized_normal, rng)
KNOBS = ("PAD", "SWAP_AB", "TILE", "SPLITK", "TMA", "TMA_STORE", "GEMM")


@pytest.fixture(autouse=True)
def _clean_knobs(monkeypatch):
    for k in KNOBS:
        monkeypatch.delenv("HIPDNN_CABI_HIP_" + k, raising=False)


def hopper(g):
    return any("wgmma core" in n for n in plan_notes(g))


def graph(M, N, K, dt, bt=False, batch=(), bbatch=None, epi="none"):
    """a [batch.., M, K] x b [bbatch.., K, N] (``bt``: b stored K-major, as [.., N, K]) -> y;
    ``epi``: "bias_relu" (y = relu(a @ b + bias[N])) or "residual" (y = a @ b + r[.., M, N])."""
    bb = list(batch) if bbatch is None else list(bbatch)
    a = T(1, list(batch) + [M, K], dt)
    bst = [K * N * int(np.prod(bb[i + 1:])) for i in range(len(bb))] + [1, K] if bt else None
    b = T(2, bb + [K, N], dt, strides=bst)
    cd = list(batch) + [M, N]
    y = T(6, cd, dt)
    if epi == "none":
        return graph_bytes([a, b, y], [matmul(1, 2, 6)]), a, b, None, y
    c = T(3, cd, "FLOAT", virtual=True)
    e = T(4, [1] * len(batch) + [1, N], dt) if epi == "bias_relu" else T(4, cd, dt)
    if epi == "bias_relu":
        v = T(5, cd, "FLOAT", virtual=True)
        g = graph_bytes([a, b, c, e, v, y], [matmul(1, 2, 3), pw("ADD", 3, 5, 4), pw("RELU_FWD", 5, 6)])
    else:
        g = graph_bytes([a, b, c, e, y], [matmul(1, 2, 3), pw("ADD", 3, 6, 4)])
    return g, a, b, e, y


def run_check(R, M, N, K, dt, bt=False, batch=(), bbatch=None, epi="none", want=()):
    g, a, b, e, y = graph(M, N, K, dt, bt, batch, bbatch, epi)
    ns = plan_notes(g)
    if any("wgmma core" in n for n in ns):        # Hopper: the path the test is about
        for w in want:
            assert any(w in n for n in ns), (w, ns)
    av, bv = rnd(a.dims, dt), rnd(b.dims, dt, K ** -0.5)
    ins = {a: av, b: bv}
    ref = np.matmul(av.astype(np.float64), bv.astype(np.float64))
    if e is not None:
        ev = rnd(e.dims, dt)
        ins[e] = ev
        ref = ref + ev
        if epi == "bias_relu":
            ref = np.maximum(ref, 0)
    out = R.run(g, ins, [y])[6]
    what = (M, N, K, dt, bt, batch, bbatch, epi)
    assert np.all(np.isfinite(out)), f"{what}: non-finite / unwritten output"
    err = relerr(out, quantize(ref, dt))
    assert err < TOL[dt], f"{what}: rel err {err:.3g}"
    return out, ns


ODD = [  # M, N, K, b stored K-major
    (1, 7, 17, False),
    (7, 17, 4095, False),
    (17, 4097, 64, True),
    (4097, 7, 33, False),
    (65, 4095, 129, True),
    (130, 1001, 515, False),
    (2049, 4095, 128, False),      # the model pads B (N odd): both operands on the copy engine
    (300, 1000, 4095, True),       # K odd, K-major B: both operands padded along k
]


@pytest.mark.parametrize("dt", ["BFLOAT16", "HALF"])
@pytest.mark.parametrize("case", range(len(ODD)))
def test_odd_shapes(R, dt, case):
    M, N, K, bt = ODD[case]
    want = ("pad pre-pass", "TMA AB") if case >= 6 else ()
    run_check(R, M, N, K, dt, bt, want=want)


@pytest.mark.parametrize("case", [0, 1, 3, 4, 5])
def test_odd_shapes_forced_pad(R, case, monkeypatch):
    """HIPDNN_CABI_HIP_PAD=1: the pack pre-pass for every unaligned operand, tiny ones too."""
    monkeypatch.setenv("HIPDNN_CABI_HIP_PAD", "1")
    M, N, K, bt = ODD[case]
    run_check(R, M, N, K, "BFLOAT16", bt, want=("pad pre-pass",))


EPI = [  # M, N, K, epilogue, knobs
    (300, 1001, 512, "bias_relu", {"PAD": "1"}),
    (33, 4095, 1000, "residual", {"PAD": "1"}),
    (16, 2048, 1024, "bias_relu", {"SWAP_AB": "1"}),
    (16, 2048, 1024, "residual", {"SWAP_AB": "1"}),
    (64, 1001, 777, "bias_relu", {"SWAP_AB": "1", "PAD": "1"}),
]


@pytest.mark.parametrize("case", range(len(EPI)))
def test_fused_epilogue(R, case, monkeypatch):
    M, N, K, epi, knobs = EPI[case]
    for k, v in knobs.items():
        monkeypatch.setenv("HIPDNN_CABI_HIP_" + k, v)
    want = (("pad pre-pass",) if "PAD" in knobs else ()) + (("swap-AB",) if "SWAP_AB" in knobs else ())
    run_check(R, M, N, K, "BFLOAT16", epi=epi, want=want)


BATCHED = [  # M, N, K, batch, b's batch, knobs
    (33, 1001, 260, (3,), None, {"PAD": "1"}),
    (33, 1001, 260, (3,), (1,), {"PAD": "1"}),            # broadcast b (one tensor map, batch 0)
    (16, 1024, 1024, (3,), (1,), {"SWAP_AB": "1"}),       # broadcast b, swapped: broadcast A'
    (16, 1024, 1024, (3,), (), {"SWAP_AB": "1"}),         # b of rank 2 against a batched a
    (16, 1024, 1032, (2, 2), None, {"SWAP_AB": "1"}),     # swap-AB over two batch dims
    (7, 777, 515, (2,), None, {"SWAP_AB": "1", "PAD": "1"}),
]


@pytest.mark.parametrize("case", range(len(BATCHED)))
def test_batched(R, case, monkeypatch):
    M, N, K, batch, bbatch, knobs = BATCHED[case]
    for k, v in knobs.items():
        monkeypatch.setenv("HIPDNN_CABI_HIP_" + k, v)
    want = (("swap-AB",) if "SWAP_AB" in knobs else ()) + (("TMA AB",) if "PAD" in knobs or "SWAP_AB" in knobs else ())
    run_check(R, M, N, K, "HALF", batch=batch, bbatch=bbatch, want=want)


@pytest.mark.parametrize("M", [1, 16, 64])
@pytest.mark.parametrize("swap", ["auto", "0", "1"])
def test_small_m(R, M, swap, monkeypatch):
    """Decode shapes (M = 1 / 16 / 64, N = 2048, K = 4096): the cost model's orientation and
    both forced ones agree with float64; a second run gives the same bits (split-K partials
    summed in a fixed order)."""
    if swap != "auto":
        monkeypatch.setenv("HIPDNN_CABI_HIP_SWAP_AB", swap)
    want = ("swap-AB",) if swap == "1" else ()
    out, ns = run_check(R, M, 2048, 4096, "BFLOAT16", want=want)
    if swap == "0":
        assert not any("swap-AB" in n for n in ns)
    g, a, b, _, y = graph(M, 2048, 4096, "BFLOAT16")
    av, bv = rnd(a.dims, "BFLOAT16"), rnd(b.dims, "BFLOAT16", 4096 ** -0.5)
    o1 = R.run(g, {a: av, b: bv}, [y])[6]
    o2 = R.run(g, {a: av, b: bv}, [y])[6]
    assert np.array_equal(o1, o2)


def test_decode_benchmark_shapes_take_swap_ab(R):
    """The model's choice on this device for the decode rows of bench/gpu_bench.py (plan only;
    M = 16 x N = 4096 x K = 4096 also runs against float64)."""
    g = graph(16, 4096, 4096, "BFLOAT16")[0]
    if not hopper(g):
        pytest.skip("not a Hopper device")
    assert any("swap-AB" in n for n in plan_notes(g))
    run_check(R, 16, 4096, 4096, "BFLOAT16", want=("swap-AB",))


@pytest.mark.parametrize("bt", [False, True])
def test_tf32_pads_along_k(R, bt, monkeypatch):
    """fp32 with TF32 on (K-major-only wgmma type): an M-major / N-major operand with K % 8 != 0
    is padded along k (strided reads in the pack kernel) instead of the unpadded K-major copy."""
    monkeypatch.setenv("HIPDNN_CABI_HIP_TF32", "1")
    monkeypatch.setenv("HIPDNN_CABI_HIP_PAD", "1")
    M, N, K = 130, 200, 515
    a = T(1, [2, M, K], "FLOAT", strides=[M * K, 1, M])          # M-major a
    b = T(2, [2, K, N], "FLOAT", strides=[K * N, 1, K] if bt else [K * N, N, 1])
    y = T(3, [2, M, N], "FLOAT")
    g = graph_bytes([a, b, y], [matmul(1, 2, 3)])
    ns = plan_notes(g)
    if any("wgmma core" in n for n in ns):
        assert len([n for n in ns if "pad pre-pass" in n]) == 2, ns
    av, bv = quantize(rng.standard_normal(a.dims), "FLOAT"), quantize(rng.standard_normal(b.dims), "FLOAT")
    out = R.run(g, {a: av, b: bv}, [y])[3]
    ref = np.matmul(av.astype(np.float64), bv.astype(np.float64))
    assert np.all(np.isfinite(out)) and relerr(out, ref) < 5e-3


@pytest.mark.parametrize("dtype", ["FP8_E4M3", "FP8_E5M2"])
def test_fp8_pads_along_k(R, dtype, monkeypatch):
    """fp8 (16-element chunks): K = 200 (a multiple of 8, not of 16) pads both operands to 208."""
    monkeypatch.setenv("HIPDNN_CABI_HIP_PAD", "1")
    M, N, K = 130, 72, 200
    a, b, y = T(1, [M, K], dtype), T(2, [K, N], dtype, strides=[1, K]), T(3, [M, N], "HALF")
    g = graph_bytes([a, b, y], [matmul(1, 2, 3)])
    ns = plan_notes(g)
    if any("wgmma core" in n for n in ns):
        assert len([n for n in ns if "200 -> 208" in n]) == 2, ns
    av, bv = quantize(rng.standard_normal(a.dims), dtype), quantize(rng.standard_normal(b.dims), dtype)
    out = R.run(g, {a: av, b: bv}, [y])[3]
    ref = np.matmul(av.astype(np.float64), bv.astype(np.float64))
    assert np.all(np.isfinite(out)) and relerr(out, quantize(ref, "HALF")) < 4e-3
