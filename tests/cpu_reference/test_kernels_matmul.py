"""Batched matmul against explicit loops over batch indices and a k-sum."""
import numpy as np
import pytest

from cpuref_testutil import FLOAT_TYPES, assert_close, make_tensor, quantize, roundtrip_output
from engine_plugins.cpu_reference.kernels import matmul as mm

CASES = [
    ((5, 7), (7, 3)),
    ((2, 4, 6), (2, 6, 5)),
    ((2, 1, 3, 4), (1, 3, 4, 2)),
    ((1, 3, 4), (2, 1, 4, 3)),
    ((3, 2, 1, 8), (3, 2, 8, 1)),
]


def ref_matmul(a, b):
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    ab = np.broadcast_to(a, batch + a.shape[-2:])
    bb = np.broadcast_to(b, batch + b.shape[-2:])
    out = np.zeros(batch + (a.shape[-2], b.shape[-1]))
    for idx in np.ndindex(*batch):
        A, B = ab[idx], bb[idx]
        for k in range(A.shape[1]):
            out[idx] += np.outer(A[:, k], B[k, :])
    return out


@pytest.mark.parametrize("t", FLOAT_TYPES)
@pytest.mark.parametrize("ci", range(len(CASES)))
def test_matmul(ci, t):
    sa, sb = CASES[ci]
    rng = np.random.default_rng(ci)
    a_ref = quantize(rng.standard_normal(sa), t)
    b_ref = quantize(rng.standard_normal(sb), t)
    # a column-major-ish (transposed memory), b row-major
    a, _ = make_tensor(a_ref, t, "nhwc")
    b, _ = make_tensor(b_ref, t, "nchw")
    c = mm.matmul(a, b)
    ref = ref_matmul(a_ref, b_ref)
    assert c.shape == ref.shape == mm.matmul_output_shape(sa, sb)
    k = sa[-1]
    assert_close(roundtrip_output(c, t), ref, t, scale=float(np.sqrt(k)) * 0.5, what=f"matmul {sa}x{sb}")


def test_matmul_out_shape_and_errors():
    a = np.ones((2, 3), np.float16)
    b = np.ones((3, 4), np.float16)
    c = mm.matmul(a, b, out_shape=(1, 2, 4))
    assert c.shape == (1, 2, 4) and c.dtype == np.float32 and np.all(c == 3)
    assert mm.matmul(a, b.astype(np.float64)).dtype == np.float64
    with pytest.raises(ValueError):
        mm.matmul(a, np.ones((4, 3)))
    with pytest.raises(ValueError):
        mm.matmul(a, b, out_shape=(2, 2, 4))
    with pytest.raises(ValueError):
        mm.matmul(np.ones((2, 2, 3)), np.ones((3, 3, 4)))
