"""CI (no GPU): the SDPA roles the HIP engine's NVIDIA kernels run (block masks, sink tokens,
score_max / score_sum_exp, rng_dump, paged K/V, ragged tensors) build there and decline on AMD
with the role named; what no kernel takes (fp8 scales off Hopper, paged K/V outside what the
kernels take: one table, small pages; fp8 data with rng_dump, max / sum_exp or paged K/V) declines
with a reason naming it, while the CPU reference
(the oracle) accepts the same graph; ragged graphs reach the HIP engine (plugin API 1.3.0)."""
from __future__ import annotations

import pytest

from engine_plugins.cpu_reference import engine as cpu_engine
from engine_plugins.hip_kernels import engine as hip_engine
from engine_plugins.hip_kernels import program as gp
from hipdnn_cabi.plugin_sdk import parse_graph
from hipdnn_cabi.plugin_sdk.core import required_api_version

from gpu_testlib import T, graph_bytes, node

B, H, Sq, Skv, D = 1, 2, 8, 16, 64


def sdpa_graph(dtype="HALF", extra=(), **attrs):
    ts = [T(1, [B, H, Sq, D], dtype), T(2, [B, H, Skv, D], dtype), T(3, [B, H, Skv, D], dtype),
          T(4, [B, H, Sq, D], dtype), *extra]
    a = {"q_tensor_uid": 1, "k_tensor_uid": 2, "v_tensor_uid": 3, "o_tensor_uid": 4}
    a.update(attrs)
    return graph_bytes(ts, [node("SdpaAttributes", a)])


def analyses(b, **kw):
    g = parse_graph(b)
    cpu_engine._cache.clear()
    cpu = cpu_engine._analyse(g)
    try:
        gp.build_program(g, use_mma=True, sms=132, **kw)
        gpu = (True, "")
    except gp.NotApplicable as e:
        gpu = (False, str(e))
    return (cpu.ok, cpu.reason), gpu


CASES = {
    "block_mask": dict(extra=[T(9, [B, H, 1, 1], "UINT8")], block_mask_tensor_uid=9),
    "sink_token": dict(extra=[T(9, [1, H, 1, 1], "FLOAT")], sink_token_tensor_uid=9),
    "max": dict(extra=[T(9, [B, H, Sq, 1], "FLOAT")], max_tensor_uid=9),
    "sum_exp": dict(extra=[T(9, [B, H, Sq, 1], "FLOAT")], sum_exp_tensor_uid=9),
    "rng_dump": dict(extra=[T(9, [B, H, Sq, Skv], "FLOAT"), T(10, [1, 1, 1, 1], "INT64"),
                            T(11, [1, 1, 1, 1], "INT64")],
                     rng_dump_tensor_uid=9, seed_tensor_uid=10, offset_tensor_uid=11,
                     dropout_probability=0.25),
}


@pytest.mark.parametrize("role", sorted(CASES))
@pytest.mark.parametrize("arch", [None, "sm_90"])
def test_nvidia_runs_the_score_roles(role, arch):
    (cpu_ok, cpu_why), (gpu_ok, gpu_why) = analyses(sdpa_graph(**CASES[role]), arch=arch)
    assert cpu_ok, cpu_why
    assert gpu_ok, gpu_why


@pytest.mark.parametrize("role", sorted(CASES))
def test_amd_declines_the_score_roles_with_the_role_named(role):
    (cpu_ok, cpu_why), (gpu_ok, gpu_why) = analyses(sdpa_graph(**CASES[role]), arch="gfx942")
    assert cpu_ok, cpu_why
    assert not gpu_ok and f"{role} is not supported by the AMD MFMA attention kernels" in gpu_why, gpu_why


@pytest.mark.parametrize("paged", ["k", "v"])
def test_paged_kv_outside_the_kernels_is_declined(paged):
    """Paged K/V runs on the HIP engine (tests/gpu/test_attention_paged_ragged.py) with one or
    both tables and pages of a power of two >= 16 rows; 4-row pages decline with the reason
    while the CPU reference accepts the graph."""
    def graph(ps):
        pool = T(2 if paged == "k" else 3, [6, H, ps, D], "HALF")
        ts = [T(1, [B, H, Sq, D], "HALF"), T(4, [B, H, Sq, D], "HALF"),
              T(2, [B, H, Skv, D], "HALF") if paged == "v" else pool,
              T(3, [B, H, Skv, D], "HALF") if paged == "k" else pool,
              T(9, [B, 1, 4, 1], "INT32"), T(10, [B, 1, 1, 1], "INT32"), T(11, [B, 1, 1, 1], "INT32")]
        return ts, graph_bytes(ts, [node("SdpaAttributes", a)])
    a = {"q_tensor_uid": 1, "k_tensor_uid": 2, "v_tensor_uid": 3, "o_tensor_uid": 4,
         f"page_table_{paged}_tensor_uid": 9, "seq_len_kv_tensor_uid": 10, "max_seq_len_kv": Skv,
         "seq_len_q_tensor_uid": 11}
    (cpu_ok, cpu_why), (gpu_ok, gpu_why) = analyses(graph(16)[1])
    assert cpu_ok and gpu_ok, (cpu_why, gpu_why)       # one table alone, the other dense
    ts, g = graph(4)
    (cpu_ok, cpu_why), (gpu_ok, gpu_why) = analyses(g)
    assert cpu_ok, cpu_why
    assert not gpu_ok and "page size 4" in gpu_why, gpu_why
    ts = ts[:2] + [T(2, [6, H, 4, D], "HALF"), T(3, [6, H, 4, D], "HALF")] + ts[4:]
    a.update(page_table_k_tensor_uid=9, page_table_v_tensor_uid=9)
    (cpu_ok, cpu_why), (gpu_ok, gpu_why) = analyses(graph_bytes(ts, [node("SdpaAttributes", a)]))
    assert cpu_ok, cpu_why
    assert not gpu_ok and "page size 4" in gpu_why, gpu_why


def test_fp8_attention_needs_hopper():
    """The fp8 forward runs on the Hopper kernel only (tests/gpu/test_attention_fp8.py): other
    targets decline it with that reason; sm_90 takes it."""
    scales = [T(u, [1, 1, 1, 1], "FLOAT") for u in range(9, 15)]
    amax = [T(15, [1, 1, 1, 1], "FLOAT"), T(16, [1, 1, 1, 1], "FLOAT")]
    attrs = {f"{r}_tensor_uid": u for r, u in zip(
        ("descale_q", "descale_k", "descale_v", "descale_s", "scale_s", "scale_o",
         "amax_s", "amax_o"), range(9, 17))}
    (cpu_ok, cpu_why), (gpu_ok, gpu_why) = analyses(
        sdpa_graph("FP8_E4M3", extra=scales + amax, **attrs))
    assert cpu_ok, cpu_why
    assert not gpu_ok and "FP8 attention runs on the Hopper wgmma kernel only" in gpu_why, gpu_why
    gp.build_program(parse_graph(sdpa_graph("FP8_E4M3", extra=scales + amax, **attrs)),
                     arch="sm_90")


FP8_RUN = {      # score roles and dropout the fp8 kernel runs (tests/gpu/test_attention_fp8.py)
    "attn_mask": dict(extra=[T(9, [B, H, Sq, Skv], "HALF")], attn_mask_tensor_uid=9),
    "alibi": dict(alibi_mask=True),
    "block_mask": CASES["block_mask"],
    "sink_token": CASES["sink_token"],
    "dropout": dict(extra=[T(10, [1, 1, 1, 1], "INT64"), T(11, [1, 1, 1, 1], "INT64")],
                    seed_tensor_uid=10, offset_tensor_uid=11, dropout_probability=0.25),
}


@pytest.mark.parametrize("role", sorted(FP8_RUN))
def test_fp8_runs_the_score_roles_on_hopper(role):
    (cpu_ok, cpu_why), (gpu_ok, gpu_why) = analyses(sdpa_graph("FP8_E4M3", **FP8_RUN[role]),
                                                    arch="sm_90")
    assert cpu_ok, cpu_why
    assert gpu_ok, gpu_why


@pytest.mark.parametrize("role, cpu_runs", [("rng_dump", True), ("max", False), ("sum_exp", False)])
def test_fp8_declines_what_its_kernel_does_not_run(role, cpu_runs):
    """rng_dump with fp8 data declines on the HIP engine (the CPU reference runs it); max /
    sum_exp with fp8 data decline on both engines - the reason names the role."""
    (cpu_ok, cpu_why), (gpu_ok, gpu_why) = analyses(sdpa_graph("FP8_E4M3", **CASES[role]),
                                                    arch="sm_90")
    assert cpu_ok == cpu_runs, cpu_why
    assert not gpu_ok and f"{role} is not supported by the HIP engine with FP8 data" in gpu_why, \
        gpu_why


def test_fp8_paged_kv_declines():
    ts = [T(1, [B, H, Sq, D], "FP8_E4M3"), T(2, [6, H, 16, D], "FP8_E4M3"),
          T(3, [B, H, Skv, D], "FP8_E4M3"), T(4, [B, H, Sq, D], "FP8_E4M3"),
          T(9, [B, 1, 1, 1], "INT32"), T(10, [B, 1, 1, 1], "INT32"), T(11, [B, 1, 1, 1], "INT32")]
    a = {"q_tensor_uid": 1, "k_tensor_uid": 2, "v_tensor_uid": 3, "o_tensor_uid": 4,
         "page_table_k_tensor_uid": 9, "seq_len_kv_tensor_uid": 10, "seq_len_q_tensor_uid": 11,
         "max_seq_len_kv": Skv}
    (_, _), (gpu_ok, gpu_why) = analyses(graph_bytes(ts, [node("SdpaAttributes", a)]), arch="sm_90")
    assert not gpu_ok and "page_table_k is not supported by the HIP engine with FP8 data (paged K/V)" \
        in gpu_why, gpu_why


def test_ragged_graphs_reach_the_hip_engine():
    """A ragged tensor raises the graph's engine API floor to 1.3.0, which the HIP plugin
    reports: ragged SDPA tensors run there (tests/gpu/test_attention_paged_ragged.py)."""
    g = parse_graph(sdpa_graph())
    g.tensors[1].ragged_offset_uid = 7
    assert required_api_version(g) == (1, 3, 0)
    api = tuple(int(x) for x in hip_engine.API_VERSION.split("."))
    assert api >= (1, 3, 0)
