"""Executing a built ``Graph``: plan choice by memory kind, workspaces, variant packs (spec §2.7)."""
from __future__ import annotations

import numpy as np

from ..._generated.enums import AttributeName as A
from ..._generated.enums import AttributeType as T
from ..._generated.enums import DescriptorType as D
from ...errors import BadParamError, HipdnnError, NotSupportedError
from .. import buffers as _buffers
from ..buffers import resolve_pointer
from ..handle import Handle, engine_memory_kind
from ..tensor import Tensor


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

    def _plan_for_memory(self, kind):
        """Make active the plan of an engine that reaches ``kind`` memory ("host"/"device").
        Rule: an explicit engine (preferred name/id, create_execution_plan_ext, a compiled plan)
        always wins; else keep the active plan when its engine reaches the memory; else the first
        engine in heuristic order that does (plan built once, cached per memory kind); else keep
        the active plan (the engine then checks its pointers itself)."""
        self._need_plan()
        if kind is None or not self.select_engine_by_memory or self._engine_pinned():
            return
        if self.engine_memory_kind() in (None, kind):
            self._mem_plan.setdefault(kind, self._active)
            return
        if kind in self._mem_plan:
            i = self._mem_plan[kind]
            if i is not None and i != self._active:
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
        for i, eid in enumerate(self._engine_ids):
            if i == keep or engine_memory_kind(self._engine_name_of(eid)) != kind:
                continue
            if not self._plan_ok[i]:
                if self._cfgs[i] is None:
                    continue
                try:
                    self._build_plan(i)
                except HipdnnError:
                    continue
            found = i
            break
        self._mem_plan[kind] = found
        if found is not None:
            self._activate(found)
        else:
            self._workspace = self._ws_sizes.get(keep, self._workspace)

    def _device_workspace(self, size, handle=None):
        """A device workspace of ``size`` bytes (hipdnn_cabi.device) on the handle's device,
        owned by the graph."""
        dev = getattr(handle, "device", -1)
        if (self._dev_ws is not None and self._dev_ws[0] >= size
                and getattr(self._dev_ws[2], "device", dev) == dev):
            return self._dev_ws[1]
        try:
            from ... import device
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
        instead — unless an engine was chosen explicitly.  See :meth:`_plan_for_memory`."""
        self._need_plan()
        h = handle or self.handle
        a = self.api
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
        self._plan_for_memory(next(iter(kinds)) if len(kinds) == 1 else None)
        plan = self._need_plan()
        if workspace is None:
            ws = self._workspace if self._workspace is not None else self.get_workspace_size()
            if ws > 0:
                if self.engine_memory_kind() == "device":
                    workspace = self._device_workspace(ws, h)
                else:
                    workspace = np.empty(ws, dtype=np.uint8)
        wptr = 0
        if workspace is not None:
            wptr, wh = resolve_pointer(workspace, None)
            keep.append(wh)
        vp = a.create(D.HIPDNN_BACKEND_VARIANT_PACK_DESCRIPTOR)
        try:
            a.set(vp, A.HIPDNN_ATTR_VARIANT_PACK_DATA_POINTERS, T.HIPDNN_TYPE_VOID_PTR,
                  [ffi.cast("void*", p) for p in ptrs])
            a.set(vp, A.HIPDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, T.HIPDNN_TYPE_INT64, uids)
            a.set(vp, A.HIPDNN_ATTR_VARIANT_PACK_WORKSPACE, T.HIPDNN_TYPE_VOID_PTR,
                  [ffi.cast("void*", wptr)])
            a.finalize(vp, "finalize variant pack")
            a.check(a.lib.hipdnnBackendExecute(h.raw, plan, vp), "hipdnnBackendExecute")
        finally:
            a.destroy(vp)
            del keep
        return self

