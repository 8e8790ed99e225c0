"""hipdnnBackendExecute (spec §4.1): every check in order, then one plugin call.

The hipdnnPluginDeviceBuffer_t array is built in bulk: the variant pack packs its (uid, pointer)
pairs once at finalize; here one ``ffi.new`` + one ``memmove`` (cached on the variant pack).

The C fast path (cdef/shims.c, docs/plugins.md): after an execute succeeds here (no override
attributes), :func:`_register` hands the handle/plan/pack ids and what the call used to the C
registry, so the next execute of the same ids never enters Python.  Everything the C path does
not know comes here.  ``HIPDNN_CABI_NO_FAST_EXECUTE=1`` (read at library start) or
:func:`set_fast_path` turn it off.
"""
from __future__ import annotations

from .._generated.enums import DescriptorType
from ..errors import (BadParamError, InternalError, NotSupportedError, NullPointerError,
                      OutOfBoundError, PluginError)
from . import env, registry, runtime
from .descriptors.base import Descriptor
from .devices import check_execute
from .plugins.host import describe_declines

PLAN = DescriptorType.HIPDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR
VP = DescriptorType.HIPDNN_BACKEND_VARIANT_PACK_DESCRIPTOR
FAST_KINDS = (PLAN, VP)  # the descriptor kinds the C fast path registers
MISMATCH = "Unpacking HipdnnBackendDescriptor failed: Descriptor type mismatch."
UINT32_MAX = 0xFFFFFFFF
_objects = registry.objects


def _buffers(vp):
    b = vp.buffers
    if b is None:
        ffi = runtime.ffi
        n = len(vp.uids)
        b = ffi.new("hipdnnPluginDeviceBuffer_t[]", n)
        ffi.memmove(b, vp.packed, len(vp.packed))
        vp.buffers = b
    return b


def execute(handle, plan_id, vp_id, hid=None, _resolve=registry.resolve, _D=Descriptor):
    plan = _resolve(plan_id)
    if not isinstance(plan, _D):
        raise NullPointerError("hipdnnBackendExecute: execution plan descriptor is invalid or nullptr")
    vp = _resolve(vp_id)  # a C-resident pack: a snapshot view (cdef/vpack.c)
    if not isinstance(vp, _D):
        raise NullPointerError("hipdnnBackendExecute: variant pack descriptor is invalid or nullptr")
    if plan.DESCRIPTOR_TYPE != PLAN or vp.DESCRIPTOR_TYPE != VP:
        raise BadParamError(MISMATCH)
    if not plan.finalized:
        raise BadParamError("hipdnnBackendExecute: execution plan is not finalized")
    if not vp.finalized:
        raise BadParamError("hipdnnBackendExecute: variant pack is not finalized")
    uids, ptrs = vp.uids, vp.pointers
    n = len(uids)
    if n != len(ptrs):
        raise BadParamError("hipdnnBackendExecute: unique ids and data pointers differ in number")
    aligns = plan.alignments
    if aligns and vp.checked_alignments is not aligns:
        for u, p in zip(uids, ptrs):
            if p:
                a = aligns.get(u, 0)
                if a > 0 and p % a:
                    raise BadParamError(f"Tensor uid {u} device pointer is not aligned to the "
                                        f"required {a} bytes")
        vp.checked_alignments = aligns  # a finalized pack and plan never change
    vdev = -1
    if handle.device >= 0:  # plan / buffers of another device -> BAD_PARAM (backend/devices.py)
        vdev = check_execute(handle, plan, vp)
        if getattr(vp, "c_resident", False) and vp_id is not None:
            runtime.lib.hipdnn_cabi_vp_set_device(vp_id, vdev)   # the C fast path's device check
    hp = handle.plugins
    r = hp.owner(plan.engine_id) if hp is not None else None
    if r is None:
        raise InternalError(f"Invalid engine ID: {plan.engine_id}")
    plugin, ph = r
    if vp.has_overrides:
        return _execute_overrides(plan, vp, plugin, ph, _workspace(vp), n)
    tramp = plugin.tramp_execute
    if tramp is None:
        tramp = plugin.tramp_execute = (
            getattr(runtime.lib, "tramp_hipdnnEnginePluginExecuteOpGraph"),
            plugin.fn["hipdnnEnginePluginExecuteOpGraph"])
    st = tramp[0](tramp[1], ph, plan.context, _workspace(vp), _buffers(vp), n)
    if st:
        _fail(plugin, plan, "execute op graph", st)
    if hid is not None and _fast[0]:
        _register(hid, plan_id, vp_id, handle, plan, vp, plugin, ph, vdev)
    return 0


def _fail(plugin, plan, action, st):
    """The plugin's failure, naming the engines that declined the plan's graph and why: a graph
    that only a host-memory engine accepted and that fails there on device memory then shows
    the GPU engine's reason, not only the CPU engine's memory message."""
    try:
        plugin.fail(action, st)
    except PluginError as e:
        declines = getattr(plan, "declines", None)
        if declines:
            raise PluginError(f"{e.message} (the plan's engine was the only one to accept the "
                              f"graph; {describe_declines(declines)})") from None
        raise


# ---------------------------------------------------------------------------- the C fast path
_fast = [env.get_stripped("HIPDNN_CABI_NO_FAST_EXECUTE") in ("", "0")]  # read at library start
EXEC_SYM = "hipdnnEnginePluginExecuteOpGraph"
LASTERR_SYM = "hipdnnPluginGetLastErrorString"


def set_fast_path(on: bool) -> None:
    """Turn the C execute fast path on or off (process-wide; entries stay registered)."""
    _fast[0] = bool(on)
    runtime.lib.hipdnn_cabi_fx_set_enabled(1 if on else 0)


def fast_path_stats() -> dict:
    """Counters of the C registry: fast executes, executes that went to Python, registered ids."""
    ffi = runtime.ffi
    out = ffi.new("uint64_t[4]")
    runtime.lib.hipdnn_cabi_fx_stats(out)
    return {"fast": int(out[0]), "python": int(out[1]), "registered": int(out[2]),
            "epoch": int(out[3]), "enabled": bool(runtime.lib.hipdnn_cabi_fx_enabled())}


def _register(hid, plan_id, vp_id, handle, plan, vp, plugin, ph, vdev=-1):
    """Hand (handle, plan, pack) to the C registry.  The removal epoch is read BEFORE checking
    that the three ids are still alive (under the GIL): a destroy racing with this either
    happened before the check (nothing registered) or bumps the epoch (registration refused)
    or removes what was registered."""
    lib, ffi = runtime.lib, runtime.ffi
    epoch = lib.hipdnn_cabi_fx_epoch()
    c_pack = getattr(vp, "c_resident", False)  # already in the C registry (NULL packed below)
    if (_objects.get(plan_id) is not plan or (not c_pack and _objects.get(vp_id) is not vp)
            or _objects.get(hid) is not handle):
        return
    hp = handle.plugins
    if hp is None or hp.closed or not plan.finalized or not vp.finalized or vp.has_overrides:
        return
    fn = plugin.fn
    if EXEC_SYM not in fn or LASTERR_SYM not in fn:
        return
    pairs = []
    for u, a in (plan.alignments or {}).items():
        if a > 0:
            pairs += (u, a)
    n = len(vp.uids)
    if n > UINT32_MAX or len(vp.packed) != 16 * n:
        return
    lib.hipdnn_cabi_fx_register(
        epoch, hid, plan.engine_id, int(ffi.cast("uintptr_t", ph)), fn[EXEC_SYM], fn[LASTERR_SYM],
        plan_id, int(ffi.cast("uintptr_t", plan.context)), len(pairs) // 2,
        ffi.new("int64_t[]", pairs) if pairs else ffi.NULL, vp_id,
        ffi.NULL if c_pack else vp.packed, n, vp.workspace,
        handle.device, getattr(plan, "device", -1), vdev)


def forget(i: int) -> None:
    """An id was destroyed: drop it from the C registry (waits for fast executes using it)."""
    lib = runtime.lib
    if lib is not None:
        lib.hipdnn_cabi_fx_remove(i)


def _workspace(vp):
    w = vp.workspace_c
    if w is None:
        w = vp.workspace_c = runtime.ffi.cast("void*", vp.workspace)
    return w


def _execute_overrides(plan, vp, plugin, ph, ws, n):
    if not plan.override_shape_enabled:
        raise NotSupportedError("hipdnnBackendExecute: the execution plan was not built with "
                                "override shapes enabled")
    ouids = list(vp.override_uids or ())
    lengths = list(vp.override_lengths or ())
    if len(ouids) != len(lengths):
        raise BadParamError("hipdnnBackendExecute: override unique ids and lengths differ in number")
    if not plugin.has_overrides or plugin.api_version < (1, 1, 0):
        raise NotSupportedError("hipdnnBackendExecute: the engine plugin does not support "
                                "ExecuteOpGraphWithOverrides")
    for L in lengths:
        if L <= 0 or L > UINT32_MAX:
            raise OutOfBoundError(f"hipdnnBackendExecute: override length {L} out of range")
    total = sum(lengths)
    shapes = list(vp.override_shapes or ())
    strides = list(vp.override_strides or ())
    if len(shapes) != total or len(strides) != total:
        raise BadParamError("hipdnnBackendExecute: flattened override shapes/strides do not match "
                            "the sum of the override lengths")
    ffi = runtime.ffi
    k = len(ouids)
    c_uids = ffi.new("int64_t[]", ouids)
    c_len = ffi.new("uint32_t[]", lengths)
    c_shapes = ffi.new("int64_t[]", shapes or [0])
    c_strides = ffi.new("int64_t[]", strides or [0])
    p_shapes = ffi.new("int64_t*[]", k)
    p_strides = ffi.new("int64_t*[]", k)
    off = 0
    for i, L in enumerate(lengths):
        p_shapes[i] = c_shapes + off
        p_strides[i] = c_strides + off
        off += L
    plugin.call("execute op graph with overrides", "hipdnnEnginePluginExecuteOpGraphWithOverrides",
                ph, plan.context, ws, _buffers(vp), n, k, c_uids, c_len,
                ffi.cast("const int64_t* const*", p_shapes), ffi.cast("const int64_t* const*", p_strides))
    return 0
