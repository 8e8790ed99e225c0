"""Graph.execute's cache of variant packs (frontend/graph/execution.py, issue 15).

* the same buffer objects again: one backend execute on the kept (C-resident) pack, no buffer
  resolution, right results (new contents of the same arrays are seen);
* a buffer changed in place (dtype, shape, writability), a different object, a new runtime scalar
  value or a different active plan: the full path again, with its checks;
* dead buffers drop their entries, the cache is bounded, closing the graph destroys every kept
  pack (the C-resident pack count goes back);
* the cache never keeps the user's buffers alive.
"""
from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest

from fe_util import close, rand, rng
from hipdnn_cabi import frontend as hf
from hipdnn_cabi.errors import BadParamError
from hipdnn_cabi.frontend.graph import execution

pytestmark = pytest.mark.needs_cpu_engine
F32 = hf.DataType.HIPDNN_DATA_FLOAT


def relu_graph(handle, shape=(4, 8)):
    g = hf.Graph(handle=handle, io_data_type=F32, intermediate_data_type=F32, compute_data_type=F32)
    x = g.tensor(name="x", dim=list(shape))
    y = g.relu(x).set_output(True)
    g.build()
    return g, x, y


def live_packs():
    from hipdnn_cabi.backend import runtime
    return runtime.lib.hipdnn_cabi_vp_live()


@pytest.fixture()
def resolves(monkeypatch):
    """Counts the buffer resolutions of the full execute path."""
    n = [0]
    real = execution.resolve_pointer

    def counting(value, tensor, *args, **kw):   # (value, tensor[, is_output]) since issue 14
        n[0] += 1
        return real(value, tensor, *args, **kw)
    monkeypatch.setattr(execution, "resolve_pointer", counting)
    return n


def test_same_buffers_reuse_the_pack(handle, resolves):
    g, x, y = relu_graph(handle)
    xa, ya = rand(rng(1), (4, 8)), np.empty((4, 8), np.float32)
    g.execute({x: xa, y: ya})
    first = resolves[0]
    assert first == 2 and len(g._xcache) == 1
    for i in range(5):
        xa[...] = rand(rng(10 + i), (4, 8))    # new contents, same arrays
        g.execute({x: xa, y: ya})
        close(ya, np.maximum(xa, 0))
    assert resolves[0] == first                 # never resolved again
    # keys by uid or by name hit their own entries
    g.execute({x.uid: xa, y.uid: ya})
    g.execute({x.uid: xa, y.uid: ya})
    assert resolves[0] == first + 2
    g.close()


def test_changed_buffers_take_the_full_path(handle, resolves):
    g, x, y = relu_graph(handle)
    xa, ya = rand(rng(2), (4, 8)), np.empty((4, 8), np.float32)
    g.execute({x: xa, y: ya})
    n0 = resolves[0]
    ya2 = np.empty((4, 8), np.float32)
    g.execute({x: xa, y: ya2})                  # another output object
    close(ya2, np.maximum(xa, 0))
    assert resolves[0] == n0 + 2
    ya.flags.writeable = False                  # writability is in the fingerprint
    n1 = resolves[0]
    try:
        g.execute({x: xa, y: ya})
    except BadParamError:
        pass                                    # (a writability check may refuse it)
    assert resolves[0] > n1
    ya.flags.writeable = True
    xa.dtype = np.float16                       # in place: (4, 16) float16 — the check must run
    with pytest.raises(BadParamError, match="element type"):
        g.execute({x: xa, y: ya})
    g.close()


def test_runtime_scalars_by_value(handle):
    xa = rand(rng(6), (3, 5))
    g = hf.Graph(handle=handle, io_data_type=F32, intermediate_data_type=F32, compute_data_type=F32)
    x = g.tensor(name="x", dim=xa.shape)
    s = g.tensor(name="s", dim=[1], data_type=F32).set_as_runtime_parameter()
    y = g.mul(x, s).set_output(True)
    ya = np.empty(xa.shape, np.float32)
    g.build()
    for v in (2.0, -0.5, 3.0, 2.0, -0.5, 2, True):
        g.execute({x: xa, s: v, y: ya})
        close(ya, xa * float(v))
    arr = np.array([4.0], np.float32)
    g.execute({x: xa, s: arr, y: ya})
    close(ya, xa * 4.0)
    arr[0] = -1.0                               # the same array, a new value: seen
    g.execute({x: xa, s: arr, y: ya})
    close(ya, xa * -1.0)
    g.close()


def test_dead_buffers_bounded_cache_and_close_free_every_pack(handle):
    gc.collect()  # graphs of earlier tests close (and free their packs) now, not mid-test
    base = live_packs()
    g, x, y = relu_graph(handle)
    xa, ya = rand(rng(3), (4, 8)), np.empty((4, 8), np.float32)
    g.execute({x: xa, y: ya})
    assert live_packs() == base + 1
    w = weakref.ref(ya)
    del ya
    gc.collect()
    assert w() is None                          # the cache did not keep it alive
    assert len(g._xcache) == 0
    for _ in range(3 * g._XCACHE_MAX):
        g.execute({x: xa, y: np.empty((4, 8), np.float32)})
    assert len(g._xcache) <= g._XCACHE_MAX
    keep = [np.empty((4, 8), np.float32) for _ in range(2 * g._XCACHE_MAX)]
    for b in keep:
        g.execute({x: xa, y: b})
    assert len(g._xcache) == g._XCACHE_MAX
    assert live_packs() <= base + g._XCACHE_MAX + 1
    g.close()
    assert live_packs() == base


def test_plan_change_invalidates(handle, resolves):
    g, x, y = relu_graph(handle)
    xa, ya = rand(rng(4), (4, 8)), np.empty((4, 8), np.float32)
    g.execute({x: xa, y: ya})
    n0 = resolves[0]
    g.create_execution_plans()                  # plans released and rebuilt
    g.build_plans()
    g.execute({x: xa, y: ya})
    close(ya, np.maximum(xa, 0))
    assert resolves[0] == n0 + 2
    g.close()


def test_cache_off_gives_the_same_results(handle):
    g, x, y = relu_graph(handle)
    g._XCACHE_MAX = 0
    xa, ya = rand(rng(5), (4, 8)), np.empty((4, 8), np.float32)
    for _ in range(3):
        g.execute({x: xa, y: ya})
    close(ya, np.maximum(xa, 0))
    assert not g.__dict__.get("_xcache")
    g.close()


class Tensor:
    """A stand-in for torch.Tensor (no torch needed): what the cache's torch fingerprint reads, and
    __array_interface__ for the pointer.  `set_` moves it to other storage, like torch's."""
    __module__ = "torch"

    def __init__(self, arr):
        self.set_(arr)

    def set_(self, arr):
        self._a = arr
        self.__array_interface__ = arr.__array_interface__
        self.dtype, self.shape, self.device, self.requires_grad = arr.dtype, arr.shape, "cpu", False

    def data_ptr(self):
        return self._a.__array_interface__["data"][0]

    def stride(self):
        return tuple(s // self._a.itemsize for s in self._a.strides)


def test_torch_like_tensors_are_cached_and_storage_moves_are_seen(handle, resolves):
    g, x, y = relu_graph(handle)
    xa = rand(rng(7), (4, 8))
    xt, yt = Tensor(xa), Tensor(np.empty((4, 8), np.float32))
    g.execute({x: xt, y: yt})
    n0 = resolves[0]
    g.execute({x: xt, y: yt})
    assert resolves[0] == n0                    # cached
    close(yt._a, np.maximum(xa, 0))
    other = np.empty((4, 8), np.float32)
    yt.set_(other)                              # same object, new storage: full path again
    g.execute({x: xt, y: yt})
    assert resolves[0] == n0 + 2
    close(other, np.maximum(xa, 0))
    g.close()


def test_new_torch_like_objects_on_the_same_memory_reuse_the_pack(handle, resolves):
    """torch buffers are kept by value: a NEW tensor object with the same fingerprint (what the
    caching allocator gives `torch.empty_like(x)` in a loop) is one execute on the kept pack; a
    new object elsewhere, or of another shape / dtype, takes the full path with its checks; the
    entry keeps no buffer alive."""
    g, x, y = relu_graph(handle)
    xa, ya = rand(rng(8), (4, 8)), np.empty((4, 8), np.float32)
    g.execute({x: Tensor(xa), y: Tensor(ya)})
    n0 = resolves[0]
    assert n0 == 2 and len(g._fcache) == 1 and not g._xcache
    for i in range(3):
        xa[:] = rand(rng(20 + i), (4, 8))
        yt = Tensor(ya)
        ref = weakref.ref(yt)
        g.execute({x: Tensor(xa), y: yt})       # new objects, same memory: no resolution
        close(ya, np.maximum(xa, 0))
        del yt
        gc.collect()
        assert ref() is None                    # not kept alive by the cache
    assert resolves[0] == n0
    other = np.empty((4, 8), np.float32)
    g.execute({x: Tensor(xa), y: Tensor(other)})  # new memory: full path, a second entry
    assert resolves[0] == n0 + 2 and len(g._fcache) == 2
    close(other, np.maximum(xa, 0))
    with pytest.raises(BadParamError):           # a wrong dtype at the same address: checked
        g.execute({x: Tensor(xa), y: Tensor(ya.view(np.int32))})
    with pytest.raises(BadParamError):           # too small (same address, other shape)
        g.execute({x: Tensor(xa), y: Tensor(ya[:2])})
    for _ in range(3 * g._XCACHE_MAX):           # bounded
        g.execute({x: Tensor(xa), y: Tensor(np.empty((4, 8), np.float32))})
    assert len(g._fcache) <= g._XCACHE_MAX
    g.close()
    assert not g._fcache


@pytest.mark.parametrize("kind", ["numpy", "torch_like"])
def test_a_stale_entry_replaced_under_its_key_frees_its_pack(handle, kind):
    """The same call again after the graph's state changed (here select_engine_by_memory) takes
    the full path and is kept under the same key: the stale entry's pack is destroyed, not
    leaked, however often that happens."""
    g, x, y = relu_graph(handle)
    wrap = (lambda a: a) if kind == "numpy" else Tensor
    xa, ya = rand(rng(9), (4, 8)), np.empty((4, 8), np.float32)
    vp = {x: wrap(xa), y: wrap(ya)}
    g.execute(vp)
    base = live_packs()
    for i in range(20):
        g.select_engine_by_memory = bool(i % 2)
        g.execute(vp)
    close(ya, np.maximum(xa, 0))
    assert live_packs() <= base + 1
    g.close()
