"""Pieces shared by the runtimes: the error type, the on-disk code cache, packed kernel args."""
from __future__ import annotations

import ctypes
import hashlib
import os
import tempfile
import threading


class DeviceError(RuntimeError):
    """A runtime / compiler call failed (message names the call and the error)."""


def _default_cache_dir() -> str:
    d = os.environ.get("HIPDNN_CABI_KERNEL_CACHE")
    if d:
        return d
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "hipdnn_cabi", "kernels")


class KernelCache:
    """Compiled code objects on disk, keyed by sha256(source, options, arch, compiler version).

    ``HIPDNN_CABI_KERNEL_CACHE`` picks the folder; ``HIPDNN_CABI_KERNEL_CACHE=off`` disables
    it.  Writes are atomic (temp file + rename), so concurrent processes are safe.  An in-memory
    layer keeps this process from reading a file twice."""

    def __init__(self, directory: str | None = None):
        self.dir = directory or _default_cache_dir()
        self.enabled = self.dir.lower() not in ("off", "0", "none")
        self._mem: dict[str, bytes] = {}
        self._lock = threading.Lock()
        self.hits = self.misses = 0

    @staticmethod
    def key(source: str, options, arch: str, compiler_version: str) -> str:
        h = hashlib.sha256()
        for part in (source, "\0".join(options), arch, compiler_version):
            h.update(part.encode("utf-8"))
            h.update(b"\xff")
        return h.hexdigest()

    def get(self, key: str):
        with self._lock:
            v = self._mem.get(key)
        if v is not None:
            self.hits += 1
            return v
        if self.enabled:
            p = os.path.join(self.dir, key[:2], key)
            try:
                with open(p, "rb") as f:
                    v = f.read()
            except OSError:
                v = None
            if v:
                with self._lock:
                    self._mem[key] = v
                self.hits += 1
                return v
        self.misses += 1
        return None

    def put(self, key: str, data: bytes):
        with self._lock:
            self._mem[key] = data
        if not self.enabled:
            return
        d = os.path.join(self.dir, key[:2])
        try:
            os.makedirs(d, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=d, prefix=".tmp")
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(tmp, os.path.join(d, key))
        except OSError:
            pass   # a read-only cache folder only costs a recompile


class PackedArgs:
    """A ``void**`` kernel-argument block for pointer-sized arguments (device pointers as int,
    or ctypes scalars), built once and reused: ``.address`` goes straight to the launch call."""
    __slots__ = ("_vals", "_ptrs", "address")

    def __init__(self, args):
        vals = []
        for a in args:
            if isinstance(a, (ctypes._SimpleCData, ctypes.Array, ctypes.Structure)):
                vals.append(a)
            else:
                vals.append(ctypes.c_void_p(int(a)))
        self._vals = vals
        self._ptrs = (ctypes.c_void_p * max(1, len(vals)))(
            *[ctypes.cast(ctypes.pointer(v), ctypes.c_void_p).value for v in vals])
        self.address = ctypes.addressof(self._ptrs)
