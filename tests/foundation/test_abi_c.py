"""A C program generated from the pinned ABI facts checks every enum value, struct layout and
function signature of our headers; every header also compiles alone as C11 and C++17."""
import json
import os
import subprocess

import pytest

from cabi_testlib import INCLUDE, ROOT

FACTS = os.path.join(ROOT, "tools", "facts", "hipdnn_abi.json")
OPTIONAL_ENUMS = set()  # we ship the legacy families too, so every enum is checked


def _headers():
    out = []
    for dp, _, fs in os.walk(INCLUDE):
        for f in sorted(fs):
            if f.endswith(".h"):
                out.append(os.path.relpath(os.path.join(dp, f), INCLUDE))
    return sorted(out)


def _abi_program(facts) -> str:
    lines = ["#include <stddef.h>", "#include <stdint.h>", "#include <stdbool.h>"]
    lines += [f'#include "{h}"' for h in _headers()]
    n = 0
    for ename, e in facts["enums"].items():
        for name, value in e["values"].items():
            lines.append(f"_Static_assert((long long)({name}) == {value}LL, \"{ename}::{name}\");")
            n += 1
        lines.append(f"_Static_assert(sizeof({ename}) == 4, \"sizeof {ename}\");")
    for sname, s in facts["struct_details"].items():
        lay = s["lp64_layout"]
        lines.append(f"_Static_assert(sizeof({sname}) == {lay['sizeof']}, \"sizeof {sname}\");")
        for field, off in lay["offsets"].items():
            lines.append(f"_Static_assert(offsetof({sname}, {field}) == {off}, \"{sname}.{field}\");")
    for fname, f in facts["functions"].items():
        params = ", ".join(p["type"] for p in f["params"]) or "void"
        # Redeclaring with the pinned signature is a hard error if ours differs.
        lines.append(f"{f['returns']} {fname}({params});")
        lines.append(f"static __typeof__({fname}) *const chk_{fname} = 0;")
    lines.append("int main(void) { return 0; }")
    return "\n".join(lines) + "\n"


def test_abi_program_compiles(tmp_path):
    facts = json.load(open(FACTS))
    src = tmp_path / "abi_check.c"
    src.write_text(_abi_program(facts))
    r = subprocess.run(["gcc", "-std=c11", "-Wall", "-Wextra", "-Werror", "-Wno-unused-const-variable", "-Wno-deprecated-declarations",
                        "-I", INCLUDE, str(src), "-o", str(tmp_path / "abi_check")],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-4000:]
    assert subprocess.run([str(tmp_path / "abi_check")]).returncode == 0


@pytest.mark.parametrize("lang", ["c11", "c++17"])
def test_every_header_compiles_alone(tmp_path, lang):
    for h in _headers():
        ext = "c" if lang == "c11" else "cpp"
        src = tmp_path / f"one.{ext}"
        src.write_text(f'#include "{h}"\nint main(void) {{ return 0; }}\n' if lang == "c11"
                       else f'#include "{h}"\nint main() {{ return 0; }}\n')
        cc = ["gcc", "-std=c11", "-pedantic"] if lang == "c11" else ["g++", "-std=c++17", "-pedantic"]
        r = subprocess.run(cc + ["-Wall", "-Wextra", "-Werror", "-I", INCLUDE, str(src), "-o",
                                 str(tmp_path / "one")], capture_output=True, text=True)
        assert r.returncode == 0, f"{h} ({lang}):\n{r.stderr}"


def test_all_headers_together_cxx(tmp_path):
    src = tmp_path / "all.cpp"
    src.write_text("".join(f'#include "{h}"\n' for h in _headers()) +
                   "static_assert(HIPDNN_DEFAULT_PLUGIN_LOADING_MODE == HIPDNN_PLUGIN_LOADING_ADDITIVE, \"\");\n"
                   "int main() { return 0; }\n")
    r = subprocess.run(["g++", "-std=c++17", "-Wall", "-Wextra", "-Werror", "-I", INCLUDE, str(src),
                        "-o", str(tmp_path / "all")], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_library_exports_every_backend_function(libpath):
    facts = json.load(open(FACTS))
    want = {n for n, f in facts["functions"].items() if f["kind"] == "backend_export"}
    out = subprocess.run(["nm", "-D", "--defined-only", libpath], capture_output=True, text=True).stdout
    exported = {line.split()[-1] for line in out.splitlines() if " T " in line}
    assert want <= exported, sorted(want - exported)
    # Internal Python entry points and helpers stay private.
    assert not [s for s in exported if s.startswith(("hpy_", "tramp_", "hipdnn_cabi_"))]


def test_every_extern_has_a_python_body():
    from hipdnn_cabi.backend import entry
    from hipdnn_cabi.backend._externs import EXTERNS
    assert set(EXTERNS) == set(entry._BODIES)
