"""layout.view / write / store and dtypes conversions."""
import json
import os
import struct

import numpy as np
import pytest

from cpuref_testutil import bf16_round_ref
from engine_plugins.cpu_reference.kernels import dtypes, layout

ABI = "/work/shared/abi/hipdnn_abi.json"


def test_packed_strides():
    assert layout.nchw_strides((2, 3, 4, 5)) == (60, 20, 5, 1)
    assert layout.nhwc_strides((2, 3, 4, 5)) == (60, 1, 15, 3)
    assert layout.nhwc_strides((2, 3, 4, 5, 6)) == (360, 1, 90, 18, 3)
    assert layout.packed_strides((2, 3), (1, 0)) == (1, 2)
    with pytest.raises(ValueError):
        layout.packed_strides((2, 3), (0, 0))


@pytest.mark.parametrize("dt", [np.float32, np.float64, np.float16, np.uint16, np.int32])
def test_view_nchw_nhwc(dt):
    rng = np.random.default_rng(1)
    dims = (2, 3, 4, 5)
    logical = (rng.standard_normal(dims) * 100).astype(dt)
    # NCHW buffer
    buf = logical.ravel().copy()
    v = layout.view(buf, dims, layout.nchw_strides(dims), dt)
    np.testing.assert_array_equal(v, logical)
    # NHWC buffer laid out by hand
    buf2 = np.ascontiguousarray(logical.transpose(0, 2, 3, 1)).ravel()
    v2 = layout.view(buf2, dims, layout.nhwc_strides(dims), dt)
    np.testing.assert_array_equal(v2, logical)
    # view aliases memory
    v2[1, 2, 3, 4] = 7
    assert buf2.reshape(2, 4, 5, 3)[1, 3, 4, 2] == 7


def test_view_offset_padding_bytes_and_broadcast():
    # padded row stride (7 instead of 5), element offset 3, over a bytearray
    dims, strides = (3, 5), (7, 1)
    raw = bytearray(4 * (3 + 3 * 7))
    flat = np.frombuffer(raw, dtype=np.float32)
    flat[:] = np.arange(flat.size)
    v = layout.view(raw, dims, strides, np.float32, offset=3)
    exp = np.array([[3 + 7 * i + j for j in range(5)] for i in range(3)], np.float32)
    np.testing.assert_array_equal(v, exp)
    # zero strides broadcast a per-channel vector
    c = np.arange(4, dtype=np.float32)
    b = layout.view(c, (2, 4, 3, 3), (0, 1, 0, 0), np.float32, writeable=False)
    np.testing.assert_array_equal(b, np.broadcast_to(c[None, :, None, None], (2, 4, 3, 3)))
    with pytest.raises(ValueError):
        layout.write(layout.view(c, (2, 4), (0, 1), np.float32), 1.0)


def test_view_negative_stride_and_bounds():
    buf = np.arange(10, dtype=np.int32)
    v = layout.view(buf, (5,), (-2,), np.int32, offset=8)
    np.testing.assert_array_equal(v, [8, 6, 4, 2, 0])
    with pytest.raises(ValueError):
        layout.view(buf, (6,), (2,), np.int32)
    with pytest.raises(ValueError):
        layout.view(buf, (5,), (-2,), np.int32, offset=7)
    assert layout.view(buf, (0, 3), (3, 1), np.int32).shape == (0, 3)


def test_from_address_and_store_load():
    dims = (2, 3, 2, 2)
    arr = np.zeros(24, np.uint16)
    raw = layout.from_address(arr.ctypes.data, arr.nbytes)
    vals = np.linspace(-3, 3, 24).reshape(dims)
    layout.store(raw, dims, layout.nhwc_strides(dims), "HIPDNN_DATA_BFLOAT16", vals)
    back = (arr.astype(np.uint32) << 16).view(np.float32).reshape(2, 2, 2, 3).transpose(0, 3, 1, 2)
    np.testing.assert_array_equal(back, bf16_round_ref(vals.astype(np.float32)).astype(np.float32))
    got = layout.load(raw, dims, layout.nhwc_strides(dims), "HIPDNN_DATA_BFLOAT16")
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, back)


def test_bf16_conversions():
    rng = np.random.default_rng(2)
    vals = np.concatenate([
        rng.standard_normal(5000).astype(np.float32) * 10.0 ** rng.integers(-30, 30, 5000),
        np.array([0.0, -0.0, np.inf, -np.inf, 1.0, 3.0e38, 3.4e38, 1e-40, -1e-42], np.float32),
    ]).astype(np.float32)
    # ties: 1 + 2^-8 (tie, even -> 1), 1 + 3*2^-8 (tie, odd -> up)
    ties = np.array([1 + 2.0 ** -8, 1 + 3 * 2.0 ** -8, -(1 + 2.0 ** -8)], np.float32)
    vals = np.concatenate([vals, ties])
    bits = dtypes.float32_to_bf16(vals)
    assert bits.dtype == np.uint16
    got = dtypes.bf16_to_float32(bits).astype(np.float64)
    np.testing.assert_array_equal(got, bf16_round_ref(vals))
    assert got[-3] == 1.0 and got[-2] == 1 + 4 * 2.0 ** -8 and got[-1] == -1.0
    # exact widening: bit pattern shifted left 16
    for b in (0x3F80, 0xC000, 0x7F80, 0x0001):
        exp = struct.unpack("<f", struct.pack("<I", b << 16))[0]
        assert dtypes.bf16_to_float32(np.array([b], np.uint16))[0] == np.float32(exp)
    # NaN stays NaN with its sign
    nb = dtypes.float32_to_bf16(np.array([np.nan, -np.nan], np.float32))
    f = dtypes.bf16_to_float32(nb)
    assert np.isnan(f).all() and np.signbit(f[1]) and not np.signbit(f[0])
    # largest finite rounds up to inf (RNE overflow)
    assert np.isinf(dtypes.bf16_to_float32(dtypes.float32_to_bf16(np.float32(3.4e38))))


def test_decode_encode_types():
    x = np.array([1.5, -2.25, 65504.0, 1e-8], np.float64)
    h = dtypes.encode(x, "HIPDNN_DATA_HALF")
    assert h.dtype == np.float16
    assert dtypes.decode(h, "HIPDNN_DATA_HALF").dtype == np.float32
    assert dtypes.encode(np.array([1.4, 2.5, -300.0, np.nan]), "HIPDNN_DATA_INT8").tolist() == [1, 2, -128, 0]
    assert dtypes.encode(np.array([0.0, 2.0]), "HIPDNN_DATA_BOOLEAN").tolist() == [False, True]
    assert dtypes.compute_dtype("HIPDNN_DATA_BFLOAT16") == np.float32
    assert dtypes.compute_dtype("HIPDNN_DATA_DOUBLE") == np.float64
    assert dtypes.storage_dtype("bf16") == np.uint16
    with pytest.raises(KeyError):
        dtypes.data_type_info("HIPDNN_DATA_INT4")      # narrow floats are supported, INT4 not
    assert dtypes.data_type_info("HIPDNN_DATA_FP8_E4M3").minifloat


@pytest.mark.skipif(not os.path.exists(ABI), reason="shared ABI JSON not present")
def test_data_type_names_exist_in_abi():
    names = json.load(open(ABI))["enums"]["hipdnnDataType_t"]["values"]
    for n in dtypes.DATA_TYPES:
        # keys follow the FlatBuffers names; the C enum spells FP6 with an _EXT suffix
        assert n in names or n + "_EXT" in names


def test_encode_integer_to_narrower_integer_saturates():
    encode = dtypes.encode
    a = np.array([-2**40, -129, -128, 0, 127, 128, 300, 2**40], dtype=np.int64)
    assert encode(a, "INT8").tolist() == [-128, -128, -128, 0, 127, 127, 127, 127]
    assert encode(a, "UINT8").tolist() == [0, 0, 0, 0, 127, 128, 255, 255]
    assert encode(a, "INT32").tolist() == [-2**31, -129, -128, 0, 127, 128, 300, 2**31 - 1]
    assert encode(np.array([-5, 200], dtype=np.int32), "INT64").tolist() == [-5, 200]
    assert encode(np.array([255], dtype=np.uint8), "INT8").tolist() == [127]
