"""GPU: grouped and depthwise convolutions (one GEMM per group on the grid's batch index) -
forward, backward data, backward filter; NCHW / NHWC; 1-D, 2-D, 3-D; fused bias + relu - against
the CPU reference in float64.  Every output starts poisoned (NaN): an element no store reaches
fails the finiteness check."""
from __future__ import annotations

import functools

import numpy as np
import pytest

from engine_plugins.cpu_reference.kernels import conv as kconv
from gpu_testlib import TOL, conv_bias_relu_graph, quantize, quantized_normal, relerr
from test_grouped_conv_host_emulation import CASES, _graph, _ref, _tensors

pytestmark = pytest.mark.gpu
rnd = functools.partial(quantized_normal, np.random.default_rng(2027))

# (dtype, layout, case) - every case in fp16 channels-last (the wgmma core on Hopper), a few
# in fp32 / bf16 NCHW (layout copies, SIMT core)
RUNS = [("HALF", "nhwc", k) for k in range(len(CASES))] + \
    [("FLOAT", "nchw", 0), ("FLOAT", "nchw", 1), ("BFLOAT16", "nchw", 2), ("BFLOAT16", "nhwc", 3)]


@pytest.mark.parametrize("op", ["fwd", "bwd_data", "bwd_filter"])
@pytest.mark.parametrize("run", RUNS, ids=[f"{d}-{lay}-{k}" for d, lay, k in RUNS])
def test_grouped_conv_gpu(R, run, op):
    dtp, lay, case = run
    x, w, y, pad, st, dil, mode = _tensors(CASES[case], dtp, lay)
    xv, wv, yv = rnd(x.dims, dtp), rnd(w.dims, dtp), rnd(y.dims, dtp)
    ins, out = {"fwd": ({x: xv, w: wv}, y), "bwd_data": ({y: yv, w: wv}, x),
                "bwd_filter": ({x: xv, y: yv}, w)}[op]
    got = R.run(_graph(op, x, w, y, pad, st, dil, mode), ins, [out])[out.uid]
    ref = _ref(op, CASES[case], xv, wv, yv, x, w)
    assert np.all(np.isfinite(got)), f"{run} {op}: non-finite / unwritten output"
    e = relerr(got, quantize(ref, dtp))
    assert e < TOL[dtp], f"{run} {op}: rel err {e:.3g}"


@pytest.mark.parametrize("op", ["fwd", "bwd_data"])
@pytest.mark.parametrize("case", [1, 3])
def test_narrow_groups_on_the_tiled_cores_gpu(R, case, op, monkeypatch):
    """Depthwise / narrow groups on the tiled GEMM cores (knob GROUPED_DIRECT=0) instead of the
    direct core."""
    monkeypatch.setenv("HIPDNN_CABI_HIP_GROUPED_DIRECT", "0")
    test_grouped_conv_gpu(R, ("HALF", "nhwc", case), op)


@pytest.mark.parametrize("G", [2, 64])
def test_grouped_conv_fused_bias_relu_gpu(R, G):
    """conv (2 groups of 32 channels / depthwise) -> + bias -> relu as one GEMM epilogue."""
    dtp, lay = "HALF", "nhwc"
    x, w, b, y, g = conv_bias_relu_graph(2, 64, 64, 10, dtp, lay, groups=G)
    xv, wv, bvv = rnd(x.dims, dtp), rnd(w.dims, dtp), rnd(b.dims, dtp)
    got = R.run(g, {x: xv, w: wv, b: bvv}, [y])[6]
    ref = np.maximum(kconv.conv_fwd(xv, wv, [1, 1], [1, 1], [1, 1], [1, 1], compute_dtype=np.float64) + bvv, 0)
    assert np.all(np.isfinite(got))
    assert relerr(got, quantize(ref, dtp)) < TOL[dtp]
