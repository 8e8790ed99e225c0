"""Pieces shared by the runtimes: the error type, the on-disk code cache, packed kernel args."""
from __future__ import annotations

import ctypes
import hashlib
import os
import tempfile
import threading


class DeviceError(RuntimeError):
    """A runtime / compiler call failed (message names the call and the error)."""


def check(res, what):
    """A binding call (cuda-bindings, hip-python) returns ``(err, *values)`` or a bare ``err``:
    raise :class:`DeviceError` naming the call on a non-zero error, else return the values
    (None, the one value, or a tuple)."""
    if isinstance(res, tuple):
        err, vals = res[0], res[1:]
    else:
        err, vals = res, ()
    code = int(getattr(err, "value", err))
    if code != 0:
        raise DeviceError(f"{what} failed: {getattr(err, 'name', err)} ({code})")
    if not vals:
        return None
    return vals[0] if len(vals) == 1 else vals


class RtcCompiler:
    """The run-time compilers' one compile sequence (create the program with its in-memory
    headers, compile, read the log, read the code, destroy), over the API of the subclass:
    ``rtc`` is the binding module, ``prefix`` its function prefix (``nvrtc`` / ``hiprtc``),
    ``code_call`` the name of its code getter (``CUBIN`` / ``Code``), ``label`` its name in
    messages.  The last compile's log is kept in ``last_log`` (warnings, register and spill
    counts)."""
    rtc = None
    prefix = label = code_call = default_arch = ""
    last_log = ""
    _buffer = staticmethod(lambda n: b" " * n)   # what the binding's getters write into

    def default_options(self, arch: str) -> list:
        raise NotImplementedError

    def _destroy(self, prog):
        getattr(self.rtc, self.prefix + "DestroyProgram")(prog)

    def compile(self, source: str, name: str = "kernel.hip", options=(), arch: str = "",
                headers: dict | None = None) -> bytes:
        arch = arch or self.default_arch
        api = lambda fn: getattr(self.rtc, self.prefix + fn)  # noqa: E731
        headers = headers or {}
        prog = check(api("CreateProgram")(source.encode(), name.encode(), len(headers),
                                          [v.encode() for v in headers.values()],
                                          [k.encode() for k in headers]),
                     self.prefix + "CreateProgram")
        try:
            opts = [o.encode() for o in list(self.default_options(arch)) + list(options)]
            err = api("CompileProgram")(prog, len(opts), opts)[0]
            n = check(api("GetProgramLogSize")(prog), self.prefix + "GetProgramLogSize")
            log = self._buffer(n)
            api("GetProgramLog")(prog, log)
            self.last_log = bytes(log).decode("utf-8", "replace").rstrip("\0")
            if int(getattr(err, "value", err)) != 0:
                raise DeviceError(f"{self.label} failed to compile {name} for {arch}:\n"
                                  + self.last_log)
            size = check(api(f"Get{self.code_call}Size")(prog),
                         f"{self.prefix}Get{self.code_call}Size")
            out = self._buffer(size)
            check(api(f"Get{self.code_call}")(prog, out), f"{self.prefix}Get{self.code_call}")
            return bytes(out)
        finally:
            self._destroy(prog)


class Module:
    """A loaded code object; ``function(name)`` looks a kernel up once (``get`` is the runtime's
    module-function call, e.g. ``cuModuleGetFunction``)."""
    __slots__ = ("handle", "_get", "_what", "_fns")

    def __init__(self, handle, get, what: str):
        self.handle, self._get, self._what, self._fns = handle, get, what, {}

    def function(self, name: str):
        f = self._fns.get(name)
        if f is None:
            f = self._fns[name] = check(self._get(self.handle, name.encode()),
                                        f"{self._what}({name})")
        return f


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


# --------------------------------------------------------------------------- handle sanity
_libc = None
_page = 0


def address_mapped(addr: int) -> bool:
    """True when the page holding ``addr`` is mapped in this process (``msync`` answers ENOMEM
    for an unmapped range; nothing is read).  Runtimes dereference the stream handles they are
    given, so a stream value that points nowhere (a made-up integer) is refused before any
    runtime query sees it, instead of crashing the process."""
    global _libc, _page
    if addr <= 0 or addr >= 1 << 48:
        return False
    if _libc is None:
        import mmap
        _libc = ctypes.CDLL(None, use_errno=True)
        _libc.msync.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
        _libc.msync.restype = ctypes.c_int
        _page = mmap.PAGESIZE
    base = addr & ~(_page - 1)
    return _libc.msync(base, _page, 1) == 0    # MS_ASYNC


SPECIAL_STREAMS = (0, 1, 2)   # the null stream, cudaStreamLegacy, cudaStreamPerThread / hipStreamPerThread


_TLS = threading.local()     # .top: the runtime whose device a Bound made current on this thread


class Bound:
    """``with rt.bound():`` - the runtime's device is the calling thread's current device inside
    the block, and the caller's current device/context is restored on exit.  A runtime supplies
    ``_switch() -> token`` (make its device current, say what to undo) and ``_restore(token)``.
    Nesting is cheap: a block inside a block of the same runtime does nothing."""
    __slots__ = ("rt", "prev", "tok")

    def __init__(self, rt):
        self.rt = rt
        self.prev = self.tok = None

    def __enter__(self):
        rt = self.rt
        prev = self.prev = getattr(_TLS, "top", None)
        if prev is not rt:
            self.tok = rt._switch()
            _TLS.top = rt
        return rt

    def __exit__(self, *exc):
        if self.prev is not self.rt:
            try:
                self.rt._restore(self.tok)
            finally:
                _TLS.top = self.prev
        return False


def is_bound(rt) -> bool:
    """True inside a ``with rt.bound():`` block of ``rt`` on this thread."""
    return getattr(_TLS, "top", None) is rt
