"""The HIP engine's operation families: one module per family of the operation catalog (the
same names as the CPU reference engine's), each with one contract (``_base``): ``KINDS`` from
the catalog, ``check(node, graph, r)`` (None, or NotApplicable with the reason) and
``emit(ctx, node, r, tag, fused=None)`` (pointwise: ``emit(ctx, run, tag)``, a run of nodes);
program.py schedules, fuses and calls them.

:data:`MODULES` in catalog order; :data:`FAMILY` maps a node kind (NodeAttributes member) to its
family module; :data:`RUNTIME_SCALARS` maps a kind to the roles whose kernels take a runtime
pass-by-value scalar.
"""
from __future__ import annotations

from . import batchnorm, block_scale, conv, matmul, moe, norms, pointwise, reduction, resample, sdpa
from ._base import EmitContext, NotApplicable, io_uids, roles  # noqa: F401

MODULES = (conv, batchnorm, norms, pointwise, matmul, reduction, resample, block_scale, moe, sdpa)
FAMILIES = tuple(m.__name__.rsplit(".", 1)[1] for m in MODULES)
FAMILY = {k: m for m in MODULES for k in m.KINDS}
RUNTIME_SCALARS = {k: v for m in MODULES for k, v in getattr(m, "RUNTIME_SCALARS", {}).items()}
