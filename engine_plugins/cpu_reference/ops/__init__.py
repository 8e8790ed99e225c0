"""Node plan builders of the CPU reference engine: one builder class per operation."""
from __future__ import annotations

from ._base import (BatchnormBwdBuilder, BatchnormInferenceBuilder,  # noqa: F401
                    BatchnormInferenceVarianceBuilder, BatchnormTrainBuilder, ConvBwdDataBuilder,
                    ConvBwdFilterBuilder, ConvFwdBuilder, LayernormBwdBuilder, LayernormFwdBuilder,
                    MatmulBuilder, NodeBuilder, NodePlan, PointwiseBuilder, ReductionBuilder,
                    RmsnormBwdBuilder, RmsnormFwdBuilder, SdpaBwdBuilder, SdpaFwdBuilder,
                    Unsupported)
from .resample import EXT_BUILDERS

BUILDERS = [ConvFwdBuilder, ConvBwdDataBuilder, ConvBwdFilterBuilder, BatchnormInferenceBuilder,
            BatchnormInferenceVarianceBuilder, BatchnormTrainBuilder, BatchnormBwdBuilder,
            PointwiseBuilder, MatmulBuilder, ReductionBuilder, LayernormFwdBuilder,
            LayernormBwdBuilder, RmsnormFwdBuilder, RmsnormBwdBuilder, SdpaFwdBuilder,
            SdpaBwdBuilder, *EXT_BUILDERS]
BY_KIND = {b.KIND: b for b in BUILDERS}
