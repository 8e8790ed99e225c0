"""The library loaded into a running Python process (cffi ABI mode) reuses that interpreter and
gives the same answers as a C caller, from several threads at once."""
import os
import subprocess
import sys
import textwrap

from cabi_testlib import ROOT, run

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "c")

TRANSCRIPT_C = r"""
#include <stdio.h>
#include "hipdnn_backend.h"
int main(void) {
    hipdnnBackendDescriptor_t t = NULL;
    int64_t uid = 3, dims[2] = {4, 5}, strides[2] = {5, 1}, n = -1, out[2] = {0, 0};
    hipdnnDataType_t dt = HIPDNN_DATA_BFLOAT16;
    printf("%d\n", hipdnnBackendCreateDescriptor(HIPDNN_BACKEND_TENSOR_DESCRIPTOR, &t));
    printf("%d\n", hipdnnBackendGetAttribute(t, HIPDNN_ATTR_TENSOR_UNIQUE_ID, HIPDNN_TYPE_INT64, 1, &n, out));
    printf("%d\n", hipdnnBackendSetAttribute(t, HIPDNN_ATTR_TENSOR_UNIQUE_ID, HIPDNN_TYPE_FLOAT, 1, &uid));
    printf("%d\n", hipdnnBackendSetAttribute(t, HIPDNN_ATTR_TENSOR_UNIQUE_ID, HIPDNN_TYPE_INT64, 1, &uid));
    printf("%d\n", hipdnnBackendSetAttribute(t, HIPDNN_ATTR_TENSOR_DATA_TYPE, HIPDNN_TYPE_DATA_TYPE, 1, &dt));
    printf("%d\n", hipdnnBackendSetAttribute(t, HIPDNN_ATTR_TENSOR_DIMENSIONS, HIPDNN_TYPE_INT64, 2, dims));
    printf("%d\n", hipdnnBackendFinalize(t));
    printf("%d\n", hipdnnBackendSetAttribute(t, HIPDNN_ATTR_TENSOR_STRIDES, HIPDNN_TYPE_INT64, 2, strides));
    printf("%d\n", hipdnnBackendFinalize(t));
    printf("%d\n", hipdnnBackendGetAttribute(t, HIPDNN_ATTR_TENSOR_DIMENSIONS, HIPDNN_TYPE_INT64, 0, &n, NULL));
    printf("n=%lld\n", (long long)n);
    printf("%d\n", hipdnnBackendGetAttribute(t, HIPDNN_ATTR_TENSOR_DIMENSIONS, HIPDNN_TYPE_INT64, 1, &n, out));
    printf("n=%lld v=%lld\n", (long long)n, (long long)out[0]);
    printf("%d\n", hipdnnBackendSetAttribute(t, HIPDNN_ATTR_TENSOR_UNIQUE_ID, HIPDNN_TYPE_INT64, 1, &uid));
    printf("%d\n", hipdnnBackendDestroyDescriptor(t));
    printf("%d\n", hipdnnBackendDestroyDescriptor(t));
    return 0;
}
"""


def python_transcript(ffi, lib):
    lines = []
    p = ffi.new("hipdnnBackendDescriptor_t*")
    n = ffi.new("int64_t*", -1)
    out = ffi.new("int64_t[2]")
    uid = ffi.new("int64_t*", 3)
    dims = ffi.new("int64_t[2]", [4, 5])
    strides = ffi.new("int64_t[2]", [5, 1])
    dt = ffi.new("hipdnnDataType_t*", lib.HIPDNN_DATA_BFLOAT16)
    lines.append(lib.hipdnnBackendCreateDescriptor(lib.HIPDNN_BACKEND_TENSOR_DESCRIPTOR, p))
    t = p[0]
    lines.append(lib.hipdnnBackendGetAttribute(t, lib.HIPDNN_ATTR_TENSOR_UNIQUE_ID, lib.HIPDNN_TYPE_INT64, 1, n, out))
    lines.append(lib.hipdnnBackendSetAttribute(t, lib.HIPDNN_ATTR_TENSOR_UNIQUE_ID, lib.HIPDNN_TYPE_FLOAT, 1, uid))
    lines.append(lib.hipdnnBackendSetAttribute(t, lib.HIPDNN_ATTR_TENSOR_UNIQUE_ID, lib.HIPDNN_TYPE_INT64, 1, uid))
    lines.append(lib.hipdnnBackendSetAttribute(t, lib.HIPDNN_ATTR_TENSOR_DATA_TYPE, lib.HIPDNN_TYPE_DATA_TYPE, 1, dt))
    lines.append(lib.hipdnnBackendSetAttribute(t, lib.HIPDNN_ATTR_TENSOR_DIMENSIONS, lib.HIPDNN_TYPE_INT64, 2, dims))
    lines.append(lib.hipdnnBackendFinalize(t))
    lines.append(lib.hipdnnBackendSetAttribute(t, lib.HIPDNN_ATTR_TENSOR_STRIDES, lib.HIPDNN_TYPE_INT64, 2, strides))
    lines.append(lib.hipdnnBackendFinalize(t))
    lines.append(lib.hipdnnBackendGetAttribute(t, lib.HIPDNN_ATTR_TENSOR_DIMENSIONS, lib.HIPDNN_TYPE_INT64, 0, n, ffi.NULL))
    lines.append(f"n={n[0]}")
    lines.append(lib.hipdnnBackendGetAttribute(t, lib.HIPDNN_ATTR_TENSOR_DIMENSIONS, lib.HIPDNN_TYPE_INT64, 1, n, out))
    lines.append(f"n={n[0]} v={out[0]}")
    lines.append(lib.hipdnnBackendSetAttribute(t, lib.HIPDNN_ATTR_TENSOR_UNIQUE_ID, lib.HIPDNN_TYPE_INT64, 1, uid))
    lines.append(lib.hipdnnBackendDestroyDescriptor(t))
    lines.append(lib.hipdnnBackendDestroyDescriptor(t))
    return [str(x) for x in lines]


def test_python_and_c_give_the_same_transcript(capi, c_build, tmp_path):
    src = tmp_path / "transcript.c"
    src.write_text(TRANSCRIPT_C)
    c_lines = run([c_build(str(src), "transcript")]).stdout.split()
    ffi, lib = capi
    py_lines = " ".join(python_transcript(ffi, lib)).split()
    assert py_lines == c_lines


def test_python_threads_same_results(capi):
    import threading
    ffi, lib = capi
    results, errors = [], []

    def work():
        try:
            for _ in range(50):
                results.append(tuple(python_transcript(ffi, lib)))
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    ts = [threading.Thread(target=work) for _ in range(6)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors
    assert len(set(results)) == 1 and len(results) == 300


def test_embedded_code_runs_in_the_host_interpreter(libpath):
    """Loaded into a Python process, the backend uses that interpreter (shared sys.modules)."""
    code = textwrap.dedent(f"""
        import sys
        from hipdnn_cabi import capi
        ffi, lib = capi.load({libpath!r})
        h = ffi.new("hipdnnHandle_t*")
        assert lib.hipdnnCreate(h) == 0
        assert "_hipdnn_cabi_backend" in sys.modules
        assert "hipdnn_cabi.backend.entry" in sys.modules
        assert lib.hipdnnDestroy(h[0]) == 0
        print("shared-interpreter-ok")
    """)
    r = run([sys.executable, "-c", code])
    assert "shared-interpreter-ok" in r.stdout


def test_exception_in_a_body_is_internal_error_not_success(libpath):
    """Any Python exception escaping a body becomes INTERNAL_ERROR with its text as last error."""
    code = textwrap.dedent(f"""
        from hipdnn_cabi import capi
        ffi, lib = capi.load({libpath!r})
        import hipdnn_cabi.backend.descriptors.tensor as t
        def boom(self):
            raise ZeroDivisionError("boom from a body")
        t.TensorDescriptor._finalize = boom
        p = ffi.new("hipdnnBackendDescriptor_t*")
        assert lib.hipdnnBackendCreateDescriptor(lib.HIPDNN_BACKEND_TENSOR_DESCRIPTOR, p) == 0
        st = lib.hipdnnBackendFinalize(p[0])
        print(st, capi.last_error(lib, ffi))
    """)
    r = run([sys.executable, "-c", code])
    assert r.stdout.startswith("9 ZeroDivisionError: boom from a body"), r.stdout
    assert "Traceback" not in r.stderr
