"""hipdnnBackendExecute (spec §4.1): every check in order, then one plugin call.

The hipdnnPluginDeviceBuffer_t array is built in bulk: the variant pack packs its (uid, pointer)
pairs once at finalize; here one ``ffi.new`` + one ``memmove`` (cached on the variant pack).
"""
from __future__ import annotations

from .._generated.enums import DescriptorType
from ..errors import BadParamError, NotSupportedError, NullPointerError, OutOfBoundError
from . import registry, runtime
from .descriptors.base import Descriptor

PLAN = DescriptorType.HIPDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR
VP = DescriptorType.HIPDNN_BACKEND_VARIANT_PACK_DESCRIPTOR
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


def execute(handle, plan_id, vp_id, _objects=_objects, _D=Descriptor):
    plan = _objects.get(plan_id)
    if not isinstance(plan, _D):
        raise NullPointerError("hipdnnBackendExecute: execution plan descriptor is invalid or nullptr")
    vp = _objects.get(vp_id)
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
    hp = handle.plugins
    r = hp.owner(plan.engine_id) if hp is not None else None
    if r is None:
        from ..errors import InternalError
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
        plugin.fail("execute op graph", st)
    return 0


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
