"""Node plan builders of the CPU reference engine: one module per operation family (the
catalog's families, as in the HIP engine), one builder class per operation.

:data:`BUILDERS` (each family module's ``BUILDERS``, family by family) fills the engine's
PlanBuilderRegistry; :data:`BY_KIND` maps a node's kind (its NodeAttributes member) to its
builder.
"""
from __future__ import annotations

from . import batchnorm, block_scale, conv, matmul, moe, norms, pointwise, reduction, resample, sdpa
from ._base import NodeBuilder, NodePlan, RaggedRef, Unsupported  # noqa: F401

MODULES = (conv, batchnorm, norms, pointwise, matmul, reduction, resample, block_scale, moe, sdpa)
FAMILIES = tuple(m.__name__.rsplit(".", 1)[1] for m in MODULES)

BUILDERS = [b for m in MODULES for b in m.BUILDERS]
BY_KIND = {b.KIND: b for b in BUILDERS}
