"""The public headers compile with plain gcc/g++ whether or not HIP's own
headers are on the include path, and code written against older hipDNN enumerator spellings still
compiles (aliases with the same values).

A HIP header is simulated by a directory holding a `hip/hip_runtime_api.h` that refuses to compile
without a platform macro, exactly like Debian's libamdhip64-dev; when the real one is installed
(/usr/include/hip) it is tested too.  Every compile is C11 and C++17 with -Wall -Wextra -Werror."""
import json
import os
import subprocess
import sys

import pytest

from cabi_testlib import INCLUDE, ROOT

sys.path.insert(0, os.path.join(ROOT, "tools"))
from legacy_enum_names import legacy_aliases  # noqa: E402

FACTS = os.path.join(ROOT, "tools", "facts", "hipdnn_abi.json")

FAKE_HIP = """\
#ifndef FAKE_HIP_RUNTIME_API_H
#define FAKE_HIP_RUNTIME_API_H
#if (defined(__HIP_PLATFORM_AMD__) + defined(__HIP_PLATFORM_NVIDIA__)) != 1
#error ("Must define exactly one of __HIP_PLATFORM_AMD__ or __HIP_PLATFORM_NVIDIA__");
#endif
typedef struct ihipStream_t* hipStream_t;
#define FAKE_HIP_INCLUDED 1
#endif
"""

USER = """\
#include "hipdnn_backend.h"
#include "hipdnn_plugin_sdk/EnginePluginApi.h"
int main(void) { hipStream_t s = 0; (void)s; return 0; }
"""


def _compile(tmp_path, src_text, *, cxx, extra=(), env=None, name="t"):
    src = tmp_path / (name + (".cpp" if cxx else ".c"))
    src.write_text(src_text)
    cc = ["g++", "-std=c++17"] if cxx else ["gcc", "-std=c11"]
    cmd = cc + ["-Wall", "-Wextra", "-Werror", "-I", INCLUDE, *extra, "-c", str(src),
                "-o", str(tmp_path / (name + ".o"))]
    e = dict(os.environ)
    for k in ("C_INCLUDE_PATH", "CPLUS_INCLUDE_PATH", "CPATH"):
        e.pop(k, None)
    e.update(env or {})
    return subprocess.run(cmd, capture_output=True, text=True, env=e, timeout=120)


@pytest.fixture
def fake_hip(tmp_path):
    d = tmp_path / "fakehip"
    (d / "hip").mkdir(parents=True)
    (d / "hip" / "hip_runtime_api.h").write_text(FAKE_HIP)
    return str(d)


@pytest.mark.parametrize("cxx", [False, True], ids=["c11", "cxx17"])
@pytest.mark.parametrize("how", ["isystem", "env"])
def test_hip_header_on_default_path_without_platform_macro(tmp_path, fake_hip, cxx, how):
    """A HIP header that needs a platform macro is never included by plain gcc/g++."""
    if how == "isystem":
        r = _compile(tmp_path, USER, cxx=cxx, extra=["-isystem", fake_hip])
    else:  # as if installed on the default include path
        r = _compile(tmp_path, USER, cxx=cxx,
                     env={"CPLUS_INCLUDE_PATH" if cxx else "C_INCLUDE_PATH": fake_hip})
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize("cxx", [False, True], ids=["c11", "cxx17"])
def test_hip_platform_macro_uses_the_runtime_header(tmp_path, fake_hip, cxx):
    src = USER.replace("int main", "#ifndef FAKE_HIP_INCLUDED\n#error not included\n#endif\nint main")
    r = _compile(tmp_path, src, cxx=cxx, extra=["-isystem", fake_hip, "-D__HIP_PLATFORM_AMD__"])
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize("cxx", [False, True], ids=["c11", "cxx17"])
def test_no_hip_headers_anywhere(tmp_path, cxx):
    r = _compile(tmp_path, USER, cxx=cxx, extra=["-D__HIP_PLATFORM_AMD__", "-DHIPDNN_CABI_NO_HIP_HEADERS"])
    assert r.returncode == 0, r.stderr
    r = _compile(tmp_path, USER, cxx=cxx)
    assert r.returncode == 0, r.stderr


@pytest.mark.skipif(not os.path.exists("/usr/include/hip/hip_runtime_api.h"),
                    reason="HIP headers not installed on this machine")
@pytest.mark.parametrize("cxx", [False, True], ids=["c11", "cxx17"])
def test_installed_hip_headers(tmp_path, cxx):
    r = _compile(tmp_path, USER, cxx=cxx)
    assert r.returncode == 0, r.stderr


def _alias_program():
    facts = json.load(open(FACTS))
    lines = ['#include "hipdnn_backend.h"', "#include <stdio.h>"]
    n = 0
    for enum, table in legacy_aliases(facts).items():
        vals = facts["enums"][enum]["values"]
        for old, new in table.items():
            n += 1
            lines.append(f'_Static_assert((long long)({old}) == {vals[new]}LL, "{old}");')
    lines.append("static int use(hipdnnBackendDescriptorType_t t, hipdnnConvolutionMode_t m) "
                 "{ return (int)t + (int)m; }")
    lines.append("int main(void) { return use(HIPDNN_INVALID_TYPE, "
                 "HIPDNN_CONVOLUTION_MODE_CROSS_CORRELATION) == 1 ? 0 : 1; }")
    return "\n".join(lines) + "\n", n


@pytest.mark.parametrize("cxx", [False, True], ids=["c11", "cxx17"])
def test_legacy_enumerator_spellings_compile(tmp_path, cxx):
    text, n = _alias_program()
    assert n >= 4
    if cxx:
        text = text.replace("_Static_assert", "static_assert")
    r = _compile(tmp_path, text, cxx=cxx, extra=["-Wpedantic"])
    assert r.returncode == 0, r.stderr


def test_issue_named_aliases_present():
    facts = json.load(open(FACTS))
    a = legacy_aliases(facts)
    assert a["hipdnnBackendAttributeName_t"]["HIPDNN_ATTR_ENGINE_SM_COUNT_TARGET"] == \
        "HIPDNN_ATTR_ENGINE_CU_COUNT_TARGET_EXT"
    assert a["hipdnnBackendAttributeName_t"]["HIPDNN_ATTR_TENSOR_IS_RUNTIME_PASS_BY_VALUE"] == \
        "HIPDNN_ATTR_TENSOR_IS_RUNTIME_PASS_BY_VALUE_EXT"
    assert a["hipdnnBackendDescriptorType_t"]["HIPDNN_INVALID_TYPE"] == "HIPDNN_INVALID_TYPE_EXT"
    assert a["hipdnnConvolutionMode_t"]["HIPDNN_CONVOLUTION_MODE_CROSS_CORRELATION"] == \
        "HIPDNN_CROSS_CORRELATION"


def test_legacy_names_can_be_hidden(tmp_path):
    src = '#include "hipdnn_backend.h"\nint x = HIPDNN_INVALID_TYPE;\n'
    r = _compile(tmp_path, src, cxx=False, extra=["-DHIPDNN_CABI_NO_LEGACY_NAMES"])
    assert r.returncode != 0 and "HIPDNN_INVALID_TYPE" in r.stderr
