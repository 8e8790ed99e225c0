"""Is a bound pointer host-accessible?

The engine reads and writes every buffer from the CPU.  On a machine with a GPU runtime, a
variant pack may hold device-only pointers (hipMalloc / cudaMalloc); dereferencing one from the
host would crash the process.  When a GPU runtime's Python bindings are importable -
``hip-python`` or NVIDIA's ``cuda-bindings``, through :mod:`hipdnn_cabi.device` -
:func:`classify` asks it what each pointer is and the engine
fails with INVALID_VALUE naming the uid for device-only memory.  Host memory (malloc'd,
pinned / registered) and managed (unified) memory are accepted.  Without such bindings every
pointer is taken as host memory (the usual case on a CPU-only machine).

``set_classifier(fn)`` replaces the probe (``fn(ptr) -> "host" | "device" | "managed" | None``);
tests use it.
"""
from __future__ import annotations

import threading

_lock = threading.Lock()
_probe = None          # callable(ptr) -> kind or None
_probed = False
_override = None


def _find_probe():
    """The pointer-kind query of the project's device layer (hipdnn_cabi.device: hip-python or
    cuda-bindings), or None when no GPU runtime is usable in this process."""
    try:
        from hipdnn_cabi import device
        if not device.available():
            return None
        return lambda p: device.pointer_info(p)[0]   # process-wide: creates no context
    except Exception:  # noqa: BLE001 - bindings absent or unusable
        return None


def gpu_runtime_present() -> bool:
    return _get() is not None


def _get():
    global _probe, _probed
    if _override is not None:
        return _override
    if not _probed:
        with _lock:
            if not _probed:
                _probe = _find_probe()
                _probed = True
    return _probe


def set_classifier(fn) -> None:
    """Replace the pointer probe (None restores the automatic one)."""
    global _override
    _override = fn


def classify(ptr: int):
    """"host", "device", "managed" or None (unknown = host) for a pointer."""
    p = _get()
    if p is None or not ptr:
        return None
    try:
        return p(int(ptr))
    except Exception:  # noqa: BLE001 - a failing probe must not break execution
        return None


def host_accessible(ptr: int) -> bool:
    return classify(ptr) != "device"
