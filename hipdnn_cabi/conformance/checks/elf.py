"""Minimal ELF64 little-endian reader: the dynamic symbol table (name, type, bind, visibility)."""
from __future__ import annotations

import struct

STT = {0: "NOTYPE", 1: "OBJECT", 2: "FUNC", 10: "GNU_IFUNC"}
STB = {0: "LOCAL", 1: "GLOBAL", 2: "WEAK", 10: "GNU_UNIQUE"}
STV = {0: "DEFAULT", 1: "INTERNAL", 2: "HIDDEN", 3: "PROTECTED"}


def dynamic_symbols(path: str):
    """{name: (type, bind, visibility, defined)} or None when not an ELF64 LE shared object."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        return None
    e_shoff, = struct.unpack_from("<Q", data, 0x28)
    e_shentsize, e_shnum = struct.unpack_from("<HH", data, 0x3A)
    secs = []
    for i in range(e_shnum):
        off = e_shoff + i * e_shentsize
        (name, typ, flags, addr, offset, size, link, info, align, entsize) = struct.unpack_from(
            "<IIQQQQIIQQ", data, off)
        secs.append((typ, offset, size, link, entsize))
    out = {}
    for typ, offset, size, link, entsize in secs:
        if typ != 11:  # SHT_DYNSYM
            continue
        stroff = secs[link][1]
        for k in range(size // (entsize or 24)):
            st_name, st_info, st_other, st_shndx, st_value, st_size = struct.unpack_from(
                "<IBBHQQ", data, offset + k * (entsize or 24))
            end = data.index(b"\0", stroff + st_name)
            nm = data[stroff + st_name:end].decode("utf-8", "replace")
            if nm:
                out[nm] = (STT.get(st_info & 15, str(st_info & 15)), STB.get(st_info >> 4, str(st_info >> 4)),
                           STV.get(st_other & 3), st_shndx != 0)
    return out
