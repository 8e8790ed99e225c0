"""Frontend unit tests: tensors, scalars (RFC 0016 §4.3), shape inference, validate (no backend
calls), the §2.2 call sequence, error mapping."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

from hipdnn_cabi import errors
from hipdnn_cabi import frontend as hf
from hipdnn_cabi._generated.enums import AttributeName as A
from hipdnn_cabi._generated.enums import Status
from hipdnn_cabi.frontend._capi import Api

F32 = hf.DataType.HIPDNN_DATA_FLOAT
H16 = hf.DataType.HIPDNN_DATA_HALF


def graph(**kw):
    return hf.Graph(io_data_type=F32, intermediate_data_type=F32, compute_data_type=F32, **kw)


# ----------------------------------------------------------------------------- tensors
def test_tensor_defaults_and_chaining():
    g = graph()
    t = g.tensor(name="x", dim=[2, 3, 4])
    assert t.get_stride() == [12, 4, 1] and t.get_data_type() is None and not t.get_is_virtual()
    assert t.set_uid(7).set_data_type(H16).set_name("y") is t
    assert (t.get_uid(), t.get_data_type(), t.get_name()) == (7, H16, "y")


def test_tensor_like_numpy_and_tensor():
    g = graph()
    a = np.zeros((2, 3, 4), np.float16).transpose(0, 2, 1)
    t = g.tensor_like(a, name="a")
    assert t.get_dim() == [2, 4, 3] and t.get_stride() == [12, 1, 4] and t.get_data_type() == H16
    u = g.tensor_like(t)
    assert (u.get_dim(), u.get_stride(), u.get_data_type()) == (t.get_dim(), t.get_stride(), H16)


def test_operation_outputs_are_virtual_until_set_output():
    g = graph()
    x = g.tensor(name="x", dim=[4])
    y = g.relu(x)
    assert y.get_is_virtual()
    assert y.set_output(True) is y and not y.get_is_virtual()


# ----------------------------------------------------------------------------- scalars
def test_scalar_states_rfc0016():
    g = graph()
    c = g.tensor(0.5, hf.ScalarType.COMPILE_TIME_CONST)
    assert (c.get_compile_time_constant(), c.get_pass_by_value(), c.get_is_pass_by_value()) == (0.5, None, True)
    assert c.get_has_compile_time_constant() and not c.get_is_runtime_pass_by_value()
    assert c.get_dim() == [1] and c.get_data_type() == F32

    d = g.tensor(0.25, hf.ScalarType.RUNTIME_PARAM)       # runtime with default
    assert (d.get_compile_time_constant(), d.get_pass_by_value(), d.get_is_pass_by_value()) == (None, 0.25, True)
    assert d.get_is_runtime_pass_by_value()

    u = g.tensor(name="s", dim=[1], data_type=F32).set_as_runtime_parameter()   # user supplied
    assert (u.get_compile_time_constant(), u.get_pass_by_value(), u.get_is_pass_by_value()) == (None, None, True)

    c.set_as_runtime_parameter()                           # clears the value
    assert c.get_value_variant() is None and c.get_is_runtime_pass_by_value()
    d.set_is_pass_by_value(False)                          # keeps the value: compile-time constant
    assert d.get_compile_time_constant() == 0.25
    d.set_is_pass_by_value(True)
    assert d.get_pass_by_value() == 0.25
    e = g.tensor(name="e", dim=[1])
    assert not e.get_is_pass_by_value()
    e.set_is_pass_by_value(True)                           # valueless + flag = user supplied
    assert e.get_is_pass_by_value() and e.get_pass_by_value() is None
    assert g.scalar(3).get_data_type() == hf.DataType.HIPDNN_DATA_INT32
    assert g.scalar(np.float16(1)).get_data_type() == H16


def test_virtual_tensor_cannot_be_runtime_param_or_carry_value():
    for mutate in (lambda t: t.set_as_runtime_parameter(), lambda t: t.set_value(1.0)):
        g = graph()
        x = g.tensor(name="x", dim=[1])
        y = g.relu(x)
        z = g.relu(y).set_output(True)
        mutate(y)
        with pytest.raises(errors.BadParamError, match="virtual"):
            g.validate()
        del z


def test_post_build_setter_warns(handle):
    g = graph(handle=handle)
    x = g.tensor(name="x", dim=[4])
    s = g.tensor(2.0, hf.ScalarType.COMPILE_TIME_CONST)
    g.mul(x, s).set_output(True)
    g.build_operation_graph()
    with pytest.warns(RuntimeWarning, match="after the graph was built"):
        s.set_value(3.0)
    with pytest.warns(RuntimeWarning):
        s.set_as_runtime_parameter()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        graph().tensor(1.0, hf.ScalarType.COMPILE_TIME_CONST).set_value(2.0)   # before build: silent


# ----------------------------------------------------------------------------- inference
def test_conv_inference():
    g = graph()
    x, w = g.tensor(name="x", dim=[2, 3, 17, 12]), g.tensor(name="w", dim=[8, 3, 3, 5])
    y = g.conv_fprop(x, w, pre_padding=[1, 2], post_padding=[1, 2], stride=[2, 3], dilation=[2, 1])
    assert y.get_dim() == [2, 8, (17 + 2 - 4 - 1) // 2 + 1, (12 + 4 - 4 - 1) // 3 + 1]
    dx = g.conv_dgrad(g.tensor(name="dy", dim=[2, 8, 8, 8]), w, padding=1)
    assert dx.get_dim() == [2, 3, 8, 10]   # (8-1) - 2 + (5-1) + 1
    dw = g.conv_wgrad(x, g.tensor(name="dy2", dim=[2, 8, 17, 12]), padding=[1, 2])
    assert dw.get_dim() == [8, 3, 3, 5]


def test_pointwise_matmul_norm_inference():
    g = graph()
    a = g.tensor(name="a", dim=[4, 1, 5])
    assert g.add(a, g.tensor(name="b", dim=[3, 1])).get_dim() == [4, 3, 5]
    assert g.matmul(g.tensor(name="m", dim=[7, 2, 3]), g.tensor(name="n", dim=[3, 4])).get_dim() == [7, 2, 4]
    x = g.tensor(name="x", dim=[2, 4, 3, 3])
    sc = g.tensor(name="sc", dim=[1, 4, 1, 1])
    y, mean, inv, nrm, nrv = g.batchnorm(x, sc, sc, 1e-5)
    assert (y.get_dim(), mean.get_dim(), nrm, nrv) == ([2, 4, 3, 3], [1, 4, 1, 1], None, None)
    _, m2, _ = g.layernorm(x, g.tensor(name="s3", dim=[1, 1, 3, 3]), sc, 1e-5)
    assert m2.get_dim() == [2, 4, 1, 1]
    _, r = g.rmsnorm(x, sc, 1e-5)
    assert r.get_dim() == [2, 1, 1, 1]
    with pytest.raises(errors.BadParamError, match="broadcast"):
        g.add(g.tensor(name="p", dim=[3]), g.tensor(name="q", dim=[4]))


# ----------------------------------------------------------------------------- validate
class _NoBackend:
    def __getattr__(self, name):
        raise AssertionError(f"validate() touched the backend: {name}")


def test_validate_makes_no_backend_calls():
    g = graph()
    x = g.tensor(name="x", dim=[2, 3])
    g.relu(g.add(x, x)).set_output(True)
    g.api = _NoBackend()
    g.validate()
    assert [t.get_uid() for t in g.get_tensors()] == [0, 1, 2]   # from 0, as hipDNN numbers them
    assert g.nodes == [("pointwise", "pointwise_0"), ("pointwise", "pointwise_1")]


def test_validate_errors():
    g = graph()
    g.relu(g.tensor(name="a", dim=[2], uid=5)).set_output(True)
    g.relu(g.tensor(name="b", dim=[2], uid=5))
    with pytest.raises(errors.BadParamError, match="duplicate tensor uid 5"):
        g.validate()

    g = graph()
    g.relu(g.tensor(name="a", dim=[2])).set_output(True)
    g.relu(g.tensor(name="b", dim=[2])).set_output(True)
    with pytest.raises(errors.BadParamError, match="component"):
        g.validate()

    g = graph()
    g.reduction(g.tensor(name="a", dim=[2, 3]), hf.ReduceTensorOp.HIPDNN_REDUCE_TENSOR_ADD).set_output(True)
    with pytest.raises(errors.BadParamError, match="dims are not set"):
        g.validate()

    g = hf.Graph()
    g.relu(g.tensor(name="a", dim=[2])).set_output(True)
    with pytest.raises(errors.BadParamError, match="data type is not set"):
        g.validate()

    with pytest.raises(errors.BadParamError, match="no operations"):
        graph().validate()


def test_uids_skip_user_uids_and_topological_order():
    g = graph()
    x = g.tensor(name="x", dim=[3], uid=1)
    y = g.relu(x)
    z = g.exp(y).set_output(True)
    g.validate()
    # numbered from 0 (as hipDNN's frontend does), skipping the user's uid
    assert x.get_uid() == 1 and y.get_uid() == 0 and z.get_uid() == 2


# ----------------------------------------------------------------------------- §2.2 call sequence
class _Recorder:
    """Wraps the cffi lib; records (function, attribute name) of every call."""

    def __init__(self, lib, log):
        self._lib, self._log = lib, log

    def __getattr__(self, name):
        fn = getattr(self._lib, name)

        def call(*args):
            if name in ("hipdnnBackendSetAttribute", "hipdnnBackendGetAttribute"):
                self._log.append((name, A(args[1]).name[len("HIPDNN_ATTR_"):]))
            elif name in ("hipdnnBackendFinalize", "hipdnnBackendDestroyDescriptor",
                          "hipdnnBackendCreateDescriptor"):
                self._log.append((name, None))
            return fn(*args)
        return call


def test_build_operation_graph_call_sequence(handle):
    g = graph(handle=handle, name="seq")
    x = g.tensor(name="x", dim=[4])
    s = g.tensor(name="", dim=[1], data_type=F32).set_as_runtime_parameter()
    y = g.mul(x, s).set_output(True)
    y.set_name("")
    c = g.tensor(2.0, hf.ScalarType.COMPILE_TIME_CONST, name="c")
    g.add(y, c)
    g.nodes  # noqa: B018
    api = Api.__new__(Api)
    api.ffi, log = g.api.ffi, []
    api.lib = _Recorder(g.api.lib, log)
    g.api = api
    g.build_operation_graph()
    sets = [a for f, a in log if f == "hipdnnBackendSetAttribute"]
    tensor_x = ["TENSOR_UNIQUE_ID", "TENSOR_NAME_EXT", "TENSOR_DATA_TYPE", "TENSOR_DIMENSIONS",
                "TENSOR_STRIDES", "TENSOR_IS_VIRTUAL"]
    tensor_s = ["TENSOR_UNIQUE_ID", "TENSOR_DATA_TYPE", "TENSOR_DIMENSIONS", "TENSOR_STRIDES",
                "TENSOR_IS_VIRTUAL", "TENSOR_IS_RUNTIME_PASS_BY_VALUE_EXT"]
    tensor_y = ["TENSOR_UNIQUE_ID", "TENSOR_DATA_TYPE", "TENSOR_DIMENSIONS", "TENSOR_STRIDES",
                "TENSOR_IS_VIRTUAL"]
    op = ["OPERATION_POINTWISE_IN_0_EXT", "OPERATION_POINTWISE_IN_1_EXT",
          "OPERATION_POINTWISE_OUT_0_EXT", "POINTWISE_MODE", "POINTWISE_MATH_PREC", "OPERATION_NAME_EXT"]
    tensor_c = ["TENSOR_UNIQUE_ID", "TENSOR_NAME_EXT", "TENSOR_DATA_TYPE", "TENSOR_DIMENSIONS",
                "TENSOR_STRIDES", "TENSOR_IS_VIRTUAL", "TENSOR_VALUE_EXT"]
    graph_attrs = ["OPERATIONGRAPH_OPS", "OPERATIONGRAPH_COMPUTE_DATA_TYPE_EXT",
                   "OPERATIONGRAPH_INTERMEDIATE_DATA_TYPE_EXT", "OPERATIONGRAPH_IO_DATA_TYPE_EXT",
                   "OPERATIONGRAPH_IS_OVERRIDE_SHAPE_ENABLED_EXT", "OPERATIONGRAPH_NAME_EXT",
                   "OPERATIONGRAPH_HANDLE"]
    assert sets == tensor_x + tensor_s + tensor_y + op + tensor_c + ["TENSOR_UNIQUE_ID", "TENSOR_NAME_EXT",
                                                                     *tensor_y[1:]] + op + graph_attrs
    kinds = [f for f, _ in log if f != "hipdnnBackendSetAttribute"]
    assert kinds.count("hipdnnBackendCreateDescriptor") == 5 + 2 + 1
    assert kinds.count("hipdnnBackendFinalize") == 5 + 2 + 1
    # step 4: every tensor and op wrapper destroyed, only the graph survives
    assert kinds[-7:] == ["hipdnnBackendDestroyDescriptor"] * 7
    assert kinds.count("hipdnnBackendDestroyDescriptor") == 7


# ----------------------------------------------------------------------------- errors
@pytest.mark.parametrize("status", sorted(int(s) for s in errors.STATUS_TO_ERROR))
def test_status_maps_one_to_one(status, monkeypatch):
    a = Api.__new__(Api)
    monkeypatch.setattr(a, "last_error", lambda: "backend says no", raising=False)
    with pytest.raises(errors.HipdnnError) as ei:
        a.check(status, "call")
    assert type(ei.value) is errors.STATUS_TO_ERROR[status]
    assert ei.value.status == status and ei.value.message == "call: backend says no"


def test_backend_error_carries_last_error_text(handle):
    from hipdnn_cabi._generated.enums import AttributeType as T, DescriptorType as D
    a = hf.Graph(handle=handle).api
    d = a.create(D.HIPDNN_BACKEND_TENSOR_DESCRIPTOR)
    try:
        a.set(d, A.HIPDNN_ATTR_TENSOR_DIMENSIONS, T.HIPDNN_TYPE_INT64, [2])
        with pytest.raises(errors.BadParamError) as ei:
            a.finalize(d)                                 # no strides -> BAD_PARAM (spec §1.4)
        assert ei.value.status == Status.HIPDNN_STATUS_BAD_PARAM and ei.value.message
        with pytest.raises(errors.NullPointerError):
            a.check(a.lib.hipdnnBackendCreateDescriptor(int(D.HIPDNN_BACKEND_TENSOR_DESCRIPTOR), a.ffi.NULL))
    finally:
        a.destroy(d)


@pytest.mark.needs_cpu_engine
def test_graph_not_supported(handle):
    g = graph(handle=handle)
    x, w = g.tensor(name="x", dim=[1, 2, 5, 5]), g.tensor(name="w", dim=[3, 2, 3, 3])
    g.conv_fprop(x, w).set_dim([1, 3, 4, 4]).set_output(True)     # wrong output shape
    with pytest.raises(errors.BadParamError, match=r"output y .* has dims \[1, 3, 4, 4\], but its "
                                                   r"inputs give \[1, 3, 3, 3\]"):
        g.build()                                                  # validate() says what is wrong
    g = graph(handle=handle)                                       # valid, but no engine takes it
    x = g.tensor(name="x", dim=[1, 2, 5, 5], data_type=hf.DataType.HIPDNN_DATA_FP4_E2M1)
    w = g.tensor(name="w", dim=[3, 2, 3, 3], data_type=hf.DataType.HIPDNN_DATA_FP4_E2M1)
    g.conv_fprop(x, w).set_output(True)
    with pytest.raises(hf.GraphNotSupportedError, match="No engine configurations available") as ei:
        g.build()
    assert isinstance(ei.value, errors.NotSupportedError)
    assert ei.value.status == Status.HIPDNN_STATUS_NOT_SUPPORTED


@pytest.mark.needs_cpu_engine
def test_execute_checks(handle):
    g = graph(handle=handle)
    x = g.tensor(name="x", dim=[8])
    y = g.relu(x).set_output(True)
    with pytest.raises(errors.BadParamError, match="no built execution plan"):
        g.execute({x: np.zeros(8, np.float32), y: np.zeros(8, np.float32)})
    g.build()
    with pytest.raises(errors.BadParamError, match="lacks tensors"):
        g.execute({x: np.zeros(8, np.float32)})
    with pytest.raises(errors.BadParamError, match="spans 32"):
        g.execute({x: np.zeros(4, np.float32), y: np.zeros(8, np.float32)})
    with pytest.raises(errors.BadParamError, match="element type"):
        g.execute({x: np.zeros(8, np.float64), y: np.zeros(8, np.float32)})
    buf = np.zeros(9, np.float32)
    with pytest.raises(errors.BadParamError, match="aligned"):     # the backend's own check
        g.execute({x: buf[1:], y: np.zeros(8, np.float32)})
    out = np.zeros(8, np.float32)
    g.execute({"x": np.arange(-4, 4, dtype=np.float32), y.get_uid(): out})   # keys: name, uid
    assert out.tolist() == [0, 0, 0, 0, 0, 1, 2, 3]


@pytest.mark.needs_cpu_engine
def test_engine_listing_behavior_notes_and_preferred_engine(handle):
    es = hf.engines(handle)
    assert any(e.name == "HIPDNN_CABI_CPU_REFERENCE_ENGINE" for e in es)
    e = next(e for e in es if e.name == "HIPDNN_CABI_CPU_REFERENCE_ENGINE")
    assert e.type == "HIPDNN_PLUGIN_TYPE_ENGINE" and e.plugin_name and e.version
    g = graph(handle=handle)
    g.relu(g.tensor(name="x", dim=[2])).set_output(True)
    g.set_preferred_engine_name_ext("HIPDNN_CABI_CPU_REFERENCE_ENGINE").build()
    assert g.engine_id == e.id and e.id in g.get_engine_ids()
    notes = g.get_behavior_notes_for_engine(e.id)
    assert all(isinstance(n, (int, hf.BehaviorNote)) for n in notes)
    assert g.get_workspace_size() >= 0


def test_handle_context_manager_and_stream():
    with hf.Handle() as h:
        h.set_stream(0)
        assert h.get_stream() == 0
    with pytest.raises(errors.BadParamError, match="closed"):
        h.raw  # noqa: B018


class _DLPackOnly:
    """Exposes a numpy array through DLPack only (no __array_interface__)."""

    def __init__(self, a):
        self._a = a

    def __dlpack__(self, **kw):
        return self._a.__dlpack__(**kw)

    def __dlpack_device__(self):
        return self._a.__dlpack_device__()


class _CudaIfaceOnly:
    """Exposes a host numpy array through __cuda_array_interface__ (pointer plumbing only)."""

    def __init__(self, a):
        self._a = a
        self.__cuda_array_interface__ = {"shape": a.shape, "typestr": a.dtype.str, "strides": None,
                                         "data": (a.__array_interface__["data"][0], False), "version": 3}


def test_buffer_pointer_resolution():
    from hipdnn_cabi.frontend.buffers import resolve_pointer
    a = np.arange(6, dtype=np.float32)[2:]
    addr = a.__array_interface__["data"][0]
    assert resolve_pointer(a, None)[0] == addr
    assert resolve_pointer(_DLPackOnly(a), None)[0] == addr
    assert resolve_pointer(_CudaIfaceOnly(a), None)[0] == addr
    assert resolve_pointer(12345, None)[0] == 12345
    ba = bytearray(8)
    assert resolve_pointer(ba, None)[0] != 0
    with pytest.raises(errors.BadParamError, match="cannot use"):
        resolve_pointer(object(), None)


@pytest.mark.needs_cpu_engine
def test_execute_with_dlpack_and_cuda_interface_objects(handle):
    g = graph(handle=handle)
    x = g.tensor(name="x", dim=[6])
    y = g.neg(x).set_output(True)
    g.build()
    xa, ya = np.arange(6, dtype=np.float32), np.zeros(6, np.float32)
    g.execute({x: _DLPackOnly(xa), y: _CudaIfaceOnly(ya)})
    assert ya.tolist() == [-v for v in range(6)]
    t = g.tensor_like(_CudaIfaceOnly(ya))
    assert t.get_dim() == [6] and t.get_stride() == [1]
