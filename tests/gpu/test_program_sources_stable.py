"""CI (no GPU): the HIP engine's programs stay byte-identical unless a change means to alter them.

:func:`build_program` runs over a corpus - the CI sample graphs of every kernel family, dtype and
layout, the extension operations (norms, resample, block scale, MoE), the attention
configurations, fp8 / TF32 GEMMs, batchnorm -> pointwise fusions and shared-consumer pointwise
topologies, a few GEMM-core knobs and the applicability corpus (data-type /
compute-type sweeps, decline cases) - under several device options (mma on / off, Hopper, TF32),
and each outcome is reduced to one SHA-256: the program's steps (every generated source, kernel
name, launch shape and argument), its workspace / scratch sizes, external uids and notes, or the
decline reason.  The digests are compared with ``program_digests.json`` next to this file.

A change that alters generated code on purpose regenerates the file::

    HIPDNN_CABI_UPDATE_PROGRAM_DIGESTS=1 .venv/bin/python -m pytest -q tests/gpu/test_program_sources_stable.py
"""
from __future__ import annotations

import hashlib
import json
import os

import pytest

from engine_plugins.hip_kernels.program import NotApplicable, build_program
from hipdnn_cabi.plugin_sdk import parse_graph

from ext_samples import ext_sample_graphs
from gpu_testlib import (T, conv_bwd_data, conv_bwd_filter, conv_fwd, graph_bytes, int8_sample_graphs,
                         matmul, sample_graphs)

DIGESTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "program_digests.json")
UPDATE = os.environ.get("HIPDNN_CABI_UPDATE_PROGRAM_DIGESTS") == "1"

# device options: the portable kernels (mma.sync / SIMT), Hopper (wgmma, tensor maps), TF32
OPTIONS = {"mma": {}, "simt": {"use_mma": False}, "sm90": {"arch": "sm_90"},
           "sm90_tf32": {"arch": "sm_90", "tf32": True}}
# GEMM-core knobs (HIPDNN_CABI_HIP_<name>) that switch planning paths, over the conv graphs
KNOBS = {"wgrad_swap": {"WGRAD_SWAP": "1"}, "no_strided_dgrad": {"STRIDED_DGRAD": "0"},
         "no_tma_store": {"TMA_STORE": "0"}, "no_im2col": {"CONV_IM2COL": "0"},
         "no_splitk": {"SPLITK": "0"}, "no_simt_mvec": {"SIMT_MVEC": "0"},
         "no_rows": {"ROWS": "0"}, "no_tma": {"TMA": "0"}, "simt_nhwc": {"SIMT_NHWC": "1"}}


def digest(prog) -> str:
    """The first 64 bits of the SHA-256 of everything the program holds."""
    return hashlib.sha256(repr((prog.steps, prog.ws_size, prog.scratch_size, prog.external,
                                prog.notes, getattr(prog, "layout_transforms", None))
                               ).encode()).hexdigest()[:16]


def outcome(gb, opts) -> str:
    try:
        return digest(build_program(parse_graph(gb), **opts))
    except NotApplicable as e:
        return "not applicable: " + str(e)


def _attention_graphs():
    from test_attention import BWD_CONFIGS, CONFIGS, WG_CONFIGS, bwd_graph, fwd_graph
    out = []
    for i, c in enumerate(CONFIGS + WG_CONFIGS):
        out.append((f"sdpa_fwd{i}", fwd_graph(**c)[1]))
    for i, c in enumerate(BWD_CONFIGS):
        cb = {k: v for k, v in c.items() if k not in ("bshd", "seq", "drop", "stats", "scale_mode")}
        out.append((f"sdpa_bwd{i}", bwd_graph(**cb)[1]))
    from test_attention_fp8 import CONFIGS as F8_CONFIGS, ROLE_CONFIGS as F8_ROLE_CONFIGS, f8_graph
    for i, c in enumerate(F8_CONFIGS):
        out.append((f"sdpa_fp8_fwd{i}", f8_graph(**c)[1]))
    for i, c in enumerate(F8_ROLE_CONFIGS):
        out.append((f"sdpa_fp8_roles{i}", f8_graph(**c)[1]))
    return out


def _gemm_graphs():
    """fp8 matmul / conv, conv shapes of the TF32 / layout tests, strided 1 x 1 backward data,
    wgmma-sized backward filter and an im2col-sized forward."""
    out = []
    for dt in ("FP8_E4M3", "FP8_E5M2"):
        for o in ("HALF", "FLOAT", dt):
            for bt in (False, True):
                a, b, c = T(1, [2, 130, 96], dt), T(2, [2, 96, 72], dt, strides=[96 * 72, 1, 96] if bt else None), \
                    T(3, [2, 130, 72], o)
                out.append((f"fp8_mm_{dt}_{o}_{bt}", graph_bytes([a, b, c], [matmul(1, 2, 3)])))
        for lay, C in (("nhwc", 128), ("nchw", 16), ("nhwc", 24)):
            x, w, y = T(1, [2, C, 10, 10], dt, lay), T(2, [32, C, 3, 3], dt, lay), T(3, [2, 32, 10, 10], "HALF", lay)
            out.append((f"fp8_conv_{dt}_{lay}_{C}", graph_bytes([x, w, y], [conv_fwd(1, 2, 3, [1, 1], [1, 1], [1, 1])])))
    shapes = [(2, 16, 11, 32, 3, 1, 1), (2, 64, 14, 64, 1, 0, 2), (4, 64, 28, 128, 3, 1, 1),
              (1, 128, 8, 256, 1, 0, 1), (2, 24, 9, 40, 3, 1, 2)]
    for dt in ("FLOAT", "HALF", "BFLOAT16"):
        for lay in ("nchw", "nhwc"):
            for N, C, H, K, Rr, pad, st in shapes:
                P = (H + 2 * pad - Rr) // st + 1
                x, w, y = T(1, [N, C, H, H], dt, lay), T(2, [K, C, Rr, Rr], dt, lay), T(3, [N, K, P, P], dt, lay)
                args = ([pad, pad], [st, st], [1, 1])
                tag = f"{dt}_{lay}_{N}x{C}x{H}_{K}r{Rr}p{pad}s{st}"
                out.append((f"conv_fwd_{tag}", graph_bytes([x, w, y], [conv_fwd(1, 2, 3, *args)])))
                out.append((f"conv_data_{tag}", graph_bytes([y, w, x], [conv_bwd_data(3, 2, 1, *args)])))
                out.append((f"conv_filter_{tag}", graph_bytes([x, y, w], [conv_bwd_filter(1, 3, 2, *args)])))
        for M, K, N, bt in ((3, 130, 72, False), (3, 130, 72, True), (1, 77, 33, False), (1, 256, 512, True)):
            a, b, c = T(1, [M, 128, K], dt), T(2, [M, K, N], dt, strides=[K * N, 1, K] if bt else None), T(3, [M, 128, N], dt)
            out.append((f"mm_{dt}_{M}x{K}x{N}_{bt}", graph_bytes([a, b, c], [matmul(1, 2, 3)])))
    return out


def _fusion_graphs():
    """Batchnorm -> pointwise runs (fused into the batchnorm's kernel) and shared-consumer
    topologies (pointwise runs kept apart where joining them would make a cycle)."""
    from test_bn_fusion import KINDS, case, projection_case
    from test_fusion_topologies import TOPOLOGIES
    out = []
    for k in KINDS:
        for dt, lay, ys, res in (("FLOAT", "nchw", False, True), ("HALF", "nhwc", True, False),
                                 ("BFLOAT16", "nhwc", False, True)):
            ts, ns, _, _ = case(k, dt, lay, ys, res)
            out.append((f"bn_fuse_{k}_{dt}_{lay}_{ys}_{res}", graph_bytes(ts, ns)))
    ts, ns, _, _ = projection_case("HALF")
    out.append(("bn_fuse_projection", graph_bytes(ts, ns)))
    for name, f in TOPOLOGIES.items():
        out.append((f"pw_shared_{name}", graph_bytes(*f())))
    return out


def corpus():
    """[(name, graph bytes, option set names)]."""
    from test_applicability import frontend_graphs, sweep_graphs
    full = list(OPTIONS)
    out = [(n, g, full) for n, g in sample_graphs() + int8_sample_graphs() + ext_sample_graphs() + _attention_graphs()
           + _gemm_graphs() + _fusion_graphs()]
    out += [(n, g, ["mma", "sm90"]) for n, g in frontend_graphs() + sweep_graphs()]
    return out


def compute():
    """{graph name: {option set (and knob): digest or decline reason}}."""
    res = {}
    saved = {k: os.environ.pop(k) for k in list(os.environ) if k.startswith("HIPDNN_CABI_HIP_")}
    try:
        items = corpus()
        for name, gb, opts in items:
            for o in opts:
                res.setdefault(name, {})[o] = outcome(gb, OPTIONS[o])
        convs = [(n, g) for n, g, _ in items if n.startswith(("conv", "fp8_conv"))]
        for kn, env in KNOBS.items():
            os.environ.update({f"HIPDNN_CABI_HIP_{k}": v for k, v in env.items()})
            try:
                for name, gb in convs:
                    res[name][f"sm90_{kn}"] = outcome(gb, OPTIONS["sm90"])
            finally:
                for k in env:
                    os.environ.pop(f"HIPDNN_CABI_HIP_{k}", None)
    finally:
        os.environ.update(saved)
    return res


def test_programs_byte_identical():
    got = compute()
    if UPDATE or not os.path.exists(DIGESTS):
        with open(DIGESTS, "w") as f:     # one line per graph
            f.write("{\n" + ",\n".join(json.dumps(k) + ": " + json.dumps(got[k], sort_keys=True)
                                        for k in sorted(got)) + "\n}\n")
        if not UPDATE:
            pytest.fail(f"{DIGESTS} was missing: written; commit it")
        return
    with open(DIGESTS) as f:
        want = {f"{n}|{o}": v for n, d in json.load(f).items() for o, v in d.items()}
    got = {f"{n}|{o}": v for n, d in got.items() for o, v in d.items()}
    missing = sorted(set(want) - set(got))
    added = sorted(set(got) - set(want))
    changed = sorted(k for k in set(want) & set(got) if want[k] != got[k])
    assert not (missing or added or changed), (
        f"{len(changed)} of {len(want)} programs changed, {len(missing)} missing, {len(added)} new "
        f"(regenerate with HIPDNN_CABI_UPDATE_PROGRAM_DIGESTS=1 if intended):\n"
        + "\n".join([f"changed {k}: {got[k][:120]}" for k in changed[:20]] +
                    [f"missing {k}" for k in missing[:10]] + [f"new {k}" for k in added[:10]]))
