"""Buffers as cudnn-frontend users pass them: torch tensors of every dtype (read through
``data_ptr()``: bf16 / fp8 tensors have no ``__cuda_array_interface__``, and tensors that require
grad export neither it nor DLPack), zero-size and null buffers (no memory kind; a zero-size
workspace where the plan needs none), ``tensor_like`` for every torch dtype.

Each case runs with stand-ins that expose torch's interface (``data_ptr()``, ``dtype``,
``shape``, ``stride()``, ``device``, ``element_size()``) over numpy memory, and again with real
torch tensors when torch is installed (skipped otherwise)."""
from __future__ import annotations

import numpy as np
import pytest

from hipdnn_cabi import frontend as hf
from hipdnn_cabi.errors import BadParamError
from hipdnn_cabi.frontend import buffers

DT = hf.DataType
F32 = DT.HIPDNN_DATA_FLOAT


class FakeDtype:
    """Prints like a torch dtype (``torch.<name>``)."""
    def __init__(self, name):
        self.name = name

    def __str__(self):
        return f"torch.{self.name}"


class FakeDevice:
    def __init__(self, kind):
        self.type = kind


class TorchLike:
    """torch.Tensor's buffer interface over a numpy array (``dtype_name`` overrides the element
    type it reports; ``ptr`` overrides the address)."""
    def __init__(self, arr, dtype_name=None, device="cpu", ptr=None, requires_grad=True):
        self.arr = arr
        self.dtype = FakeDtype(dtype_name or arr.dtype.name)
        self.shape = tuple(arr.shape)
        self.device = FakeDevice(device)
        self.requires_grad = requires_grad
        self._ptr = ptr

    def data_ptr(self):
        return self.arr.__array_interface__["data"][0] if self._ptr is None else self._ptr

    def stride(self):
        return tuple(s // self.arr.itemsize for s in self.arr.strides)

    def element_size(self):
        return self.arr.itemsize

    @property
    def __cuda_array_interface__(self):        # torch refuses it for tensors that require grad
        raise RuntimeError("Can't get __cuda_array_interface__ on Variable that requires grad")

    def __dlpack__(self, **kw):
        raise BufferError("Can't export tensors that require gradient, use tensor.detach()")


class ZeroCAI:
    """What torch.empty(0, device="cuda") exposes: data pointer 0, shape (0,)."""
    __cuda_array_interface__ = {"shape": (0,), "typestr": "|u1", "data": (0, False),
                                "version": 3, "strides": None}


def _t(dt, dims):
    g = hf.Graph()
    return g.tensor(name="t", dim=dims, data_type=dt).set_uid(1)


# ----------------------------------------------------------------------------- stand-ins
def test_tensor_like_interface_memory_kinds():
    a = np.zeros(4, np.float32)
    assert buffers.memory_kind(TorchLike(a)) == "host"
    assert buffers.memory_kind(TorchLike(a, device="cuda")) == "device"
    assert buffers.memory_kind(TorchLike(a, "float8_e4m3fn", device="cuda")) == "device"
    # zero-size and null buffers have no memory kind
    assert buffers.memory_kind(TorchLike(np.zeros(0, np.uint8), device="cuda")) is None
    assert buffers.memory_kind(TorchLike(a, device="cuda", ptr=0)) is None
    assert buffers.memory_kind(ZeroCAI()) is None
    assert buffers.memory_kind(np.zeros(0, np.float32)) is None
    assert buffers.memory_kind(bytearray(0)) is None and buffers.memory_kind(bytearray(2)) == "host"


def test_tensor_like_interface_pointer_and_checks():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    t = _t(F32, [3, 4])
    ptr, _ = buffers.resolve_pointer(TorchLike(a), t, is_output=True)   # requires_grad: raw pointer
    assert ptr == a.__array_interface__["data"][0]
    with pytest.raises(BadParamError, match="element type float64"):
        buffers.resolve_pointer(TorchLike(a.astype(np.float64)), t)
    with pytest.raises(BadParamError, match="strides"):
        buffers.resolve_pointer(TorchLike(np.asfortranarray(a)), t)
    with pytest.raises(BadParamError, match="null pointer"):
        buffers.resolve_pointer(TorchLike(a, ptr=0), t)
    with pytest.raises(BadParamError, match="null pointer"):
        buffers.resolve_pointer(0, t)
    # 8-bit floats: the buffer's exact type must be the tensor's; raw bytes (uint8) still pass
    raw = np.zeros((3, 4), np.uint8)
    e4m3 = _t(DT.HIPDNN_DATA_FP8_E4M3, [3, 4])
    buffers.resolve_pointer(TorchLike(raw, "float8_e4m3fn"), e4m3)
    buffers.resolve_pointer(TorchLike(raw), e4m3)
    with pytest.raises(BadParamError, match="element type float8_e5m2, the tensor is "
                                             "HIPDNN_DATA_FP8_E4M3"):
        buffers.resolve_pointer(TorchLike(raw, "float8_e5m2"), e4m3)
    bf = _t(DT.HIPDNN_DATA_BFLOAT16, [3, 4])
    buffers.resolve_pointer(TorchLike(np.zeros((3, 4), np.int16), "bfloat16"), bf)
    with pytest.raises(BadParamError, match="element type bfloat16"):
        buffers.resolve_pointer(TorchLike(np.zeros((3, 4), np.int16), "bfloat16"),
                                _t(DT.HIPDNN_DATA_HALF, [3, 4]))


def test_buffer_nbytes():
    assert buffers.buffer_nbytes(TorchLike(np.zeros((2, 3), np.float16))) == 12
    assert buffers.buffer_nbytes(ZeroCAI()) == 0
    assert buffers.buffer_nbytes(np.zeros(5, np.uint8)) == 5
    assert buffers.buffer_nbytes(1234) is None


@pytest.mark.parametrize("name,dt", [
    ("float32", DT.HIPDNN_DATA_FLOAT), ("float16", DT.HIPDNN_DATA_HALF),
    ("bfloat16", DT.HIPDNN_DATA_BFLOAT16), ("float64", DT.HIPDNN_DATA_DOUBLE),
    ("int8", DT.HIPDNN_DATA_INT8), ("int32", DT.HIPDNN_DATA_INT32), ("int64", DT.HIPDNN_DATA_INT64),
    ("uint8", DT.HIPDNN_DATA_UINT8), ("bool", DT.HIPDNN_DATA_BOOLEAN),
    ("float8_e4m3fn", DT.HIPDNN_DATA_FP8_E4M3), ("float8_e5m2", DT.HIPDNN_DATA_FP8_E5M2),
    ("float8_e4m3fnuz", DT.HIPDNN_DATA_FP8_E4M3_FNUZ),
    ("float8_e5m2fnuz", DT.HIPDNN_DATA_FP8_E5M2_FNUZ), ("float8_e8m0fnu", DT.HIPDNN_DATA_FP8_E8M0),
    ("float4_e2m1fn_x2", DT.HIPDNN_DATA_FP4_E2M1)])
def test_tensor_like_names(name, dt):
    g = hf.Graph()
    arr = np.zeros((2, 6), np.uint8 if "float8" in name or "float4" in name else
                   np.int16 if name == "bfloat16" else np.dtype(name))[:, ::2]
    t = g.tensor_like(TorchLike(arr, name, device="cuda"), name="t")
    assert (t.get_dim(), t.get_stride(), t.get_data_type()) == ([2, 3], [6, 2], dt)
    assert hf.Graph().tensor(name="u", dim=[2], data_type=FakeDtype(name)).get_data_type() == dt


def test_tensor_like_unmapped_dtype():
    with pytest.raises(BadParamError, match="no hipDNN data type for element type int16"):
        hf.Graph().tensor_like(TorchLike(np.zeros(3, np.int16)))


def test_tensor_like_dlpack_fp8_code():
    """A DLPack tensor of type code kDLFloat8_e4m3fn (10) without a numpy dtype."""
    class DL:
        def __init__(self, a):
            self.a = a

        def __dlpack__(self, **kw):
            return self.a.__dlpack__(**kw)

        def __dlpack_device__(self):
            return self.a.__dlpack_device__()

    a = np.zeros((2, 3), np.uint8)
    cap_dl = DL(a)
    real = buffers.dlpack_pointer

    def fp8(value, describe=False):
        out = real(value, describe)
        if describe:
            d = dict(out[3])
            d.update(buffers._named_kind("float8_e4m3fn", 1))
            return (*out[:3], d)
        return out
    buffers.dlpack_pointer = fp8
    try:
        t = hf.Graph().tensor_like(cap_dl)
    finally:
        buffers.dlpack_pointer = real
    assert (t.get_dim(), t.get_data_type()) == ([2, 3], DT.HIPDNN_DATA_FP8_E4M3)


@pytest.mark.needs_cpu_engine
def test_execute_tensor_like_and_zero_workspace(handle):
    g = hf.Graph(handle=handle, io_data_type=F32, compute_data_type=F32)
    x = g.tensor(name="x", dim=[2, 3])
    y = g.neg(x).set_output(True)
    g.build()
    assert g.get_workspace_size() == 0
    xa, ya = np.arange(6, dtype=np.float32).reshape(2, 3), np.zeros((2, 3), np.float32)
    # requires_grad stand-ins (no CAI, no DLPack), a zero-size null workspace, None keys skipped
    g.execute({x: TorchLike(xa), y: TorchLike(ya), None: np.zeros(1)}, ZeroCAI())
    assert ya.tolist() == (-xa).tolist()
    ya[:] = 0
    g.execute({x: xa, y: ya}, TorchLike(np.zeros(0, np.uint8), device="cuda"))
    assert ya.tolist() == (-xa).tolist()


# ----------------------------------------------------------------------------- torch
@pytest.fixture(scope="module")
def torch():
    return pytest.importorskip("torch")


def test_torch_memory_kinds_every_dtype(torch):
    for name in ("float32", "float16", "bfloat16", "float8_e4m3fn", "float8_e5m2", "int8",
                 "bool", "float4_e2m1fn_x2", "float8_e8m0fnu", "int16", "complex64"):
        dt = getattr(torch, name, None)
        if dt is None:
            continue
        t = torch.zeros(4, dtype=dt) if name not in ("float4_e2m1fn_x2", "float8_e8m0fnu") else \
            torch.zeros(4, dtype=torch.uint8).view(dt)
        assert buffers.memory_kind(t) == "host", name
    assert buffers.memory_kind(torch.empty(0)) is None
    assert buffers.memory_kind(torch.ones(3, requires_grad=True)) == "host"


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_torch_tensor_like_every_dtype(torch):
    want = {"float32": DT.HIPDNN_DATA_FLOAT, "float16": DT.HIPDNN_DATA_HALF,
            "bfloat16": DT.HIPDNN_DATA_BFLOAT16, "float64": DT.HIPDNN_DATA_DOUBLE,
            "int8": DT.HIPDNN_DATA_INT8, "int32": DT.HIPDNN_DATA_INT32,
            "int64": DT.HIPDNN_DATA_INT64, "uint8": DT.HIPDNN_DATA_UINT8,
            "bool": DT.HIPDNN_DATA_BOOLEAN, "float8_e4m3fn": DT.HIPDNN_DATA_FP8_E4M3,
            "float8_e5m2": DT.HIPDNN_DATA_FP8_E5M2, "float8_e4m3fnuz": DT.HIPDNN_DATA_FP8_E4M3_FNUZ,
            "float8_e5m2fnuz": DT.HIPDNN_DATA_FP8_E5M2_FNUZ,
            "float8_e8m0fnu": DT.HIPDNN_DATA_FP8_E8M0, "float4_e2m1fn_x2": DT.HIPDNN_DATA_FP4_E2M1}
    g = hf.Graph()
    seen = 0
    for attr in dir(torch):
        dt = getattr(torch, attr)
        if not isinstance(dt, torch.dtype) or attr != str(dt).split(".")[-1]:
            continue
        try:
            t = torch.empty((2, 4), dtype=dt)
        except Exception:  # noqa: BLE001 - dtypes torch cannot allocate (quantized, bits)
            continue
        name = str(dt).split(".")[-1]
        if name in want:
            u = g.tensor_like(t.transpose(0, 1))
            assert (u.get_dim(), u.get_stride(), u.get_data_type()) == ([4, 2], [1, 4], want[name])
            assert g.tensor(name="v", dim=[2], data_type=dt).get_data_type() == want[name]
            seen += 1
        else:
            with pytest.raises(BadParamError, match="no hipDNN data type"):
                g.tensor_like(t)
    assert seen >= 10


@pytest.mark.needs_cpu_engine
def test_torch_requires_grad_and_zero_workspace_execute(torch, handle):
    g = hf.Graph(handle=handle, io_data_type=F32, compute_data_type=F32)
    x = g.tensor(name="x", dim=[2, 3])
    y = g.relu(x).set_output(True)
    g.build()
    xt = torch.randn(2, 3, requires_grad=True)
    yt = torch.zeros(2, 3, requires_grad=True)
    ws = torch.empty(g.get_workspace_size(), dtype=torch.uint8)
    g.execute({x: xt, y: yt}, ws)
    assert torch.equal(yt.detach(), torch.relu(xt.detach()))


def test_torch_fp8_buffer_checks(torch):
    e4m3 = _t(DT.HIPDNN_DATA_FP8_E4M3, [2, 3])
    t = torch.zeros(2, 3, dtype=torch.float8_e4m3fn)
    assert buffers.resolve_pointer(t, e4m3)[0] == t.data_ptr()
    with pytest.raises(BadParamError, match="float8_e5m2"):
        buffers.resolve_pointer(torch.zeros(2, 3, dtype=torch.float8_e5m2), e4m3)
    bf = _t(DT.HIPDNN_DATA_BFLOAT16, [2, 3])
    b = torch.zeros(2, 3, dtype=torch.bfloat16, requires_grad=True)
    assert buffers.resolve_pointer(b, bf)[0] == b.data_ptr()
