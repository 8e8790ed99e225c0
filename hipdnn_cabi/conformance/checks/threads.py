"""Concurrent calls: several threads on one handle and on separate handles."""
from __future__ import annotations

from ..core import Fail, check, fmt_call


def _threads(s, separate):
    g, eid, case = s.first_case()
    sc = s.scale
    run = s.finished(s.child("threads", case, sc.threads, sc.thread_iters, int(separate),
                             timeout=sc.long_timeout))
    for tag in ("create_ctx", "execute_1"):
        c = run.one("call", tag)
        if c["st"]:
            raise Fail(fmt_call(c))
    r = run.one("threads")
    if r["failures"] or r["mismatches"]:
        raise Fail(f"{r['threads']} threads x {r['iters']} iterations ({'separate handles' if separate else 'one handle'},"
                   f" {g.name}): {r['failures']} failing calls, {r['mismatches']} wrong outputs; last: {r['msg']}")
    return f"{r['threads']} threads x {r['iters']} iterations"


@check("conform.threads.one_handle", slow=True)
def one_handle(s):
    """Threads sharing one handle: applicable/details/context/execute all succeed with the right outputs."""
    return _threads(s, False)


@check("conform.threads.separate_handles", slow=True)
def separate_handles(s):
    """Threads each with their own handle: everything succeeds with the right outputs."""
    return _threads(s, True)
