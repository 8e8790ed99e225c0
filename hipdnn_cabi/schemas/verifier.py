"""Schema-driven FlatBuffers verifier (pure Python).

The flatbuffers Python runtime reads buffers without any checking: a corrupt or
hostile buffer makes the generated readers raise arbitrary exceptions (or read
garbage).  Bytes that cross the C boundary must therefore pass :func:`verify`
first.  After a successful ``verify(buf, "Graph")`` every accessor of the
generated ``Graph`` reader, recursively, can be called without raising.

The checks follow the rules of flatbuffers' C++ ``Verifier`` (so a buffer the
C++ side accepts is accepted here, and vice versa where it matters), plus a few
stricter structural checks that builder-produced buffers always satisfy:

* buffer: 8 <= len <= MAX_BUFFER_SIZE (2**31 - 1); root uoffset in bounds;
  optional 4-byte file identifier at bytes 4..8;
* table: 4-byte aligned, in bounds; vtable (table - soffset) 2-byte aligned, in
  bounds, vtable size even and >= 4, table inline size >= 4 and in bounds
  (stricter than C++); every present field's offset is >= 4 and the field lies
  inside the table's inline size (stricter than C++), and is aligned to its size
  (struct: its minalign);
* required fields present;
* uoffsets: non-zero, < 2**31, target inside the buffer;
* strings: 4-byte aligned length, length + NUL inside the buffer, NUL present;
* vectors: 4-byte aligned length, ``4 + length * element size`` inside the
  buffer; vectors of tables/strings: every element verified;
* unions: type NONE -> value ignored; a type index the schema knows -> member
  table verified (struct member: in bounds and aligned); an unknown type index
  -> accepted and not followed (as flatbuffers does; readers treat it as
  "unsupported");
* limits: nesting depth <= max_depth (64) tables; tables + vector elements of
  tables/strings visited <= max_tables (65,536: real graphs use hundreds, and it bounds the
  work a hostile buffer can cause to about a second).

Strings are not checked for UTF-8 unless ``check_utf8=True`` (C++ does not check
either); decode them with ``errors="replace"`` or enable the check.

API::

    verify(buf, root_table, file_identifier=None, *, max_depth=64,
           max_tables=65_536, check_alignment=True, check_utf8=False) -> None
    verify_file_root(buf, fbs_file)            # root type / identifier from the schema
    has_identifier(buf, ident) -> bool
    VerificationError(ValueError)              # .path, .reason

Errors name the place, e.g. ``Graph.nodes[3].attributes<ConvolutionFwdAttributes>.stride:
vector length out of bounds``.
"""
from __future__ import annotations

from struct import unpack_from
from typing import Optional

from ._generated.schema_table import ROOTS, STRUCTS, TABLES, UNIONS

__all__ = ["VerificationError", "verify", "verify_file_root", "has_identifier",
           "MAX_BUFFER_SIZE", "DEFAULT_MAX_DEPTH", "DEFAULT_MAX_TABLES"]

MAX_BUFFER_SIZE = 2 ** 31 - 1
DEFAULT_MAX_DEPTH = 64
DEFAULT_MAX_TABLES = 65_536  # hipDNN graphs use hundreds; bounds worst-case rejection to ~1 s
_CHUNK = 4096  # vector elements unpacked per struct.unpack_from call


class VerificationError(ValueError):
    """The buffer is not a valid FlatBuffer of the requested root type."""

    def __init__(self, message: str, path: str = "", reason: str = ""):
        super().__init__(message)
        self.path = path
        self.reason = reason or message


class _Fail(Exception):
    __slots__ = ("reason", "segs")

    def __init__(self, reason):
        self.reason = reason
        self.segs = []

    def with_seg(self, seg):
        self.segs.append(seg)
        return self


# ----------------------------------------------------------------------------------------------
# compiled schema

(K_SCALAR, K_UTYPE, K_UNION, K_STRING, K_STRUCT, K_TABLE,
 K_VEC_SCALAR, K_VEC_STRING, K_VEC_TABLE, K_VEC_STRUCT) = range(10)
_KINDS = {"scalar": K_SCALAR, "utype": K_UTYPE, "union": K_UNION, "string": K_STRING,
          "struct": K_STRUCT, "table": K_TABLE, "vec_scalar": K_VEC_SCALAR,
          "vec_string": K_VEC_STRING, "vec_table": K_VEC_TABLE, "vec_struct": K_VEC_STRUCT}
_OFFSET_KINDS = (K_UNION, K_STRING, K_TABLE, K_VEC_SCALAR, K_VEC_STRING, K_VEC_TABLE, K_VEC_STRUCT)


def _compile():
    tables = {}
    for tname, fields in TABLES.items():
        by_name = {f[1]: f for f in fields}
        out = []
        nslots = 0
        for slot, name, kind, size, align, ref, required in fields:
            k = _KINDS[kind]
            nslots = max(nslots, slot + 1)
            if k in _OFFSET_KINDS:
                inline_size, inline_align = 4, 4
            else:
                inline_size, inline_align = size, align
            tag_slot = -1
            if k == K_UNION:
                tag = by_name.get(name + "_type")
                if tag is None or tag[2] != "utype" or tag[5] != ref:
                    raise RuntimeError("%s.%s: union without type tag" % (tname, name))
                tag_slot = tag[0]
            out.append((slot, name, k, inline_size, inline_align, size, ref, bool(required), tag_slot))
        tables[tname] = (nslots, tuple(out))
    unions = {}
    for uname, members in UNIONS.items():
        m = {}
        for idx, (mname, kind, ref) in members.items():
            if kind == "table":
                m[idx] = (mname, True, ref, 0, 0)
            else:
                size, align, _ = STRUCTS[ref]
                m[idx] = (mname, False, ref, size, align)
        unions[uname] = m
    return tables, unions


_TABLES, _UNIONS = _compile()


# ----------------------------------------------------------------------------------------------
# verifier

class _Verifier:
    __slots__ = ("buf", "n", "max_depth", "max_tables", "count", "align", "utf8")

    def __init__(self, buf, max_depth, max_tables, check_alignment, check_utf8):
        self.buf = buf
        self.n = len(buf)
        self.max_depth = max_depth
        self.max_tables = max_tables
        self.count = 0
        self.align = check_alignment
        self.utf8 = check_utf8

    # -- primitives ---------------------------------------------------------------------------
    def deref(self, p):
        """Follow the uoffset stored at p (p itself already bounds-checked for 4 bytes)."""
        o = unpack_from("<I", self.buf, p)[0]
        if o == 0:
            raise _Fail("null offset")
        if o >= 0x80000000:
            raise _Fail("offset out of range")
        t = p + o
        if t >= self.n:
            raise _Fail("offset out of bounds")
        return t

    def vector(self, v, elem_size):
        """Check the vector whose length is at v; return (data start, element count)."""
        if self.align and v & 3:
            raise _Fail("vector length misaligned")
        if v + 4 > self.n:
            raise _Fail("vector length out of bounds")
        count = unpack_from("<I", self.buf, v)[0]
        if count >= MAX_BUFFER_SIZE // elem_size or v + 4 + count * elem_size > self.n:
            raise _Fail("vector length out of bounds")
        return v + 4, count

    def string(self, s):
        if self.align and s & 3:
            raise _Fail("string length misaligned")
        n = self.n
        if s + 4 > n:
            raise _Fail("string length out of bounds")
        length = unpack_from("<I", self.buf, s)[0]
        end = s + 4 + length
        if length >= MAX_BUFFER_SIZE or end >= n:
            raise _Fail("string length out of bounds")
        if self.buf[end] != 0:
            raise _Fail("string not NUL-terminated")
        if self.utf8:
            try:
                bytes(self.buf[s + 4:end]).decode("utf-8")
            except UnicodeDecodeError:
                raise _Fail("string is not valid UTF-8") from None

    def bump(self, k=1):
        self.count += k
        if self.count > self.max_tables:
            raise _Fail("too many tables (limit %d)" % self.max_tables)

    # -- tables -------------------------------------------------------------------------------
    def table(self, pos, tname, depth):
        if depth > self.max_depth:
            raise _Fail("nesting too deep (limit %d)" % self.max_depth)
        self.bump()
        buf = self.buf
        n = self.n
        if self.align and pos & 3:
            raise _Fail("table misaligned")
        if pos + 4 > n:
            raise _Fail("table out of bounds")
        vt = pos - unpack_from("<i", buf, pos)[0]
        if vt < 0 or vt + 4 > n:
            raise _Fail("vtable out of bounds")
        if self.align and vt & 1:
            raise _Fail("vtable misaligned")
        vsize, tsize = unpack_from("<HH", buf, vt)
        if vsize < 4 or vsize & 1:
            raise _Fail("invalid vtable size %d" % vsize)
        if vt + vsize > n:
            raise _Fail("vtable out of bounds")
        if tsize < 4 or pos + tsize > n:
            raise _Fail("table size out of bounds")
        nslots, fields = _TABLES[tname]
        k = (vsize - 4) >> 1
        if k > nslots:
            k = nslots
        offs = unpack_from("<%dH" % k, buf, vt + 4) if k else ()
        for slot, name, kind, isize, ialign, size, ref, required, tag_slot in fields:
            fo = offs[slot] if slot < k else 0
            if not fo:
                if required:
                    raise _Fail("required field missing").with_seg("." + name)
                continue
            try:
                if fo < 4 or fo + isize > tsize:
                    raise _Fail("field outside its table")
                p = pos + fo
                if self.align and p % ialign:
                    raise _Fail("field misaligned")
                if kind <= K_UTYPE or kind == K_STRUCT:
                    continue
                if kind == K_STRING:
                    self.string(self.deref(p))
                elif kind == K_TABLE:
                    self.table(self.deref(p), ref, depth + 1)
                elif kind == K_VEC_SCALAR or kind == K_VEC_STRUCT:
                    self.vector(self.deref(p), size)
                elif kind == K_VEC_TABLE:
                    start, count = self.vector(self.deref(p), 4)
                    if self.count + count > self.max_tables:
                        raise _Fail("too many tables (limit %d)" % self.max_tables)
                    for c0 in range(0, count, _CHUNK):
                        chunk = unpack_from("<%dI" % min(_CHUNK, count - c0), buf, start + 4 * c0)
                        for i, o in enumerate(chunk, c0):
                            try:
                                self.elem_check(o, start + 4 * i)
                                self.table(start + 4 * i + o, ref, depth + 1)
                            except _Fail as e:
                                e.segs.append("[%d]" % i)
                                raise
                elif kind == K_VEC_STRING:
                    start, count = self.vector(self.deref(p), 4)
                    self.bump(count)
                    for c0 in range(0, count, _CHUNK):
                        chunk = unpack_from("<%dI" % min(_CHUNK, count - c0), buf, start + 4 * c0)
                        for i, o in enumerate(chunk, c0):
                            try:
                                self.elem_check(o, start + 4 * i)
                                self.string(start + 4 * i + o)
                            except _Fail as e:
                                e.segs.append("[%d]" % i)
                                raise
                elif kind == K_UNION:
                    to = offs[tag_slot] if tag_slot < k else 0
                    utype = buf[pos + to] if to else 0
                    if utype == 0:
                        continue
                    member = _UNIONS[ref].get(utype)
                    if member is None:
                        continue  # unknown member: accepted, not followed
                    mname, is_table, mref, msize, malign = member
                    t = self.deref(p)
                    try:
                        if is_table:
                            self.table(t, mref, depth + 1)
                        else:
                            if self.align and t % malign:
                                raise _Fail("struct misaligned")
                            if t + msize > n:
                                raise _Fail("struct out of bounds")
                    except _Fail as e:
                        e.segs.append("<%s>" % mname)
                        raise
            except _Fail as e:
                e.segs.append("." + name)
                raise

    def elem_check(self, o, p):
        if o == 0:
            raise _Fail("null offset")
        if o >= 0x80000000 or p + o >= self.n:
            raise _Fail("offset out of bounds")


def has_identifier(buf, ident) -> bool:
    """True when ``buf`` is long enough and carries the 4-byte file identifier ``ident``."""
    if isinstance(ident, str):
        ident = ident.encode("ascii")
    return len(buf) >= 8 and bytes(buf[4:8]) == bytes(ident)


def verify(buf, root_table: str, file_identifier: Optional[bytes] = None, *,
           max_depth: int = DEFAULT_MAX_DEPTH, max_tables: int = DEFAULT_MAX_TABLES,
           check_alignment: bool = True, check_utf8: bool = False) -> None:
    """Verify that ``buf`` is a well-formed FlatBuffer whose root is ``root_table``.

    ``file_identifier`` (4 bytes/str), when given, must be present at bytes 4..8.
    Raises VerificationError (and nothing else) when the buffer is not valid.
    """
    if root_table not in _TABLES:
        raise KeyError("unknown root table %r" % (root_table,))
    if not isinstance(buf, (bytes, bytearray, memoryview)):
        raise TypeError("buf must be bytes-like, not %s" % type(buf).__name__)
    if isinstance(buf, memoryview) and (buf.ndim != 1 or buf.itemsize != 1):
        buf = buf.cast("B")
    n = len(buf)
    if n < 8:
        raise VerificationError("%s: buffer too small (%d bytes)" % (root_table, n), root_table,
                                "buffer too small")
    if n > MAX_BUFFER_SIZE:
        raise VerificationError("%s: buffer too large (%d bytes)" % (root_table, n), root_table,
                                "buffer too large")
    if file_identifier is not None:
        if isinstance(file_identifier, str):
            file_identifier = file_identifier.encode("ascii")
        if len(file_identifier) != 4:
            raise ValueError("file identifier must be 4 bytes")
        if bytes(buf[4:8]) != bytes(file_identifier):
            raise VerificationError("%s: file identifier mismatch (want %r)" % (root_table, file_identifier),
                                    root_table, "file identifier mismatch")
    v = _Verifier(buf, max_depth, max_tables, check_alignment, check_utf8)
    try:
        v.table(v.deref(0), root_table, 1)
    except _Fail as e:
        path = root_table + "".join(reversed(e.segs))
        raise VerificationError("%s: %s" % (path, e.reason), path, e.reason) from None
    except RecursionError:  # cannot happen with max_depth <= ~300; keep the contract anyway
        raise VerificationError("%s: nesting too deep" % root_table, root_table, "nesting too deep") from None


def verify_file_root(buf, fbs_file: str, **kw) -> None:
    """Verify ``buf`` as the root type of schema file ``fbs_file`` (e.g. 'graph.fbs'),
    including that file's identifier when it declares one."""
    root, ident = ROOTS[fbs_file]
    verify(buf, root, ident.encode("ascii") if ident else None, **kw)
