"""Handles bound to devices (docs/gpu.md "Many GPUs in one process").

``hipdnnCreate`` records the calling thread's current device (the device layer's
``current_device()``: CUDA's current context / runtime device, ``hipGetDevice``; -1 = no GPU
runtime, a host-only handle).  Against that device:

* ``hipdnnSetStream``: a stream of another device -> HIPDNN_STATUS_BAD_PARAM_STREAM_MISMATCH
  naming both devices (the stream is not stored).  The null / legacy / per-thread streams follow
  the handle's device.  A value the runtime cannot place (no such address, or its query fails)
  is stored unchecked, as before (hipDNN stores streams as given); the GPU engine refuses to
  launch on it.
* ``hipdnnBackendExecute``: a plan built with a handle of another device -> BAD_PARAM naming
  both; a variant-pack pointer that is device memory of another device -> BAD_PARAM naming the
  uid and both devices.  Checked once per (pack, device) on the Python path; the C fast path
  refuses such combinations (it goes back to this path).

Managed, pinned host and pageable memory are device-neutral.  Peer access is not considered:
another device's memory is refused even where peer access is enabled.
"""
from __future__ import annotations

from .. import device as _device
from ..errors import BadParamError, StreamMismatchError
from . import log, runtime


def current_device() -> int:
    """The device a new handle binds to (-1: no GPU runtime; never raises).  A device handle in a
    process with several GPUs also tells the C fast path to route executes of C-resident variant
    packs (which record no buffer devices) through the checking path."""
    try:
        dev = _device.current_device()
    except Exception:  # noqa: BLE001 - a broken runtime makes host-only handles
        return -1
    if dev >= 0:
        try:
            if _device.device_count() > 1:
                if runtime.lib is not None:
                    runtime.lib.hipdnn_cabi_fx_set_multi_device(1)
        except Exception:  # noqa: BLE001
            pass
    return dev


def check_stream(handle, stream: int) -> None:
    dev = handle.device
    if dev < 0 or not stream:
        return
    try:
        sdev = _device.stream_device(stream)
    except Exception as e:  # noqa: BLE001 - DeviceError: not a stream the runtime knows
        if log.enabled(0):   # HIPDNN_SEV_INFO
            log.log(0, f"hipdnnSetStream: stream 0x{int(stream):x} could not be placed on a "
                       f"device ({e}); stored unchecked")
        return
    if sdev is not None and sdev != dev:
        raise StreamMismatchError(
            f"hipdnnSetStream: stream 0x{int(stream):x} belongs to device {sdev}, the handle was "
            f"created on device {dev} (create the handle while device {sdev} is current, or use "
            f"a stream of device {dev})")


def pack_device(vp, dev: int, fn: str = "hipdnnBackendExecute") -> int:
    """Check the pack's pointers against device ``dev``; returns the device whose memory the
    pack holds (``dev``) or -1 when it holds only device-neutral memory.  Cached on the pack."""
    seen = getattr(vp, "device_checked", None)
    if seen is not None and seen[0] == dev:
        return seen[1]
    pointer_info = _device.pointer_info
    bound = -1
    items = list(zip(vp.uids, vp.pointers))
    if vp.workspace:
        items.append(("workspace", vp.workspace))
    for uid, p in items:
        if not p:
            continue
        kind, pdev = pointer_info(p)
        if kind != "device":
            continue
        if pdev != dev:
            what = "the workspace" if uid == "workspace" else f"tensor uid {uid}"
            raise BadParamError(f"{fn}: {what}: buffer 0x{int(p):x} is memory of device {pdev}; "
                                f"the handle is on device {dev}")
        bound = dev
    vp.device_checked = (dev, bound)
    return bound


def check_execute(handle, plan, vp) -> int:
    """The device checks of hipdnnBackendExecute; returns the pack's device (for the fast path)."""
    dev = handle.device
    if dev < 0:
        return -1
    pdev = getattr(plan, "device", -1)
    if pdev >= 0 and pdev != dev:
        raise BadParamError(f"hipdnnBackendExecute: the execution plan was built for device "
                            f"{pdev}; the handle is on device {dev} (execute with a handle of "
                            f"device {pdev}, or build the plan with this handle)")
    return pack_device(vp, dev)
