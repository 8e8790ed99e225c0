"""A program whose kernel asks for more dynamic shared memory than the device allows is declined
with a reason (no launch failure at execute)."""
from __future__ import annotations

import types

from hipdnn_cabi import device
from engine_plugins.hip_kernels import engine


def _prog(*steps):
    return types.SimpleNamespace(steps=list(steps))


def test_launch_smem_reads_every_step_form():
    assert engine.launch_smem(("memset", 0, 64)) == 0
    assert engine.launch_smem(("launch", "src", "k", (1, 1, 1), (32, 1, 1), [])) == 0
    assert engine.launch_smem(("launch", "src", "k", (1, 1, 1), (32, 1, 1), [], 1000)) == 1000
    assert engine.launch_smem(("launch", "src", "k", (1, 1, 1), (32, 1, 1), [],
                               {"shmem": 2000, "arch": "sm_90a"})) == 2000


def test_smem_over_the_device_limit_is_a_reason(monkeypatch):
    rt = types.SimpleNamespace(max_dynamic_smem=163 * 1024)
    monkeypatch.setattr(device, "available", lambda: True)
    monkeypatch.setattr(device, "get_runtime", lambda *a: rt)
    ok = _prog(("launch", "s", "hdn_small", (1, 1, 1), (32, 1, 1), [], 100 * 1024))
    assert engine.smem_problem(ok) is None
    big = _prog(("memset", 0, 4), ("launch", "s", "hdn_attn_bwd", (1, 1, 1), (128, 1, 1), [],
                                   175 * 1024))
    why = engine.smem_problem(big)
    assert "hdn_attn_bwd" in why and str(175 * 1024) in why and str(163 * 1024) in why
    rt.max_dynamic_smem = None                   # a runtime that does not say: no check
    assert engine.smem_problem(big) is None


def test_no_device_no_check(monkeypatch):
    monkeypatch.setattr(device, "available", lambda: False)
    big = _prog(("launch", "s", "k", (1, 1, 1), (32, 1, 1), [], 1 << 30))
    assert engine.smem_problem(big) is None
