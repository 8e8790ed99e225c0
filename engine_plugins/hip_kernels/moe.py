"""MoE grouped matmul on the GPU (placeholder until the GEMM-core interface lands: see moe
docs in docs/gpu.md).  No kinds are claimed yet: graphs with MoE nodes run on the CPU engine."""
from __future__ import annotations

KINDS: dict = {}


def check(node, graph, r):
    raise ValueError("MoE grouped matmul is not implemented on the HIP engine")


def emit(prog, graph, node, r, loc, tag, sms):
    raise ValueError("MoE grouped matmul is not implemented on the HIP engine")
