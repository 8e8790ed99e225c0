"""Graph.execute's cache of variant packs (frontend/graph/execution.py).

* the same buffers again (numpy arrays, torch-like tensors: by value, in C or in Python): one
  backend execute on the kept (C-resident) pack, no buffer resolution, right results (new contents
  of the same arrays are seen); new buffer objects on the same memory with the same layout too;
* a buffer changed in place (dtype, shape, writability), other memory, a new runtime scalar value,
  another handle or a different active plan: the full path again, with its checks;
* the identity cache (a numpy scalar among the buffers): dead buffers drop their entries;
* the caches are bounded, closing the graph destroys every kept pack (the C-resident pack count
  goes back); the cache never keeps the user's buffers alive.
"""
from __future__ import annotations

import gc
import threading
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

    def counting(value, tensor, *args, **kw):   # (value, tensor[, is_output])
        n[0] += 1
        return real(value, tensor, *args, **kw)
    monkeypatch.setattr(execution, "resolve_pointer", counting)
    return n


@pytest.fixture(params=["c", "python"])
def fast(request):
    """Both implementations of the by-value lookup: the C extension (cdef/fastexec.c, which is
    Graph.execute itself) and its Python twin."""
    if request.param == "c" and execution._fastexec is None:
        pytest.skip("hipdnn_cabi.frontend._fastexec is not built")
    was = execution._fast_execute is not execution._py_fast_execute
    assert execution.use_c_fast_path(request.param == "c") == (request.param == "c")
    yield request.param
    execution.use_c_fast_path(was)


def test_same_buffers_reuse_the_pack(handle, resolves, fast):
    g, x, y = relu_graph(handle)
    xa, ya = rand(rng(1), (4, 8)), np.empty((4, 8), np.float32)
    g.execute({x: xa, y: ya})
    first = resolves[0]
    assert first == 2 and len(g._fcache) == 1 and not g._xcache
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


def test_changed_buffers_take_the_full_path(handle, resolves, fast):
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


def scale_graph(handle, shape=(4, 8)):
    g = hf.Graph(handle=handle, io_data_type=F32, intermediate_data_type=F32, compute_data_type=F32)
    x = g.tensor(name="x", dim=list(shape))
    s = g.tensor(name="s", dim=[1], data_type=F32).set_as_runtime_parameter()
    y = g.mul(x, s).set_output(True)
    g.build()
    return g, x, s, y


def test_identity_cache_dead_buffers_bounded_and_close_free_every_pack(handle):
    """A numpy scalar among the buffers: the call is kept by identity (weak references)."""
    gc.collect()  # graphs of earlier tests close (and free their packs) now, not mid-test
    base = live_packs()
    g, x, s, y = scale_graph(handle)
    xa, ya = rand(rng(3), (4, 8)), np.empty((4, 8), np.float32)
    two = np.float32(2.0)
    g.execute({x: xa, s: two, y: ya})
    close(ya, xa * 2)
    assert live_packs() == base + 1 and len(g._xcache) == 1 and not g._fcache
    w = weakref.ref(ya)
    del ya
    gc.collect()
    assert w() is None                          # the cache did not keep it alive
    assert len(g._xcache) == 0
    for _ in range(3 * g._XCACHE_MAX):
        g.execute({x: xa, s: two, y: np.empty((4, 8), np.float32)})
    assert len(g._xcache) <= g._XCACHE_MAX
    keep = [np.empty((4, 8), np.float32) for _ in range(2 * g._XCACHE_MAX)]
    for b in keep:
        g.execute({x: xa, s: two, y: b})
    assert len(g._xcache) == g._XCACHE_MAX
    assert live_packs() <= base + g._XCACHE_MAX + 1
    g.close()
    assert live_packs() == base


def test_by_value_cache_bounded_keeps_no_buffer_and_close_frees_every_pack(handle, fast):
    gc.collect()
    base = live_packs()
    g, x, y = relu_graph(handle)
    xa, ya = rand(rng(3), (4, 8)), np.empty((4, 8), np.float32)
    g.execute({x: xa, y: ya})
    assert live_packs() == base + 1 and len(g._fcache) == 1
    w = weakref.ref(ya)
    del ya
    gc.collect()
    assert w() is None                          # the cache did not keep it alive
    keep = [np.empty((4, 8), np.float32) for _ in range(3 * g._XCACHE_MAX)]
    for b in keep:
        g.execute({x: xa, y: b})
        close(b, np.maximum(xa, 0))
    assert len(g._fcache) == g._XCACHE_MAX
    assert live_packs() <= base + g._XCACHE_MAX
    g.close()
    assert live_packs() == base and not g._fcache


def test_new_numpy_arrays_on_the_same_memory_reuse_the_pack(handle, resolves, fast):
    """numpy arrays are kept by value: a NEW array object over the same memory with the same
    dtype, shape, strides and writability is one execute on the kept pack; any difference is a
    miss that runs every check."""
    g, x, y = relu_graph(handle)
    base = rand(rng(11), (4, 8))
    out = np.empty((4, 8), np.float32)
    g.execute({x: base, y: out})
    n0 = resolves[0]
    for i in range(3):
        base[:] = rand(rng(30 + i), (4, 8))
        g.execute({x: base.view(), y: out.view()})  # new objects, same memory and layout
        close(out, np.maximum(base, 0))
    assert resolves[0] == n0 and len(g._fcache) == 1
    with pytest.raises(BadParamError, match="element type"):
        g.execute({x: base, y: out.view(np.int32)})
    with pytest.raises(BadParamError):          # same address, fewer rows
        g.execute({x: base, y: out[:2]})
    ro = out.view()
    ro.flags.writeable = False
    with pytest.raises(BadParamError, match="read-only"):
        g.execute({x: base, y: ro})
    wide = np.empty((4, 16), np.float32)
    with pytest.raises(BadParamError, match="strides"):  # same shape, other strides
        g.execute({x: base, y: wide[:, ::2]})
    assert resolves[0] > n0
    g.close()


def test_plan_change_invalidates(handle, resolves, fast):
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


def test_torch_like_tensors_are_cached_and_storage_moves_are_seen(handle, resolves, fast):
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


def test_new_torch_like_objects_on_the_same_memory_reuse_the_pack(handle, resolves, fast):
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
def test_a_stale_entry_replaced_under_its_key_frees_its_pack(handle, kind, fast):
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


class Strided(Tensor):
    """A torch-like stand-in whose fingerprint parts can be set one by one."""

    def __init__(self, arr, ptr=None, dtype=None, shape=None, strides=None, device="cpu"):
        super().__init__(arr)
        self._ptr = ptr
        self.dtype = arr.dtype if dtype is None else dtype
        self.shape = arr.shape if shape is None else shape
        self._strides = strides
        self.device = device

    def data_ptr(self):
        return super().data_ptr() if self._ptr is None else self._ptr

    def stride(self):
        return super().stride() if self._strides is None else self._strides


@pytest.mark.parametrize("change", ["pointer", "dtype", "shape", "strides", "device"])
def test_a_changed_fingerprint_part_is_never_served_from_the_cache(handle, resolves, fast, change):
    """Each part of a torch tensor's fingerprint on its own: changed, the kept pack is not used —
    the full path runs (a new pack on other memory; the buffer checks for the rest)."""
    g, x, y = relu_graph(handle)
    xa, ya = rand(rng(12), (4, 8)), np.empty((4, 8), np.float32)
    g.execute({x: Strided(xa), y: Strided(ya)})
    g.execute({x: Strided(xa), y: Strided(ya)})
    n0 = resolves[0]
    if change == "pointer":
        other = np.empty((4, 8), np.float32)
        g.execute({x: Strided(xa), y: Strided(other)})
        close(other, np.maximum(xa, 0))
    else:
        kw = {"dtype": np.dtype(np.int32), "shape": (2, 8), "strides": (1, 4),
              "device": "meta"}[change]
        with pytest.raises(BadParamError):
            g.execute({x: Strided(xa), y: Strided(ya, **{change: kw})})
    assert resolves[0] > n0
    g.close()


def test_another_handle_is_not_served_the_entry_of_the_first(handle, resolves, fast):
    g, x, y = relu_graph(handle)
    xa, ya = rand(rng(13), (4, 8)), np.empty((4, 8), np.float32)
    g.execute({x: xa, y: ya})
    g.execute({x: xa, y: ya})
    n0 = resolves[0]
    h2 = hf.Handle()
    try:
        g.execute({x: xa, y: ya}, handle=h2)
        assert resolves[0] == n0 + 2              # a pack of its own
        g.execute({x: xa, y: ya}, handle=h2)
        assert resolves[0] == n0 + 2              # ... kept under that handle
        close(ya, np.maximum(xa, 0))
    finally:
        g.close()
        h2.close()


def test_fast_path_status_errors_raise(handle, fast, monkeypatch):
    """A failing kept-pack execute raises the backend's error (not a silent success)."""
    g, x, y = relu_graph(handle)
    xa, ya = rand(rng(14), (4, 8)), np.empty((4, 8), np.float32)
    g.execute({x: xa, y: ya})
    e = next(iter(g._fcache.values()))
    g.api.destroy(e.vp)                          # the kept pack is gone under the cache
    with pytest.raises(Exception):
        g.execute({x: xa, y: ya})
    g._fcache.clear()
    g.close()


def test_threads_share_the_cache(handle, fast):
    """Several threads executing one graph, each on its own output (and a shared input): every
    result right, the kept packs bounded."""
    g, x, y = relu_graph(handle)
    xa = rand(rng(15), (4, 8))
    outs = [np.empty((4, 8), np.float32) for _ in range(4)]
    # same memory, a new object every other call
    assert not _relu_in_threads(g, x, y, xa, 100, lambda k, i: outs[k] if i % 2 else outs[k].view())
    assert len(g._fcache) <= g._XCACHE_MAX
    g.close()


def test_argument_spellings(handle, resolves, fast):
    """execute(vp), (vp, None), (vp, None, None), keywords: all served from the kept pack; an
    unknown keyword is a TypeError as for any Python method."""
    g, x, y = relu_graph(handle)
    xa, ya = rand(rng(16), (4, 8)), np.empty((4, 8), np.float32)
    vp = {x: xa, y: ya}
    g.execute(vp)
    n0 = resolves[0]
    for call in (lambda: g.execute(vp), lambda: g.execute(vp, None), lambda: g.execute(vp, None, None),
                 lambda: g.execute(vp, workspace=None), lambda: g.execute(vp, handle=None),
                 lambda: g.execute(variant_pack=vp), lambda: g.execute(vp, None, handle=None)):
        ya[:] = -1
        assert call() is g
        close(ya, np.maximum(xa, 0))
    assert resolves[0] == n0
    with pytest.raises(TypeError):
        g.execute(vp, bogus=1)
    g.close()


def test_threads_evicting_each_others_entries(handle, fast):
    """More distinct calls in flight than the cache keeps: entries are evicted while other
    threads execute them — every execute succeeds with the right result (a pack is destroyed only
    after its entry is freed, by the cache and by every execute holding it) and no pack leaks."""
    gc.collect()
    base = live_packs()
    g, x, y = relu_graph(handle)
    xa = rand(rng(17), (4, 8))
    outs = [[np.empty((4, 8), np.float32) for _ in range(4)] for _ in range(4)]
    assert not _relu_in_threads(g, x, y, xa, 60, lambda k, i: outs[k][i % 4])
    assert len(g._fcache) <= g._XCACHE_MAX
    g.close()
    gc.collect()
    execution._vflush()
    assert live_packs() == base


def _relu_in_threads(g, x, y, xa, n, out_of):
    """Four threads each execute relu ``n`` times into ``out_of(thread, i)``; the failures."""
    errors = []

    def run(k):
        try:
            for i in range(n):
                o = out_of(k, i)
                o[:] = -1
                g.execute({x: xa, y: o})
                if not np.array_equal(o, np.maximum(xa, 0)):
                    errors.append((k, i))
        except Exception as e:  # noqa: BLE001
            errors.append(e)
    ts = [threading.Thread(target=run, args=(k,)) for k in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return errors
