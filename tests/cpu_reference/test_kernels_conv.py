"""Convolution fwd / dgrad / wgrad against direct summation over output positions and
filter taps (vectorised over the batch and channels only)."""
import itertools

import numpy as np
import pytest

from cpuref_testutil import FLOAT_TYPES, LAYOUTS, assert_close, make_tensor, quantize, roundtrip_output
from engine_plugins.cpu_reference.kernels import conv


def _out_size(S, R, pre, post, st, dil):
    return [(s + a + b - d * (r - 1) - 1) // t + 1 for s, r, a, b, t, d in zip(S, R, pre, post, st, dil)]


def _taps(S, O, R, pre, st, dil):
    """(output position, tap, input position) triples that fall inside the input."""
    for opos in itertools.product(*(range(o) for o in O)):
        for rpos in itertools.product(*(range(r) for r in R)):
            ipos = tuple(o * t - a + r * d for o, t, a, r, d in zip(opos, st, pre, rpos, dil))
            if all(0 <= i < s for i, s in zip(ipos, S)):
                yield opos, rpos, ipos


def _flip(w):
    return w[(slice(None), slice(None)) + (slice(None, None, -1),) * (w.ndim - 2)]


def ref_fwd(x, w, pre, post, st, dil, flip):
    w = _flip(w) if flip else w
    N, C = x.shape[:2]
    K, Cg = w.shape[:2]
    G = C // Cg
    Kg = K // G
    O = _out_size(x.shape[2:], w.shape[2:], pre, post, st, dil)
    y = np.zeros((N, K, *O))
    for opos, rpos, ipos in _taps(x.shape[2:], O, w.shape[2:], pre, st, dil):
        xs = x[(slice(None), slice(None)) + ipos]  # (N, C)
        for g in range(G):
            wk = w[(slice(g * Kg, (g + 1) * Kg), slice(None)) + rpos]  # (Kg, Cg)
            y[(slice(None), slice(g * Kg, (g + 1) * Kg)) + opos] += xs[:, g * Cg:(g + 1) * Cg] @ wk.T
    return y


def ref_dgrad(dy, w, x_shape, pre, post, st, dil, flip):
    w = _flip(w) if flip else w
    N, C = x_shape[:2]
    K, Cg = w.shape[:2]
    G = C // Cg
    Kg = K // G
    dx = np.zeros(x_shape)
    for opos, rpos, ipos in _taps(x_shape[2:], dy.shape[2:], w.shape[2:], pre, st, dil):
        for g in range(G):
            wk = w[(slice(g * Kg, (g + 1) * Kg), slice(None)) + rpos]
            dx[(slice(None), slice(g * Cg, (g + 1) * Cg)) + ipos] += \
                dy[(slice(None), slice(g * Kg, (g + 1) * Kg)) + opos] @ wk
    return dx


def ref_wgrad(x, dy, w_shape, pre, post, st, dil, flip):
    K, Cg = w_shape[:2]
    C = x.shape[1]
    G = C // Cg
    Kg = K // G
    dw = np.zeros(w_shape)
    for opos, rpos, ipos in _taps(x.shape[2:], dy.shape[2:], w_shape[2:], pre, st, dil):
        for g in range(G):
            dw[(slice(g * Kg, (g + 1) * Kg), slice(None)) + rpos] += \
                dy[(slice(None), slice(g * Kg, (g + 1) * Kg)) + opos].T @ x[(slice(None), slice(g * Cg, (g + 1) * Cg)) + ipos]
    return _flip(dw) if flip else dw


def _configs():
    """Fixed-seed random problem configurations (2-D and 3-D, groups, padding...)."""
    rng = np.random.default_rng(1234)
    cfgs = [
        # (N, C, K, G, S, R, pre, post, stride, dilation, mode)
        (2, 4, 6, 1, (6, 7), (3, 3), (1, 1), (1, 1), (1, 1), (1, 1), "HIPDNN_CROSS_CORRELATION"),
        (1, 6, 4, 2, (7, 5), (3, 2), (2, 0), (1, 2), (2, 1), (1, 2), "HIPDNN_CONVOLUTION"),
        (3, 3, 3, 3, (5, 6), (3, 3), (1, 1), (0, 1), (1, 2), (1, 1), "HIPDNN_CROSS_CORRELATION"),
        (2, 4, 4, 1, (4, 4, 5), (2, 3, 3), (1, 0, 1), (0, 1, 1), (1, 2, 1), (1, 1, 2), "HIPDNN_CROSS_CORRELATION"),
        (1, 4, 6, 2, (5, 4, 4), (3, 1, 2), (0, 0, 1), (2, 1, 0), (2, 1, 1), (1, 1, 1), "HIPDNN_CONVOLUTION"),
        (2, 5, 3, 1, (8, 8), (1, 1), (0, 0), (0, 0), (1, 1), (1, 1), "HIPDNN_CROSS_CORRELATION"),
        (2, 3, 4, 1, (9, 9), (4, 4), (0, 0), (0, 0), (3, 3), (1, 1), "HIPDNN_CROSS_CORRELATION"),
        (3, 4, 2, 2, (11,), (3,), (2,), (1,), (2,), (2,), "HIPDNN_CONVOLUTION"),  # 1-D
        (2, 40, 8, 1, (3, 3), (2, 2), (1, 0), (0, 1), (1, 1), (1, 1), "HIPDNN_CROSS_CORRELATION"),
    ]
    for _ in range(3):  # random 2-D problems
        G = int(rng.integers(1, 3))
        Cg, Kg = int(rng.integers(1, 4)), int(rng.integers(1, 4))
        R = tuple(int(v) for v in rng.integers(1, 4, 2))
        dil = tuple(int(v) for v in rng.integers(1, 3, 2))
        pre = tuple(int(v) for v in rng.integers(0, 3, 2))
        post = tuple(int(v) for v in rng.integers(0, 3, 2))
        st = tuple(int(v) for v in rng.integers(1, 3, 2))
        S = tuple(int(r * d + v) for r, d, v in zip(R, dil, rng.integers(1, 5, 2)))
        mode = ["HIPDNN_CONVOLUTION", "HIPDNN_CROSS_CORRELATION"][int(rng.integers(0, 2))]
        cfgs.append((int(rng.integers(1, 4)), G * Cg, G * Kg, G, S, R, pre, post, st, dil, mode))
    return cfgs


CONFIGS = _configs()


def _problem(cfg, t, seed):
    N, C, K, G, S, R, pre, post, st, dil, mode = cfg
    rng = np.random.default_rng(seed)
    x = quantize(rng.standard_normal((N, C) + S), t)
    w = quantize(rng.standard_normal((K, C // G) + R), t)
    O = _out_size(S, R, pre, post, st, dil)
    dy = quantize(rng.standard_normal((N, K, *O)), t)
    return x, w, dy


def _scale(a, b, n):
    return float(np.max(np.abs(a)) * np.max(np.abs(b)) * np.sqrt(n))


@pytest.mark.parametrize("lay", LAYOUTS)
@pytest.mark.parametrize("t", FLOAT_TYPES)
@pytest.mark.parametrize("ci", range(len(CONFIGS)))
def test_conv_fwd(ci, t, lay):
    cfg = CONFIGS[ci]
    N, C, K, G, S, R, pre, post, st, dil, mode = cfg
    x_ref, w_ref, _ = _problem(cfg, t, ci)
    x, _ = make_tensor(x_ref, t, lay)
    w, _ = make_tensor(w_ref, t, lay)
    y = conv.conv_fwd(x, w, pre, post, st, dil, mode)
    ref = ref_fwd(x_ref, w_ref, pre, post, st, dil, mode == "HIPDNN_CONVOLUTION")
    assert y.shape == ref.shape == conv.conv_output_shape(x.shape, w.shape, pre, post, st, dil)
    got = roundtrip_output(y, t, lay)
    assert_close(got, ref, t, scale=_scale(x_ref, w_ref, C // G * np.prod(R)) * 0.1, what=f"fwd cfg{ci}")


@pytest.mark.parametrize("lay", LAYOUTS)
@pytest.mark.parametrize("t", FLOAT_TYPES)
@pytest.mark.parametrize("ci", range(len(CONFIGS)))
def test_conv_bwd_data(ci, t, lay):
    cfg = CONFIGS[ci]
    N, C, K, G, S, R, pre, post, st, dil, mode = cfg
    x_ref, w_ref, dy_ref = _problem(cfg, t, 100 + ci)
    dy, _ = make_tensor(dy_ref, t, lay)
    w, _ = make_tensor(w_ref, t, lay)
    dx = conv.conv_bwd_data(dy, w, x_ref.shape, pre, post, st, dil, mode)
    ref = ref_dgrad(dy_ref, w_ref, x_ref.shape, pre, post, st, dil, mode == "HIPDNN_CONVOLUTION")
    got = roundtrip_output(dx, t, lay)
    assert_close(got, ref, t, scale=_scale(dy_ref, w_ref, K // G * np.prod(R)) * 0.1, what=f"dgrad cfg{ci}")


@pytest.mark.parametrize("lay", LAYOUTS)
@pytest.mark.parametrize("t", FLOAT_TYPES)
@pytest.mark.parametrize("ci", range(len(CONFIGS)))
def test_conv_bwd_filter(ci, t, lay):
    cfg = CONFIGS[ci]
    N, C, K, G, S, R, pre, post, st, dil, mode = cfg
    x_ref, w_ref, dy_ref = _problem(cfg, t, 200 + ci)
    x, _ = make_tensor(x_ref, t, lay)
    dy, _ = make_tensor(dy_ref, t, lay)
    dw = conv.conv_bwd_filter(x, dy, w_ref.shape, pre, post, st, dil, mode)
    ref = ref_wgrad(x_ref, dy_ref, w_ref.shape, pre, post, st, dil, mode == "HIPDNN_CONVOLUTION")
    got = roundtrip_output(dw, t, lay)
    assert_close(got, ref, t, scale=_scale(x_ref, dy_ref, N * np.prod(dy_ref.shape[2:])) * 0.1,
                 what=f"wgrad cfg{ci}")


@pytest.mark.parametrize("ci", range(len(CONFIGS)))
def test_adjoint_identities(ci):
    """<conv(x, w), dy> == <x, dgrad(dy, w)> == <w, wgrad(x, dy)> in float64."""
    N, C, K, G, S, R, pre, post, st, dil, mode = CONFIGS[ci]
    x, w, dy = _problem(CONFIGS[ci], "HIPDNN_DATA_DOUBLE", 300 + ci)
    y = conv.conv_fwd(x, w, pre, post, st, dil, mode)
    dx = conv.conv_bwd_data(dy, w, x.shape, pre, post, st, dil, mode)
    dw = conv.conv_bwd_filter(x, dy, w.shape, pre, post, st, dil, mode)
    a = np.sum(y * dy)
    np.testing.assert_allclose(np.sum(x * dx), a, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(np.sum(w * dw), a, rtol=1e-10, atol=1e-10)


def test_small_chunks_and_half_inputs(monkeypatch):
    """Batch chunking gives the same result; float16 arrays are accepted directly."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal((5, 4, 6, 6)).astype(np.float16)
    w = rng.standard_normal((4, 2, 3, 3)).astype(np.float16)
    y_full = conv.conv_fwd(x, w, 1, 1, 1, 1)
    dy = rng.standard_normal(y_full.shape).astype(np.float16)
    dx_full = conv.conv_bwd_data(dy, w, x.shape, 1, 1, 1, 1)
    dw_full = conv.conv_bwd_filter(x, dy, w.shape, 1, 1, 1, 1)
    assert y_full.dtype == np.float32
    monkeypatch.setattr(conv, "CHUNK_BYTES", 1)
    np.testing.assert_allclose(conv.conv_fwd(x, w, 1, 1, 1, 1), y_full, rtol=1e-6, atol=1e-5)
    np.testing.assert_allclose(conv.conv_bwd_data(dy, w, x.shape, 1, 1, 1, 1), dx_full, rtol=1e-6, atol=1e-5)
    np.testing.assert_allclose(conv.conv_bwd_filter(x, dy, w.shape, 1, 1, 1, 1), dw_full, rtol=1e-5, atol=1e-4)
    ref = ref_fwd(x.astype(np.float64), w.astype(np.float64), (1, 1), (1, 1), (1, 1), (1, 1), False)
    np.testing.assert_allclose(y_full, ref, rtol=1e-5, atol=1e-5)


def test_errors_and_modes():
    x = np.zeros((1, 4, 5, 5), np.float32)
    with pytest.raises(ValueError):
        conv.conv_fwd(x, np.zeros((3, 3, 3, 3), np.float32))  # 4 not a multiple of 3
    with pytest.raises(ValueError):
        conv.conv_fwd(x, np.zeros((3, 2, 3, 3), np.float32))  # K=3 not a multiple of G=2
    with pytest.raises(ValueError):
        conv.conv_bwd_data(np.zeros((1, 2, 4, 4)), np.zeros((2, 4, 3, 3)), x.shape, 1, 1, 1, 1)
    with pytest.raises(ValueError):
        conv.conv_fwd(x, np.zeros((2, 4, 3, 3), np.float32), stride=(1, 1, 1))
    assert conv.is_convolution_mode("CONVOLUTION") and not conv.is_convolution_mode("HIPDNN_CROSS_CORRELATION")
    assert not conv.is_convolution_mode(None)
    with pytest.raises(ValueError):
        conv.is_convolution_mode("HIPDNN_CORRELATION")



@pytest.mark.parametrize("groups", [1, 2])
def test_conv_fwd_int8_exact(groups):
    """Integer compute: int64 sums, exact where float32 would round (|y| > 2**24)."""
    rng = np.random.default_rng(3)
    C, K = 1200, 4
    x = rng.integers(-128, 128, (2, C, 4, 4)).astype(np.int8)
    x[0] = -128
    w = rng.integers(-128, 128, (K, C // groups, 3, 3)).astype(np.int8)
    w[0] = -128
    y = conv.conv_fwd(x, w, 1, 1, 1, 1, compute_dtype=np.int32)
    assert y.dtype == np.int64
    xp = np.pad(x.astype(np.int64), [(0, 0), (0, 0), (1, 1), (1, 1)])
    Cg, Kg = C // groups, K // groups
    ref = np.zeros((2, K, 4, 4), np.int64)
    for r, s in itertools.product(range(3), range(3)):
        for g in range(groups):
            ref[:, g * Kg:(g + 1) * Kg] += np.einsum(
                "nchw,kc->nkhw", xp[:, g * Cg:(g + 1) * Cg, r:r + 4, s:s + 4],
                w[g * Kg:(g + 1) * Kg, :, r, s].astype(np.int64))
    assert np.abs(ref).max() > 2 ** 24
    np.testing.assert_array_equal(y, ref)
