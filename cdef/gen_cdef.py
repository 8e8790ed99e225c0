#!/usr/bin/env python3
"""Derive the cffi declarations and the Python enums from the public headers in include/.

Usage: python cdef/gen_cdef.py [--check]

Outputs (committed, drift-checked by tests/test_generated.py):
  cdef/generated.py                  one cdef string per header, in include order
  hipdnn_cabi/_generated/enums.py    an IntEnum per C enum family, members named as in C

The headers are the single source of truth: nothing here retypes a name or a number.
"""
from __future__ import annotations

import argparse
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
INCLUDE = os.path.join(ROOT, "include")
OUT_CDEF = os.path.join(ROOT, "cdef", "generated.py")
OUT_ENUMS = os.path.join(ROOT, "hipdnn_cabi", "_generated", "enums.py")

# Parse order: dependencies first.  Every header under include/ must appear here (checked).
ORDER = [
    "hipdnn_backend_export.h", "hipdnn_hip_stream.h", "HipdnnStatus.h", "HipdnnBackendLimits.h",
    "HipdnnBackendAttributeName.h", "HipdnnBackendAttributeType.h", "HipdnnBackendDescriptorType.h",
    "HipdnnBackendHeuristicType.h", "HipdnnBackendPluginLoadingMode.h",
    "HipdnnBackendPluginUnloadingMode.h", "HipdnnBackendBehaviorNote.h", "HipdnnBackendCallbackTypes.h",
    "HipdnnBackendFlatbufferData.h", "HipdnnConvolutionMode.h", "HipdnnDataType.h",
    "HipdnnMoeGroupedMatmulMode.h", "HipdnnPaddingMode.h", "HipdnnReduceTensorOp.h",
    "HipdnnResampleMode.h", "HipdnnOperationType.h", "HipdnnPointwiseMode.h",
    "HipdnnDiagonalAlignment.h", "HipdnnAttentionImplementation.h", "HipdnnPoolingMode.h",
    "HipdnnReductionMode.h", "hipdnn_backend.h",
    "hipdnn_plugin_sdk/PluginExport.h", "hipdnn_plugin_sdk/hipdnn_hip_stream.h",
    "hipdnn_plugin_sdk/engine_api_version.h", "hipdnn_plugin_sdk/heuristic_api_version.h",
    "hipdnn_plugin_sdk/BehaviorNote.h", "hipdnn_plugin_sdk/CallbackTypes.h",
    "hipdnn_plugin_sdk/PluginApiDataTypes.h", "hipdnn_plugin_sdk/PluginApi.h",
    "hipdnn_plugin_sdk/EnginePluginApi.h", "hipdnn_plugin_sdk/HeuristicsPluginApi.h",
]
STRIP_MACROS = ["HIPDNN_BACKEND_DEPRECATED_EXPORT", "HIPDNN_BACKEND_EXPORT", "HIPDNN_PLUGIN_NODISCARD",
                "HIPDNN_HEURISTIC_PLUGIN_EXPORT", "HIPDNN_PLUGIN_EXPORT"]

# C enum typedef -> Python class name.  Anonymous enums are named by their member prefix.
CLASS_NAMES = {
    "hipdnnStatus_t": "Status", "hipdnnBackendAttributeName_t": "AttributeName",
    "hipdnnBackendAttributeType_t": "AttributeType", "hipdnnBackendDescriptorType_t": "DescriptorType",
    "hipdnnBackendHeurMode_t": "HeurMode", "hipdnnPluginLoadingMode_ext_t": "PluginLoadingMode",
    "hipdnnPluginUnloadingMode_ext_t": "PluginUnloadingMode", "hipdnnSeverity_t": "Severity",
    "hipdnnConvolutionMode_t": "ConvolutionMode", "hipdnnDataType_t": "DataType",
    "hipdnnMoeGroupedMatmulMode_t": "MoeGroupedMatmulMode", "hipdnnPaddingMode_t": "PaddingMode",
    "hipdnnReduceTensorOp_t": "ReduceTensorOp", "hipdnnResampleMode_t": "ResampleMode",
    "hipdnnOperationType_ext_t": "OperationType", "hipdnnPointwiseMode_t": "PointwiseMode",
    "hipdnnDiagonalAlignment_t": "DiagonalAlignment",
    "hipdnnAttentionImplementation_t": "AttentionImplementation",
    "hipdnnPoolingMode_t": "PoolingMode", "hipdnnReductionMode_t": "ReductionMode",
    "hipdnnLogCallbackMode_t": "LogCallbackMode",
    "hipdnnSerializedContentFlags_t": "SerializedContentFlags",
    "hipdnnAutotuneCacheWriteOutcome_ext_t": "AutotuneCacheWriteOutcome",
    "hipdnnPluginStatus_t": "PluginStatus", "hipdnnPluginType_t": "PluginType",
    "hipdnnEnginePredictionKind_t": "EnginePredictionKind",
}
ANON_PREFIX_NAMES = {"HIPDNN_BEHAVIOR_NOTE_": "BehaviorNote"}


def preprocess(text: str, defined: set[str]) -> tuple[str, dict[str, str]]:
    """Evaluate the few directives our headers use; return C text and integer #defines."""
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    text = re.sub(r"//[^\n]*", "", text)
    text = re.sub(r"\\\n", " ", text)
    out, defines = [], {}
    stack: list[bool] = []  # is each enclosing block active?
    for line in text.splitlines():
        s = line.strip()
        active = all(stack)
        if s.startswith("#"):
            d = s[1:].strip()
            if d.startswith("ifndef "):
                stack.append(d.split()[1] not in defined)
            elif d.startswith("ifdef "):
                name = d.split()[1]
                stack.append(name != "__cplusplus" and name in defined)
            elif d.startswith("if "):
                stack.append(False)  # only platform/compiler conditionals use #if: never taken
            elif d.startswith("elif") or d.startswith("else"):
                stack[-1] = False
            elif d.startswith("endif"):
                stack.pop()
            elif d.startswith("define ") and active:
                parts = d.split(None, 2)
                defined.add(parts[1])
                if len(parts) == 3 and re.fullmatch(r"-?\d+", parts[2].strip()):
                    defines[parts[1]] = parts[2].strip()
            continue
        if active and s:
            out.append(s)
    if stack:
        raise ValueError("unbalanced #if in header")
    c = "\n".join(out)
    for m in STRIP_MACROS:
        c = re.sub(r"\b%s\b\s*" % m, "", c)
    c = re.sub(r'extern\s+"C"\s*\{', "", c)
    return c, defines


def parse_enums(c: str) -> list[tuple[str | None, list[tuple[str, int]]]]:
    enums = []
    for m in re.finditer(r"(typedef\s+)?enum\s*\{(.*?)\}\s*(\w*)\s*;", c, flags=re.S):
        body, name = m.group(2), m.group(3) or None
        members = []
        for item in body.split(","):
            item = item.strip()
            if not item:
                continue
            k, v = (x.strip() for x in item.split("="))
            members.append((k, int(v, 0)))
        enums.append((name, members))
    return enums


def parse_headers():
    on_disk = set()
    for dp, _, fs in os.walk(INCLUDE):
        for f in fs:
            if f.endswith(".h"):
                on_disk.add(os.path.relpath(os.path.join(dp, f), INCLUDE))
    missing = on_disk - set(ORDER)
    if missing:
        raise SystemExit(f"gen_cdef: headers not in ORDER: {sorted(missing)}")
    # Legacy enumerator spellings stay C-only: the Python enums keep one name per value.
    defined: set[str] = {"HIPDNN_CABI_NO_LEGACY_NAMES"}
    per_header, enums, defines = {}, [], {}
    for rel in ORDER:
        c, d = preprocess(open(os.path.join(INCLUDE, rel)).read(), defined)
        cdef_lines = [f"#define {k} {v}" for k, v in d.items()] + ([c] if c.strip() else [])
        per_header[rel] = "\n".join(cdef_lines)
        enums += parse_enums(c)
        defines.update(d)
    return per_header, enums, defines


FUNC_RE = re.compile(r"^(?!typedef)([\w\s\*]+?)\s*\b(\w+)\((.*)\);$", re.S)


def split_header(text: str):
    """Split one preprocessed header into (types/constants, function prototypes)."""
    types, funcs = [], []
    for stmt in re.split(r"(?<=;)\n", text):
        s = stmt.strip()
        if not s:
            continue
        (funcs if FUNC_RE.match(s) and "{" not in s else types).append(s)
    return "\n".join(types), funcs


def render_cdef(per_header) -> str:
    out = ['"""GENERATED by cdef/gen_cdef.py from include/*.h -- do not edit."""', "",
           "# Per public header, in dependency order: its types/constants, and its prototypes.",
           "TYPES = {"]
    funcs = {}
    for rel, text in per_header.items():
        t, f = split_header(text)
        out.append(f"    {rel!r}: {t!r},")
        funcs[rel] = f
    out.append("}")
    out.append("")
    out.append("FUNCTIONS = {")
    for rel, f in funcs.items():
        out.append(f"    {rel!r}: [")
        for proto in f:
            out.append(f"        {proto!r},")
        out.append("    ],")
    out += ["}", "",
            "BACKEND_HEADERS = [h for h in TYPES if not h.startswith('hipdnn_plugin_sdk/')]",
            "PLUGIN_HEADERS = [h for h in TYPES if h.startswith('hipdnn_plugin_sdk/')]", "", "",
            "def types(headers=None):",
            '    """Type, enum and constant declarations of the given headers (default: all)."""',
            "    return '\\n'.join(TYPES[h] for h in (headers or TYPES))", "", "",
            "def functions(headers=None):",
            '    """Function prototypes of the given headers (default: all)."""',
            "    return '\\n'.join(p for h in (headers or FUNCTIONS) for p in FUNCTIONS[h])", "", "",
            "def cdef(headers=None):",
            '    """Everything: types then prototypes (for ABI-mode use of a library)."""',
            "    return types(headers) + '\\n' + functions(headers)", "", "",
            "def function_pointer_typedefs(headers=None, prefix='PFN_'):",
            '    """`typedef R (*PFN_name)(args);` for each prototype (used to call dlsym()ed symbols)."""',
            "    import re",
            "    out = []",
            "    for h in (headers or FUNCTIONS):",
            "        for p in FUNCTIONS[h]:",
            "            m = re.match(r'^(.*?)\\b(\\w+)\\((.*)\\);$', p, re.S)",
            "            ret, name, args = m.group(1).strip(), m.group(2), m.group(3)",
            "            a = args or 'void'",
    "            out.append(f'typedef {ret} (*{prefix}{name})({a});')",
            "    return '\\n'.join(out)", ""]
    return "\n".join(out)


def render_enums(enums, defines) -> str:
    out = ['"""GENERATED by cdef/gen_cdef.py from include/*.h -- do not edit.',
           "",
           "Every C enum family of the public headers as an IntEnum whose members keep their C names.",
           '"""', "from enum import IntEnum", ""]
    seen_classes = set()
    all_names = []
    for cname, members in enums:
        if cname is None:
            pyname = next(v for p, v in ANON_PREFIX_NAMES.items() if members[0][0].startswith(p))
            doc = "anonymous enum (typedef int32_t)"
        else:
            pyname = CLASS_NAMES[cname]
            doc = cname
        if pyname in seen_classes:
            continue
        seen_classes.add(pyname)
        out += ["", f"class {pyname}(IntEnum):", f'    """C: {doc}"""']
        for k, v in members:
            out.append(f"    {k} = {v}")
        all_names.append((pyname, [k for k, _ in members]))
    out += ["", "", "# Module-level aliases so code can write HIPDNN_STATUS_SUCCESS directly."]
    for pyname, names in all_names:
        for k in names:
            out.append(f"{k} = {pyname}.{k}")
    out += ["", "", "# Integer #defines of the headers."]
    for k, v in defines.items():
        out.append(f"{k} = {v}")
    out += ["", "C_TYPEDEF_TO_CLASS = {"]
    for cname, members in enums:
        if cname:
            out.append(f"    {cname!r}: {CLASS_NAMES[cname]},")
    out += ["}", ""]
    return "\n".join(out)


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--check", action="store_true")
    a = ap.parse_args(argv)
    per_header, enums, defines = parse_headers()
    outputs = {OUT_CDEF: render_cdef(per_header), OUT_ENUMS: render_enums(enums, defines)}
    stale = []
    for path, text in outputs.items():
        if a.check:
            try:
                same = open(path).read() == text
            except OSError:
                same = False
            if not same:
                stale.append(os.path.relpath(path, ROOT))
        else:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            open(path, "w").write(text)
    if stale:
        print("out of date (run python cdef/gen_cdef.py):", ", ".join(stale))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
