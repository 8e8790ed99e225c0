"""validate() says which op, which tensors and which dims are wrong; bad
arguments are BadParamError (not KeyError/ValueError); when no engine takes a valid graph the
message says which engines were asked and why each declined."""
from __future__ import annotations

import pytest

from hipdnn_cabi import frontend as hf
from hipdnn_cabi.errors import BadParamError

F32 = hf.DataType.HIPDNN_DATA_FLOAT


def graph():
    return hf.Graph(io_data_type=F32, intermediate_data_type=F32, compute_data_type=F32)


def _why(build):
    """The BadParamError message of building (ops infer shapes as they are added) + validate()."""
    with pytest.raises(BadParamError) as e:
        g = graph()
        build(g)
        g.validate()
    return str(e.value)


def test_conv_channel_mismatch():
    def build(g):
        x, w = g.tensor(name="x", dim=[1, 3, 8, 8]), g.tensor(name="w", dim=[4, 2, 3, 3])
        g.conv_fprop(x, w, name="conv1").set_output(True)
    m = _why(build)
    assert "conv_fprop 'conv1'" in m and "channel mismatch" in m and "'x'" in m and "'w'" in m
    assert "[1, 3, 8, 8]" in m and "[4, 2, 3, 3]" in m


def test_conv_rank_mismatch():
    def build(g):
        x, w = g.tensor(name="img", dim=[3, 8, 8]), g.tensor(name="w", dim=[4, 3, 3, 3])
        g.conv_fprop(x, w).set_output(True)
    m = _why(build)
    assert "'img'" in m and "3-D" in m and "4-D" in m and "same rank" in m


def test_conv_filter_larger_than_input():
    def build(g):
        x, w = g.tensor(name="x", dim=[1, 3, 2, 2]), g.tensor(name="w", dim=[4, 3, 5, 5])
        g.conv_fprop(x, w).set_output(True)
    assert "do not fit the input" in _why(build)


def test_matmul_k_mismatch():
    def build(g):
        a, b = g.tensor(name="a", dim=[2, 3, 4]), g.tensor(name="b", dim=[2, 5, 6])
        g.matmul(a, b, name="mm").set_output(True)
    m = _why(build)
    assert "matmul 'mm'" in m and "K mismatch" in m and "K = 4" in m and "K = 5" in m


def test_pointwise_broadcast_names_tensors():
    def build(g):
        a, b = g.tensor(name="a", dim=[2, 3]), g.tensor(name="b", dim=[4, 3])
        g.add(a, b).set_output(True)
    m = _why(build)
    assert "do not broadcast" in m and "'a'" in m and "'b'" in m and "[2, 3]" in m


def test_batchnorm_scale_channels():
    def build(g):
        x = g.tensor(name="x", dim=[2, 4, 3, 3])
        sc, bi = g.tensor(name="scale", dim=[1, 3, 1, 1]), g.tensor(name="bias", dim=[1, 4, 1, 1])
        m_, v_ = g.tensor(name="mean", dim=[1, 4, 1, 1]), g.tensor(name="inv_var", dim=[1, 4, 1, 1])
        g.batchnorm_inference(x, m_, v_, sc, bi).set_output(True)
    m = _why(build)
    assert "scale ('scale')" in m and "C = 4" in m


@pytest.mark.parametrize("make", [
    lambda g: g.pointwise(g.tensor(name="x", dim=[2]), mode="FOO"),
    lambda g: g.pointwise(g.tensor(name="x", dim=[2]), mode=12345),
    lambda g: g.tensor(name="x", dim="abc"),
    lambda g: g.tensor(name="x", dim=[2, -3]),
    lambda g: g.tensor(name="x", dim=[2, 0]),
    lambda g: g.tensor(name="x", dim=[2, 3], stride=[1, "q"]),
    lambda g: g.tensor(name="x", dim=[2], data_type=999),
    lambda g: g.tensor(name="x", dim=[2]).set_dim([1, -1]),
    lambda g: g.reduction(g.tensor(name="x", dim=[2]), mode=999),
    lambda g: g.conv_fprop(g.tensor(name="x", dim=[1, 1, 4, 4]), g.tensor(name="w", dim=[1, 1, 3, 3]),
                           convolution_mode=77),
], ids=["mode-FOO", "mode-int", "dim-str", "dim-neg", "dim-zero", "stride-str", "dtype", "set_dim",
        "reduce-mode", "conv-mode"])
def test_bad_arguments_are_bad_param(make):
    with pytest.raises(BadParamError) as e:
        make(graph())
    assert not isinstance(e.value, (KeyError,))
    assert str(e.value).strip()


@pytest.mark.needs_cpu_engine
def test_no_engine_says_who_was_asked_and_why():
    g = graph()
    x = g.tensor(name="x", dim=[1, 2, 5, 5], data_type=hf.DataType.HIPDNN_DATA_FP4_E2M1)
    w = g.tensor(name="w", dim=[3, 2, 3, 3], data_type=hf.DataType.HIPDNN_DATA_FP4_E2M1)
    g.conv_fprop(x, w).set_output(True)
    with pytest.raises(hf.GraphNotSupportedError) as e:
        g.build()
    m = str(e.value)
    assert "No engine configurations available for the graph." in m
    # the backend keeps each engine's reason and the frontend appends it
    assert "No engine accepted the operation graph" in m
    assert "HIPDNN_CABI_CPU_REFERENCE_ENGINE declined the graph:" in m
