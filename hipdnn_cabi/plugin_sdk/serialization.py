"""What the SDK gives plugin authors for free: execution-context serialization (RFC 0009) with a
versioned payload, and the runtime pass-by-value scalar table (RFC 0016 §4.6).

Payload layout (little-endian), the ``plugin_payload`` of the host's SerializedExecutionPlan::

    offset  size  field
    0       8     magic b"HDPYPLN\\0"
    8       2     format major (FORMAT_MAJOR)
    10      2     format minor (FORMAT_MINOR)
    12      4     kind: 1 = REDERIVE (op graph + engine config; the plan is re-built by the
                  engine's plan builder), 2 = PLAN (the plan's own bytes, restored by
                  PlanBuilderBase.deserialize_plan)
    16      4     header size (>= HEADER_SIZE; a newer minor may grow it)
    20      4     flags: bit 0 = the plan has runtime pass-by-value scalars (needs plugin API
                  >= 1.2.0); other bits must be 0 for this major
    24      4     CRC-32 of the body
    28      8     engine id
    36      8     body size
    44      ...   body

    body:  u32 n, n x scalar record (i64 uid, i32 schema DataType, u8 runtime, u8 has_value,
           u16 0, 8-byte value: f64 for floating types, i64 otherwise)
           u32 len + bytes  (REDERIVE: the Graph FlatBuffer;  PLAN: the plan's bytes)
           u32 len + bytes  (the EngineConfig FlatBuffer)

The scalar table holds every pass-by-value tensor of the op graph, so the runtime uid set (and the
baked defaults) survive even when the op graph does not travel (kind PLAN).

:func:`unpack` checks everything — empty, truncated, unknown magic, newer (or older) major, unknown
kind or flag bits, size and checksum, engine id, a runtime-PBV payload on a plugin that reports
API < 1.2.0 — before any of it is used, so a plugin never builds anything from a payload it cannot
interpret.
"""
from __future__ import annotations

import struct
import zlib

import numpy as np

from .errors import BAD_PARAM, INVALID_VALUE, PluginError

MAGIC = b"HDPYPLN\0"
FORMAT_MAJOR = 1
FORMAT_MINOR = 0
KIND_REDERIVE = 1
KIND_PLAN = 2
KINDS = (KIND_REDERIVE, KIND_PLAN)
FLAG_RUNTIME_PBV = 1
KNOWN_FLAGS = FLAG_RUNTIME_PBV
_HEADER = struct.Struct("<8sHHIIIIqQ")
HEADER_SIZE = _HEADER.size   # 44
_SCALAR = struct.Struct("<qiBBH8s")
PBV_MIN_API = (1, 2, 0)

# schema DataType -> numpy dtype of one host scalar
_NP = {1: np.float32, 2: np.float16, 4: np.float64, 5: np.uint8, 6: np.int32, 7: np.int8,
       15: np.int64}
_BF16 = 3
_FLOATING = (1, 2, 3, 4)


# --------------------------------------------------------------------------- scalars
class Scalar:
    """One pass-by-value tensor: ``runtime`` (is_runtime_pass_by_value) and, when ``has_value``,
    its baked ``value`` (the compile-time constant, or the runtime default)."""
    __slots__ = ("uid", "dtype", "runtime", "has_value", "value")

    def __init__(self, uid, dtype, runtime, has_value, value):
        self.uid, self.dtype, self.runtime = int(uid), int(dtype), bool(runtime)
        self.has_value, self.value = bool(has_value), value

    @property
    def user_supplied(self) -> bool:
        """Runtime pass-by-value with no baked default: the value arrives as a host pointer."""
        return self.runtime and not self.has_value

    def __repr__(self):
        return (f"Scalar(uid={self.uid}, dtype={self.dtype}, runtime={self.runtime}, "
                f"value={self.value if self.has_value else None})")


class ScalarTable:
    """The pass-by-value tensors of one op graph (RFC 0016 §4.6 provider contract):

    * a compile-time constant (flag clear, value) reads its baked value;
    * runtime with default (flag set, value) reads its baked default — a variant-pack entry for
      it is inert (RFC 0016 §4.9, "override inert today");
    * runtime user-supplied (flag set, no value) reads the scalar through the **host** pointer
      bound to its uid at execute; an absent or NULL pointer is INVALID_VALUE.
    """

    def __init__(self, scalars=()):
        self.by_uid = {s.uid: s for s in scalars}

    @classmethod
    def from_graph(cls, graph) -> "ScalarTable":
        out = []
        for t in graph.tensors.values():
            runtime = bool(getattr(t, "is_runtime_pass_by_value", False))
            if t.value is None and not runtime:
                continue
            out.append(Scalar(t.uid, t.dtype, runtime, t.value is not None, t.value))
        return cls(out)

    @property
    def runtime_uids(self) -> frozenset:
        return frozenset(u for u, s in self.by_uid.items() if s.runtime)

    def __contains__(self, uid):
        return uid in self.by_uid

    def __len__(self):
        return len(self.by_uid)

    def get(self, uid):
        return self.by_uid.get(uid)

    def value(self, uid, pointers: dict, ffi):
        s = self.by_uid.get(uid)
        if s is None:
            raise PluginError(BAD_PARAM, f"tensor uid {uid} is not a pass-by-value scalar")
        if s.has_value:
            return s.value
        ptr = pointers.get(uid)
        if not ptr:
            raise PluginError(INVALID_VALUE, f"no host value for runtime pass-by-value tensor "
                                             f"uid {uid} in the device buffers")
        return read_host_scalar(ptr, s.dtype, ffi)

    # -------------------------------------------------------------- (de)serialization
    def pack(self) -> bytes:
        parts = [struct.pack("<I", len(self.by_uid))]
        for s in sorted(self.by_uid.values(), key=lambda s: s.uid):
            v = b"\0" * 8
            if s.has_value:
                v = (struct.pack("<d", float(s.value)) if s.dtype in _FLOATING
                     else struct.pack("<q", int(s.value)))
            parts.append(_SCALAR.pack(s.uid, s.dtype, int(s.runtime), int(s.has_value), 0, v))
        return b"".join(parts)

    @classmethod
    def unpack(cls, r: "_Reader") -> "ScalarTable":
        n = r.u32("scalar count")
        if n > r.left() // _SCALAR.size:
            raise PluginError(BAD_PARAM, "serialized execution context: truncated scalar table")
        out = []
        for _ in range(n):
            uid, dt, rt, hv, pad, v = _SCALAR.unpack(r.take(_SCALAR.size, "scalar record"))
            if rt > 1 or hv > 1 or pad:
                raise PluginError(BAD_PARAM, "serialized execution context: malformed scalar record")
            val = None
            if hv:
                val = struct.unpack("<d", v)[0] if dt in _FLOATING else struct.unpack("<q", v)[0]
                if dt == 1:
                    val = float(np.float32(val))
            out.append(Scalar(uid, dt, rt, hv, val))
        return cls(out)


def read_host_scalar(ptr: int, dtype: int, ffi):
    """The scalar at host address ``ptr`` typed by the schema DataType ``dtype``."""
    if dtype == _BF16:
        raw = ffi.buffer(ffi.cast("char*", ptr), 2)[:]
        return float(np.frombuffer(b"\0\0" + raw, dtype=np.float32)[0])
    if dtype == 0:   # UNSET: hipDNN treats an unset scalar type as float
        dtype = 1
    npt = _NP.get(dtype)
    if npt is None:
        raise PluginError(INVALID_VALUE, f"runtime pass-by-value scalars of data type {dtype} "
                                         "are not supported")
    size = np.dtype(npt).itemsize
    raw = ffi.buffer(ffi.cast("char*", ptr), size)[:]
    v = np.frombuffer(raw, dtype=npt)[0]
    return float(v) if dtype in _FLOATING else int(v)


def parse_api_version(text) -> tuple:
    """'MAJOR.MINOR.PATCH' → tuple (unparsable → (0, 0, 0))."""
    try:
        parts = [int(x) for x in str(text).strip().split(".")[:3]]
    except ValueError:
        return (0, 0, 0)
    return tuple(parts + [0] * (3 - len(parts)))


# --------------------------------------------------------------------------- payload
class _Reader:
    def __init__(self, buf: bytes, pos: int, end: int):
        self.buf, self.pos, self.end = buf, pos, end

    def left(self) -> int:
        return self.end - self.pos

    def take(self, n: int, what: str) -> bytes:
        if n < 0 or n > self.left():
            raise PluginError(BAD_PARAM, f"serialized execution context: truncated {what}")
        b = self.buf[self.pos:self.pos + n]
        self.pos += n
        return b

    def u32(self, what: str) -> int:
        return struct.unpack("<I", self.take(4, what))[0]

    def blob(self, what: str) -> bytes:
        return self.take(self.u32(what + " size"), what)


class Payload:
    """A checked, decoded payload."""
    __slots__ = ("kind", "engine_id", "flags", "minor", "scalars", "blob", "config")


def pack(kind: int, engine_id: int, scalars: ScalarTable, blob: bytes, config: bytes) -> bytes:
    body = b"".join([scalars.pack(), struct.pack("<I", len(blob)), blob,
                     struct.pack("<I", len(config)), config])
    flags = FLAG_RUNTIME_PBV if scalars.runtime_uids else 0
    head = _HEADER.pack(MAGIC, FORMAT_MAJOR, FORMAT_MINOR, kind, HEADER_SIZE, flags,
                        zlib.crc32(body) & 0xFFFFFFFF, int(engine_id), len(body))
    return head + body


def unpack(data, *, known_engine_ids=None, api_version=(1, 0, 0)) -> Payload:
    """Check and decode a payload (see the module docstring for every rejection)."""
    if data is None or len(data) == 0:
        raise PluginError(BAD_PARAM, "serialized execution context is empty")
    data = bytes(data)
    if len(data) < 8 or data[:8] != MAGIC:
        if len(data) < 8 and MAGIC.startswith(data):
            raise PluginError(BAD_PARAM, "serialized execution context: truncated header")
        raise PluginError(INVALID_VALUE, "serialized execution context: unknown magic (not a "
                                         "hipdnn_cabi Python SDK payload)")
    if len(data) < 12:
        raise PluginError(BAD_PARAM, "serialized execution context: truncated header")
    major, minor = struct.unpack_from("<HH", data, 8)
    if major != FORMAT_MAJOR:
        raise PluginError(INVALID_VALUE, f"serialized execution context: format {major}.{minor} "
                                         f"is not readable by this plugin (reads "
                                         f"{FORMAT_MAJOR}.x)")
    if len(data) < HEADER_SIZE:
        raise PluginError(BAD_PARAM, "serialized execution context: truncated header")
    _, _, _, kind, hsize, flags, crc, eid, bsize = _HEADER.unpack_from(data, 0)
    if kind not in KINDS:
        raise PluginError(INVALID_VALUE, f"serialized execution context: unknown payload kind "
                                         f"{kind}")
    if flags & ~KNOWN_FLAGS:
        raise PluginError(INVALID_VALUE, f"serialized execution context: unknown flags "
                                         f"0x{flags:x}")
    if hsize < HEADER_SIZE or hsize > len(data) or (minor <= FORMAT_MINOR and hsize != HEADER_SIZE):
        raise PluginError(BAD_PARAM, f"serialized execution context: bad header size {hsize}")
    avail = len(data) - hsize
    if bsize > avail or (minor <= FORMAT_MINOR and bsize != avail):
        raise PluginError(BAD_PARAM, f"serialized execution context: body is {avail} bytes, "
                                     f"header says {bsize}")
    body_end = hsize + bsize
    if zlib.crc32(data[hsize:body_end]) & 0xFFFFFFFF != crc:
        raise PluginError(BAD_PARAM, "serialized execution context: checksum mismatch")
    if known_engine_ids is not None and eid not in known_engine_ids:
        raise PluginError(INVALID_VALUE, f"serialized execution context is for engine {eid}, "
                                         "which this plugin does not provide")
    if flags & FLAG_RUNTIME_PBV and tuple(api_version) < PBV_MIN_API:
        raise PluginError(INVALID_VALUE, "serialized execution context uses runtime pass-by-value "
                                         "scalars, which need plugin API >= 1.2.0 (this plugin "
                                         "reports %d.%d.%d)" % tuple(api_version))
    r = _Reader(data, hsize, body_end)
    p = Payload()
    p.kind, p.engine_id, p.flags, p.minor = kind, eid, flags, minor
    p.scalars = ScalarTable.unpack(r)
    if bool(p.scalars.runtime_uids) != bool(flags & FLAG_RUNTIME_PBV):
        raise PluginError(BAD_PARAM, "serialized execution context: runtime pass-by-value flag "
                                     "disagrees with the scalar table")
    p.blob = r.blob("plan data")
    p.config = r.blob("engine config")
    if r.left() and minor <= FORMAT_MINOR:
        raise PluginError(BAD_PARAM, "serialized execution context: trailing bytes")
    if not p.blob:
        raise PluginError(BAD_PARAM, "serialized execution context: empty plan data")
    return p
