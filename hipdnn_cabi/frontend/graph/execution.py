"""Executing a built ``Graph``: plan choice by memory kind, workspaces, variant packs (spec §2.7)."""
from __future__ import annotations

import os
import sys
import weakref

import numpy as np

from ... import device
from ..._generated.enums import AttributeName as A
from ..._generated.enums import AttributeType as T
from ..._generated.enums import DescriptorType as D
from ...errors import BadParamError, HipdnnError, NotSupportedError
from .. import buffers as _buffers
from ..buffers import fingerprint_fn, resolve_pointer
from ..handle import Handle, engine_memory_declared, engine_memory_kind
from ..tensor import Tensor
from ._types import NO_ENGINE_MSG, GraphNotSupportedError

try:  # cdef/fastexec.c, built with the backend library (optional)
    from .._fastexec import key as _c_key  # noqa: F401  (the module itself, below)
except ImportError:
    _fastexec = None
else:
    _fastexec = sys.modules[__name__.rsplit(".", 2)[0] + "._fastexec"]


class ExecutionMixin:
    """Mixin of :class:`Graph`."""

    # ================================================================== execute (§2.7)
    def _uid_of(self, key):
        if isinstance(key, Tensor):
            if key.uid is None:
                raise BadParamError(f"tensor {key.name!r} has no uid (build the graph first)")
            return key.uid
        if isinstance(key, str):
            for t in self._graph_tensors():
                if t.name == key:
                    return t.uid
            raise BadParamError(f"no tensor named {key!r}")
        return int(key)

    # ---------------------------------------------------------------- engine from memory
    def engine_memory_kind(self, engine_id=None):
        """"host" / "device": the memory the engine (default: the active plan's) reaches."""
        eid = self.engine_id if engine_id is None else engine_id
        return None if eid is None else engine_memory_kind(self._engine_name_of(eid))

    def _engine_pinned(self) -> bool:
        return bool(self.preferred_engine_name) or self.preferred_engine_id is not None or \
            self._explicit_engine

    def _activate(self, i):
        self._active = i
        self.engine_id = self._engine_ids[i]
        self._engine_name = None
        self._workspace = self._ws_sizes.get(i)

    def _plan_for_memory(self, kind, where=None):
        """Make active the plan of an engine that reaches ``kind`` memory ("host"/"device").
        Rule: an explicit engine (preferred name/id, create_execution_plan_ext, a compiled plan)
        always wins; else keep the active plan when its engine reaches the memory; else the first
        engine in heuristic order that does (plan built once, cached per memory kind); else, when
        the active engine's memory kind is declared (``ENGINE_MEMORY``), GraphNotSupportedError
        before anything runs, naming the engines of that memory kind that declined the graph and
        why (``where``: the first buffer of that kind, for the message); an engine whose kind is
        only guessed from its name runs, and checks its pointers itself, as it does with
        ``select_engine_by_memory = False``."""
        self._need_plan()
        if kind is None or not self.select_engine_by_memory or self._engine_pinned():
            return
        if self.engine_memory_kind() in (None, kind):
            self._mem_plan.setdefault(kind, self._active)
            return
        if kind in self._mem_plan:
            i = self._mem_plan[kind]
            if i is None:
                if kind in self._mem_why:
                    raise GraphNotSupportedError(self._mem_why[kind])
                return
            if i != self._active:
                self._activate(i)
            return
        if self._gdesc is not None and not any(c is not None for c in self._cfgs):
            # a deserialized plan: find the other applicable engines (keeps the loaded plan)
            try:
                cfgs, ids = self._run_heuristic()
            except NotSupportedError:
                cfgs, ids = [], []
            for c, eid in zip(cfgs, ids):
                if eid in self._engine_ids:
                    self.api.destroy(c)
                    continue
                self._cfgs.append(c)
                self._engine_ids.append(eid)
                self._plans.append(self.api.create(D.HIPDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR))
                self._plan_ok.append(False)
        found = None
        keep = self._active
        failed = []
        for i, eid in enumerate(self._engine_ids):
            if i == keep or engine_memory_kind(self._engine_name_of(eid)) != kind:
                continue
            if not self._plan_ok[i]:
                if self._cfgs[i] is None:
                    continue
                try:
                    self._build_plan(i)
                except HipdnnError as e:
                    failed.append(f"{self._engine_name_of(eid) or eid} accepted the graph but "
                                  f"its plan failed to build: {e}")
                    continue
            found = i
            break
        self._mem_plan[kind] = found
        if found is not None:
            self._activate(found)
            return
        self._workspace = self._ws_sizes.get(keep, self._workspace)
        if not engine_memory_declared(self.engine_name):
            return     # the engine's memory kind is a guess from its name: it checks its pointers
        other = "host" if kind == "device" else "device"
        why = "; ".join(failed + [self._declined_by(kind)])
        self._mem_why[kind] = (
            f"{NO_ENGINE_MSG} The variant pack holds {kind} memory"
            f"{f' ({where})' if where is not None else ''}, but no engine that reaches {kind} "
            f"memory accepted the graph: {why}. The plan's engine {self.engine_name} reaches "
            f"{other} memory: pass {other} buffers, or set select_engine_by_memory = False to "
            f"run it on these")
        raise GraphNotSupportedError(self._mem_why[kind])

    def _device_workspace(self, size, handle=None):
        """A device workspace of ``size`` bytes (hipdnn_cabi.device) on the handle's device,
        owned by the graph."""
        dev = getattr(handle, "device", -1)
        if (self._dev_ws is not None and self._dev_ws[0] >= size
                and getattr(self._dev_ws[2], "device", dev) == dev):
            return self._dev_ws[1]
        try:
            rt = device.get_runtime(dev)
            ptr = int(rt.malloc(size))
        except Exception as e:
            raise BadParamError(f"the plan runs on a device engine and needs a {size}-byte device "
                                f"workspace: pass workspace= ({e})") from None
        self._free_device_workspace()
        self._dev_ws = (size, ptr, rt)
        return ptr

    def _free_device_workspace(self):
        if self._dev_ws is not None:
            _, ptr, rt = self._dev_ws
            self._dev_ws = None
            try:
                rt.free(ptr)
            except Exception:
                pass

    def execute(self, variant_pack: dict, workspace=None, handle: Handle | None = None):
        """Run the active plan.  ``variant_pack``: {Tensor | uid | name: buffer}; buffers are numpy
        arrays (host), objects with ``__cuda_array_interface__`` or ``__dlpack__`` (device
        pointers), ints (raw addresses) or numbers (runtime pass-by-value scalars).

        The engine follows the memory: when the buffers live where the active plan's engine
        cannot reach them (device buffers and a host engine, or host arrays and a GPU engine),
        the plan of an engine that can is built (once, cached per memory kind) and run
        instead — unless an engine was chosen explicitly.  See :meth:`_plan_for_memory`.
        ``None`` keys (an optional output a builder returned as None) are skipped, as
        cudnn-frontend skips them."""
        fc = self.__dict__.get("_fcache")
        if fc:
            st = _fast_execute(self, fc, variant_pack, workspace, handle)
            if st is not None:
                if st:
                    self.api.check(st, "hipdnnBackendExecute")
                return self
        return self._execute_cached(variant_pack, workspace, handle)

    _py_execute = execute   # the Python spelling (execute is _fastexec's when that is built)

    def _execute_failed(self, status):
        """A kept pack's execute failed: the backend's error as an exception."""
        self.api.check(status, "hipdnnBackendExecute")
        return self

    def _execute_cached(self, variant_pack, workspace=None, handle=None):
        """execute after a by-value miss: the identity cache, else the full path."""
        if None in variant_pack:
            variant_pack = {k: v for k, v in variant_pack.items() if k is not None}
        cache = self.__dict__.get("_xcache")
        if cache:
            e = cache.get(_xkey(variant_pack, workspace, handle))
            if e is not None and e.valid(self, variant_pack, workspace, handle):
                st = e.execute(e.h_raw, e.plan, e.vp)
                if st:
                    self.api.check(st, "hipdnnBackendExecute")
                return self
        return self._execute_slow(variant_pack, workspace, handle)

    def _execute_slow(self, variant_pack, workspace, handle):
        """Every check, a new variant pack; then (all buffers cacheable) the pack is kept for the
        next executes with the same objects (see :class:`_XEntry`)."""
        self._need_plan()
        h = handle or self.handle
        a = self.api
        workspace_arg = workspace
        ffi = a.ffi
        by_uid = {t.uid: t for t in self._graph_tensors()}
        out_uids = {t.uid for n in self._nodes for t in n.outputs.values()
                    if t is not None and not t.is_virtual}
        keep, uids, ptrs = [], [], []
        kinds = {}
        for key, value in variant_pack.items():
            uid = self._uid_of(key)
            t = by_uid.get(uid)
            if t is None or not t.get_is_pass_by_value():
                k = _buffers.memory_kind(value)
                if k is not None:
                    kinds.setdefault(k, uid)
            ptr, holder = resolve_pointer(value, t, uid in out_uids)
            keep.append(holder)
            uids.append(uid)
            ptrs.append(ptr)
        if workspace is not None:
            k = _buffers.memory_kind(workspace)
            if k is not None:
                kinds.setdefault(k, "workspace")
        if not self._from_bytes:
            required = getattr(self, "_required_uids", None)
            missing = [t for t in by_uid.values()
                       if (t.uid in required if required is not None
                           else not t.is_virtual and not t.has_value) and t.uid not in uids]
            if missing:
                raise BadParamError("variant pack lacks tensors: " +
                                    ", ".join(f"{t.name or '?'} (uid {t.uid})" for t in missing))
        if not uids:
            raise BadParamError("empty variant pack")
        if len(kinds) > 1 and self.select_engine_by_memory and not self._engine_pinned():
            raise BadParamError(f"variant pack mixes host memory ({kinds['host']}) and device memory "
                                f"({kinds['device']}): no single engine reaches both")
        if len(kinds) == 1:
            (kind, first), = kinds.items()
            self._plan_for_memory(kind, first if first == "workspace" else
                                  _tensor_label(by_uid.get(first), first))
        plan = self._need_plan()
        ws = self._workspace if self._workspace is not None else self.get_workspace_size()
        if workspace is not None and ws > 0:
            # a zero-size or null workspace is fine where the plan needs none (cuDNN users pass
            # torch.empty(get_workspace_size()) as the workspace)
            have = _buffers.buffer_nbytes(workspace)
            if have is not None and have < ws:
                raise BadParamError(f"the workspace holds {have} bytes, the plan of "
                                    f"{self.engine_name} needs {ws}")
        if workspace is None:
            if ws > 0:
                if self.engine_memory_kind() == "device":
                    workspace = self._device_workspace(ws, h)
                else:
                    workspace = np.empty(ws, dtype=np.uint8)
        wptr = 0
        if workspace is not None:
            wptr, wh = resolve_pointer(workspace, None)
            keep.append(wh)
            if not wptr and ws > 0:
                raise BadParamError(f"the workspace is a null pointer, the plan of "
                                    f"{self.engine_name} needs {ws} bytes")
        vp = a.create(D.HIPDNN_BACKEND_VARIANT_PACK_DESCRIPTOR)
        cached = False
        workspace = workspace_arg
        try:
            a.set(vp, A.HIPDNN_ATTR_VARIANT_PACK_DATA_POINTERS, T.HIPDNN_TYPE_VOID_PTR,
                  [ffi.cast("void*", p) for p in ptrs])
            a.set(vp, A.HIPDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, T.HIPDNN_TYPE_INT64, uids)
            a.set(vp, A.HIPDNN_ATTR_VARIANT_PACK_WORKSPACE, T.HIPDNN_TYPE_VOID_PTR,
                  [ffi.cast("void*", wptr)])
            a.finalize(vp, "finalize variant pack")
            h_raw = h.raw
            a.check(a.lib.hipdnnBackendExecute(h_raw, plan, vp), "hipdnnBackendExecute")
            cached = self._xcache_put(vp, h_raw, variant_pack, workspace, handle, keep)
        finally:
            if not cached:
                a.destroy(vp)
            del keep
        return self

    # ================================================================== execute cache
    # A graph keeps up to _XCACHE_MAX finalized variant packs per cache; every check of the slow
    # path (buffers, dtype/size, missing tensors, memory kinds, plan choice) ran when a pack was
    # made, and a kept pack is reused only while the graph's state (_xstate: the active plan,
    # select_engine_by_memory, the device workspace) and the handle are the ones it was made with.
    #
    # By value (_fcache, key: _vkey), the first cache execute looks in: calls whose buffers (and
    # workspace) are numpy arrays, torch tensors (or objects of their interface) or numbers.  The
    # key is the handle's identity, each key (identity; numbers and strings by value) and each
    # buffer's type and fingerprint: numpy — data pointer, writability, shape, strides, dtype;
    # torch — data_ptr(), dtype, shape, stride(), device; numbers — their value.  Every check of
    # the slow path is a function of exactly these, so a NEW buffer object with the same
    # fingerprint (torch's caching allocator handing `torch.empty_like(x)` the same block in a
    # loop, numpy reusing a freed block) passes the same checks and points where the kept pack
    # points: one hipdnnBackendExecute.  A buffer that differs in any of these is a miss, so it
    # takes the slow path with every check.  Entries (_VEntry) hold no reference to the buffers
    # (the memory they point at is the caller's next buffers'), strong ones to the keys (their
    # identities stay unique), the handle, the state they were made under and the frontend's own
    # holders (scalar arrays, workspaces).  The lookup, the state check and the call run in C
    # (hipdnn_cabi.frontend._fastexec, cdef/fastexec.c; the GIL is released around the call)
    # when that extension is built, else in Python (_py_fast_execute), with the same rules.
    #
    # By identity (_xcache, key: _xkey) for the other buffer kinds whose fingerprints
    # (buffers.fingerprint_fn) can be taken: the identities of the objects of one call, each
    # buffer's fingerprint compared on a hit; entries hold weak references to the user's buffers
    # (a dead buffer drops its entries), strong ones to what the frontend made.
    #
    # Threads: the lookups and inserts are single dict operations under the GIL; concurrent
    # executes of one Graph share its kept packs (a pack is never changed after finalize), as they
    # share the auto-allocated workspace (docs/frontend.md).
    _XCACHE_MAX = 8

    def _xstate(self):
        return (self._active_plan(), self.select_engine_by_memory, self._dev_ws)

    def _xcache_put(self, vp, h_raw, variant_pack, workspace, handle, keep) -> bool:
        if self._XCACHE_MAX <= 0:  # cache off (benchmarks compare)
            return False
        if self.__dict__.get("_xcache") is None:
            self._xcache, self._fcache = {}, {}
            self._xdead = []
        self._xflush()
        _learn_kinds(variant_pack, workspace)
        vkey = _vkey(variant_pack, workspace, handle)
        if vkey is not None:
            return self._fcache_put(vkey, vp, h_raw, variant_pack, workspace, handle, keep)
        key = _xkey(variant_pack, workspace, handle)
        cache = self._xcache
        fns = [fingerprint_fn(v) for v in variant_pack.values()]
        fns.append(fingerprint_fn(workspace) if workspace is not None else None)
        if any(f is None for f in fns[:-1]) or (workspace is not None and fns[-1] is None):
            return False
        e = _XEntry()
        e.vp, e.h_raw, e.plan, e.execute = vp, h_raw, self._need_plan(), self.api.lib.hipdnnBackendExecute
        e.state = self._xstate()
        e.fps = [(f, f(v)) for f, v in zip(fns, variant_pack.values())]
        e.wfp = (fns[-1], fns[-1](workspace)) if workspace is not None else None
        dead = self._xdead

        def gone(_ref, key=key, cache=cache, dead=dead):
            x = cache.pop(key, None)
            if x is not None:
                dead.append(x.vp)
        refs, strong = [], list(keep)
        objs = [handle, workspace, *variant_pack.keys(), *variant_pack.values()]
        for o in objs:
            if o is None or type(o) in _IMM:
                continue
            try:
                refs.append(weakref.ref(o, gone))
            except TypeError:
                strong.append(o)
        # the frontend's own holders (scalar arrays, a workspace it allocated) stay; the user's
        # buffers (a holder that is the buffer, or a (buffer, capsule) pair) are weak references
        ids = {id(o) for o in objs if o is not None and type(o) not in _IMM}
        e.keep = [k for k in strong if id(k) not in ids and
                  not (type(k) is tuple and k and id(k[0]) in ids)]
        e.refs = refs
        self._cache_insert(cache, key, e)
        return True

    def _fcache_put(self, vkey, vp, h_raw, variant_pack, workspace, handle, keep) -> bool:
        a = self.api
        bufs = {id(v) for v in variant_pack.values()}
        # the frontend's holders (scalar arrays, a workspace it made) and the keys stay; the
        # buffers (a holder that is the buffer, or a (buffer, capsule) pair) are not kept
        kept = [k for k in keep if id(k) not in bufs and
                not (type(k) is tuple and k and id(k[0]) in bufs)]
        kept += [kk for kk in variant_pack if type(kk) not in _IMM and type(kk) is not str]
        # what the key names by identity (types, dtypes): no address of it is reused meanwhile
        for v in (workspace, *variant_pack.values()):
            kept.append(type(v))
            if _KINDS.get(type(v), _K_NUMBER) != _K_NUMBER:
                kept.append(v.dtype)
        plan = self._need_plan()
        hh = handle or self.handle
        addr = _addr_fn(a.ffi)
        e = _VEntry((plan, self.select_engine_by_memory, self._dev_ws, hh, h_raw, addr(h_raw),
                     addr(plan), addr(vp), _exec_address(a), vp, kept, a.lib.hipdnnBackendExecute,
                     a.destroy))
        self._cache_insert(self._fcache, vkey, e)
        return True

    def _cache_insert(self, cache, key, e):
        # A stale entry of the same call (the graph's state moved), then the oldest ones.  An
        # identity entry's pack is destroyed here; a by-value entry's when the entry itself is
        # freed (_VEntry.__del__): another thread's execute may still hold it for its call.
        old = cache.pop(key, None)
        if old is not None and not isinstance(old, _VEntry):
            self.api.destroy(old.vp)
        while len(cache) >= self._XCACHE_MAX:
            old = cache.pop(next(iter(cache)))
            if not isinstance(old, _VEntry):
                self.api.destroy(old.vp)
        old = None
        cache[key] = e
        _vflush()

    def _xflush(self):
        dead = self.__dict__.get("_xdead")
        while dead:
            self.api.destroy(dead.pop())
        _vflush()

    def _xcache_clear(self):
        """Destroy every kept variant pack (plans released, graph closed)."""
        cache = self.__dict__.get("_xcache")
        if cache:
            for e in cache.values():
                self.api.destroy(e.vp)
            cache.clear()
        cache = self.__dict__.get("_fcache")
        if cache:
            cache.clear()             # each freed _VEntry hands its pack to _vflush
        self._xflush()



_IMM = (int, float, bool)


def _tensor_label(t, uid):
    return f"tensor {t.name!r} (uid {uid})" if t is not None and t.name else f"tensor uid {uid}"


def _xkey(variant_pack, workspace, handle, _imm=_IMM):
    """The cache key of one execute call: types plus identities (numbers and strings by value)."""
    tw = type(workspace)
    k = [id(handle), tw, workspace if tw in _imm else id(workspace)]
    for kk, v in variant_pack.items():
        tk, tv = type(kk), type(v)
        k += (tk, kk if tk in _imm or tk is str else id(kk), tv, v if tv in _imm else id(v))
    return tuple(k)


# buffer kinds kept by value (_vkey): exact type -> 0 number, 1 numpy array, 2 torch tensor (or an
# object of its interface, type named torch.Tensor / torch.Parameter, as buffers.fingerprint_fn)
_K_NUMBER, _K_NDARRAY, _K_TORCH = 0, 1, 2
_KINDS = {int: _K_NUMBER, float: _K_NUMBER, bool: _K_NUMBER, np.ndarray: _K_NDARRAY}
if _fastexec is not None:
    _fastexec.set_kinds(_KINDS)


def _learn_kinds(variant_pack, workspace, _kinds=_KINDS):
    """Add the torch tensor types of one call to the by-value kinds (they are met, not imported)."""
    for v in (workspace, *variant_pack.values()):
        tv = type(v)
        if tv not in _kinds and tv.__module__ == "torch" and tv.__name__ in ("Tensor", "Parameter"):
            _kinds[tv] = _K_TORCH


def _py_fp(v, k, _kinds=_KINDS):
    """One buffer's by-value fingerprint onto list k; False when it is not kept by value."""
    if v is None:
        k.append(None)
        return True
    tv = type(v)
    kind = _kinds.get(tv)
    if kind is None:
        return False
    if kind == _K_TORCH:
        k += (tv, v.data_ptr(), v.dtype, v.shape, v.stride(), v.device)
    elif kind == _K_NDARRAY:
        k += (tv, v.__array_interface__["data"][0], v.flags.writeable, v.shape, v.strides, v.dtype)
    else:
        k += (tv, v)
    return True


def _py_vkey(variant_pack, workspace, handle, _imm=_IMM):
    """The by-value key of one execute call (see the execute cache above), or None."""
    k = [None if handle is None else id(handle)]
    try:
        if not _py_fp(workspace, k):
            return None
        for kk, v in variant_pack.items():
            if kk is None:
                continue
            tk = type(kk)
            k += (tk, kk if tk in _imm or tk is str else id(kk))
            if not _py_fp(v, k):
                return None
    except Exception:  # noqa: BLE001 - a buffer that gives no fingerprint: the slow path says why
        return None
    return tuple(k)


def _py_fast_execute(g, cache, variant_pack, workspace, handle):
    """Python twin of _fastexec.execute: the status of one hipdnnBackendExecute on the kept pack
    of this call, or None (no entry, or the graph's state moved: the caller takes the slow path)."""
    key = _py_vkey(variant_pack, workspace, handle)
    e = cache.get(key) if key is not None else None
    if e is None:
        return None
    i = g._active
    if (i is None or not 0 <= i < len(g._plans) or g._plan_ok[i] is not True
            or g._plans[i] is not e[0] or g.select_engine_by_memory is not e[1]
            or g._dev_ws is not e[2]):
        return None
    hh = g.handle if handle is None else handle
    if hh is not e[3] or hh._h is not e[4]:
        return None
    return e[11](e[4], e[0], e[9])


def use_c_fast_path(on: bool) -> bool:
    """Serve execute's by-value cache from C (hipdnn_cabi.frontend._fastexec: Graph.execute is
    its graph_execute_method) or from Python (ExecutionMixin._py_execute, _py_fast_execute);
    process-wide, what tests and benchmarks compare.  Returns whether C serves it now."""
    global _vkey, _fast_execute
    on = bool(on) and _fastexec is not None
    if on:
        _vkey, _fast_execute = _fastexec.key, _fastexec.execute
        ExecutionMixin.execute = _fastexec.graph_execute_method
    else:
        _vkey, _fast_execute = _py_vkey, _py_fast_execute
        ExecutionMixin.execute = ExecutionMixin._py_execute
    return on


# HIPDNN_CABI_NO_C_FAST_EXECUTE=1 (read at import): the Python spelling
use_c_fast_path(os.environ.get("HIPDNN_CABI_NO_C_FAST_EXECUTE", "") in ("", "0"))


def _addr_fn(ffi):
    return lambda c: int(ffi.cast("uintptr_t", c))


def _exec_address(api) -> int:
    """The address of the library's hipdnnBackendExecute (what _fastexec calls)."""
    x = api.__dict__.get("_exec_addr")
    if x is None:
        x = api._exec_addr = int(api.ffi.cast("uintptr_t", api.lib.hipdnnBackendExecute))
    return x


# packs of freed by-value entries, destroyed by the next _vflush (not inside __del__, which may
# run in the middle of anything): (destroy, pack)
_VDEAD: list = []


def _vflush(dead=_VDEAD):
    while dead:
        try:
            destroy, vp = dead.pop()
        except IndexError:      # another thread took the last one
            return
        destroy(vp)


class _VEntry(tuple):
    """One pack kept by value: (plan, select_engine_by_memory, _dev_ws, handle, raw handle,
    handle / plan / pack addresses, hipdnnBackendExecute's address, pack, holders, execute,
    destroy); cdef/fastexec.c reads the first nine fields.  Its pack is destroyed after the
    entry is freed — by the cache and by every execute that held it for its call."""
    __slots__ = ()
    plan = property(lambda e: e[0])
    h_raw = property(lambda e: e[4])
    vp = property(lambda e: e[9])
    keep = property(lambda e: e[10])
    execute = property(lambda e: e[11])

    def __del__(self, dead=_VDEAD):
        try:
            dead.append((self[12], self[9]))
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass


class _XEntry:
    """One kept variant pack (Graph.execute's cache)."""
    __slots__ = ("vp", "h_raw", "plan", "execute", "state", "fps", "wfp", "keep", "refs")

    def valid(self, g, variant_pack, workspace, handle) -> bool:
        hh = handle or g.handle
        if hh is None or hh._h is not self.h_raw or g._xstate() != self.state:
            return False
        for v, (f, fp) in zip(variant_pack.values(), self.fps):
            if f(v) != fp:
                return False
        w = self.wfp
        return w is None or w[0](workspace) == w[1]
