"""Reductions against per-row Python (math.fsum / math.prod) evaluation."""
import json
import math
import os

import numpy as np
import pytest

from cpuref_testutil import FLOAT_TYPES, assert_close, make_tensor, quantize, roundtrip_output
from engine_plugins.cpu_reference.kernels import reduction as red

ABI = "/work/shared/abi/hipdnn_abi.json"
R = "HIPDNN_REDUCE_TENSOR_"


def _nz_prod(v):
    nz = [e for e in v if e != 0]
    return math.prod(nz) if nz else 1.0


ROW = {
    "ADD": math.fsum,
    "MUL": math.prod,
    "MIN": min,
    "MAX": max,
    "AMAX": lambda v: max(abs(e) for e in v),
    "AVG": lambda v: math.fsum(v) / len(v),
    "NORM1": lambda v: math.fsum(abs(e) for e in v),
    "NORM2": lambda v: math.sqrt(math.fsum(e * e for e in v)),
    "MUL_NO_ZEROS": _nz_prod,
}

SHAPE = (3, 4, 2, 5)
OUTS = [(3, 1, 1, 1), (1, 4, 1, 1), (3, 4, 2, 1), (1, 1, 1, 1), (3, 1, 2, 5), (3, 4, 2, 5)]


def ref_reduce(f, x, out_shape):
    axes = [i for i, (a, b) in enumerate(zip(x.shape, out_shape)) if a != b]
    keep = [i for i in range(x.ndim) if i not in axes]
    xt = np.transpose(x, keep + axes)
    rows = xt.reshape(int(np.prod([x.shape[i] for i in keep])), -1)
    return np.array([f(r.tolist()) for r in rows]).reshape(out_shape)


def test_ops_match_abi():
    if os.path.exists(ABI):
        names = set(json.load(open(ABI))["enums"]["hipdnnReduceTensorOp_t"]["values"])
        assert names == set(red.REDUCTION_OPS)
    assert {R + k for k in ROW} == set(red.REDUCTION_OPS)
    assert red.canonical_reduce_op("MIN_OP") == R + "MIN"
    assert red.canonical_reduce_op("HIPDNN_REDUCTION_NORM2") == R + "NORM2"


@pytest.mark.parametrize("t", FLOAT_TYPES)
@pytest.mark.parametrize("op", sorted(ROW))
def test_reduce(op, t):
    rng = np.random.default_rng(len(op))
    vals = rng.uniform(0.6, 1.5, SHAPE) * np.where(rng.random(SHAPE) < 0.5, -1, 1)
    if op == "MUL_NO_ZEROS":
        vals[rng.random(SHAPE) < 0.3] = 0.0
        vals[0] = 0.0  # all-zero rows for several outputs
    x_ref = quantize(vals, t)
    x, _ = make_tensor(x_ref, t, "nhwc")
    for out_shape in OUTS:
        y = red.reduce(R + op, x, out_shape)
        assert y.shape == out_shape
        ref = ref_reduce(ROW[op], x_ref, out_shape)
        assert_close(roundtrip_output(y, t), ref, t, factor=2, what=f"{op}->{out_shape}")


def test_reduce_errors_and_dtype():
    x = np.ones((2, 3), np.float16)
    assert red.reduce(R + "ADD", x, (2, 1)).dtype == np.float32
    assert red.reduce(R + "ADD", x.astype(np.float64), (1, 1)).dtype == np.float64
    with pytest.raises(ValueError):
        red.reduce(R + "ADD", x, (2, 2))
    with pytest.raises(ValueError):
        red.reduce(R + "ADD", x, (2, 3, 1))
    with pytest.raises(KeyError):
        red.reduce("HIPDNN_REDUCE_TENSOR_ARGMAX", x, (2, 1))
