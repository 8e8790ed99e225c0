"""GPU: 16-bit convolutions whose channel counts are not multiples of 8 through the pad
pre-pass (layout.pad_conv + kernels/pack.hip: x / dy / w copied into channel-innermost
workspace buffers zero-padded to 8 channels, the wgmma core on the 16-byte chunk / tensor-map
paths, backward filter into a padded dw copied back) against the CPU reference's float64
result - forward (C = 3 first layer, odd K, NCHW), backward data, backward filter, strides,
dilation, CONVOLUTION mode, the padded activations on the im2col tensor map, and the cost
model's own choice on larger odd-channel layers.  Outputs start poisoned (NaN): an element
the stores miss fails the finiteness check.  Shapes are small."""
from __future__ import annotations

import numpy as np
import pytest

from engine_plugins.cpu_reference.kernels import conv as kconv

from gpu_testlib import TOL, plan_notes, quantize, relerr
from test_conv_pad_plan import conv_graph

pytestmark = pytest.mark.gpu
rng = np.random.default_rng(3224)
KNOBS = ("PAD", "CONV_IM2COL", "SPLITK", "TILE", "TMA", "TMA_STORE", "GEMM", "WGRAD_SWAP")


@pytest.fixture(autouse=True)
def _clean_knobs(monkeypatch):
    for k in KNOBS:
        monkeypatch.delenv("HIPDNN_CABI_HIP_" + k, raising=False)


def run_check(R, op, N, C, H, K, Rk, pad=0, st=1, dil=1, mode="CROSS_CORRELATION", lay="nhwc",
              dt="HALF", want_pad=True):
    g, x, w, y, a = conv_graph(op, N, C, H, K, Rk, pad, st, dil, dt, lay, mode)
    ns = plan_notes(g)
    if want_pad and any("wgmma core" in n for n in ns):        # Hopper: the path under test
        assert any(n.startswith("pad pre-pass") for n in ns), ns
    xv = quantize(rng.standard_normal(x.dims), dt)
    wv = quantize(rng.standard_normal(w.dims) * (C * Rk * Rk) ** -0.5, dt)
    yv = quantize(rng.standard_normal(y.dims), dt)
    padv, stv, dilv = a[0], a[1], a[2]
    if op == "fwd":
        out = R.run(g, {x: xv, w: wv}, [y])[3]
        ref = kconv.conv_fwd(xv, wv, padv, padv, stv, dilv, mode, compute_dtype=np.float64)
    elif op == "bwd_data":
        out = R.run(g, {y: yv, w: wv}, [x])[1]
        ref = kconv.conv_bwd_data(yv, wv, x.dims, padv, padv, stv, dilv, mode, compute_dtype=np.float64)
    else:
        out = R.run(g, {x: xv, y: yv}, [w])[2]
        ref = kconv.conv_bwd_filter(xv, yv, w.dims, padv, padv, stv, dilv, mode, compute_dtype=np.float64)
    what = (op, N, C, H, K, Rk, pad, st, dil, mode, lay, dt)
    assert np.all(np.isfinite(out)), f"{what}: non-finite / unwritten output"
    err = relerr(out, quantize(ref, dt))
    assert err < TOL[dt], f"{what}: rel err {err:.3g}"


FORCED = [  # op, N, C, H, K, R, pad, stride, dil, mode, layout, dtype
    ("fwd", 2, 3, 32, 16, 7, 3, 2, 1, "CROSS_CORRELATION", "nhwc", "HALF"),     # first layer
    ("fwd", 2, 3, 17, 64, 3, 1, 1, 1, "CROSS_CORRELATION", "nchw", "BFLOAT16"),
    ("fwd", 2, 5, 12, 7, 3, 1, 1, 2, "CONVOLUTION", "nchw", "HALF"),           # odd K too
    ("fwd", 3, 12, 10, 20, 1, 0, 1, 1, "CROSS_CORRELATION", "nhwc", "BFLOAT16"),
    ("bwd_data", 2, 3, 16, 5, 3, 1, 1, 1, "CROSS_CORRELATION", "nhwc", "HALF"),
    ("bwd_data", 2, 7, 15, 16, 3, 1, 2, 1, "CONVOLUTION", "nchw", "BFLOAT16"),
    ("bwd_data", 2, 3, 16, 5, 1, 0, 2, 1, "CROSS_CORRELATION", "nhwc", "HALF"),  # strided 1 x 1
    ("bwd_data", 2, 20, 12, 12, 3, 1, 1, 1, "CROSS_CORRELATION", "nhwc", "BFLOAT16"),
    ("bwd_filter", 2, 3, 16, 5, 3, 1, 1, 1, "CROSS_CORRELATION", "nhwc", "HALF"),
    ("bwd_filter", 2, 12, 15, 20, 3, 1, 2, 1, "CONVOLUTION", "nchw", "BFLOAT16"),
    ("bwd_filter", 4, 16, 12, 3, 1, 0, 1, 1, "CROSS_CORRELATION", "nhwc", "HALF"),  # K odd only
    ("bwd_filter", 2, 3, 32, 64, 7, 3, 2, 1, "CROSS_CORRELATION", "nhwc", "BFLOAT16"),  # first layer
]


@pytest.mark.parametrize("case", range(len(FORCED)))
def test_padded_conv_forced(R, case, monkeypatch):
    """HIPDNN_CABI_HIP_PAD=1: the pre-pass wherever a channel count is not a multiple of 8."""
    monkeypatch.setenv("HIPDNN_CABI_HIP_PAD", "1")
    op, N, C, H, K, Rk, pad, st, dil, mode, lay, dt = FORCED[case]
    run_check(R, op, N, C, H, K, Rk, pad, st, dil, mode, lay, dt)


def test_padded_conv_on_the_im2col_map(R, monkeypatch):
    """The padded activations on the im2col tensor map (8 real channels of a 64-channel box)."""
    monkeypatch.setenv("HIPDNN_CABI_HIP_PAD", "1")
    monkeypatch.setenv("HIPDNN_CABI_HIP_CONV_IM2COL", "1")
    g = conv_graph("fwd", 2, 3, 20, 24, 3, 1, 1)[0]
    ns = plan_notes(g)
    if any("wgmma core" in n for n in ns):
        assert any("im2col" in n for n in ns), ns
    run_check(R, "fwd", 2, 3, 20, 24, 3, 1, 1)


AUTO = [  # op, N, C, H, K, R, pad, stride (the cost model pads these itself)
    ("fwd", 8, 3, 112, 64, 7, 3, 2),
    ("fwd", 8, 20, 28, 20, 3, 1, 1),
    ("bwd_data", 8, 20, 28, 20, 3, 1, 1),
    ("bwd_filter", 8, 20, 28, 20, 3, 1, 1),
]


@pytest.mark.parametrize("case", range(len(AUTO)))
def test_padded_conv_auto(R, case):
    op, N, C, H, K, Rk, pad, st = AUTO[case]
    run_check(R, op, N, C, H, K, Rk, pad, st)
