"""GPU device layer: one small module per runtime, one interface.

* :mod:`.cuda` - NVIDIA, through ``cuda-bindings`` (driver + runtime + NVRTC).  HIP on NVIDIA
  compiles to exactly this, and a ``hipStream_t`` there *is* a ``cudaStream_t``.
* :mod:`.hip`  - AMD ROCm, through ``hip-python`` (``hip.hip`` + ``hip.hiprtc``).

Both offer the same surface (see :class:`hipdnn_cabi.device.cuda.CudaRuntime`): device memory,
streams used as given (integer handles), pointer-attribute queries, run-time compilation of
HIP-dialect C++ to a code object with an on-disk cache keyed by (source hash, options,
architecture, compiler version), module load and kernel launch.

``available()`` is True when a runtime's bindings import *and* a device answers.  It never
raises.  ``get_runtime()`` returns the process-wide runtime object (or raises
:class:`DeviceError`).  ``HIPDNN_CABI_DEVICE=cuda|hip|none`` forces the choice.

``compiler()`` returns a compile-only object (no driver needed) when NVRTC or hiprtc can be
loaded: CI uses it to compile every kernel source for sm_90 without a GPU.
"""
from __future__ import annotations

import os
import threading

from .common import DeviceError, KernelCache  # noqa: F401

_lock = threading.Lock()
_runtime = None
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
        from .cuda import CudaRuntime
        return CudaRuntime()
    from .hip import HipRuntime
    return HipRuntime()


def _probe():
    global _runtime, _probed, _why
    with _lock:
        if _probed:
            return _runtime
        why = []
        for name in _order():
            try:
                rt = _make(name)
                if rt.device_count() > 0:
                    _runtime = rt
                    break
                why.append(f"{name}: no device")
            except Exception as e:  # noqa: BLE001 - bindings absent, no driver, ...
                why.append(f"{name}: {type(e).__name__}: {e}")
        _why = "; ".join(why) or "disabled by HIPDNN_CABI_DEVICE"
        _probed = True
        return _runtime


def available() -> bool:
    """True when a GPU runtime is usable in this process (never raises)."""
    try:
        return _probe() is not None
    except Exception:  # noqa: BLE001
        return False


def get_runtime():
    rt = _probe()
    if rt is None:
        raise DeviceError(f"no GPU runtime available ({_why})")
    return rt


def unavailable_reason() -> str:
    _probe()
    return "" if _runtime is not None else _why


def compiler(kind: str | None = None):
    """A compile-only object (``.compile(src, name, options, arch)``) for ``kind`` ("cuda" /
    "hip"; default: whichever loads first).  Needs no GPU and no driver."""
    kinds = [kind] if kind else ["cuda", "hip"]
    err = []
    for k in kinds:
        try:
            if k == "cuda":
                from .cuda import NvrtcCompiler
                return NvrtcCompiler()
            from .hip import HiprtcCompiler
            return HiprtcCompiler()
        except Exception as e:  # noqa: BLE001
            err.append(f"{k}: {type(e).__name__}: {e}")
    raise DeviceError("no run-time compiler: " + "; ".join(err))


def _reset_for_tests():
    global _runtime, _probed
    with _lock:
        _runtime, _probed = None, False
