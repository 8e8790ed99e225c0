"""Applicability parity between the HIP engine and the CPU reference engine over the parity
corpus (tests/gpu/parity_corpus.py: over 2,000 graphs, every operation family).

CI (no GPU): for every graph the CPU reference accepts, the HIP engine's analysis (what
``is_applicable`` runs once a device is present, here with a Hopper target) accepts it too, or
declines it with a reason matched by an entry of the documented decline list (docs/gpu.md,
"Decline list").  Every list entry is still needed by some corpus graph or names a documented
limit outside the corpus.

GPU (``-m gpu``): a deterministic subset of the graphs both engines accept runs on both (same
inputs; runtime pass-by-value scalars bound as host pointers) and the outputs agree within the
data type's tolerance.  HIPDNN_CABI_PARITY_GPU_CASES sets the subset size (default
GPU_CASES = 300; ``all``: every accepted graph).  Under ``--cpu-stand-in`` the same test runs
with the CPU reference on both sides (host memory), which checks the harness, not the kernels.
"""
from __future__ import annotations

import os
import re
import time
import types

import numpy as np
import pytest

from engine_plugins.cpu_reference import engine as cpu_engine
from engine_plugins.hip_kernels import program as gp
from hipdnn_cabi.plugin_sdk import parse_graph
from hipdnn_cabi.schemas import catalog

from parity_corpus import FAMILY_BUILDERS, corpus, gpu_subset

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DOC = os.path.join(ROOT, "docs", "gpu.md")


def decline_list():
    """[(compiled pattern, why)] from the table between the decline-list markers of docs/gpu.md."""
    text = open(DOC, encoding="utf-8").read()
    m = re.search(r"<!-- decline-list:begin -->(.*?)<!-- decline-list:end -->", text, re.S)
    assert m, "docs/gpu.md has no decline list"
    out = []
    for line in m.group(1).splitlines():
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip().strip("|"))]
        if len(cells) < 2 or not cells[0].startswith("`"):
            continue
        out.append((re.compile(cells[0].strip("`").replace("\\|", "|")), cells[1]))
    return out


def cpu_analysis(g):
    cpu_engine._cache.clear()
    a = cpu_engine._analyse(g)
    return a.ok, a.reason


def gpu_analysis(g, arch="sm_90"):
    try:
        gp.build_program(g, use_mma=True, sms=132, arch=arch)
        return True, ""
    except gp.NotApplicable as e:
        return False, str(e)


CORPUS = corpus()


def _outcomes():
    out = []
    for c in CORPUS:
        cok, cwhy = cpu_analysis(parse_graph(c.graph))
        gok, gwhy = gpu_analysis(parse_graph(c.graph)) if cok else (False, "")
        out.append((c, cok, gok, gwhy))
    return out


@pytest.fixture(scope="module")
def outcomes():
    return _outcomes()


def test_corpus_size_and_families():
    assert len(CORPUS) >= 2000, len(CORPUS)
    fams = {c.family for c in CORPUS}
    engine_fams = {o.family for o in catalog.OPS if not o.not_applicable("hip_kernels")}
    assert engine_fams <= fams == set(FAMILY_BUILDERS), (engine_fams - fams)


def test_gpu_accepts_or_declines_with_a_documented_reason(outcomes):
    dl = decline_list()
    assert 0 < len(dl) <= 12, "the decline list is short"
    bad, used = [], set()
    for c, cok, gok, why in outcomes:
        if not cok or gok:
            continue
        hit = [i for i, (p, _) in enumerate(dl) if p.search(why)]
        if not hit:
            bad.append(f"{c.name}: {why}")
        used.update(hit)
    assert not bad, f"{len(bad)} CPU-accepted graphs declined for an undocumented reason:\n" + \
        "\n".join(bad[:40])
    # every documented entry is exercised (or marked as outside the corpus)
    unused = [dl[i][0].pattern for i in range(len(dl))
              if i not in used and "outside the corpus" not in dl[i][1]]
    assert not unused, f"decline-list entries no corpus graph needs: {unused}"


def test_every_family_runs_on_the_gpu_engine(outcomes):
    """Both engines accept graphs of every family (and most of the corpus)."""
    both = {c.family for c, cok, gok, _ in outcomes if cok and gok}
    assert both == set(FAMILY_BUILDERS), set(FAMILY_BUILDERS) - both
    n_cpu = sum(1 for _, cok, _, _ in outcomes if cok)
    n_both = sum(1 for _, cok, gok, _ in outcomes if cok and gok)
    assert n_both >= 0.7 * n_cpu, (n_both, n_cpu)


REQUIRED = [
    "bn/train/HALF/nchw/float/bv64/run",          # hipDNN's BnTraining sample, fp16
    "bn/train/HALF/nchw/mixed/bv64/run",          # mixed precision
    "bn/train/BFLOAT16/nhwc/mixed/rt32/run",      # runtime epsilon / momentum
    "bn/inf_var/HALF/nhwc/float/rt64",
    "bn/bwd/HALF/nchw/mixed",
    "bn/inf_tail/HALF/UNSET",                     # virtual tensors left UNSET
    "norms/ln_fwd/row/HALF/FLOAT/rt32",           # layernorm epsilon as a host scalar
    "norms/rms_fwd/4d/BFLOAT16/FLOAT/rt64",
    "norms/ln_bwd/row/FLOAT/data/rt32",
    "norms/ln_fwd/4d_nhwc/HALF/FLOAT/rt64",       # x / y not packed row-major: copies
    "norms/ln_bwd/row_pad/BFLOAT16/FLOAT/bv32",
    "pw/chain/HALF/UNSET/rt32",
    "pw/CMP_GT/HALF/outUNSET",                    # BOOLEAN output
    "pw/SELECT/BFLOAT16/maskUNSET",
    "pw/SWISH_BWD/HALF/bv64/p0",
    "pw/MUL/INT8",                                # 8-bit integers: exact, saturating
    "pw/int_chain/UINT8",
    "conv/fused/HALF/UNSET/rt32",
    "conv/fused/BFLOAT16/FLOAT/full/g8",          # depthwise + bias + relu epilogue
    "conv/fwd/g2/HALF>HALF/FLOAT/nhwc",           # grouped, every direction
    "conv/bwd_data/g2/FLOAT>FLOAT/FLOAT/nchw",
    "conv/bwd_filter/g2/BFLOAT16>BFLOAT16/FLOAT/pad",
    "conv/fwd/dw/FLOAT>FLOAT/FLOAT/nchw",         # depthwise, channel multiplier 2
    "conv/bwd_data/dw/HALF>HALF/UNSET/nhwc",
    "conv/bwd_filter/dw1d/HALF>HALF/FLOAT/nchw",
    "matmul/fused/BFLOAT16/UNSET",
    "matmul/2d/INT8>INT32/tn/INT32",              # integer tensor cores
    "matmul/bcast/INT8>FLOAT/nt/UNSET",
    "conv/fwd/3x3/INT8>INT32/INT32/nhwc",         # INT8 convolution: implicit GEMM, integer
    "conv/fwd/g2/INT8>INT8/UNSET/nchw",           # tensor cores, exact (INT8 saturated)
    "conv/fwd/dw/INT8>FLOAT/INT32/pad",
    "conv/bwd_data/g2/INT8>INT32/INT32/nhwc",     # INT8 gradients: the same kernel
    "conv/bwd_filter/3x3/INT8>INT8/UNSET/nchw",
    "pw/ADD/INT32",                               # 32-bit integers: double arithmetic
    "pw/ABS/DOUBLE>DOUBLE/p0/nchw",               # DOUBLE data in every family
    "reduction/ADD/last/DOUBLE>DOUBLE/FLOAT",
    "bn/inf/DOUBLE/nchw/data/FLOAT",
    "norms/ln_fwd/row/DOUBLE/data/bv32",
    "matmul/2d/DOUBLE>DOUBLE/nn/FLOAT",           # direct FP64 / FP32 kernels
    "conv/fwd/3x3/DOUBLE>DOUBLE/DOUBLE/nchw",
    "conv/fwd/c3/HALF>HALF/FLOAT/nchw",           # channel counts not multiples of 8: the
    "conv/bwd_data/c12/BFLOAT16>BFLOAT16/FLOAT/nchw",   # pad pre-pass on Hopper
    "conv/bwd_filter/c3/HALF>HALF/FLOAT/nchw",
    "conv/fwd/c12/BFLOAT16>BFLOAT16/UNSET/nhwc",
]
GPU_CASES = 300


@pytest.mark.parametrize("pattern", REQUIRED)
def test_required_graphs_accepted_by_both(pattern):
    c = next(c for c in CORPUS if c.name == pattern)
    assert cpu_analysis(parse_graph(c.graph))[0], pattern
    ok, why = gpu_analysis(parse_graph(c.graph))
    assert ok, f"{pattern}: {why}"
    ok, why = gpu_analysis(parse_graph(c.graph), arch=None)     # mma.sync / SIMT kernels
    assert ok, f"{pattern} (pre-Hopper): {why}"


def test_gpu_subset_is_deterministic_and_covers_every_family(outcomes):
    acc = [c for c, cok, gok, _ in outcomes if cok and gok]
    a, b = gpu_subset(acc, GPU_CASES, REQUIRED), gpu_subset(acc, GPU_CASES, REQUIRED)
    assert [c.name for c in a] == [c.name for c in b]
    assert GPU_CASES - 40 <= len(a) <= GPU_CASES + 40, len(a)
    assert {c.family for c in a} == set(FAMILY_BUILDERS)
    assert set(REQUIRED) <= {c.name for c in a}


# ------------------------------------------------------------------------------- GPU part
STORE = {"FLOAT": np.float32, "HALF": np.float16, "BFLOAT16": np.uint16, "DOUBLE": np.float64,
         "INT32": np.int32, "INT64": np.int64, "INT8": np.int8, "UINT8": np.uint8,
         "UNSET": np.uint8}
TOL = {"FLOAT": 1e-4, "HALF": 4e-3, "BFLOAT16": 2.5e-2, "DOUBLE": 1e-4}   # DOUBLE: FLOAT compute too
# graphs whose inputs must be positive (logarithms, roots, divisions, statistics)
POSITIVE = re.compile(r"LOG|SQRT|RSQRT|RECIPROCAL|DIV|^bn/|^norms/")


def _np(t):
    return STORE.get(t.dtype, np.uint8)


def _nbytes(t):
    return (1 + sum((d - 1) * s for d, s in zip(t.dims, t.strides))) * np.dtype(_np(t)).itemsize


def _bf16(x):
    u = np.asarray(x, np.float32).view(np.uint32)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def _fill(case, t, rng):
    n = _nbytes(t) // np.dtype(_np(t)).itemsize
    lo, hi = (0.25, 1.5) if POSITIVE.search(case.name) else (-1.5, 1.5)
    if t.dtype in ("FLOAT", "HALF", "DOUBLE"):
        return rng.uniform(lo, hi, n).astype(_np(t)).tobytes()
    if t.dtype == "BFLOAT16":
        return _bf16(rng.uniform(lo, hi, n)).tobytes()
    if t.dtype == "UNSET":
        return rng.integers(0, 2, n).astype(np.uint8).tobytes()
    if case.family == "moe" and t.dtype == "INT32":
        return b""          # routing tensors: _moe_routing
    if t.dtype == "FP8_E8M0":
        return rng.integers(120, 135, n).astype(np.uint8).tobytes()
    if t.dtype in ("INT8", "INT32", "INT64"):
        return rng.integers(-100, 100, n).astype(_np(t)).tobytes()
    # narrow floats, one element per byte: positive finite codes of the type's width
    top = 16 if t.dtype.startswith("FP4") else 64 if t.dtype.startswith("FP6") else 0x70
    return rng.integers(0, top, n).astype(np.uint8).tobytes()


def _moe_routing(case, g, inputs):
    """Valid MoE routing (the CPU reference checks it): first-token offsets spread over the
    routed rows, GATHER sources / SCATTER destinations in range and distinct."""
    a = g.nodes[0].attrs
    S = int(g.tensors[a["token_tensor_uid"]].dims[1])
    mode, top_k = int(a.get("mode", 0) or 0), int(a.get("top_k", 1) or 1)
    ti, tk = a.get("token_index_tensor_uid"), a.get("token_ks_tensor_uid")
    R = int(np.prod(g.tensors[ti].dims)) if ti is not None else S
    rows = R if mode == 1 else S
    G = int(g.tensors[a["first_token_offset_tensor_uid"]].dims[0])
    inputs[a["first_token_offset_tensor_uid"]] = np.array([i * rows // G for i in range(G)],
                                                          np.int32).tobytes()
    r = np.arange(R)
    if ti is not None:
        inputs[ti] = (r % S if mode == 1 else r // top_k).astype(np.int32).tobytes()
    if tk is not None:
        inputs[tk] = (r % top_k).astype(np.int32).tobytes()


def _as_float(t, raw):
    a = np.frombuffer(raw, _np(t))
    if t.dtype == "BFLOAT16":
        return (a.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    return a.astype(np.float64)


class _HostRuntime:
    """The few runtime calls _Both makes, on host memory (the CI self-check of the harness:
    the CPU reference engine on both sides)."""

    def __init__(self):
        self.bufs = {}

    def malloc(self, n):
        a = np.zeros(max(1, n), np.uint8)
        self.bufs[a.ctypes.data] = a
        return a.ctypes.data

    def free(self, p):
        self.bufs.pop(p, None)

    def memcpy_htod(self, dst, src, n):
        import ctypes
        ctypes.memmove(dst, src, n)

    memcpy_dtoh = memcpy_htod

    def memset(self, p, v, n, stream):
        import ctypes
        ctypes.memset(p, v, n)

    def synchronize(self):
        pass

    def stream_synchronize(self, s):
        pass

    def stream_create(self):
        return 0


class _Both:
    """One graph on the CPU reference (host buffers) and on a second engine (``device``: the
    HIP engine on the GPU; else the CPU reference again, on host memory)."""

    def __init__(self, device=True):
        from engine_plugins.cpu_reference import create_plugin as cpu_plugin
        from engine_plugins.cpu_reference.engine import ENGINE_NAME as CN
        from hipdnn_cabi.plugin_sdk import engine_id_of
        self.cpu = cpu_plugin().create_container()
        self.ccfg = types.SimpleNamespace(engine_id=engine_id_of(CN), knobs={})
        if device:
            from engine_plugins.hip_kernels import create_plugin as gpu_plugin
            from engine_plugins.hip_kernels.engine import ENGINE_NAME as GN
            from hipdnn_cabi import device as dev
            self.rt = dev.get_runtime()
            self.gpu = gpu_plugin().create_container()
            self.gcfg = types.SimpleNamespace(engine_id=engine_id_of(GN), knobs={})
        else:
            self.rt, self.gpu, self.gcfg = _HostRuntime(), cpu_plugin().create_container(), self.ccfg
        self.stream = self.rt.stream_create()
        if device:
            self.gpu.set_stream(self.stream)

    def run(self, case, rng):
        import cffi
        from hipdnn_cabi.plugin_sdk import DeviceBuffers
        g = parse_graph(case.graph)
        assert self.gpu.get_applicable_engine_ids(g) == [self.gcfg.engine_id], case.name
        outs = set()
        for n in g.nodes:
            outs.update(gp.io_uids(n, g)[1])
        bound = [t for t in case.tensors if not t.virtual and t.value is None and not t.runtime]
        inputs = {t.uid: _fill(case, t, rng) for t in bound if t.uid not in outs}
        if case.family == "moe":
            _moe_routing(case, g, inputs)
        keep, scal = [], {}
        for t in case.tensors:
            if t.runtime and t.value is None:
                a = np.array([case.scalars[t.uid]], _np(t) if t.dtype != "BFLOAT16" else np.float32)
                if t.dtype == "BFLOAT16":
                    a = _bf16(a)
                keep.append(a)
                scal[t.uid] = a.ctypes.data
        host = {t.uid: np.frombuffer(bytearray(inputs.get(t.uid, b"\xee" * _nbytes(t))), np.uint8)
                for t in bound}
        cctx = self.cpu.create_execution_context(self.ccfg, g)
        self.cpu.execute(cctx, 0, DeviceBuffers({**{u: a.ctypes.data for u, a in host.items()},
                                                 **scal}, ffi=cffi.FFI()))
        ptrs = {}
        for t in bound:
            p = self.rt.malloc(_nbytes(t))
            ptrs[t.uid] = p
            if t.uid in inputs:
                b = np.frombuffer(inputs[t.uid], np.uint8)
                self.rt.memcpy_htod(p, b.ctypes.data, b.nbytes)
            else:
                self.rt.memset(p, 0xEE, _nbytes(t), 0)
        self.rt.synchronize()
        gctx = self.gpu.create_execution_context(self.gcfg, g)
        wsz = self.gpu.get_workspace_size_from_context(gctx)
        ws = self.rt.malloc(wsz) if wsz else 0
        try:
            self.gpu.execute(gctx, ws, DeviceBuffers({**ptrs, **scal}, ffi=cffi.FFI()))
            self.rt.stream_synchronize(self.stream)
            res = {}
            for t in bound:
                if t.uid in outs:
                    h = np.empty(_nbytes(t), np.uint8)
                    self.rt.memcpy_dtoh(h.ctypes.data, ptrs[t.uid], h.nbytes)
                    res[t.uid] = (t, host[t.uid].tobytes(), h.tobytes())
        finally:
            for p in ptrs.values():
                self.rt.free(p)
            if ws:
                self.rt.free(ws)
        return res


def _compare(case, res):
    errs = []
    for uid, (t, cpu_b, gpu_b) in res.items():
        if t.dtype in TOL:
            # the elements the tensor addresses (padded layouts leave gaps the engines skip)
            c, g = _as_float(t, cpu_b), _as_float(t, gpu_b)
            idx = _element_index(t)
            c, g = c[idx], g[idx]
            fin = np.isfinite(c)
            if not np.array_equal(fin, np.isfinite(g)):
                errs.append(f"uid {uid}: finite pattern differs")
                continue
            scale = max(1e-3, float(np.max(np.abs(c[fin]))) if fin.any() else 1.0)
            err = float(np.max(np.abs(c[fin] - g[fin]))) / scale if fin.any() else 0.0
            tol = TOL[t.dtype] * (4 if case.family in ("reduction", "batchnorm", "norms") else 1)
            if case.name.startswith(("pw/TAN", "pw/EXP")) or "BWD" in case.name:
                tol *= 2
            if not err <= tol:
                errs.append(f"uid {uid} ({t.dtype}): rel err {err:.3g} > {tol:.3g}")
        else:
            c, g = np.frombuffer(cpu_b, np.uint8), np.frombuffer(gpu_b, np.uint8)
            idx = _element_index(t, np.dtype(_np(t)).itemsize)
            same = float(np.mean(c[idx] == g[idx])) if len(idx) else 1.0
            exact = case.family == "matmul" or "/INT8>" in case.name    # INT8 GEMMs are exact
            if same < (1.0 if exact else 0.98):
                errs.append(f"uid {uid} ({t.dtype}): {100 * (1 - same):.1f}% of the bytes differ")
    return errs


def _element_index(t, itemsize=1):
    """Indices (elements, or bytes of ``itemsize``-byte elements) that t's elements occupy."""
    off = np.zeros(1, np.int64)
    for d, s in zip(t.dims, t.strides):
        off = (off[:, None] + np.arange(int(d), dtype=np.int64)[None, :] * int(s)).ravel()
    if itemsize == 1:
        return off
    return (off[:, None] * itemsize + np.arange(itemsize)[None, :]).ravel()


def _run_subset(both, sub):
    rng = np.random.default_rng(7)
    bad, times = [], []
    for c in sub:
        t1 = time.time()
        try:
            errs = _compare(c, both.run(c, rng))
        except Exception as e:  # noqa: BLE001 - report every case, then fail
            errs = [f"{type(e).__name__}: {e}"]
        times.append((round(time.time() - t1, 2), c.name))
        if errs:
            bad.append(f"{c.name}: {'; '.join(errs)[:300]}")
    return bad, times


def test_device_harness_on_the_cpu_reference(outcomes):
    """CI self-check of the device test's harness: the same subset, inputs (valid MoE routing,
    positive statistics), runtime scalars and comparison, with the CPU reference on both sides
    (host memory): every graph runs and agrees with itself."""
    acc = [c for c, cok, gok, _ in outcomes if cok and gok]
    sub = gpu_subset(acc, GPU_CASES, REQUIRED)
    bad, _ = _run_subset(_Both(device=False), sub)
    assert not bad, "\n".join(bad[:40])


def gpu_cases(acc):
    """The device test's graphs: HIPDNN_CABI_PARITY_GPU_CASES = N (default GPU_CASES) -> the
    deterministic subset of about N, ``all`` -> every graph of ``acc``."""
    want = os.environ.get("HIPDNN_CABI_PARITY_GPU_CASES", str(GPU_CASES)).strip().lower()
    return list(acc) if want == "all" else gpu_subset(acc, int(want), REQUIRED)


def test_gpu_cases_env(monkeypatch, outcomes):
    acc = [c for c, cok, gok, _ in outcomes if cok and gok]
    monkeypatch.setenv("HIPDNN_CABI_PARITY_GPU_CASES", "all")
    assert len(gpu_cases(acc)) == len(acc)
    monkeypatch.setenv("HIPDNN_CABI_PARITY_GPU_CASES", "40")
    assert set(REQUIRED) <= {c.name for c in gpu_cases(acc)}
    monkeypatch.delenv("HIPDNN_CABI_PARITY_GPU_CASES")
    assert [c.name for c in gpu_cases(acc)] == [c.name for c in gpu_subset(acc, GPU_CASES, REQUIRED)]


@pytest.mark.gpu
def test_accepted_graphs_match_on_the_device(request):
    """A deterministic subset of the graphs both engines accept (every family) runs on both
    engines with the same inputs; outputs agree.  ``--cpu-stand-in``: the CPU reference on both
    sides (host memory)."""
    from hipdnn_cabi import device
    stand_in = request.config.getoption("--cpu-stand-in", default=False)
    if not stand_in and not device.available():
        pytest.skip("no GPU runtime found")
    acc = [c for c, cok, gok, _ in _outcomes() if cok and gok]
    sub = gpu_cases(acc)
    t0 = time.time()
    bad, times = _run_subset(_Both(device=not stand_in), sub)
    summary = (f"{len(sub)} graphs in {time.time() - t0:.1f} s; slowest "
               f"{sorted(times, reverse=True)[:3]}")
    if os.environ.get("OUT"):
        with open(os.path.join(os.environ["OUT"], "parity_gpu.txt"), "w") as f:
            f.write(summary + "\n" + "\n".join(bad) + "\n")
    print(summary)
    assert not bad, f"{len(bad)} of {len(sub)} graphs differ:\n" + "\n".join(bad[:40])
