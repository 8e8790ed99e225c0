"""The HIP engine's device context: which GPU a plugin handle, a plan and a launch belong to.

docs/gpu.md "Many GPUs in one process".  In short:

* A plugin handle binds to the calling thread's current device when it is created
  (``hipdnnEnginePluginCreate`` runs inside ``hipdnnCreate``, on the caller's thread: the SDK
  asks :meth:`HipKernelsPlugin.handle_device` and keeps the answer as ``handle.device``).
* ``hipdnnEnginePluginSetStream``: a stream of another device -> BAD_PARAM naming both devices;
  a value the runtime cannot place on any device is kept but marked, and execute refuses to
  launch on it (BAD_PARAM) instead of handing it to the driver.
* Plan building (applicability, workspace size, build, restore from serialized bytes) runs
  inside ``with on_device(handle):`` - the handle's device is current, so the runtime, the SM
  count and the architecture the analysis sees are that device's, and modules load into that
  device's context (once per context; compiled code is cached per architecture).  The plan
  remembers the device (``plan.device``).
* Execute: a handle of another device -> BAD_PARAM; a buffer that is another device's memory ->
  BAD_PARAM naming the uid and both devices (host memory the GPU cannot reach stays
  INVALID_VALUE); launches run inside ``rt.bound()`` (the plan's device context current, the
  caller's restored afterwards).  Nothing here takes a lock: threads driving different devices
  only share the GIL.
"""
from __future__ import annotations

import contextlib

from hipdnn_cabi import device
from hipdnn_cabi.plugin_sdk.errors import BAD_PARAM, INVALID_VALUE, PluginError

ENGINE = "HIPDNN_CABI_HIP_KERNELS_ENGINE"


def current_device() -> int:
    """What a new plugin handle binds to: the thread's current device (-1: no GPU runtime)."""
    return device.current_device() if device.available() else -1


def handle_device(handle) -> int:
    """The device of a plugin handle (or container); one that bound none (created before a GPU
    was usable, or by an SDK without devices) counts as the thread's current device."""
    d = getattr(handle, "device", -1)
    if d is None or d < 0:
        d = device.current_device()
    return max(int(d), 0)


def runtime(handle):
    return device.get_runtime(handle_device(handle))


def on_device(handle):
    """``with on_device(handle):`` the handle's device is current (no-op without a GPU)."""
    if not device.available():
        return contextlib.nullcontext()
    return runtime(handle).bound()


def bound(rt):
    """``with bound(rt):`` - ``rt.bound()``, or nothing for a runtime without devices (fakes)."""
    b = getattr(rt, "bound", None)
    return b() if b is not None else contextlib.nullcontext()


# ------------------------------------------------------------------------------ streams
class BadStream:
    """``handle.stream_info`` for a stream value the runtime could not place on a device."""
    __slots__ = ("stream", "why")

    def __init__(self, stream, why):
        self.stream, self.why = stream, why


def check_stream(handle, stream: int):
    """The plugin's ``check_stream`` hook: returns the stream's device (None for the null /
    legacy / per-thread streams, which follow the handle's device), a :class:`BadStream`, or
    raises BAD_PARAM for a stream of another device."""
    dev = getattr(handle, "device", -1)
    if not stream or dev is None or dev < 0 or not device.available():
        return None
    try:
        sdev = device.stream_device(int(stream))
    except Exception as e:  # noqa: BLE001 - DeviceError: no such stream
        return BadStream(int(stream), str(e))
    if sdev is not None and sdev != dev:
        raise PluginError(BAD_PARAM, f"{ENGINE}: stream 0x{int(stream):x} belongs to device "
                                     f"{sdev}; the plugin handle is bound to device {dev}")
    return sdev


def check_handle(plan_device: int, handle) -> None:
    """Execute-time checks of the handle: its device is the plan's; its stream is usable."""
    hd = getattr(handle, "device", -1)
    if hd is not None and hd >= 0 and hd != plan_device:
        raise PluginError(BAD_PARAM, f"{ENGINE}: the execution plan was built for device "
                                     f"{plan_device}; the handle is bound to device {hd}")
    info = getattr(handle, "stream_info", None)
    if isinstance(info, BadStream):
        raise PluginError(BAD_PARAM, f"{ENGINE}: the handle's stream 0x{info.stream:x} is not a "
                                     f"stream of this process ({info.why}); no kernel launched")


# ------------------------------------------------------------------------------ buffers
def check_buffer(rt, uid, ptr) -> None:
    """A bound buffer must be reachable by the plan's device: its own device memory, managed or
    pinned host memory, or pageable memory where the device can access it."""
    info = getattr(rt, "pointer_info", None)
    if info is None:               # a runtime without per-device pointer data (test fakes)
        ok = rt.device_accessible(ptr)
        kind, pdev = None, -1
    else:
        kind, pdev = info(ptr)
        mine = getattr(rt, "device", 0)
        if kind == "device" and pdev != mine:
            raise PluginError(BAD_PARAM, f"{ENGINE}: tensor uid {uid}: buffer 0x{int(ptr):x} is "
                                         f"memory of device {pdev}; the plan runs on device {mine}")
        ok = kind in ("device", "managed", "host") or (
            kind is None and bool(getattr(rt, "pageable_access", False)))
    if not ok:
        raise PluginError(INVALID_VALUE,
                          f"tensor uid {uid}: buffer 0x{int(ptr):x} is host memory the GPU "
                          f"cannot access (use device, managed or pinned memory)")
