"""Generated files are committed and must never drift from their sources."""
import filecmp
import os
import subprocess
import sys

import pytest

from cabi_testlib import ROOT, SHARED


def _run(*args):
    return subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True)


def test_headers_match_abi_facts():
    r = _run("tools/gen_headers.py", "--check")
    assert r.returncode == 0, r.stdout + r.stderr


def test_cdef_and_enums_match_headers():
    r = _run("cdef/gen_cdef.py", "--check")
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.mark.parametrize("name", ["hipdnn_abi.json", "hipdnn_schemas.json"])
def test_vendored_facts_match_shared(name):
    shared = os.path.join(SHARED, "abi", name)
    if not os.path.exists(shared):
        pytest.skip("../shared/abi not present (clean clone)")
    assert filecmp.cmp(shared, os.path.join(ROOT, "tools", "facts", name), shallow=False)


def test_shared_abi_check_passes():
    checker = os.path.join(SHARED, "checks", "abi_check.py")
    if not os.path.exists(checker):
        pytest.skip("../shared/checks not present (clean clone)")
    r = subprocess.run([sys.executable, checker, ROOT], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout
    assert " 0 missing, 0 wrong" in r.stdout


def test_python_enums_are_generated_not_retyped():
    """Enum numbers come only from the generated module (no literal retyping in the package)."""
    from hipdnn_cabi._generated import enums
    assert enums.Status.HIPDNN_STATUS_PLUGIN_ERROR == 14
    assert enums.C_TYPEDEF_TO_CLASS["hipdnnDataType_t"] is enums.DataType
    assert enums.HIPDNN_ATTR_TENSOR_CONSTANT_VALUE == enums.HIPDNN_ATTR_TENSOR_VALUE_EXT
