"""hipdnnEnginePluginCreate / Destroy / SetStream."""
from __future__ import annotations

from ..core import Fail, check, fmt_call


@check("conform.lifecycle.many_handles")
def many_handles(s):
    """Many live handles are distinct and can be destroyed in LIFO, FIFO and interleaved order."""
    n = s.scale.handles
    run = s.finished(s.child("lifecycle", None, n, s.scale.repeat))
    names = {0: "LIFO", 1: "FIFO", 2: "interleaved"}
    for r in run.of("many"):
        if r["failures"] or r["duplicates"]:
            raise Fail(f"{n} handles, destroy order {names[r['order']]}: {r['failures']} failing "
                       f"hipdnnEnginePluginCreate/Destroy calls, {r['duplicates']} duplicate handles")
    return f"{n} handles x 3 destroy orders"


@check("conform.lifecycle.repeated_create_destroy")
def repeated_create_destroy(s):
    """hipdnnEnginePluginCreate/Destroy succeed when repeated many times."""
    run = s.finished(s.child("lifecycle", None, s.scale.handles, s.scale.repeat))
    r = run.one("repeat")
    if r["failures"]:
        raise Fail(f"{r['failures']} of {r['n']} hipdnnEnginePluginCreate(&h)/Destroy(h) cycles failed")
    return f"{r['n']} cycles"


@check("conform.lifecycle.set_stream")
def set_stream(s):
    """hipdnnEnginePluginSetStream(handle, NULL) (the default stream) succeeds."""
    run = s.finished(s.child("set_stream"))
    c = run.one("call", "set_null_stream")
    if c["st"] != 0:
        raise Fail(fmt_call(c))
    return "ok"
