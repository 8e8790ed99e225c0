"""Every variant-pack buffer is checked against its tensor before the backend
runs: size, element type, strides (the tensor's, or a flat contiguous run) and, for outputs,
writability — for numpy arrays, DLPack (numpy's own __dlpack__), __cuda_array_interface__ objects
(hand-made, pointing at host memory; without a GPU runtime the CPU engine runs them) and torch
tensors when torch is installed.  A bad buffer is a BadParamError naming the tensor, never a crash
or a wrong result."""
from __future__ import annotations

import numpy as np
import pytest

from hipdnn_cabi import frontend as hf
from hipdnn_cabi.errors import BadParamError

pytestmark = pytest.mark.needs_cpu_engine
F32 = hf.DataType.HIPDNN_DATA_FLOAT
SHAPE = (2, 3, 4, 5)


def _graph(handle, a_stride=None):
    g = hf.Graph(handle=handle, io_data_type=F32, intermediate_data_type=F32, compute_data_type=F32)
    a = g.tensor(name="a", dim=list(SHAPE), stride=a_stride)
    b = g.tensor(name="b", dim=list(SHAPE))
    y = g.add(a, b).set_output(True)
    y.set_name("y")
    g.build()
    return g, a, b, y


@pytest.fixture(scope="module")
def add(handle):
    return _graph(handle)


def _inputs(seed=0):
    r = np.random.default_rng(seed)
    return (r.standard_normal(SHAPE).astype(np.float32), r.standard_normal(SHAPE).astype(np.float32))


def _bad(g, pack, *words):
    with pytest.raises(BadParamError) as e:
        g.execute(pack)
    for w in words:
        assert w in str(e.value), str(e.value)


def test_good_numpy_runs(add):
    g, a, b, y = add
    aa, ba = _inputs()
    ya = np.empty(SHAPE, np.float32)
    g.execute({a: aa, b: ba, y: ya})
    np.testing.assert_allclose(ya, aa + ba, rtol=1e-6)


def test_numpy_too_small_wrong_type(add):
    g, a, b, y = add
    aa, ba = _inputs()
    ya = np.empty(SHAPE, np.float32)
    _bad(g, {a: aa.reshape(-1)[:50].copy(), b: ba, y: ya}, "'a'", "bytes")
    _bad(g, {a: aa.astype(np.float64), b: ba, y: ya}, "'a'", "element type")
    _bad(g, {a: aa.view(np.int32), b: ba, y: ya}, "'a'", "element type")
    _bad(g, {a: aa, b: ba, y: np.empty(SHAPE, np.float16)}, "'y'", "element type")


def test_numpy_layout_mismatch(add):
    g, a, b, y = add
    aa, ba = _inputs()
    ya = np.empty(SHAPE, np.float32)
    _bad(g, {a: np.asfortranarray(aa), b: ba, y: ya}, "'a'", "strides")
    _bad(g, {a: aa.transpose(0, 1, 3, 2).copy().transpose(0, 1, 3, 2), b: ba, y: ya}, "'a'", "strides")
    big = np.zeros((2, 3, 4, 10), np.float32)
    _bad(g, {a: big[..., ::2], b: ba, y: ya}, "'a'", "strides")
    _bad(g, {a: big.reshape(-1)[::2], b: ba, y: ya}, "'a'", "contiguous")
    out = np.zeros((2, 3, 4, 10), np.float32)[..., ::2]         # a strided output is never written
    _bad(g, {a: aa, b: ba, y: out}, "'y'", "strides")
    assert not out.any()


def test_read_only(add):
    g, a, b, y = add
    aa, ba = _inputs()
    ya = np.empty(SHAPE, np.float32)
    aa.flags.writeable = False
    g.execute({a: aa, b: ba, y: ya})                           # read-only inputs are fine
    ro = np.zeros(SHAPE, np.float32)
    ro.flags.writeable = False
    _bad(g, {a: aa, b: ba, y: ro}, "'y'", "read-only")
    assert not ro.any()
    _bad(g, {a: aa, b: ba, y: bytes(ya.nbytes)}, "'y'", "read-only")


def test_flat_and_tensor_strided_buffers_accepted(handle):
    # a tensor in NHWC memory order: a numpy view with exactly those strides is the right buffer
    n, c, h, w = SHAPE
    g, a, b, y = _graph(handle, a_stride=[h * w * c, 1, w * c, c])
    aa, ba = _inputs(1)
    nhwc = np.ascontiguousarray(aa.transpose(0, 2, 3, 1))
    assert y.get_stride() == a.get_stride()                    # y inherits a's layout
    y_nhwc = np.empty((n, h, w, c), np.float32)
    g.execute({a: nhwc.transpose(0, 3, 1, 2), b: ba, y: y_nhwc.transpose(0, 3, 1, 2)})
    np.testing.assert_allclose(y_nhwc.transpose(0, 3, 1, 2), aa + ba, rtol=1e-6)
    y_nhwc[:] = 0
    g.execute({a: nhwc.reshape(-1), b: ba.reshape(-1), y: y_nhwc.reshape(-1)})   # flat buffers
    np.testing.assert_allclose(y_nhwc.transpose(0, 3, 1, 2), aa + ba, rtol=1e-6)
    _bad(g, {a: aa, b: ba, y: y_nhwc}, "'a'", "strides")      # NCHW data for an NHWC tensor
    # a packed NCHW output buffer for the NHWC output tensor would be misread: refused
    _bad(g, {a: nhwc.transpose(0, 3, 1, 2), b: ba, y: np.empty(SHAPE, np.float32)}, "'y'", "strides")


class DL:
    """Only the DLPack protocol of a numpy array."""
    def __init__(self, arr):
        self.arr = arr

    def __dlpack__(self, **kw):
        return self.arr.__dlpack__(**kw)

    def __dlpack_device__(self):
        return self.arr.__dlpack_device__()


def test_dlpack(add):
    g, a, b, y = add
    aa, ba = _inputs(2)
    ya = np.zeros(SHAPE, np.float32)
    g.execute({a: DL(aa), b: DL(ba), y: DL(ya)})
    np.testing.assert_allclose(ya, aa + ba, rtol=1e-6)
    _bad(g, {a: DL(aa.reshape(-1)[:10].copy()), b: ba, y: ya}, "'a'", "bytes")
    _bad(g, {a: DL(aa.astype(np.float64)), b: ba, y: ya}, "'a'", "element type")
    _bad(g, {a: DL(np.asfortranarray(aa)), b: ba, y: ya}, "'a'", "strides")
    _bad(g, {a: aa, b: ba, y: DL(np.zeros((2, 3), np.float32))}, "'y'", "bytes")


class CAI:
    """A hand-made __cuda_array_interface__ over (host) numpy memory."""
    def __init__(self, arr, typestr=None, shape=None, strides=None, readonly=False):
        self.arr = arr
        self.__cuda_array_interface__ = {
            "shape": tuple(arr.shape if shape is None else shape),
            "typestr": typestr or arr.dtype.str,
            "data": (arr.ctypes.data, readonly), "version": 3,
            "strides": strides if strides is not None else (None if arr.flags.c_contiguous else arr.strides)}


def test_cuda_array_interface(add):
    g, a, b, y = add
    aa, ba = _inputs(3)
    ya = np.zeros(SHAPE, np.float32)
    g.execute({a: CAI(aa), b: CAI(ba), y: CAI(ya)})
    np.testing.assert_allclose(ya, aa + ba, rtol=1e-6)
    _bad(g, {a: CAI(aa, shape=(2, 3)), b: ba, y: ya}, "'a'", "bytes")
    _bad(g, {a: CAI(aa, typestr="<f2"), b: ba, y: ya}, "'a'", "element type")
    _bad(g, {a: CAI(aa, strides=(4, 8, 24, 96)), b: ba, y: ya}, "'a'", "strides")
    _bad(g, {a: aa, b: ba, y: CAI(ya, readonly=True)}, "'y'", "read-only")
    _bad(g, {a: CAI(aa, typestr="zz"), b: ba, y: ya}, "__cuda_array_interface__")


def test_torch_buffers(add):
    torch = pytest.importorskip("torch")
    g, a, b, y = add
    aa, ba = _inputs(4)
    ta, tb = torch.from_numpy(aa), torch.from_numpy(ba)
    ty = torch.zeros(SHAPE)
    g.execute({a: ta, b: tb, y: ty})
    np.testing.assert_allclose(ty.numpy(), aa + ba, rtol=1e-6)
    _bad(g, {a: ta[:1], b: tb, y: ty}, "'a'")
    _bad(g, {a: ta.double(), b: tb, y: ty}, "'a'", "element type")
    _bad(g, {a: ta.transpose(2, 3).contiguous().transpose(2, 3), b: tb, y: ty}, "'a'", "strides")
    _bad(g, {a: ta, b: tb, y: torch.zeros(5)}, "'y'")


def test_pointwise_output_strides_follow_the_first_input(handle):
    """cudnn-frontend's inference: a pointwise output takes the strides of the first input with
    its dims, so a strided (sliced) input gives a strided output and the input's own view is a
    valid in-place output buffer; an input of other dims or a broadcast (0-stride) layout gives
    packed strides in the first input's order."""
    g = hf.Graph(handle=handle, io_data_type=F32, intermediate_data_type=F32, compute_data_type=F32)
    x = g.tensor(name="x", dim=[4, 5], stride=[10, 1])
    y = g.relu(x).set_output(True)
    b = g.tensor(name="b", dim=[1, 5])
    z = g.add(b, y).set_output(True)                   # first input with z's dims: y
    g.build()
    assert y.get_stride() == [10, 1] and z.get_stride() == [10, 1]
    base = np.random.default_rng(5).standard_normal((4, 10)).astype(np.float32)
    view = base[:, :5]
    ref_y = np.maximum(view, 0)
    ba = np.ones((1, 5), np.float32)
    out = np.zeros((4, 10), np.float32)
    g.execute({x: view, y: view, b: ba, z: out[:, :5]})      # y in place over x
    np.testing.assert_allclose(base[:, :5], ref_y)
    np.testing.assert_allclose(out[:, :5], ref_y + 1)
    assert not out[:, 5:].any()                            # the gaps are never written

    for stride, want in (([0, 1], None), ([1, 4], [1, 4]), ([1, 8], [1, 8])):
        # a broadcast view is never an output layout (packed instead); a column-major one is kept
        g2 = hf.Graph(io_data_type=F32, intermediate_data_type=F32, compute_data_type=F32)
        u = g2.neg(g2.tensor(name="e", dim=[4, 5], stride=stride)).set_output(True)
        g2.validate()
        if want is None:
            assert sorted(u.get_stride()) in ([1, 4], [1, 5]), u.get_stride()
        else:
            assert u.get_stride() == want, (stride, u.get_stride())
