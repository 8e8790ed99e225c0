"""CPU reference SDPA at the plugin boundary: malformed nodes (the newer roles with wrong shapes
or types included) are not applicable, with a reason naming the problem; the Philox generator's
known-answer vectors.  Numerics are tested through the frontend in
tests/frontend/test_frontend_sdpa.py and tests/frontend/test_frontend_sdpa_roles.py."""
from __future__ import annotations

import numpy as np
import pytest

from engine_testutil import Tensor, applicable, graph_bytes, node, run_inprocess

from engine_plugins.cpu_reference import engine as cpu_engine
from hipdnn_cabi.plugin_sdk import parse_graph


def sdpa_graph(extra_tensors=(), q=(1, 2, 5, 8), k=(1, 2, 6, 8), o=None, **attrs):
    o = o or q
    ts = [Tensor(1, q), Tensor(2, k), Tensor(3, k), Tensor(4, o), *extra_tensors]
    a = {"q_tensor_uid": 1, "k_tensor_uid": 2, "v_tensor_uid": 3, "o_tensor_uid": 4}
    a.update(attrs)
    return ts, graph_bytes(ts, [node("SdpaAttributes", a)])


def test_plain_is_applicable_and_runs_in_process():
    ts, gb = sdpa_graph()
    assert applicable(gb)
    r = np.random.default_rng(0)
    for t in ts:
        t.buf = r.standard_normal(t.dims).astype(np.float32)
    run_inprocess(gb, ts)
    q, k, v, o = (t.buf.astype(np.float64) for t in ts)
    s = q @ np.swapaxes(k, -1, -2)
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    np.testing.assert_allclose(o, p @ v, rtol=1e-5, atol=1e-6)


def reason(gb):
    cpu_engine._cache.clear()
    a = cpu_engine._analyse(parse_graph(gb))
    assert not a.ok
    return a.reason


@pytest.mark.parametrize("role,tensor,expect", [
    ("page_table_k", Tensor(9, [2, 1, 1, 1], "INT32"), "must be [B=1, 1, max_pages, 1]"),
    ("page_table_v", Tensor(9, [1, 1, 2, 1], "INT32"), "paged K/V needs seq_len_kv"),
    ("block_mask", Tensor(9, [1, 2, 1, 1], "FLOAT"), "block_mask"),
    ("block_mask", Tensor(9, [1, 2, 1, 2], "UINT8"), "ceil(Sq/128)"),
    ("sink_token", Tensor(9, [1, 3, 1, 1]), "sink_token must hold Hq=2"),
    ("descale_q", Tensor(9, [1, 1, 1, 1]), "descale_q needs FP8 q/k/v"),
    ("scale_o", Tensor(9, [1, 1, 1, 1]), "scale_o needs FP8 q/k/v"),
    ("amax_s", Tensor(9, [1, 1, 1, 1]), "amax_s needs FP8 q/k/v"),
])
def test_malformed_new_roles_are_declined_with_a_reason(role, tensor, expect):
    _, gb = sdpa_graph([tensor], **{role + "_tensor_uid": 9})
    assert expect in reason(gb)


def test_fp8_backward_is_declined():
    ts = [Tensor(u, (1, 2, 5, 8), "FP8_E4M3") for u in (1, 2, 3, 4, 5, 7, 8, 9)]
    ts.append(Tensor(6, (1, 2, 5, 1)))
    a = dict(zip(("q", "k", "v", "o", "do", "stats", "dq", "dk", "dv"), range(1, 10)))
    gb = graph_bytes(ts, [node("SdpaBackwardAttributes",
                               {f"{r}_tensor_uid": u for r, u in a.items()})])
    assert "no fp8 descale" in reason(gb)


@pytest.mark.parametrize("kw", [dict(q=(1, 3, 5, 8), k=(1, 2, 6, 8)),      # Hq % Hkv != 0
                                dict(q=(1, 2, 5, 8), k=(1, 2, 6, 4)),      # D differs
                                dict(o=(1, 2, 5, 4)),                      # O shape
                                dict(dropout_probability=0.5)])            # no seed/offset
def test_malformed_is_not_applicable(kw):
    _, gb = sdpa_graph(**kw)
    assert not applicable(gb)


def test_philox_known_answers():
    """Random123's known-answer vectors for philox4x32-10."""
    from engine_plugins.cpu_reference.kernels.philox import philox4x32_10
    cases = [((0, 0, 0, 0), (0, 0), (0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8)),
             ((0xffffffff,) * 4, (0xffffffff,) * 2, (0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd)),
             ((0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344), (0xa4093822, 0x299f31d0),
              (0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1))]
    for ctr, key, want in cases:
        got = philox4x32_10(*[np.array([c]) for c in ctr], *key)
        assert tuple(int(w[0]) for w in got) == want
