"""hipdnnPluginGetLastErrorString: per thread, set on every failure (spec §3.9)."""
from __future__ import annotations

from ..core import Fail, check


def _case(s):
    _, _, case = s.first_case(required=False)
    return case


@check("conform.last_error.set_on_failure")
def set_on_failure(s):
    """After every failing call (each on a fresh thread) the thread's last error is a non-empty string."""
    run = s.finished(s.child("lasterr_set", _case(s)))
    bad, seen = [], 0
    for r in run.of("failing"):
        if r["st"] == 0:
            continue  # not a failure here (conform.null_args judges statuses)
        seen += 1
        if not r["after"]:
            bad.append(f"{r['fn']}({r['args']}) -> status {r['st']}, then "
                       f"hipdnnPluginGetLastErrorString -> {r['after']!r}")
    if bad:
        raise Fail("last error not set after a failure: " + "; ".join(bad))
    return f"set after {seen} failing calls"


@check("conform.last_error.per_thread")
def per_thread(s):
    """A failure on thread A is not visible on thread B, and B's failure does not overwrite A's message."""
    run = s.finished(s.child("lasterr_threads", _case(s)))
    a, b = run.one("thread_a"), run.one("thread_b")
    again = run.one("thread_a_again")["err"]
    if a["st"] == 0 or not a["after"]:
        return "inconclusive: thread A's failure left no message"
    if b["before"] and b["before"] == a["after"]:
        raise Fail(f"thread B sees thread A's last error {a['after']!r} before failing itself "
                   f"(A: {a['fn']}({a['args']}) -> status {a['st']}): the last error is not per-thread")
    if b["st"] != 0 and b["after"] and b["after"] != a["after"] and again != a["after"]:
        raise Fail(f"thread A's last error changed from {a['after']!r} to {again!r} after thread B's "
                   f"failing {b['fn']}({b['args']}): the last error is not per-thread")
    return "per-thread"
