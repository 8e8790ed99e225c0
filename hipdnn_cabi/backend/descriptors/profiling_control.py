"""HIPDNN_BACKEND_PROFILING_CONTROL_EXT (spec §1.14): timing one execute for the frontend's autotune.

Sequence: set PROFILING_HANDLE_EXT (HANDLE) — events are created on the handle's stream when the
device layer has a GPU runtime, else a host timer is used; set PROFILING_START_EXT (BOOLEAN true)
records the start; execute; set PROFILING_STOP_EXT (BOOLEAN true) records the stop; finalize waits
for the stop and computes the time; get PROFILING_ELAPSED_MS_EXT (FLOAT).  PROFILING_DEVICE_SYNC_EXT
(BOOLEAN true) synchronises the device (host timer: nothing to wait for).  Set after finalize →
NOT_INITIALIZED (the base class rule); get before finalize → NOT_INITIALIZED.
"""
from __future__ import annotations

import time

from ... import device
from ..._generated.enums import AttributeName as A, DescriptorType
from ...errors import BadParamError, ExecutionFailedError
from .. import attrs
from ..handle import Handle
from .base import Descriptor, getter, setter


class _HostTimer:
    kind = "host"

    def record(self):
        return time.perf_counter()

    def elapsed_ms(self, a, b) -> float:
        return (b - a) * 1e3

    def sync(self):
        pass

    def close(self):
        pass


class _DeviceTimer:
    kind = "device"

    def __init__(self, rt, stream: int):
        self.rt, self.stream = rt, stream
        self.events = []

    def record(self):
        ev = self.rt.event_create()
        self.events.append(ev)
        self.rt.event_record(ev, self.stream)
        return ev

    def elapsed_ms(self, a, b) -> float:
        return self.rt.event_elapsed_ms(a, b)

    def sync(self):
        self.rt.synchronize()

    def close(self):
        destroy = getattr(self.rt, "event_destroy", None)
        for ev in self.events:
            try:
                if destroy is not None:
                    destroy(ev)
            except Exception:  # noqa: BLE001
                pass
        self.events = []


def _timer_for(handle: Handle):
    try:
        if device.available():
            return _DeviceTimer(device.get_runtime(), int(handle.stream or 0))
    except Exception:  # noqa: BLE001 - no usable device: the host timer
        pass
    return _HostTimer()


class ProfilingControlDescriptor(Descriptor):
    DESCRIPTOR_TYPE = DescriptorType.HIPDNN_BACKEND_PROFILING_CONTROL_EXT
    NAME = "ProfilingControlDescriptor"

    def __init__(self):
        super().__init__()
        self.handle = None
        self.timer = None
        self.start = None
        self.stop = None
        self.elapsed = None

    @setter(A.HIPDNN_ATTR_PROFILING_HANDLE_EXT)
    def _set_handle(self, ctx, atype, count, arr, nbytes):
        obj = attrs.handle_attribute(ctx, atype, count, arr, nbytes)
        if self.timer is not None:
            self.timer.close()
        self.handle, self.timer = obj, _timer_for(obj)
        self.start = self.stop = None

    def _need_handle(self, ctx):
        if self.timer is None:
            raise BadParamError(f"{ctx}: PROFILING_HANDLE_EXT is not set")

    @setter(A.HIPDNN_ATTR_PROFILING_START_EXT)
    def _set_start(self, ctx, atype, count, arr, nbytes):
        if attrs.set_bool(ctx, atype, count, arr, nbytes):
            self._need_handle(ctx)
            self.start, self.stop = self.timer.record(), None

    @setter(A.HIPDNN_ATTR_PROFILING_STOP_EXT)
    def _set_stop(self, ctx, atype, count, arr, nbytes):
        if attrs.set_bool(ctx, atype, count, arr, nbytes):
            self._need_handle(ctx)
            if self.start is None:
                raise BadParamError(f"{ctx}: PROFILING_START_EXT was not set")
            self.stop = self.timer.record()

    @setter(A.HIPDNN_ATTR_PROFILING_DEVICE_SYNC_EXT)
    def _set_sync(self, ctx, atype, count, arr, nbytes):
        if attrs.set_bool(ctx, atype, count, arr, nbytes):
            self._need_handle(ctx)
            self.timer.sync()

    def _finalize(self):
        ctx = "ProfilingControlDescriptor::finalize() failed"
        self._need_handle(ctx)
        if self.start is None or self.stop is None:
            raise BadParamError(f"{ctx}: PROFILING_START_EXT and PROFILING_STOP_EXT must both be set")
        try:
            self.elapsed = float(self.timer.elapsed_ms(self.start, self.stop))
        except Exception as e:  # noqa: BLE001
            raise ExecutionFailedError(f"{ctx}: cannot read the timing events: {e}") from None

    @getter(A.HIPDNN_ATTR_PROFILING_ELAPSED_MS_EXT)
    def _get_elapsed(self, ctx, atype, req, cnt, arr):
        attrs.get_float(ctx, atype, req, cnt, arr, self.elapsed)

    @getter(A.HIPDNN_ATTR_PROFILING_START_EXT)
    def _get_start(self, ctx, atype, req, cnt, arr):
        attrs.get_bool(ctx, atype, req, cnt, arr, self.start is not None)

    @getter(A.HIPDNN_ATTR_PROFILING_STOP_EXT)
    def _get_stop(self, ctx, atype, req, cnt, arr):
        attrs.get_bool(ctx, atype, req, cnt, arr, self.stop is not None)

    def destroy(self):
        if self.timer is not None:
            self.timer.close()
