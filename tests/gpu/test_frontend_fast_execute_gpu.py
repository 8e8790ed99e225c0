"""GPU: Graph.execute's by-value cache with torch CUDA tensors (docs/frontend.md "Execute cache").

A tiny relu graph on the GPU engine, executed from Python with the C lookup
(hipdnn_cabi.frontend._fastexec) and with its Python twin: new output tensors from torch's caching
allocator hit the kept pack and every result is right; a view of the same memory with another
shape, dtype or strides is never served from the cache (the buffer checks refuse it); a workspace
tensor passed as cuDNN users pass it is part of the key."""
from __future__ import annotations

import pytest

from hipdnn_cabi import frontend as hf
from hipdnn_cabi.errors import BadParamError
from hipdnn_cabi.frontend.graph import execution

pytestmark = pytest.mark.gpu
torch = pytest.importorskip("torch")
F32 = hf.DataType.HIPDNN_DATA_FLOAT


@pytest.fixture(params=["c", "python"])
def fast(request):
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device for torch")
    if request.param == "c" and execution._fastexec is None:
        pytest.skip("hipdnn_cabi.frontend._fastexec is not built")
    was = execution._fast_execute is not execution._py_fast_execute
    execution.use_c_fast_path(request.param == "c")
    yield request.param
    execution.use_c_fast_path(was)


@pytest.fixture()
def resolves(monkeypatch):
    n = [0]
    real = execution.resolve_pointer

    def counting(*args, **kw):
        n[0] += 1
        return real(*args, **kw)
    monkeypatch.setattr(execution, "resolve_pointer", counting)
    return n


def _relu(h):
    g = hf.Graph(handle=h, io_data_type=F32, intermediate_data_type=F32, compute_data_type=F32)
    x = g.tensor(name="x", dim=[4, 8])
    y = g.relu(x).set_output(True)
    g.build()
    return g, x, y


def test_new_cuda_outputs_hit_the_kept_pack_and_changed_views_do_not(fast, resolves):
    h = hf.Handle(stream=torch.cuda.current_stream().cuda_stream)
    g, x, y = _relu(h)
    try:
        xt = torch.randn(4, 8, device="cuda")
        want = torch.relu(xt)
        yt = torch.empty_like(xt)
        g.execute({x: xt, y: yt})
        torch.cuda.synchronize()
        assert torch.equal(yt, want)
        n0 = resolves[0]
        for _ in range(20):
            out = torch.full_like(xt, -1.0)      # a new tensor object every call
            g.execute({x: xt, y: out})
            torch.cuda.synchronize()
            assert torch.equal(out, want)
        assert len(g._fcache) <= g._XCACHE_MAX
        # the allocator hands blocks back: most of those calls were served from the cache
        assert resolves[0] - n0 < 2 * 20
        same = torch.empty_like(xt)
        g.execute({x: xt, y: same})
        n1 = resolves[0]
        g.execute({x: xt, y: same.view(4, 8)})   # new object, same memory and layout: a hit
        assert resolves[0] == n1
        with pytest.raises(BadParamError):
            g.execute({x: xt, y: same[:2]})      # same address, fewer rows
        with pytest.raises(BadParamError):
            g.execute({x: xt, y: same.view(torch.int32)})
        wide = torch.empty(4, 16, device="cuda")
        with pytest.raises(BadParamError):
            g.execute({x: xt, y: wide[:, ::2]})  # 4x8 with strides (16, 2)
        ws = torch.empty(max(g.get_workspace_size(), 1), device="cuda", dtype=torch.uint8)
        for _ in range(3):
            out = torch.full_like(xt, -1.0)
            g.execute({x: xt, y: out}, ws)
            torch.cuda.synchronize()
            assert torch.equal(out, want)
    finally:
        g.close()
        h.close()
