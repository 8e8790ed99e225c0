"""Backend-API checks (``hipdnn-cabi conform --backend LIB``): C call sequences, two-call rules and
misuse statuses of the spec (shared/spec/backend-behavior.md §1.2-1.4, §4), run by
``backend_driver.c`` in child processes against any hipDNN backend library."""
from __future__ import annotations

import os

from ..core import Fail, build_driver, check, fmt_call, run_child

SUCCESS, NOT_INITIALIZED, BAD_PARAM, NULLPTR, NOT_SUPPORTED = 0, 1, 2, 3, 8


def brun(s, mode):
    def go():
        drv = s.memo("backend_driver", lambda: build_driver("backend_driver.c", s.workdir))
        empty = os.path.join(s.workdir, "no_plugins")
        os.makedirs(empty, exist_ok=True)
        env = dict(os.environ, HIPDNN_PLUGIN_DIR=empty)  # no plugins: checks only the backend itself
        return run_child([drv, mode, s.plugin], s.scale.timeout, env=env)
    return s.finished(s.memo(("backend", mode), go))


def expect(run, table: dict):
    bad = []
    for tag, want in table.items():
        c = run.one("call", tag)
        if c is None:
            bad.append(f"{tag}: not reached")
        elif c["st"] not in (want if isinstance(want, tuple) else (want,)):
            bad.append(f"{fmt_call(c)}; expected status {want}")
    if bad:
        raise Fail("; ".join(bad))
    return f"{len(table)} call(s) as specified"


@check("conform.backend.handle_create_destroy", backend=True)
def handle_create_destroy(s):
    """hipdnnCreate/hipdnnDestroy succeed (one handle, then 16 live handles)."""
    run = brun(s, "handle")
    msg = expect(run, {"create": SUCCESS, "destroy": SUCCESS})
    if run.one("handle")["null"]:
        raise Fail("hipdnnCreate(&handle) -> SUCCESS with a NULL handle")
    if run.one("many")["failures"]:
        raise Fail(f"{run.one('many')['failures']} failures creating/destroying 16 handles")
    return msg


@check("conform.backend.handle_null", backend=True)
def handle_null(s):
    """hipdnnCreate(NULL) and hipdnnDestroy(NULL) -> BAD_PARAM_NULL_POINTER."""
    return expect(brun(s, "handle"), {"create_null": NULLPTR, "destroy_null": NULLPTR})


@check("conform.backend.descriptor_unknown_type", backend=True)
def descriptor_unknown_type(s):
    """CreateDescriptor of an unknown or non-creatable type -> NOT_SUPPORTED."""
    return expect(brun(s, "descriptor"), {"unknown_type": NOT_SUPPORTED, "not_creatable": NOT_SUPPORTED})


@check("conform.backend.descriptor_null", backend=True)
def descriptor_null(s):
    """CreateDescriptor(type, NULL), DestroyDescriptor(NULL), Finalize(NULL) -> BAD_PARAM_NULL_POINTER."""
    return expect(brun(s, "descriptor"), {"create_null": NULLPTR, "destroy_null": NULLPTR, "finalize_null": NULLPTR})


@check("conform.backend.tensor_finalize_rules", backend=True)
def tensor_finalize_rules(s):
    """Tensor finalize: nothing set -> BAD_PARAM; dims/strides length mismatch -> BAD_PARAM; complete -> SUCCESS."""
    return expect(brun(s, "tensor"), {"finalize_empty": BAD_PARAM, "finalize_mismatch": BAD_PARAM,
                                      "finalize": SUCCESS})


@check("conform.backend.tensor_set_misuse", backend=True)
def tensor_set_misuse(s):
    """SetAttribute misuse: wrong type BAD_PARAM, NULL array NULL_POINTER, bad counts BAD_PARAM, unknown name NOT_SUPPORTED, after finalize NOT_INITIALIZED."""
    return expect(brun(s, "tensor"), {"set_wrong_type": BAD_PARAM, "set_null_array": NULLPTR,
                                      "set_scalar_count2": BAD_PARAM, "set_vector_count0": BAD_PARAM,
                                      "set_unknown_attr": NOT_SUPPORTED, "set_after_finalize": NOT_INITIALIZED})


@check("conform.backend.tensor_get_two_call", backend=True)
def tensor_get_two_call(s):
    """GetAttribute: before finalize NOT_INITIALIZED; size query gives the length; fetch truncates silently; wrong type BAD_PARAM."""
    run = brun(s, "tensor")
    msg = expect(run, {"get_before_finalize": NOT_INITIALIZED, "get_size_query": SUCCESS,
                       "get_size_query_null_count": NULLPTR, "get_truncated": SUCCESS, "get_full": SUCCESS,
                       "get_wrong_type": BAD_PARAM})
    sq, tr, full = run.one("size_query"), run.one("truncated"), run.one("full")
    if sq["n"] != 2:
        raise Fail(f"size query of TENSOR_DIMENSIONS {{2,3}} -> elementCount {sq['n']}, expected 2")
    if tr["n"] != 1 or tr["v0"] != 2 or tr["v1"] != -5:
        raise Fail(f"GetAttribute(DIMENSIONS, requested 1) -> count {tr['n']}, values {tr['v0']},{tr['v1']}: "
                   "expected 1 element copied (silent truncation)")
    if full["n"] != 2 or (full["v0"], full["v1"]) != (2, 3):
        raise Fail(f"GetAttribute(DIMENSIONS, requested 4) -> count {full['n']}, values {full['v0']},{full['v1']}")
    return msg


@check("conform.backend.last_error_get_peek", backend=True)
def last_error_get_peek(s):
    """Failures set the last error; success keeps it; Peek does not clear it; Get returns then clears it; NULL buffers are safe."""
    run = brun(s, "last_error")
    r = run.one("last_error")
    if not r["full"]:
        raise Fail(f"{fmt_call(run.one('call', 'fail'))} left an empty last error")
    if r["after_success"] != r["full"]:
        raise Fail(f"a successful call changed the last error from {r['full']!r} to {r['after_success']!r}")
    if r["get"] != r["full"]:
        raise Fail(f"hipdnnGetLastErrorString -> {r['get']!r}, Peek gave {r['full']!r}")
    if r["after_get"]:
        raise Fail(f"hipdnnGetLastErrorString did not clear the slot (Peek then gave {r['after_get']!r})")
    if not run.one("null_buf_ok"):
        raise Fail("hipdnnGetLastErrorString(NULL, 16) did not return")
    return "ok"


@check("conform.backend.last_error_truncation", backend=True)
def last_error_truncation(s):
    """A buffer of 8 bytes receives the first 7 characters and a NUL."""
    r = brun(s, "last_error").one("last_error")
    if not r["small_nul"] or r["small"] != r["full"][:7]:
        raise Fail(f"hipdnnPeekLastErrorString_ext(buf, 8) -> {r['small']!r} (NUL {bool(r['small_nul'])}); "
                   f"expected {r['full'][:7]!r}")
    return repr(r["small"])


@check("conform.backend.error_and_version_strings", backend=True)
def error_and_version_strings(s):
    """hipdnnGetErrorString names statuses with static strings (unknown -> HIPDNN_STATUS_UNKNOWN); hipdnnVersionString_ext is MAJOR.MINOR.PATCH.TWEAK."""
    run = brun(s, "strings")
    want = {0: "HIPDNN_STATUS_SUCCESS", 3: "HIPDNN_STATUS_BAD_PARAM_NULL_POINTER", 8: "HIPDNN_STATUS_NOT_SUPPORTED",
            9999: "HIPDNN_STATUS_UNKNOWN"}
    for r in run.of("error_string"):
        if r["value"] != want[r["code"]] or not r["same_ptr"]:
            raise Fail(f"hipdnnGetErrorString({r['code']}) -> {r['value']!r} (static: {bool(r['same_ptr'])}), "
                       f"expected {want[r['code']]!r}")
    v = run.one("version")["value"]
    parts = (v or "").split(".")
    if len(parts) != 4 or not all(p.isdigit() for p in parts):
        raise Fail(f"hipdnnVersionString_ext() -> {v!r}: not MAJOR.MINOR.PATCH.TWEAK")
    return v
