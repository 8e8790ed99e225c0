"""The plugin C API signatures, parsed from the generated declarations (cdef/generated.py).

Used by the build (C slot functions / exported entry points) and by the adapters: the engine-plugin
surface (PluginApi.h + EnginePluginApi.h) and the heuristic-plugin surface (HeuristicsPluginApi.h);
a slot can hold a plugin of either kind.
"""
from __future__ import annotations

import re

from .._cdef import load

HEADERS = ("hipdnn_plugin_sdk/PluginApi.h", "hipdnn_plugin_sdk/EnginePluginApi.h",
           "hipdnn_plugin_sdk/HeuristicsPluginApi.h")
ENGINE_HEADERS = HEADERS[:2]
HEURISTIC_HEADERS = (HEADERS[0], HEADERS[2])
NUM_SLOTS = 8  # Python plugins loadable at once inside libhipdnn_backend.so


class Sig:
    __slots__ = ("name", "ret", "params", "names", "header")

    def __init__(self, name, ret, params, names, header=None):
        self.name, self.ret, self.params, self.names = name, ret, params, names
        self.header = header

    @property
    def is_void(self) -> bool:
        return self.ret == "void"

    def decl(self, prefix_params=(), name=None) -> str:
        ps = list(prefix_params) + self.params
        return f"{self.ret} {name or self.name}({', '.join(ps) if ps else 'void'})"


def parse(proto: str, header=None) -> Sig:
    m = re.match(r"^(.*?)\b(\w+)\((.*)\);$", proto.strip(), re.S)
    ret, name, args = m.group(1).strip(), m.group(2), m.group(3).strip()
    params = [a.strip() for a in args.split(",")] if args and args != "void" else []
    names = [re.findall(r"\w+", p)[-1] for p in params]
    return Sig(name, ret, params, names, header)


def signatures(generated=None) -> list[Sig]:
    if generated is None:
        generated = load()
    return [parse(p, h) for h in HEADERS for p in generated.FUNCTIONS[h]]


def dispatcher_name(fn: str) -> str:
    return "hpy_plugin_" + fn


def dispatcher_externs(generated=None) -> dict:
    """name -> C declaration of the extern "Python" dispatchers: ``hpy_plugin_<Fn>(int slot, ...)``."""
    return {dispatcher_name(s.name): s.decl(["int slot"], dispatcher_name(s.name))
            for s in signatures(generated)}


def slot_c_code(generated=None, nslots: int = NUM_SLOTS) -> tuple[str, str]:
    """(cdef, C source) of the static slot functions ``slot<K>_<Fn>`` and of
    ``uint64_t hipdnn_cabi_plugin_slot_fn(int slot, const char* name)``."""
    sigs = signatures(generated)
    code = ["#include <string.h>"]
    for s in sigs:
        code.append(f"static {s.decl(['int slot'], dispatcher_name(s.name))};")
    for k in range(nslots):
        for s in sigs:
            call = f"{dispatcher_name(s.name)}({', '.join([str(k)] + s.names)})"
            body = f"{call};" if s.is_void else f"return {call};"
            code.append(f"static {s.decl(name=f'slot{k}_{s.name}')} {{ {body} }}")
    code.append("static uint64_t hipdnn_cabi_plugin_slot_fn(int slot, const char* name)\n{")
    code.append("    if (name == NULL) return 0;")
    code.append("    switch (slot) {")
    for k in range(nslots):
        code.append(f"    case {k}:")
        for s in sigs:
            code.append(f'        if (strcmp(name, "{s.name}") == 0) '
                        f"return (uint64_t)(uintptr_t)&slot{k}_{s.name};")
        code.append("        return 0;")
    code.append("    default: return 0;\n    }\n}")
    code.append(f"static int hipdnn_cabi_plugin_slot_count(void) {{ return {nslots}; }}")
    cdef = ("uint64_t hipdnn_cabi_plugin_slot_fn(int slot, const char* name);\n"
            "int hipdnn_cabi_plugin_slot_count(void);")
    return cdef, "\n".join(code)
