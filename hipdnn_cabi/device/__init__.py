"""GPU device layer: one small module per runtime, one interface.

* :mod:`.cuda` - NVIDIA, through ``cuda-bindings`` (driver + runtime + NVRTC).  HIP on NVIDIA
  compiles to exactly this, and a ``hipStream_t`` there *is* a ``cudaStream_t``.
* :mod:`.hip`  - AMD ROCm, through ``hip-python`` (``hip.hip`` + ``hip.hiprtc``).

Both offer the same surface (see :class:`hipdnn_cabi.device.cuda.CudaRuntime`): device memory,
streams used as given (integer handles), pointer-attribute queries, run-time compilation of
HIP-dialect C++ to a code object with an on-disk cache keyed by (source hash, options,
architecture, compiler version), module load and kernel launch.

``available()`` is True when a runtime's bindings import *and* a device answers.  It never
raises.  ``HIPDNN_CABI_DEVICE=cuda|hip|none`` forces the choice.

Many devices (docs/gpu.md "Many GPUs"): the probed *platform* (process-wide: driver, device
count) hands out one runtime object per device, made on first use (a device the process never
touches gets no context).  ``get_runtime(dev)`` is device ``dev``'s runtime; with no argument,
the calling thread's current device's (``current_device()``: CUDA's current context / runtime
device, ``hipGetDevice``).  ``current_device()`` (-1 with no runtime), ``device_count()``,
``stream_device(stream)`` and ``pointer_info(ptr)`` never create a context.  No call here
changes the caller's current device; ``with rt.bound():`` makes a runtime's device current for
a block and restores the caller's afterwards.

``compiler()`` returns a compile-only object (no driver needed) when NVRTC or hiprtc can be
loaded: CI uses it to compile every kernel source for sm_90 without a GPU.
"""
from __future__ import annotations

import os
import threading

from .common import DeviceError, KernelCache  # noqa: F401
from .cuda import CudaPlatform, NvrtcCompiler
from .hip import HipPlatform, HiprtcCompiler

_lock = threading.Lock()
_platform = None
_probed = False
_why = ""


def _order():
    forced = os.environ.get("HIPDNN_CABI_DEVICE", "").strip().lower()
    if forced in ("none", "off", "0"):
        return []
    if forced in ("cuda", "hip"):
        return [forced]
    return ["hip", "cuda"]


def _make(name):
    if name == "cuda":
        return CudaPlatform()
    return HipPlatform()


def _probe():
    global _platform, _probed, _why
    if _probed:
        return _platform
    with _lock:
        if _probed:
            return _platform
        why = []
        for name in _order():
            try:
                p = _make(name)
                if p.device_count() > 0:
                    _platform = p
                    break
                why.append(f"{name}: no device")
            except Exception as e:  # noqa: BLE001 - bindings absent, no driver, ...
                why.append(f"{name}: {type(e).__name__}: {e}")
        _why = "; ".join(why) or "disabled by HIPDNN_CABI_DEVICE"
        _probed = True
        return _platform


def platform():
    """The process-wide platform object (driver + device count), or None (never raises)."""
    try:
        return _probe()
    except Exception:  # noqa: BLE001
        return None


def available() -> bool:
    """True when a GPU runtime is usable in this process (never raises)."""
    return platform() is not None


def device_count() -> int:
    p = platform()
    return p.device_count() if p is not None else 0


def current_device() -> int:
    """The calling thread's current device, -1 when there is no GPU runtime (never raises: a
    failing query counts as device 0 when devices exist)."""
    p = platform()
    if p is None:
        return -1
    try:
        return int(p.current_device())
    except Exception:  # noqa: BLE001
        return 0


def stream_device(stream: int):
    """The device ``stream`` belongs to; None for the null / legacy / per-thread streams (they
    follow the device current at use).  Raises :class:`DeviceError` for a value that is no
    stream, or when there is no GPU runtime."""
    return _need().stream_device(int(stream))


def pointer_info(ptr: int):
    """(kind, device ordinal) of a pointer: kind "device" / "managed" / "host" (pinned) / None
    (unknown to the runtime: pageable host memory or garbage; ordinal -1).  (None, -1) without
    a GPU runtime.  Safe on any integer."""
    p = platform()
    if p is None or not ptr:
        return None, -1
    try:
        return p.pointer_info(int(ptr))
    except Exception:  # noqa: BLE001
        return None, -1


def _need():
    p = _probe()
    if p is None:
        raise DeviceError(f"no GPU runtime available ({_why})")
    return p


def get_runtime(dev: int | None = None):
    """Device ``dev``'s runtime (made on first use); ``None`` or negative: the calling thread's
    current device's.  Raises :class:`DeviceError` without a GPU runtime or for a device that
    does not exist."""
    p = _need()
    if dev is None or dev < 0:
        try:
            dev = int(p.current_device())
        except Exception:  # noqa: BLE001
            dev = 0
    return p.runtime(dev)


def unavailable_reason() -> str:
    _probe()
    return "" if _platform is not None else _why


def compiler(kind: str | None = None):
    """A compile-only object (``.compile(src, name, options, arch)``) for ``kind`` ("cuda" /
    "hip"; default: whichever loads first).  Needs no GPU and no driver."""
    kinds = [kind] if kind else ["cuda", "hip"]
    err = []
    for k in kinds:
        try:
            if k == "cuda":
                return NvrtcCompiler()
            return HiprtcCompiler()
        except Exception as e:  # noqa: BLE001
            err.append(f"{k}: {type(e).__name__}: {e}")
    raise DeviceError("no run-time compiler: " + "; ".join(err))


def _reset_for_tests():
    global _platform, _probed
    with _lock:
        _platform, _probed = None, False


def _install_for_tests(platform_obj, why: str = ""):
    """Use ``platform_obj`` (a fake with the platform surface, or None for "no GPU") as the
    process's platform.  Tests only (tests/gpu/fake_devices.py)."""
    global _platform, _probed, _why
    with _lock:
        _platform, _probed = platform_obj, True
        _why = why or "no GPU (installed by a test)"
